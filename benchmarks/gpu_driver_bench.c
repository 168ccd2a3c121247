/* GPU benchmark, driver level (part of scripts/gpu-check.sh): what libcai's pointer check and
 * stream-ordered sync cost on the real driver, next to the driver calls they are made of, so
 * that libcai's own share is visible. Per call, best of 7 runs of N calls, nothing pending.
 * Also prints whether cuPointerGetAttributes' range attributes agree with
 * cuMemGetAddressRange for each memory kind the pointer check meets.
 *
 *   cc -O2 -Iinclude benchmarks/gpu_driver_bench.c -Ltarget/release -lcai -l:libcuda.so.1 */
#define _POSIX_C_SOURCE 199309L
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "cai.h"

typedef int CUresult;
typedef void *CUcontext, *CUstream, *CUevent;
typedef uint64_t CUdeviceptr;
extern CUresult cuInit(unsigned);
extern CUresult cuDevicePrimaryCtxRetain(CUcontext *, int);
extern CUresult cuCtxSetCurrent(CUcontext);
extern CUresult cuCtxGetCurrent(CUcontext *);
extern CUresult cuMemAlloc_v2(CUdeviceptr *, size_t);
extern CUresult cuMemAllocManaged(CUdeviceptr *, size_t, unsigned);
extern CUresult cuMemHostAlloc(void **, size_t, unsigned);
extern CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr *, void *, unsigned);
extern CUresult cuMemGetAddressRange_v2(CUdeviceptr *, size_t *, CUdeviceptr);
extern CUresult cuPointerGetAttributes(unsigned, int *, void **, CUdeviceptr);
extern CUresult cuStreamCreate(CUstream *, unsigned);
extern CUresult cuStreamGetCtx(CUstream, CUcontext *);
extern CUresult cuStreamSynchronize(CUstream);
extern CUresult cuEventCreate(CUevent *, unsigned);
extern CUresult cuEventRecord(CUevent, CUstream);
extern CUresult cuStreamWaitEvent(CUstream, CUevent, unsigned);

#define CU(call)                                                    \
  do {                                                              \
    CUresult r_ = (call);                                           \
    if (r_ != 0) {                                                  \
      fprintf(stderr, "%s failed with CUresult %d\n", #call, r_); \
      return 1;                                                     \
    }                                                               \
  } while (0)

#define RUNS 7
#define CALLS 20000

static double now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e9 + t.tv_nsec;
}

/* The driver's attribute numbers libcai asks for (cuda.h's CU_POINTER_ATTRIBUTE_*). */
enum { CONTEXT = 1, MEMORY_TYPE = 2, DEVICE_POINTER = 3, IS_MANAGED = 8, DEVICE_ORDINAL = 9, RANGE_START = 11,
       RANGE_SIZE = 12 };

static CUdeviceptr data;
static CUstream producer, consumer;
static CUevent event;
static CaiArray array;
static CaiImportOptions check_only, sync_only;
static int failed;

static void attributes(unsigned count) {
  CUcontext context;
  unsigned memory_type, is_managed;
  CUdeviceptr device_pointer, start;
  int ordinal;
  size_t size;
  int which[7] = {CONTEXT, MEMORY_TYPE, DEVICE_POINTER, IS_MANAGED, DEVICE_ORDINAL, RANGE_START, RANGE_SIZE};
  void *values[7] = {&context, &memory_type, &device_pointer, &is_managed, &ordinal, &start, &size};
  failed |= cuPointerGetAttributes(count, which, values, data);
}
static void five_attributes(void) { attributes(5); }
static void seven_attributes(void) { attributes(7); }
static void address_range(void) {
  CUdeviceptr base;
  size_t size;
  failed |= cuMemGetAddressRange_v2(&base, &size, data);
}
static void five_attributes_and_address_range(void) {
  attributes(5);
  address_range();
}
static void stream_contexts(void) {
  CUcontext a, b, current;
  failed |= cuStreamGetCtx(producer, &a) | cuStreamGetCtx(consumer, &b) | cuCtxGetCurrent(&current);
}
static void record_and_wait(void) { failed |= cuEventRecord(event, producer) | cuStreamWaitEvent(consumer, event, 0); }
static void libcai_check(void) { failed |= cai_import(&array, &check_only, NULL, NULL); }
static void libcai_sync(void) { failed |= cai_import(&array, &sync_only, NULL, NULL); }

static double per_call_ns(void (*call)(void)) {
  double best = 1e30;
  for (int run = 0; run < RUNS; run++) {
    double start = now_ns();
    for (int i = 0; i < CALLS; i++) call();
    double took = (now_ns() - start) / CALLS;
    if (took < best) best = took;
    cuStreamSynchronize(consumer); /* the waits enqueued, drained between runs */
  }
  return best;
}

/* Whether the range attributes name the same allocation as cuMemGetAddressRange for `p`. */
static void compare_ranges(const char *kind, CUdeviceptr p) {
  CUdeviceptr base = 0, start = 0;
  size_t size = 0, length = 0;
  CUresult by_range = cuMemGetAddressRange_v2(&base, &size, p);
  int which[2] = {RANGE_START, RANGE_SIZE};
  void *values[2] = {&start, &length};
  CUresult by_attributes = cuPointerGetAttributes(2, which, values, p);
  printf("  %-28s cuMemGetAddressRange %d: [%#llx, +%zu)   range attributes %d: [%#llx, +%zu)   %s\n", kind, by_range,
         (unsigned long long)base, size, by_attributes, (unsigned long long)start, length,
         by_range == 0 && by_attributes == 0 && base == start && size == length ? "agree" : "DIFFER");
}

int main(void) {
  CUcontext context;
  CU(cuInit(0));
  CU(cuDevicePrimaryCtxRetain(&context, 0));
  CU(cuCtxSetCurrent(context));
  CU(cuMemAlloc_v2(&data, 1 << 22));
  CU(cuStreamCreate(&producer, 1));
  CU(cuStreamCreate(&consumer, 1));
  CU(cuEventCreate(&event, 2 /* CU_EVENT_DISABLE_TIMING */));

  memset(&array, 0, sizeof array);
  array.version = 3;
  array.ndim = 2;
  array.shape[0] = 1024;
  array.shape[1] = 1024;
  strcpy(array.typestr, "<f4");
  array.data = data;
  array.stream = (uint64_t)(uintptr_t)producer;
  memset(&check_only, 0, sizeof check_only);
  check_only.sync_mode = CAI_SYNC_NONE;
  check_only.pointer_check = CAI_POINTER_CHECK_ALWAYS;
  memset(&sync_only, 0, sizeof sync_only);
  sync_only.consumer_stream = (uint64_t)(uintptr_t)consumer;
  sync_only.sync_mode = CAI_SYNC_STREAM_ORDERED;
  sync_only.pointer_check = CAI_POINTER_CHECK_NEVER;
  CaiError error;
  if (cai_import(&array, &check_only, NULL, &error) != CAI_OK || cai_import(&array, &sync_only, NULL, &error) != CAI_OK) {
    fprintf(stderr, "cai_import: %s\n", error.message);
    return 1;
  }

  printf("driver-level costs on a 1024 x 1024 float32 cuMemAlloc array (ns per call, best of %d runs of %d)\n", RUNS,
         CALLS);
  struct {
    const char *name;
    void (*call)(void);
  } rows[] = {
      {"cai_import, pointer check only", libcai_check},
      {"  cuPointerGetAttributes, the 5 libcai asks", five_attributes},
      {"  cuMemGetAddressRange", address_range},
      {"  the two together (what the check calls)", five_attributes_and_address_range},
      {"  cuPointerGetAttributes, those 5 + range (7)", seven_attributes},
      {"cai_import, stream-ordered sync only", libcai_sync},
      {"  cuEventRecord + cuStreamWaitEvent", record_and_wait},
      {"  cuStreamGetCtx x2 + cuCtxGetCurrent", stream_contexts},
  };
  for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
    printf("  %-48s %8.1f ns\n", rows[i].name, per_call_ns(rows[i].call));
  if (failed) {
    fprintf(stderr, "a benchmarked call failed\n");
    return 1;
  }

  printf("allocation ranges, two ways\n");
  compare_ranges("cuMemAlloc, base", data);
  compare_ranges("cuMemAlloc, inside", data + 4096);
  CUdeviceptr managed;
  CU(cuMemAllocManaged(&managed, 1 << 16, 1));
  compare_ranges("cuMemAllocManaged", managed + 64);
  void *pinned;
  CUdeviceptr pinned_device;
  CU(cuMemHostAlloc(&pinned, 1 << 16, 2 /* DEVICEMAP */));
  CU(cuMemHostGetDevicePointer_v2(&pinned_device, pinned, 0));
  compare_ranges("cuMemHostAlloc, mapped", pinned_device + 64);
  return 0;
}
