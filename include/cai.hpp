// libcai for C++17: cai::Array owns a CaiArray and releases it exactly once; failures throw
// cai::Error carrying the status code, the driver's raw result and libcai's message.
// Hand-written over the generated cai.h; adds no state of its own.
#ifndef CAI_HPP
#define CAI_HPP

#include <cstdint>
#include <stdexcept>
#include <utility>

#include "cai.h"

namespace cai {

// A failed libcai call: code() is the CAI_ERROR_* status, driver_result() the driver's raw result
// (a CUresult, or a cl_int for OpenCL memory) or 0.
class Error : public std::runtime_error {
 public:
  explicit Error(const CaiError& error)
      : std::runtime_error(error.message), code_(error.code), driver_result_(error.driver_result) {}
  int32_t code() const noexcept { return code_; }
  int32_t driver_result() const noexcept { return driver_result_; }

 private:
  int32_t code_;
  int32_t driver_result_;
};

namespace detail {
inline void check(int32_t status, const CaiError& error) {
  if (status != CAI_OK) throw Error(error);
}
}  // namespace detail

// Owns a CaiArray: its release callback (if any) runs once, when the Array is destroyed or
// reset. Move-only, so ownership is never shared by accident. A borrowed array (release NULL)
// is never freed.
class Array {
 public:
  Array() noexcept : raw_{} {}
  // Takes over `raw` by moving it (cai_move): `raw` keeps its fields but no longer owns, so a
  // later cai_release(&raw) does nothing. Write `cai::Array a(std::move(raw));`.
  explicit Array(CaiArray&& raw) noexcept : raw_{} { cai_move(&raw_, &raw, nullptr); }
  Array(Array&& other) noexcept : raw_(other.raw_) { other.raw_.release = nullptr; }
  Array& operator=(Array&& other) noexcept {
    if (this != &other) {
      reset();
      raw_ = other.raw_;
      other.raw_.release = nullptr;
    }
    return *this;
  }
  Array(const Array&) = delete;
  Array& operator=(const Array&) = delete;
  ~Array() { reset(); }

  // Runs the release callback now (once); the descriptor stays readable but owns nothing.
  void reset() noexcept { cai_release(&raw_, nullptr); }

  const CaiArray& raw() const noexcept { return raw_; }
  CaiArray& raw() noexcept { return raw_; }

  // The elements' DLPack type where the typestr is opaque bytes ("<V2": bfloat16 is
  // {CAI_DL_BFLOAT, 16, 1}); all zero where the typestr says it all.
  CaiDLDataType dl_dtype() const noexcept { return raw_.dl_dtype; }
  // Whether the array carries DLPack type `code` of `bits` bits, one lane, in dl_dtype (the
  // types no numeric typestr names): `carries(CAI_DL_BFLOAT, 16)`, `carries(CAI_DL_FLOAT8_E4M3FN, 8)`.
  bool carries(uint8_t code, uint8_t bits) const noexcept {
    return raw_.dl_dtype.code == code && raw_.dl_dtype.bits == bits && raw_.dl_dtype.lanes == 1;
  }

  void validate() const {
    CaiError error;
    detail::check(cai_validate(&raw_, &error), error);
  }

  CaiLayout layout() const {
    CaiLayout layout{};
    CaiError error;
    detail::check(cai_layout(&raw_, &layout, &error), error);
    return layout;
  }

  // Consumer side: pointer check and stream sync as `options` say (see cai_import).
  CaiPointerInfo import_for_use(const CaiImportOptions& options = CaiImportOptions{}) const {
    CaiPointerInfo info{};
    CaiError error;
    detail::check(cai_import(&raw_, &options, &info, &error), error);
    return info;
  }

  // Producer side: rewrites the descriptor in export form (see cai_export).
  void normalize_for_export(const CaiExportOptions& options = CaiExportOptions{}) {
    CaiError error;
    detail::check(cai_export(&raw_, &options, &error), error);
  }

  // Consumer side, when done enqueueing work that reads the array: hands it back to its producer
  // once the GPU has passed the work enqueued on `stream` so far (see cai_release_after), never
  // waiting on the host. On success the array has moved into libcai's queue: this Array owns
  // nothing from then on (the descriptor stays readable) and the release runs later, from a
  // later cai_release_after or release_pending call in any thread. Throws cai::Error on failure
  // (CAI_ERROR_STREAM_CAPTURING for a capturing stream, CAI_ERROR_DRIVER for a stream the driver
  // does not know), and this Array then still owns the array. Stream 0 releases at once; a
  // borrowed array owes nothing. Call release_pending(CAI_PENDING_WAIT) before the program exits.
  void release_after(uint64_t stream) {
    CaiError error;
    detail::check(cai_release_after(&raw_, stream, &error), error);
  }

  // Producer side: the array as an IPC descriptor another process on this machine opens with
  // cai::ipc_open (see cai_ipc_export). Device memory from cuMemAlloc only: managed, host and
  // pool memory throw cai::Error (CAI_ERROR_NOT_SHAREABLE). Keep the memory, and this process,
  // alive while any importer uses it. Send the descriptor's CAI_IPC_DESCRIPTOR_SIZE bytes as
  // they are.
  CaiIpcDescriptor ipc_export() const {
    CaiIpcDescriptor out{};
    CaiError error;
    detail::check(cai_ipc_export(&raw_, &out, &error), error);
    return out;
  }

 private:
  CaiArray raw_;
};

// An Array that may be host memory: what the Python casters (cai/pybind11.h, cai/nanobind.h)
// take with allow_host, so a function declared with it takes numpy arrays and CPU tensors too.
class HostOrDeviceArray : public Array {
 public:
  using Array::Array;
  HostOrDeviceArray() noexcept = default;
  HostOrDeviceArray(Array&& array) noexcept : Array(std::move(array)) {}
};

// Runs the releases Array::release_after queued whose work has completed (CAI_PENDING_POLL:
// never waits), or all of them, waiting on the host for each (CAI_PENDING_WAIT: before the
// program exits or unloads libcai; libcai runs nothing at exit itself). Returns how many are
// still queued. Throws cai::Error for another mode, or when the driver fails a query (that
// release has run all the same; see cai_release_pending).
inline uint64_t release_pending(int32_t mode = CAI_PENDING_POLL) {
  uint64_t left = 0;
  CaiError error;
  detail::check(cai_release_pending(mode, &left, &error), error);
  return left;
}

// Consumer side, in another process than the exporter's: the array of `desc`, mapped and
// ordered after the exporter's pending work as `options` say (see cai_ipc_open). The Array's
// release lets go of the mapping. Throws cai::Error: CAI_ERROR_IPC_DESCRIPTOR for a corrupt,
// other-version or own-process descriptor, CAI_ERROR_NOT_SHAREABLE for a device this process
// lacks, CAI_ERROR_DRIVER for memory the exporter freed.
inline Array ipc_open(const CaiIpcDescriptor& desc, const CaiImportOptions& options = CaiImportOptions{}) {
  CaiArray raw{};
  CaiError error;
  detail::check(cai_ipc_open(&desc, &options, &raw, &error), error);
  return Array(std::move(raw));
}

inline CaiDtype parse_typestr(const char* typestr) {
  CaiDtype dtype{};
  CaiError error;
  detail::check(cai_typestr_parse(typestr, &dtype, &error), error);
  return dtype;
}

}  // namespace cai

#endif  // CAI_HPP
