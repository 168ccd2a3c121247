//! The reader of a cai.Array given as input: its struct borrowed (its own stream and descr
//! included, no copy of the producer's description), counted as an export of it.

use pyo3::prelude::*;

use crate::array::Array;
use crate::array_object::ArrayObject;
use crate::described::Read;
use crate::pool::Pooled;

/// `source`'s struct as a description whose release ends the export and lets go of `source`,
/// which is also its owner (what `cai.Array.owner` names), with what `source`'s import
/// validated of that struct, for the import to reuse (as the view of a cai.Array does).
pub fn read_array(source: &ArrayObject<'_>) -> PyResult<Read> {
    let mut view = Pooled::cleared();
    Array::export_into(source, &mut view)?;
    let owner = Some(source.as_any().clone().unbind());
    let mut read = Read::borrowing(view, source.get().dlpack_device(), owner, None);
    read.validated = source.get().imported().map(|imported| imported.validated);
    Ok(read)
}
