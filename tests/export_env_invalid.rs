//! A malformed CAI_ARRAY_INTERFACE_EXPORT_VERSION, in a test binary of its own (the variable is
//! read once per process): every export that would use it is refused, naming it.

mod common;

use cai::*;
use common::*;

#[test]
fn a_malformed_export_version_env_var_is_refused_by_every_default_export() {
    std::env::set_var("CAI_ARRAY_INTERFACE_EXPORT_VERSION", "7");
    for _ in 0..2 {
        let (status, message) = export(&mut array(&[4], "<f4"), 0);
        assert_eq!(status, CAI_ERROR_INVALID_ARGUMENT);
        assert!(message.contains("CAI_ARRAY_INTERFACE_EXPORT_VERSION=\"7\""), "{message}");
    }
    let mut explicit = array(&[4], "<f4");
    assert_eq!(export(&mut explicit, 3).0, CAI_OK, "an explicit version needs no environment");
}
