/* A C consumer: takes a descriptor (here one a producer library would hand over), checks it,
 * asks for its layout, and imports it for use. Without a GPU the pointer check is skipped and
 * nothing needs syncing, so the import succeeds and says so. */
#include <stdio.h>
#include <string.h>

#include "cai.h"

int main(void) {
  CaiArray a;
  memset(&a, 0, sizeof a);
  a.version = 3;
  a.ndim = 2;
  a.shape[0] = 4;
  a.shape[1] = 5;
  a.strides_given = 1;
  a.strides[0] = 8; /* F order */
  a.strides[1] = 32;
  strcpy(a.typestr, "<f8");
  a.data = 0x7f0000000000;
  a.readonly = 1;

  CaiError error;
  CaiLayout layout;
  if (cai_layout(&a, &layout, &error) != CAI_OK) {
    fprintf(stderr, "%s\n", error.message);
    return 1;
  }
  printf("4x5 float64: %s, %llu bytes\n", layout.f_contiguous ? "F-contiguous" : "not F-contiguous",
         (unsigned long long)layout.nbytes);

  CaiImportOptions options;
  memset(&options, 0, sizeof options);
  options.writable = 1;
  int32_t status = cai_import(&a, &options, NULL, &error);
  printf("import for writing: %s\n", cai_status_string(status));

  options.writable = 0;
  CaiPointerInfo info;
  status = cai_import(&a, &options, &info, &error);
  printf("import for reading: %s (pointer %s)\n", cai_status_string(status),
         info.checked ? "checked by the driver" : "not checked: no driver");
  return status == CAI_OK ? 0 : 1;
}
