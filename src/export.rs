//! Producer side: turn a producer's array into the descriptor consumers receive.

use crate::array::CaiArray;
use crate::normalize::{export_version, normalize_for_export};
use crate::status::Result;
use crate::validate::Validated;

/// How `cai_export` writes a descriptor. Zero-initialized means the defaults.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct CaiExportOptions {
    /// CAI version to write: 3, or 2 (no `stream`); 0 means CAI_ARRAY_INTERFACE_EXPORT_VERSION, else 3.
    pub version: i32,
    /// Zero; room for later options without an ABI break.
    pub reserved: [u32; 7],
}

/// Validates and normalizes `array` for export as `options` ask.
pub fn export(array: &mut CaiArray, options: &CaiExportOptions) -> Result<Validated> {
    crate::validate::reserved_options_are_zero("CaiExportOptions", &options.reserved)?;
    let version = export_version(options.version)?;
    normalize_for_export(array, version)
}
