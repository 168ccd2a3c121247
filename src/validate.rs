//! The CAI spec's rules for a descriptor, one function per rule, named for the rule. Each
//! returns an error that names the field and the value at fault.
//!
//! Rules about the dict's Python types (bools are not ints, `stream: 0`, lists for tuples)
//! cannot be broken by a `CaiArray`; they are `dict`'s, applied before a dict becomes one.

use crate::abi::{
    CaiArray, CaiDtype, CaiLayout, CAI_ABI_VERSION, CAI_LAYOUT_RESERVED_WORDS, CAI_MAX_MASK_DEPTH,
    CAI_MAX_NDIM, CAI_STREAM_NONE,
};
use crate::device::memory::{
    extent_is_addressable, extent_stays_in_address_space, placement_is_valid, Extent,
};
use crate::dtype::{parse_typestr_buffer, validate_descr};
use crate::element_type::dl_dtype_agrees_with_typestr;
use crate::layout::{
    byte_extent, c_strides, element_count, is_c_contiguous, is_f_contiguous, nbytes, strides_itemsize_aligned,
};
use crate::status::{fail, Error, Result, Status};

/// What validation learned about an array, reused by layout, export and import.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Validated {
    /// The element type.
    pub dtype: CaiDtype,
    /// Number of elements.
    pub element_count: u64,
    /// `element_count` times the itemsize.
    pub nbytes: u64,
    /// Byte offsets [begin, end) from `data` that the elements touch.
    pub extent: (i64, i64),
}

impl Validated {
    /// The bytes the elements touch, as the memory-kind seam takes them.
    pub(crate) fn touched(&self) -> Extent {
        Extent { bytes: self.extent, element_count: self.element_count }
    }
}

/// Checks every rule of the spec that needs no driver.
#[inline]
pub fn validate(array: &CaiArray) -> Result<Validated> {
    validate_nested(array, 0)
}

#[inline]
fn validate_nested(array: &CaiArray, mask_depth: usize) -> Result<Validated> {
    abi_version_is_known(array.abi_version)?;
    version_is_known(array.version)?;
    reserved_are_zero("reserved_half", &[array.reserved_half])?;
    reserved_are_zero("reserved", &array.reserved)?;
    placement_is_valid(array)?;
    readonly_is_a_flag(array.readonly)?;
    strides_given_is_a_flag(array.strides_given)?;
    let ndim = ndim_is_within_limit(array.ndim)?;
    extents_are_non_negative(&array.shape[..ndim])?;
    let dtype = typestr_is_a_device_type(array)?;
    dl_dtype_agrees_with_typestr(array.dl_dtype, dtype, array.descr_count)?;
    descr_matches_itemsize(array, dtype.itemsize)?;
    let validated = layout_is_addressable(array, ndim, dtype)?;
    mask_matches_array(array, mask_depth)?;
    Ok(validated)
}

/// The rules on what a descriptor's layout reaches: the element count, the byte size and the
/// bytes the strides touch fit 64 bits, the data pointer is NULL only when empty, and the
/// touched bytes lie where the memory kind allows. `ndim` is within the limit and `dtype` is
/// what the typestr describes.
#[inline(always)]
fn layout_is_addressable(array: &CaiArray, ndim: usize, dtype: CaiDtype) -> Result<Validated> {
    let strides = (array.strides_given == 1).then(|| &array.strides[..ndim]);
    layout_reaches(&array.shape[..ndim], strides, array.data, dtype, |extent| {
        extent_is_addressable(array, extent)
    })
}

/// `layout_is_addressable` on extents held apart from a struct (`strides` None: C-contiguous),
/// with `addressable` the memory kind's rule on where the touched bytes may lie.
#[inline(always)]
fn layout_reaches(
    shape: &[i64],
    strides: Option<&[i64]>,
    data: u64,
    dtype: CaiDtype,
    addressable: impl FnOnce((i64, i64)) -> Result<()>,
) -> Result<Validated> {
    let element_count = element_count(shape, dtype.itemsize)?;
    let nbytes = nbytes(element_count, dtype.itemsize)?;
    let extent = match strides {
        Some(strides) => byte_extent(shape, strides, dtype.itemsize, element_count)?,
        None => (0, nbytes as i64),
    };
    data_is_null_only_when_empty(data, element_count)?;
    addressable(extent)?;
    Ok(Validated { dtype, element_count, nbytes, extent })
}

/// `validate` of a struct a reader filled from another protocol's fields (a DLTensor), which
/// keep by construction the rules not run here: the struct was cleared (`abi_version`,
/// reserved words, placement, no descr, no mask), the reader wrote `version` 3, the flags as
/// 0 or 1 and an `ndim` within the limit, and made the typestr from `dtype`. What the fields
/// alone decide (the extents, the layout's reach, the data pointer) is checked as `validate`
/// checks it, by the same rules.
#[inline]
pub(crate) fn validate_filled(array: &CaiArray, dtype: CaiDtype) -> Result<Validated> {
    let ndim = array.ndim as usize;
    extents_are_non_negative(&array.shape[..ndim])?;
    layout_is_addressable(array, ndim, dtype)
}

/// `validate_filled` of the CUDA-memory struct a reader would make from another protocol's fields (a
/// DLTensor), checked before anything is written: what those fields decide (the extents, the
/// layout's reach, the data pointer) by the same rules. The rest holds by construction (see
/// dlpack.rs's `write_dltensor`): version 3, flags of 0 or 1, an `ndim` within the limit, the
/// typestr made from `dtype`, no placement, descr or mask.
#[inline(always)]
pub(crate) fn validate_extents_of_cuda_memory(
    shape: &[i64],
    strides: Option<&[i64]>,
    data: u64,
    dtype: CaiDtype,
) -> Result<Validated> {
    extents_are_non_negative(shape)?;
    layout_reaches(shape, strides, data, dtype, |extent| extent_stays_in_address_space(data, extent))
}

/// Every layout fact `cai_layout` reports of `array`; `validated` is what validating it found,
/// where the caller has it (else it is validated here).
pub fn layout_of(array: &CaiArray, validated: Option<&Validated>) -> Result<CaiLayout> {
    let validated = &match validated {
        Some(validated) => *validated,
        None => validate(array)?,
    };
    let ndim = array.ndim as usize;
    let shape = &array.shape[..ndim];
    let itemsize = validated.dtype.itemsize;
    let mut implied = [0i64; CAI_MAX_NDIM];
    let strides = if array.strides_given == 1 {
        &array.strides[..ndim]
    } else {
        c_strides(shape, itemsize, &mut implied[..ndim])?;
        &implied[..ndim]
    };
    Ok(CaiLayout {
        element_count: validated.element_count,
        nbytes: validated.nbytes,
        extent_begin: validated.extent.0,
        extent_end: validated.extent.1,
        c_contiguous: is_c_contiguous(shape, strides, itemsize).into(),
        f_contiguous: is_f_contiguous(shape, strides, itemsize).into(),
        strides_itemsize_aligned: strides_itemsize_aligned(strides, itemsize).into(),
        reserved: [0; CAI_LAYOUT_RESERVED_WORDS],
    })
}

/// The struct is laid out as this libcai knows: a later layout may only be released
/// (its `owner` and `release` are where they always are), never read.
#[inline]
pub fn abi_version_is_known(abi_version: u32) -> Result<()> {
    if abi_version == CAI_ABI_VERSION {
        return Ok(());
    }
    fail(Status::AbiVersion, move || {
        format!(
            "abi_version {abi_version} is not this libcai's CaiArray layout ({CAI_ABI_VERSION}); only cai_release may be used on it"
        )
    })
}

/// `version` is required and is one of the published versions 0 to 3.
#[inline]
pub fn version_is_known(version: i32) -> Result<()> {
    if (0..=3).contains(&version) {
        return Ok(());
    }
    fail(Status::InvalidVersion, move || format!("version {version} is not a CAI version (0 to 3)"))
}

/// Reserved words are zero, so that later versions can give them meaning; `what` names them
/// ("reserved", "CaiImportOptions.reserved").
#[inline]
pub fn reserved_are_zero<T: Copy + Into<u64>>(what: &str, reserved: &[T]) -> Result<()> {
    if reserved.iter().fold(0u64, |any, &w| any | w.into()) == 0 {
        return Ok(());
    }
    fail(Status::InvalidArgument, move || {
        let i = reserved.iter().position(|&w| w.into() != 0).unwrap_or_default();
        format!("{what}[{i}] is {:#x}; reserved words must be zero", reserved[i].into())
    })
}

/// An on/off option is 0 or 1, so that garbage is not read as either.
#[inline(always)]
pub fn option_is_a_flag(name: &str, value: u32) -> Result<bool> {
    match value {
        0 => Ok(false),
        1 => Ok(true),
        other => fail(Status::InvalidArgument, move || format!("{name} is {other}; it must be 0 or 1")),
    }
}

/// The second item of `data` is a bool.
#[inline]
pub fn readonly_is_a_flag(readonly: u32) -> Result<()> {
    if readonly <= 1 {
        return Ok(());
    }
    fail(Status::InvalidData, move || format!("readonly is {readonly}; it must be 0 or 1"))
}

/// `strides` is either given or absent/None; nothing else.
#[inline]
pub fn strides_given_is_a_flag(strides_given: u32) -> Result<()> {
    if strides_given <= 1 {
        return Ok(());
    }
    fail(Status::InvalidStrides, move || format!("strides_given is {strides_given}; it must be 0 or 1"))
}

/// `shape` has at most CAI_MAX_NDIM entries (NumPy's limit).
#[inline]
pub fn ndim_is_within_limit(ndim: i32) -> Result<usize> {
    match usize::try_from(ndim) {
        Ok(n) if n <= CAI_MAX_NDIM => Ok(n),
        _ => fail(Status::InvalidShape, move || {
            format!("ndim {ndim} is outside 0 to {CAI_MAX_NDIM} (CAI_MAX_NDIM)")
        }),
    }
}

/// Every extent in `shape` is a non-negative integer.
#[inline]
pub fn extents_are_non_negative(shape: &[i64]) -> Result<()> {
    if shape.iter().fold(0i64, |any, &e| any | e) >= 0 {
        return Ok(());
    }
    fail(Status::InvalidShape, move || {
        let i = shape.iter().position(|&e| e < 0).unwrap_or_default();
        format!("shape[{i}] is {}; extents must be >= 0", shape[i])
    })
}

/// `typestr` is a numpy type string whose items a device array can hold.
#[inline]
pub fn typestr_is_a_device_type(array: &CaiArray) -> Result<CaiDtype> {
    parse_typestr_buffer(&array.typestr, "typestr")
}

/// `descr`, where given, describes fields that exactly fill one item of `typestr`.
#[inline]
pub fn descr_matches_itemsize(array: &CaiArray, itemsize: u64) -> Result<()> {
    if array.descr.is_null() && array.descr_count == 0 {
        return Ok(());
    }
    descr_fields_match_itemsize(array, itemsize)
}

#[inline(never)]
fn descr_fields_match_itemsize(array: &CaiArray, itemsize: u64) -> Result<()> {
    let descr_error = |message: String| Err(Error::new(Status::InvalidDescr, message));
    match (array.descr.is_null(), array.descr_count) {
        (true, 0) => Ok(()),
        (true, n) => descr_error(format!("descr is NULL but descr_count is {n}")),
        (false, 0) => descr_error("descr is set but descr_count is 0; numpy's descr is never empty".into()),
        // Every field is at least one byte, so more fields than bytes cannot be valid: this
        // refuses a garbage count before any entry is read.
        (false, n) if u64::from(n) > itemsize => descr_error(format!(
            "descr_count {n} exceeds the itemsize {itemsize}; every field has at least one byte"
        )),
        (false, n) => {
            // SAFETY: the API promises `descr` points to `descr_count` fields.
            let fields = unsafe { std::slice::from_raw_parts(array.descr, n as usize) };
            validate_descr(fields, itemsize)
        }
    }
}

/// The data pointer is 0 only for zero-size arrays (spec v2: "For zero-size arrays, use 0").
#[inline]
pub fn data_is_null_only_when_empty(data: u64, element_count: u64) -> Result<()> {
    if data != 0 || element_count == 0 {
        return Ok(());
    }
    fail(Status::InvalidData, move || format!("data is 0 (NULL) but the array has {element_count} elements"))
}

/// `mask` came in version 1, is a valid array of the same shape, and is not the array itself
/// nor a chain deeper than CAI_MAX_MASK_DEPTH (how a cycle shows).
#[inline]
pub fn mask_matches_array(array: &CaiArray, depth: usize) -> Result<()> {
    if array.mask.is_null() {
        return Ok(());
    }
    mask_is_valid_with_the_same_shape(array, depth)
}

#[inline(never)]
fn mask_is_valid_with_the_same_shape(array: &CaiArray, depth: usize) -> Result<()> {
    let mask_error = |message: String| Err(Error::new(Status::InvalidMask, message));
    if array.version == 0 {
        return mask_error("mask is set but CAI version 0 has no mask (it came in version 1)".into());
    }
    if std::ptr::eq(array.mask, array) {
        return mask_error("mask points to the array itself".into());
    }
    mask_depth_is_within_limit(depth + 1)?;
    // SAFETY: the API promises a non-NULL mask points to a readable CaiArray.
    let mask = unsafe { &*array.mask };
    validate_nested(mask, depth + 1).map_err(in_mask)?;
    let ndim = array.ndim as usize;
    if mask.ndim != array.ndim || mask.shape[..ndim] != array.shape[..ndim] {
        return mask_error(format!(
            "mask has shape {:?} but the array has shape {:?}",
            &mask.shape[..mask.ndim as usize],
            &array.shape[..ndim]
        ));
    }
    Ok(())
}

/// A mask `depth` levels below the array (its own mask is 1) may be read while the chain is
/// at most CAI_MAX_MASK_DEPTH masks long; a longer one is how a cycle of masks shows.
pub fn mask_depth_is_within_limit(depth: usize) -> Result<()> {
    if depth <= CAI_MAX_MASK_DEPTH {
        Ok(())
    } else {
        Err(Error::new(
            Status::InvalidMask,
            format!("masks nest deeper than {CAI_MAX_MASK_DEPTH} levels (CAI_MAX_MASK_DEPTH); a cycle?"),
        ))
    }
}

/// An error found in a mask, reported as the array's INVALID_MASK.
pub fn in_mask(error: Error) -> Error {
    Error::new(Status::InvalidMask, format!("mask: {}", error.message))
}

/// The stream a consumer must synchronize on: `stream` came in version 3, and a descriptor of
/// an earlier version that still carries one has it ignored.
pub fn stream_for_version(array: &CaiArray) -> u64 {
    if array.version >= 3 {
        array.stream
    } else {
        CAI_STREAM_NONE
    }
}
