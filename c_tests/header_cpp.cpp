// cai.h and cai.hpp compile as C++17 with -Wall -Wextra -Werror -pedantic and link: the
// extern "C" block is right, and cai::Array takes ownership only by moving and releases
// exactly once across moves.
#include <cstdio>
#include <cstring>
#include <utility>

#include "cai.hpp"

static int releases = 0;
extern "C" void count_release(CaiArray*) { releases++; }

int main() {
  int passed = 0, failed = 0;
  auto check = [&](bool ok, const char* what) {
    ok ? passed++ : failed++;
    if (!ok) std::fprintf(stderr, "c_tests/header_cpp: %s failed\n", what);
  };
  {
    CaiArray raw{};
    raw.version = 3;
    raw.ndim = 1;
    raw.shape[0] = 4;
    std::strcpy(raw.typestr, "<f4");
    raw.data = 0x1000;
    raw.release = count_release;
    cai::Array a(std::move(raw));
    check(raw.release == nullptr, "adopting moves ownership out of the C struct");
    check(cai_release(&raw, nullptr) == CAI_OK && releases == 0, "the moved-from struct releases nothing");
    a.validate();
    cai::Array b(std::move(a));
    cai::Array c;
    c = std::move(b);
    check(c.layout().nbytes == 16, "layout through cai::Array");
    check(releases == 0, "no release while owned");
  }
  check(releases == 1, "released exactly once after moves");
  try {
    cai::parse_typestr("|O8");
    check(false, "parse_typestr throws");
  } catch (const cai::Error& e) {
    check(e.code() == CAI_ERROR_INVALID_TYPESTR && std::strstr(e.what(), "|O8"), "cai::Error carries code and message");
  }
  {
    // Arrays across processes (no driver here): a zero-size array exports with no handle, and
    // its descriptor, opened in its own process, is refused.
    CaiArray raw{};
    raw.version = 3;
    raw.ndim = 1;
    std::strcpy(raw.typestr, "<f4");
    cai::Array empty(std::move(raw));
    CaiIpcDescriptor desc = empty.ipc_export();
    check(desc.kind == CAI_IPC_KIND_NONE && desc.size == CAI_IPC_DESCRIPTOR_SIZE, "ipc_export through cai::Array");
    try {
      cai::ipc_open(desc);
      check(false, "ipc_open throws in the exporting process");
    } catch (const cai::Error& e) {
      check(e.code() == CAI_ERROR_IPC_DESCRIPTOR && std::strstr(e.what(), "use the array itself"),
            "ipc_open's refusal carries code and message");
    }
  }
  std::printf("c_tests/header_cpp: %d passed, %d failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}
