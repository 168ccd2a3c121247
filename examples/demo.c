/* A host-only tour of libcai: describe arrays as a CAI producer would, validate them, ask
 * for their layout and export them. Needs no GPU: no pointer here is dereferenced. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "cai.h"

static void describe(const char *what, const CaiArray *a) {
  CaiLayout l;
  CaiError e;
  if (cai_layout(a, &l, &e) != CAI_OK) {
    printf("  %-34s rejected: %s\n", what, e.message);
    return;
  }
  printf("  %-34s %" PRIu64 " elements, %" PRIu64 " bytes, extent [%" PRId64 ", %" PRId64 "), %s\n", what,
         l.element_count, l.nbytes, l.extent_begin, l.extent_end,
         l.c_contiguous ? "C-contiguous" : l.f_contiguous ? "F-contiguous" : "strided");
}

int main(void) {
  printf("libcai %s demo (host only)\n", cai_library_version());

  CaiArray a;
  memset(&a, 0, sizeof a);
  a.version = 3;
  a.ndim = 2;
  a.shape[0] = 3;
  a.shape[1] = 4;
  strcpy(a.typestr, "f4");
  a.data = 0x7f0000001000; /* a device address as a producer would export it */
  describe("3x4 float32", &a);

  CaiArray flipped = a;
  flipped.strides_given = 1;
  flipped.strides[0] = -16;
  flipped.strides[1] = 4;
  describe("a[::-1, :] (negative stride)", &flipped);

  CaiArray bad = a;
  strcpy(bad.typestr, "|O8");
  describe("object dtype", &bad);

  CaiError e;
  if (cai_export(&a, NULL, &e) != CAI_OK) {
    printf("export failed: %s\n", e.message);
    return 1;
  }
  printf("  exported: version %d, typestr \"%s\", strides %s\n", a.version, a.typestr,
         a.strides_given ? "given" : "None (C-contiguous)");
  printf("checked: validation, layout and export on the host. Import, pointer checks and stream\n"
         "sync need the CUDA driver: see scripts/gpu-check.sh.\n");
  return 0;
}
