//! Element types as DLPack names them, `(code, bits, lanes)`, beside the typestr that CAI
//! has: which typestr each travels with, which a `CaiArray` carries exactly in `dl_dtype`, and
//! their names. One function per rule of the mapping.
//!
//! The numeric types numpy knows (bool, int, uint, float and complex of numpy's widths, one
//! lane) travel by their typestr alone (`dl_dtype` zero). Every other type DLPack 1.3 defines
//! (bfloat16, the float8, float6 and float4 types, vector lanes) travels as opaque bytes of
//! the item's size, `V` with the host's byte order where one lane is wider than a byte (`<V2`
//! for bfloat16, as torch and ml_dtypes write it) and `|` else (`|V1` for a float8), with the
//! exact type in `dl_dtype`: a consumer that reads only the typestr sees bytes of the right
//! size, never a wrong numeric type.
//!
//! Sub-byte types (float6, float4) are packed by DLPack's default, several elements a byte. A
//! CAI element is whole bytes and its strides count bytes, so a sub-byte type is taken only
//! where its item is whole bytes: lanes that fill them (torch's `float4_e2m1fn_x2`, bits 4 and
//! lanes 2) or one element padded to a byte (DLPack's `IS_SUBBYTE_TYPE_PADDED` flag, or a
//! numpy array of an ml_dtypes type).

use crate::abi::{
    CaiDLDataType, CaiDtype, CAI_DL_BFLOAT, CAI_DL_BOOL, CAI_DL_COMPLEX, CAI_DL_FLOAT, CAI_DL_FLOAT4_E2M1FN,
    CAI_DL_FLOAT6_E2M3FN, CAI_DL_FLOAT6_E3M2FN, CAI_DL_FLOAT8_E3M4, CAI_DL_FLOAT8_E8M0FNU, CAI_DL_INT,
    CAI_DL_OPAQUE_HANDLE, CAI_DL_UINT, NATIVE_BYTE_ORDER,
};
use crate::status::{Error, Result, Status};

/// How a DLPack tensor lays out a sub-byte type's elements.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SubByte {
    /// Several elements a byte, little bit-endian: DLPack's default.
    Packed,
    /// One element a byte (DLPack's `IS_SUBBYTE_TYPE_PADDED` flag; numpy's ml_dtypes arrays).
    Padded,
}

/// The typestr a DLPack type travels with, what parsing it finds, and the type a `CaiArray`
/// carries beside it (`dl_dtype`; absent where the typestr says it all).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Typed {
    bytes: [u8; TYPED_CAPACITY],
    len: u8,
    /// What `parse_typestr` finds of the typestr.
    pub dtype: CaiDtype,
    /// `CaiArray.dl_dtype`: the type itself, or absent for a numeric typestr.
    pub carried: CaiDLDataType,
}

/// The longest typestr made: `<V` and the decimal digits of 255 * 65535 / 8 bytes.
pub(crate) const TYPED_CAPACITY: usize = 12;

impl Typed {
    /// The typestr's ASCII bytes (no NUL).
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len)]
    }
}

/// Whether `code` is one of the types numpy has a typestr kind for.
fn is_numpy_kind(code: u8) -> bool {
    matches!(code, CAI_DL_INT | CAI_DL_UINT | CAI_DL_FLOAT | CAI_DL_COMPLEX | CAI_DL_BOOL)
}

/// numpy's typestr kind of a DLPack scalar (one lane) of numpy's widths, or None.
#[inline(always)]
fn numpy_kind(dtype: CaiDLDataType) -> Option<u8> {
    if dtype.lanes != 1 {
        return None;
    }
    Some(match (dtype.code, dtype.bits) {
        (CAI_DL_BOOL, 8) => b'b',
        (CAI_DL_INT, 8 | 16 | 32 | 64) => b'i',
        (CAI_DL_UINT, 8 | 16 | 32 | 64) => b'u',
        (CAI_DL_FLOAT, 16 | 32 | 64) => b'f',
        (CAI_DL_COMPLEX, 64 | 128) => b'c',
        _ => return None,
    })
}

/// The typestr `dtype` travels with (see the module's header), and the type carried beside it;
/// `sub_byte` says how a tensor lays out a sub-byte type. Refused, with the rule named: a type
/// DLPack does not define (or reserves, the opaque handle), a width its code does not have,
/// and a packed sub-byte type whose item is not whole bytes.
#[inline(always)]
pub fn typestr_of(dtype: CaiDLDataType, sub_byte: SubByte) -> Result<Typed> {
    if let Some(kind) = numpy_kind(dtype) {
        return Ok(Typed::numeric(kind, dtype.bits / 8));
    }
    lane_bits_are_defined(dtype)?;
    let itemsize = item_bytes(dtype, sub_byte)?;
    let order = if dtype.bits > 8 { NATIVE_BYTE_ORDER } else { b'|' };
    Ok(Typed::of(order, b'V', itemsize, dtype))
}

impl Typed {
    /// The typestr of a numpy kind of `itemsize` bytes (1 to 16), in this host's byte order:
    /// the path of every numeric DLPack read, written without a general decimal conversion.
    #[inline(always)]
    fn numeric(kind: u8, itemsize: u8) -> Typed {
        let order = if itemsize == 1 { b'|' } else { NATIVE_BYTE_ORDER };
        let mut bytes = [0; TYPED_CAPACITY];
        bytes[0] = order;
        bytes[1] = kind;
        let len = if itemsize < 10 {
            bytes[2] = b'0' + itemsize;
            3
        } else {
            bytes[2] = b'0' + itemsize / 10;
            bytes[3] = b'0' + itemsize % 10;
            4
        };
        Typed {
            bytes,
            len,
            dtype: CaiDtype { itemsize: u64::from(itemsize), kind: kind as _, byteorder: order as _ },
            carried: CaiDLDataType::absent(),
        }
    }

    /// The typestr as a NUL-padded block of `TYPED_CAPACITY` bytes: copied whole into a cleared
    /// buffer, a fixed-size copy where one bounded by the length is a loop.
    pub(crate) fn padded_bytes(&self) -> &[u8; TYPED_CAPACITY] {
        &self.bytes
    }

    /// The typestr `order kind itemsize`, written with no allocation.
    fn of(order: u8, kind: u8, itemsize: u64, carried: CaiDLDataType) -> Typed {
        let mut bytes = [0; TYPED_CAPACITY];
        bytes[0] = order;
        bytes[1] = kind;
        let digits = if itemsize < 10 { 1 } else { itemsize.ilog10() as usize + 1 };
        let mut rest = itemsize;
        for slot in bytes[2..2 + digits].iter_mut().rev() {
            *slot = b'0' + (rest % 10) as u8;
            rest /= 10;
        }
        Typed {
            bytes,
            len: (2 + digits) as u8,
            // numpy's parse: an opaque type has no byte order, whatever the typestr writes.
            dtype: CaiDtype {
                itemsize,
                kind: kind as _,
                byteorder: if kind == b'V' { b'|' } else { order } as _,
            },
            carried,
        }
    }
}

/// DLPack's rule on `bits` for each code it defines (and libcai's: no zero lanes): numpy's
/// widths for the numpy kinds, 16 for bfloat16, 8 for the float8 types, 6 for float6 and 4 for
/// float4 ("the consumer must stop importing if the value is unexpected").
fn lane_bits_are_defined(dtype: CaiDLDataType) -> Result<()> {
    let expected = match dtype.code {
        code if is_numpy_kind(code) => {
            let scalar = CaiDLDataType { lanes: 1, ..dtype };
            if dtype.lanes != 0 && numpy_kind(scalar).is_some() {
                return Ok(());
            }
            None
        }
        CAI_DL_OPAQUE_HANDLE => {
            return Err(refused(dtype, "is DLPack's opaque handle, which it reserves for testing"))
        }
        code => match defined_bits(code) {
            Some(bits) => Some(bits),
            None => return Err(refused(dtype, "has a type code DLPack 1.3 does not define")),
        },
    };
    match expected {
        _ if dtype.lanes == 0 => Err(refused(dtype, "has 0 lanes")),
        Some(bits) if dtype.bits == bits => Ok(()),
        Some(bits) => Err(refused(
            dtype,
            &format!(
                "has {} bits where DLPack defines {bits} for this code, and a consumer must not guess",
                dtype.bits
            ),
        )),
        None => Err(refused(dtype, "has a width numpy does not define for its kind")),
    }
}

/// The one width DLPack defines for a code that is not a numpy kind: 16 for bfloat16, 8 for
/// the float8 types, 6 for float6 and 4 for float4; None for any other code.
fn defined_bits(code: u8) -> Option<u8> {
    match code {
        CAI_DL_BFLOAT => Some(16),
        CAI_DL_FLOAT8_E3M4..=CAI_DL_FLOAT8_E8M0FNU => Some(8),
        CAI_DL_FLOAT6_E2M3FN | CAI_DL_FLOAT6_E3M2FN => Some(6),
        CAI_DL_FLOAT4_E2M1FN => Some(4),
        _ => None,
    }
}

/// The bytes one item of `dtype` takes: its lanes' bits when they are whole bytes, else one
/// byte for a padded sub-byte scalar. A packed sub-byte type of other lanes is refused: a CAI
/// element is whole bytes.
fn item_bytes(dtype: CaiDLDataType, sub_byte: SubByte) -> Result<u64> {
    let bits = u64::from(dtype.bits) * u64::from(dtype.lanes);
    if bits % 8 == 0 {
        return Ok(bits / 8);
    }
    match sub_byte {
        SubByte::Padded if dtype.lanes == 1 => Ok(1),
        SubByte::Padded => Err(refused(
            dtype,
            "is padded with several lanes, a layout DLPack does not specify",
        )),
        SubByte::Packed => Err(refused(
            dtype,
            &format!(
                "is packed, {} elements a byte (DLPack's default for sub-byte types), and a CAI element is whole \
                 bytes with strides in bytes: export it with lanes filling a byte (as torch's float4_e2m1fn_x2) or \
                 padded, one element a byte (DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED)",
                8 / dtype.bits.max(1)
            ),
        )),
    }
}

/// A refusal of `dtype`, named as DLPack names it, for `why`.
#[cold]
fn refused(dtype: CaiDLDataType, why: &str) -> Error {
    Error::new(Status::InvalidTypestr, format!("DLPack dtype {} {why}", described(dtype)))
}

/// `dtype` as messages name it: its name where it has one, then its three fields.
pub fn described(dtype: CaiDLDataType) -> String {
    let fields = format!("(code {}, bits {}, lanes {})", dtype.code, dtype.bits, dtype.lanes);
    match name_of(dtype) {
        Some(name) => format!("{name} {fields}"),
        None => fields,
    }
}

/// The name torch, jax and ml_dtypes share for `dtype` ("bfloat16", "float8_e4m3fn",
/// "float32"), with `_xN` for N lanes (torch's "float4_e2m1fn_x2"); None for a type DLPack
/// does not define.
pub fn name_of(dtype: CaiDLDataType) -> Option<String> {
    let scalar = CaiDLDataType { lanes: 1, ..dtype };
    let base = match (scalar.code, scalar.bits) {
        (CAI_DL_BOOL, 8) => "bool".to_string(),
        (CAI_DL_INT, bits) if numpy_kind(scalar).is_some() => format!("int{bits}"),
        (CAI_DL_UINT, bits) if numpy_kind(scalar).is_some() => format!("uint{bits}"),
        (CAI_DL_FLOAT, bits) if numpy_kind(scalar).is_some() => format!("float{bits}"),
        (CAI_DL_COMPLEX, bits) if numpy_kind(scalar).is_some() => format!("complex{bits}"),
        (CAI_DL_BFLOAT, 16) => "bfloat16".into(),
        (code, bits) if defined_bits(code) == Some(bits) => {
            ML_NAMES.iter().find(|(c, _)| *c == code).map(|(_, name)| *name)?.into()
        }
        _ => return None,
    };
    match dtype.lanes {
        0 => None,
        1 => Some(base),
        lanes => Some(format!("{base}_x{lanes}")),
    }
}

/// The float8, float6 and float4 codes with their names.
const ML_NAMES: [(u8, &str); 11] = [
    (7, "float8_e3m4"),
    (8, "float8_e4m3"),
    (9, "float8_e4m3b11fnuz"),
    (10, "float8_e4m3fn"),
    (11, "float8_e4m3fnuz"),
    (12, "float8_e5m2"),
    (13, "float8_e5m2fnuz"),
    (14, "float8_e8m0fnu"),
    (15, "float6_e2m3fn"),
    (16, "float6_e3m2fn"),
    (17, "float4_e2m1fn"),
];

/// The names `dl_dtype_named` reads: bfloat16's and the float8, float6 and float4 types'
/// (ml_dtypes spells its types so), the types numpy has no kind for.
pub fn names_beyond_numpy() -> impl Iterator<Item = &'static str> {
    std::iter::once("bfloat16").chain(ML_NAMES.iter().map(|(_, name)| *name))
}

/// The DLPack type a name of `name_of` names, scalars only ("bfloat16": code 4, bits 16); for
/// a reader whose producer names its type (a numpy dtype of ml_dtypes).
pub fn dl_dtype_named(name: &str) -> Option<CaiDLDataType> {
    if name == "bfloat16" {
        return Some(CaiDLDataType { code: CAI_DL_BFLOAT, bits: 16, lanes: 1 });
    }
    let code = ML_NAMES.iter().find(|(_, n)| *n == name)?.0;
    Some(CaiDLDataType { code, bits: defined_bits(code)?, lanes: 1 })
}

/// The DLPack type of a numeric typestr (what parsing it found): bool, int, uint, float and
/// complex of DLPack's widths; None for any other kind or width.
pub fn dl_dtype_of_numeric(parsed: CaiDtype) -> Option<CaiDLDataType> {
    let code = match parsed.kind() {
        b'b' => CAI_DL_BOOL,
        b'i' => CAI_DL_INT,
        b'u' => CAI_DL_UINT,
        b'f' => CAI_DL_FLOAT,
        b'c' => CAI_DL_COMPLEX,
        _ => return None,
    };
    let dtype = CaiDLDataType { code, bits: u8::try_from(parsed.itemsize * 8).ok()?, lanes: 1 };
    numpy_kind(dtype).map(|_| dtype)
}

/// The exact element type of an array: `dl_dtype` where it carries one, else its numeric
/// typestr's; None for a typestr DLPack has no type for (opaque, structured, strings, dates).
pub fn element_type(carried: CaiDLDataType, parsed: CaiDtype) -> Option<CaiDLDataType> {
    if carried.is_absent() {
        dl_dtype_of_numeric(parsed)
    } else {
        Some(carried)
    }
}

/// The rule on a `CaiArray`'s `dl_dtype`: absent, or a type DLPack defines whose typestr
/// (`typestr_of`, one element a byte for a sub-byte scalar) is the array's, in this host's
/// byte order, with no `descr` (a DLPack type has no fields).
pub fn dl_dtype_agrees_with_typestr(
    carried: CaiDLDataType,
    parsed: CaiDtype,
    descr_count: u32,
) -> Result<()> {
    if carried.is_absent() {
        return Ok(());
    }
    let wrap = |e: Error| Error::new(Status::InvalidTypestr, format!("dl_dtype: {}", e.message()));
    let typed = typestr_of(carried, SubByte::Padded).map_err(wrap)?;
    let expected = typed.dtype;
    let same_kind = expected.kind == parsed.kind && expected.itemsize == parsed.itemsize;
    if !same_kind || !parsed.is_native() {
        let typestr = String::from_utf8_lossy(typed.as_bytes()).into_owned();
        return Err(Error::new(
            Status::InvalidTypestr,
            format!(
                "dl_dtype {} travels with typestr {typestr:?} ({} bytes a element, in this host's byte order), but \
                 the typestr says kind '{}' of {} bytes{}: write {typestr:?}, or zero dl_dtype",
                described(carried),
                expected.itemsize,
                parsed.kind() as char,
                parsed.itemsize,
                if parsed.is_native() { "" } else { " in the other byte order" },
            ),
        ));
    }
    if descr_count != 0 {
        return Err(Error::new(
            Status::InvalidDescr,
            format!(
                "dl_dtype {} has no fields, but descr has {descr_count}: give one or the other",
                described(carried)
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::parse_typestr;

    fn dt(code: u8, bits: u8, lanes: u16) -> CaiDLDataType {
        CaiDLDataType { code, bits, lanes }
    }

    #[test]
    fn the_ml_types_travel_as_opaque_bytes_of_their_size_with_the_type_carried() {
        let native = NATIVE_BYTE_ORDER as char;
        let cases = [
            (dt(4, 16, 1), format!("{native}V2"), "bfloat16"),
            (dt(10, 8, 1), "|V1".into(), "float8_e4m3fn"),
            (dt(12, 8, 1), "|V1".into(), "float8_e5m2"),
            (dt(9, 8, 1), "|V1".into(), "float8_e4m3b11fnuz"),
            (dt(14, 8, 1), "|V1".into(), "float8_e8m0fnu"),
            (dt(17, 4, 2), "|V1".into(), "float4_e2m1fn_x2"),
            (dt(16, 6, 4), "|V3".into(), "float6_e3m2fn_x4"),
            (dt(2, 32, 4), format!("{native}V16"), "float32_x4"),
            (dt(4, 16, 8), format!("{native}V16"), "bfloat16_x8"),
        ];
        for (dtype, expected, name) in cases {
            let typed = typestr_of(dtype, SubByte::Packed).unwrap();
            assert_eq!(std::str::from_utf8(typed.as_bytes()).unwrap(), expected);
            assert_eq!(typed.carried, dtype);
            // What the typestr parses to is what the mapping says it does.
            assert_eq!(parse_typestr(typed.as_bytes()).unwrap(), typed.dtype, "{expected}");
            assert_eq!(name_of(dtype).as_deref(), Some(name));
            assert_eq!(dl_dtype_agrees_with_typestr(dtype, typed.dtype, 0), Ok(()));
        }
    }

    #[test]
    fn numpy_types_travel_by_their_typestr_alone() {
        for (dtype, name) in [(dt(2, 32, 1), "float32"), (dt(6, 8, 1), "bool"), (dt(5, 128, 1), "complex128")]
        {
            let typed = typestr_of(dtype, SubByte::Packed).unwrap();
            assert!(typed.carried.is_absent());
            assert_eq!(parse_typestr(typed.as_bytes()).unwrap(), typed.dtype);
            assert_eq!(dl_dtype_of_numeric(typed.dtype), Some(dtype));
            assert_eq!(element_type(CaiDLDataType::absent(), typed.dtype), Some(dtype));
            assert_eq!(name_of(dtype).as_deref(), Some(name));
        }
    }

    #[test]
    fn every_name_is_read_back_as_its_type() {
        for code in 0..=20u8 {
            for bits in [0, 4, 6, 8, 16, 32, 64, 128] {
                let dtype = dt(code, bits, 1);
                if let Some(name) = name_of(dtype) {
                    if !is_numpy_kind(code) {
                        assert_eq!(dl_dtype_named(&name), Some(dtype), "{name}");
                    }
                    assert!(typestr_of(dtype, SubByte::Padded).is_ok(), "{name}");
                }
            }
        }
        assert_eq!(dl_dtype_named("float32"), None);
    }

    #[test]
    fn a_packed_sub_byte_scalar_is_refused_naming_the_rule_and_the_ways_out() {
        let e = typestr_of(dt(17, 4, 1), SubByte::Packed).unwrap_err();
        assert_eq!(e.status(), Status::InvalidTypestr);
        assert!(
            e.message().contains("float4_e2m1fn (code 17, bits 4, lanes 1) is packed, 2 elements a byte"),
            "{e}"
        );
        assert!(e.message().contains("float4_e2m1fn_x2") && e.message().contains("PADDED"), "{e}");
        // Padded, one element a byte.
        let typed = typestr_of(dt(17, 4, 1), SubByte::Padded).unwrap();
        assert_eq!(typed.as_bytes(), b"|V1");
        assert_eq!(typed.carried, dt(17, 4, 1));
        let e = typestr_of(dt(15, 6, 3), SubByte::Padded).unwrap_err();
        assert!(e.message().contains("padded with several lanes"), "{e}");
    }

    #[test]
    fn undefined_codes_and_widths_are_refused_by_name() {
        for (dtype, why) in [
            (dt(3, 64, 1), "opaque handle"),
            (dt(18, 8, 1), "does not define"),
            (dt(4, 8, 1), "has 8 bits where DLPack defines 16"),
            (dt(10, 16, 1), "has 16 bits where DLPack defines 8"),
            (dt(17, 8, 1), "has 8 bits where DLPack defines 4"),
            (dt(2, 8, 1), "width numpy does not define"),
            (dt(2, 128, 1), "width numpy does not define"),
            (dt(0, 24, 2), "width numpy does not define"),
            (dt(4, 16, 0), "has 0 lanes"),
            (dt(2, 32, 0), "has 0 lanes"),
        ] {
            let e = typestr_of(dtype, SubByte::Packed).unwrap_err();
            assert_eq!(e.status(), Status::InvalidTypestr);
            assert!(e.message().contains(why), "{dtype:?}: {e}");
        }
    }

    #[test]
    fn a_carried_type_must_agree_with_the_typestr() {
        let bf16 = dt(4, 16, 1);
        let v2 = parse_typestr(b"|V2").unwrap();
        assert_eq!(dl_dtype_agrees_with_typestr(bf16, v2, 0), Ok(()));
        let e = dl_dtype_agrees_with_typestr(bf16, parse_typestr(b"<f2").unwrap(), 0).unwrap_err();
        assert_eq!(e.status(), Status::InvalidTypestr);
        assert!(e.message().contains("bfloat16") && e.message().contains("kind 'f' of 2 bytes"), "{e}");
        let e = dl_dtype_agrees_with_typestr(bf16, parse_typestr(b"|V4").unwrap(), 0).unwrap_err();
        assert!(e.message().contains("of 4 bytes"), "{e}");
        // numpy gives an opaque type no byte order ('>V2' is '|V2'); a numeric one has one.
        let foreign = if cfg!(target_endian = "little") { b">f4" } else { b"<f4" };
        let e = dl_dtype_agrees_with_typestr(dt(2, 32, 1), parse_typestr(foreign).unwrap(), 0).unwrap_err();
        assert!(e.message().contains("other byte order"), "{e}");
        let e = dl_dtype_agrees_with_typestr(bf16, v2, 2).unwrap_err();
        assert_eq!(e.status(), Status::InvalidDescr);
        // A numeric type may be carried too, if it says what the typestr says.
        let f4 = parse_typestr(b"<f4").unwrap();
        assert_eq!(dl_dtype_agrees_with_typestr(dt(2, 32, 1), f4, 0), Ok(()));
        assert!(dl_dtype_agrees_with_typestr(dt(0, 32, 1), f4, 0).is_err());
        let e = dl_dtype_agrees_with_typestr(dt(3, 8, 1), parse_typestr(b"|V1").unwrap(), 0).unwrap_err();
        assert!(e.message().starts_with("dl_dtype: DLPack dtype"), "{e}");
        // A padded sub-byte scalar is one byte.
        assert_eq!(dl_dtype_agrees_with_typestr(dt(17, 4, 1), parse_typestr(b"|V1").unwrap(), 0), Ok(()));
    }
}
