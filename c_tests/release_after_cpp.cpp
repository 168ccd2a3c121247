// cai::Array::release_after and cai::release_pending (include/cai.hpp) against the fake CUDA
// driver (tests/fake_cuda, a test double): the release runs once the fake's slow kernel on the
// stream has finished; a refusal throws cai::Error and leaves the Array owning, so its
// destructor still releases exactly once. Run with CAI_CUDA_DRIVER set to the fake.
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "cai.hpp"

static int releases[8];
extern "C" void note_release(CaiArray* array) { releases[reinterpret_cast<intptr_t>(array->owner)]++; }

namespace {

struct Fake {
  uint64_t (*alloc)(uint64_t, unsigned, int, unsigned);
  uint64_t (*stream_create)(int);
  int (*launch_slow)(uint64_t, int);
  void (*finish_slow)(int);
  int (*begin_capture)(uint64_t, int);
  int (*end_capture)(uint64_t, void**);
};

template <typename F>
bool load(void* library, const char* name, F& function) {
  void* symbol = dlsym(library, name);
  std::memcpy(&function, &symbol, sizeof symbol);
  return symbol != nullptr;
}

cai::Array owned_array(const Fake& fake, intptr_t tag) {
  CaiArray raw{};
  raw.version = 3;
  raw.ndim = 1;
  raw.shape[0] = 64;
  std::strcpy(raw.typestr, "<f4");
  raw.data = fake.alloc(256, 2, 0, 0);
  raw.owner = reinterpret_cast<void*>(tag);
  raw.release = note_release;
  return cai::Array(std::move(raw));
}

}  // namespace

int main() {
  int passed = 0, failed = 0;
  auto check = [&](bool ok, const char* what) {
    ok ? passed++ : failed++;
    if (!ok) std::fprintf(stderr, "c_tests/release_after_cpp: %s failed\n", what);
  };
  const char* path = std::getenv("CAI_CUDA_DRIVER");
  void* library = path ? dlopen(path, RTLD_NOW | RTLD_LOCAL) : nullptr;
  Fake fake{};
  void (*set_device)(int) = nullptr;
  if (!library || !load(library, "fake_cuda_set_device", set_device) || !load(library, "fake_cuda_alloc", fake.alloc) ||
      !load(library, "fake_cuda_stream_create", fake.stream_create) ||
      !load(library, "fake_cuda_launch_slow", fake.launch_slow) ||
      !load(library, "fake_cuda_finish_slow", fake.finish_slow) ||
      !load(library, "cuStreamBeginCapture_v2", fake.begin_capture) ||
      !load(library, "cuStreamEndCapture", fake.end_capture)) {
    std::fprintf(stderr, "CAI_CUDA_DRIVER must name the fake driver (tests/fake_cuda)\n");
    return 1;
  }
  set_device(0);

  check(cai::release_pending() == 0, "nothing queued");
  uint64_t stream = fake.stream_create(0);
  int kernel = fake.launch_slow(stream, -1);
  {
    cai::Array a = owned_array(fake, 1);
    a.release_after(stream);
    check(a.raw().release == nullptr, "release_after moves the array out of the Array");
  }
  check(releases[1] == 0, "not released at the Array's destruction while the kernel runs");
  check(cai::release_pending(CAI_PENDING_POLL) == 1, "one still queued");
  check(releases[1] == 0, "not released by a poll while the kernel runs");
  fake.finish_slow(kernel);
  check(cai::release_pending(CAI_PENDING_POLL) == 0 && releases[1] == 1, "released once the kernel finished");

  // Refused on a capturing stream: cai::Error, and the Array still owns, so it releases once when
  // it goes out of scope.
  uint64_t capturing = fake.stream_create(0);
  check(fake.begin_capture(capturing, 0) == 0, "capture begun");
  {
    cai::Array b = owned_array(fake, 2);
    try {
      b.release_after(capturing);
      check(false, "release_after throws on a capturing stream");
    } catch (const cai::Error& error) {
      check(error.code() == CAI_ERROR_STREAM_CAPTURING && std::strstr(error.what(), "still yours"),
            "cai::Error carries CAI_ERROR_STREAM_CAPTURING and the message");
    }
    check(b.raw().release == note_release && releases[2] == 0, "the Array still owns after a refusal");
  }
  check(releases[2] == 1, "released once by the destructor after a refusal");
  void* graph = nullptr;
  check(fake.end_capture(capturing, &graph) == 0 && graph != nullptr, "the capture stayed valid");

  // Stream 0 releases at once; the waiting drain leaves nothing queued; a bad mode throws.
  cai::Array c = owned_array(fake, 3);
  c.release_after(CAI_STREAM_NONE);
  check(releases[3] == 1, "stream 0 releases at once");
  cai::Array d = owned_array(fake, 4);
  d.release_after(fake.stream_create(0));
  check(cai::release_pending(CAI_PENDING_WAIT) == 0 && releases[4] == 1, "the waiting drain runs it");
  try {
    cai::release_pending(7);
    check(false, "release_pending throws for a bad mode");
  } catch (const cai::Error& error) {
    check(error.code() == CAI_ERROR_INVALID_ARGUMENT && std::strstr(error.what(), "mode is 7"), "bad mode named");
  }
  std::printf("c_tests/release_after_cpp (fake driver): %d passed, %d failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}
