//! Reads a `__cuda_array_interface__` dict into a CaiArray.
//!
//! It takes only the plainly valid common case: an exact dict whose values are exact ints,
//! tuples or lists, a str and bools, with no descr and no mask. Anything else, including every
//! invalid descriptor, is left to the binding's Python rules (python/cai/_convert.py), which
//! decide and word the error: the rules are not written twice. No Python code runs here (no
//! `__index__`, `__repr__` or `__eq__` of user objects), so borrowed references stay valid.

use super::{Api, Object};
use crate::array::{CaiArray, CAI_MAX_NDIM};

/// Fills `out` from `dict` when it is the common, plainly valid case and returns true; else
/// returns false with `out` zeroed. Call with the GIL held.
pub(super) fn fill_from_dict(api: &Api, dict: Object, out: &mut CaiArray) -> bool {
    *out = CaiArray::zeroed();
    let filled = fill(api, dict, out).is_some();
    if !filled {
        *out = CaiArray::zeroed();
    }
    filled
}

fn fill(api: &Api, dict: Object, out: &mut CaiArray) -> Option<()> {
    if api.type_of(dict) != api.dict_type {
        return None;
    }
    let [version, shape, typestr, data, strides, stream, descr, mask] = api.values(dict);
    let given = |value: Option<Object>| value.filter(|&v| v != api.none);
    if given(descr).is_some() || given(mask).is_some() {
        return None;
    }
    let version = api.int64(version?).filter(|v| (0..=3).contains(v))?;
    out.version = version as i32;

    let shape = api.sequence(shape?, CAI_MAX_NDIM)?;
    out.ndim = shape.len as i32;
    for (slot, item) in out.shape.iter_mut().zip(shape.items()) {
        *slot = api.int64(item).filter(|&e| e >= 0)?;
    }

    let typestr = typestr?;
    if api.type_of(typestr) != api.str_type {
        return None;
    }
    let mut length: isize = 0;
    // SAFETY: an exact str; the UTF-8 buffer is cached in it and borrowed.
    let text = unsafe { (api.PyUnicode_AsUTF8AndSize)(typestr, &mut length) };
    if text.is_null() {
        // SAFETY: clears the encoding error (lone surrogates); the Python path reports it.
        unsafe { (api.PyErr_Clear)() };
        return None;
    }
    // SAFETY: `length` bytes at `text`, owned by the str.
    let bytes = unsafe { std::slice::from_raw_parts(text.cast::<u8>(), length as usize) };
    if bytes.contains(&0) || !out.set_typestr(std::str::from_utf8(bytes).ok()?) {
        return None;
    }

    let data = api.sequence(data?, 2).filter(|pair| pair.len == 2)?;
    let mut pair = data.items();
    out.data = api.uint64(pair.next()?)?;
    out.readonly = match pair.next()? {
        flag if flag == api.true_ => 1,
        flag if flag == api.false_ => 0,
        _ => return None,
    };

    if let Some(strides) = given(strides) {
        let strides = api.sequence(strides, CAI_MAX_NDIM).filter(|s| s.len == shape.len)?;
        for (slot, item) in out.strides.iter_mut().zip(strides.items()) {
            *slot = api.int64(item)?;
        }
        out.strides_given = 1;
    }

    if version >= 3 {
        if let Some(stream) = given(stream) {
            out.stream = api.uint64(stream).filter(|&s| s != 0)?;
        }
    }
    Some(())
}
