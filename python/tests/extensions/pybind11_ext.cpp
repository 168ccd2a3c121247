// A pybind11 extension built against the installed cai package only: cai::Array by its caster.
#include "cai/pybind11.h"
#include "description.h"

namespace py = pybind11;

static py::object described(const cai::Array& a) {
  PyObject* seen = cai_test_description(&a.raw());
  if (seen == nullptr) throw py::error_already_set();
  return py::reinterpret_steal<py::object>(seen);
}

#ifdef CAI_TEST_NO_IMPORT
// The same module whose init forgot the import: the table is read on first use.
PYBIND11_MODULE(cai_pybind11_ext_no_import, m) {
#else
PYBIND11_MODULE(cai_pybind11_ext, m) {
  cai::pybind11::import();
#endif
  m.def("describe", [](cai::Array a) { return described(a); });
  m.def("describe_host", [](py::handle obj) {
    CaiImportOptions options{};
    options.allow_host = 1;
    return described(cai::pybind11::from_object(obj, &options));
  });
  m.def("hand_back", [](cai::Array a) { return a; });
  m.def("describe_view", [](cai::ArrayView a) {
    PyObject* seen = cai_test_description(&a.raw());
    if (seen == nullptr) throw py::error_already_set();
    return py::reinterpret_steal<py::object>(seen);
  });
  m.def("describe_any_memory", [](cai::HostOrDeviceArray a) { return described(a); });
  m.def("overloaded", [](int) { return "int"; });
  m.def("overloaded", [](cai::Array) { return "array"; });
}
