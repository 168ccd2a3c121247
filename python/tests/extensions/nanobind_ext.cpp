// A nanobind extension built against the installed cai package only: cai::Array by its caster.
#include "cai/nanobind.h"
#include "description.h"

namespace nb = nanobind;

static nb::object described(const cai::Array& a) {
  PyObject* seen = cai_test_description(&a.raw());
  if (seen == nullptr) throw nb::python_error();
  return nb::steal(seen);
}

#ifdef CAI_TEST_NO_IMPORT
// The same module whose init forgot the import: the table is read on first use.
NB_MODULE(cai_nanobind_ext_no_import, m) {
#else
NB_MODULE(cai_nanobind_ext, m) {
  cai::nanobind::import();
#endif
  m.def("describe", [](cai::Array a) { return described(a); });
  m.def("describe_host", [](nb::handle obj) {
    CaiImportOptions options{};
    options.allow_host = 1;
    return described(cai::nanobind::from_object(obj, &options));
  });
  m.def("describe_or_raise", [](nb::handle obj) { return described(cai::nanobind::from_object(obj)); });
  m.def("hand_back", [](cai::Array a) { return a; });
  m.def("describe_view", [](cai::ArrayView a) {
    PyObject* seen = cai_test_description(&a.raw());
    if (seen == nullptr) throw nb::python_error();
    return nb::steal(seen);
  });
  m.def("describe_any_memory", [](cai::HostOrDeviceArray a) { return described(a); });
}
