// A pybind11 extension built against the installed cai package only: cai::Array by its caster,
// and an image type offered by cai::pybind11::offer with a free fill function.
#include "cai/pybind11.h"
#include "description.h"
#include "offered_image.h"

#include <pybind11/stl.h>

#include <optional>

namespace py = pybind11;

// The fill: the faults that raise the pybind11 way, then the shared description.
static CaiStatus image_fill(const TestImage& image, CaiArray& out, CaiDLDevice& device, CaiError& error) {
  if (image.fault == FAULT_RAISES) {
    PyErr_SetString(PyExc_RuntimeError, "the image was closed");
    throw py::error_already_set();
  }
  if (image.fault == FAULT_BUILTIN) throw py::value_error("the image is not loaded yet");
  return image.describe(out, device, error);
}

[[maybe_unused]] static void bind_image(py::module_& m) {
  py::class_<TestImage> image(m, "Image");
  image.def(py::init([](uint64_t data, int64_t height, int64_t width, std::string typestr,
                        std::optional<std::vector<int64_t>> strides, uint64_t stream, bool readonly, bool host,
                        int fault, std::optional<py::bytes> own) {
              return new TestImage(data, height, width, std::move(typestr), strides.value_or(std::vector<int64_t>{}),
                                   stream, readonly, host, fault, own ? std::string(*own) : std::string());
            }),
            py::arg("data"), py::arg("height"), py::arg("width"), py::arg("typestr") = "|u1",
            py::arg("strides") = py::none(), py::arg("stream") = 0, py::arg("readonly") = false,
            py::arg("host") = false, py::arg("fault") = 0, py::arg("own") = py::none())
      .def_property_readonly("calls", [](const TestImage& self) { return self.calls; });
  cai::pybind11::offer<image_fill>(image);
  m.def("live_images", [] { return TestImage::live().load(); });
  // Offers the type again (the tests see the TypeError).
  m.def("offer_again", [image]() mutable { cai::pybind11::offer<image_fill>(image); });
  for (auto [name, value] : {std::pair{"FAULT_REFUSES", FAULT_REFUSES}, {"FAULT_RAISES", FAULT_RAISES},
                             {"FAULT_BUILTIN", FAULT_BUILTIN}, {"FAULT_THROWS", FAULT_THROWS},
                             {"FAULT_THROWS_CAI", FAULT_THROWS_CAI}, {"FAULT_THROWS_OTHER", FAULT_THROWS_OTHER},
                             {"FAULT_NEGATIVE_SHAPE", FAULT_NEGATIVE_SHAPE},
                             {"FAULT_NO_MEMORY", FAULT_NO_MEMORY}})
    m.attr(name) = static_cast<int>(value);
}

static py::object described(const cai::Array& a) {
  PyObject* seen = cai_test_description(&a.raw());
  if (seen == nullptr) throw py::error_already_set();
  return py::reinterpret_steal<py::object>(seen);
}

#ifdef CAI_TEST_NO_IMPORT
// The same module whose init forgot the import: the table is read on first use.
PYBIND11_MODULE(cai_pybind11_ext_no_import, m, py::mod_gil_not_used()) {
#else
PYBIND11_MODULE(cai_pybind11_ext, m, py::mod_gil_not_used()) {
  cai::pybind11::import();
#endif
  m.def("describe", [](cai::Array a) { return described(a); });
  m.def("describe_host", [](py::handle obj) {
    CaiImportOptions options{};
    options.allow_host = 1;
    return described(cai::pybind11::from_object(obj, &options));
  });
  m.def("hand_back", [](cai::Array a) { return a; });
  // "is this bfloat16?" without parsing a string: the type the struct carries
  m.def("is_bfloat16", [](cai::HostOrDeviceArray a) { return a.carries(CAI_DL_BFLOAT, 16); });
  m.def("describe_view", [](cai::ArrayView a) {
    PyObject* seen = cai_test_description(&a.raw());
    if (seen == nullptr) throw py::error_already_set();
    return py::reinterpret_steal<py::object>(seen);
  });
  m.def("describe_any_memory", [](cai::HostOrDeviceArray a) { return described(a); });
  m.def("overloaded", [](int) { return "int"; });
  m.def("overloaded", [](cai::Array) { return "array"; });
#ifndef CAI_TEST_NO_IMPORT
  bind_image(m);  // (the offer reads the table in the module's init: not in the variant without it)
#endif
}
