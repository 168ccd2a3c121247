/* A fake OpenCL library for c_tests/test_fork_opencl.c (a test double): the eight entry points
 * libcai takes, answering a buffer of 1 MiB in context 0x1 and succeeding at everything else,
 * and a load that can be held back: with FAKE_OPENCL_LOAD_SIGNAL_FD set, the library's
 * constructor (run inside the dlopen that loads it) writes one byte to that descriptor, then
 * sleeps FAKE_OPENCL_LOAD_DELAY_MS, so that a test can fork while the load is under way. */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define CL_SUCCESS 0
#define CL_MEM_SIZE 0x1102

__attribute__((constructor)) static void held_back_load(void) {
  const char *fd = getenv("FAKE_OPENCL_LOAD_SIGNAL_FD");
  const char *delay = getenv("FAKE_OPENCL_LOAD_DELAY_MS");
  if (!fd) return;
  char byte = 1;
  if (write(atoi(fd), &byte, 1) != 1) return;
  long ms = delay ? atol(delay) : 0;
  struct timespec pause = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&pause, NULL);
}

/* Every info query: CL_MEM_SIZE is 1 MiB, everything else (a context) is 0x1. */
static int32_t info(uint32_t name, size_t size, void *value) {
  if (value && size == sizeof(uint64_t)) {
    uint64_t answer = name == CL_MEM_SIZE ? (1u << 20) : 1;
    memcpy(value, &answer, sizeof answer);
  }
  return CL_SUCCESS;
}

int32_t clGetMemObjectInfo(void *mem, uint32_t name, size_t size, void *value, size_t *written) {
  (void)mem, (void)written;
  return info(name, size, value);
}
int32_t clGetCommandQueueInfo(void *queue, uint32_t name, size_t size, void *value, size_t *written) {
  (void)queue, (void)written;
  return info(name, size, value);
}
int32_t clGetEventInfo(void *event, uint32_t name, size_t size, void *value, size_t *written) {
  (void)event, (void)written;
  return info(name, size, value);
}
int32_t clEnqueueMarkerWithWaitList(void *queue, uint32_t count, void *const *events, void **event) {
  (void)queue, (void)count, (void)events, (void)event;
  return CL_SUCCESS;
}
int32_t clEnqueueBarrierWithWaitList(void *queue, uint32_t count, void *const *events, void **event) {
  (void)queue, (void)count, (void)events, (void)event;
  return CL_SUCCESS;
}
int32_t clFinish(void *queue) {
  (void)queue;
  return CL_SUCCESS;
}
int32_t clWaitForEvents(uint32_t count, void *const *events) {
  (void)count, (void)events;
  return CL_SUCCESS;
}
int32_t clReleaseEvent(void *event) {
  (void)event;
  return CL_SUCCESS;
}
