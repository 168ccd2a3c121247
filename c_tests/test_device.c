/* The device half from C against the fake CUDA driver (tests/fake_cuda, a test double):
 * pointer checks, stream-ordered and blocking sync, export joins, sync during graph capture. Run with CAI_CUDA_DRIVER
 * set to the fake; scripts/gpu-check.sh runs c_tests/gpu/test_gpu.c on a real driver. */
#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cai.h"
#include "check.h"

static void (*set_device)(int);
static void (*log_clear)(void);
static const char *(*call_log)(void);
static uint64_t (*fake_alloc)(uint64_t, unsigned, int, unsigned);
static uint64_t (*stream_create)(int);
static int (*begin_capture)(uint64_t, int);
static int (*end_capture)(uint64_t, void **);

static int load_fake_controls(void) {
  const char *path = getenv("CAI_CUDA_DRIVER");
  void *fake = path ? dlopen(path, RTLD_NOW | RTLD_LOCAL) : NULL;
  if (!fake) return 0;
  *(void **)&set_device = dlsym(fake, "fake_cuda_set_device");
  *(void **)&log_clear = dlsym(fake, "fake_cuda_log_clear");
  *(void **)&call_log = dlsym(fake, "fake_cuda_log");
  *(void **)&fake_alloc = dlsym(fake, "fake_cuda_alloc");
  *(void **)&stream_create = dlsym(fake, "fake_cuda_stream_create");
  *(void **)&begin_capture = dlsym(fake, "cuStreamBeginCapture_v2");
  *(void **)&end_capture = dlsym(fake, "cuStreamEndCapture");
  return set_device && log_clear && call_log && fake_alloc && stream_create && begin_capture && end_capture;
}

static CaiArray device_array(int64_t n) {
  CaiArray a;
  memset(&a, 0, sizeof a);
  a.version = 3;
  a.ndim = 1;
  a.shape[0] = n;
  strcpy(a.typestr, "<f4");
  a.data = fake_alloc(256, 2, 0, 0);
  return a;
}

static int count(const char *text, const char *needle) {
  int n = 0;
  for (const char *p = strstr(text, needle); p; p = strstr(p + 1, needle)) n++;
  return n;
}

int main(void) {
  if (!load_fake_controls()) {
    fprintf(stderr, "CAI_CUDA_DRIVER must name the fake driver (tests/fake_cuda)\n");
    return 1;
  }
  set_device(0);
  int32_t version = 0;
  CHECK_STATUS(cai_driver_status(&version, NULL), CAI_OK);
  CHECK(version == 12040);

  CaiError e;
  CaiPointerInfo info;
  CaiArray a = device_array(64);
  CHECK_STATUS(cai_import(&a, NULL, &info, &e), CAI_OK); /* row 1 */
  CHECK(info.checked == 1 && info.memory_type == 2 && info.allocation_size == 256);

  a.shape[0] = 65; /* row 26 */
  CHECK_STATUS(cai_import(&a, NULL, &info, &e), CAI_ERROR_OUT_OF_BOUNDS);

  static float host[16];
  a = device_array(4);
  a.data = (uint64_t)(uintptr_t)host; /* row 24 */
  CHECK_STATUS(cai_import(&a, NULL, NULL, &e), CAI_ERROR_NOT_DEVICE_POINTER);

  /* row 43: stream-ordered, the host is not blocked. */
  uint64_t producer = stream_create(0), consumer = stream_create(0);
  a = device_array(4);
  a.stream = producer;
  CaiImportOptions options;
  memset(&options, 0, sizeof options);
  options.consumer_stream = consumer;
  log_clear();
  CHECK_STATUS(cai_import(&a, &options, NULL, &e), CAI_OK);
  CHECK(count(call_log(), "cuEventRecord") == 1 && count(call_log(), "cuStreamWaitEvent") == 1);
  CHECK(count(call_log(), "cuStreamSynchronize") == 0);

  /* row 44: blocking. */
  options.sync_mode = CAI_SYNC_BLOCKING;
  log_clear();
  CHECK_STATUS(cai_import(&a, &options, NULL, &e), CAI_OK);
  CHECK(count(call_log(), "cuStreamSynchronize") == 1);

  /* row 37 */
  a.readonly = 1;
  options.writable = 1;
  CHECK_STATUS(cai_import(&a, &options, NULL, &e), CAI_ERROR_READONLY);

  /* rows 46-47: joins, and the NULL stream exported as 1. */
  uint64_t work[3] = {stream_create(0), stream_create(0), 0};
  a = device_array(4);
  CaiExportOptions export_options;
  memset(&export_options, 0, sizeof export_options);
  export_options.work_streams = &work[2];
  export_options.work_stream_count = 1;
  CHECK_STATUS(cai_export(&a, &export_options, &e), CAI_OK);
  CHECK(a.stream == CAI_STREAM_LEGACY);
  a = device_array(4);
  a.stream = producer;
  export_options.work_streams = work;
  export_options.work_stream_count = 2;
  log_clear();
  CHECK_STATUS(cai_export(&a, &export_options, &e), CAI_OK);
  CHECK(a.stream == producer);
  CHECK(count(call_log(), "cuEventRecord") == 2 && count(call_log(), "cuStreamWaitEvent") == 2);

  /* rows 91-92: a producer stream capturing a CUDA graph (global mode): the sync is refused
     before anything is enqueued, and the capture ends with a graph; the same stream as the
     consumer's needs nothing. */
  uint64_t capturing = stream_create(0);
  CHECK(begin_capture(capturing, 0) == 0);
  a = device_array(4);
  a.stream = capturing;
  memset(&options, 0, sizeof options);
  options.consumer_stream = consumer;
  log_clear();
  CHECK_STATUS(cai_import(&a, &options, NULL, &e), CAI_ERROR_STREAM_CAPTURING);
  CHECK(strstr(e.message, "capturing a CUDA graph") != NULL && strstr(e.message, "CAI_SYNC_NONE") != NULL);
  CHECK(count(call_log(), "cuEventRecord") == 0 && count(call_log(), "cuStreamWaitEvent") == 0);
  CHECK_STATUS(cai_import(&a, NULL, NULL, &e), CAI_ERROR_STREAM_CAPTURING); /* a host wait */
  CHECK(count(call_log(), "cuStreamSynchronize") == 0);
  a.stream = CAI_STREAM_LEGACY; /* the legacy stream while a stream of its context captures */
  CHECK_STATUS(cai_import(&a, NULL, NULL, &e), CAI_ERROR_STREAM_CAPTURING);
  CHECK(strcmp(cai_status_string(CAI_ERROR_STREAM_CAPTURING), "CAI_ERROR_STREAM_CAPTURING") == 0);
  a.stream = capturing;
  options.consumer_stream = capturing;
  CHECK_STATUS(cai_import(&a, &options, NULL, &e), CAI_OK);
  void *graph = NULL;
  CHECK(end_capture(capturing, &graph) == 0 && graph != NULL);

  return check_summary("c_tests/test_device (fake driver)");
}
