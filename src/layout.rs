//! Array layout: element count, byte size, contiguity and byte extent, every product
//! overflow-checked. Shapes are already known non-negative when these run.

use crate::status::{fail, Error, Result, Status};

fn overflow(what: String) -> Error {
    Error::new(Status::Overflow, what)
}

/// Number of elements. Like numpy ("array is too big"), itemsize times the product of the
/// non-zero extents must fit in i64 even when another extent is 0: then no consumer
/// multiplying extents in another order can wrap, and C strides always exist.
#[inline]
pub fn element_count(shape: &[i64], itemsize: u64) -> Result<u64> {
    let mut span: u64 = itemsize;
    let mut count: u64 = 1;
    let mut has_zero = false;
    for (i, &extent) in shape.iter().enumerate() {
        if extent == 0 {
            has_zero = true;
            continue;
        }
        span = match span.checked_mul(extent as u64) {
            Some(product) if product <= i64::MAX as u64 => product,
            _ => {
                return fail(Status::Overflow, move || {
                    format!("shape: {itemsize}-byte items times the extents up to shape[{i}] = {extent} overflow 64 bits")
                })
            }
        };
        // No overflow while itemsize >= 1 (count <= span); a second product, not span /
        // itemsize, because a 64-bit division costs more than this whole loop.
        count = count.wrapping_mul(extent as u64);
    }
    Ok(if has_zero || itemsize == 0 { 0 } else { count })
}

/// Byte size of `count` elements.
#[inline]
pub fn nbytes(count: u64, itemsize: u64) -> Result<u64> {
    match count.checked_mul(itemsize) {
        Some(n) if n <= i64::MAX as u64 => Ok(n),
        _ => fail(Status::Overflow, move || {
            format!("nbytes: {count} elements of {itemsize} bytes overflow 64 bits")
        }),
    }
}

/// The strides of a C-contiguous array of this shape.
pub fn c_strides(shape: &[i64], itemsize: u64, out: &mut [i64]) -> Result<()> {
    let mut stride = itemsize as i64;
    for i in (0..shape.len()).rev() {
        out[i] = stride;
        // Extent 0 makes the array empty; the strides after it are never used to address data.
        stride = stride.checked_mul(shape[i].max(1)).ok_or_else(|| {
            overflow(format!("strides: C strides overflow 64 bits at shape[{i}] = {}", shape[i]))
        })?;
    }
    Ok(())
}

/// numpy's C-contiguity: an empty array is contiguous, size-1 dimensions are ignored.
pub fn is_c_contiguous(shape: &[i64], strides: &[i64], itemsize: u64) -> bool {
    contiguous_in_order(shape.iter().zip(strides).rev(), shape, itemsize)
}

/// numpy's Fortran-contiguity, with the same exemptions as C-contiguity.
pub fn is_f_contiguous(shape: &[i64], strides: &[i64], itemsize: u64) -> bool {
    contiguous_in_order(shape.iter().zip(strides), shape, itemsize)
}

fn contiguous_in_order<'a>(
    innermost_first: impl Iterator<Item = (&'a i64, &'a i64)>,
    shape: &[i64],
    itemsize: u64,
) -> bool {
    if shape.contains(&0) {
        return true;
    }
    let mut expected = itemsize as i128;
    for (&extent, &stride) in innermost_first {
        if extent == 1 {
            continue;
        }
        if i128::from(stride) != expected {
            return false;
        }
        expected *= i128::from(extent);
    }
    true
}

/// Byte offsets [begin, end) from the data pointer that the elements touch. A negative stride
/// reaches below the pointer (the pointer is at the first element, not the lowest address).
// Inlined into validation (its one caller), where its result then stays in registers; the
// refusals are built out of line.
#[inline]
pub fn byte_extent(shape: &[i64], strides: &[i64], itemsize: u64, count: u64) -> Result<(i64, i64)> {
    if count == 0 {
        return Ok((0, 0));
    }
    let (mut begin, mut end) = (0i64, itemsize as i64);
    for (i, (&extent, &stride)) in shape.iter().zip(strides).enumerate() {
        let Some(reach) = (extent - 1).checked_mul(stride) else {
            return Err(reach_overflows(i, extent, stride));
        };
        let total = if reach < 0 { begin.checked_add(reach) } else { end.checked_add(reach) };
        let Some(total) = total else { return Err(extent_overflows(i, stride)) };
        if reach < 0 {
            begin = total;
        } else {
            end = total;
        }
    }
    Ok((begin, end))
}

#[cold]
fn reach_overflows(i: usize, extent: i64, stride: i64) -> Error {
    overflow(format!("strides: shape[{i}] = {extent} times strides[{i}] = {stride} overflows 64 bits"))
}

#[cold]
fn extent_overflows(i: usize, stride: i64) -> Error {
    overflow(format!("strides: byte extent overflows 64 bits at strides[{i}] = {stride}"))
}

/// True when every stride is a multiple of the itemsize.
pub fn strides_itemsize_aligned(strides: &[i64], itemsize: u64) -> bool {
    strides.iter().all(|&s| i128::from(s) % i128::from(itemsize) == 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn element_count_multiplies_extents_and_checks_overflow() {
        assert_eq!(element_count(&[], 4).unwrap(), 1);
        assert_eq!(element_count(&[2, 3, 4], 4).unwrap(), 24);
        assert_eq!(element_count(&[2, 0, 4], 4).unwrap(), 0);
        assert_eq!(element_count(&[1 << 32, 1 << 31], 1).unwrap_err().status, Status::Overflow);
        assert_eq!(element_count(&[0, 1 << 32, 1 << 32], 1).unwrap_err().status, Status::Overflow);
        // Found by fuzz_validate: empty, but its C strides would overflow. numpy refuses it too.
        assert_eq!(element_count(&[0, 1 << 62], 4).unwrap_err().status, Status::Overflow);
        assert_eq!(element_count(&[0, 1 << 60], 4).unwrap(), 0);
        assert_eq!(nbytes(1 << 61, 8).unwrap_err().status, Status::Overflow);
    }

    #[test]
    fn c_strides_and_contiguity_follow_numpy() {
        let mut s = [0i64; 3];
        c_strides(&[2, 3, 4], 4, &mut s).unwrap();
        assert_eq!(s, [48, 16, 4]);
        assert!(is_c_contiguous(&[2, 3, 4], &s, 4));
        assert!(!is_f_contiguous(&[2, 3, 4], &s, 4));
        assert!(is_f_contiguous(&[2, 3, 4], &[4, 8, 24], 4));
        assert!(!is_c_contiguous(&[2, 3, 4], &[4, 8, 24], 4));
        // size-1 dimensions carry any stride.
        assert!(is_c_contiguous(&[1, 3, 1], &[999, 4, -7], 4));
        assert!(is_f_contiguous(&[1, 3, 1], &[999, 4, -7], 4));
        // a[::2]
        assert!(!is_c_contiguous(&[5], &[8], 4));
        // empty arrays are contiguous whatever their strides.
        assert!(is_c_contiguous(&[0, 3], &[5, 5], 4));
    }

    #[test]
    fn byte_extent_reaches_below_the_pointer_with_negative_strides() {
        // a[::-1] of 10 float32: pointer at the last element.
        assert_eq!(byte_extent(&[10], &[-4], 4, 10).unwrap(), (-36, 4));
        assert_eq!(byte_extent(&[2, 3], &[12, 4], 4, 6).unwrap(), (0, 24));
        assert_eq!(byte_extent(&[2, 3], &[-12, 4], 4, 6).unwrap(), (-12, 12));
        assert_eq!(byte_extent(&[0, 3], &[-12, 4], 4, 0).unwrap(), (0, 0));
        assert_eq!(byte_extent(&[3], &[i64::MAX], 1, 3).unwrap_err().status, Status::Overflow);
        assert_eq!(
            byte_extent(&[2, 2], &[i64::MIN / 2, i64::MIN / 2 - 1], 1, 4).unwrap_err().status,
            Status::Overflow
        );
    }

    #[test]
    fn stride_alignment_is_reported() {
        assert!(strides_itemsize_aligned(&[8, -4], 4));
        assert!(!strides_itemsize_aligned(&[6], 4));
    }
}
