/* A DLPack consumer in C: a producer hands over a DLManagedTensorVersioned (here one made on the
 * host, as numpy or a CPU tensor would), libcai reads it into the same CaiArray a CAI consumer
 * uses (strides in bytes, byte_offset folded into data, the read-only flag kept), and the
 * array's release runs the tensor's deleter, exactly once. Host memory is taken because the
 * consumer asks for it (allow_host); device tensors need no option. */
#include <stdio.h>
#include <stdlib.h>

#include "cai.h"

static int deleted;

static void delete_tensor(CaiDLManagedTensorVersioned *tensor) {
  deleted++;
  free(tensor->manager_ctx); /* the producer's data */
  free(tensor);
}

/* What a producer does: a 3x4 float32 tensor, viewed from its second row on. */
static CaiDLManagedTensorVersioned *produce(void) {
  static int64_t shape[2] = {2, 4}, strides[2] = {4, 1};
  float *data = malloc(12 * sizeof *data);
  CaiDLManagedTensorVersioned *t = calloc(1, sizeof *t);
  if (!data || !t) exit(1);
  for (int i = 0; i < 12; i++) data[i] = (float)i;
  t->version.major = CAI_DLPACK_MAJOR_VERSION;
  t->version.minor = CAI_DLPACK_MINOR_VERSION;
  t->manager_ctx = data;
  t->deleter = delete_tensor;
  t->flags = CAI_DLPACK_FLAG_READ_ONLY;
  t->dl_tensor.data = data;
  t->dl_tensor.device.device_type = CAI_DL_CPU;
  t->dl_tensor.ndim = 2;
  t->dl_tensor.dtype.code = 2; /* kDLFloat */
  t->dl_tensor.dtype.bits = 32;
  t->dl_tensor.dtype.lanes = 1;
  t->dl_tensor.shape = shape;
  t->dl_tensor.strides = strides; /* in elements */
  t->dl_tensor.byte_offset = 4 * sizeof(float);
  return t;
}

int main(void) {
  CaiDLManagedTensorVersioned *tensor = produce();
  const float *first = (const float *)tensor->dl_tensor.data + 4;
  CaiDLPackOptions options = {0};
  options.allow_host = 1;
  CaiArray a;
  CaiError error;
  if (cai_from_dlpack(tensor, &options, &a, &error) != CAI_OK) { /* the tensor was released */
    fprintf(stderr, "%s\n", error.message);
    return 1;
  }
  printf("shape (%lld, %lld), strides (%lld, %lld) bytes, typestr %s, read-only %u, first %.0f\n",
         (long long)a.shape[0], (long long)a.shape[1], (long long)a.strides[0], (long long)a.strides[1],
         a.typestr, a.readonly, *(const float *)(uintptr_t)a.data);
  int ok = a.data == (uint64_t)(uintptr_t)first && a.strides[0] == 16 && a.readonly == 1;
  cai_release(&a, NULL); /* runs the tensor's deleter */
  cai_release(&a, NULL); /* and never twice */
  printf("deleter ran %d time(s)\n", deleted);
  return ok && deleted == 1 ? 0 : 1;
}
