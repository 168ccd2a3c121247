/* libFuzzer target: arbitrary bytes as a typestr, parsed alone and inside a CaiArray. The two
 * must agree, a parsed dtype must be one numpy could report, and nothing may crash or panic. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cai.h"

#define REQUIRE(cond)   \
  do {                  \
    if (!(cond)) abort(); \
  } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char text[64];
  size_t n = size < sizeof text - 1 ? size : sizeof text - 1;
  memcpy(text, data, n);
  text[n] = '\0';

  CaiDtype dtype;
  CaiError e;
  int32_t status = cai_typestr_parse(text, &dtype, &e);
  REQUIRE(status == CAI_OK || status == CAI_ERROR_INVALID_TYPESTR);
  if (status == CAI_OK) {
    REQUIRE(dtype.itemsize >= 1 && dtype.itemsize <= INT32_MAX);
    REQUIRE(strchr("biufcmMSUV", dtype.kind) != NULL && dtype.kind != '\0');
    REQUIRE(dtype.byteorder == '<' || dtype.byteorder == '>' || dtype.byteorder == '|');
  } else {
    REQUIRE(memchr(e.message, 0, sizeof e.message) != NULL);
  }

  if (strlen(text) < CAI_TYPESTR_CAPACITY) {
    CaiArray a;
    memset(&a, 0, sizeof a);
    a.version = 3;
    a.ndim = 1;
    a.shape[0] = 1;
    a.data = 0x10000;
    strcpy(a.typestr, text);
    int32_t in_array = cai_validate(&a, &e);
    REQUIRE((in_array == CAI_OK) == (status == CAI_OK));
  }
  return 0;
}
