//! CAI_ARRAY_INTERFACE_EXPORT_VERSION, in a test binary of its own: it sets the environment.

mod common;

use cai::*;
use common::*;

#[test]
fn row_48_export_version_env_var_selects_version_2_without_stream() {
    let mut a = array(&[4], "<f4");
    a.stream = 1;
    assert_eq!(export(&mut a, 0).0, CAI_OK);
    assert_eq!((a.version, a.stream), (3, 1), "unset: version 3");

    std::env::set_var("CAI_ARRAY_INTERFACE_EXPORT_VERSION", "2");
    let mut a = array(&[4], "<f4");
    a.stream = 1;
    assert_eq!(export(&mut a, 0).0, CAI_OK);
    assert_eq!((a.version, a.stream), (2, 0));
    assert_eq!(export(&mut a, 3).0, CAI_OK, "an explicit version wins over the environment");
    assert_eq!(a.version, 3);

    std::env::set_var("CAI_ARRAY_INTERFACE_EXPORT_VERSION", "7");
    let (status, message) = export(&mut array(&[4], "<f4"), 0);
    assert_eq!(status, CAI_ERROR_INVALID_ARGUMENT);
    assert!(message.contains("CAI_ARRAY_INTERFACE_EXPORT_VERSION=\"7\""), "{message}");
    std::env::remove_var("CAI_ARRAY_INTERFACE_EXPORT_VERSION");
}
