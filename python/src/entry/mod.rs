//! The module's entry points, what Python and C call, each above everything it runs:
//! - `from_object`: `cai.from_object`'s raw `METH_FASTCALL` entry;
//! - `functions`: the Python functions (`cai.from_object`'s body, `cai.validate`,
//!   `cai.from_buffer_interface`);
//! - `c_api_table`: the C API table for compiled extensions (include/cai_python.h);
//! - `ipc`: arrays across processes (`cai.ipc_export`, `cai.ipc_open`, pickling).

pub mod c_api_table;
pub mod from_object;
pub mod functions;
pub mod ipc;
