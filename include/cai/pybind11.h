// pybind11 type caster for cai::Array, over cai_python.h: a function taking cai::Array takes
// every object cai.from_object takes (CAI dicts and the objects exposing one, cai.Array, DLPack
// producers); returning a cai::Array gives Python a cai.Array. Call cai::pybind11::import()
// (or cai_python_import()) in the module's init, before any conversion.
//
//   PYBIND11_MODULE(m, mod) {
//     cai::pybind11::import();
//     mod.def("nbytes", [](cai::Array a) { return a.layout().nbytes; });
//   }
//
// An object libcai refuses raises libcai's cai.CaiError (a ValueError) naming the field; one
// that is no array at all lets pybind11 try the function's other overloads, and raises
// libcai's TypeError when none takes it (so declare cai::Array overloads after the others).
// cai::ArrayView borrows instead where it can (cai_python_view_or_own: no reference, no
// allocation), for hot paths.
// cai::Array takes device memory with the default import options (blocking sync);
// cai::HostOrDeviceArray takes host memory too (allow_host: numpy arrays, CPU tensors). For
// other options (a consumer stream), call cai::pybind11::from_object.
//
// A bound class becomes a producer with cai::pybind11::offer<fill>(cls), after the class_ is
// made: the type gains __cuda_array_interface__ (v3), __dlpack__ and __dlpack_device__,
// DLPack's exchange table and the C-level CAI table, each read through `fill`, a member or free
// function that describes the instance into `out` (cai_python.h's CaiPythonFill says what it
// writes: data, ndim, shape, typestr, strides, readonly, stream, and the device for host memory):
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
//   py::class_<Image> cls(m, "Image");
//   cai::pybind11::offer<&Image::fill>(cls);
//
// The fill runs with the GIL held and must not run Python code. It refuses by returning a
// status with `error.message` written (the glue prefixes the type's name), or by throwing:
// error_already_set and pybind11's builtin exceptions (value_error, ...) reach Python as they
// are, cai::Error as its status and message, any other exception as CAI_ERROR_INVALID_ARGUMENT
// naming it (std::bad_alloc as MemoryError); nothing unwinds into libcai. Each consumer that
// reads the instance keeps it alive (a DLPack capsule until its deleter runs, a cai.Array while
// it lives).
#ifndef CAI_PYBIND11_H
#define CAI_PYBIND11_H

#include <pybind11/pybind11.h>

#include <functional>
#include <new>
#include <type_traits>

#include "cai_python.h"
#include "cai.hpp"

namespace cai {
namespace pybind11 {

// Reads the table from the installed cai package; throws error_already_set on failure.
inline void import() {
  if (cai_python_import() < 0) throw ::pybind11::error_already_set();
}

// cai_python_from_object with `options` (NULL: the defaults); throws error_already_set with
// libcai's exception on failure.
inline Array from_object(::pybind11::handle obj, const CaiImportOptions* options = nullptr) {
  CaiArray raw;
  CaiError error;
  if (cai_python_from_object(obj.ptr(), options, &raw, &error) != CAI_OK) throw ::pybind11::error_already_set();
  return Array(std::move(raw));
}

// A new cai.Array owning `array` (its release runs when Python lets go of it).
inline ::pybind11::object to_object(Array&& array) {
  PyObject* made = cai_python_to_object(&array.raw());
  if (made == nullptr) throw ::pybind11::error_already_set();
  return ::pybind11::reinterpret_steal<::pybind11::object>(made);
}

namespace detail {
// The C++ instance of `self` (an instance of the offered class or of a subclass: the glue
// checked, so `self` has pybind11's instance layout), by pybind11's own caster without
// conversions (no Python code runs); NULL when there is none: pybind11 allocates the value of
// an instance whose __init__ did not run, but constructs nothing in it.
template <typename T>
T* instance_of(PyObject* self) {
  auto* instance = reinterpret_cast<::pybind11::detail::instance*>(self);
  for (const auto& value_and_holder : ::pybind11::detail::values_and_holders(instance))
    if (!value_and_holder.holder_constructed()) return nullptr;
  ::pybind11::detail::make_caster<T> caster;
  if (!caster.load(::pybind11::handle(self), false)) return nullptr;
  return ::pybind11::detail::cast_op<T*>(caster);
}

// The CaiPythonFill cai_python_offer is given: a plain function per (Fill, T), which finds
// the instance and calls the author's fill, every C++ exception caught.
template <auto Fill, typename T>
CaiStatus offered_fill(PyObject* self, CaiArray* out, CaiDLDevice* device, CaiError* error) noexcept {
  try {
    T* instance = instance_of<T>(self);
    if (instance == nullptr)
      return ::cai::detail::fill_refused(*error, CAI_ERROR_INVALID_ARGUMENT,
                                         "the object holds no C++ instance (its __init__ did not run)");
    return std::invoke(Fill, *instance, *out, *device, *error);
  } catch (::pybind11::error_already_set& e) {
    e.restore();
    return CAI_ERROR_PYTHON;
  } catch (const ::pybind11::builtin_exception& e) {
    e.set_error();
    return CAI_ERROR_PYTHON;
  } catch (...) {
    return ::cai::detail::fill_failed(*error);
  }
}
}  // namespace detail

// Gives the bound class every producer protocol, each read through `Fill`: a member function
// `CaiStatus T::fill(CaiArray& out, CaiDLDevice& device, CaiError& error) const`, or a free
// function `CaiStatus fill(const T& self, CaiArray& out, CaiDLDevice& device, CaiError& error)`
// (see the top of this file). Subclasses, Python ones too, inherit them. Throws
// error_already_set: a TypeError when the class defines one of the attributes itself or was
// offered already. Returns `cls`.
template <auto Fill, typename T, typename... Options>
::pybind11::class_<T, Options...>& offer(::pybind11::class_<T, Options...>& cls) {
  static_assert(std::is_invocable_r_v<CaiStatus, decltype(Fill), T&, CaiArray&, CaiDLDevice&, CaiError&>,
                "cai::pybind11::offer<Fill>: Fill is CaiStatus (T::*)(CaiArray&, CaiDLDevice&, CaiError&) const, or "
                "CaiStatus (*)(const T&, CaiArray&, CaiDLDevice&, CaiError&)");
  if (cai_python_offer(reinterpret_cast<PyTypeObject*>(cls.ptr()), &detail::offered_fill<Fill, T>) < 0)
    throw ::pybind11::error_already_set();
  return cls;
}

}  // namespace pybind11
}  // namespace cai

namespace pybind11 {
namespace detail {

// The caster of cai::Array (default import options) and of cai::HostOrDeviceArray (allow_host).
template <typename T, uint32_t AllowHost>
struct cai_array_caster {
  PYBIND11_TYPE_CASTER(T, const_name("cai.Array"));

  bool load(handle src, bool convert) { return take(src, convert, AllowHost, value.raw()); }

  // cai_python_from_object into `out` (empty; left untouched on failure), with the caster's
  // handling of what it refuses.
  static bool take(handle src, bool convert, uint32_t allow_host, CaiArray& out) {
    CaiImportOptions options{};
    options.allow_host = allow_host;
    CaiError error;
    if (cai_python_from_object(src.ptr(), &options, &out, &error) == CAI_OK) return true;
    return refused(error, convert);
  }

  // What the caster makes of a refusal (`error` written, the exception set): false on
  // pybind11's first pass for what is no array (another overload may take it exactly), else
  // the exception thrown.
  static bool refused(const CaiError& error, bool convert) {
    bool not_an_array = error.code == CAI_ERROR_PYTHON &&
                        (PyErr_ExceptionMatches(PyExc_TypeError) || PyErr_ExceptionMatches(PyExc_AttributeError));
    if (not_an_array && !convert) {
      PyErr_Clear();  // pybind11's first pass: another overload may take it exactly
      return false;
    }
    if (not_an_array) {
      // The last pass: libcai's text (what it looked for), as the TypeError pybind11 raises.
      error_already_set raised;
      PyErr_SetString(PyExc_TypeError, str(raised.value()).cast<std::string>().c_str());
    }
    throw error_already_set();
  }

  static handle cast(T&& src, return_value_policy, handle) {
    return cai::pybind11::to_object(std::move(src)).release();
  }
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
  PYBIND11_TYPE_CASTER(cai::ArrayView, const_name("cai.Array"));
  cai::Array owned;

  bool load(handle src, bool convert) {
    CaiError error;
    if (cai_python_view_or_own(src.ptr(), nullptr, &value.raw(), &error) != CAI_OK)
      return cai_array_caster<cai::Array, 0>::refused(error, convert);
    if (value.raw().release != nullptr) {
      owned = cai::Array(std::move(value.raw()));  // cai_move: the fields stay, the release goes
      value.raw().owner = nullptr;                  // a view names no owner
    }
    return true;
  }
};

}  // namespace detail
}  // namespace pybind11

#endif  // CAI_PYBIND11_H
