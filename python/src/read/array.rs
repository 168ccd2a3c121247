//! The reader of a cai.Array given as input: its struct borrowed (its own stream and descr
//! included, no copy of the producer's description), counted as an export of it.

use cai::binding::dlpack::device_is_cuda_or_allowed_host;
use pyo3::prelude::*;

use crate::array::object::ArrayObject;
use crate::array::Array;
use crate::described::Read;
use crate::errors::CaiResult;
use crate::import::{borrowed_copy, import_then_copy, owned, Hold, Outcome, Request};
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

/// A cai.Array, read from its own struct: borrowed, its descr and mask point into memory the
/// cai.Array owns.
pub fn import_by_array(
    obj: &Bound<'_, PyAny>,
    array: &ArrayObject<'_>,
    request: &Request,
    hold: &mut Hold<'_>,
) -> CaiResult<Outcome> {
    match hold {
        Hold::Own(to_own) | Hold::OwnInto(_, to_own) => {
            let read = read_array(array)?;
            if let Some(device) = read.device {
                device_is_cuda_or_allowed_host(device, request.host)?;
            }
            owned(obj, read, request, to_own)
        }
        Hold::Borrow(out) | Hold::BorrowOrOwn(out, _) => {
            let source = array.get();
            source.live(obj.py())?;
            let device = source.dlpack_device();
            if let Some(device) = device {
                device_is_cuda_or_allowed_host(device, request.host)?;
            }
            let validated = source.imported().map(|imported| imported.validated);
            import_then_copy(
                obj.py(),
                &borrowed_copy(source.array()),
                validated,
                *request.options,
                device,
                out,
            )?;
            Ok(Outcome::Written)
        }
    }
}
