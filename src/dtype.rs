//! Type strings (`typestr`) and structured fields (`descr`) with numpy's semantics.
//!
//! Grammar: `[<>|=] kind digits ["[" [digits] unit "]"]`, where the bracket only follows the
//! datetime kinds `m` and `M`. Accept/reject and itemsize agree with `numpy.dtype(s)` on every
//! string of that grammar, except that a size of 0 is rejected (no device array can use it).

use std::os::raw::c_char;

use crate::abi::{
    c_chars_until_nul, CaiDtype, CaiField, CAI_FIELD_NAME_CAPACITY, CAI_TYPESTR_CAPACITY, NATIVE_BYTE_ORDER,
};
use crate::status::{Error, Result, Status};

/// numpy's `longdouble` itemsize, which decides whether `f16`/`c32` exist on this platform.
const LONG_DOUBLE_SIZE: u64 = if cfg!(all(target_arch = "x86_64", not(windows)))
    || cfg!(all(target_arch = "aarch64", target_os = "linux"))
{
    16
} else if cfg!(target_arch = "x86") {
    12
} else {
    8
};

/// numpy keeps itemsizes in a C int.
const MAX_ITEMSIZE: u64 = i32::MAX as u64;

const DATETIME_UNITS: [&str; 14] =
    ["Y", "M", "W", "D", "h", "m", "s", "ms", "us", "\u{3bc}s", "ns", "ps", "fs", "as"];

/// A typestr in numpy's canonical spelling (`dtype.str`): byte order always written.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct CanonicalTypestr {
    bytes: [u8; CAI_TYPESTR_CAPACITY],
    len: usize,
}

impl CanonicalTypestr {
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..self.len]
    }

    pub fn as_str(&self) -> &str {
        std::str::from_utf8(self.as_bytes()).expect("canonical typestrs are ASCII")
    }

    fn push_decimal(&mut self, mut n: u64) -> bool {
        let mut digits = [0u8; 20];
        let mut start = digits.len();
        loop {
            start -= 1;
            digits[start] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        self.push(&digits[start..])
    }

    fn push(&mut self, text: &[u8]) -> bool {
        // One byte stays free for the NUL the C buffer needs.
        if self.len + text.len() >= CAI_TYPESTR_CAPACITY {
            return false;
        }
        self.bytes[self.len..self.len + text.len()].copy_from_slice(text);
        self.len += text.len();
        true
    }
}

impl std::fmt::Debug for CanonicalTypestr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", self.as_str())
    }
}

/// Quotes arbitrary bytes for an error message, escaping what is not printable.
pub(crate) fn quote(bytes: &[u8]) -> String {
    format!("{:?}", String::from_utf8_lossy(bytes))
}

/// The typestr (native byte order) of a numpy dtype name written where a typestr belongs.
fn numpy_name_as_typestr(name: &[u8]) -> Option<String> {
    let (kind, bits) = match name {
        b"bool" => return Some("|b1".into()),
        [b'i', b'n', b't', bits @ ..] => ('i', bits),
        [b'u', b'i', b'n', b't', bits @ ..] => ('u', bits),
        [b'f', b'l', b'o', b'a', b't', bits @ ..] => ('f', bits),
        [b'c', b'o', b'm', b'p', b'l', b'e', b'x', bits @ ..] => ('c', bits),
        _ => return None,
    };
    let bytes = match bits {
        b"8" => 1,
        b"16" => 2,
        b"32" => 4,
        b"64" => 8,
        b"128" => 16,
        _ => return None,
    };
    let order = if bytes == 1 { '|' } else { NATIVE_BYTE_ORDER as char };
    Some(format!("{order}{kind}{bytes}"))
}

fn invalid(typestr: &[u8], why: &str) -> Error {
    Error::new(Status::InvalidTypestr, format!("typestr {} {why}", quote(typestr)))
}

struct Parts<'a> {
    order: Option<u8>,
    kind: u8,
    count: u64,
    unit: Option<&'a [u8]>,
}

fn split(typestr: &[u8]) -> Result<Parts<'_>> {
    let mut rest = typestr;
    if rest.is_empty() {
        return Err(invalid(typestr, "is empty"));
    }
    // Named before the grammar's own complaint, which would blame the letter after a space.
    let trimmed = typestr.trim_ascii();
    if trimmed.len() != typestr.len() {
        let fix = match std::str::from_utf8(trimmed) {
            Ok(text) if parse(trimmed).is_ok() => format!("; write '{text}'"),
            _ => String::new(),
        };
        return Err(invalid(typestr, &format!("has leading or trailing whitespace{fix}")));
    }
    let order = match rest[0] {
        b'<' | b'>' | b'|' | b'=' => {
            rest = &rest[1..];
            Some(typestr[0])
        }
        _ => None,
    };
    let Some((&kind, after_kind)) = rest.split_first() else {
        return Err(invalid(typestr, "has no kind letter"));
    };
    let digits_len = after_kind.iter().take_while(|b| b.is_ascii_digit()).count();
    if digits_len == 0 {
        return Err(match numpy_name_as_typestr(typestr) {
            Some(named) => invalid(typestr, &format!("is a dtype name, not a typestr; write '{named}'")),
            None => invalid(typestr, "has no item size (one-letter codes are not typestrs)"),
        });
    }
    let (count_digits, tail) = after_kind.split_at(digits_len);
    let count = parse_decimal(count_digits)
        .filter(|&n| n <= MAX_ITEMSIZE)
        .ok_or_else(|| invalid(typestr, "has an item size above numpy's limit of 2147483647"))?;
    let unit = match tail {
        [] => None,
        // numpy reads a unit only straight after a plain "8": "M08" is a datetime, "M08[ns]" is not.
        [b'[', inner @ .., b']'] if count_digits == b"8" => Some(inner),
        [b'[', ..] => return Err(invalid(typestr, "has a [unit] after an item size other than 8")),
        _ => return Err(invalid(typestr, "has trailing characters after the item size")),
    };
    Ok(Parts { order, kind, count, unit })
}

fn parse_decimal(digits: &[u8]) -> Option<u64> {
    digits.iter().try_fold(0u64, |n, &d| n.checked_mul(10)?.checked_add(u64::from(d - b'0')))
}

fn itemsize_of(typestr: &[u8], kind: u8, count: u64) -> Result<u64> {
    let numpy_defines = match (kind, count) {
        (b'b', 1) | (b'i' | b'u', 1 | 2 | 4 | 8) | (b'f', 2 | 4 | 8) | (b'c', 8 | 16) | (b'm' | b'M', 8) => {
            true
        }
        (b'f', n) => n == LONG_DOUBLE_SIZE,
        (b'c', n) => n == 2 * LONG_DOUBLE_SIZE,
        (b'S' | b'V' | b'U', 0) => {
            return Err(invalid(typestr, "has item size 0, which no device array can hold"));
        }
        (b'S' | b'V', n) => return Ok(n),
        // numpy's U counts UCS4 code points.
        (b'U', n) if n * 4 <= MAX_ITEMSIZE => return Ok(n * 4),
        (b'U', _) => return Err(invalid(typestr, "has an item size above numpy's limit of 2147483647")),
        (b'O', _) => {
            return Err(invalid(typestr, "is a Python object type, which cannot live in device memory"));
        }
        (b'b' | b'i' | b'u' | b'm' | b'M', _) => false,
        _ => return Err(invalid(typestr, "has an unknown kind letter")),
    };
    if numpy_defines {
        Ok(count)
    } else {
        Err(invalid(typestr, &format!("has an item size numpy does not define for kind '{}'", kind as char)))
    }
}

/// Checks a datetime unit like `ns`, `25s`, `generic`; returns its canonical spelling parts
/// (multiplier digits without leading zeros or "1", unit), or None for generic.
fn datetime_unit(typestr: &[u8], inner: &[u8]) -> Result<DatetimeUnit> {
    if inner == b"generic" {
        return Ok(None);
    }
    let digits_len = inner.iter().take_while(|b| b.is_ascii_digit()).count();
    let (multiplier_digits, unit) = inner.split_at(digits_len);
    let multiplier = if multiplier_digits.is_empty() {
        None
    } else {
        Some(
            parse_decimal(multiplier_digits)
                .filter(|&n| n <= i32::MAX as u64)
                .ok_or_else(|| invalid(typestr, "has a datetime multiplier above 2147483647"))?,
        )
    };
    let unit = DATETIME_UNITS
        .iter()
        .find(|u| u.as_bytes() == unit)
        .ok_or_else(|| invalid(typestr, "has an unknown datetime unit"))?;
    let unit = if *unit == "\u{3bc}s" { "us" } else { unit };
    Ok(Some((multiplier, unit)))
}

/// Parses a typestr as numpy would.
pub fn parse_typestr(typestr: &[u8]) -> Result<CaiDtype> {
    parse(typestr).map(|(dtype, _, _)| dtype)
}

/// Parses a typestr and spells it as numpy's `dtype.str` does (byte order always written).
pub fn canonical_typestr(typestr: &[u8]) -> Result<CanonicalTypestr> {
    let mut canonical = CanonicalTypestr { bytes: [0; CAI_TYPESTR_CAPACITY], len: 0 };
    // The typestrs nearly every array has: the byte order numpy writes, then as they are.
    if let [order, kind, digit] = *typestr {
        if let Some(dtype) = common_numeric_dtype([order, kind, digit]) {
            canonical.push(&[dtype.byteorder as u8, kind, digit]);
            return Ok(canonical);
        }
    }
    let (dtype, count, unit) = parse(typestr)?;
    let mut fits = canonical.push(&[dtype.byteorder(), dtype.kind()]) && canonical.push_decimal(count);
    if let Some((multiplier, unit)) = unit.map(|inner| datetime_unit(typestr, inner)).transpose()?.flatten() {
        fits = fits
            && canonical.push(b"[")
            && multiplier.filter(|&m| m != 1).is_none_or(|m| canonical.push_decimal(m))
            && canonical.push(unit.as_bytes())
            && canonical.push(b"]");
    }
    if !fits {
        return Err(invalid(typestr, "is too long once its byte order is written"));
    }
    Ok(canonical)
}

type DatetimeUnit = Option<(Option<u64>, &'static str)>;

/// The dtype, the count written after the kind letter, and the text inside a datetime's
/// brackets (already checked to be a valid unit).
fn parse(typestr: &[u8]) -> Result<(CaiDtype, u64, Option<&[u8]>)> {
    let parts = split(typestr)?;
    let itemsize = itemsize_of(typestr, parts.kind, parts.count)?;
    if let Some(inner) = parts.unit {
        if !matches!(parts.kind, b'm' | b'M') {
            return Err(invalid(typestr, "has a [unit], which only datetime kinds m and M take"));
        }
        datetime_unit(typestr, inner)?;
    }
    let byte_order_applies = !matches!(parts.kind, b'b' | b'S' | b'V') && itemsize > 1;
    let byteorder = match parts.order {
        _ if !byte_order_applies => b'|',
        Some(order @ (b'<' | b'>')) => order,
        _ => NATIVE_BYTE_ORDER,
    };
    let dtype = CaiDtype { itemsize, kind: parts.kind as c_char, byteorder: byteorder as c_char };
    Ok((dtype, parts.count, parts.unit))
}

/// Parses the NUL-terminated typestr in `buffer` as numpy would; `field` names it in errors.
/// The typestrs nearly every array has, a byte order, one of `biufc` and a one-digit size,
/// are read straight off the buffer; every other goes through the grammar.
#[inline(always)]
pub fn parse_typestr_buffer(buffer: &[c_char; CAI_TYPESTR_CAPACITY], field: &str) -> Result<CaiDtype> {
    let head = [buffer[0] as u8, buffer[1] as u8, buffer[2] as u8];
    if buffer[3] == 0 {
        if let Some(dtype) = common_numeric_dtype(head) {
            return Ok(dtype);
        }
    }
    parse_typestr_in_buffer(buffer, field)
}

#[inline(never)]
fn parse_typestr_in_buffer(buffer: &[c_char; CAI_TYPESTR_CAPACITY], field: &str) -> Result<CaiDtype> {
    parse_typestr(typestr_in_buffer(buffer, field)?)
}

/// `[<>|=][biufc][1248]` as numpy reads it, or None for anything else (which may still be
/// valid: the grammar decides).
#[inline(always)]
fn common_numeric_dtype([order, kind, digit]: [u8; 3]) -> Option<CaiDtype> {
    if !matches!(order, b'<' | b'>' | b'|' | b'=') {
        return None;
    }
    let itemsize = match (kind, digit) {
        (b'b', b'1')
        | (b'i' | b'u', b'1' | b'2' | b'4' | b'8')
        | (b'f', b'2' | b'4' | b'8')
        | (b'c', b'8') => u64::from(digit - b'0'),
        _ => return None,
    };
    let byteorder = match order {
        _ if itemsize == 1 => b'|',
        b'<' | b'>' => order,
        _ => NATIVE_BYTE_ORDER,
    };
    // Built as two whole words: built byte by byte, the compiler assembles the second word on
    // the stack, and reading it back as one word right after two 1-byte stores stalls the
    // CPU's store forwarding (measured: cai_validate 1-D 8.4 -> 6.3 ns).
    let second_word = u64::from_ne_bytes([kind, byteorder, 0, 0, 0, 0, 0, 0]);
    // SAFETY: CaiDtype is repr(C) { u64, c_char, c_char } (16 bytes, asserted in abi.rs): the
    // first word is `itemsize`, the second starts with `kind` and `byteorder`, then padding.
    Some(unsafe { std::mem::transmute::<[u64; 2], CaiDtype>([itemsize, second_word]) })
}

/// Reads a NUL-terminated typestr buffer; `field` names it in the error.
pub fn typestr_in_buffer<'a>(buffer: &'a [c_char], field: &str) -> Result<&'a [u8]> {
    c_chars_until_nul(buffer).ok_or_else(|| {
        Error::new(
            Status::InvalidTypestr,
            format!("{field} has no terminating NUL in its {} bytes", buffer.len()),
        )
    })
}

/// Fields up to which names are compared with each other directly (a bounded, cheap scan).
const NAMES_SCANNED: usize = 16;
/// Fields up to which the duplicate-name table lives on the stack (no allocation).
const NAMES_ON_STACK: usize = 256;

/// The field names seen so far, to refuse a repeated one: a short list scanned for a few
/// names; else an open-addressing table of 32-bit name hashes, at most a quarter full, on the
/// stack up to NAMES_ON_STACK fields. Beyond, the table is one allocation too big for the
/// cache, and the hashes are entered after the pass over the fields, not between their reads
/// (measured: 0.53 ms instead of 0.69 for 10^5 fields). Two names with the same hash send the
/// check to a scan of the names before, so the result is exact; with distinct hashes it is
/// linear in the fields.
// The Stack variant is large on purpose: boxing it would be the allocation it avoids.
#[allow(clippy::large_enum_variant)]
enum SeenNames<'a> {
    Few { names: [&'a [u8]; NAMES_SCANNED], len: usize },
    Stack { slots: [u32; 4 * NAMES_ON_STACK] },
    Heap { slots: Vec<u32>, pending: Vec<(u64, usize)> },
}

/// A field's name (the bytes before its NUL) and a hash of it, found in one pass eight bytes at
/// a time; None when the buffer holds no NUL. The hash is FxHash's word step: names come from
/// the caller, who gains nothing by colliding them (a descr is validated by the process that
/// holds it), so a fast hash fits.
#[inline]
fn name_and_hash(buffer: &[c_char; CAI_FIELD_NAME_CAPACITY]) -> Option<(&[u8], u64)> {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    // SAFETY: c_char is i8 or u8 depending on the target; both have the layout of u8, and the
    // array keeps its length and lifetime.
    let bytes: &[u8; CAI_FIELD_NAME_CAPACITY] = unsafe { &*buffer.as_ptr().cast() };
    let mut hash = 0u64;
    for (i, chunk) in bytes.chunks_exact(8).enumerate() {
        let word = u64::from_le_bytes(chunk.try_into().expect("chunks of 8"));
        // The lowest zero byte of `word` sets the lowest bit here (the borrow may set bits
        // above it, never below).
        let zeros = word.wrapping_sub(ONES) & !word & HIGHS;
        let len = if zeros == 0 { 8 } else { zeros.trailing_zeros() as usize / 8 };
        let kept = if len == 8 { word } else { word & ((1u64 << (8 * len)) - 1) };
        hash = (hash.rotate_left(5) ^ kept).wrapping_mul(0x517c_c1b7_2722_0a95);
        if len < 8 {
            return Some((&bytes[..8 * i + len], hash));
        }
    }
    None
}

impl<'a> SeenNames<'a> {
    fn for_fields(count: usize) -> SeenNames<'a> {
        if count <= NAMES_SCANNED {
            SeenNames::Few { names: [&[]; NAMES_SCANNED], len: 0 }
        } else if count <= NAMES_ON_STACK {
            SeenNames::Stack { slots: [0; 4 * NAMES_ON_STACK] }
        } else {
            SeenNames::Heap { slots: vec![0; table_len(count)], pending: Vec::with_capacity(count) }
        }
    }

    /// False when the name of `fields[index]` (`name`, hashed to `hash`) was seen already.
    fn insert(&mut self, fields: &[CaiField], index: usize, name: &'a [u8], hash: u64) -> bool {
        match self {
            SeenNames::Few { names, len } => {
                if names[..*len].contains(&name) {
                    return false;
                }
                names[*len] = name;
                *len += 1;
                true
            }
            SeenNames::Stack { slots } => insert_hash(slots, hash) || is_new_name(fields, index, name),
            SeenNames::Heap { pending, .. } => {
                pending.push((hash, index));
                true
            }
        }
    }

    /// The index of the first field whose name repeats one before it, among the names whose
    /// check `insert` deferred.
    fn first_deferred_repeat(&mut self, fields: &[CaiField]) -> Option<usize> {
        let SeenNames::Heap { slots, pending } = self else { return None };
        pending.iter().find_map(|&(hash, index)| {
            let name = || name_and_hash(&fields[index].name).map(|(name, _)| name).unwrap_or_default();
            (!insert_hash(slots, hash) && !is_new_name(fields, index, name())).then_some(index)
        })
    }
}

/// Slots for `count` hashes: a power of two, at most a quarter full, so that a probe rarely
/// meets an occupied slot (measured: fuller tables are slower on a 10^5-field descr).
fn table_len(count: usize) -> usize {
    (4 * count).next_power_of_two()
}

/// The first slot a hash probes in a table `len` long (a power of two). A multiplicative hash
/// mixes upwards: the slot takes the high half too.
#[inline(always)]
fn slot_of(hash: u64, len: usize) -> usize {
    (hash ^ (hash >> 32)) as usize & (len - 1)
}

/// Adds a name's hash to `slots` (a power of two long; 0 is empty); false when the hash was
/// there already. The table's hash is the high half of `hash` with its top bit set (never 0).
fn insert_hash(slots: &mut [u32], hash: u64) -> bool {
    let tag = (hash >> 32) as u32 | 0x8000_0000;
    let mask = slots.len() - 1;
    let mut slot = slot_of(hash, slots.len());
    loop {
        match slots[slot] {
            0 => {
                slots[slot] = tag;
                return true;
            }
            seen if seen == tag => return false,
            _ => slot = (slot + 1) & mask,
        }
    }
}

/// The slow, exact answer when two hashes agree: whether `name` differs from every name
/// before `fields[index]`.
#[cold]
fn is_new_name(fields: &[CaiField], index: usize, name: &[u8]) -> bool {
    fields[..index].iter().all(|field| name_and_hash(&field.name).map(|(seen, _)| seen) != Some(name))
}

/// Checks structured fields against the item they describe: each field a valid typestr, named
/// uniquely (empty names are padding), laid one after another from offset 0, their itemsizes
/// adding up to `itemsize`. Linear in the number of fields; allocates nothing on success up to
/// NAMES_ON_STACK fields.
pub fn validate_descr(fields: &[CaiField], itemsize: u64) -> Result<()> {
    let descr_error = |message: String| Error::new(Status::InvalidDescr, message);
    let mut names = SeenNames::for_fields(fields.len());
    let mut offset: u64 = 0;
    for (i, field) in fields.iter().enumerate() {
        let (name, hash) = name_and_hash(&field.name)
            .ok_or_else(|| descr_error(format!("descr[{i}].name has no terminating NUL")))?;
        let dtype = parse_typestr_buffer(&field.typestr, "typestr")
            .map_err(|e| descr_error(format!("descr[{i}] ({}): {}", quote(name), e.message)))?;
        if field.offset != offset {
            return Err(descr_error(format!(
                "descr[{i}] ({}) has offset {} where the fields before it end at {offset}",
                quote(name),
                field.offset
            )));
        }
        // numpy's default descr has one unnamed field: no set is made for it.
        if !name.is_empty() && fields.len() > 1 && !names.insert(fields, i, name, hash) {
            return Err(descr_error(format!("descr[{i}] repeats the field name {}", quote(name))));
        }
        offset = offset
            .checked_add(dtype.itemsize)
            .ok_or_else(|| Error::new(Status::Overflow, "descr itemsizes overflow 64 bits"))?;
    }
    if let Some(i) = names.first_deferred_repeat(fields) {
        let name = name_and_hash(&fields[i].name).map(|(name, _)| name).unwrap_or_default();
        return Err(descr_error(format!("descr[{i}] repeats the field name {}", quote(name))));
    }
    if offset != itemsize {
        return Err(descr_error(format!(
            "descr fields add up to {offset} bytes but typestr has itemsize {itemsize}"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(s: &str) -> (u64, char, char) {
        let d = parse_typestr(s.as_bytes()).unwrap_or_else(|e| panic!("{s}: {e}"));
        (d.itemsize, d.kind() as char, d.byteorder() as char)
    }

    fn status(s: &[u8]) -> Status {
        parse_typestr(s).expect_err(&format!("{s:?} should be rejected")).status
    }

    #[test]
    fn a_dtype_name_is_refused_with_the_typestr_to_write() {
        let native = NATIVE_BYTE_ORDER as char;
        for (name, typestr) in [
            ("float32", format!("{native}f4")),
            ("int64", format!("{native}i8")),
            ("uint8", "|u1".into()),
            ("complex128", format!("{native}c16")),
            ("bool", "|b1".into()),
        ] {
            let e = parse_typestr(name.as_bytes()).unwrap_err();
            assert_eq!(e.status, Status::InvalidTypestr);
            assert!(e.message.contains(&format!("write '{typestr}'")), "{name}: {}", e.message);
        }
        assert!(parse_typestr(b"f").unwrap_err().message.contains("one-letter"));
    }

    #[test]
    fn a_typestr_with_a_stray_space_is_told_of_the_space_not_of_one_letter_codes() {
        for (typestr, fix) in [(" <f4", "'<f4'"), ("<f4 ", "'<f4'"), ("\t|u1\n", "'|u1'")] {
            let e = parse_typestr(typestr.as_bytes()).unwrap_err();
            assert_eq!(e.status, Status::InvalidTypestr);
            assert!(
                e.message.contains("leading or trailing whitespace; write ") && e.message.ends_with(fix),
                "{}",
                e.message
            );
            assert!(!e.message.contains("one-letter"), "{}", e.message);
        }
        assert!(parse_typestr(b"  ").unwrap_err().message.ends_with("has leading or trailing whitespace"));
    }

    #[test]
    fn numeric_typestrs_have_numpys_itemsize_kind_and_byte_order() {
        assert_eq!(parsed("<f4"), (4, 'f', '<'));
        assert_eq!(parsed(">i8"), (8, 'i', '>'));
        assert_eq!(parsed("|b1"), (1, 'b', '|'));
        assert_eq!(parsed(">b1"), (1, 'b', '|'));
        assert_eq!(parsed(">u1"), (1, 'u', '|'));
        assert_eq!(parsed("<c16"), (16, 'c', '<'));
        assert_eq!(parsed("f2"), (2, 'f', NATIVE_BYTE_ORDER as char));
        assert_eq!(parsed("=f8"), (8, 'f', NATIVE_BYTE_ORDER as char));
        assert_eq!(parsed("|i4"), (4, 'i', NATIVE_BYTE_ORDER as char));
        assert_eq!(parsed("i04"), (4, 'i', NATIVE_BYTE_ORDER as char));
    }

    #[test]
    fn the_common_numeric_shortcut_agrees_with_the_grammar_on_every_three_bytes_it_takes() {
        let mut taken = 0;
        for order in 0..=255u8 {
            for kind in 0..=255u8 {
                for digit in b'0'..=b'9' {
                    let Some(fast) = common_numeric_dtype([order, kind, digit]) else { continue };
                    taken += 1;
                    assert_eq!(Ok(fast), parse_typestr(&[order, kind, digit]), "{:?}", [order, kind, digit]);
                }
            }
        }
        assert_eq!(taken, 4 * (1 + 4 + 4 + 3 + 1), "every byte order of b1, i1-8, u1-8, f2-8, c8");
    }

    #[test]
    fn container_typestrs_take_their_itemsize() {
        assert_eq!(parsed("<M8[ns]"), (8, 'M', '<'));
        assert_eq!(parsed("<m8[D]"), (8, 'm', '<'));
        assert_eq!(parsed("|S5"), (5, 'S', '|'));
        assert_eq!(parsed("<S5"), (5, 'S', '|'));
        assert_eq!(parsed("<U3"), (12, 'U', '<'));
        assert_eq!(parsed("|V2"), (2, 'V', '|'));
        assert_eq!(parsed("V2147483647"), (2147483647, 'V', '|'));
        assert_eq!(parsed("U536870911"), (2147483644, 'U', NATIVE_BYTE_ORDER as char));
    }

    #[test]
    fn malformed_typestrs_are_invalid_typestr() {
        for bad in [
            &b""[..],
            b"<",
            b"<f",
            b"f",
            b"|O8",
            b"O8",
            b"b2",
            b"i16",
            b"f12",
            b"c4",
            b"<i0",
            b"|V0",
            b"|S0",
            b"U0",
            b" f4",
            b"f4 ",
            b"!f4",
            b"<i+4",
            b"M16",
            b"i4[ns]",
            b"M8[]",
            b"M8[B]",
            b"M8[ ns]",
            b"M8[ns",
            b"M8[ns]x",
            b"M08[ns]",
            b"V2147483648",
            b"U536870912",
            b"S99999999999999999999",
            b"\xff\xfe",
            b"x4",
        ] {
            assert_eq!(status(bad), Status::InvalidTypestr, "{bad:?}");
        }
    }

    #[test]
    fn error_messages_quote_the_typestr() {
        let e = parse_typestr(b"<f").unwrap_err();
        assert!(e.message.contains("\"<f\""), "{}", e.message);
        let e = parse_typestr(b"|O8").unwrap_err();
        assert!(e.message.contains("\"|O8\"") && e.message.contains("object"), "{}", e.message);
    }

    #[test]
    fn canonical_spelling_matches_numpys_dtype_str() {
        let native = NATIVE_BYTE_ORDER as char;
        for (input, expected) in [
            ("f4", format!("{native}f4")),
            ("|i4", format!("{native}i4")),
            (">f4", ">f4".into()),
            ("<b1", "|b1".into()),
            ("<S5", "|S5".into()),
            ("i04", format!("{native}i4")),
            ("M8[1ns]", format!("{native}M8[ns]")),
            ("M8[00s]", format!("{native}M8[0s]")),
            ("M8[25s]", format!("{native}M8[25s]")),
            ("M8[\u{3bc}s]", format!("{native}M8[us]")),
            ("M8[generic]", format!("{native}M8")),
            ("<U3", "<U3".into()),
        ] {
            assert_eq!(canonical_typestr(input.as_bytes()).unwrap().as_str(), expected, "{input}");
        }
    }

    fn field(name: &str, typestr: &str, offset: u64) -> CaiField {
        CaiField::new(name, typestr, offset).unwrap()
    }

    #[test]
    fn descr_fields_must_add_up_to_the_itemsize() {
        let fields = [field("x", "<f4", 0), field("y", "<i8", 4)];
        assert!(validate_descr(&fields, 12).is_ok());
        assert_eq!(validate_descr(&fields, 16).unwrap_err().status, Status::InvalidDescr);
        assert!(validate_descr(&[field("", "<f4", 0)], 4).is_ok(), "numpy's default descr");
        let padded = [field("a", "|u1", 0), field("", "|V3", 1), field("b", "<f4", 4)];
        assert!(validate_descr(&padded, 8).is_ok());
    }

    #[test]
    fn names_are_read_up_to_their_nul_wherever_it_is() {
        for len in 0..CAI_FIELD_NAME_CAPACITY {
            let name = "n".repeat(len);
            let field = CaiField::new(&name, "<f4", 0).unwrap();
            let (read, _) = name_and_hash(&field.name).expect("a NUL within the buffer");
            assert_eq!(read, name.as_bytes());
            assert_eq!(Some(read), c_chars_until_nul(&field.name));
        }
        let full = [b'n' as c_char; CAI_FIELD_NAME_CAPACITY];
        assert_eq!(name_and_hash(&full), None);
        // Bytes after the NUL do not change the name or its hash.
        let mut a = CaiField::new("same", "<f4", 0).unwrap();
        let b = a;
        a.name[6] = b'x' as c_char;
        assert_eq!(name_and_hash(&a.name), name_and_hash(&b.name));
    }

    #[test]
    fn repeated_names_are_found_however_many_fields_there_are() {
        // Below, at and above each of the scan's and the stack table's limits.
        for count in [2, NAMES_SCANNED, NAMES_SCANNED + 1, NAMES_ON_STACK, NAMES_ON_STACK + 1, 5000] {
            let mut fields: Vec<CaiField> =
                (0..count).map(|i| CaiField::new(&format!("f{i}"), "|u1", i as u64).unwrap()).collect();
            assert_eq!(validate_descr(&fields, count as u64), Ok(()), "{count} distinct names");
            let last = fields.len() - 1;
            fields[last] = CaiField::new("f0", "|u1", last as u64).unwrap();
            let error = validate_descr(&fields, count as u64).unwrap_err();
            assert!(error.message.contains(&format!("descr[{last}] repeats")), "{count}: {}", error.message);
        }
    }

    #[test]
    fn descr_rejects_gaps_duplicates_and_bad_field_types() {
        let gap = [field("x", "<f4", 0), field("y", "<f4", 8)];
        let e = validate_descr(&gap, 8).unwrap_err();
        assert!(e.message.contains("offset 8"), "{}", e.message);
        let dup = [field("x", "<f4", 0), field("x", "<f4", 4)];
        assert!(validate_descr(&dup, 8).unwrap_err().message.contains("repeats"));
        let bad = [field("x", "<f", 0)];
        let e = validate_descr(&bad, 4).unwrap_err();
        assert_eq!(e.status, Status::InvalidDescr);
        assert!(e.message.contains("\"<f\""), "{}", e.message);
        let mut unterminated = field("x", "<f4", 0);
        unterminated.name = [b'a' as c_char; 64];
        assert!(validate_descr(&[unterminated], 4).unwrap_err().message.contains("NUL"));
    }
}
