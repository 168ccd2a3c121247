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
// TypeError. cai::ArrayView borrows instead (cai_python_view: no reference, no allocation), for
// hot paths. cai::HostOrDeviceArray takes host memory too (allow_host: numpy arrays, CPU
// tensors). For libcai's message (cai.CaiError naming the field), or other import options (a
// consumer stream), take a nanobind::handle and call cai::nanobind::from_object.
#ifndef CAI_NANOBIND_H
#define CAI_NANOBIND_H

#include <nanobind/nanobind.h>

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

// The caster of cai::ArrayView (device memory, default import options): borrowed by
// cai_python_view, no reference and no allocation; what that cannot borrow (a mask, named
// descr fields, an exchange table without the non-owning call) is taken by
// cai_python_from_object into an array this caster owns for the call, and viewed.
template <>
struct type_caster<cai::ArrayView> {
  NB_TYPE_CASTER(cai::ArrayView, const_name("cai.Array"))
  cai::Array owned;

  bool from_python(handle src, uint8_t, cleanup_list*) noexcept {
    CaiError error;
    if (cai_python_view(src.ptr(), nullptr, &value.raw(), &error) == CAI_OK) return true;
    PyErr_Clear();
    if (cai_python_from_object(src.ptr(), nullptr, &owned.raw(), &error) != CAI_OK) {
      PyErr_Clear();
      return false;
    }
    value = cai::ArrayView(owned.raw());
    return true;
  }
};

}  // namespace detail
}  // namespace nanobind

#endif  // CAI_NANOBIND_H
