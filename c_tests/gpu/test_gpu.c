/* GPU suite, C part: libcai's device half on a real CUDA driver. Run by scripts/gpu-check.sh
 * on a machine with a GPU; needs no CUDA headers (the few driver calls are declared here) and
 * links libcuda.so.1 only to set the test up. CI runs the same file linked against the fake
 * driver (tests/fake_cuda, a test double whose streams keep order), built with
 * -DTEST_DRIVER='"fake driver"'.
 *
 * A kernel that spins for SPIN_MS before writing its value makes a missing sync visible as
 * wrong data: the consumer reads the array on another stream right after importing it. */
#define _POSIX_C_SOURCE 199309L
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cai.h"
#include "check.h"

typedef int CUresult;
typedef void *CUcontext, *CUstream, *CUmodule, *CUfunction;
typedef uint64_t CUdeviceptr;
extern CUresult cuInit(unsigned);
extern CUresult cuDeviceGet(int *, int);
extern CUresult cuDeviceGetCount(int *);
extern CUresult cuDeviceGetAttribute(int *, int, int);
extern CUresult cuDevicePrimaryCtxRetain(CUcontext *, int);
extern CUresult cuCtxSetCurrent(CUcontext);
extern CUresult cuMemAlloc_v2(CUdeviceptr *, size_t);
extern CUresult cuMemAllocManaged(CUdeviceptr *, size_t, unsigned);
extern CUresult cuMemHostAlloc(void **, size_t, unsigned);
extern CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr *, void *, unsigned);
extern CUresult cuMemsetD32_v2(CUdeviceptr, unsigned, size_t);
extern CUresult cuMemcpyDtoHAsync_v2(void *, CUdeviceptr, size_t, CUstream);
extern CUresult cuStreamCreate(CUstream *, unsigned);
extern CUresult cuStreamSynchronize(CUstream);
extern CUresult cuStreamQuery(CUstream);
extern CUresult cuModuleLoadData(CUmodule *, const void *);
extern CUresult cuModuleGetFunction(CUfunction *, CUmodule, const char *);
extern CUresult cuLaunchKernel(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                               CUstream, void **, void **);

#ifndef TEST_DRIVER
#define TEST_DRIVER "real driver"
#endif
#define N (1 << 20)
#define SPIN_MS 20
#define CU(call)                                                                   \
  do {                                                                             \
    CUresult r_ = (call);                                                          \
    if (r_ != 0) {                                                                 \
      fprintf(stderr, "%s:%d: %s failed with CUresult %d\n", __FILE__, __LINE__, #call, r_); \
      exit(2);                                                                     \
    }                                                                              \
  } while (0)

/* spin_then_fill(out, n, value, cycles): waits `cycles` clock ticks, then out[i] = value. */
static const char ptx[] =
    ".version 7.0\n.target sm_70\n.address_size 64\n"
    ".visible .entry spin_then_fill(.param .u64 out, .param .u32 n, .param .u32 value, .param .u64 cycles)\n"
    "{\n .reg .pred p;\n .reg .b32 r<8>;\n .reg .b64 rd<8>;\n"
    " ld.param.u64 rd1, [out];\n ld.param.u32 r1, [n];\n ld.param.u32 r2, [value];\n ld.param.u64 rd2, [cycles];\n"
    " mov.u64 rd3, %clock64;\n"
    "SPIN:\n mov.u64 rd4, %clock64;\n sub.s64 rd5, rd4, rd3;\n setp.lt.s64 p, rd5, rd2;\n @p bra SPIN;\n"
    " mov.u32 r3, %tid.x;\n mov.u32 r4, %ctaid.x;\n mov.u32 r5, %ntid.x;\n mad.lo.s32 r6, r4, r5, r3;\n"
    " setp.ge.u32 p, r6, r1;\n @p bra DONE;\n"
    " cvta.to.global.u64 rd6, rd1;\n mul.wide.u32 rd7, r6, 4;\n add.s64 rd6, rd6, rd7;\n st.global.u32 [rd6], r2;\n"
    "DONE:\n ret;\n}\n";

static CUfunction kernel;
static uint64_t spin_cycles;
static uint32_t *host;

static void launch_fill(CUstream stream, CUdeviceptr out, uint32_t value) {
  uint32_t n = N;
  void *args[] = {&out, &n, &value, &spin_cycles};
  CU(cuLaunchKernel(kernel, N / 256, 1, 1, 256, 1, 1, 0, stream, args, NULL));
}

static int all_equal(uint32_t value) {
  for (int i = 0; i < N; i++)
    if (host[i] != value) return 0;
  return 1;
}

static double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static CaiArray describe(CUdeviceptr data, int64_t n, uint64_t stream) {
  CaiArray a;
  memset(&a, 0, sizeof a);
  a.version = 3;
  a.ndim = 1;
  a.shape[0] = n;
  strcpy(a.typestr, "<u4");
  a.data = data;
  a.stream = stream;
  return a;
}

int main(void) {
  CUcontext ctx;
  CUmodule module;
  int device_count = 0, clock_khz = 0;
  CU(cuInit(0));
  CU(cuDeviceGetCount(&device_count));
  CU(cuDevicePrimaryCtxRetain(&ctx, 0));
  CU(cuCtxSetCurrent(ctx));
  if (cuDeviceGetAttribute(&clock_khz, 13 /* CU_DEVICE_ATTRIBUTE_CLOCK_RATE */, 0) != 0 || clock_khz <= 0)
    clock_khz = 2000000; /* attribute gone from newer drivers: assume 2 GHz */
  spin_cycles = (uint64_t)clock_khz * SPIN_MS;
  CU(cuModuleLoadData(&module, ptx));
  CU(cuModuleGetFunction(&kernel, module, "spin_then_fill"));
  CU(cuMemHostAlloc((void **)&host, N * 4, 0));

  int32_t version = 0;
  CaiError e;
  CHECK_STATUS(cai_driver_status(&version, &e), CAI_OK);
  printf(TEST_DRIVER ": version %d, %d device(s), spin %d ms\n", version, device_count, SPIN_MS);

  CUdeviceptr data;
  CU(cuMemAlloc_v2(&data, N * 4));
  CaiPointerInfo info;
  CaiArray a = describe(data, N, 0);
  CHECK_STATUS(cai_import(&a, NULL, &info, &e), CAI_OK); /* row 1 */
  CHECK(info.checked && info.memory_type == 2 && info.device_ordinal == 0);
  CHECK(info.allocation_base == data && info.allocation_size >= (uint64_t)N * 4);

  a.shape[0] = N + 1; /* row 26 */
  CHECK_STATUS(cai_import(&a, NULL, NULL, &e), CAI_ERROR_OUT_OF_BOUNDS);
  a = describe(data + 4, N, 0);
  a.strides_given = 1; /* negative stride from the second element reaches one below the start */
  a.strides[0] = -4;
  a.shape[0] = 3;
  CHECK_STATUS(cai_import(&a, NULL, NULL, &e), CAI_ERROR_OUT_OF_BOUNDS);

  uint32_t *plain = malloc(64); /* row 24 */
  a = describe((CUdeviceptr)(uintptr_t)plain, 4, 0);
  CHECK_STATUS(cai_import(&a, NULL, NULL, &e), CAI_ERROR_NOT_DEVICE_POINTER);
  free(plain);

  CUdeviceptr managed; /* row 25 */
  CU(cuMemAllocManaged(&managed, 4096, 1 /* CU_MEM_ATTACH_GLOBAL */));
  a = describe(managed, 1024, 0);
  CHECK_STATUS(cai_import(&a, NULL, &info, &e), CAI_OK);
  CHECK(info.is_managed == 1);
  void *pinned;
  CUdeviceptr pinned_device;
  CU(cuMemHostAlloc(&pinned, 4096, 2 /* CU_MEMHOSTALLOC_DEVICEMAP */));
  CU(cuMemHostGetDevicePointer_v2(&pinned_device, pinned, 0));
  a = describe(pinned_device, 1024, 0);
  CHECK_STATUS(cai_import(&a, NULL, &info, &e), CAI_OK);
  if (info.memory_type != 1) printf("note: pinned memory reported as memory type %u\n", info.memory_type);

  a = describe(0, 0, 0); /* row 20 */
  CHECK_STATUS(cai_import(&a, NULL, &info, &e), CAI_OK);
  CHECK(info.checked == 0);

  CUstream producer, consumer;
  CU(cuStreamCreate(&producer, 1 /* CU_STREAM_NON_BLOCKING */));
  CU(cuStreamCreate(&consumer, 1));
  CaiImportOptions options;

  /* Control: no sync. The read on the consumer stream overtakes the slow kernel. */
  CU(cuMemsetD32_v2(data, 0, N));
  launch_fill(producer, data, 42);
  a = describe(data, N, (uint64_t)(uintptr_t)producer);
  memset(&options, 0, sizeof options);
  options.consumer_stream = (uint64_t)(uintptr_t)consumer;
  options.sync_mode = CAI_SYNC_NONE;
  CHECK_STATUS(cai_import(&a, &options, NULL, &e), CAI_OK);
  CU(cuMemcpyDtoHAsync_v2(host, data, N * 4, consumer));
  CU(cuStreamSynchronize(consumer));
  CHECK(!all_equal(42)); /* the test can see a missing sync */
  CU(cuStreamSynchronize(producer));

  /* row 43: stream-ordered. Returns at once; the consumer's read waits for the kernel. */
  CU(cuMemsetD32_v2(data, 0, N));
  launch_fill(producer, data, 43);
  options.sync_mode = CAI_SYNC_STREAM_ORDERED;
  double t0 = now_us();
  CHECK_STATUS(cai_import(&a, &options, NULL, &e), CAI_OK);
  double ordered_us = now_us() - t0;
  CHECK(cuStreamQuery(producer) != 0); /* the kernel is still running: the host did not wait */
  CU(cuMemcpyDtoHAsync_v2(host, data, N * 4, consumer));
  CU(cuStreamSynchronize(consumer));
  CHECK(all_equal(43));

  /* row 44: blocking. The producer stream is idle when import returns. */
  CU(cuMemsetD32_v2(data, 0, N));
  launch_fill(producer, data, 44);
  options.sync_mode = CAI_SYNC_BLOCKING;
  t0 = now_us();
  CHECK_STATUS(cai_import(&a, &options, NULL, &e), CAI_OK);
  double blocking_us = now_us() - t0;
  CHECK(cuStreamQuery(producer) == 0);
  CU(cuMemcpyDtoHAsync_v2(host, data, N * 4, consumer));
  CU(cuStreamSynchronize(consumer));
  CHECK(all_equal(44));

  /* row 46: a producer's work on another stream is joined into the exported stream. */
  CUstream side;
  CU(cuStreamCreate(&side, 1));
  CU(cuMemsetD32_v2(data, 0, N));
  launch_fill(side, data, 46);
  a = describe(data, N, (uint64_t)(uintptr_t)producer);
  uint64_t work[1] = {(uint64_t)(uintptr_t)side};
  CaiExportOptions export_options;
  memset(&export_options, 0, sizeof export_options);
  export_options.work_streams = work;
  export_options.work_stream_count = 1;
  export_options.check_pointer = 1;
  CHECK_STATUS(cai_export(&a, &export_options, &e), CAI_OK);
  options.sync_mode = CAI_SYNC_DEFAULT;
  CHECK_STATUS(cai_import(&a, &options, NULL, &e), CAI_OK);
  CU(cuMemcpyDtoHAsync_v2(host, data, N * 4, consumer));
  CU(cuStreamSynchronize(consumer));
  CHECK(all_equal(46));

  /* row 47: the NULL stream is exported as the legacy default stream. */
  uint64_t null_stream[1] = {0};
  a = describe(data, N, 0);
  export_options.work_streams = null_stream;
  CHECK_STATUS(cai_export(&a, &export_options, &e), CAI_OK);
  CHECK(a.stream == CAI_STREAM_LEGACY);

  printf(TEST_DRIVER ": stream-ordered import with a %d ms kernel pending: %.1f us; blocking import: %.1f us\n", SPIN_MS,
         ordered_us, blocking_us);
  if (device_count < 2) printf("row 27 (second device) not run: this machine has %d device\n", device_count);
  return check_summary("c_tests/gpu/test_gpu (" TEST_DRIVER ")");
}
