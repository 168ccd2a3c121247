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
// cai::ArrayView borrows instead (cai_python_view: no reference, no allocation), for hot paths.
// cai::Array takes device memory with the default import options (blocking sync);
// cai::HostOrDeviceArray takes host memory too (allow_host: numpy arrays, CPU tensors). For
// other options (a consumer stream), call cai::pybind11::from_object.
#ifndef CAI_PYBIND11_H
#define CAI_PYBIND11_H

#include <pybind11/pybind11.h>

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

// The caster of cai::ArrayView (device memory, default import options): borrowed by
// cai_python_view, no reference and no allocation; what that cannot borrow (a mask, named
// descr fields, an exchange table without the non-owning call) is taken by
// cai_python_from_object into an array this caster owns for the call, and viewed.
template <>
struct type_caster<cai::ArrayView> {
  PYBIND11_TYPE_CASTER(cai::ArrayView, const_name("cai.Array"));
  cai::Array owned;

  bool load(handle src, bool convert) {
    CaiError error;
    if (cai_python_view(src.ptr(), nullptr, &value.raw(), &error) == CAI_OK) return true;
    PyErr_Clear();
    if (!cai_array_caster<cai::Array, 0>::take(src, convert, 0, owned.raw())) return false;
    value = cai::ArrayView(owned.raw());
    return true;
  }
};

}  // namespace detail
}  // namespace pybind11

#endif  // CAI_PYBIND11_H
