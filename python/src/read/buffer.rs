//! The reader of the OpenCL/CUDA Buffer Interface (spec/buffer-interface.txt), or of a
//! pyopencl array as it is, for `cai.from_buffer_interface`; the core's rules for CUDA or
//! OpenCL memory apply at the import.

use cai::binding::dict::Repr;
use cai::{Error, Status, CAI_MAX_NDIM, CAI_MEMORY_OPENCL};
use pyo3::exceptions::{PyAttributeError, PyTypeError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::PyBool;

use crate::described::Read;
use crate::errors::{CaiResult, Failure};
use crate::pool::Pooled;
use crate::values::{scalar, TypeOf};

/// An attribute the Buffer Interface requires of `obj`: its absence is a TypeError naming it
/// and what `obj` must be (an AttributeError the attribute's own code raised included).
fn required<'py>(obj: &Bound<'py, PyAny>, name: &str) -> PyResult<Bound<'py, PyAny>> {
    obj.getattr(name).map_err(|error| {
        if !error.is_instance_of::<PyAttributeError>(obj.py()) {
            return error;
        }
        PyTypeError::new_err(format!(
            "obj must be an object of the Buffer Interface (buffer, offset, dtype, shape, strides) or a \
             pyopencl array; a '{}' has no '{name}' ({error})",
            TypeOf::new(obj)
        ))
    })
}

/// Reads one integer attribute of a Buffer Interface object, naming it when it is not one.
fn int_attribute(obj: &Bound<'_, PyAny>, name: &str) -> PyResult<i64> {
    required(obj, name)?
        .extract::<i64>()
        .map_err(|_| PyTypeError::new_err(format!("{}.{name} must be an int", TypeOf::new(obj))))
}

/// A Buffer Interface handle (a CUDA pointer or a cl_mem): an int, never a bool or a float.
fn handle(value: &Bound<'_, PyAny>, name: &str, what: &str) -> PyResult<u64> {
    let refused =
        || PyTypeError::new_err(format!("{name} must be {what}, not {}", Repr(&scalar(value.as_borrowed()))));
    if value.is_instance_of::<PyBool>() {
        return Err(refused());
    }
    value.extract::<u64>().map_err(|_| refused())
}

/// A Buffer Interface `shape` or `strides` read into `out`: at most CAI_MAX_NDIM ints, taken by
/// iterating, so that a sequence whose `__len__` lies is read for what it holds. Returns the
/// count.
fn extents(
    value: &Bound<'_, PyAny>,
    name: &str,
    status: Status,
    out: &mut [i64; CAI_MAX_NDIM],
) -> CaiResult<usize> {
    let not_ints = || PyTypeError::new_err(format!("{name} must be a sequence of ints"));
    let mut count = 0;
    for item in value.try_iter().map_err(|_| not_ints())? {
        let item = item?;
        if count == CAI_MAX_NDIM {
            return Err(Failure::Cai(Error::new(
                status,
                format!("{name} has more than {CAI_MAX_NDIM} entries; at most {CAI_MAX_NDIM} dimensions"),
            )));
        }
        if item.is_instance_of::<PyBool>() {
            return Err(not_ints().into());
        }
        out[count] = item.extract::<i64>().map_err(|_| not_ints())?;
        count += 1;
    }
    Ok(count)
}

/// A Buffer Interface object (spec/buffer-interface.txt, or a pyopencl.array.Array as it is)
/// as a CaiArray: `buffer` with an `int_ptr` is an OpenCL `cl_mem`, else an int CUDA pointer;
/// `offset`, `dtype`, `shape`, `strides`; a pyopencl array's `queue` is what to order against.
fn convert_buffer_interface<'py>(obj: &Bound<'py, PyAny>) -> CaiResult<(Pooled, Bound<'py, PyAny>)> {
    let py = obj.py();
    let buffer = match obj.getattr(intern!(py, "base_data")) {
        Ok(buffer) if !buffer.is_none() => buffer,
        _ => required(obj, "buffer")?,
    };
    let mut array = Pooled::cleared();
    array.version = 3;
    if let Ok(int_ptr) = buffer.getattr(intern!(py, "int_ptr")) {
        array.memory = CAI_MEMORY_OPENCL;
        array.data = handle(&int_ptr, "buffer.int_ptr", "the cl_mem handle")?;
        let offset = int_attribute(obj, "offset")?;
        array.byte_offset = u64::try_from(offset).map_err(|_| {
            Failure::Cai(Error::new(Status::OutOfBounds, format!("offset is {offset}; it must be >= 0")))
        })?;
        if let Ok(queue) = obj.getattr(intern!(py, "queue")) {
            if !queue.is_none() {
                let int_ptr = queue.getattr(intern!(py, "int_ptr")).map_err(|_| {
                    PyTypeError::new_err(format!(
                        "obj.queue must be None or a pyopencl CommandQueue (with int_ptr), not a '{}'",
                        TypeOf::new(&queue)
                    ))
                })?;
                array.stream = handle(&int_ptr, "obj.queue.int_ptr", "the cl_command_queue handle")?;
            }
        }
    } else {
        array.data = handle(&buffer, "buffer", "an int CUDA pointer, or an object with int_ptr (a cl_mem)")?;
        // The spec's CUDA offset is always zero; the core refuses any other.
        array.byte_offset = u64::try_from(int_attribute(obj, "offset")?).unwrap_or(u64::MAX);
    }
    let dtype = required(obj, "dtype")?;
    let typestr: String = match dtype.getattr(intern!(py, "str")) {
        Ok(text) => text.extract()?,
        Err(_) => dtype.extract()?,
    };
    if !array.set_typestr(&typestr) {
        return Err(Failure::Cai(Error::new(
            Status::InvalidTypestr,
            format!("typestr {typestr:?} does not fit"),
        )));
    }
    let ndim = extents(&required(obj, "shape")?, "shape", Status::InvalidShape, &mut array.shape)?;
    array.ndim = ndim as i32;
    let strides = required(obj, "strides")?;
    if !strides.is_none() {
        let given = extents(&strides, "strides", Status::InvalidStrides, &mut array.strides)?;
        if given != ndim {
            return Err(Failure::Cai(Error::new(
                Status::InvalidStrides,
                format!("strides has {given} entries for {ndim} dimensions"),
            )));
        }
        array.strides_given = 1;
    }
    Ok((array, buffer))
}

/// An object of the Buffer Interface read into a description that keeps `obj` alive, and for
/// OpenCL memory its `buffer` (the cl_mem holder) too.
pub fn read_buffer_interface(obj: &Bound<'_, PyAny>) -> CaiResult<Read> {
    let (array, buffer) = convert_buffer_interface(obj)?;
    let opencl = array.memory == CAI_MEMORY_OPENCL;
    let mut read = Read::borrowing(array, None, Some(obj.clone().unbind()), None);
    read.buffer = opencl.then(|| buffer.unbind());
    Ok(read)
}
