/* DLPack to and from CaiArray from C, over memory of the fake CUDA driver (tests/fake_cuda, a
 * test double): round trips CAI -> DLPack -> CAI, each rule of the mapping, deleters and
 * releases counted. Where a real dlpack.h is installed (Debian's libdlpack-dev has the legacy
 * struct), libcai's declarations are checked against it field by field. */
#include <dlfcn.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cai.h"
#include "check.h"

#if defined(__has_include)
#if __has_include(<dlpack/dlpack.h>)
#include <dlpack/dlpack.h>
#define HAVE_DLPACK_H 1
_Static_assert(sizeof(DLTensor) == sizeof(CaiDLTensor), "DLTensor size");
_Static_assert(offsetof(DLTensor, data) == offsetof(CaiDLTensor, data), "DLTensor.data");
_Static_assert(offsetof(DLTensor, device) == offsetof(CaiDLTensor, device), "DLTensor.device");
_Static_assert(offsetof(DLTensor, ndim) == offsetof(CaiDLTensor, ndim), "DLTensor.ndim");
_Static_assert(offsetof(DLTensor, dtype) == offsetof(CaiDLTensor, dtype), "DLTensor.dtype");
_Static_assert(offsetof(DLTensor, shape) == offsetof(CaiDLTensor, shape), "DLTensor.shape");
_Static_assert(offsetof(DLTensor, strides) == offsetof(CaiDLTensor, strides), "DLTensor.strides");
_Static_assert(offsetof(DLTensor, byte_offset) == offsetof(CaiDLTensor, byte_offset), "DLTensor.byte_offset");
_Static_assert(sizeof(DLDevice) == sizeof(CaiDLDevice), "DLDevice");
_Static_assert(sizeof(DLDataType) == sizeof(CaiDLDataType), "DLDataType");
_Static_assert(offsetof(DLDataType, lanes) == offsetof(CaiDLDataType, lanes), "DLDataType.lanes");
_Static_assert(sizeof(DLManagedTensor) == sizeof(CaiDLManagedTensor), "DLManagedTensor");
_Static_assert(offsetof(DLManagedTensor, manager_ctx) == offsetof(CaiDLManagedTensor, manager_ctx), "manager_ctx");
_Static_assert(offsetof(DLManagedTensor, deleter) == offsetof(CaiDLManagedTensor, deleter), "deleter");
_Static_assert(kDLCPU == CAI_DL_CPU && kDLCUDA == CAI_DL_CUDA && kDLCUDAHost == CAI_DL_CUDA_HOST &&
                   kDLCUDAManaged == CAI_DL_CUDA_MANAGED,
               "device types");
#endif
#endif
/* The versioned struct (DLPack 1.0+), as dlpack.h publishes it. */
_Static_assert(sizeof(void *) != 8 || sizeof(CaiDLManagedTensorVersioned) == 80, "versioned size");
_Static_assert(offsetof(CaiDLManagedTensorVersioned, version) == 0, "version");
_Static_assert(sizeof(void *) != 8 || offsetof(CaiDLManagedTensorVersioned, manager_ctx) == 8, "manager_ctx");
_Static_assert(sizeof(void *) != 8 || offsetof(CaiDLManagedTensorVersioned, deleter) == 16, "deleter");
_Static_assert(sizeof(void *) != 8 || offsetof(CaiDLManagedTensorVersioned, flags) == 24, "flags");
_Static_assert(sizeof(void *) != 8 || offsetof(CaiDLManagedTensorVersioned, dl_tensor) == 32, "dl_tensor");
_Static_assert(sizeof(void *) != 8 || sizeof(CaiDLTensor) == 48, "DLTensor size");
_Static_assert(sizeof(CaiDLPackOptions) == 32, "CaiDLPackOptions");

static uint64_t (*fake_alloc)(uint64_t, unsigned, int, unsigned);
static void (*set_device)(int);

static int releases, deletes;
static void count_release(CaiArray *a) {
  (void)a;
  releases++;
}

/* A producer's tensor: the shape and strides live beside it; the deleter counts. */
typedef struct {
  CaiDLManagedTensorVersioned tensor;
  int64_t shape[4], strides[4];
} Producer;

static void delete_producer(CaiDLManagedTensorVersioned *t) {
  deletes++;
  free(t->manager_ctx);
}

static CaiDLManagedTensorVersioned *producer(int device_type, CaiDLDataType dtype, int ndim, const int64_t *shape,
                                             const int64_t *strides, uint64_t byte_offset, uint64_t flags) {
  Producer *p = calloc(1, sizeof *p);
  p->tensor.version.major = 1;
  p->tensor.version.minor = 1;
  p->tensor.manager_ctx = p;
  p->tensor.deleter = delete_producer;
  p->tensor.flags = flags;
  p->tensor.dl_tensor.data = (void *)(uintptr_t)fake_alloc(4096, 2, 0, 0);
  p->tensor.dl_tensor.device.device_type = device_type;
  p->tensor.dl_tensor.dtype = dtype;
  p->tensor.dl_tensor.ndim = ndim;
  p->tensor.dl_tensor.byte_offset = byte_offset;
  memcpy(p->shape, shape, sizeof(int64_t) * (size_t)ndim);
  p->tensor.dl_tensor.shape = p->shape;
  if (strides) {
    memcpy(p->strides, strides, sizeof(int64_t) * (size_t)ndim);
    p->tensor.dl_tensor.strides = p->strides;
  }
  return &p->tensor;
}

static const CaiDLDataType F32 = {2, 32, 1};

static int message_has(const CaiError *e, const char *part) { return strstr(e->message, part) != NULL; }

static void test_from_dlpack(void) {
  const int64_t shape[] = {3, 4};
  const int64_t strides[] = {1, 3}; /* Fortran order, in elements */
  CaiError e;
  CaiArray a;
  memset(&a, 0, sizeof a);

  /* strides become bytes, byte_offset is folded into data, the read-only flag carries over */
  deletes = 0;
  CaiDLManagedTensorVersioned *t = producer(CAI_DL_CUDA, F32, 2, shape, strides, 16, CAI_DLPACK_FLAG_READ_ONLY);
  uint64_t base = (uint64_t)(uintptr_t)t->dl_tensor.data;
  CHECK_STATUS(cai_from_dlpack(t, NULL, &a, &e), CAI_OK);
  CHECK(a.ndim == 2 && a.shape[0] == 3 && a.shape[1] == 4 && a.strides_given == 1);
  CHECK(a.strides[0] == 4 && a.strides[1] == 12);
  CHECK(a.data == base + 16 && a.readonly == 1 && a.stream == CAI_STREAM_NONE);
  CHECK(strcmp(a.typestr, "<f4") == 0);
  CHECK_STATUS(cai_validate(&a, NULL), CAI_OK);
  CHECK(deletes == 0);
  CHECK_STATUS(cai_release(&a, NULL), CAI_OK);
  CHECK_STATUS(cai_release(&a, NULL), CAI_OK);
  CHECK(deletes == 1); /* the deleter ran exactly once */

  /* NULL strides mean C-contiguous */
  t = producer(CAI_DL_CUDA_MANAGED, F32, 2, shape, NULL, 0, 0);
  CHECK_STATUS(cai_from_dlpack(t, NULL, &a, &e), CAI_OK);
  CHECK(a.strides_given == 0 && a.readonly == 0);
  cai_release(&a, NULL);

  /* host memory: refused naming the device, unless asked for; refused means released */
  deletes = 0;
  t = producer(CAI_DL_CPU, F32, 2, shape, NULL, 0, 0);
  CHECK_STATUS(cai_from_dlpack(t, NULL, &a, &e), CAI_ERROR_HOST_MEMORY);
  CHECK(message_has(&e, "kDLCPU") && deletes == 1);
  CaiDLPackOptions host;
  memset(&host, 0, sizeof host);
  host.allow_host = 1;
  t = producer(CAI_DL_CPU, F32, 2, shape, NULL, 0, 0);
  CHECK_STATUS(cai_from_dlpack(t, &host, &a, &e), CAI_OK);
  cai_release(&a, NULL);
  CHECK(deletes == 2);
  t = producer(10, F32, 2, shape, NULL, 0, 0);
  CHECK_STATUS(cai_from_dlpack(t, &host, &a, &e), CAI_ERROR_NOT_DEVICE_POINTER);
  CHECK(message_has(&e, "kDLROCM") && deletes == 3);

  /* dtypes DLPack does not define for a CAI element: int4, an opaque handle, a packed float4 */
  const CaiDLDataType refused[] = {{CAI_DL_INT, 4, 1}, {CAI_DL_OPAQUE_HANDLE, 64, 1}, {CAI_DL_FLOAT4_E2M1FN, 4, 1}};
  for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
    t = producer(CAI_DL_CUDA, refused[i], 2, shape, NULL, 0, 0);
    CHECK_STATUS(cai_from_dlpack(t, NULL, &a, &e), CAI_ERROR_INVALID_TYPESTR);
  }
  CHECK(deletes == 6);

  /* a later major version: refused, only the deleter touched (ndim left garbage) */
  t = producer(CAI_DL_CUDA, F32, 2, shape, NULL, 0, 0);
  t->version.major = 2;
  t->dl_tensor.ndim = -12345;
  CHECK_STATUS(cai_from_dlpack(t, NULL, &a, &e), CAI_ERROR_ABI_VERSION);
  CHECK(message_has(&e, "2.1") && deletes == 7);

  /* NULL out: the tensor is still taken (released) */
  t = producer(CAI_DL_CUDA, F32, 2, shape, NULL, 0, 0);
  CHECK_STATUS(cai_from_dlpack(t, NULL, NULL, &e), CAI_ERROR_NULL_ARGUMENT);
  CHECK(deletes == 8);
  CHECK_STATUS(cai_from_dlpack(NULL, NULL, &a, &e), CAI_ERROR_NULL_ARGUMENT);
}

static void test_round_trip(void) {
  const int64_t shape[] = {2, 3};
  CaiArray a;
  memset(&a, 0, sizeof a);
  a.version = 3;
  a.ndim = 2;
  a.shape[0] = 2;
  a.shape[1] = 3;
  a.strides_given = 1;
  a.strides[0] = -12; /* a[::-1]: negative strides survive as elements */
  a.strides[1] = 4;
  strcpy(a.typestr, "<f4");
  a.data = fake_alloc(256, 2, 0, 0) + 12;
  a.readonly = 1;
  a.release = count_release;
  releases = 0;

  CaiError e;
  CaiDLManagedTensorVersioned *t = NULL;
  CHECK_STATUS(cai_to_dlpack(&a, NULL, &t, &e), CAI_OK); /* device asked of the driver */
  CHECK(t != NULL && a.release == NULL);
  CHECK(t->version.major == CAI_DLPACK_MAJOR_VERSION && (t->flags & CAI_DLPACK_FLAG_READ_ONLY));
  CHECK(t->dl_tensor.device.device_type == CAI_DL_CUDA && t->dl_tensor.device.device_id == 0);
  CHECK(t->dl_tensor.strides[0] == -3 && t->dl_tensor.strides[1] == 1 && t->dl_tensor.shape[1] == 3);
  CHECK(t->dl_tensor.dtype.code == 2 && t->dl_tensor.dtype.bits == 32 && t->dl_tensor.dtype.lanes == 1);

  CaiArray back;
  CHECK_STATUS(cai_from_dlpack(t, NULL, &back, &e), CAI_OK);
  CHECK(back.data == a.data && back.strides[0] == -12 && back.strides[1] == 4 && back.readonly == 1);
  CHECK(back.shape[0] == shape[0] && back.shape[1] == shape[1]);
  CHECK(releases == 0);
  CHECK_STATUS(cai_release(&back, NULL), CAI_OK); /* -> tensor deleter -> the array's release */
  CHECK(releases == 1);

  /* C-contiguous arrays get their strides written out */
  CaiArray c = a;
  c.strides_given = 0;
  c.readonly = 0;
  c.release = count_release;
  CaiDLDevice device = {CAI_DL_CUDA, 0};
  CHECK_STATUS(cai_to_dlpack(&c, &device, &t, &e), CAI_OK);
  CHECK(t->dl_tensor.strides[0] == 3 && t->dl_tensor.strides[1] == 1 && t->flags == 0);
  t->deleter(t);
  CHECK(releases == 2);

  /* refused, and then unchanged: a stride that is not whole items, a foreign byte order, a
   * type with no DLPack dtype, a mask; a legacy tensor of a read-only array */
  CaiArray odd = a;
  odd.release = count_release;
  odd.strides[1] = 6;
  strcpy(odd.typestr, "|u1");
  CHECK_STATUS(cai_to_dlpack(&odd, &device, &t, &e), CAI_OK); /* itemsize 1: any stride */
  t->deleter(t);
  odd.release = count_release;
  strcpy(odd.typestr, "<i2");
  odd.strides[1] = 5;
  CHECK_STATUS(cai_to_dlpack(&odd, &device, &t, &e), CAI_ERROR_INVALID_STRIDES);
  CHECK(message_has(&e, "strides[1] = 5") && odd.release == count_release);
  strcpy(odd.typestr, ">f4");
  odd.strides[1] = 4;
  CHECK_STATUS(cai_to_dlpack(&odd, &device, &t, &e), CAI_ERROR_INVALID_TYPESTR);
  strcpy(odd.typestr, "<M8[ns]");
  odd.strides[0] = -16;
  odd.strides[1] = 8;
  CHECK_STATUS(cai_to_dlpack(&odd, &device, &t, &e), CAI_ERROR_INVALID_TYPESTR);
  /* an empty array has no memory to ask the driver about: kDLCUDA, device 0 */
  CaiArray empty;
  memset(&empty, 0, sizeof empty);
  empty.version = 3;
  empty.ndim = 1;
  strcpy(empty.typestr, "<f4");
  CHECK_STATUS(cai_to_dlpack(&empty, NULL, &t, &e), CAI_OK);
  CHECK(t->dl_tensor.device.device_type == CAI_DL_CUDA && t->dl_tensor.shape[0] == 0);
  t->deleter(t);
  CaiDLManagedTensor *legacy = NULL;
  strcpy(odd.typestr, "<f4");
  odd.strides[0] = -12;
  odd.strides[1] = 4;
  CHECK_STATUS(cai_to_dlpack_legacy(&odd, &device, &legacy, &e), CAI_ERROR_READONLY);
  odd.readonly = 0;
  CHECK_STATUS(cai_to_dlpack_legacy(&odd, &device, &legacy, &e), CAI_OK);
  CaiArray from_legacy;
  CHECK_STATUS(cai_from_dlpack_legacy(legacy, NULL, &from_legacy, &e), CAI_OK);
  CHECK(from_legacy.data == odd.data && from_legacy.readonly == 0);
  int before = releases;
  cai_release(&from_legacy, NULL);
  CHECK(releases == before + 1);
}

/* The ML types: taken with an opaque typestr of the item's size and the type carried in
   dl_dtype, handed back as the same DLPack type (and a padded sub-byte type with its flag). */
static void test_ml_types(void) {
  const int64_t shape[] = {2, 3};
  const struct {
    CaiDLDataType dtype;
    uint64_t flags;
    const char *typestr;
  } cases[] = {
      {{CAI_DL_BFLOAT, 16, 1}, 0, "<V2"},
      {{CAI_DL_FLOAT8_E4M3FN, 8, 1}, 0, "|V1"},
      {{CAI_DL_FLOAT8_E5M2, 8, 1}, CAI_DLPACK_FLAG_READ_ONLY, "|V1"},
      {{CAI_DL_FLOAT4_E2M1FN, 4, 2}, 0, "|V1"},                           /* torch's float4_e2m1fn_x2 */
      {{CAI_DL_FLOAT4_E2M1FN, 4, 1}, CAI_DLPACK_FLAG_SUBBYTE_PADDED, "|V1"}, /* one a byte */
      {{CAI_DL_FLOAT, 32, 4}, 0, "<V16"},                                 /* vector lanes */
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    CaiError e;
    CaiArray a;
    CaiDLManagedTensorVersioned *t = producer(CAI_DL_CUDA, cases[i].dtype, 2, shape, NULL, 0, cases[i].flags);
    CHECK_STATUS(cai_from_dlpack(t, NULL, &a, &e), CAI_OK);
    CHECK(strcmp(a.typestr, cases[i].typestr) == 0);
    CHECK(a.dl_dtype.code == cases[i].dtype.code && a.dl_dtype.bits == cases[i].dtype.bits &&
          a.dl_dtype.lanes == cases[i].dtype.lanes);
    CHECK_STATUS(cai_validate(&a, &e), CAI_OK);
    CaiDLManagedTensorVersioned *back = NULL;
    CHECK_STATUS(cai_to_dlpack(&a, NULL, &back, &e), CAI_OK);
    CHECK(back->dl_tensor.dtype.code == cases[i].dtype.code && back->dl_tensor.dtype.bits == cases[i].dtype.bits &&
          back->dl_tensor.dtype.lanes == cases[i].dtype.lanes);
    CHECK(back->flags == cases[i].flags);
    back->deleter(back); /* -> the array's release -> the producer's deleter */
  }
  /* A C producer's own: "|V2" with bfloat16 carried validates; a numeric typestr that says
     otherwise, or a width DLPack does not give the code, is refused naming dl_dtype. */
  CaiArray a;
  memset(&a, 0, sizeof a);
  a.version = 3;
  a.ndim = 1;
  a.shape[0] = 4;
  a.data = fake_alloc(64, 2, 0, 0);
  strcpy(a.typestr, "|V2");
  a.dl_dtype.code = CAI_DL_BFLOAT;
  a.dl_dtype.bits = 16;
  a.dl_dtype.lanes = 1;
  CaiError e;
  CHECK_STATUS(cai_validate(&a, &e), CAI_OK);
  strcpy(a.typestr, "<f2");
  CHECK_STATUS(cai_validate(&a, &e), CAI_ERROR_INVALID_TYPESTR);
  CHECK(message_has(&e, "dl_dtype bfloat16"));
  strcpy(a.typestr, "|V1");
  a.dl_dtype.bits = 8;
  CHECK_STATUS(cai_validate(&a, &e), CAI_ERROR_INVALID_TYPESTR);
  CHECK(message_has(&e, "where DLPack defines 16"));
}

int main(void) {
  const char *path = getenv("CAI_CUDA_DRIVER");
  void *fake = path ? dlopen(path, RTLD_NOW | RTLD_LOCAL) : NULL;
  *(void **)&fake_alloc = fake ? dlsym(fake, "fake_cuda_alloc") : NULL;
  *(void **)&set_device = fake ? dlsym(fake, "fake_cuda_set_device") : NULL;
  if (!fake_alloc || !set_device) {
    fprintf(stderr, "CAI_CUDA_DRIVER must name the fake driver (tests/fake_cuda)\n");
    return 1;
  }
  set_device(0);
  test_from_dlpack();
  test_round_trip();
  test_ml_types();
#ifdef HAVE_DLPACK_H
  printf("c_tests/test_dlpack: layout checked against a real dlpack.h (version %d)\n", DLPACK_VERSION);
#endif
  return check_summary("c_tests/test_dlpack (fake driver)");
}
