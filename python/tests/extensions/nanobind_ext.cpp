// A nanobind extension built against the installed cai package only: cai::Array by its caster,
// and an image type offered by cai::nanobind::offer with a member fill function.
#include "cai/nanobind.h"
#include "description.h"
#include "offered_image.h"

#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <optional>

namespace nb = nanobind;

struct NbImage : TestImage {
  using TestImage::TestImage;

  // The fill: the faults that raise the nanobind way, then the shared description.
  CaiStatus fill(CaiArray& out, CaiDLDevice& device, CaiError& error) const {
    if (fault == FAULT_RAISES) {
      PyErr_SetString(PyExc_RuntimeError, "the image was closed");
      throw nb::python_error();
    }
    if (fault == FAULT_BUILTIN) throw nb::value_error("the image is not loaded yet");
    return describe(out, device, error);
  }
};

[[maybe_unused]] static void bind_image(nb::module_& m) {
  nb::class_<NbImage> image(m, "Image", nb::is_weak_referenceable());
  image
      .def(
          "__init__",
          [](NbImage* self, uint64_t data, int64_t height, int64_t width, std::string typestr,
             std::optional<std::vector<int64_t>> strides, uint64_t stream, bool readonly, bool host, int fault,
             std::optional<nb::bytes> own) {
            new (self) NbImage(data, height, width, std::move(typestr), strides.value_or(std::vector<int64_t>{}),
                               stream, readonly, host, fault,
                               own ? std::string(own->c_str(), own->size()) : std::string());
          },
          nb::arg("data"), nb::arg("height"), nb::arg("width"), nb::arg("typestr") = "|u1",
          nb::arg("strides") = nb::none(), nb::arg("stream") = 0, nb::arg("readonly") = false,
          nb::arg("host") = false, nb::arg("fault") = 0, nb::arg("own") = nb::none())
      .def_prop_ro("calls", [](const NbImage& self) { return self.calls; });
  cai::nanobind::offer<&NbImage::fill>(image);
  m.def("live_images", [] { return TestImage::live().load(); });
  // Offers the type again (the tests see the TypeError).
  m.def("offer_again", [type = nb::handle(image)] {
    auto cls = nb::borrow<nb::class_<NbImage>>(type);
    cai::nanobind::offer<&NbImage::fill>(cls);
  });
  for (auto [name, value] : {std::pair{"FAULT_REFUSES", FAULT_REFUSES}, {"FAULT_RAISES", FAULT_RAISES},
                             {"FAULT_BUILTIN", FAULT_BUILTIN}, {"FAULT_THROWS", FAULT_THROWS},
                             {"FAULT_THROWS_CAI", FAULT_THROWS_CAI}, {"FAULT_THROWS_OTHER", FAULT_THROWS_OTHER},
                             {"FAULT_NEGATIVE_SHAPE", FAULT_NEGATIVE_SHAPE},
                             {"FAULT_NO_MEMORY", FAULT_NO_MEMORY}})
    m.attr(name) = static_cast<int>(value);
}

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
  // "is this bfloat16?" without parsing a string: the type the struct carries
  m.def("is_bfloat16", [](cai::HostOrDeviceArray a) { return a.carries(CAI_DL_BFLOAT, 16); });
  m.def("describe_view", [](cai::ArrayView a) {
    PyObject* seen = cai_test_description(&a.raw());
    if (seen == nullptr) throw nb::python_error();
    return nb::steal(seen);
  });
  m.def("describe_any_memory", [](cai::HostOrDeviceArray a) { return described(a); });
#ifndef CAI_TEST_NO_IMPORT
  bind_image(m);  // (the offer reads the table in the module's init: not in the variant without it)
#endif
}
