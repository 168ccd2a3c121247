// A C++ consumer: cai::Array owns the descriptor and releases it once; errors are exceptions.
#include <cstdio>
#include <cstring>
#include <utility>

#include "cai.hpp"

int main() {
  CaiArray raw{};
  raw.version = 3;
  raw.ndim = 1;
  raw.shape[0] = 8;
  std::strcpy(raw.typestr, "<i4");
  raw.data = 0x7f0000000000;
  cai::Array array(std::move(raw));
  std::printf("%llu bytes, itemsize %llu\n", static_cast<unsigned long long>(array.layout().nbytes),
              static_cast<unsigned long long>(cai::parse_typestr(array.raw().typestr).itemsize));
  try {
    cai::parse_typestr("|O8");
  } catch (const cai::Error& e) {
    std::printf("rejected as expected: %s\n", e.what());
    return e.code() == CAI_ERROR_INVALID_TYPESTR ? 0 : 1;
  }
  return 1;
}
