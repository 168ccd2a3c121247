/* TEST DOUBLE: a DLPack producer offering DLPack 1.3's C exchange table (the struct layout of
 * dlpack.h's DLPackExchangeAPI, declared here), over memory of the fake CUDA driver. It hands
 * out versioned tensors whose deleter counts, and reports a current work stream; the Python
 * test gives its type the table's address. */
#include <stdint.h>
#include <stdlib.h>

#include "cai.h"

typedef struct ExchangeHeader {
  CaiDLPackVersion version;
  struct ExchangeHeader *prev_version_api;
} ExchangeHeader;

typedef struct {
  ExchangeHeader header;
  void *managed_tensor_allocator;
  int (*managed_tensor_from_py_object_no_sync)(void *py_object, CaiDLManagedTensorVersioned **out);
  void *managed_tensor_to_py_object_no_sync;
  int (*dltensor_from_py_object_no_sync)(void *py_object, CaiDLTensor *out);
  int (*current_work_stream)(int32_t device_type, int32_t device_id, void **out_stream);
} ExchangeApi;

static uint64_t data, stream;
static int handed_out, deleted, stream_asks, fail_stream, device_type = CAI_DL_CUDA;
static int64_t shape[2] = {4, 8};

static void delete_tensor(CaiDLManagedTensorVersioned *tensor) {
  deleted++;
  free(tensor);
}

static int from_py_object(void *py_object, CaiDLManagedTensorVersioned **out) {
  (void)py_object;
  CaiDLManagedTensorVersioned *t = calloc(1, sizeof *t);
  if (!t) return -1;
  t->version.major = 1;
  t->version.minor = 3;
  t->deleter = delete_tensor;
  t->dl_tensor.data = (void *)(uintptr_t)data;
  t->dl_tensor.device.device_type = device_type;
  t->dl_tensor.ndim = 2;
  t->dl_tensor.dtype.code = 2; /* float */
  t->dl_tensor.dtype.bits = 32;
  t->dl_tensor.dtype.lanes = 1;
  t->dl_tensor.shape = shape;
  *out = t;
  handed_out++;
  return 0;
}

/* The non-owning call: the same tensor, nothing handed out. */
static int dltensor_from_py_object(void *py_object, CaiDLTensor *out) {
  (void)py_object;
  CaiDLTensor t = {0};
  t.data = (void *)(uintptr_t)data;
  t.device.device_type = device_type;
  t.ndim = 2;
  t.dtype.code = 2; /* float */
  t.dtype.bits = 32;
  t.dtype.lanes = 1;
  t.shape = shape;
  *out = t;
  return 0;
}

static int current_work_stream(int32_t device_type, int32_t device_id, void **out_stream) {
  (void)device_type, (void)device_id;
  stream_asks++;
  if (fail_stream) return -1;
  *out_stream = (void *)(uintptr_t)stream;
  return 0;
}

/* A table of a later major version, whose header points back to the one libcai reads. */
static ExchangeApi version_1 = {{{1, 3}, NULL}, NULL, from_py_object, NULL, NULL, current_work_stream};
static ExchangeApi version_2 = {{{2, 0}, &version_1.header}, NULL, NULL, NULL, NULL, NULL};

/* The table with the non-owning DLTensor call too (what torch offers). */
static ExchangeApi with_dltensor = {{{1, 3}, NULL}, NULL, from_py_object, NULL, dltensor_from_py_object,
                                    current_work_stream};
/* A broken table whose header names itself as its previous version. */
static ExchangeApi cyclic = {{{2, 0}, &cyclic.header}, NULL, NULL, NULL, NULL, NULL};

const void *producer_exchange_api(void) { return &version_2; }
const void *producer_exchange_api_with_dltensor(void) { return &with_dltensor; }
const void *producer_cyclic_exchange_api(void) { return &cyclic; }
void producer_fail_stream(int fail) { fail_stream = fail; }
void producer_set_device_type(int type) { device_type = type; }
void producer_set(uint64_t pointer, uint64_t work_stream) {
  data = pointer;
  stream = work_stream;
}
int producer_handed_out(void) { return handed_out; }
int producer_deleted(void) { return deleted; }
int producer_stream_asks(void) { return stream_asks; }
