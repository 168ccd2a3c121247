// pybind11 functions for benchmarks/extension_bench.py: the same one-line body behind a
// cai::Array parameter, a cai::ArrayView parameter (borrowed) and py::array::ensure.
#include "cai/pybind11.h"

#include <pybind11/numpy.h>

namespace py = pybind11;

PYBIND11_MODULE(cai_bench_pybind11, m) {
  cai::pybind11::import();
  m.def("take_cai", [](cai::Array a) { return a.raw().ndim; });
  m.def("take_view", [](cai::ArrayView a) { return a.raw().ndim; });
  m.def("take_cai_no_sync", [](py::handle obj) {
    CaiImportOptions options{};
    options.sync_mode = CAI_SYNC_NONE;
    return cai::pybind11::from_object(obj, &options).raw().ndim;
  });
  m.def("take_numpy", [](py::handle obj) { return py::array::ensure(obj).ndim(); });
}
