/* Releasing after a stream from C against the fake CUDA driver (tests/fake_cuda, a test double):
 * cai_release_after and cai_release_pending (docs/conformance.md rows 93, 94 and 96). A slow kernel
 * of the fake (fake_cuda_launch_slow) stands for a consumer's kernel still reading the array; the
 * producer's release must run only once it has finished, on the fake's clock (fake_cuda_now), and
 * never with a host wait in the caller. Run with CAI_CUDA_DRIVER set to the fake. */
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
static int (*launch_slow)(uint64_t, int);
static void (*finish_slow)(int);
static double (*slow_finished_at)(int);
static double (*fake_now)(void);

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
  *(void **)&launch_slow = dlsym(fake, "fake_cuda_launch_slow");
  *(void **)&finish_slow = dlsym(fake, "fake_cuda_finish_slow");
  *(void **)&slow_finished_at = dlsym(fake, "fake_cuda_slow_finished_at");
  *(void **)&fake_now = dlsym(fake, "fake_cuda_now");
  return set_device && log_clear && call_log && fake_alloc && stream_create && begin_capture && end_capture &&
         launch_slow && finish_slow && slow_finished_at && fake_now;
}

/* When each tagged array's release ran (fake_cuda_now), 0 while it has not; how many times. */
#define TAGS 16
static double released_at[TAGS];
static int release_calls[TAGS];

static void note_release(CaiArray *array) {
  int tag = (int)(intptr_t)array->owner;
  released_at[tag] = fake_now();
  release_calls[tag]++;
}

/* A device array of the fake that owns something: its release notes when it ran. */
static CaiArray owned_array(int tag) {
  CaiArray a;
  memset(&a, 0, sizeof a);
  a.version = 3;
  a.ndim = 1;
  a.shape[0] = 64;
  strcpy(a.typestr, "<f4");
  a.data = fake_alloc(256, 2, 0, 0);
  a.owner = (void *)(intptr_t)tag;
  a.release = note_release;
  return a;
}

static int count(const char *text, const char *needle) {
  int n = 0;
  for (const char *p = strstr(text, needle); p; p = strstr(p + 1, needle)) n++;
  return n;
}

static int host_waits(void) {
  return count(call_log(), "cuEventSynchronize") + count(call_log(), "cuStreamSynchronize");
}

int main(void) {
  if (!load_fake_controls()) {
    fprintf(stderr, "CAI_CUDA_DRIVER must name the fake driver (tests/fake_cuda)\n");
    return 1;
  }
  set_device(0);
  CaiError e;
  uint64_t left = 99;

  /* Nothing queued: nothing to do, and `left` says so. */
  CHECK_STATUS(cai_release_pending(CAI_PENDING_POLL, &left, &e), CAI_OK);
  CHECK(left == 0);

  /* Row 93: the release runs after the slow kernel on the stream, never before, and no call
     waits on the host. */
  uint64_t s = stream_create(0), t = stream_create(0);
  int kernel = launch_slow(s, -1); /* held until finish_slow */
  CHECK(kernel >= 0);
  CaiArray a = owned_array(1);
  log_clear();
  CHECK_STATUS(cai_release_after(&a, s, &e), CAI_OK);
  CHECK(a.release == NULL); /* moved into the queue */
  CHECK(count(call_log(), "cuEventRecord") == 1);
  left = 99;
  CHECK_STATUS(cai_release_pending(CAI_PENDING_POLL, &left, &e), CAI_OK);
  CHECK(left == 1 && release_calls[1] == 0); /* the kernel still reads it */
  CHECK(count(call_log(), "cuEventQuery") >= 1 && host_waits() == 0);

  /* A second release after another busy stream: its call runs the first once that is due, and
     `left` counts the one still queued. */
  int busy = launch_slow(t, -1);
  CaiArray b = owned_array(2);
  finish_slow(kernel);
  CHECK_STATUS(cai_release_after(&b, t, &e), CAI_OK);
  CHECK(release_calls[1] == 1 && released_at[1] >= slow_finished_at(kernel) && slow_finished_at(kernel) > 0);
  CHECK(release_calls[2] == 0);
  CHECK_STATUS(cai_release_pending(CAI_PENDING_POLL, &left, &e), CAI_OK);
  CHECK(left == 1);
  finish_slow(busy);
  CHECK_STATUS(cai_release_pending(CAI_PENDING_POLL, &left, &e), CAI_OK);
  CHECK(left == 0 && release_calls[2] == 1 && released_at[2] >= slow_finished_at(busy));
  CHECK(host_waits() == 0);

  /* The waiting drain: a timed kernel, the release queued behind it; CAI_PENDING_WAIT waits for
     it on the host and leaves nothing queued; NULL `left` is allowed. */
  int timed = launch_slow(s, 50);
  CaiArray c = owned_array(3);
  CHECK_STATUS(cai_release_after(&c, s, &e), CAI_OK);
  CHECK(release_calls[3] == 0);
  log_clear();
  left = 99;
  CHECK_STATUS(cai_release_pending(CAI_PENDING_WAIT, &left, &e), CAI_OK);
  CHECK(left == 0 && release_calls[3] == 1 && released_at[3] >= slow_finished_at(timed));
  CHECK(count(call_log(), "cuEventSynchronize") == 1);
  CHECK_STATUS(cai_release_pending(CAI_PENDING_WAIT, NULL, &e), CAI_OK);

  /* Row 94: a NULL array is refused, naming it. */
  CHECK_STATUS(cai_release_after(NULL, s, &e), CAI_ERROR_NULL_ARGUMENT);
  CHECK(strstr(e.message, "array is NULL") != NULL);

  /* A borrowed array owes nothing: CAI_OK and no driver call, even for a stream no driver knows. */
  CaiArray borrowed = owned_array(4);
  borrowed.release = NULL;
  log_clear();
  CHECK_STATUS(cai_release_after(&borrowed, 0xdead0000u, &e), CAI_OK);
  CHECK(strcmp(call_log(), "") == 0);

  /* Stream 0: nothing to wait for, released at once, with no driver call. */
  CaiArray d = owned_array(5);
  log_clear();
  CHECK_STATUS(cai_release_after(&d, CAI_STREAM_NONE, &e), CAI_OK);
  CHECK(release_calls[5] == 1 && d.release == NULL && strcmp(call_log(), "") == 0);

  /* A capturing stream, and the legacy stream while a stream of its context captures: refused
     with CAI_ERROR_STREAM_CAPTURING, nothing recorded, the array still the caller's, and the
     capture ends with a graph. */
  uint64_t capturing = stream_create(0);
  CHECK(begin_capture(capturing, 0) == 0);
  CaiArray f = owned_array(6);
  log_clear();
  CHECK_STATUS(cai_release_after(&f, capturing, &e), CAI_ERROR_STREAM_CAPTURING);
  CHECK(strstr(e.message, "capturing a CUDA graph") != NULL && strstr(e.message, "still yours") != NULL);
  CHECK_STATUS(cai_release_after(&f, CAI_STREAM_LEGACY, &e), CAI_ERROR_STREAM_CAPTURING);
  CHECK(strstr(e.message, "legacy default stream") != NULL);
  CHECK(count(call_log(), "cuEventRecord") == 0 && count(call_log(), "cuEventCreate") == 0);
  CHECK(f.release == note_release && release_calls[6] == 0);
  void *graph = NULL;
  CHECK(end_capture(capturing, &graph) == 0 && graph != NULL);
  CHECK_STATUS(cai_release(&f, &e), CAI_OK); /* still the caller's to release */
  CHECK(release_calls[6] == 1);

  /* Row 96: a mode other than the two is refused, naming the value and both modes; `left` is
     not written on failure. */
  left = 99;
  CHECK_STATUS(cai_release_pending(7, &left, &e), CAI_ERROR_INVALID_ARGUMENT);
  CHECK(strstr(e.message, "mode is 7") != NULL && strstr(e.message, "CAI_PENDING_POLL") != NULL &&
        strstr(e.message, "CAI_PENDING_WAIT") != NULL);
  CHECK(left == 99);

  /* Each release ran exactly once. */
  for (int tag = 1; tag <= 6; tag++) CHECK(tag == 4 ? release_calls[tag] == 0 : release_calls[tag] == 1);
  return check_summary("c_tests/test_release_after (fake driver)");
}
