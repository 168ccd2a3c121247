/* A C producer for the Python lifetime tests: hands out arrays with a release callback and
 * counts how often it runs. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cai.h"

static int release_count = 0;

static void release_buffer(struct CaiArray *array) {
  free(array->owner);
  release_count++;
}

/* Describes `n` floats at device address `data`; the producer's own bookkeeping (`owner`) is
 * what the release callback frees. */
int producer_make(CaiArray *out, int64_t n, uint64_t data) {
  void *bookkeeping = malloc(16);
  if (!bookkeeping) return 1;
  memset(out, 0, sizeof *out);
  out->version = 3;
  out->ndim = 1;
  out->shape[0] = n;
  strcpy(out->typestr, "<f4");
  out->data = data;
  out->owner = bookkeeping;
  out->release = release_buffer;
  return 0;
}

int producer_release_count(void) { return release_count; }
