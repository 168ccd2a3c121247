//! The dict form of the interface: the rules about what each key of a
//! `__cuda_array_interface__` dict may hold, applied to values a binding has read out of the
//! dict. A binding only reads (Python's job: attributes, strong references, stream objects);
//! every rule lives here, and the rules about the resulting `CaiArray` stay in `validate`.
//!
//! Type rules (a bool is not an integer, `stream: 0` is disallowed, lists stand for tuples)
//! and "fits in the struct" rules are here; value rules (negative extents, NULL data with
//! elements, descr itemsizes) are `validate`'s, so that C and Python share them.

use std::fmt::{self, Display, Write};

use crate::abi::{CaiArray, CaiField, CAI_FIELD_NAME_CAPACITY, CAI_MAX_NDIM};
use crate::dtype::{canonical_typestr, parse_typestr, quote};
use crate::status::{Error, Result, Status};

/// Most entries a dict's `descr` may list. numpy sets no limit; this one bounds the work and
/// memory a hostile dict can ask for before anything is converted.
pub const MAX_DESCR_FIELDS: usize = 1 << 16;

/// Characters of a value quoted in a message, at most; longer ones end in "...".
const QUOTE_LIMIT: usize = 80;

/// One value read out of the dict, as the rules see it.
#[derive(Clone, Copy, Debug)]
pub enum Value<'a, O = &'a str> {
    /// The key is not in the dict.
    Absent,
    /// Python's `None`.
    None,
    /// A `bool`.
    Bool(bool),
    /// An integer (an `int`, or an object with `__index__`), never a bool, that fits in i64.
    Int(i64),
    /// An integer above i64::MAX that fits in u64 (pointers and stream handles can be).
    UInt(u64),
    /// An integer beyond those; true when negative.
    HugeInt(bool),
    /// A `float`.
    Float(f64),
    /// A `str`.
    Str(&'a str),
    /// A tuple (`list` false) or list. `items` holds the items that were read: all of them, or
    /// none when `len` is above the limit the binding was given (`Limits`).
    Seq {
        /// A list, not a tuple.
        list: bool,
        /// The sequence's length.
        len: usize,
        /// The items read (see above).
        items: &'a [Value<'a, O>],
    },
    /// Any other object, shown in messages by its type's name (`O` displays it). A str that
    /// is not valid Unicode is one too.
    Other(O),
}

/// How many items of each sequence a binding reads; longer ones are refused unread.
pub struct Limits;

/// cbindgen:ignore
impl Limits {
    /// Extents of `shape`.
    pub const SHAPE: usize = CAI_MAX_NDIM;
    /// Entries of `strides`.
    pub const STRIDES: usize = CAI_MAX_NDIM;
    /// Items of `data`: (pointer, read-only flag), and two more, so that a `data` of three or
    /// four items is quoted in full in the message that refuses it.
    pub const DATA: usize = 4;
    /// Entries of `descr`.
    pub const DESCR: usize = MAX_DESCR_FIELDS;
    /// One descr entry: (name, typestr) or (name, typestr, shape).
    pub const DESCR_ENTRY: usize = 3;
    /// A descr name may be a (title, name) pair.
    pub const DESCR_NAME: usize = 2;
}

impl<O: Display + Copy> Value<'_, O> {
    fn is_none(&self) -> bool {
        matches!(self, Value::Absent | Value::None)
    }

    fn items(&self, limit: usize) -> Option<&[Value<'_, O>]> {
        match self {
            Value::Seq { len, items, .. } if *len <= limit && items.len() == *len => Some(items),
            _ => None,
        }
    }

    fn write_repr(&self, out: &mut Bounded) -> fmt::Result {
        match *self {
            Value::Absent => out.write_str("<absent>"),
            Value::None => out.write_str("None"),
            Value::Bool(b) => out.write_str(if b { "True" } else { "False" }),
            Value::Int(n) => write!(out, "{n}"),
            Value::UInt(n) => write!(out, "{n}"),
            Value::HugeInt(negative) => out.write_str(if negative {
                "<a negative integer beyond 64 bits>"
            } else {
                "<an integer beyond 64 bits>"
            }),
            Value::Float(x) => write!(out, "{x:?}"),
            Value::Str(s) => write_python_str(out, s),
            Value::Seq { list, len, items } => {
                out.write_str(if list { "[" } else { "(" })?;
                if items.len() < len {
                    write!(out, "<{len} items>")?;
                }
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.write_str(", ")?;
                    }
                    item.write_repr(out)?;
                }
                out.write_str(match (list, len) {
                    (true, _) => "]",
                    (false, 1) => ",)",
                    (false, _) => ")",
                })
            }
            Value::Other(type_name) => write!(out, "<{type_name} object>"),
        }
    }
}

/// A value as Python's `repr` would show it, cut to a bounded prefix.
pub struct Repr<'v, 'a, O>(pub &'v Value<'a, O>);

impl<O: Display + Copy> Display for Repr<'_, '_, O> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut bounded = Bounded { text: String::new(), full: false };
        // A full buffer stops the walk early with an error that only means "enough".
        let _ = self.0.write_repr(&mut bounded);
        f.write_str(&bounded.text)?;
        if bounded.full {
            f.write_str("...")?;
        }
        Ok(())
    }
}

struct Bounded {
    text: String,
    full: bool,
}

impl Write for Bounded {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        for c in s.chars() {
            if self.text.len() >= QUOTE_LIMIT {
                self.full = true;
                return Err(fmt::Error);
            }
            self.text.push(c);
        }
        Ok(())
    }
}

fn write_python_str(out: &mut Bounded, s: &str) -> fmt::Result {
    let quote_char = if s.contains('\'') && !s.contains('"') { '"' } else { '\'' };
    out.write_char(quote_char)?;
    for c in s.chars() {
        match c {
            '\\' => out.write_str("\\\\")?,
            '\n' => out.write_str("\\n")?,
            '\r' => out.write_str("\\r")?,
            '\t' => out.write_str("\\t")?,
            c if c == quote_char => write!(out, "\\{c}")?,
            c if (c as u32) < 0x20 || c as u32 == 0x7f => write!(out, "\\x{:02x}", c as u32)?,
            c => out.write_char(c)?,
        }
    }
    out.write_char(quote_char)
}

/// The values of the keys a descriptor dict may hold.
#[derive(Clone, Copy, Debug)]
pub struct DictValues<'a, O = &'a str> {
    /// The value of `version`.
    pub version: Value<'a, O>,
    /// The value of `shape`.
    pub shape: Value<'a, O>,
    /// The value of `typestr`.
    pub typestr: Value<'a, O>,
    /// The value of `data`.
    pub data: Value<'a, O>,
    /// The value of `strides`.
    pub strides: Value<'a, O>,
    /// The value of `stream`.
    pub stream: Value<'a, O>,
    /// The value of `descr`.
    pub descr: Value<'a, O>,
    /// The value of `mask`.
    pub mask: Value<'a, O>,
}

/// The keys `DictValues` holds, in its field order.
pub const KEYS: [&str; 8] = ["version", "shape", "typestr", "data", "strides", "stream", "descr", "mask"];

/// Fills `array` (every field but the extents zeroed by the caller; it writes the extents of the
/// rank it reads, and none past them is read) from a dict's values by the dict rules, and
/// `fields` with its descr (the array's `descr` pointer is left for the caller to set where
/// `fields` will live). Returns whether the dict has a mask for the caller to convert and attach;
/// `validate` is still owed on the result.
pub fn array_from_dict<O: Display + Copy>(
    values: &DictValues<'_, O>,
    array: &mut CaiArray,
    fields: &mut Vec<CaiField>,
) -> Result<bool> {
    let version = version_is_a_known_integer(&values.version)?;
    array.version = version;
    let shape = shape_is_a_sequence_of_extents(&values.shape)?;
    array.ndim = shape.len() as i32;
    for (i, extent) in shape.iter().enumerate() {
        array.shape[i] = extent_fits_in_64_bits(extent, i)?;
    }
    typestr_is_a_string_that_fits(&values.typestr, array)?;
    let (data, readonly) = data_is_a_pointer_and_flag(&values.data, version, shape)?;
    array.data = data;
    array.readonly = u32::from(readonly);
    if let Some(strides) = strides_match_shape(&values.strides, shape.len())? {
        for (i, stride) in strides.iter().enumerate() {
            array.strides[i] = stride_fits_in_64_bits(stride, i)?;
        }
        array.strides_given = 1;
    }
    array.stream = stream_is_none_or_a_handle(&values.stream, version)?;
    if !descr_restates_the_typestr(&values.descr, array) {
        descr_lists_named_fields(&values.descr, fields)?;
    }
    array.descr_count = fields.len() as u32; // at most MAX_DESCR_FIELDS
    mask_is_allowed_by_version(&values.mask, version)
}

/// A required key is there: one wording for every missing key.
fn required_key_is_present<O>(key: &str, value: &Value<'_, O>, status: Status) -> Result<()> {
    match value {
        Value::Absent => Err(Error::new(status, format!("{key} is missing; it is a required key"))),
        _ => Ok(()),
    }
}

/// `version` is required and is an integer (not a bool) from 0 to 3.
pub fn version_is_a_known_integer<O: Display + Copy>(version: &Value<'_, O>) -> Result<i32> {
    required_key_is_present("version", version, Status::InvalidVersion)?;
    match version {
        Value::Int(n @ 0..=3) => Ok(*n as i32),
        other => Err(Error::new(
            Status::InvalidVersion,
            format!("version {} is not a CAI version (0 to 3)", Repr(other)),
        )),
    }
}

/// `shape` is a tuple (or list) of at most CAI_MAX_NDIM integers.
pub fn shape_is_a_sequence_of_extents<'v, O: Display + Copy>(
    shape: &'v Value<'v, O>,
) -> Result<&'v [Value<'v, O>]> {
    required_key_is_present("shape", shape, Status::InvalidShape)?;
    match shape {
        Value::Seq { len, .. } if *len > CAI_MAX_NDIM => Err(Error::new(
            Status::InvalidShape,
            format!("shape has {len} dimensions; CAI_MAX_NDIM is {CAI_MAX_NDIM}"),
        )),
        _ => shape.items(Limits::SHAPE).ok_or_else(|| {
            Error::new(Status::InvalidShape, format!("shape {} is not a tuple of integers", Repr(shape)))
        }),
    }
}

/// An extent is an integer that fits in i64 (its sign is `validate`'s rule).
fn extent_fits_in_64_bits<O: Display + Copy>(extent: &Value<'_, O>, i: usize) -> Result<i64> {
    match extent {
        Value::Int(n) => Ok(*n),
        Value::UInt(_) | Value::HugeInt(false) => Err(Error::new(
            Status::Overflow,
            format!("shape[{i}] is {}, which does not fit in 64 bits", Repr(extent)),
        )),
        Value::HugeInt(true) => Err(Error::new(
            Status::InvalidShape,
            format!("shape[{i}] is {}; extents must be >= 0", Repr(extent)),
        )),
        other => {
            Err(Error::new(Status::InvalidShape, format!("shape[{i}] is {}, not an integer", Repr(other))))
        }
    }
}

fn stride_fits_in_64_bits<O: Display + Copy>(stride: &Value<'_, O>, i: usize) -> Result<i64> {
    match stride {
        Value::Int(n) => Ok(*n),
        Value::UInt(_) | Value::HugeInt(_) => Err(Error::new(
            Status::Overflow,
            format!("strides[{i}] is {}, which does not fit in 64 bits", Repr(stride)),
        )),
        other => Err(Error::new(
            Status::InvalidStrides,
            format!("strides[{i}] is {}, not an integer", Repr(other)),
        )),
    }
}

/// `typestr` is a str that fits the struct's buffer with its NUL (its grammar is `validate`'s).
/// The struct carries it in numpy's canonical spelling (`dtype.str`: `f4` and `=f4` are `<f4`
/// on a little-endian host, `<u1` is `|u1`), so that a consumer of the struct sees what the
/// export says; a typestr that does not parse is kept as written, for `validate` to name.
pub fn typestr_is_a_string_that_fits<O: Display + Copy>(
    typestr: &Value<'_, O>,
    array: &mut CaiArray,
) -> Result<()> {
    required_key_is_present("typestr", typestr, Status::InvalidTypestr)?;
    match typestr {
        Value::Str(s) if array.set_typestr(s) => {
            match canonical_typestr(s.as_bytes()) {
                Ok(canonical) if canonical.as_bytes() != s.as_bytes() => {
                    array.set_typestr(canonical.as_str());
                }
                _ => {}
            }
            Ok(())
        }
        Value::Str(_) => Err(Error::new(
            Status::InvalidTypestr,
            format!("typestr {} is too long or holds a NUL", Repr(typestr)),
        )),
        Value::Other(type_name) if type_name.to_string() == "str" => {
            Err(Error::new(Status::InvalidTypestr, "typestr is a str that is not valid Unicode"))
        }
        other => Err(Error::new(Status::InvalidTypestr, format!("typestr {} is not a string", Repr(other)))),
    }
}

/// `data` is a 2-tuple: an integer address and a bool read-only flag. Versions 0 and 1 allow
/// `None` for the pointer of a zero-size array (old Numba exported that).
pub fn data_is_a_pointer_and_flag<O: Display + Copy>(
    data: &Value<'_, O>,
    version: i32,
    shape: &[Value<'_, O>],
) -> Result<(u64, bool)> {
    required_key_is_present("data", data, Status::InvalidData)?;
    let Some([pointer, readonly]) =
        data.items(Limits::DATA).and_then(|items| <&[_; 2]>::try_from(items).ok())
    else {
        let has = match data {
            Value::Seq { len, .. } => format!("; it has {len} item{}", plural(*len)),
            _ => String::new(),
        };
        return Err(Error::new(
            Status::InvalidData,
            format!("data {} is not a 2-tuple (pointer, read-only flag){has}", Repr(data)),
        ));
    };
    let zero_size = shape.iter().any(|extent| matches!(extent, Value::Int(0)));
    let pointer = match pointer {
        Value::None if version <= 1 && zero_size => 0,
        Value::Int(n @ 0..) => *n as u64,
        Value::UInt(n) => *n,
        other => return Err(not_an_address(other)),
    };
    match readonly {
        Value::Bool(flag) => Ok((pointer, *flag)),
        other => {
            Err(Error::new(Status::InvalidData, format!("data read-only flag {} is not a bool", Repr(other))))
        }
    }
}

fn not_an_address<O: Display + Copy>(pointer: &Value<'_, O>) -> Error {
    Error::new(Status::InvalidData, format!("data pointer {} is not an integer address", Repr(pointer)))
}

/// `strides` is absent, None, or a tuple (or list) with one integer per dimension.
pub fn strides_match_shape<'v, O: Display + Copy>(
    strides: &'v Value<'v, O>,
    ndim: usize,
) -> Result<Option<&'v [Value<'v, O>]>> {
    if strides.is_none() {
        return Ok(None);
    }
    match strides {
        Value::Seq { len, .. } if *len != ndim => Err(Error::new(
            Status::InvalidStrides,
            format!(
                "strides {} has {len} entr{} but shape has {ndim} dimension{}; give one stride in bytes per dimension, or None for a C-contiguous array",
                Repr(strides),
                if *len == 1 { "y" } else { "ies" },
                plural(ndim)
            ),
        )),
        _ => strides.items(Limits::STRIDES).map(Some).ok_or_else(|| {
            Error::new(
                Status::InvalidStrides,
                format!("strides {} is neither None nor a tuple of integers", Repr(strides)),
            )
        }),
    }
}

/// `stream` came in version 3 (an earlier version's is ignored): None, or an integer handle
/// from 1 to 2^64 - 1. The spec disallows 0, which would be ambiguous with None.
pub fn stream_is_none_or_a_handle<O: Display + Copy>(stream: &Value<'_, O>, version: i32) -> Result<u64> {
    if version < 3 || stream.is_none() {
        return Ok(0);
    }
    match stream {
        Value::Int(0) => Err(Error::new(
            Status::InvalidStream,
            "stream 0 is disallowed by the spec; use None, 1 (legacy) or 2 (per-thread)",
        )),
        Value::Int(n @ 1..) => Ok(*n as u64),
        Value::UInt(n) => Ok(*n),
        Value::Int(_) | Value::HugeInt(_) => Err(Error::new(
            Status::InvalidStream,
            format!("stream {} is not a valid stream handle", Repr(stream)),
        )),
        other => Err(Error::new(
            Status::InvalidStream,
            format!("stream {} is neither None nor an integer", Repr(other)),
        )),
    }
}

/// What a consumer's stream may be, ending every message that refuses one.
const CONSUMER_STREAMS: &str =
    "a consumer stream is None (no stream), 1 (the legacy default stream), 2 (the per-thread default stream) or a CUstream handle (an integer from 3 to 2**64 - 1)";

/// A consumer's stream, given as an integer: 1, 2 or a CUstream handle. 0 is refused as
/// ambiguous; `None` is the caller's "no consumer stream".
pub fn consumer_stream_is_a_handle<O: Display + Copy>(stream: &Value<'_, O>) -> Result<u64> {
    let why = match stream {
        Value::Int(n @ 1..) => return Ok(*n as u64),
        Value::UInt(n) => return Ok(*n),
        Value::Int(0) => "is ambiguous (the legacy default stream, or no stream?)",
        Value::Int(_) | Value::HugeInt(true) => "is negative",
        Value::HugeInt(false) => "is above 2**64 - 1",
        _ => "is not an integer",
    };
    Err(Error::new(Status::InvalidStream, format!("stream {} {why}; {CONSUMER_STREAMS}", Repr(stream))))
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

/// The handle of a consumer's stream object (cuda.core's `__cuda_stream__`, CuPy's `.ptr`,
/// PyTorch's `.cuda_stream`): a NULL handle is the legacy default stream, which those
/// libraries report as 0; else the same range as an integer stream.
pub fn stream_object_handle_is_a_handle<O: Display + Copy>(handle: &Value<'_, O>) -> Result<u64> {
    match handle {
        Value::Int(0) => Ok(crate::abi::CAI_STREAM_LEGACY),
        other => consumer_stream_is_a_handle(other),
    }
}

/// `descr`, where given, is a non-empty list of (name, typestr) pairs, a name being a str or a
/// (title, name) pair; subarray shapes and nested fields are not supported. Fills `fields`
/// with offsets laid one after another; `validate` checks that they add up.
pub fn descr_lists_named_fields<O: Display + Copy>(
    descr: &Value<'_, O>,
    fields: &mut Vec<CaiField>,
) -> Result<()> {
    fields.clear();
    if descr.is_none() {
        return Ok(());
    }
    let descr_error = |message: String| Error::new(Status::InvalidDescr, message);
    if let Value::Seq { len, .. } = descr {
        if *len > MAX_DESCR_FIELDS {
            return Err(descr_error(format!("descr has {len} fields; at most {MAX_DESCR_FIELDS} are read")));
        }
    }
    let entries = descr.items(Limits::DESCR).filter(|entries| !entries.is_empty()).ok_or_else(|| {
        descr_error(format!("descr {} is not a non-empty list of (name, typestr) pairs", Repr(descr)))
    })?;
    fields.reserve_exact(entries.len());
    let mut offset: u64 = 0;
    for (i, entry) in entries.iter().enumerate() {
        let (name, typestr) = match entry.items(Limits::DESCR_ENTRY) {
            Some([name, typestr]) => (name, typestr),
            Some([_, _, shape]) => {
                return Err(descr_error(format!(
                    "descr[{i}] has a subarray shape {}, which libcai does not support",
                    Repr(shape)
                )))
            }
            _ => {
                return Err(descr_error(format!("descr[{i}] {} is not a (name, typestr) pair", Repr(entry))))
            }
        };
        let name = match name.items(Limits::DESCR_NAME) {
            Some([_title, name]) => name,
            _ => name,
        };
        let (Value::Str(name), Value::Str(typestr)) = (name, typestr) else {
            return Err(descr_error(format!(
                "descr[{i}] {} needs a str name and a str typestr (nested fields are not supported)",
                Repr(entry)
            )));
        };
        let dtype = parse_typestr(typestr.as_bytes())
            .map_err(|e| descr_error(format!("descr[{i}] ({}): {}", quote(name.as_bytes()), e.message)))?;
        let field = CaiField::new(name, typestr, offset).ok_or_else(|| {
            descr_error(format!(
                "descr[{i}] name or typestr is too long or holds a NUL (names hold {} bytes)",
                CAI_FIELD_NAME_CAPACITY - 1
            ))
        })?;
        fields.push(field);
        offset = offset.saturating_add(dtype.itemsize);
    }
    Ok(())
}

/// numpy's default descr, one unnamed field of the array's own type (`[('', '<f4')]` with
/// typestr `<f4`), says nothing the typestr does not: it is not carried, so that arrays with
/// and without it are the same array (and export the same way).
pub fn descr_restates_the_typestr<O: Display + Copy>(descr: &Value<'_, O>, array: &CaiArray) -> bool {
    let Some([entry]) = descr.items(Limits::DESCR) else { return false };
    let Some([Value::Str(""), Value::Str(field_type)]) = entry.items(Limits::DESCR_ENTRY) else {
        return false;
    };
    let Some(array_type) = array.typestr_bytes() else { return false };
    field_type.as_bytes() == array_type
        || matches!((parse_typestr(field_type.as_bytes()), parse_typestr(array_type)), (Ok(a), Ok(b)) if a == b)
}

/// `mask` came in version 1. Returns whether one is given.
pub fn mask_is_allowed_by_version<O: Display + Copy>(mask: &Value<'_, O>, version: i32) -> Result<bool> {
    match (mask.is_none(), version) {
        (true, _) => Ok(false),
        (false, 0) => Err(Error::new(
            Status::InvalidMask,
            "mask is given but CAI version 0 has no mask (it came in version 1)",
        )),
        (false, _) => Ok(true),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type V<'a> = Value<'a, &'a str>;

    fn tuple<'a>(items: &'a [V<'a>]) -> V<'a> {
        Value::Seq { list: false, len: items.len(), items }
    }

    fn list<'a>(items: &'a [V<'a>]) -> V<'a> {
        Value::Seq { list: true, len: items.len(), items }
    }

    fn base<'a>(shape: &'a [V<'a>], data: &'a [V<'a>]) -> DictValues<'a, &'a str> {
        DictValues {
            version: Value::Int(3),
            shape: tuple(shape),
            typestr: Value::Str("<f4"),
            data: tuple(data),
            strides: Value::Absent,
            stream: Value::Absent,
            descr: Value::Absent,
            mask: Value::Absent,
        }
    }

    fn read(values: &DictValues<'_, &str>) -> Result<(CaiArray, Vec<CaiField>, bool)> {
        let mut array = CaiArray::zeroed();
        let mut fields = Vec::new();
        let mask = array_from_dict(values, &mut array, &mut fields)?;
        Ok((array, fields, mask))
    }

    const SHAPE: [V<'static>; 2] = [Value::Int(2), Value::Int(3)];
    const DATA: [V<'static>; 2] = [Value::Int(0x1000), Value::Bool(false)];

    #[test]
    fn a_plain_dict_fills_the_array() {
        let (array, fields, mask) = read(&base(&SHAPE, &DATA)).unwrap();
        assert_eq!((array.version, array.ndim, &array.shape[..2]), (3, 2, &[2i64, 3][..]));
        assert_eq!((array.data, array.readonly, array.strides_given, array.stream), (0x1000, 0, 0, 0));
        assert_eq!(array.typestr_bytes(), Some(&b"<f4"[..]));
        assert!(fields.is_empty() && !mask);
        let lists = DictValues { shape: list(&SHAPE), data: list(&DATA), ..base(&SHAPE, &DATA) };
        assert_eq!(read(&lists).unwrap().0.shape[..2], [2, 3], "lists stand for tuples");
    }

    #[test]
    fn every_missing_required_key_is_named_in_one_wording() {
        let shape = read(&DictValues { shape: Value::Absent, ..base(&SHAPE, &DATA) }).unwrap_err();
        let typestr = read(&DictValues { typestr: Value::Absent, ..base(&SHAPE, &DATA) }).unwrap_err();
        let data = read(&DictValues { data: Value::Absent, ..base(&SHAPE, &DATA) }).unwrap_err();
        for (e, key) in [(shape, "shape"), (typestr, "typestr"), (data, "data")] {
            assert_eq!(e.message, format!("{key} is missing; it is a required key"));
        }
    }

    #[test]
    fn version_is_required_and_an_integer_from_0_to_3() {
        for (version, part) in [
            (Value::Absent, "missing"),
            (Value::Int(4), "version 4"),
            (Value::Bool(true), "version True"),
            (Value::Str("3"), "version '3'"),
            (Value::Float(3.0), "version 3.0"),
            (Value::None, "version None"),
            (Value::HugeInt(false), "beyond 64 bits"),
        ] {
            let e = read(&DictValues { version, ..base(&SHAPE, &DATA) }).unwrap_err();
            assert_eq!(e.status, Status::InvalidVersion);
            assert!(e.message.contains(part), "{}", e.message);
        }
    }

    #[test]
    fn shape_must_be_a_sequence_of_integers_that_fit() {
        let status = |shape: V<'_>| read(&DictValues { shape, ..base(&SHAPE, &DATA) }).unwrap_err().status;
        assert_eq!(status(Value::Int(3)), Status::InvalidShape);
        assert_eq!(status(tuple(&[Value::Float(1.5)])), Status::InvalidShape);
        assert_eq!(status(tuple(&[Value::Bool(true)])), Status::InvalidShape);
        assert_eq!(status(tuple(&[Value::UInt(1 << 63)])), Status::Overflow);
        assert_eq!(status(tuple(&[Value::HugeInt(false)])), Status::Overflow);
        assert_eq!(status(tuple(&[Value::HugeInt(true)])), Status::InvalidShape);
        let long = Value::Seq { list: false, len: 65, items: &[] };
        let e = read(&DictValues { shape: long, ..base(&SHAPE, &DATA) }).unwrap_err();
        assert!(e.message.contains("65 dimensions") && e.message.contains("64"), "{}", e.message);
        // A negative extent fits: it is validate's rule that refuses it.
        assert_eq!(
            read(&DictValues { shape: tuple(&[Value::Int(-1)]), ..base(&SHAPE, &DATA) }).unwrap().0.shape[0],
            -1
        );
    }

    #[test]
    fn typestr_must_be_a_string_that_fits() {
        let status = |typestr: V<'_>| read(&DictValues { typestr, ..base(&SHAPE, &DATA) }).unwrap_err();
        assert!(status(Value::Int(4)).message.contains("typestr 4 is not a string"));
        assert!(status(Value::Str(&"x".repeat(40))).message.contains("too long"));
        assert!(status(Value::Str("f4\0")).message.contains("NUL"));
        assert!(status(Value::Other("str")).message.contains("not valid Unicode"));
    }

    #[test]
    fn data_is_an_address_and_a_bool() {
        let status = |data: V<'_>| read(&DictValues { data, ..base(&SHAPE, &DATA) }).map(|r| r.0.data);
        for bad in [
            tuple(&[Value::Int(0x1000)]),
            Value::Int(0x1000),
            tuple(&[Value::Bool(true), Value::Bool(false)]),
            tuple(&[Value::Int(-8), Value::Bool(false)]),
            tuple(&[Value::HugeInt(false), Value::Bool(false)]),
            tuple(&[Value::Int(8), Value::Int(0)]),
            tuple(&[Value::Int(8), Value::None]),
        ] {
            assert_eq!(status(bad).unwrap_err().status, Status::InvalidData, "{}", Repr(&bad));
        }
        assert_eq!(status(tuple(&[Value::UInt(u64::MAX), Value::Bool(true)])).unwrap(), u64::MAX);
    }

    #[test]
    fn a_data_of_the_wrong_length_is_quoted_with_its_length() {
        let with = |data: V<'_>| read(&DictValues { data, ..base(&SHAPE, &DATA) }).unwrap_err().message;
        let three = [Value::Int(4096), Value::Bool(false), Value::Int(7)];
        assert_eq!(
            with(tuple(&three)),
            "data (4096, False, 7) is not a 2-tuple (pointer, read-only flag); it has 3 items"
        );
        assert_eq!(
            with(list(&three[..1])),
            "data [4096] is not a 2-tuple (pointer, read-only flag); it has 1 item"
        );
        assert_eq!(with(Value::Int(4096)), "data 4096 is not a 2-tuple (pointer, read-only flag)");
    }

    #[test]
    fn a_none_pointer_is_zero_only_for_old_empty_arrays() {
        let empty = [Value::Int(0)];
        let none = [Value::None, Value::Bool(false)];
        let old = DictValues { version: Value::Int(1), ..base(&empty, &none) };
        assert_eq!(read(&old).unwrap().0.data, 0);
        assert_eq!(read(&base(&empty, &none)).unwrap_err().status, Status::InvalidData);
        let full = DictValues { version: Value::Int(0), ..base(&SHAPE, &none) };
        assert_eq!(read(&full).unwrap_err().status, Status::InvalidData);
    }

    #[test]
    fn strides_match_the_shape() {
        let with = |strides: V<'_>| read(&DictValues { strides, ..base(&SHAPE, &DATA) });
        let (array, _, _) = with(list(&[Value::Int(4), Value::Int(8)])).unwrap();
        assert_eq!((array.strides_given, &array.strides[..2]), (1, &[4i64, 8][..]));
        assert_eq!(with(Value::None).unwrap().0.strides_given, 0);
        assert_eq!(with(tuple(&[Value::Int(4)])).unwrap_err().status, Status::InvalidStrides);
        assert_eq!(with(Value::Int(4)).unwrap_err().status, Status::InvalidStrides);
        assert_eq!(
            with(tuple(&[Value::Int(4), Value::Float(1.0)])).unwrap_err().status,
            Status::InvalidStrides
        );
        assert_eq!(with(tuple(&[Value::Int(4), Value::UInt(1 << 63)])).unwrap_err().status, Status::Overflow);
    }

    #[test]
    fn strides_of_the_wrong_length_are_quoted_with_the_dimensions_expected() {
        let with = |strides: V<'_>| read(&DictValues { strides, ..base(&SHAPE, &DATA) }).unwrap_err().message;
        assert_eq!(
            with(tuple(&[Value::Int(8)])),
            "strides (8,) has 1 entry but shape has 2 dimensions; give one stride in bytes per dimension, or None for a C-contiguous array"
        );
        let three = [Value::Int(8), Value::Int(4), Value::Int(4)];
        assert!(with(list(&three)).starts_with("strides [8, 4, 4] has 3 entries but shape has 2 dimensions;"));
    }

    #[test]
    fn stream_is_none_or_a_nonzero_handle_from_version_3() {
        let with = |stream: V<'_>, version| {
            read(&DictValues { stream, version: Value::Int(version), ..base(&SHAPE, &DATA) })
                .map(|r| r.0.stream)
        };
        assert_eq!(with(Value::None, 3).unwrap(), 0);
        assert_eq!(with(Value::Int(7), 3).unwrap(), 7);
        assert_eq!(with(Value::UInt(u64::MAX), 3).unwrap(), u64::MAX);
        assert_eq!(with(Value::Int(0), 2).unwrap(), 0, "ignored before version 3");
        let e = with(Value::Int(0), 3).unwrap_err();
        assert!(e.status == Status::InvalidStream && e.message.contains("disallowed"), "{}", e.message);
        for bad in
            [Value::Int(-5), Value::Bool(true), Value::Str("1"), Value::HugeInt(false), Value::Float(7.0)]
        {
            assert_eq!(with(bad, 3).unwrap_err().status, Status::InvalidStream, "{}", Repr(&bad));
        }
    }

    #[test]
    fn a_refused_consumer_stream_is_told_why_and_what_a_stream_may_be() {
        let message = |stream: V<'_>| consumer_stream_is_a_handle::<&str>(&stream).unwrap_err().message;
        let valid = "a consumer stream is None (no stream), 1 (the legacy default stream), 2 (the per-thread default stream) or a CUstream handle (an integer from 3 to 2**64 - 1)";
        assert_eq!(message(Value::Int(-3)), format!("stream -3 is negative; {valid}"));
        assert_eq!(
            message(Value::HugeInt(true)),
            format!("stream <a negative integer beyond 64 bits> is negative; {valid}")
        );
        assert_eq!(
            message(Value::Int(0)),
            format!("stream 0 is ambiguous (the legacy default stream, or no stream?); {valid}")
        );
        assert_eq!(
            message(Value::HugeInt(false)),
            format!("stream <an integer beyond 64 bits> is above 2**64 - 1; {valid}")
        );
        assert_eq!(message(Value::Str("7")), format!("stream '7' is not an integer; {valid}"));
    }

    #[test]
    fn consumer_streams_and_stream_object_handles_share_the_range_rule() {
        assert_eq!(consumer_stream_is_a_handle::<&str>(&Value::Int(2)).unwrap(), 2);
        assert_eq!(stream_object_handle_is_a_handle::<&str>(&Value::Int(0)).unwrap(), 1, "NULL: legacy");
        for bad in [Value::Int(0), Value::Int(-5), Value::HugeInt(false), Value::Bool(true)] {
            assert_eq!(consumer_stream_is_a_handle::<&str>(&bad).unwrap_err().status, Status::InvalidStream);
        }
        for bad in [Value::Int(-5), Value::HugeInt(false), Value::Str("7")] {
            assert_eq!(
                stream_object_handle_is_a_handle::<&str>(&bad).unwrap_err().status,
                Status::InvalidStream
            );
        }
    }

    #[test]
    fn descr_lists_named_fields_with_titles() {
        let title = [Value::Str("title"), Value::Str("x")];
        let x = [tuple(&title), Value::Str("<f4")];
        let y = [Value::Str("y"), Value::Str("<i4")];
        let entries = [tuple(&x), list(&y)];
        let values = DictValues { typestr: Value::Str("|V8"), descr: list(&entries), ..base(&SHAPE, &DATA) };
        let (array, fields, _) = read(&values).unwrap();
        assert_eq!(array.descr_count, 2);
        assert_eq!(crate::abi::c_chars_until_nul(&fields[0].name), Some(&b"x"[..]));
        assert_eq!((fields[0].offset, fields[1].offset), (0, 4));
    }

    #[test]
    fn numpys_default_descr_is_not_carried() {
        let entry = [Value::Str(""), Value::Str("f4")];
        let entries = [tuple(&entry)];
        let (array, fields, _) = read(&DictValues { descr: list(&entries), ..base(&SHAPE, &DATA) }).unwrap();
        assert!(fields.is_empty() && array.descr_count == 0);
        let named = [Value::Str("x"), Value::Str("<f4")];
        let entries = [tuple(&named)];
        assert_eq!(read(&DictValues { descr: list(&entries), ..base(&SHAPE, &DATA) }).unwrap().1.len(), 1);
    }

    #[test]
    fn malformed_descrs_are_invalid_descr() {
        let sub = [Value::Str("x"), Value::Str("<f4"), tuple(&[Value::Int(3)])];
        let nested_inner = [Value::Str("a"), Value::Str("<f4")];
        let nested_list = [tuple(&nested_inner)];
        let nested = [Value::Str("x"), list(&nested_list)];
        let bad_type = [Value::Str("x"), Value::Str("<f")];
        let (sub, nested, bad_type) = ([tuple(&sub)], [tuple(&nested)], [tuple(&bad_type)]);
        let cases: [(V<'_>, &str); 6] = [
            (list(&[]), "non-empty"),
            (Value::Int(3), "non-empty"),
            (list(&sub), "subarray"),
            (list(&nested), "nested"),
            (list(&bad_type), "\"<f\""),
            (Value::Seq { list: true, len: MAX_DESCR_FIELDS + 1, items: &[] }, "at most 65536"),
        ];
        for (descr, part) in cases {
            let values = DictValues { typestr: Value::Str("|V4"), descr, ..base(&SHAPE, &DATA) };
            let e = read(&values).unwrap_err();
            assert_eq!(e.status, Status::InvalidDescr, "{}", e.message);
            assert!(e.message.contains(part), "{} lacks {part}", e.message);
        }
    }

    #[test]
    fn mask_came_in_version_1() {
        let with =
            |mask, version| read(&DictValues { mask, version: Value::Int(version), ..base(&SHAPE, &DATA) });
        assert!(with(Value::Other("Mask"), 1).unwrap().2);
        assert!(!with(Value::None, 1).unwrap().2);
        assert_eq!(with(Value::Other("Mask"), 0).unwrap_err().status, Status::InvalidMask);
    }

    #[test]
    fn messages_quote_values_as_python_would_and_bounded() {
        assert_eq!(Repr::<&str>(&Value::Str("it's")).to_string(), "\"it's\"");
        assert_eq!(Repr::<&str>(&Value::Str("a\nb")).to_string(), "'a\\nb'");
        assert_eq!(Repr::<&str>(&tuple(&[Value::Int(1)])).to_string(), "(1,)");
        assert_eq!(Repr::<&str>(&Value::Other("Foo")).to_string(), "<Foo object>");
        let long = "x".repeat(1000);
        let shown = Repr::<&str>(&Value::Str(&long)).to_string();
        assert!(shown.len() <= QUOTE_LIMIT + 3 && shown.ends_with("..."), "{shown}");
    }
}
