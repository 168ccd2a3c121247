/* A C producer: owns a buffer, describes it as a CaiArray with a release callback, exports it,
 * and hands it to a consumer, which calls cai_release when done: the buffer is freed exactly
 * once. Host memory stands in for cudaMalloc so that it runs without a GPU. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cai.h"

static int releases = 0;

static void free_buffer(struct CaiArray *array) {
  free(array->owner);
  releases++;
}

/* The producer's side: a 2x3 float32 array it owns. */
static int make_array(CaiArray *out) {
  float *buffer = calloc(6, sizeof(float));
  if (!buffer) return 0;
  memset(out, 0, sizeof *out);
  out->version = 3;
  out->ndim = 2;
  out->shape[0] = 2;
  out->shape[1] = 3;
  strcpy(out->typestr, "f4");
  out->data = (uint64_t)(uintptr_t)buffer;
  out->owner = buffer;
  out->release = free_buffer;
  CaiError error;
  if (cai_export(out, NULL, &error) != CAI_OK) {
    fprintf(stderr, "export failed: %s\n", error.message);
    free(buffer);
    return 0;
  }
  return 1;
}

/* The consumer's side: uses the array, then lets go of it. */
static void consume(CaiArray *array) {
  CaiLayout layout;
  if (cai_layout(array, &layout, NULL) == CAI_OK)
    printf("consumer got %s, %llu elements\n", array->typestr, (unsigned long long)layout.element_count);
  cai_release(array, NULL);
  cai_release(array, NULL); /* a second release is a no-op */
}

int main(void) {
  CaiArray array;
  if (!make_array(&array)) return 1;
  consume(&array);
  printf("release callback ran %d time(s)\n", releases);
  return releases == 1 ? 0 : 1;
}
