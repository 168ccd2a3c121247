//! One reader per protocol, each from an object to the struct the core imports: an object's
//! attributes, the last reader of a route, which hands what it finds to the dict or DLPack
//! reader (`attributes`), a CAI dict or `__cuda_array_interface__` (`dict`), a DLPack producer
//! without an exchange table (`dlpack`), a type's DLPack exchange table (`exchange`), a type's
//! C-level CAI table (`c_api`), a numpy array by numpy's C ABI (`numpy`), the OpenCL/CUDA
//! Buffer Interface (`buffer`) and a cai.Array given as input (`array`). negotiate/ chooses
//! which one reads an object.

pub mod array;
pub mod attributes;
pub mod buffer;
pub mod c_api;
pub mod dict;
pub mod dlpack;
pub mod exchange;
pub mod numpy;
