//! Property tests: cai_layout and cai_validate against a straightforward reference model.
//! Small arrays: every element's byte offset enumerated. Large ones: i128 arithmetic, where
//! every overflow of 64 bits must be CAI_ERROR_OVERFLOW and everything else must match.

mod common;

use cai::*;
use proptest::prelude::*;

fn build(shape: &[i64], strides: Option<&[i64]>, itemsize: u64, data: u64) -> CaiArray {
    let typestr = match itemsize {
        1 => "|u1",
        2 => "<i2",
        4 => "<f4",
        _ => "<f8",
    };
    let mut a = common::array(shape, typestr);
    a.data = data;
    if let Some(strides) = strides {
        a = common::with_strides(a, strides);
    }
    a
}

fn layout_of(a: &CaiArray) -> Result<CaiLayout, i32> {
    let mut out = CaiLayout::default();
    // SAFETY: `a` and `out` are live values of the types the function takes; error is NULL.
    match unsafe { cai::cai_layout(a, &mut out, std::ptr::null_mut()) } {
        CAI_OK => Ok(out),
        status => Err(status),
    }
}

/// Offsets of every element in C order.
fn offsets(shape: &[i64], strides: &[i64]) -> Vec<i64> {
    let mut out = vec![0i64];
    for (&extent, &stride) in shape.iter().zip(strides) {
        out = out.iter().flat_map(|&base| (0..extent).map(move |i| base + i * stride)).collect();
    }
    out
}

fn c_strides(shape: &[i64], itemsize: u64) -> Vec<i64> {
    let mut strides = vec![0; shape.len()];
    let mut step = itemsize as i64;
    for i in (0..shape.len()).rev() {
        strides[i] = step;
        step *= shape[i].max(1);
    }
    strides
}

fn small_array() -> impl Strategy<Value = (Vec<i64>, Option<Vec<i64>>, u64)> {
    (0usize..=4, prop::sample::select(vec![1u64, 2, 4, 8])).prop_flat_map(|(ndim, itemsize)| {
        (
            prop::collection::vec(0i64..=4, ndim),
            prop::option::of(prop::collection::vec(-40i64..=40, ndim)),
            Just(itemsize),
        )
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4000))]

    #[test]
    fn small_arrays_match_enumerated_offsets((shape, strides, itemsize) in small_array()) {
        let data = 1 << 20;
        let a = build(&shape, strides.as_deref(), itemsize, data);
        let layout = layout_of(&a).expect("small arrays are valid");
        let effective = strides.clone().unwrap_or_else(|| c_strides(&shape, itemsize));
        let all = offsets(&shape, &effective);
        let count = shape.iter().product::<i64>() as u64;
        prop_assert_eq!(layout.element_count, count);
        prop_assert_eq!(layout.nbytes, count * itemsize);
        if count == 0 {
            prop_assert_eq!((layout.extent_begin, layout.extent_end), (0, 0));
            prop_assert!(layout.c_contiguous == 1 && layout.f_contiguous == 1, "empty arrays are contiguous");
        } else {
            let low = *all.iter().min().unwrap();
            let high = *all.iter().max().unwrap() + itemsize as i64;
            prop_assert_eq!((layout.extent_begin, layout.extent_end), (low, high));
            // C-contiguous: element k in C order sits at k * itemsize.
            let c = all.iter().enumerate().all(|(k, &o)| o == k as i64 * itemsize as i64);
            prop_assert_eq!(layout.c_contiguous == 1, c);
            // F-contiguous: the same for the reversed axes.
            let reversed_shape: Vec<i64> = shape.iter().rev().copied().collect();
            let reversed_strides: Vec<i64> = effective.iter().rev().copied().collect();
            let f = offsets(&reversed_shape, &reversed_strides).iter().enumerate().all(|(k, &o)| o == k as i64 * itemsize as i64);
            prop_assert_eq!(layout.f_contiguous == 1, f);
        }
        let aligned = effective.iter().all(|s| s % itemsize as i64 == 0);
        prop_assert_eq!(layout.strides_itemsize_aligned == 1, aligned);
    }

    #[test]
    fn large_arrays_overflow_exactly_when_64_bits_do(
        shape in prop::collection::vec(prop_oneof![Just(0i64), 1i64..=4, 1i64..=(1 << 40), 1i64..=i64::MAX], 0..=5),
        strides in prop::collection::vec(prop_oneof![-(1i64 << 50)..=(1 << 50), any::<i64>()], 5),
        given in any::<bool>(),
        itemsize in prop::sample::select(vec![1u64, 8]),
        data in prop_oneof![Just(1u64 << 44), any::<u64>()],
    ) {
        let strides = &strides[..shape.len()];
        let a = build(&shape, given.then_some(strides), itemsize, data.max(1));
        let data = a.data;
        // Reference, in i128: numpy's size rule, then the extent, then the address space.
        let span = shape.iter().filter(|&&e| e != 0).try_fold(itemsize as i128, |acc, &e| {
            Some(acc * e as i128).filter(|&a| a <= i64::MAX as i128)
        });
        // Meaningful only where the size rule holds, which also keeps it inside i128.
        let count: i128 = if shape.contains(&0) { 0 } else { span.map_or(0, |s| s / itemsize as i128) };
        let expected: Result<(i64, i64), ()> = (|| {
            span.ok_or(())?;
            if count == 0 {
                return Ok((0, 0));
            }
            let effective: Vec<i128> = if given {
                strides.iter().map(|&s| s as i128).collect()
            } else {
                c_strides(&shape, itemsize).iter().map(|&s| s as i128).collect()
            };
            let (mut begin, mut end) = (0i128, itemsize as i128);
            for (&e, &s) in shape.iter().zip(&effective) {
                let reach = (e as i128 - 1) * s;
                if reach < i64::MIN as i128 || reach > i64::MAX as i128 { return Err(()); }
                if reach < 0 { begin += reach } else { end += reach }
                if begin < i64::MIN as i128 || end > i64::MAX as i128 { return Err(()); }
            }
            if data as i128 + begin < 0 || data as i128 + end > u64::MAX as i128 + 1 { return Err(()); }
            Ok((begin as i64, end as i64))
        })();
        match (layout_of(&a), expected) {
            (Ok(layout), Ok(extent)) => {
                prop_assert_eq!((layout.extent_begin, layout.extent_end), extent);
                prop_assert_eq!(layout.element_count as i128, count);
            }
            (Err(status), Err(())) => prop_assert_eq!(status, CAI_ERROR_OVERFLOW),
            (got, want) => prop_assert!(false, "libcai {:?}, reference {:?} for shape {:?}", got.map(|l| (l.extent_begin, l.extent_end)), want, shape),
        }
    }
}
