// The image type the pybind11 and nanobind test modules offer (cai::pybind11::offer,
// cai::nanobind::offer): a 2-d array over device memory it is given (the fake driver's), or over
// host memory it owns (a copy of the bytes it is given); a `fault` chosen at construction makes
// its fill break one rule, for the tests of the glue's errors. Each module binds it and adds
// the faults that raise a Python exception its own way.
#ifndef CAI_TEST_OFFERED_IMAGE_H
#define CAI_TEST_OFFERED_IMAGE_H

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <new>
#include <stdexcept>
#include <string>
#include <vector>

#include "cai.hpp"

enum ImageFault {
  FAULT_NONE,
  FAULT_REFUSES,         // returns CAI_ERROR_INVALID_SHAPE with a message
  FAULT_RAISES,          // raises RuntimeError the binding's way (the module's own fill)
  FAULT_BUILTIN,         // throws the binding's value_error (the module's own fill)
  FAULT_THROWS,          // throws std::runtime_error
  FAULT_THROWS_CAI,      // throws cai::Error with CAI_ERROR_INVALID_TYPESTR
  FAULT_THROWS_OTHER,    // throws an int
  FAULT_NEGATIVE_SHAPE,  // an invalid layout
  FAULT_NO_MEMORY,       // throws std::bad_alloc
};

struct TestImage {
  uint64_t data;
  int64_t height, width;
  std::string typestr;
  std::vector<int64_t> strides;  // empty: C-contiguous
  uint64_t stream;
  bool readonly, host;
  int fault;
  std::string storage;  // the host memory the instance owns, when given bytes
  mutable int calls = 0;

  // Instances alive now: the tests see the destructor run once the last consumer lets go.
  static std::atomic<int>& live() {
    static std::atomic<int> count{0};
    return count;
  }

  TestImage(uint64_t data, int64_t height, int64_t width, std::string typestr, std::vector<int64_t> strides,
            uint64_t stream, bool readonly, bool host, int fault, std::string own)
      : data(data), height(height), width(width), typestr(std::move(typestr)), strides(std::move(strides)),
        stream(stream), readonly(readonly), host(host), fault(fault), storage(std::move(own)) {
    if (this->typestr.size() >= CAI_TYPESTR_CAPACITY) throw std::invalid_argument("typestr too long");
    if (!this->strides.empty() && this->strides.size() != 2) throw std::invalid_argument("two strides, or None");
    if (!storage.empty()) this->data = reinterpret_cast<uintptr_t>(storage.data());
    ++live();
  }
  TestImage(const TestImage&) = delete;
  TestImage& operator=(const TestImage&) = delete;
  ~TestImage() { --live(); }

  // The faults every binding shares; FAULT_RAISES and FAULT_BUILTIN are the modules' own.
  CaiStatus describe(CaiArray& out, CaiDLDevice& device, CaiError& error) const {
    calls++;
    out.data = data;
    out.ndim = 2;
    out.shape[0] = height;
    out.shape[1] = width;
    std::strcpy(out.typestr, typestr.c_str());
    if (!strides.empty()) {
      out.strides_given = 1;
      out.strides[0] = strides[0];
      out.strides[1] = strides[1];
    }
    out.readonly = readonly;
    out.stream = stream;
    if (host) device = {CAI_DL_CPU, 0};
    switch (fault) {
      case FAULT_REFUSES:
        std::snprintf(error.message, sizeof error.message, "height is not set yet (call load() first)");
        error.code = CAI_ERROR_INVALID_SHAPE;
        return CAI_ERROR_INVALID_SHAPE;
      case FAULT_THROWS:
        throw std::runtime_error("the image was closed");
      case FAULT_THROWS_CAI: {
        CaiError refused{};
        refused.code = CAI_ERROR_INVALID_TYPESTR;
        std::snprintf(refused.message, sizeof refused.message, "typestr is not decided yet");
        throw cai::Error(refused);
      }
      case FAULT_THROWS_OTHER:
        throw 42;
      case FAULT_NEGATIVE_SHAPE:
        out.shape[0] = -3;
        break;
      case FAULT_NO_MEMORY:
        throw std::bad_alloc();
    }
    return CAI_OK;
  }
};

#endif
