// Downstream C++ consumer: the RAII header from the installed libcai.
#include <cstdio>
#include <cstring>
#include <utility>

#include <cai.hpp>

static int releases = 0;
extern "C" void count_release(CaiArray*) { releases++; }

int main() {
  {
    CaiArray raw{};
    raw.version = 3;
    raw.ndim = 1;
    raw.shape[0] = 4;
    std::strcpy(raw.typestr, "<f8");
    raw.data = 0x10000;
    raw.release = count_release;
    cai::Array owner(std::move(raw));
    if (raw.release != nullptr) return 1;
    cai::Array moved(std::move(owner));
    if (moved.layout().nbytes != 32) return 1;
  }
  bool threw = false;
  try {
    cai::parse_typestr("<f");
  } catch (const cai::Error& e) {
    threw = e.code() == CAI_ERROR_INVALID_TYPESTR;
  }
  if (releases != 1 || !threw) return 1;
  std::printf("downstream C++: 2 passed, 0 failed\n");
  return 0;
}
