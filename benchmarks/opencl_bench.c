/* Host cost of an OpenCL import through libcai (bounds check: two clGetMemObjectInfo and a
 * clGetCommandQueueInfo; stream-ordered sync: a marker on the producer queue, a barrier on
 * the consumer queue, the marker released) next to the marker + barrier + release alone, on
 * the same queues in the same run. Both queues are drained every 256 calls, outside the timed
 * part. Build and run: bash benchmarks/opencl_bench.sh */
#define _POSIX_C_SOURCE 200809L
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "cai.h"

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

int main(void) {
  cl_platform_id platform;
  cl_device_id device;
  cl_int err;
  if (clGetPlatformIDs(1, &platform, NULL) || clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, 1, &device, NULL)) {
    fprintf(stderr, "no OpenCL device\n");
    return 1;
  }
  cl_context context = clCreateContext(NULL, 1, &device, NULL, NULL, &err);
  cl_command_queue producer = clCreateCommandQueue(context, device, 0, &err);
  cl_command_queue consumer = clCreateCommandQueue(context, device, 0, &err);
  cl_mem buffer = clCreateBuffer(context, CL_MEM_READ_WRITE, 1 << 20, NULL, &err);
  CaiArray a;
  memset(&a, 0, sizeof a);
  a.version = 3;
  a.ndim = 3;
  a.shape[0] = 16, a.shape[1] = 64, a.shape[2] = 256;
  strcpy(a.typestr, "<f4");
  a.memory = CAI_MEMORY_OPENCL;
  a.data = (uint64_t)(uintptr_t)buffer;
  a.stream = (uint64_t)(uintptr_t)producer;
  CaiImportOptions options;
  memset(&options, 0, sizeof options);
  options.consumer_stream = (uint64_t)(uintptr_t)consumer;
  options.pointer_check = CAI_POINTER_CHECK_ALWAYS;

  enum { rounds = 40, batch = 256 };
  double best_cai = 1e18, best_raw = 1e18, best_validate = 1e18;
  for (int r = 0; r < rounds; r++) {
    double t0 = now();
    for (int i = 0; i < batch; i++)
      if (cai_import(&a, &options, NULL, NULL) != CAI_OK) return 1;
    double t1 = now();
    clFinish(producer), clFinish(consumer);
    double t2 = now();
    for (int i = 0; i < batch; i++) {
      cl_event marker;
      clEnqueueMarkerWithWaitList(producer, 0, NULL, &marker);
      clEnqueueBarrierWithWaitList(consumer, 1, &marker, NULL);
      clReleaseEvent(marker);
    }
    double t3 = now();
    clFinish(producer), clFinish(consumer);
    double t4 = now();
    for (int i = 0; i < batch; i++) cai_validate(&a, NULL);
    double t5 = now();
    if ((t1 - t0) / batch < best_cai) best_cai = (t1 - t0) / batch;
    if ((t3 - t2) / batch < best_raw) best_raw = (t3 - t2) / batch;
    if ((t5 - t4) / batch < best_validate) best_validate = (t5 - t4) / batch;
  }
  char name[128] = "";
  clGetPlatformInfo(platform, CL_PLATFORM_NAME, sizeof name, name, NULL);
  printf("OpenCL platform: %s (best of %d rounds of %d calls)\n", name, rounds, batch);
  printf("marker + barrier + release (peer)                    %9.0f ns  1.00x\n", best_raw);
  printf("cai_import: bounds check + stream-ordered sync      %9.0f ns  %5.2fx\n", best_cai, best_cai / best_raw);
  printf("cai_validate of the same array                       %9.0f ns  %5.2fx\n", best_validate,
         best_validate / best_raw);
  return 0;
}
