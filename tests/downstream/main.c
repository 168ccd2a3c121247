/* Downstream C consumer: validates a descriptor through the installed libcai. */
#include <stdio.h>
#include <string.h>

#include <cai.h>

int main(void) {
  CaiArray a;
  memset(&a, 0, sizeof a);
  a.version = 3;
  a.ndim = 1;
  a.shape[0] = 10;
  strcpy(a.typestr, "<f4");
  a.data = 0x10000;
  CaiError e;
  if (cai_validate(&a, &e) != CAI_OK) {
    fprintf(stderr, "%s\n", e.message);
    return 1;
  }
  a.shape[0] = -1;
  if (cai_validate(&a, &e) != CAI_ERROR_INVALID_SHAPE) return 1;
  printf("downstream C: libcai %s: 2 passed, 0 failed\n", cai_library_version());
  return 0;
}
