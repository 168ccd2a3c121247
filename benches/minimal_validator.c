/* The in-run floor for cai_validate (benches/exchange.rs): the same plain-array rules written
 * as tersely as C allows, with no error messages. Version, abi_version, flags, reserved words,
 * ndim, non-negative extents, the typestr from a table of the common numeric types,
 * overflow-checked element count, byte size and byte extent, data NULL only when empty, the
 * extent inside the address space, no mask or descr. Not a validator anyone should use: it
 * knows only the common numeric typestrs and reports only pass or fail. */
#include <stdint.h>
#include <string.h>

#include "cai.h"

/* The common numeric typestrs, "<f4" and the like, by their three characters. */
static uint64_t itemsize_of(const char *t) {
  if (t[3] != '\0' || (t[0] != '<' && t[0] != '|')) return 0;
  uint64_t size = (uint64_t)(t[2] - '0');
  switch (t[1]) {
    case 'b': return size == 1 ? 1 : 0;
    case 'i':
    case 'u': return size == 1 || size == 2 || size == 4 || size == 8 ? size : 0;
    case 'f': return size == 2 || size == 4 || size == 8 ? size : 0;
    case 'c': return size == 8 ? 8 : 0;
    default: return 0;
  }
}

int minimal_validate(const CaiArray *a) {
  if (a->abi_version != CAI_ABI_VERSION || a->version < 0 || a->version > 3) return 1;
  if (a->readonly > 1 || a->strides_given > 1 || a->mask || a->descr || a->descr_count) return 1;
  for (int i = 0; i < CAI_ARRAY_RESERVED_WORDS; i++)
    if (a->reserved[i]) return 1;
  if (a->ndim < 0 || a->ndim > CAI_MAX_NDIM) return 1;
  uint64_t itemsize = itemsize_of(a->typestr);
  if (!itemsize) return 1;
  uint64_t count = 1;
  int64_t begin = 0, end = (int64_t)itemsize;
  for (int i = 0; i < a->ndim; i++) {
    int64_t extent = a->shape[i];
    if (extent < 0) return 1;
    if (__builtin_mul_overflow(count, (uint64_t)extent, &count)) return 1;
    if (a->strides_given && extent > 0) {
      int64_t reach;
      if (__builtin_mul_overflow(extent - 1, a->strides[i], &reach)) return 1;
      if (reach < 0 ? __builtin_add_overflow(begin, reach, &begin) : __builtin_add_overflow(end, reach, &end))
        return 1;
    }
  }
  uint64_t nbytes;
  if (__builtin_mul_overflow(count, itemsize, &nbytes) || nbytes > INT64_MAX) return 1;
  if (count == 0) return 0;
  if (a->data == 0) return 1;
  if (!a->strides_given) end = (int64_t)nbytes;
  if ((begin < 0 && a->data < (uint64_t)-begin) || a->data + (uint64_t)end < a->data) return 1;
  return 0;
}
