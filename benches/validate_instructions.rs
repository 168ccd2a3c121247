//! Runs one validator on one array in a loop, for instruction counts under callgrind (criterion
//! times on a shared machine are noisy; instructions are not). benchmarks/validate_instructions.sh
//! runs it for each case and prints instructions per call.
//!
//! validate_instructions (floor|cai_validate) (1-D|3-D|8-D|descr-100000) CALLS

mod support;

use std::hint::black_box;

fn main() {
    let args: Vec<String> = std::env::args().filter(|a| a != "--bench").collect();
    let [_, validator, case, calls] = &args[..] else {
        panic!("usage: validate_instructions (floor|cai_validate) (1-D|3-D|8-D) CALLS")
    };
    let calls: u64 = calls.parse().expect("CALLS is a number");
    let fields = support::many_fields(100_000);
    let a = if case == "descr-100000" {
        support::with_descr(&fields)
    } else {
        support::floor_cases().into_iter().find(|(name, _)| name == case).expect("a known case").1
    };
    let floor = support::minimal_validator();
    let mut failures = 0;
    for _ in 0..calls {
        failures += match validator.as_str() {
            "floor" => floor(black_box(&a)),
            // SAFETY: every pointer is NULL or points to a live value of the type the function takes.
            "cai_validate" => unsafe { cai::cai_validate(black_box(&a), std::ptr::null_mut()) },
            other => panic!("unknown validator {other}"),
        };
    }
    assert_eq!(failures, 0);
}
