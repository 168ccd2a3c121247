//! Type strings (`typestr`) and structured fields (`descr`) with numpy's semantics.
//!
//! Grammar: `[<>|=] kind digits ["[" [digits] unit "]"]`, where the bracket only follows the
//! datetime kinds `m` and `M`. Accept/reject and itemsize agree with `numpy.dtype(s)` on every
//! string of that grammar, except that a size of 0 is rejected (no device array can use it).

use std::os::raw::c_char;

use crate::abi::{c_chars_until_nul, CaiDtype, CaiField, CAI_TYPESTR_CAPACITY, NATIVE_BYTE_ORDER};
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
        return Err(invalid(typestr, "has no item size (one-letter codes are not typestrs)"));
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
    let (dtype, count, unit) = parse(typestr)?;
    let mut canonical = CanonicalTypestr { bytes: [0; CAI_TYPESTR_CAPACITY], len: 0 };
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

/// Reads a NUL-terminated typestr buffer; `field` names it in the error.
pub fn typestr_in_buffer<'a>(buffer: &'a [c_char], field: &str) -> Result<&'a [u8]> {
    c_chars_until_nul(buffer).ok_or_else(|| {
        Error::new(
            Status::InvalidTypestr,
            format!("{field} has no terminating NUL in its {} bytes", buffer.len()),
        )
    })
}

/// Checks structured fields against the item they describe: each field a valid typestr, named
/// uniquely (empty names are padding), laid one after another from offset 0, their itemsizes
/// adding up to `itemsize`. Linear in the number of fields.
pub fn validate_descr(fields: &[CaiField], itemsize: u64) -> Result<()> {
    let descr_error = |message: String| Error::new(Status::InvalidDescr, message);
    let mut names = std::collections::HashSet::new();
    let mut offset: u64 = 0;
    for (i, field) in fields.iter().enumerate() {
        let name = c_chars_until_nul(&field.name)
            .ok_or_else(|| descr_error(format!("descr[{i}].name has no terminating NUL")))?;
        let typestr = c_chars_until_nul(&field.typestr)
            .ok_or_else(|| descr_error(format!("descr[{i}].typestr has no terminating NUL")))?;
        let dtype = parse_typestr(typestr)
            .map_err(|e| descr_error(format!("descr[{i}] ({}): {}", quote(name), e.message)))?;
        if field.offset != offset {
            return Err(descr_error(format!(
                "descr[{i}] ({}) has offset {} where the fields before it end at {offset}",
                quote(name),
                field.offset
            )));
        }
        // numpy's default descr has one unnamed field: no set is made for it.
        if !name.is_empty() && fields.len() > 1 && !names.insert(name) {
            return Err(descr_error(format!("descr[{i}] repeats the field name {}", quote(name))));
        }
        offset = offset
            .checked_add(dtype.itemsize)
            .ok_or_else(|| Error::new(Status::Overflow, "descr itemsizes overflow 64 bits"))?;
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
