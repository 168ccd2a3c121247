//! CAI_ARRAY_INTERFACE_EXPORT_VERSION=2, in a test binary of its own: libcai reads the variable
//! once per process, at the first export that needs it, so the variable is set before that.

mod common;

use cai::*;
use common::*;

#[test]
fn row_48_export_version_env_var_selects_version_2_without_stream_read_once() {
    std::env::set_var("CAI_ARRAY_INTERFACE_EXPORT_VERSION", "2");
    let mut a = array(&[4], "<f4");
    a.stream = 1;
    assert_eq!(export(&mut a, 0).0, CAI_OK);
    assert_eq!((a.version, a.stream), (2, 0));
    let mut b = array(&[4], "<f4");
    b.stream = 1;
    assert_eq!(export(&mut b, 3).0, CAI_OK, "an explicit version wins over the environment");
    assert_eq!((b.version, b.stream), (3, 1));

    // Read once: a later change does not move the default under a running program.
    std::env::set_var("CAI_ARRAY_INTERFACE_EXPORT_VERSION", "3");
    let mut c = array(&[4], "<f4");
    assert_eq!(export(&mut c, 0).0, CAI_OK);
    assert_eq!(c.version, 2);
}
