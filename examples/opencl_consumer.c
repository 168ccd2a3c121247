/* A consumer of the OpenCL half of the OpenCL/CUDA Buffer Interface (spec/buffer-interface.txt):
 * a producer hands over a view of an OpenCL buffer (the cl_mem, a byte offset, shape, strides,
 * and the queue its writes are on); libcai checks that the view lies inside the buffer and
 * belongs to the consumer queue's context, orders the consumer queue after the producer's, and
 * the consumer reads. Runs on any OpenCL driver (PoCL on a CPU will do); libcai opens
 * libOpenCL.so.1 itself, this program links it for its own setup. */
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "cai.h"

int main(void) {
  cl_platform_id platform;
  cl_device_id device;
  cl_int err;
  if (clGetPlatformIDs(1, &platform, NULL) != CL_SUCCESS ||
      clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, 1, &device, NULL) != CL_SUCCESS) {
    printf("no OpenCL device: nothing to show\n");
    return 0;
  }
  cl_context context = clCreateContext(NULL, 1, &device, NULL, NULL, &err);
  cl_command_queue producer = clCreateCommandQueue(context, device, 0, &err);
  cl_command_queue consumer = clCreateCommandQueue(context, device, 0, &err);

  /* The producer: 16 floats, written on its own queue (not waited for). */
  float values[16];
  for (int i = 0; i < 16; i++) values[i] = (float)i;
  cl_mem buffer = clCreateBuffer(context, CL_MEM_READ_WRITE, sizeof values, NULL, &err);
  clEnqueueWriteBuffer(producer, buffer, CL_FALSE, 0, sizeof values, values, 0, NULL, NULL);

  /* What it hands over: a 2x3 view starting at element 4, rows 4 elements apart. */
  CaiArray view;
  memset(&view, 0, sizeof view);
  view.version = 3;
  view.memory = CAI_MEMORY_OPENCL;
  view.data = (uint64_t)(uintptr_t)buffer;
  view.byte_offset = 4 * sizeof(float);
  view.ndim = 2;
  view.shape[0] = 2;
  view.shape[1] = 3;
  view.strides[0] = 4 * sizeof(float);
  view.strides[1] = sizeof(float);
  view.strides_given = 1;
  strcpy(view.typestr, "<f4");
  view.stream_kind = CAI_OPENCL_STREAM_QUEUE;
  view.stream = (uint64_t)(uintptr_t)producer;

  /* The consumer: bounds and context checked, its queue ordered after the producer's. */
  CaiImportOptions options;
  memset(&options, 0, sizeof options);
  options.consumer_stream = (uint64_t)(uintptr_t)consumer;
  options.sync_mode = CAI_SYNC_STREAM_ORDERED;
  CaiPointerInfo info;
  CaiError error;
  if (cai_import(&view, &options, &info, &error) != CAI_OK) {
    fprintf(stderr, "import refused: %s\n", error.message);
    return 1;
  }
  printf("imported: buffer of %llu bytes, view checked inside it\n", (unsigned long long)info.allocation_size);
  float row[2][3];
  for (int i = 0; i < 2; i++) {
    size_t offset = (size_t)(view.byte_offset + (uint64_t)i * (uint64_t)view.strides[0]);
    clEnqueueReadBuffer(consumer, buffer, CL_TRUE, offset, sizeof row[i], row[i], 0, NULL, NULL);
  }
  printf("rows read on the consumer queue: %g %g %g | %g %g %g\n", row[0][0], row[0][1], row[0][2], row[1][0],
         row[1][1], row[1][2]);
  int ok = row[0][0] == 4.0f && row[1][2] == 10.0f;

  /* A view that reaches past the buffer is refused before anything reads it. */
  view.shape[0] = 4;
  if (cai_import(&view, &options, &info, &error) == CAI_ERROR_OUT_OF_BOUNDS) {
    printf("a view past the buffer is refused: %s\n", error.message);
  } else {
    ok = 0;
  }
  clReleaseMemObject(buffer);
  clReleaseCommandQueue(consumer);
  clReleaseCommandQueue(producer);
  clReleaseContext(context);
  return ok ? 0 : 1;
}
