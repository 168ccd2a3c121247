//! The reader of a numpy array (the exact `numpy.ndarray` type of numpy 2.1 or later), by
//! numpy's C ABI instead of its `__dlpack__`: the array object's fields and its dtype's, read as
//! every compiled numpy extension reads them, handed to the core's DLPack reader as the DLTensor
//! numpy's `__dlpack__` would have made. So the array, its validation and its errors are the
//! DLPack path's, without the method call, the capsule and the deleter (about 1,200 instructions
//! a call). An array the DLTensor could differ for (a dtype numpy's export refuses or maps
//! through its registry, a byte-swapped dtype, a stride that is not a whole number of items, a
//! base that is a DLPack capsule, whose device numpy reports) is left to `__dlpack__`, which
//! then decides as before. One family numpy's export refuses is read here all the same: the
//! dtypes of ml_dtypes (bfloat16, the float8/6/4 types), known by their scalar type's identity,
//! whose DLPack type the struct then carries (`dl_dtype`).
//!
//! Why this is sound: the layouts read are numpy's public ABI (`PyArrayObject_fields` and
//! `PyArray_Descr` of numpy 2's headers, which compiled extensions read through macros); the
//! type is recognized as the `PyArray_Type` of numpy's own C-API table (the `_ARRAY_API` capsule
//! every extension imports), whose ABI version is checked to be 2 and feature version at least
//! 2.1's (the first with DLPack 1's versioned export, whose read-only flag this reader sets as
//! numpy's does); only instances of that exact type are read, alive for the call (the caller
//! holds them), by an attached thread.

use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicPtr, Ordering};

use cai::binding::dlpack::{check_dltensor, read_dltensor, write_dltensor, AllowHost, SubByte};
use cai::binding::element_type::{dl_dtype_named, names_beyond_numpy};
use cai::{CaiArray, CaiDLDataType, CaiDLTensor, CAI_MAX_NDIM, CAI_STREAM_NONE};
use pyo3::prelude::*;
use pyo3::types::{PyCapsule, PyType};

use crate::cpython::fastcall::hold_reference;
use crate::cpython::{self, c_char, c_int, c_uint, c_void, PyObject, PyTypeObject};
use crate::dlpack::{Taken, TakenTensor};
use crate::errors::CaiResult;
use crate::import::{owned, taken_from, written, Hold, Outcome, Request, HOST};

/// numpy 2's `PyArrayObject_fields`, as far as this reader reads it.
#[repr(C)]
struct ArrayFields {
    ob_base: PyObject,
    data: *mut c_char,
    nd: c_int,
    dimensions: *const isize,
    strides: *const isize,
    base: *mut PyObject,
    descr: *const DescrFields,
    flags: c_int,
}

/// numpy 2's `PyArray_Descr`, as far as this reader reads it.
#[repr(C)]
struct DescrFields {
    ob_base: PyObject,
    typeobj: *mut PyTypeObject,
    kind: c_char,
    type_char: c_char,
    byteorder: c_char,
    former_flags: c_char,
    type_num: c_int,
    flags: u64,
    elsize: isize,
}

/// `NPY_ARRAY_WRITEABLE`.
const WRITEABLE: c_int = 0x0400;
/// `NPY_ABI_VERSION` of numpy 2.x, and `NPY_2_1_API_VERSION`.
const ABI_2: c_uint = 0x0200_0000;
const FEATURE_2_1: c_uint = 0x13;
/// Indices in numpy's C-API table: `PyArray_GetNDArrayCVersion`, `PyArray_Type`,
/// `PyArray_GetNDArrayCFeatureVersion`.
const API_ABI_VERSION: usize = 0;
const API_ARRAY_TYPE: usize = 2;
const API_FEATURE_VERSION: usize = 211;
/// DLPack's type codes numpy's export gives for the dtypes read here.
const DL_INT: u8 = 0;
const DL_UINT: u8 = 1;
const DL_FLOAT: u8 = 2;
const DL_COMPLEX: u8 = 5;
const DL_BOOL: u8 = 6;

/// numpy's first type number of a registered (user) dtype, `NPY_USERDEF`.
const USER_TYPE_NUMBERS: c_int = 256;

/// The scalar types of ml_dtypes' dtypes (a numpy dtype's `typeobj`), each with its DLPack type,
/// once its module was imported: each type held by a reference (never freed), so an address
/// names it for the process.
static ML_DTYPES: std::sync::OnceLock<Vec<(usize, CaiDLDataType)>> = std::sync::OnceLock::new();

/// Fills `ML_DTYPES` from ml_dtypes' module, if the process imported it (it is never imported
/// here: an array of its types exists only once it was). Every failure on the way leaves it
/// unfilled, its error cleared.
fn load_ml_dtypes(py: Python<'_>) {
    if ML_DTYPES.get().is_some() {
        return;
    }
    let module = py
        .import("sys")
        .and_then(|sys| sys.getattr("modules"))
        .and_then(|modules| modules.get_item("ml_dtypes"));
    let Ok(module) = module else { return };
    let mut types = Vec::new();
    for name in names_beyond_numpy() {
        let (Ok(ty), Some(dtype)) = (module.getattr(name), dl_dtype_named(name)) else { continue };
        if ty.is_instance_of::<PyType>() {
            // Held for the process: the address stays this type's.
            types.push((ty.into_ptr() as usize, dtype));
        }
    }
    // A thread that filled it meanwhile wins; these references are then merely kept.
    let _ = ML_DTYPES.set(types);
}

/// numpy's `PyArray_Type`, once a type was found to be it (a static type of numpy's module,
/// which is never unloaded).
static ARRAY_TYPE: AtomicPtr<PyTypeObject> = AtomicPtr::new(std::ptr::null_mut());

/// Whether `ty` is numpy's `ndarray` of a numpy whose ABI this reader knows (looked up once
/// per type: an import and a capsule read). Any failure on the way says no, its error cleared.
pub fn is_numpy_array_type(ty: &Bound<'_, PyType>) -> bool {
    if !cfg!(target_pointer_width = "64") || !is_named_ndarray(ty) {
        return false;
    }
    let py = ty.py();
    let table = py
        .import("numpy._core._multiarray_umath")
        .and_then(|module| module.getattr("_ARRAY_API"))
        .and_then(|api| Ok(api.cast_into::<PyCapsule>()?));
    let Ok(table) = table else { return false };
    // numpy's capsule has no name, and any other name answers NULL (with an error, cleared
    // below).
    let table = cpython::capsule_pointer_or_error(&table, None).cast::<*const c_void>();
    if table.is_null() {
        cpython::clear_error(py);
        return false;
    }
    // SAFETY: numpy's C-API table, which lives as long as numpy's module (never unloaded): its
    // first entries are the same in every numpy since 1.x, and entry 211 exists since numpy
    // 1.4; the two version functions take nothing and return an unsigned int.
    let known = unsafe {
        let version = |index: usize| {
            let function: extern "C" fn() -> c_uint = std::mem::transmute(*table.add(index));
            function()
        };
        *table.add(API_ARRAY_TYPE) == ty.as_type_ptr().cast::<c_void>().cast_const()
            && version(API_ABI_VERSION) == ABI_2
            && version(API_FEATURE_VERSION) >= FEATURE_2_1
    };
    if known {
        ARRAY_TYPE.store(ty.as_type_ptr(), Ordering::Release);
    }
    known
}

/// The cheap test first: numpy's ndarray says it is `numpy.ndarray`.
fn is_named_ndarray(ty: &Bound<'_, PyType>) -> bool {
    ty.module().is_ok_and(|module| module == "numpy") && ty.qualname().is_ok_and(|name| name == "ndarray")
}

/// `obj`'s tensor as numpy's `__dlpack__(max_version=(1, n))` would give it, taken by the core
/// (validated, host memory refused unless `host` allows it); None where that DLTensor could
/// differ (see the module's header): the caller then asks `__dlpack__`.
///
/// # Safety
/// `obj` is an instance of exactly the type `is_numpy_array_type` said yes to, held by the
/// caller for the call.
pub unsafe fn take_numpy_array(obj: &Bound<'_, PyAny>, host: AllowHost) -> CaiResult<Option<TakenTensor>> {
    let mut taken = Taken::new();
    let read = |tensor: &CaiDLTensor, read_only| {
        // SAFETY: the array's tensor, valid while this runs (`with_numpy_tensor`).
        Ok(unsafe { read_dltensor(tensor, read_only, SubByte::Padded, host, taken.array()) }?)
    };
    // SAFETY: the caller's contract.
    let Some(validated) = unsafe { with_numpy_tensor(obj, read) }? else { return Ok(None) };
    // The struct holds a reference to the array of its own, as numpy's tensor does, besides the
    // one its reader keeps as the owner: numpy's in-place `resize` counts references (refcheck)
    // and must refuse to move the memory while it is viewed, as it does for a DLPack export.
    taken.array().owner = obj.clone().into_ptr().cast();
    taken.array().release = Some(release_array_reference);
    Ok(Some(TakenTensor { taken, device: HOST, validated }))
}

/// `obj`'s DLTensor as `take_numpy_array` reads it, built on the stack from the array's own
/// fields and handed to `read` with the array's read-only flag: what `read` returns, or None
/// (`read` not called) where numpy's `__dlpack__` could answer otherwise. The tensor is valid
/// while `read` runs, the caller holds `obj` and no Python code runs.
///
/// # Safety
/// As `take_numpy_array`.
pub unsafe fn with_numpy_tensor<R>(
    obj: &Bound<'_, PyAny>,
    read: impl FnOnce(&CaiDLTensor, bool) -> CaiResult<R>,
) -> CaiResult<Option<R>> {
    // SAFETY: an ndarray of numpy 2 (the caller's contract), whose fields this reads.
    let fields = unsafe { &*obj.as_ptr().cast::<ArrayFields>() };
    // SAFETY: an array's dtype is a live descr for as long as the array is.
    if unsafe { (*fields.descr).type_num } >= USER_TYPE_NUMBERS {
        // May run Python code, once a process: the descr is read only after it.
        load_ml_dtypes(obj.py());
    }
    // SAFETY: as above.
    let descr = unsafe { &*fields.descr };
    let ndim = usize::try_from(fields.nd).unwrap_or(usize::MAX);
    let Some(dtype) = dl_dtype(descr) else { return Ok(None) };
    // SAFETY: as above; a base chain is of live objects.
    if ndim > CAI_MAX_NDIM || unsafe { base_is_capsule(fields.base) } {
        return Ok(None);
    }
    // In items, as DLPack counts them; left unwritten past the rank (nothing reads there): no
    // 512 bytes zeroed per call. The itemsize is a power of two (`dl_dtype`): a mask and a shift,
    // not a division per dimension.
    let mut strides = [MaybeUninit::<i64>::uninit(); CAI_MAX_NDIM];
    let item_mask = descr.elsize as i64 - 1;
    let item_shift = descr.elsize.trailing_zeros();
    for (index, stride) in strides.iter_mut().enumerate().take(ndim) {
        // SAFETY: `nd` strides (numpy's ABI).
        let bytes = unsafe { *fields.strides.add(index) } as i64;
        if bytes & item_mask != 0 {
            return Ok(None);
        }
        stride.write(bytes >> item_shift);
    }
    let dl_tensor = CaiDLTensor {
        data: fields.data.cast(),
        device: HOST,
        ndim: fields.nd,
        dtype,
        // `npy_intp` is 64 bits here (`is_numpy_array_type` said no elsewhere); NULL for none, as
        // numpy's export gives.
        shape: if ndim == 0 { std::ptr::null_mut() } else { fields.dimensions.cast::<i64>().cast_mut() },
        strides: if ndim == 0 { std::ptr::null_mut() } else { strides.as_mut_ptr().cast::<i64>() },
        byte_offset: 0,
    };
    let read_only = fields.flags & WRITEABLE == 0;
    // The array's data and shape, alive while the caller holds it, and its `ndim` strides
    // written above.
    Ok(Some(read(&dl_tensor, read_only)?))
}

/// The release of the reference `take_numpy_array` stored in the struct's `owner`. The struct
/// goes only to a Taken, a Read and an Array, which are only ever dropped by an attached
/// thread (array/mod.rs's `Kept`): no attach of its own.
unsafe extern "C" fn release_array_reference(array: *mut CaiArray) {
    // SAFETY: attached (above); the strong reference take_numpy_array stored, released once
    // (a release runs once: the holders clear it).
    unsafe { cpython::decref((*array).owner.cast()) };
}

/// The DLPack type numpy's export gives `descr`, for the dtypes it maps itself (not those of its
/// registry) in native byte order, and the DLPack type of an ml_dtypes type (bfloat16, the
/// float8/6/4 types: `load_ml_dtypes`), which numpy's export refuses; None for any other.
fn dl_dtype(descr: &DescrFields) -> Option<CaiDLDataType> {
    let swapped = if cfg!(target_endian = "little") { b'>' } else { b'<' };
    let itemsize_known = (1..=16).contains(&descr.elsize) && (descr.elsize as usize).is_power_of_two();
    if descr.byteorder as u8 == swapped || !itemsize_known {
        return None;
    }
    if descr.type_num >= USER_TYPE_NUMBERS {
        return ml_dtype(descr);
    }
    // numpy's type numbers: BOOL 0, BYTE..ULONGLONG 1..10 (signed odd), FLOAT 11, DOUBLE 12,
    // CFLOAT 14, CDOUBLE 15, HALF 23 (LONGDOUBLE and CLONGDOUBLE, 13 and 16, numpy refuses
    // where they are wider than DOUBLE and CDOUBLE: left to it).
    let code = match descr.type_num {
        0 => DL_BOOL,
        1 | 3 | 5 | 7 | 9 => DL_INT,
        2 | 4 | 6 | 8 | 10 => DL_UINT,
        11 | 12 | 23 => DL_FLOAT,
        14 | 15 => DL_COMPLEX,
        _ => return None,
    };
    Some(CaiDLDataType { code, bits: (descr.elsize * 8) as u8, lanes: 1 })
}

/// The DLPack type of a registered dtype that is ml_dtypes' (`ML_DTYPES`), known by its scalar
/// type alone (ml_dtypes gives float8_e5m2 kind 'f', the others 'V'), one element an item (a
/// float4's byte holds one: the item is the type's, padded); None for any other.
#[cold]
#[inline(never)]
fn ml_dtype(descr: &DescrFields) -> Option<CaiDLDataType> {
    let dtype = ML_DTYPES.get()?.iter().find(|(ty, _)| *ty == descr.typeobj as usize)?.1;
    (descr.elsize == 1.max(isize::from(dtype.bits / 8))).then_some(dtype)
}

/// Whether the end of `base`'s chain of arrays is a capsule (numpy reports the device of a
/// DLPack capsule's tensor there), the chain followed as numpy follows it (`PyArray_Check`).
///
/// # Safety
/// `base` is NULL or a live object, and so is each array's base down the chain; attached.
unsafe fn base_is_capsule(mut base: *mut PyObject) -> bool {
    let array_type = ARRAY_TYPE.load(Ordering::Acquire);
    while !base.is_null() {
        // SAFETY: a live object (the contract); numpy's array type, set before any array is
        // read (`is_numpy_array_type`), and its subclasses keep its fields' layout.
        unsafe {
            if cpython::is_capsule(base) {
                return true;
            }
            if array_type.is_null() || !cpython::type_check(base, array_type) {
                return false;
            }
            base = (*base.cast::<ArrayFields>()).base;
        }
    }
    false
}

/// Exactly a numpy array, read by its fields (`with_numpy_tensor`), every rule checked on them;
/// `Outcome::Declined` where they could say otherwise than its `__dlpack__`. An owning struct holds a
/// reference to the array of its own (`hold_reference`; numpy's in-place `resize` then
/// refuses, as for its own DLPack export: see `take_numpy_array`).
pub fn import_by_numpy_fields(
    obj: &Bound<'_, PyAny>,
    request: &Request,
    hold: &mut Hold<'_>,
) -> CaiResult<Outcome> {
    let py = obj.py();
    let (host, options) = (request.host, *request.options);
    Ok(match hold {
        // SAFETY: an instance of exactly numpy's ndarray (its type's facts), held by the caller.
        Hold::Own(to_own) => match unsafe { take_numpy_array(obj, host) }? {
            Some(tensor) => owned(obj, taken_from(obj, tensor), request, to_own)?,
            None => Outcome::Declined,
        },
        Hold::OwnInto(out, _) => {
            let import = |tensor: &CaiDLTensor, read_only| {
                // SAFETY: the array's tensor, valid while this runs (`with_numpy_tensor`).
                let checked = unsafe { check_dltensor(tensor, SubByte::Padded, host) }?;
                let write = |array: &mut CaiArray| {
                    // SAFETY: the tensor just checked; it is not read after this write.
                    unsafe { write_dltensor(tensor, &checked, read_only, array) };
                    // SAFETY: attached (a Bound exists); `obj` is live.
                    unsafe { hold_reference(array, obj.as_ptr()) };
                };
                written(py, write, checked.validated, Some(HOST), CAI_STREAM_NONE, options, out)
            };
            // SAFETY: as above.
            match unsafe { with_numpy_tensor(obj, import) }? {
                Some(()) => Outcome::Written,
                None => Outcome::Declined,
            }
        }
        Hold::Borrow(out) | Hold::BorrowOrOwn(out, _) => {
            let view = |tensor: &CaiDLTensor, read_only| {
                // SAFETY: the array's tensor, valid for this call (`with_numpy_tensor`).
                let checked = unsafe { check_dltensor(tensor, SubByte::Padded, host) }?;
                // SAFETY: the tensor just checked.
                let write =
                    |array: &mut CaiArray| unsafe { write_dltensor(tensor, &checked, read_only, array) };
                written(py, write, checked.validated, Some(HOST), CAI_STREAM_NONE, options, out)
            };
            // SAFETY: as above.
            match unsafe { with_numpy_tensor(obj, view) }? {
                Some(()) => Outcome::Written,
                None => Outcome::Declined,
            }
        }
    })
}
