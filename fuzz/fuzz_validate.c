/* libFuzzer target: arbitrary bytes as CaiArrays, checked by cai_validate, cai_layout,
 * cai_export and cai_import (no driver). Input: [CaiArray main][CaiArray mask][CaiField x 8]
 * [control byte]; pointers are set only as the API allows (NULL or valid), the rest is raw;
 * abi_version is this header's and memory a known kind unless control bit 16 keeps them raw.
 * Any crash, sanitizer report, CAI_ERROR_PANIC (libcai is built with overflow checks, so an
 * unchecked overflow panics) or broken invariant is a finding. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cai.h"

#define FIELDS 8
#define REQUIRE(cond)   \
  do {                  \
    if (!(cond)) abort(); \
  } while (0)

static int known_status(int32_t s) { return s >= CAI_OK && s <= CAI_ERROR_ABI_VERSION && s != CAI_ERROR_PANIC; }

static void message_is_terminated(const CaiError *e) { REQUIRE(memchr(e->message, 0, sizeof e->message) != NULL); }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  CaiArray arrays[3];
  CaiField fields[FIELDS];
  memset(arrays, 0, sizeof arrays);
  memset(fields, 0, sizeof fields);
  size_t used = size < sizeof arrays[0] * 2 ? size : sizeof arrays[0] * 2;
  memcpy(arrays, data, used);
  if (size > used) {
    size_t n = size - used < sizeof fields ? size - used : sizeof fields;
    memcpy(fields, data + used, n);
  }
  uint8_t control = size ? data[size - 1] : 0;
  for (int i = 0; i < 3; i++) {
    arrays[i].mask = NULL;
    arrays[i].descr = NULL;
    arrays[i].release = NULL;
    if (!(control & 16)) {
      arrays[i].abi_version = CAI_ABI_VERSION;
      arrays[i].memory &= 1; /* CUDA or OpenCL */
    }
  }
  if (control & 1) arrays[0].mask = &arrays[1];
  if (control & 2) arrays[1].mask = (control & 4) ? &arrays[0] : &arrays[2]; /* a cycle, or a chain */
  if (control & 8) {
    arrays[0].descr = fields;
    arrays[0].descr_count %= FIELDS + 1;
  }

  CaiError e;
  int32_t status = cai_validate(&arrays[0], &e);
  REQUIRE(known_status(status));
  if (status != CAI_OK) {
    REQUIRE(e.code == status);
    message_is_terminated(&e);
    return 0;
  }

  CaiLayout layout;
  REQUIRE(cai_layout(&arrays[0], &layout, &e) == CAI_OK);
  REQUIRE(layout.extent_begin <= 0 && layout.extent_end >= 0);
  REQUIRE((layout.element_count == 0) == (layout.nbytes == 0));
  /* The width in unsigned arithmetic: a valid extent can span more than INT64_MAX bytes (a
   * stride near INT64_MIN from a pointer above 2^63), never more than the address space. */
  REQUIRE(layout.element_count == 0 ||
          (uint64_t)layout.extent_end - (uint64_t)layout.extent_begin >= layout.nbytes / layout.element_count);

  CaiImportOptions options;
  memset(&options, 0, sizeof options);
  options.pointer_check = CAI_POINTER_CHECK_NEVER;
  options.sync_mode = CAI_SYNC_NONE;
  REQUIRE(cai_import(&arrays[0], &options, NULL, &e) == CAI_OK);

  CaiExportOptions export_options;
  memset(&export_options, 0, sizeof export_options);
  export_options.version = 3;
  CaiArray exported = arrays[0];
  REQUIRE(cai_export(&exported, &export_options, &e) == CAI_OK);
  REQUIRE(cai_validate(&exported, &e) == CAI_OK); /* the export form is valid */
  CaiArray again = exported;
  REQUIRE(cai_export(&again, &export_options, &e) == CAI_OK);
  REQUIRE(memcmp(&again, &exported, sizeof again) == 0); /* and a fixed point */
  CaiLayout exported_layout;
  REQUIRE(cai_layout(&exported, &exported_layout, &e) == CAI_OK);
  REQUIRE(exported_layout.element_count == layout.element_count && exported_layout.nbytes == layout.nbytes);
  return 0;
}
