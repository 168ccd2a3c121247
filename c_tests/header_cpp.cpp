// cai.h compiles as C++17 with -Wall -Werror and links: its extern "C" block is right.
#include <cstring>

#include "cai.h"

int main() {
  CaiArray a{};
  a.version = 3;
  a.ndim = 1;
  a.shape[0] = 4;
  std::strcpy(a.typestr, "<f4");
  a.data = 0x1000;
  CaiError e{};
  return cai_validate(&a, &e) == CAI_OK ? 0 : 1;
}
