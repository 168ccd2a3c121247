// nanobind functions for benchmarks/extension_bench.py: the same one-line body behind
// nanobind's own nb::ndarray<> caster, libcai's owning cai::HostOrDeviceArray caster, and a
// borrowed view (cai_python_view with allow_host, which the cai::ArrayView caster, device memory
// only, does with default options), on objects both libraries read (CPU tensors, numpy arrays).
#include "cai/nanobind.h"

#include <nanobind/ndarray.h>

namespace nb = nanobind;

NB_MODULE(cai_bench_nanobind, m) {
  cai::nanobind::import();
  m.def("take_ndarray", [](nb::ndarray<> a) { return a.ndim(); });
  m.def("take_cai", [](cai::HostOrDeviceArray a) { return a.raw().ndim; });
  m.def("take_view", [](nb::handle obj) {
    CaiImportOptions options{};
    options.allow_host = 1;
    CaiArray view;
    if (cai_python_view(obj.ptr(), &options, &view, nullptr) != CAI_OK) throw nb::python_error();
    return view.ndim;
  });
}
