// One function taking any array: a CuPy, PyTorch, Numba, JAX or cuda.core array, a CAI dict,
// a numpy array or a CPU tensor (HostOrDeviceArray: host memory too).
#include <string>

#include "cai/pybind11.h"

std::string describe(cai::HostOrDeviceArray a) {
  const CaiArray& raw = a.raw();
  std::string shape;
  for (int i = 0; i < raw.ndim; i++) shape += (i ? ", " : "") + std::to_string(raw.shape[i]);
  return raw.typestr + std::string(" (") + shape + "), " + std::to_string(a.layout().nbytes) + " bytes";
}

PYBIND11_MODULE(arrays, m) {
  cai::pybind11::import();  // reads libcai's function table from the cai package
  m.def("describe", &describe, "The array's typestr, shape and size in bytes.");
}
