// nanobind type caster for cai::Array, over cai_python.h: a function taking cai::Array takes
// every object cai.from_object takes (CAI dicts and the objects exposing one, cai.Array, DLPack
// producers); returning a cai::Array gives Python a cai.Array. Call cai::nanobind::import()
// (or cai_python_import()) in the module's init, before any conversion.
//
//   NB_MODULE(m, mod) {
//     cai::nanobind::import();
//     mod.def("nbytes", [](cai::Array a) { return a.layout().nbytes; });
//   }
//
// nanobind's casters cannot raise (from_python is noexcept, and a refusal becomes nanobind's
// own "incompatible function arguments" TypeError), so an object the caster refuses gets that
// TypeError. cai::ArrayView borrows instead where it can (cai_python_view_or_own: no reference,
// no allocation), for hot paths. cai::HostOrDeviceArray takes host memory too (allow_host:
// numpy arrays, CPU tensors). For libcai's message (cai.CaiError naming the field), or other
// import options (a consumer stream), take a nanobind::handle and call
// cai::nanobind::from_object.
//
// A bound class becomes a producer with cai::nanobind::offer<fill>(cls), after the class_ is
// made: the type gains __cuda_array_interface__ (v3), __dlpack__ and __dlpack_device__,
// DLPack's exchange table and the C-level CAI table, each read through `fill`, a member or free
// function that describes the instance into `out` (cai_python.h's CaiPythonFill says what it
// writes), as with cai/pybind11.h:
//
//   struct Image {
//     std::vector<float> pixels;
//     int64_t height, width;
//     CaiStatus fill(CaiArray& out, CaiDLDevice& device, CaiError&) const {
//       out.data = reinterpret_cast<uintptr_t>(pixels.data());
//       out.ndim = 2;
//       out.shape[0] = height;
//       out.shape[1] = width;
//       std::strcpy(out.typestr, "<f4");
//       device = {CAI_DL_CPU, 0};  // host memory; leave it for CUDA memory
//       return CAI_OK;
//     }
//   };
//   nb::class_<Image> cls(m, "Image");
//   cai::nanobind::offer<&Image::fill>(cls);
//
// The fill runs with the GIL held and must not run Python code. It refuses by returning a
// status with `error.message` written (the glue prefixes the type's name), or by throwing:
// python_error and nanobind's builtin exceptions (value_error, ...) reach Python as they are,
// cai::Error as its status and message, any other exception as CAI_ERROR_INVALID_ARGUMENT naming
// it (std::bad_alloc as MemoryError); nothing unwinds into libcai. nanobind's types are mutable
// heap types: the offer sets the attributes on the type, as on any heap type.
#ifndef CAI_NANOBIND_H
#define CAI_NANOBIND_H

#include <nanobind/nanobind.h>

#include <functional>
#include <new>
#include <type_traits>

#include "cai_python.h"
#include "cai.hpp"

namespace cai {
namespace nanobind {

// Reads the table from the installed cai package; throws python_error on failure.
inline void import() {
  if (cai_python_import() < 0) throw ::nanobind::python_error();
}

// cai_python_from_object with `options` (NULL: the defaults); throws python_error with
// libcai's exception on failure.
inline Array from_object(::nanobind::handle obj, const CaiImportOptions* options = nullptr) {
  CaiArray raw;
  CaiError error;
  if (cai_python_from_object(obj.ptr(), options, &raw, &error) != CAI_OK) throw ::nanobind::python_error();
  return Array(std::move(raw));
}

// A new cai.Array owning `array` (its release runs when Python lets go of it).
inline ::nanobind::object to_object(Array&& array) {
  PyObject* made = cai_python_to_object(&array.raw());
  if (made == nullptr) throw ::nanobind::python_error();
  return ::nanobind::steal(made);
}

namespace detail {
// The Python exception of a nanobind builtin exception (NULL: none, next_overload).
inline PyObject* builtin_exception_type(::nanobind::exception_type type) noexcept {
  switch (type) {
    case ::nanobind::exception_type::runtime_error: return PyExc_RuntimeError;
    case ::nanobind::exception_type::stop_iteration: return PyExc_StopIteration;
    case ::nanobind::exception_type::index_error: return PyExc_IndexError;
    case ::nanobind::exception_type::key_error: return PyExc_KeyError;
    case ::nanobind::exception_type::value_error: return PyExc_ValueError;
    case ::nanobind::exception_type::type_error: return PyExc_TypeError;
    case ::nanobind::exception_type::buffer_error: return PyExc_BufferError;
    case ::nanobind::exception_type::import_error: return PyExc_ImportError;
    case ::nanobind::exception_type::attribute_error: return PyExc_AttributeError;
    default: return nullptr;
  }
}

// The CaiPythonFill cai_python_offer is given: a plain function per (Fill, T), which finds
// the instance (a type check and nanobind's instance pointer: no Python code runs) and calls
// the author's fill, every C++ exception caught.
template <auto Fill, typename T>
CaiStatus offered_fill(PyObject* self, CaiArray* out, CaiDLDevice* device, CaiError* error) noexcept {
  try {
    ::nanobind::handle handle(self);
    if (!::nanobind::isinstance<T>(handle) || !::nanobind::inst_ready(handle))
      return ::cai::detail::fill_refused(*error, CAI_ERROR_INVALID_ARGUMENT,
                                         "the object holds no C++ instance (its __init__ did not run)");
    return std::invoke(Fill, *::nanobind::inst_ptr<T>(handle), *out, *device, *error);
  } catch (::nanobind::python_error& e) {
    e.restore();
    return CAI_ERROR_PYTHON;
  } catch (const ::nanobind::builtin_exception& e) {
    if (PyObject* type = builtin_exception_type(e.type())) {
      PyErr_SetString(type, e.what());
      return CAI_ERROR_PYTHON;
    }
    return ::cai::detail::fill_threw(*error, e);
  } catch (...) {
    return ::cai::detail::fill_failed(*error);
  }
}
}  // namespace detail

// Gives the bound class every producer protocol, each read through `Fill`: a member function
// `CaiStatus T::fill(CaiArray& out, CaiDLDevice& device, CaiError& error) const`, or a free
// function `CaiStatus fill(const T& self, CaiArray& out, CaiDLDevice& device, CaiError& error)`
// (see the top of this file). Subclasses, Python ones too, inherit them. Throws python_error: a
// TypeError when the class defines one of the attributes itself or was offered already.
// Returns `cls`.
template <auto Fill, typename T, typename... Extra>
::nanobind::class_<T, Extra...>& offer(::nanobind::class_<T, Extra...>& cls) {
  static_assert(std::is_invocable_r_v<CaiStatus, decltype(Fill), T&, CaiArray&, CaiDLDevice&, CaiError&>,
                "cai::nanobind::offer<Fill>: Fill is CaiStatus (T::*)(CaiArray&, CaiDLDevice&, CaiError&) const, or "
                "CaiStatus (*)(const T&, CaiArray&, CaiDLDevice&, CaiError&)");
  if (cai_python_offer(reinterpret_cast<PyTypeObject*>(cls.ptr()), &detail::offered_fill<Fill, T>) < 0)
    throw ::nanobind::python_error();
  return cls;
}

}  // namespace nanobind
}  // namespace cai

namespace nanobind {
namespace detail {

// The caster of cai::Array (default import options) and of cai::HostOrDeviceArray (allow_host).
template <typename T, uint32_t AllowHost>
struct cai_array_caster {
  NB_TYPE_CASTER(T, const_name("cai.Array"))

  bool from_python(handle src, uint8_t, cleanup_list*) noexcept {
    CaiImportOptions options{};
    options.allow_host = AllowHost;
    CaiError error;
    // Straight into the (empty) value: on failure it is left untouched.
    if (cai_python_from_object(src.ptr(), &options, &value.raw(), &error) == CAI_OK) return true;
    PyErr_Clear();
    return false;
  }

  static handle from_cpp(T&& src, rv_policy, cleanup_list*) noexcept { return cai_python_to_object(&src.raw()); }
};

template <>
struct type_caster<cai::Array> : cai_array_caster<cai::Array, 0> {};
template <>
struct type_caster<cai::HostOrDeviceArray> : cai_array_caster<cai::HostOrDeviceArray, 1> {};

// The caster of cai::ArrayView (device memory, default import options), by
// cai_python_view_or_own: borrowed where a borrowed struct can hold the array (no reference,
// no allocation); what it cannot (a mask, named descr fields, an exchange table without the
// non-owning call) imported owning by the same call into an array this caster owns for the
// call, and viewed.
template <>
struct type_caster<cai::ArrayView> {
  NB_TYPE_CASTER(cai::ArrayView, const_name("cai.Array"))
  cai::Array owned;

  bool from_python(handle src, uint8_t, cleanup_list*) noexcept {
    CaiError error;
    if (cai_python_view_or_own(src.ptr(), nullptr, &value.raw(), &error) != CAI_OK) {
      PyErr_Clear();
      return false;
    }
    if (value.raw().release != nullptr) {
      owned = cai::Array(std::move(value.raw()));  // cai_move: the fields stay, the release goes
      value.raw().owner = nullptr;                  // a view names no owner
    }
    return true;
  }
};

}  // namespace detail
}  // namespace nanobind

#endif  // CAI_NANOBIND_H
