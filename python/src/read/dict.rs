//! Reads a `__cuda_array_interface__` dict into a `CaiArray`: Python's half of the work
//! (looking keys up, telling ints from bools, copying lists), with every rule applied by the
//! core (`cai::dict`, then `cai::validate`).
//!
//! Soundness under hostile objects: every value is held by a strong reference for as long as
//! it is read, and every list is first copied into a tuple (under free-threading, atomically),
//! so no `__eq__`, `__index__` or other thread can free or change what is being read. Lengths
//! come from the objects themselves (never `__len__`), and sequences longer than the rules'
//! limits are refused before their items are read.

use cai::binding::dict::{array_from_dict, DictValues, Limits, Repr, Value, KEYS};
use cai::binding::rules::{in_mask, mask_depth_is_within_limit};
use cai::binding::Description;
use cai::{CaiArray, CaiField, Error, Status};
use pyo3::exceptions::PyTypeError;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::type_object::PyTypeCheck;
use pyo3::types::{PyDict, PyList, PyString, PyTuple};
use std::mem::MaybeUninit;

use crate::cpython::{self, is_exactly, Builtin};
use crate::described::Read;
use crate::errors::{CaiResult, Failure};
use crate::import::{
    cannot_borrow, import_then_copy, imported_holding_object, owned, Hold, Outcome, Request,
};
use crate::pool::Pooled;
use crate::values::{scalar, PyValue, TypeOf};

/// The interface dict of `object` (or `object` itself when it is a dict); None when it has no
/// `__cuda_array_interface__` attribute.
pub fn interface_of<'py>(object: &Bound<'py, PyAny>) -> PyResult<Option<Bound<'py, PyDict>>> {
    if let Ok(dict) = object.cast::<PyDict>() {
        return Ok(Some(dict.clone()));
    }
    interface_attribute(object)
}

/// The dict `object`'s `__cuda_array_interface__` attribute holds; None when it has none. For
/// a caller that knows `object` is no dict itself (`interface_of` asks that first).
pub fn interface_attribute<'py>(object: &Bound<'py, PyAny>) -> PyResult<Option<Bound<'py, PyDict>>> {
    let py = object.py();
    // An AttributeError is cleared by the interpreter: no `PyErr` is made when the attribute is
    // absent (see values.rs).
    let Some(desc) = cpython::getattr_or_none(object, intern!(py, "__cuda_array_interface__"))? else {
        return Ok(None);
    };
    if is_exactly(desc.as_borrowed(), Builtin::Dict) {
        // SAFETY: an exact dict, checked above (a subclass check is a call under the limited API).
        return Ok(Some(unsafe { desc.cast_into_unchecked::<PyDict>() }));
    }
    desc.cast_into::<PyDict>().map(Some).map_err(|e| {
        PyTypeError::new_err(format!(
            "{}.__cuda_array_interface__ is a '{}', not a dict",
            TypeOf::new(object),
            TypeOf::new(&e.into_inner())
        ))
    })
}

/// `dict`, the interface of `owner`, read into a description that keeps `owner` alive.
pub fn read_interface(owner: &Bound<'_, PyAny>, dict: &Bound<'_, PyDict>) -> CaiResult<Read> {
    let (array, fields, mask) = read_dict_pooled(dict)?;
    interface_read(owner, array, fields, mask)
}

/// `read_dict` into a struct of this thread's pool: the struct, its descr fields and the mask
/// object, if any.
pub fn read_dict_pooled<'py>(
    dict: &Bound<'py, PyDict>,
) -> CaiResult<(Pooled, Vec<CaiField>, Option<Bound<'py, PyAny>>)> {
    let mut array = Pooled::cleared();
    let mut fields = Vec::new();
    let mask = read_dict(dict, &mut array, &mut fields)?;
    Ok((array, fields, mask))
}

/// `read_interface` of a dict `read_dict` read already: `array`, `fields` and the `mask`
/// object as it left them.
pub fn interface_read(
    owner: &Bound<'_, PyAny>,
    array: Pooled,
    fields: Vec<CaiField>,
    mask: Option<Bound<'_, PyAny>>,
) -> CaiResult<Read> {
    let (description, mask_owners) = describe_read(array, fields, mask, 0)?;
    Ok(Read {
        description,
        device: None,
        owner: Some(owner.clone().unbind()),
        mask_owners,
        buffer: None,
        validated: None,
    })
}

/// A dict (whose array is `depth` masks down) read into a complete description (the core
/// wires its descr and mask), and the producers of its masks, the nearest first, whose memory
/// it describes.
fn describe_dict(dict: &Bound<'_, PyDict>, depth: usize) -> CaiResult<(Description<Pooled>, Vec<Py<PyAny>>)> {
    let (array, fields, mask) = read_dict_pooled(dict)?;
    describe_read(array, fields, mask, depth)
}

/// `describe_dict` of what `read_dict` read: its mask read in turn.
fn describe_read(
    array: Pooled,
    fields: Vec<CaiField>,
    mask: Option<Bound<'_, PyAny>>,
    depth: usize,
) -> CaiResult<(Description<Pooled>, Vec<Py<PyAny>>)> {
    let (mask, mask_owners) = match mask {
        None => (None, Vec::new()),
        Some(mask) => {
            let (described, mut owners) =
                describe_mask(&mask, depth + 1).map_err(|failure| match failure {
                    Failure::Cai(error) => Failure::Cai(in_mask(error)),
                    other => other,
                })?;
            owners.insert(0, mask.unbind());
            (Some(described), owners)
        }
    };
    Ok((Description::new(array, fields, mask), mask_owners))
}

fn describe_mask(mask: &Bound<'_, PyAny>, depth: usize) -> CaiResult<(Description<Pooled>, Vec<Py<PyAny>>)> {
    mask_depth_is_within_limit(depth)?;
    match interface_of(mask)? {
        Some(dict) => describe_dict(&dict, depth),
        None => Err(Failure::Cai(Error::new(
            Status::InvalidMask,
            format!(
                // The caller prefixes "mask: " (`in_mask`), as for every refusal of a mask.
                "{} has no __cuda_array_interface__; a mask is None or an object (or dict) that has one",
                Repr(&scalar(mask.as_borrowed()))
            ),
        ))),
    }
}

/// A dict value held for reading: a list replaced by a tuple copy of it.
struct Held<'py> {
    object: Option<Bound<'py, PyAny>>,
    list: bool,
}

impl<'py> Held<'py> {
    fn new(object: Option<Bound<'py, PyAny>>) -> Held<'py> {
        match object {
            Some(object) => {
                let (object, list) = tuple_copy(object);
                Held { object: Some(object), list }
            }
            None => Held { object: None, list: false },
        }
    }

    fn tuple(&self) -> Option<&Bound<'py, PyTuple>> {
        as_tuple(self.object.as_ref()?)
    }
}

/// `object` as a tuple, if it is one (`is_tuple`).
fn as_tuple<'a, 'py>(object: &'a Bound<'py, PyAny>) -> Option<&'a Bound<'py, PyTuple>> {
    // SAFETY: a tuple (or a subclass of one), checked first.
    is_tuple(object.as_borrowed()).then(|| unsafe { object.cast_unchecked::<PyTuple>() })
}

/// `as_tuple`, taking the reference.
fn into_tuple(object: Bound<'_, PyAny>) -> Option<Bound<'_, PyTuple>> {
    // SAFETY: a tuple (or a subclass of one), checked first.
    is_tuple(object.as_borrowed()).then(|| unsafe { object.cast_into_unchecked::<PyTuple>() })
}

/// Whether `object` is exactly an int, a str or None: never a sequence, told by compares of
/// its type, where a tuple or list check of it would ask for the type's flags.
fn is_plain_scalar(object: Borrowed<'_, '_, PyAny>) -> bool {
    is_exactly(object, Builtin::Int) || is_exactly(object, Builtin::Str) || object.is_none()
}

/// Whether `object` is a tuple (or a subclass of one).
fn is_tuple(object: Borrowed<'_, '_, PyAny>) -> bool {
    is_sequence::<PyTuple>(object, Builtin::Tuple, Builtin::List)
}

/// Whether `object` is a list (or a subclass of one).
fn is_list(object: Borrowed<'_, '_, PyAny>) -> bool {
    is_sequence::<PyList>(object, Builtin::List, Builtin::Tuple)
}

/// Whether `object` is a `T` (`own`, the tuple or list type) or a subclass of one, where a
/// dict holds exact builtins: told by compares of its type (with `other`, the other sequence
/// type, and the plain scalars), the subclass check, a call for the type's flags under the
/// limited API, left for what no compare tells.
fn is_sequence<T: PyTypeCheck>(object: Borrowed<'_, '_, PyAny>, own: Builtin, other: Builtin) -> bool {
    if is_exactly(object, own) {
        return true;
    }
    if is_exactly(object, other) || is_plain_scalar(object) {
        return false;
    }
    object.is_instance_of::<T>()
}

/// A list as a tuple copy (PyList_AsTuple holds the list's lock under free-threading); a
/// tuple as itself; anything else as itself, not a sequence.
fn tuple_copy(object: Bound<'_, PyAny>) -> (Bound<'_, PyAny>, bool) {
    if !is_list(object.as_borrowed()) {
        return (object, false);
    }
    // SAFETY: a list (or a subclass of one), checked above.
    let list = unsafe { object.cast_unchecked::<PyList>() };
    (list.to_tuple().into_any(), true)
}

/// Room for N values inline, and for more on the heap. The inline room is left unwritten
/// until filled: most of it is never read (a shape's 8 slots for 2 extents).
pub struct Buf<T: Copy, const N: usize> {
    inline: [MaybeUninit<T>; N],
    heap: Vec<T>,
}

impl<T: Copy, const N: usize> Buf<T, N> {
    pub fn new() -> Self {
        Buf { inline: [const { MaybeUninit::uninit() }; N], heap: Vec::new() }
    }

    /// The `len` values `value` makes, stored here.
    fn fill(&mut self, len: usize, value: impl FnMut(usize) -> T) -> &[T] {
        if len <= N {
            for (slot, made) in self.inline[..len].iter_mut().zip((0..len).map(value)) {
                slot.write(made);
            }
            // SAFETY: the first `len` slots were written just above (`len <= N`).
            unsafe { std::slice::from_raw_parts(self.inline.as_ptr().cast::<T>(), len) }
        } else {
            self.heap.extend((0..len).map(value));
            &self.heap
        }
    }
}

/// Room for the values of a sequence's items.
pub type Items<'a, 'py, const N: usize> = Buf<PyValue<'a, 'py>, N>;

/// A held value as the rules see it, its items read into `storage` when it is a tuple (or a
/// list's copy) no longer than `limit`.
fn sequence<'a, 'py, const N: usize>(
    held: &'a Held<'py>,
    storage: &'a mut Items<'a, 'py, N>,
    limit: usize,
) -> PyValue<'a, 'py> {
    let Some(object) = &held.object else { return Value::Absent };
    let Some(tuple) = held.tuple() else { return scalar(object.as_borrowed()) };
    let len = tuple.len();
    if len > limit {
        return Value::Seq { list: held.list, len, items: &[] };
    }
    let items = storage.fill(len, |i| item(tuple.as_borrowed(), i).map_or(Value::Absent, scalar));
    Value::Seq { list: held.list, len, items }
}

/// Reads `dict` by the dict rules into `array` (its head zeroed by the caller; extents past the
/// rank it writes are never read) and `fields`; returns the mask object, if any, for the caller
/// to convert. `array.descr` and `array.mask` are the caller's to set.
pub fn read_dict<'py>(
    dict: &Bound<'py, PyDict>,
    array: &mut CaiArray,
    fields: &mut Vec<CaiField>,
) -> CaiResult<Option<Bound<'py, PyAny>>> {
    let [version, shape, typestr, data, strides, stream, descr, mask] = values_of(dict)?;
    let [version, shape, typestr, data, strides, stream, mask] =
        [version, shape, typestr, data, strides, stream, mask].map(Held::new);
    let mut shape_items = Items::<8>::new();
    let mut strides_items = Items::<8>::new();
    let mut data_items = Items::<{ Limits::DATA }>::new();
    // The descr: numpy's one-entry form read straight from the entry (CuPy sends it with every
    // array); any other through tuple copies of its lists.
    let single = descr.as_ref().and_then(single_entry);
    let (single_name, mut single_items, single_top);
    let (descr_held, descr_copy);
    let mut descr_storage = None;
    let mut no_items = Items::<0>::new();
    let descr_value = if let Some(SingleEntry { entry, len, list }) = &single {
        single_items = first_items::<{ Limits::DESCR_ENTRY }>(Some(entry.as_borrowed()));
        // A (title, name) pair for a name: its items too (a str name reads as a str).
        if let Value::Seq { list: false, .. } = single_items[0] {
            if let Some(name) = item(entry.as_borrowed(), 0).and_then(|n| n.cast::<PyTuple>().ok()) {
                single_name = first_items::<{ Limits::DESCR_NAME }>(Some(name));
                single_items[0] =
                    Value::Seq { list: false, len: name.len(), items: &single_name[..name.len()] };
            }
        }
        single_top = [Value::Seq { list: false, len: *len, items: &single_items[..*len] }];
        Value::Seq { list: *list, len: 1, items: &single_top }
    } else {
        descr_held = Held::new(descr);
        match descr_held.tuple() {
            Some(entries) if entries.len() <= Limits::DESCR => {
                descr_copy = frozen(entries.clone().into_any(), 2)?;
                let storage = descr_storage.insert(DescrStorage::new());
                storage.value(
                    descr_copy.cast::<PyTuple>().expect("frozen keeps a tuple a tuple"),
                    descr_held.list,
                )
            }
            _ => sequence(&descr_held, &mut no_items, 0),
        }
    };
    let values = DictValues {
        version: plain(&version),
        shape: sequence(&shape, &mut shape_items, Limits::SHAPE),
        typestr: plain(&typestr),
        data: sequence(&data, &mut data_items, Limits::DATA),
        strides: sequence(&strides, &mut strides_items, Limits::STRIDES),
        stream: plain(&stream),
        descr: descr_value,
        mask: plain(&mask),
    };
    let has_mask = array_from_dict(&values, array, fields)?;
    Ok(if has_mask { mask.object.clone() } else { None })
}

/// The one entry of a descr that is a list or tuple of exactly one tuple (`entry`, held by a
/// strong reference; a tuple never changes) of `len` items, at most 3, with no list inside;
/// `list`: the descr is a list.
struct SingleEntry<'py> {
    entry: Bound<'py, PyTuple>,
    len: usize,
    list: bool,
}

fn single_entry<'py>(descr: &Bound<'py, PyAny>) -> Option<SingleEntry<'py>> {
    let (entry, list) = if is_list(descr.as_borrowed()) {
        // SAFETY: a list (or a subclass of one), checked above.
        let list = unsafe { descr.cast_unchecked::<PyList>() };
        ((list.len() == 1).then(|| list.get_item(0).ok()).flatten()?, true)
    } else {
        let tuple = as_tuple(descr).filter(|t| t.len() == 1)?;
        (tuple.get_item(0).ok()?, false)
    };
    let entry = into_tuple(entry)?;
    let len = entry.len();
    // Its items looked at borrowed; numpy's (name, typestr) strs by one compare of type each.
    let no_list = (0..len).all(|i| item(entry.as_borrowed(), i).is_some_and(|item| !holds_a_list(item, 0)));
    (len <= Limits::DESCR_ENTRY && no_list).then_some(SingleEntry { entry, len, list })
}

fn plain<'a, 'py>(held: &'a Held<'py>) -> PyValue<'a, 'py> {
    held.object.as_ref().map_or(Value::Absent, |o| scalar(o.as_borrowed()))
}

/// The values of `KEYS` in `dict`, each by a strong reference. One pass over the dict when all
/// its keys are the interned strs that literal keys in Python source are; a lookup per key
/// otherwise (those may run a key's `__eq__`, which is safe: nothing borrowed is held).
fn values_of<'py>(dict: &Bound<'py, PyDict>) -> PyResult<[Option<Bound<'py, PyAny>>; 8]> {
    let py = dict.py();
    let keys = interned_keys(py);
    let mut found: [Option<Bound<'py, PyAny>>; 8] = Default::default();
    let one_pass = pyo3::sync::critical_section::with_critical_section(dict, || {
        let mut position = 0;
        // SAFETY: the dict is locked (free-threading) or the GIL is held; no Python code runs
        // during the pass, and each value is taken as a strong reference before the next step.
        while let Some((key, value)) = unsafe { cpython::dict_next(dict, &mut position) } {
            match keys.iter().position(|known| known.as_ptr() == key.as_ptr()) {
                Some(i) => found[i] = Some(value.to_owned()),
                None => return false,
            }
        }
        true
    });
    if !one_pass {
        for (slot, key) in found.iter_mut().zip(keys) {
            *slot = dict.get_item(key.bind(py))?;
        }
    }
    Ok(found)
}

fn interned_keys(py: Python<'_>) -> &[Py<PyString>; 8] {
    static KEY_OBJECTS: pyo3::sync::PyOnceLock<[Py<PyString>; 8]> = pyo3::sync::PyOnceLock::new();
    KEY_OBJECTS.get_or_init(py, || KEYS.map(|key| PyString::intern(py, key).unbind()))
}

/// `object` with every list down to `depth` levels below it replaced by a tuple copy, so that
/// what is read cannot change. A tuple with no list inside is kept as it is.
fn frozen(object: Bound<'_, PyAny>, depth: usize) -> PyResult<Bound<'_, PyAny>> {
    let (object, _) = tuple_copy(object);
    let Ok(tuple) = object.cast::<PyTuple>() else { return Ok(object) };
    if depth == 0 || !tuple.iter_borrowed().any(|item| holds_a_list(item, depth - 1)) {
        return Ok(object);
    }
    let items = tuple.iter().map(|item| frozen(item, depth - 1)).collect::<PyResult<Vec<_>>>()?;
    Ok(PyTuple::new(object.py(), items)?.into_any())
}

/// Whether `object` is a list, or a tuple holding one down to `depth` levels below it. Its items
/// are looked at borrowed: a tuple holds them (no reference taken per item, which a descr's
/// entries cost twice per call).
fn holds_a_list(object: Borrowed<'_, '_, PyAny>, depth: usize) -> bool {
    // A str (a descr's name or typestr) by one compare of its type.
    if is_exactly(object, Builtin::Str) {
        return false;
    }
    if is_list(object) {
        return true;
    }
    match object.cast::<PyTuple>() {
        Ok(tuple) if depth > 0 => tuple.iter_borrowed().any(|item| holds_a_list(item, depth - 1)),
        _ => false,
    }
}

/// The values of a descr (its tuples frozen): per entry its items, and per (title, name) pair
/// its two items, each level borrowing the one below. Inline for up to 4 entries.
struct DescrStorage<'a, 'py> {
    entry_tuples: Buf<Option<Borrowed<'a, 'py, PyTuple>>, 4>,
    names: Buf<[PyValue<'a, 'py>; Limits::DESCR_NAME], 4>,
    entries: Buf<[PyValue<'a, 'py>; Limits::DESCR_ENTRY], 4>,
    top: Items<'a, 'py, 4>,
}

impl<'a, 'py> DescrStorage<'a, 'py> {
    fn new() -> Self {
        DescrStorage { entry_tuples: Buf::new(), names: Buf::new(), entries: Buf::new(), top: Buf::new() }
    }

    fn value(&'a mut self, descr: &'a Bound<'py, PyTuple>, list: bool) -> PyValue<'a, 'py> {
        let DescrStorage { entry_tuples, names, entries, top } = self;
        let len = descr.len();
        let descr = descr.as_borrowed();
        let entry_tuples: &'a [_] =
            entry_tuples.fill(len, |i| item(descr, i).and_then(|e| e.cast::<PyTuple>().ok()));
        let name_tuple = |entry: &Option<Borrowed<'a, 'py, PyTuple>>| {
            entry.and_then(|e| item(e, 0)).and_then(|n| n.cast::<PyTuple>().ok())
        };
        let names: &'a [_] = names.fill(len, |i| first_items(name_tuple(&entry_tuples[i])));
        let entries: &'a [_] = entries.fill(len, |i| {
            let mut values = first_items(entry_tuples[i]);
            if let Some(name) = name_tuple(&entry_tuples[i]).filter(|n| n.len() <= Limits::DESCR_NAME) {
                values[0] = Value::Seq { list: false, len: name.len(), items: &names[i][..name.len()] };
            }
            values
        });
        let top = top.fill(len, |i| match entry_tuples[i] {
            Some(tuple) if tuple.len() <= Limits::DESCR_ENTRY => {
                Value::Seq { list: false, len: tuple.len(), items: &entries[i][..tuple.len()] }
            }
            _ => item(descr, i).map_or(Value::Absent, scalar),
        });
        Value::Seq { list, len, items: top }
    }
}

/// The first N items of a tuple as scalars (Absent past its end).
fn first_items<'a, 'py, const N: usize>(tuple: Option<Borrowed<'a, 'py, PyTuple>>) -> [PyValue<'a, 'py>; N] {
    let mut values = [Value::Absent; N];
    if let Some(tuple) = tuple {
        for (i, slot) in values.iter_mut().enumerate().take(tuple.len()) {
            *slot = item(tuple, i).map_or(Value::Absent, scalar);
        }
    }
    values
}

/// Item `i` of a tuple, borrowed for as long as the tuple is (tuples never change).
fn item<'a, 'py>(tuple: Borrowed<'a, 'py, PyTuple>, i: usize) -> Option<Borrowed<'a, 'py, PyAny>> {
    // Past the end, the IndexError is cleared by the interpreter (see values.rs).
    cpython::tuple_item(tuple, i)
}

/// A CAI dict (the object, or what its `__cuda_array_interface__` gave), read once. One with
/// neither a mask nor named descr fields (every framework's) is written into the caller's
/// struct, an owning one holding a reference to `obj` (no Array made for it: a box, 280 bytes
/// moved, its drop); any other is described from what was read, for an Array to own.
pub fn import_by_dict(
    obj: &Bound<'_, PyAny>,
    dict: &Bound<'_, PyDict>,
    request: &Request,
    hold: &mut Hold<'_>,
) -> CaiResult<Outcome> {
    let (array, fields, mask) = read_dict_pooled(dict)?;
    let plain = mask.is_none() && fields.is_empty();
    // No device is read with a dict: its memory is pointer-checked as the options say.
    match hold {
        Hold::OwnInto(out, _) if plain => imported_holding_object(obj, &array, None, request, None, out),
        Hold::Borrow(out) | Hold::BorrowOrOwn(out, _) if plain => {
            import_then_copy(obj.py(), &array, None, *request.options, None, out)?;
            Ok(Outcome::Written)
        }
        Hold::Borrow(_) if mask.is_some() => {
            Err(cannot_borrow("a mask (its struct would need memory of its own)"))
        }
        Hold::Borrow(_) => {
            Err(cannot_borrow("named descr fields (their CaiFields would need memory of their own)"))
        }
        Hold::Own(to_own) | Hold::OwnInto(_, to_own) | Hold::BorrowOrOwn(_, to_own) => {
            owned(obj, interface_read(obj, array, fields, mask)?, request, to_own)
        }
    }
}
