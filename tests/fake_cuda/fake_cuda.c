/* TEST DOUBLE: a fake CUDA driver for libcai's CI, which has no GPU.
 *
 * It exports the driver entry points libcai resolves, and simulates them on the host: two
 * devices with one context each, a context stack per thread, streams, events, and
 * allocations with known ranges and memory types. Every call is appended to a call log that
 * tests read back, and any call can be made to fail once. The log and the failures are per
 * thread, so tests running in parallel threads do not see each other's calls.
 *
 * Streams keep order as a GPU does, so that a missing sync shows as wrong data: one kernel,
 * spin_then_fill, writes its value only once something is ordered after it (vector clocks:
 * a stream's clock counts the work it has seen from each stream; events copy a clock,
 * cuStreamWaitEvent and cuStreamSynchronize merge one in). A read on stream t sees a write
 * made on stream s once t's clock covers it; the host sees it once it synchronized with s.
 * c_tests/gpu/test_gpu.c, the GPU suite's C part, runs on this model in CI.
 *
 * Work also takes time, as on a GPU: fake_cuda_launch_slow(stream, ms) enqueues a kernel that
 * starts once the work it is ordered after has finished and then runs `ms` milliseconds (ms < 0:
 * until fake_cuda_finish_slow releases it). An event is complete once every slow kernel its
 * recorded clock covers has finished: cuEventQuery returns CUDA_ERROR_NOT_READY until then,
 * cuEventSynchronize and cuStreamSynchronize wait for it. fake_cuda_slow_finished_at says when
 * a kernel finished, on the clock fake_cuda_now reads (CLOCK_MONOTONIC seconds).
 *
 * Loaded by libcai through CAI_CUDA_DRIVER=/path/to/this.so. Test-only functions start with
 * fake_cuda_. Environment: FAKE_CUDA_INIT_RESULT=N makes cuInit return N;
 * FAKE_CUDA_NO_PROC_ADDRESS=1 makes cuGetProcAddress find nothing (libcai then uses dlsym);
 * FAKE_CUDA_NO_CONTEXT_ID=1 makes it not offer cuCtxGetId (as a driver before CUDA 12.0);
 * FAKE_CUDA_INIT_DELAY_MS=N makes cuInit take N ms (as on a large machine), fake_cuda_init_calls
 * counting the calls begun.
 *
 * Every entry point libcai resolves can be made to fail (fake_cuda_fail). A context can be
 * destroyed and re-created at the same address (fake_cuda_recreate_context): it then has a
 * new id, and the events of the old one are invalid, as on a real driver.
 *
 * CUDA graph capture follows NVIDIA's rules (CUDA Programming Guide, "Prohibited and Unhandled
 * Operations" and "Invalidation"; the driver API's stream capture functions), with the real
 * error codes. cuStreamBeginCapture_v2 starts a capture on a stream the fake made (the default
 * streams are not captured here); work enqueued on a stream in a capture is captured, not run.
 * An event recorded on a capturing stream becomes a captured event; a stream not in a capture
 * that waits on it joins that capture, and cuStreamEndCapture fails with
 * CUDA_ERROR_STREAM_CAPTURE_UNJOINED unless the origin stream has waited on every joined
 * stream's captured work since it joined (vector clocks of captured work, as for real work).
 * What the driver refuses during a capture returns its error and invalidates the capture (the
 * end then fails with CUDA_ERROR_STREAM_CAPTURE_INVALIDATED): cuStreamSynchronize of a
 * capturing stream (CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED); a capturing stream's wait on an
 * event recorded outside capture without CU_EVENT_WAIT_EXTERNAL (..._ISOLATION); a wait joining
 * two captures (..._MERGE); and any use of the legacy stream (NULL or CU_STREAM_LEGACY) while a
 * stream of the same context is capturing, whatever the capture's mode, all fake streams being
 * blocking streams (..._IMPLICIT; cuStreamIsCapturing and cuStreamGetCaptureInfo of the legacy
 * stream then return that code and leave the capture as it is). A capture not begun in
 * CU_STREAM_CAPTURE_MODE_RELAXED ends only on the thread that began it (..._WRONG_THREAD). The
 * modes' bar on "potentially unsafe" calls (cuMemAlloc and the like) is not modelled: libcai
 * makes none. fake_cuda_capture_streams counts the streams in a stream's capture.
 *
 * Processes share device memory as the driver's IPC does (cuIpcGetMemHandle, cuIpcOpenMemHandle,
 * cuIpcGetEventHandle, cuIpcOpenEventHandle). Device memory (cuMemAlloc, fake_cuda_alloc of
 * memory type 2, not managed) lies in one memfd per process, mapped MAP_SHARED, page-aligned;
 * its first 64 KiB are a header other processes read: each allocation's serial and whether it
 * is live, and each interprocess event's completion time. A memory handle carries the
 * exporter's pid, the memfd's fd, the header's nonce, the allocation's slot, serial, offset and
 * size; another process opens /proc/<pid>/fd/<fd> and maps the same bytes at another address.
 * As on the real driver: opening in the exporting process fails (CUDA_ERROR_INVALID_CONTEXT,
 * which CUDA programs report as "invalid device context" there; unconfirmed against NVIDIA's
 * sources); a second open of one handle in one process fails (CUDA_ERROR_ALREADY_MAPPED: the
 * documented rule that an allocation is opened once per context and process, kept strict so
 * that libcai's own table is tested); a handle whose memory was freed (cuMemFree) or whose
 * exporter exited fails (CUDA_ERROR_INVALID_HANDLE), never a crash. An interprocess event
 * (CU_EVENT_INTERPROCESS | CU_EVENT_DISABLE_TIMING) keeps, in the header, when the work of its
 * last record finishes (infinity while a held slow kernel it covers is not let go): an
 * importer's cuEventQuery and cuEventSynchronize of the opened event read it, and its
 * cuStreamWaitEvent enqueues a wait that finishes then, so that work after it on the stream
 * waits for the exporter's kernel. Each device has a UUID (cuDeviceGetUuid): "fake", the seed
 * FAKE_CUDA_UUID_SEED (default 0, a 32-bit number) and the ordinal, so that a process given
 * another seed lacks the other's devices. fake_cuda_alloc's flags 8 and 16 make memory of a
 * stream-ordered pool, not IPC-enabled and IPC-enabled (cuMemPoolExportPointer succeeds). */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

typedef int CUresult;
typedef uint64_t CUdeviceptr;

enum {
  CUDA_SUCCESS = 0,
  CUDA_ERROR_INVALID_VALUE = 1,
  CUDA_ERROR_INVALID_CONTEXT = 201,
  CUDA_ERROR_ALREADY_MAPPED = 208,
  CUDA_ERROR_INVALID_HANDLE = 400,
  CUDA_ERROR_ILLEGAL_STATE = 401,
  CUDA_ERROR_NOT_FOUND = 500,
  CUDA_ERROR_NOT_READY = 600,
  CUDA_ERROR_LAUNCH_FAILED = 719,
  CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED = 900,
  CUDA_ERROR_STREAM_CAPTURE_INVALIDATED = 901,
  CUDA_ERROR_STREAM_CAPTURE_MERGE = 902,
  CUDA_ERROR_STREAM_CAPTURE_UNMATCHED = 903,
  CUDA_ERROR_STREAM_CAPTURE_UNJOINED = 904,
  CUDA_ERROR_STREAM_CAPTURE_ISOLATION = 905,
  CUDA_ERROR_STREAM_CAPTURE_IMPLICIT = 906,
  CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD = 908,
};

/* CUstreamCaptureStatus, CUstreamCaptureMode, CUevent_wait_flags */
enum { CAPTURE_STATUS_NONE = 0, CAPTURE_STATUS_ACTIVE = 1, CAPTURE_STATUS_INVALIDATED = 2 };
enum { CAPTURE_MODE_GLOBAL = 0, CAPTURE_MODE_THREAD_LOCAL = 1, CAPTURE_MODE_RELAXED = 2 };
enum { EVENT_WAIT_EXTERNAL = 1 };

#define DEVICES 2
#define MAX_STREAMS 1024
#define MAX_EVENTS 65536
#define MAX_ALLOCATIONS 1024
#define STACK_DEPTH 16
#define LOG_CAPACITY 65536
#define MAX_FAILURES 16
#define MAX_CAPTURES 256

/* `generation` counts re-creations at this address; events remember the one they were made in. */
typedef struct Context { int device; unsigned long long id; unsigned generation; } Context;
#define CLOCKS (MAX_STREAMS + 1) /* one per stream, and the last for the default stream */
#define MAX_WRITES 64
typedef uint32_t Clock[CLOCKS];
/* A capture sequence: live from its begin to its end; `thread` is the beginning thread's tag. */
typedef struct Capture {
  unsigned long long id;
  int live, invalidated, mode;
  struct Stream *origin;
  Context *context;
  const void *thread;
} Capture;
/* `captured`: the clock of captured work, while the stream is in `capture`. */
typedef struct Stream { int id; Context *context; Clock clock; Capture *capture; Clock captured; } Stream;
/* `capture`: the capture the event was last recorded in (NULL: recorded outside any), and
   `captured` the captured work it then covered (CLOCKS). */
/* `shared`: an interprocess event's completion time in a process's memfd header, this one's
   (`opened` 0) or the exporter's (`opened` 1: an event of another process, cuIpcOpenEventHandle). */
typedef struct Event {
  int id; Context *context; unsigned generation; int live; uint32_t *clock;
  Capture *capture; uint32_t *captured;
  uint64_t *shared; int ipc_slot, opened;
} Event; /* clock: CLOCKS */
/* A kernel's write, waiting for something to be ordered after it. */
typedef struct Write { int stream; uint32_t tick; uint32_t *out; uint32_t n, value; } Write;
typedef struct Allocation {
  uint64_t base, size;
  unsigned memory_type; /* 1 host, 2 device, 4 unified */
  int device, managed, mapped, no_range_attributes;
  int shared_slot;      /* its slot in this process's memfd header; -1 when not in the memfd */
  int pool;             /* 0, or 8 (a pool that is not IPC-enabled) or 16 (an IPC-enabled one) */
  int opened;           /* another process's memory, mapped here by cuIpcOpenMemHandle */
  uint64_t remote_nonce, remote_serial; /* for an opened one: whose, and which */
} Allocation;

static Context contexts[DEVICES] = {{0, 1, 0}, {1, 2, 0}};
static unsigned long long next_context_id = DEVICES + 1;
static Stream streams[MAX_STREAMS];
static Event events[MAX_EVENTS];
static Allocation allocations[MAX_ALLOCATIONS];
static int stream_count, event_count, allocation_count, live_events;
static Clock host_clock, default_clock;
static Write writes[MAX_WRITES];
static int write_count;
static Capture captures[MAX_CAPTURES];
static int capture_count;
static unsigned long long next_capture_id = 1;
static const int graph_tag;
static int sync_delay_ms;                   /* cuStreamSynchronize's wait, as a busy GPU's */
static double sync_window[2];               /* when the last delayed one began and ended */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

/* A slow kernel (fake_cuda_launch_slow): tick `tick` of stream clock `stream`, begun once the
   work `after` covers (the stream's clock when it was enqueued) has finished. */
#define MAX_SLOW 1024
typedef struct Slow {
  int stream;
  uint32_t tick;
  uint32_t *after; /* CLOCKS */
  double enqueued_at, seconds;
  int held;           /* runs until fake_cuda_finish_slow */
  double released_at; /* when fake_cuda_finish_slow let a held one go; 0 before */
  const uint64_t *until; /* a wait on another process's event: finishes when its work does */
} Slow;
static Slow slow[MAX_SLOW];
static int slow_count;
static int remote_waits; /* slow entries that wait on another process's event */
/* Broadcast when a held kernel is let go, for the host waits of cuEventSynchronize and
   cuStreamSynchronize. */
static pthread_cond_t slow_released = PTHREAD_COND_INITIALIZER;

static double monotonic_seconds(void);
static double monotonic_seconds_for_nonce(void) { return monotonic_seconds(); }

/* ---- memory other processes can map (callers hold `lock`) ---- */

#define ARENA_BYTES (1ull << 30) /* sparse: only the pages touched take memory */
#define ARENA_HEADER 65536
#define MAX_IPC_EVENTS 1024
#define ARENA_MAGIC 0x46414b4541524e41ull /* "ANRAEKAF" */
typedef struct SharedAllocation { uint64_t serial, offset, size; uint32_t live, pad; } SharedAllocation;
typedef struct SharedEvent { uint64_t finish; uint32_t live, pad; } SharedEvent; /* finish: a double's bits */
typedef struct SharedHeader {
  uint64_t magic, nonce;
  SharedAllocation allocations[MAX_ALLOCATIONS];
  SharedEvent events[MAX_IPC_EVENTS];
} SharedHeader;
_Static_assert(sizeof(SharedHeader) <= ARENA_HEADER, "the header fits its pages");

static int arena_fd = -1, arena_pid;
static char *arena;
static uint64_t arena_used, next_serial = 1;
static int shared_allocations, shared_events;

/* This process's memfd, made on first use and again in a forked child (whose allocations must
   not land in its parent's pages; what it inherited stays mapped). */
static SharedHeader *arena_header(void) {
  if (arena && arena_pid == getpid()) return (SharedHeader *)arena;
  int fd = memfd_create("fake_cuda_device_memory", 0);
  if (fd < 0 || ftruncate(fd, (off_t)ARENA_BYTES) != 0) {
    perror("fake_cuda: memfd_create");
    abort();
  }
  void *memory = mmap(NULL, ARENA_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd, 0);
  if (memory == MAP_FAILED) {
    perror("fake_cuda: mmap of the device memory");
    abort();
  }
  arena = memory;
  arena_fd = fd;
  arena_pid = getpid();
  arena_used = ARENA_HEADER;
  shared_allocations = shared_events = 0;
  SharedHeader *header = (SharedHeader *)arena;
  header->magic = ARENA_MAGIC;
  header->nonce = ((uint64_t)getpid() << 32) ^ (uint64_t)(monotonic_seconds_for_nonce() * 1e9) ^ (uintptr_t)memory;
  return header;
}

static _Thread_local Context *stack[STACK_DEPTH];
static _Thread_local int depth;
static _Thread_local char call_log[LOG_CAPACITY];
static _Thread_local size_t log_length;
static _Thread_local struct { char name[48]; CUresult result; int skip; } failures[MAX_FAILURES];
/* Set on this thread: cuPointerGetAttributes refuses the range attributes (11, 12) with
   CUDA_ERROR_INVALID_VALUE, as a driver from before them would. */
static _Thread_local int range_attributes_refused;
/* Its address tells threads apart (the thread a capture began on). */
static _Thread_local char thread_tag;

static void log_call(const char *format, ...) {
  va_list args;
  va_start(args, format);
  int n = vsnprintf(call_log + log_length, LOG_CAPACITY - log_length, format, args);
  va_end(args);
  if (n > 0 && log_length + (size_t)n + 1 < LOG_CAPACITY) {
    log_length += (size_t)n;
    call_log[log_length++] = '\n';
    call_log[log_length] = '\0';
  }
}

/* An injected failure for `name`, consumed by this call; CUDA_SUCCESS if none. */
static CUresult injected(const char *name) {
  for (int i = 0; i < MAX_FAILURES; i++) {
    if (failures[i].name[0] && strcmp(failures[i].name, name) == 0) {
      if (failures[i].skip > 0) {
        failures[i].skip--;
        return CUDA_SUCCESS;
      }
      failures[i].name[0] = '\0';
      log_call("%s -> injected failure %d", name, failures[i].result);
      return failures[i].result;
    }
  }
  return CUDA_SUCCESS;
}

#define FAIL_IF_INJECTED(name)                \
  do {                                        \
    CUresult injected_ = injected(name);      \
    if (injected_ != CUDA_SUCCESS) return injected_; \
  } while (0)

static double monotonic_seconds(void) {
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return (double)now.tv_sec + (double)now.tv_nsec / 1e9;
}

/* Holds the calling thread back `ms` milliseconds, as a busy GPU or a slow cuInit would. */
static void sleep_ms(int ms) {
  struct timespec wait = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&wait, NULL);
}

static Context *current(void) { return depth > 0 ? stack[depth - 1] : NULL; }

static Stream *find_stream(uintptr_t handle) {
  for (int i = 0; i < stream_count; i++)
    if ((uintptr_t)&streams[i] == handle) return &streams[i];
  return NULL;
}

/* The context a stream handle belongs to: default handles (NULL, 1, 2) are the current one. */
static Context *stream_context(uintptr_t handle, int *known) {
  *known = 1;
  if (handle <= 2) return current();
  Stream *s = find_stream(handle);
  if (!s) *known = 0;
  return s ? s->context : NULL;
}

static void stream_name(uintptr_t handle, char *out, size_t n) {
  Stream *s = handle > 2 ? find_stream(handle) : NULL;
  if (handle == 0) snprintf(out, n, "null");
  else if (handle == 1) snprintf(out, n, "legacy");
  else if (handle == 2) snprintf(out, n, "per-thread");
  else if (s) snprintf(out, n, "S%d", s->id);
  else snprintf(out, n, "unknown-%#lx", (unsigned long)handle);
}

/* ---- stream order (callers hold `lock`) ---- */

static Clock *clock_of(uintptr_t handle) {
  Stream *s = handle > 2 ? find_stream(handle) : NULL;
  return s ? &s->clock : &default_clock;
}

static int clock_index(uintptr_t handle) {
  Stream *s = handle > 2 ? find_stream(handle) : NULL;
  return s ? s->id : CLOCKS - 1;
}

static void merge(uint32_t *into, const uint32_t *from) {
  for (int i = 0; i < CLOCKS; i++)
    if (from[i] > into[i]) into[i] = from[i];
}

/* Writes the pending kernel writes that `clock` covers, in the order they were made. */
static void apply_writes_seen_by(const uint32_t *clock) {
  int kept = 0;
  for (int i = 0; i < write_count; i++) {
    Write w = writes[i];
    if (clock[w.stream] >= w.tick) {
      for (uint32_t j = 0; j < w.n; j++) w.out[j] = w.value;
    } else {
      writes[kept++] = w;
    }
  }
  write_count = kept;
}

/* Work enqueued on a stream comes after what the host has already waited for. */
static Clock *enqueue_on(uintptr_t stream) {
  Clock *clock = clock_of(stream);
  merge(*clock, host_clock);
  apply_writes_seen_by(*clock);
  return clock;
}

/* The latest of `finish` (each slow kernel's finish) among the first `count` slow kernels
   that `clock` covers; 0 when none. */
static double covered_finish(const uint32_t *clock, const double *finish, int count) {
  double latest = 0;
  for (int i = 0; i < count; i++)
    if (clock[slow[i].stream] >= slow[i].tick && finish[i] > latest) latest = finish[i];
  return latest;
}

/* When each slow kernel finishes (INFINITY while a held one is not let go): once what it was
   ordered after has finished, then after its own run. Kernels depend on earlier ones only, so
   one pass in launch order computes them all. Callers hold `lock`. */
static void slow_finishes(double *finish) {
  for (int i = 0; i < slow_count; i++) {
    Slow *w = &slow[i];
    double start = covered_finish(w->after, finish, i);
    if (start < w->enqueued_at) start = w->enqueued_at;
    if (w->until) {
      uint64_t bits = __atomic_load_n(w->until, __ATOMIC_ACQUIRE);
      double remote;
      memcpy(&remote, &bits, sizeof remote);
      finish[i] = remote > start ? remote : start;
    } else if (!w->held) {
      finish[i] = start + w->seconds;
    } else {
      finish[i] = w->released_at > 0 ? (w->released_at > start ? w->released_at : start) : INFINITY;
    }
  }
}

static double finish_of_work_before(const uint32_t *clock) {
  static double finish[MAX_SLOW];
  slow_finishes(finish);
  return covered_finish(clock, finish, slow_count);
}

/* Waits, `lock` held, until every slow kernel `clock` covers has finished: on the host, as
   cuEventSynchronize and cuStreamSynchronize do. */
static void wait_for_work_before(const uint32_t *clock) {
  for (;;) {
    double finish = finish_of_work_before(clock), now = monotonic_seconds();
    if (finish <= now) return;
    if (isinf(finish) && !remote_waits) {
      pthread_cond_wait(&slow_released, &lock);
      continue;
    }
    /* Another process lets its kernels go without signalling this one: look again soon. */
    if (isinf(finish)) finish = now + 0.002;
    /* The condition variable times out on CLOCK_REALTIME. */
    struct timespec real;
    clock_gettime(CLOCK_REALTIME, &real);
    double wake = (double)real.tv_sec + (double)real.tv_nsec / 1e9 + (finish - now) + 1e-4;
    struct timespec until = {(time_t)wake, (long)((wake - (double)(time_t)wake) * 1e9)};
    pthread_cond_timedwait(&slow_released, &lock, &until);
  }
}

/* Writes when the work of an interprocess event's last record finishes into this process's
   memfd header, where importers of the event read it. */
static void publish_finish(Event *e) {
  double finish = finish_of_work_before(e->clock);
  uint64_t bits;
  memcpy(&bits, &finish, sizeof bits);
  __atomic_store_n(e->shared, bits, __ATOMIC_RELEASE);
}

/* When the work another process's event (an opened one) marks finishes. */
static double remote_finish(const Event *e) {
  uint64_t bits = __atomic_load_n(e->shared, __ATOMIC_ACQUIRE);
  double finish;
  memcpy(&finish, &bits, sizeof finish);
  return finish;
}

static Event *find_event(uintptr_t handle) {
  if (handle < (uintptr_t)&events[0] || handle >= (uintptr_t)&events[MAX_EVENTS]) return NULL;
  Event *e = (Event *)handle;
  return e->live && e->generation == e->context->generation ? e : NULL;
}

static Allocation *find_allocation(uint64_t pointer) {
  for (int i = 0; i < allocation_count; i++)
    if (pointer >= allocations[i].base && pointer < allocations[i].base + allocations[i].size)
      return &allocations[i];
  return NULL;
}

/* ---- capture (callers hold `lock`) ---- */

/* The live capture a stream handle is in; NULL for none and for the default streams. */
static Capture *capture_of(uintptr_t handle) {
  Stream *s = handle > 2 ? find_stream(handle) : NULL;
  return s && s->capture && s->capture->live ? s->capture : NULL;
}

/* A live capture of a stream of `context`: the legacy stream of that context cannot be used
   while there is one (every fake stream is a blocking stream). */
static Capture *capture_in_context(Context *context) {
  for (int i = 0; i < capture_count; i++)
    if (captures[i].live && captures[i].context == context) return &captures[i];
  return NULL;
}

static int is_legacy(uintptr_t handle) { return handle == 0 || handle == 1; }

/* Use of the legacy stream of the current context while one of its streams is capturing: the
   driver's CUDA_ERROR_STREAM_CAPTURE_IMPLICIT, which invalidates every such capture. */
static CUresult legacy_use_refused(uintptr_t handle) {
  if (!is_legacy(handle) || !current()) return CUDA_SUCCESS;
  CUresult result = CUDA_SUCCESS;
  for (int i = 0; i < capture_count; i++) {
    if (captures[i].live && captures[i].context == current()) {
      captures[i].invalidated = 1;
      result = CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
    }
  }
  return result;
}

/* The capture status of a stream handle as cuStreamIsCapturing gives it, or the error. */
static CUresult capture_status(uintptr_t handle, int *status, Capture **capture) {
  *capture = NULL;
  *status = CAPTURE_STATUS_NONE;
  if (is_legacy(handle)) {
    /* Asked of the legacy stream during a capture in its context: the error, the capture
       left as it is. */
    return current() && capture_in_context(current()) ? CUDA_ERROR_STREAM_CAPTURE_IMPLICIT : CUDA_SUCCESS;
  }
  if (handle > 2 && !find_stream(handle)) return CUDA_ERROR_INVALID_HANDLE;
  Capture *c = capture_of(handle);
  if (c) {
    *capture = c;
    *status = c->invalidated ? CAPTURE_STATUS_INVALIDATED : CAPTURE_STATUS_ACTIVE;
  }
  return CUDA_SUCCESS;
}

/* ---- driver entry points ---- */

static int init_calls; /* cuInit calls begun, for a test that forks while one is under way */

CUresult cuInit(unsigned flags) {
  const char *forced = getenv("FAKE_CUDA_INIT_RESULT");
  const char *delay = getenv("FAKE_CUDA_INIT_DELAY_MS");
  __atomic_add_fetch(&init_calls, 1, __ATOMIC_SEQ_CST);
  log_call("cuInit flags=%u", flags);
  if (delay) sleep_ms(atoi(delay));
  FAIL_IF_INJECTED("cuInit");
  return forced ? atoi(forced) : CUDA_SUCCESS;
}

CUresult cuDriverGetVersion(int *version) {
  FAIL_IF_INJECTED("cuDriverGetVersion");
  *version = 12040;
  return CUDA_SUCCESS;
}

CUresult cuGetErrorName(CUresult error, const char **name) {
  FAIL_IF_INJECTED("cuGetErrorName");
  switch (error) {
    case CUDA_SUCCESS: *name = "CUDA_SUCCESS"; return CUDA_SUCCESS;
    case CUDA_ERROR_INVALID_VALUE: *name = "CUDA_ERROR_INVALID_VALUE"; return CUDA_SUCCESS;
    case CUDA_ERROR_INVALID_CONTEXT: *name = "CUDA_ERROR_INVALID_CONTEXT"; return CUDA_SUCCESS;
    case CUDA_ERROR_ALREADY_MAPPED: *name = "CUDA_ERROR_ALREADY_MAPPED"; return CUDA_SUCCESS;
    case CUDA_ERROR_INVALID_HANDLE: *name = "CUDA_ERROR_INVALID_HANDLE"; return CUDA_SUCCESS;
    case CUDA_ERROR_NOT_FOUND: *name = "CUDA_ERROR_NOT_FOUND"; return CUDA_SUCCESS;
    case CUDA_ERROR_NOT_READY: *name = "CUDA_ERROR_NOT_READY"; return CUDA_SUCCESS;
    case CUDA_ERROR_LAUNCH_FAILED: *name = "CUDA_ERROR_LAUNCH_FAILED"; return CUDA_SUCCESS;
    case CUDA_ERROR_ILLEGAL_STATE: *name = "CUDA_ERROR_ILLEGAL_STATE"; return CUDA_SUCCESS;
    case CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED: *name = "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED"; return CUDA_SUCCESS;
    case CUDA_ERROR_STREAM_CAPTURE_INVALIDATED: *name = "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED"; return CUDA_SUCCESS;
    case CUDA_ERROR_STREAM_CAPTURE_MERGE: *name = "CUDA_ERROR_STREAM_CAPTURE_MERGE"; return CUDA_SUCCESS;
    case CUDA_ERROR_STREAM_CAPTURE_UNMATCHED: *name = "CUDA_ERROR_STREAM_CAPTURE_UNMATCHED"; return CUDA_SUCCESS;
    case CUDA_ERROR_STREAM_CAPTURE_UNJOINED: *name = "CUDA_ERROR_STREAM_CAPTURE_UNJOINED"; return CUDA_SUCCESS;
    case CUDA_ERROR_STREAM_CAPTURE_ISOLATION: *name = "CUDA_ERROR_STREAM_CAPTURE_ISOLATION"; return CUDA_SUCCESS;
    case CUDA_ERROR_STREAM_CAPTURE_IMPLICIT: *name = "CUDA_ERROR_STREAM_CAPTURE_IMPLICIT"; return CUDA_SUCCESS;
    case CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD: *name = "CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD"; return CUDA_SUCCESS;
    default: return CUDA_ERROR_INVALID_VALUE;
  }
}

CUresult cuCtxGetCurrent(void **context) {
  FAIL_IF_INJECTED("cuCtxGetCurrent");
  *context = current();
  return CUDA_SUCCESS;
}

CUresult cuCtxPushCurrent_v2(void *context) {
  FAIL_IF_INJECTED("cuCtxPushCurrent");
  if (depth == STACK_DEPTH) return CUDA_ERROR_INVALID_VALUE;
  stack[depth++] = (Context *)context;
  log_call("cuCtxPushCurrent C%d", ((Context *)context)->device);
  return CUDA_SUCCESS;
}

CUresult cuCtxPopCurrent_v2(void **context) {
  FAIL_IF_INJECTED("cuCtxPopCurrent");
  if (depth == 0) return CUDA_ERROR_INVALID_CONTEXT;
  Context *popped = stack[--depth];
  if (context) *context = popped;
  log_call("cuCtxPopCurrent C%d", popped->device);
  return CUDA_SUCCESS;
}

CUresult cuCtxGetId(void *context, unsigned long long *id) {
  FAIL_IF_INJECTED("cuCtxGetId");
  Context *c = context ? (Context *)context : current();
  if (!c) return CUDA_ERROR_INVALID_CONTEXT;
  pthread_mutex_lock(&lock);
  *id = c->id;
  pthread_mutex_unlock(&lock);
  log_call("cuCtxGetId C%d -> %llu", c->device, *id);
  return CUDA_SUCCESS;
}

CUresult cuStreamGetCtx(void *stream, void **context) {
  FAIL_IF_INJECTED("cuStreamGetCtx");
  int known;
  Context *c = stream_context((uintptr_t)stream, &known);
  if (!known) return CUDA_ERROR_INVALID_HANDLE;
  if (!c) return CUDA_ERROR_INVALID_CONTEXT;
  *context = c;
  return CUDA_SUCCESS;
}

CUresult cuStreamSynchronize(void *stream) {
  char name[32];
  stream_name((uintptr_t)stream, name, sizeof name);
  log_call("cuStreamSynchronize %s", name);
  FAIL_IF_INJECTED("cuStreamSynchronize");
  int known;
  Context *c = stream_context((uintptr_t)stream, &known);
  if (!known) return CUDA_ERROR_INVALID_HANDLE;
  pthread_mutex_lock(&lock);
  CUresult refused = legacy_use_refused((uintptr_t)stream);
  Capture *capture = capture_of((uintptr_t)stream);
  /* A capturing stream's work is not scheduled: waiting for it is refused, and ends the
     capture's use (invalidated). */
  if (capture) {
    capture->invalidated = 1;
    refused = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  }
  pthread_mutex_unlock(&lock);
  if (refused != CUDA_SUCCESS) return refused;
  if (c) {
    pthread_mutex_lock(&lock);
    wait_for_work_before(*clock_of((uintptr_t)stream));
    merge(host_clock, *clock_of((uintptr_t)stream));
    apply_writes_seen_by(host_clock);
    pthread_mutex_unlock(&lock);
  }
  int delay_ms = __atomic_load_n(&sync_delay_ms, __ATOMIC_SEQ_CST);
  if (c && delay_ms > 0) {
    double begin = monotonic_seconds();
    sleep_ms(delay_ms);
    pthread_mutex_lock(&lock);
    sync_window[0] = begin;
    sync_window[1] = monotonic_seconds();
    pthread_mutex_unlock(&lock);
  }
  return c ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
}

CUresult cuEventCreate(void **event, unsigned flags) {
  FAIL_IF_INJECTED("cuEventCreate");
  Context *c = current();
  if (!c) return CUDA_ERROR_INVALID_CONTEXT;
  /* CU_EVENT_INTERPROCESS (4) needs CU_EVENT_DISABLE_TIMING (2), as on the real driver. */
  if ((flags & 4) && !(flags & 2)) return CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&lock);
  int ipc_slot = -1;
  if (flags & 4) {
    SharedHeader *header = arena_header();
    if (shared_events == MAX_IPC_EVENTS) {
      pthread_mutex_unlock(&lock);
      return CUDA_ERROR_INVALID_VALUE;
    }
    ipc_slot = shared_events++;
    header->events[ipc_slot] = (SharedEvent){.finish = 0, .live = 1};
  }
  if (event_count == MAX_EVENTS) {
    pthread_mutex_unlock(&lock);
    return CUDA_ERROR_INVALID_VALUE;
  }
  Event *e = &events[event_count];
  e->id = event_count++;
  e->context = c;
  e->generation = c->generation;
  e->live = 1;
  e->clock = calloc(CLOCKS, sizeof(uint32_t));
  e->captured = calloc(CLOCKS, sizeof(uint32_t));
  e->capture = NULL;
  e->ipc_slot = ipc_slot;
  e->opened = 0;
  e->shared = ipc_slot >= 0 ? &((SharedHeader *)arena)->events[ipc_slot].finish : NULL;
  live_events++;
  pthread_mutex_unlock(&lock);
  *event = e;
  log_call("cuEventCreate E%d C%d flags=%u", e->id, c->device, flags);
  return CUDA_SUCCESS;
}

CUresult cuEventDestroy_v2(void *event) {
  FAIL_IF_INJECTED("cuEventDestroy");
  Event *e = find_event((uintptr_t)event);
  if (!e) return CUDA_ERROR_INVALID_HANDLE;
  pthread_mutex_lock(&lock);
  if (e->shared && !e->opened) ((SharedHeader *)arena)->events[e->ipc_slot].live = 0;
  e->live = 0;
  free(e->clock);
  free(e->captured);
  e->clock = NULL;
  e->captured = NULL;
  live_events--;
  pthread_mutex_unlock(&lock);
  log_call("cuEventDestroy E%d", e->id);
  return CUDA_SUCCESS;
}

CUresult cuEventRecord(void *event, void *stream) {
  char name[32];
  stream_name((uintptr_t)stream, name, sizeof name);
  FAIL_IF_INJECTED("cuEventRecord");
  Event *e = find_event((uintptr_t)event);
  int known;
  Context *c = stream_context((uintptr_t)stream, &known);
  if (!e || !known) return CUDA_ERROR_INVALID_HANDLE;
  /* As the real driver: an event records only on a stream of its own context. */
  if (c != e->context) return CUDA_ERROR_INVALID_HANDLE;
  if (e->opened) return CUDA_ERROR_INVALID_HANDLE; /* recording another process's event: not modelled */
  pthread_mutex_lock(&lock);
  CUresult refused = legacy_use_refused((uintptr_t)stream);
  Capture *capture = capture_of((uintptr_t)stream);
  if (refused == CUDA_SUCCESS && capture && capture->invalidated) refused = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
  if (refused == CUDA_SUCCESS && capture) {
    /* Recorded into the capture: the event now stands for captured work, not for real work. */
    e->capture = capture;
    memcpy(e->captured, find_stream((uintptr_t)stream)->captured, sizeof(Clock));
  } else if (refused == CUDA_SUCCESS) {
    e->capture = NULL;
    memcpy(e->clock, *clock_of((uintptr_t)stream), sizeof(Clock));
    if (e->shared) publish_finish(e);
  }
  pthread_mutex_unlock(&lock);
  if (refused != CUDA_SUCCESS) {
    log_call("cuEventRecord E%d %s -> %d", e->id, name, refused);
    return refused;
  }
  log_call(capture ? "cuEventRecord E%d %s captured" : "cuEventRecord E%d %s", e->id, name);
  return CUDA_SUCCESS;
}

/* An event recorded in a capture stands for graph nodes, not scheduled work: querying or
   waiting for it on the host is refused, and invalidates the capture (CUDA Programming Guide,
   "Prohibited and Unhandled Operations"). Callers hold `lock`. */
static CUresult host_wait_on_captured(Event *e) {
  if (!e->capture || !e->capture->live) return CUDA_SUCCESS;
  e->capture->invalidated = 1;
  return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
}

/* Complete once the slow kernels the event's recorded clock covers have finished (an event
   never recorded is complete); the host has then seen that work, as after a synchronize. */
CUresult cuEventQuery(void *event) {
  FAIL_IF_INJECTED("cuEventQuery");
  Event *e = find_event((uintptr_t)event);
  if (!e) return CUDA_ERROR_INVALID_HANDLE;
  pthread_mutex_lock(&lock);
  CUresult result = host_wait_on_captured(e);
  if (e->opened) {
    if (remote_finish(e) > monotonic_seconds()) result = CUDA_ERROR_NOT_READY;
    pthread_mutex_unlock(&lock);
    log_call("cuEventQuery E%d (another process's) -> %d", e->id, result);
    return result;
  }
  if (result == CUDA_SUCCESS && finish_of_work_before(e->clock) > monotonic_seconds()) result = CUDA_ERROR_NOT_READY;
  if (result == CUDA_SUCCESS) {
    merge(host_clock, e->clock);
    apply_writes_seen_by(host_clock);
  }
  pthread_mutex_unlock(&lock);
  log_call("cuEventQuery E%d -> %d", e->id, result);
  return result;
}

/* Waits on the host until the event is complete (cuEventQuery's rule). */
CUresult cuEventSynchronize(void *event) {
  FAIL_IF_INJECTED("cuEventSynchronize");
  Event *e = find_event((uintptr_t)event);
  if (!e) return CUDA_ERROR_INVALID_HANDLE;
  pthread_mutex_lock(&lock);
  CUresult result = host_wait_on_captured(e);
  if (e->opened) {
    /* Another process's kernels finish without telling this one: look again every 1 ms. */
    while (remote_finish(e) > monotonic_seconds()) {
      pthread_mutex_unlock(&lock);
      sleep_ms(1);
      pthread_mutex_lock(&lock);
    }
    pthread_mutex_unlock(&lock);
    log_call("cuEventSynchronize E%d (another process's) -> 0", e->id);
    return CUDA_SUCCESS;
  }
  if (result == CUDA_SUCCESS) {
    wait_for_work_before(e->clock);
    merge(host_clock, e->clock);
    apply_writes_seen_by(host_clock);
  }
  pthread_mutex_unlock(&lock);
  log_call("cuEventSynchronize E%d -> %d", e->id, result);
  return result;
}

CUresult cuStreamWaitEvent(void *stream, void *event, unsigned flags) {
  char name[32];
  stream_name((uintptr_t)stream, name, sizeof name);
  FAIL_IF_INJECTED("cuStreamWaitEvent");
  Event *e = find_event((uintptr_t)event);
  int known;
  Context *c = stream_context((uintptr_t)stream, &known);
  if (!e || !known) return CUDA_ERROR_INVALID_HANDLE;
  if (!c) return CUDA_ERROR_INVALID_CONTEXT;
  if (flags & ~(unsigned)EVENT_WAIT_EXTERNAL) return CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&lock);
  CUresult result = legacy_use_refused((uintptr_t)stream);
  Capture *waiter = capture_of((uintptr_t)stream);
  Capture *recorded = e->capture && e->capture->live ? e->capture : NULL;
  Stream *s = (uintptr_t)stream > 2 ? find_stream((uintptr_t)stream) : NULL;
  const char *what = "";
  if (result != CUDA_SUCCESS) {
  } else if ((flags & EVENT_WAIT_EXTERNAL) && !waiter) {
    result = CUDA_ERROR_INVALID_VALUE; /* the flag is for waits during capture only */
  } else if (waiter && waiter->invalidated) {
    result = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
  } else if (recorded && recorded->invalidated) {
    result = CUDA_ERROR_INVALID_VALUE;
  } else if (recorded && waiter == recorded) {
    merge(s->captured, e->captured); /* a fork or a join inside one capture */
  } else if (recorded && waiter) {
    waiter->invalidated = recorded->invalidated = 1; /* two captures cannot merge */
    result = CUDA_ERROR_STREAM_CAPTURE_MERGE;
  } else if (recorded) {
    if (!s) {
      result = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED; /* a default stream is not captured here */
    } else {
      /* The waiting stream joins the capture: its work from now on is captured, and the
         capture ends only once its origin has waited on it. */
      s->capture = recorded;
      memset(s->captured, 0, sizeof(Clock));
      merge(s->captured, e->captured);
      s->captured[s->id]++;
      what = " joined the capture";
    }
  } else if (waiter && !(flags & EVENT_WAIT_EXTERNAL)) {
    /* A captured wait on work outside the capture, without the flag that makes it an
       external event node: refused, and the capture invalidated. */
    waiter->invalidated = 1;
    result = CUDA_ERROR_STREAM_CAPTURE_ISOLATION;
  } else if (waiter) {
    what = " external node";
  } else if (e->opened) {
    /* Another process's work: a wait on the stream that finishes when that work does. */
    if (slow_count == MAX_SLOW) {
      fprintf(stderr, "fake_cuda: more than %d slow kernels; raise MAX_SLOW\n", MAX_SLOW);
      abort();
    }
    int index = clock_index((uintptr_t)stream);
    uint32_t *clock = *enqueue_on((uintptr_t)stream);
    Slow *w = &slow[slow_count++];
    *w = (Slow){.stream = index, .enqueued_at = monotonic_seconds(), .until = e->shared};
    w->after = calloc(CLOCKS, sizeof(uint32_t));
    memcpy(w->after, clock, sizeof(Clock));
    w->tick = ++clock[index];
    remote_waits++;
    what = " (another process's event)";
  } else {
    merge(*clock_of((uintptr_t)stream), e->clock);
  }
  pthread_mutex_unlock(&lock);
  if (result != CUDA_SUCCESS) {
    log_call("cuStreamWaitEvent %s E%d flags=%u -> %d", name, e->id, flags, result);
    return result;
  }
  log_call("cuStreamWaitEvent %s E%d flags=%u%s", name, e->id, flags, what);
  return CUDA_SUCCESS;
}

CUresult cuStreamBeginCapture_v2(void *stream, int mode) {
  char name[32];
  stream_name((uintptr_t)stream, name, sizeof name);
  log_call("cuStreamBeginCapture %s mode=%d", name, mode);
  FAIL_IF_INJECTED("cuStreamBeginCapture");
  if (mode < CAPTURE_MODE_GLOBAL || mode > CAPTURE_MODE_RELAXED) return CUDA_ERROR_INVALID_VALUE;
  if ((uintptr_t)stream <= 2) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  pthread_mutex_lock(&lock);
  Stream *s = find_stream((uintptr_t)stream);
  CUresult result = !s ? CUDA_ERROR_INVALID_HANDLE
                       : capture_of((uintptr_t)stream) ? CUDA_ERROR_ILLEGAL_STATE
                       : capture_count == MAX_CAPTURES ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
  if (result == CUDA_SUCCESS) {
    Capture *c = &captures[capture_count++];
    *c = (Capture){.id = next_capture_id++, .live = 1, .mode = mode, .origin = s, .context = s->context,
                   .thread = &thread_tag};
    s->capture = c;
    memset(s->captured, 0, sizeof(Clock));
  }
  pthread_mutex_unlock(&lock);
  return result;
}

CUresult cuStreamEndCapture(void *stream, void **graph) {
  char name[32];
  stream_name((uintptr_t)stream, name, sizeof name);
  FAIL_IF_INJECTED("cuStreamEndCapture");
  if (!graph) return CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&lock);
  Capture *c = capture_of((uintptr_t)stream);
  CUresult result = CUDA_SUCCESS;
  if (!c) {
    result = (uintptr_t)stream > 2 && !find_stream((uintptr_t)stream) ? CUDA_ERROR_INVALID_HANDLE
                                                                      : CUDA_ERROR_ILLEGAL_STATE;
  } else if (c->origin != find_stream((uintptr_t)stream)) {
    result = CUDA_ERROR_STREAM_CAPTURE_UNMATCHED;
  } else if (c->mode != CAPTURE_MODE_RELAXED && c->thread != &thread_tag) {
    result = CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD;
  } else {
    if (c->invalidated) result = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    for (int i = 0; i < stream_count; i++) {
      Stream *m = &streams[i];
      if (m->capture != c) continue;
      if (m != c->origin && c->origin->captured[m->id] < m->captured[m->id] && result == CUDA_SUCCESS)
        result = CUDA_ERROR_STREAM_CAPTURE_UNJOINED;
      m->capture = NULL; /* every stream of the capture leaves it, whatever the result */
    }
    c->live = 0;
  }
  pthread_mutex_unlock(&lock);
  *graph = result == CUDA_SUCCESS ? (void *)&graph_tag : NULL;
  log_call("cuStreamEndCapture %s -> %d", name, result);
  return result;
}

CUresult cuStreamIsCapturing(void *stream, int *status) {
  FAIL_IF_INJECTED("cuStreamIsCapturing");
  Capture *c;
  pthread_mutex_lock(&lock);
  CUresult result = capture_status((uintptr_t)stream, status, &c);
  pthread_mutex_unlock(&lock);
  return result;
}

/* The CUDA 11.3 form (cuda.h's cuStreamGetCaptureInfo_v2); the graph's dependencies are not
   modelled: none. */
CUresult cuStreamGetCaptureInfo_v2(void *stream, int *status, unsigned long long *id, void **graph,
                                   const void ***dependencies, size_t *dependency_count) {
  char name[32];
  stream_name((uintptr_t)stream, name, sizeof name);
  FAIL_IF_INJECTED("cuStreamGetCaptureInfo");
  if (!status) return CUDA_ERROR_INVALID_VALUE;
  Capture *c;
  pthread_mutex_lock(&lock);
  CUresult result = capture_status((uintptr_t)stream, status, &c);
  unsigned long long capture_id = c ? c->id : 0;
  pthread_mutex_unlock(&lock);
  if (result == CUDA_SUCCESS && c && *status == CAPTURE_STATUS_ACTIVE) {
    if (id) *id = capture_id;
    if (graph) *graph = (void *)&graph_tag;
    if (dependencies) *dependencies = NULL;
    if (dependency_count) *dependency_count = 0;
  }
  log_call("cuStreamGetCaptureInfo %s -> %d status=%d", name, result, result == CUDA_SUCCESS ? *status : -1);
  return result;
}

static const int pool_tag; /* the CUmemoryPool of pool memory */

CUresult cuPointerGetAttributes(unsigned count, unsigned *attributes, void **data, CUdeviceptr pointer) {
  log_call("cuPointerGetAttributes %#lx", (unsigned long)pointer);
  FAIL_IF_INJECTED("cuPointerGetAttributes");
  pthread_mutex_lock(&lock);
  Allocation *a = find_allocation(pointer);
  Allocation found = a ? *a : (Allocation){0};
  pthread_mutex_unlock(&lock);
  for (unsigned i = 0; i < count; i++) {
    switch (attributes[i]) {
      case 1: *(void **)data[i] = a ? &contexts[found.device] : NULL; break; /* CONTEXT */
      case 2: *(unsigned *)data[i] = found.memory_type; break;                /* MEMORY_TYPE */
      case 3: *(CUdeviceptr *)data[i] = a && found.mapped ? pointer : 0; break; /* DEVICE_POINTER */
      case 8: *(unsigned *)data[i] = (unsigned)found.managed; break;         /* IS_MANAGED */
      case 9: *(int *)data[i] = a ? found.device : -2; break;                /* DEVICE_ORDINAL */
      case 11: /* RANGE_START_ADDR */
      case 12: /* RANGE_SIZE */
        if (range_attributes_refused) return CUDA_ERROR_INVALID_VALUE;
        /* An allocation made with flag 4 has its range given by cuMemGetAddressRange alone. */
        if (attributes[i] == 11) *(CUdeviceptr *)data[i] = found.no_range_attributes ? 0 : found.base;
        else *(size_t *)data[i] = found.no_range_attributes ? 0 : (size_t)found.size;
        break;
      case 10: /* IS_LEGACY_CUDA_IPC_CAPABLE */
        *(unsigned *)data[i] = a && found.shared_slot >= 0 && !found.pool;
        break;
      case 17: /* MEMPOOL_HANDLE */
        *(void **)data[i] = a && found.pool ? (void *)&pool_tag : NULL;
        break;
      default: return CUDA_ERROR_INVALID_VALUE;
    }
  }
  return CUDA_SUCCESS;
}

CUresult cuMemGetAddressRange_v2(CUdeviceptr *base, size_t *size, CUdeviceptr pointer) {
  log_call("cuMemGetAddressRange %#lx", (unsigned long)pointer);
  FAIL_IF_INJECTED("cuMemGetAddressRange");
  pthread_mutex_lock(&lock);
  Allocation *a = find_allocation(pointer);
  if (a) {
    *base = a->base;
    *size = (size_t)a->size;
  }
  pthread_mutex_unlock(&lock);
  return a ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}

/* ---- what the GPU suite's C part calls besides libcai (c_tests/gpu/test_gpu.c) ---- */

static const int kernel_tag, module_tag;

CUresult cuDeviceGet(int *device, int ordinal) {
  FAIL_IF_INJECTED("cuDeviceGet");
  if (ordinal < 0 || ordinal >= DEVICES) return CUDA_ERROR_INVALID_VALUE;
  *device = ordinal;
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetCount(int *count) {
  FAIL_IF_INJECTED("cuDeviceGetCount");
  *count = DEVICES;
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetAttribute(int *value, int attribute, int device) {
  (void)device;
  if (attribute != 13) return CUDA_ERROR_INVALID_VALUE; /* CU_DEVICE_ATTRIBUTE_CLOCK_RATE */
  *value = 1000000;                                     /* kHz */
  return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRetain(void **context, int device) {
  FAIL_IF_INJECTED("cuDevicePrimaryCtxRetain");
  if (device < 0 || device >= DEVICES) return CUDA_ERROR_INVALID_VALUE;
  *context = &contexts[device];
  return CUDA_SUCCESS;
}

CUresult cuCtxSetCurrent(void *context) {
  if (depth == 0) depth = 1;
  stack[depth - 1] = (Context *)context;
  return CUDA_SUCCESS;
}

uint64_t fake_cuda_alloc(uint64_t size, unsigned memory_type, int device, unsigned flags);
uint64_t fake_cuda_stream_create(int device);

CUresult cuMemAlloc_v2(CUdeviceptr *pointer, size_t size) {
  if (!current()) return CUDA_ERROR_INVALID_CONTEXT;
  *pointer = fake_cuda_alloc(size, 2, current()->device, 0);
  return CUDA_SUCCESS;
}

CUresult cuMemAllocManaged(CUdeviceptr *pointer, size_t size, unsigned flags) {
  (void)flags;
  if (!current()) return CUDA_ERROR_INVALID_CONTEXT;
  *pointer = fake_cuda_alloc(size, 2, current()->device, 1);
  return CUDA_SUCCESS;
}

CUresult cuMemHostAlloc(void **pointer, size_t size, unsigned flags) {
  (void)flags; /* pinned memory is mapped on every UVA system */
  if (!current()) return CUDA_ERROR_INVALID_CONTEXT;
  *pointer = (void *)(uintptr_t)fake_cuda_alloc(size, 1, current()->device, 0);
  return CUDA_SUCCESS;
}

CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr *device_pointer, void *host, unsigned flags) {
  (void)flags;
  *device_pointer = (CUdeviceptr)(uintptr_t)host; /* one address space */
  return CUDA_SUCCESS;
}

CUresult cuMemsetD32_v2(CUdeviceptr pointer, unsigned value, size_t n) {
  pthread_mutex_lock(&lock);
  enqueue_on(0);
  for (size_t i = 0; i < n; i++) ((uint32_t *)(uintptr_t)pointer)[i] = value;
  pthread_mutex_unlock(&lock);
  return CUDA_SUCCESS;
}

CUresult cuMemcpyDtoHAsync_v2(void *host, CUdeviceptr device, size_t bytes, void *stream) {
  pthread_mutex_lock(&lock);
  enqueue_on((uintptr_t)stream); /* the copy sees what this stream is ordered after, no more */
  memcpy(host, (const void *)(uintptr_t)device, bytes);
  pthread_mutex_unlock(&lock);
  return CUDA_SUCCESS;
}

CUresult cuStreamCreate(void **stream, unsigned flags) {
  (void)flags;
  if (!current()) return CUDA_ERROR_INVALID_CONTEXT;
  *stream = (void *)(uintptr_t)fake_cuda_stream_create(current()->device);
  return CUDA_SUCCESS;
}

/* Not ready while a kernel write made on the stream waits to be seen. */
CUresult cuStreamQuery(void *stream) {
  int index = clock_index((uintptr_t)stream), pending = 0;
  pthread_mutex_lock(&lock);
  for (int i = 0; i < write_count; i++) pending |= writes[i].stream == index;
  pthread_mutex_unlock(&lock);
  return pending ? CUDA_ERROR_NOT_READY : CUDA_SUCCESS;
}

CUresult cuModuleLoadData(void **module, const void *image) {
  (void)image;
  *module = (void *)&module_tag;
  return CUDA_SUCCESS;
}

CUresult cuModuleGetFunction(void **function, void *module, const char *name) {
  if (module != &module_tag || strcmp(name, "spin_then_fill") != 0) return CUDA_ERROR_NOT_FOUND;
  *function = (void *)&kernel_tag;
  return CUDA_SUCCESS;
}

/* spin_then_fill(out, n, value, cycles): out[0..n) = value, seen once ordered after. */
CUresult cuLaunchKernel(void *function, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                        unsigned shared, void *stream, void **params, void **extra) {
  (void)gx, (void)gy, (void)gz, (void)bx, (void)by, (void)bz, (void)shared, (void)extra;
  if (function != &kernel_tag) return CUDA_ERROR_INVALID_HANDLE;
  Write w = {.out = (uint32_t *)(uintptr_t)*(CUdeviceptr *)params[0],
             .n = *(uint32_t *)params[1],
             .value = *(uint32_t *)params[2],
             .stream = clock_index((uintptr_t)stream)};
  pthread_mutex_lock(&lock);
  CUresult refused = legacy_use_refused((uintptr_t)stream);
  Capture *capture = capture_of((uintptr_t)stream);
  if (refused == CUDA_SUCCESS && capture) {
    /* Captured: a node of the graph, not run now. */
    if (capture->invalidated) refused = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    else find_stream((uintptr_t)stream)->captured[w.stream]++;
    pthread_mutex_unlock(&lock);
    if (refused == CUDA_SUCCESS) log_call("cuLaunchKernel spin_then_fill value=%u captured", w.value);
    return refused;
  }
  if (refused != CUDA_SUCCESS || write_count == MAX_WRITES) {
    pthread_mutex_unlock(&lock);
    return refused != CUDA_SUCCESS ? refused : CUDA_ERROR_LAUNCH_FAILED;
  }
  uint32_t *clock = *enqueue_on((uintptr_t)stream);
  w.tick = ++clock[w.stream];
  writes[write_count++] = w;
  pthread_mutex_unlock(&lock);
  log_call("cuLaunchKernel spin_then_fill value=%u", w.value);
  return CUDA_SUCCESS;
}

/* ---- arrays across processes: IPC handles and device UUIDs ---- */

typedef struct { char reserved[64]; } CUipcHandle; /* CUipcMemHandle and CUipcEventHandle */
typedef struct { char bytes[16]; } CUuuid;
enum { IPC_MEM_MAGIC = 0x4d435049, IPC_EVENT_MAGIC = 0x45435049 }; /* "IPCM", "IPCE" */
/* What a handle carries. */
typedef struct IpcHandle {
  uint32_t magic;
  int32_t pid, fd, slot;
  uint64_t nonce, serial, offset, size;
} IpcHandle;
_Static_assert(sizeof(IpcHandle) <= 64, "a handle fits CU_IPC_HANDLE_SIZE");

/* The memfd headers of other processes this one opened handles of, kept mapped. */
#define MAX_REMOTES 64
static struct { int pid; uint64_t nonce; SharedHeader *header; int fd; } remotes[MAX_REMOTES];
static int remote_count;

/* The exporter's header and its memfd (an fd of this process, kept open), or NULL where the
   process is gone or is another one now. Callers hold `lock`. */
static SharedHeader *remote_header(const IpcHandle *h, int *fd) {
  for (int i = 0; i < remote_count; i++) {
    if (remotes[i].pid == h->pid && remotes[i].nonce == h->nonce) {
      *fd = remotes[i].fd;
      return remotes[i].header;
    }
  }
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/fd/%d", (int)h->pid, (int)h->fd);
  int opened = open(path, O_RDWR | O_CLOEXEC);
  if (opened < 0) return NULL; /* the exporter exited */
  void *header = mmap(NULL, ARENA_HEADER, PROT_READ, MAP_SHARED, opened, 0);
  if (header == MAP_FAILED || ((SharedHeader *)header)->magic != ARENA_MAGIC ||
      ((SharedHeader *)header)->nonce != h->nonce || remote_count == MAX_REMOTES) {
    if (header != MAP_FAILED) munmap(header, ARENA_HEADER);
    close(opened);
    return NULL; /* another process with the same pid, or not a fake device memfd */
  }
  remotes[remote_count].pid = h->pid;
  remotes[remote_count].nonce = h->nonce;
  remotes[remote_count].header = header;
  remotes[remote_count].fd = opened;
  remote_count++;
  *fd = opened;
  return header;
}

CUresult cuMemFree_v2(CUdeviceptr pointer) {
  log_call("cuMemFree %#lx", (unsigned long)pointer);
  pthread_mutex_lock(&lock);
  Allocation *a = find_allocation(pointer);
  CUresult result = !a || a->base != pointer || a->opened ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
  if (result == CUDA_SUCCESS) {
    if (a->shared_slot >= 0) ((SharedHeader *)arena)->allocations[a->shared_slot].live = 0;
    a->size = 0; /* no pointer is in it any more; its pages are not reused */
  }
  pthread_mutex_unlock(&lock);
  return result;
}

CUresult cuIpcGetMemHandle(CUipcHandle *handle, CUdeviceptr pointer) {
  log_call("cuIpcGetMemHandle %#lx", (unsigned long)pointer);
  FAIL_IF_INJECTED("cuIpcGetMemHandle");
  if (!handle) return CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&lock);
  Allocation *a = find_allocation(pointer);
  /* The base of memory from cuMemAlloc, in this process's memfd, not a pool's. */
  CUresult result = !a || a->base != pointer || a->shared_slot < 0 || a->pool || a->opened || arena_pid != getpid()
                        ? CUDA_ERROR_INVALID_VALUE
                        : CUDA_SUCCESS;
  if (result == CUDA_SUCCESS) {
    SharedHeader *header = (SharedHeader *)arena;
    SharedAllocation *shared = &header->allocations[a->shared_slot];
    IpcHandle h = {.magic = IPC_MEM_MAGIC, .pid = getpid(), .fd = arena_fd, .slot = a->shared_slot,
                   .nonce = header->nonce, .serial = shared->serial, .offset = shared->offset, .size = shared->size};
    memset(handle, 0, sizeof *handle);
    memcpy(handle, &h, sizeof h);
  }
  pthread_mutex_unlock(&lock);
  return result;
}

CUresult cuIpcOpenMemHandle_v2(CUdeviceptr *pointer, CUipcHandle handle, unsigned flags) {
  IpcHandle h;
  memcpy(&h, &handle, sizeof h);
  log_call("cuIpcOpenMemHandle pid=%d slot=%d flags=%u", (int)h.pid, (int)h.slot, flags);
  FAIL_IF_INJECTED("cuIpcOpenMemHandle");
  if (!pointer || flags & ~1u) return CUDA_ERROR_INVALID_VALUE; /* CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS only */
  if (!current()) return CUDA_ERROR_INVALID_CONTEXT;
  if (h.magic != IPC_MEM_MAGIC || h.slot < 0 || h.slot >= MAX_ALLOCATIONS) return CUDA_ERROR_INVALID_VALUE;
  if (h.pid == getpid()) return CUDA_ERROR_INVALID_CONTEXT; /* the exporting process itself */
  pthread_mutex_lock(&lock);
  CUresult result = CUDA_SUCCESS;
  for (int i = 0; i < allocation_count; i++)
    if (allocations[i].opened && allocations[i].size && allocations[i].remote_nonce == h.nonce &&
        allocations[i].remote_serial == h.serial)
      result = CUDA_ERROR_ALREADY_MAPPED;
  int fd = -1;
  SharedHeader *header = result == CUDA_SUCCESS ? remote_header(&h, &fd) : NULL;
  if (result == CUDA_SUCCESS && !header) result = CUDA_ERROR_INVALID_HANDLE;
  if (result == CUDA_SUCCESS) {
    SharedAllocation shared = header->allocations[h.slot];
    /* Freed by its exporter (or never this allocation): refused, as the driver refuses. */
    if (!shared.live || shared.serial != h.serial) result = CUDA_ERROR_INVALID_HANDLE;
  }
  void *memory = MAP_FAILED;
  if (result == CUDA_SUCCESS) {
    memory = mmap(NULL, (size_t)(h.size ? h.size : 1), PROT_READ | PROT_WRITE, MAP_SHARED, fd, (off_t)h.offset);
    if (memory == MAP_FAILED) result = CUDA_ERROR_INVALID_HANDLE;
  }
  /* The record of a mapping closed before is reused, so that opens and closes in a loop
     never run out of records. */
  int slot = -1;
  for (int i = 0; result == CUDA_SUCCESS && slot < 0 && i < allocation_count; i++)
    if (allocations[i].opened && allocations[i].size == 0) slot = i;
  if (result == CUDA_SUCCESS && slot < 0 && allocation_count == MAX_ALLOCATIONS) {
    fprintf(stderr, "fake_cuda: more than %d allocations; raise MAX_ALLOCATIONS\n", MAX_ALLOCATIONS);
    abort();
  }
  if (result == CUDA_SUCCESS) {
    Allocation *a = &allocations[slot >= 0 ? slot : allocation_count++];
    *a = (Allocation){.base = (uint64_t)(uintptr_t)memory, .size = h.size, .memory_type = 2,
                      .device = current()->device, .mapped = 1, .shared_slot = -1, .opened = 1,
                      .remote_nonce = h.nonce, .remote_serial = h.serial};
    *pointer = a->base;
  }
  pthread_mutex_unlock(&lock);
  if (result != CUDA_SUCCESS) log_call("cuIpcOpenMemHandle -> %d", result);
  return result;
}

CUresult cuIpcOpenMemHandle(CUdeviceptr *pointer, CUipcHandle handle, unsigned flags) {
  return cuIpcOpenMemHandle_v2(pointer, handle, flags);
}

CUresult cuIpcCloseMemHandle(CUdeviceptr pointer) {
  log_call("cuIpcCloseMemHandle %#lx", (unsigned long)pointer);
  FAIL_IF_INJECTED("cuIpcCloseMemHandle");
  pthread_mutex_lock(&lock);
  Allocation *a = find_allocation(pointer);
  CUresult result = !a || a->base != pointer || !a->opened ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
  if (result == CUDA_SUCCESS) {
    munmap((void *)(uintptr_t)a->base, (size_t)(a->size ? a->size : 1));
    a->size = 0;
  }
  pthread_mutex_unlock(&lock);
  return result;
}

CUresult cuIpcGetEventHandle(CUipcHandle *handle, void *event) {
  FAIL_IF_INJECTED("cuIpcGetEventHandle");
  Event *e = find_event((uintptr_t)event);
  if (!handle || !e || !e->shared || e->opened) return CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&lock);
  IpcHandle h = {.magic = IPC_EVENT_MAGIC, .pid = getpid(), .fd = arena_fd, .slot = e->ipc_slot,
                 .nonce = ((SharedHeader *)arena)->nonce};
  pthread_mutex_unlock(&lock);
  memset(handle, 0, sizeof *handle);
  memcpy(handle, &h, sizeof h);
  log_call("cuIpcGetEventHandle E%d", e->id);
  return CUDA_SUCCESS;
}

CUresult cuIpcOpenEventHandle(void **event, CUipcHandle handle) {
  IpcHandle h;
  memcpy(&h, &handle, sizeof h);
  FAIL_IF_INJECTED("cuIpcOpenEventHandle");
  Context *c = current();
  if (!event) return CUDA_ERROR_INVALID_VALUE;
  if (!c) return CUDA_ERROR_INVALID_CONTEXT;
  if (h.magic != IPC_EVENT_MAGIC || h.slot < 0 || h.slot >= MAX_IPC_EVENTS) return CUDA_ERROR_INVALID_VALUE;
  if (h.pid == getpid()) return CUDA_ERROR_INVALID_CONTEXT;
  pthread_mutex_lock(&lock);
  int fd;
  SharedHeader *header = remote_header(&h, &fd);
  CUresult result = !header || !header->events[h.slot].live ? CUDA_ERROR_INVALID_HANDLE
                    : event_count == MAX_EVENTS           ? CUDA_ERROR_INVALID_VALUE
                                                          : CUDA_SUCCESS;
  Event *e = NULL;
  if (result == CUDA_SUCCESS) {
    e = &events[event_count];
    *e = (Event){.id = event_count++, .context = c, .generation = c->generation, .live = 1,
                 .clock = calloc(CLOCKS, sizeof(uint32_t)), .captured = calloc(CLOCKS, sizeof(uint32_t)),
                 .shared = &header->events[h.slot].finish, .ipc_slot = h.slot, .opened = 1};
    live_events++;
  }
  pthread_mutex_unlock(&lock);
  if (result != CUDA_SUCCESS) {
    log_call("cuIpcOpenEventHandle -> %d", result);
    return result;
  }
  *event = e;
  log_call("cuIpcOpenEventHandle E%d pid=%d", e->id, (int)h.pid);
  return CUDA_SUCCESS;
}

/* "fake", FAKE_CUDA_UUID_SEED's 32 bits, zeros, the ordinal. */
CUresult cuDeviceGetUuid_v2(CUuuid *uuid, int device) {
  FAIL_IF_INJECTED("cuDeviceGetUuid");
  if (!uuid || device < 0 || device >= DEVICES) return CUDA_ERROR_INVALID_VALUE;
  const char *seed_text = getenv("FAKE_CUDA_UUID_SEED");
  uint32_t seed = seed_text ? (uint32_t)strtoul(seed_text, NULL, 0) : 0;
  memset(uuid, 0, sizeof *uuid);
  memcpy(uuid->bytes, "fake", 4);
  memcpy(uuid->bytes + 4, &seed, 4);
  uuid->bytes[15] = (char)device;
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetUuid(CUuuid *uuid, int device) { return cuDeviceGetUuid_v2(uuid, device); }

CUresult cuCtxGetDevice(int *device) {
  FAIL_IF_INJECTED("cuCtxGetDevice");
  if (!current()) return CUDA_ERROR_INVALID_CONTEXT;
  *device = current()->device;
  return CUDA_SUCCESS;
}

/* Succeeds for memory of an IPC-enabled pool only (fake_cuda_alloc flag 16). */
CUresult cuMemPoolExportPointer(void *export_data, CUdeviceptr pointer) {
  FAIL_IF_INJECTED("cuMemPoolExportPointer");
  pthread_mutex_lock(&lock);
  Allocation *a = find_allocation(pointer);
  int ipc_pool = a && a->pool == 16;
  pthread_mutex_unlock(&lock);
  if (!ipc_pool) return CUDA_ERROR_INVALID_VALUE;
  memset(export_data, 0, 64);
  return CUDA_SUCCESS;
}

#define ENTRY(name, symbol) {name, (void *)symbol}
static const struct { const char *name; void *pointer; } entry_points[] = {
    ENTRY("cuInit", cuInit),
    ENTRY("cuDriverGetVersion", cuDriverGetVersion),
    ENTRY("cuGetErrorName", cuGetErrorName),
    ENTRY("cuPointerGetAttributes", cuPointerGetAttributes),
    ENTRY("cuMemGetAddressRange", cuMemGetAddressRange_v2),
    ENTRY("cuCtxGetCurrent", cuCtxGetCurrent),
    ENTRY("cuCtxPushCurrent", cuCtxPushCurrent_v2),
    ENTRY("cuCtxPopCurrent", cuCtxPopCurrent_v2),
    ENTRY("cuCtxGetId", cuCtxGetId),
    ENTRY("cuStreamGetCtx", cuStreamGetCtx),
    ENTRY("cuStreamSynchronize", cuStreamSynchronize),
    ENTRY("cuStreamWaitEvent", cuStreamWaitEvent),
    ENTRY("cuEventCreate", cuEventCreate),
    ENTRY("cuEventRecord", cuEventRecord),
    ENTRY("cuEventDestroy", cuEventDestroy_v2),
    ENTRY("cuEventQuery", cuEventQuery),
    ENTRY("cuEventSynchronize", cuEventSynchronize),
    ENTRY("cuStreamGetCaptureInfo", cuStreamGetCaptureInfo_v2),
    ENTRY("cuIpcGetMemHandle", cuIpcGetMemHandle),
    ENTRY("cuIpcOpenMemHandle", cuIpcOpenMemHandle_v2),
    ENTRY("cuIpcCloseMemHandle", cuIpcCloseMemHandle),
    ENTRY("cuIpcGetEventHandle", cuIpcGetEventHandle),
    ENTRY("cuIpcOpenEventHandle", cuIpcOpenEventHandle),
    ENTRY("cuDeviceGetUuid", cuDeviceGetUuid_v2),
    ENTRY("cuDeviceGetCount", cuDeviceGetCount),
    ENTRY("cuDeviceGet", cuDeviceGet),
    ENTRY("cuCtxGetDevice", cuCtxGetDevice),
    ENTRY("cuDevicePrimaryCtxRetain", cuDevicePrimaryCtxRetain),
    ENTRY("cuMemPoolExportPointer", cuMemPoolExportPointer),
};

static int proc_address_lookups;

CUresult cuGetProcAddress(const char *symbol, void **pointer, int cuda_version, uint64_t flags) {
  (void)cuda_version;
  (void)flags;
  if (getenv("FAKE_CUDA_NO_PROC_ADDRESS")) return CUDA_ERROR_NOT_FOUND;
  if (getenv("FAKE_CUDA_NO_CONTEXT_ID") && strcmp(symbol, "cuCtxGetId") == 0) return CUDA_ERROR_NOT_FOUND;
  for (size_t i = 0; i < sizeof entry_points / sizeof entry_points[0]; i++) {
    if (strcmp(entry_points[i].name, symbol) == 0) {
      *pointer = entry_points[i].pointer;
      __atomic_add_fetch(&proc_address_lookups, 1, __ATOMIC_SEQ_CST);
      return CUDA_SUCCESS;
    }
  }
  return CUDA_ERROR_NOT_FOUND;
}

/* ---- test-only controls ---- */

/* The name of entry point `i` libcai resolves through cuGetProcAddress; NULL past the last. */
const char *fake_cuda_entry_point(int i) {
  return i >= 0 && (size_t)i < sizeof entry_points / sizeof entry_points[0] ? entry_points[i].name : NULL;
}

/* Destroys `device`'s context and creates another at the same address: a new id, and every
 * event of the old one invalid. */
void fake_cuda_recreate_context(int device) {
  pthread_mutex_lock(&lock);
  contexts[device].generation++;
  contexts[device].id = next_context_id++;
  pthread_mutex_unlock(&lock);
}

/* Makes `device` (0 or 1) this thread's only current context; -1 leaves none current. */
void fake_cuda_set_device(int device) {
  depth = 0;
  if (device >= 0) stack[depth++] = &contexts[device];
}

int fake_cuda_context_depth(void) { return depth; }

/* Registers host memory as an allocation of this type: 1 host (pinned), 2 device, 4 unified.
 * flags: 1 managed, 2 not mapped into the device address space, 4 range attributes answered
 * with none (its range only from cuMemGetAddressRange), 8 memory of a stream-ordered pool that
 * is not IPC-enabled, 16 of one that is. Device memory that is not managed lies in the memfd
 * other processes map (see the file's head). */
uint64_t fake_cuda_alloc(uint64_t size, unsigned memory_type, int device, unsigned flags) {
  int in_memfd = memory_type == 2 && !(flags & 1);
  void *memory = in_memfd ? NULL : calloc(1, (size_t)size);
  pthread_mutex_lock(&lock);
  if (allocation_count == MAX_ALLOCATIONS) {
    fprintf(stderr, "fake_cuda: more than %d allocations; raise MAX_ALLOCATIONS\n", MAX_ALLOCATIONS);
    abort();
  }
  int shared_slot = -1;
  if (in_memfd) {
    /* Device memory other processes can map: page-aligned in this process's memfd. */
    SharedHeader *header = arena_header();
    uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE), rounded = (size + page - 1) / page * page;
    if (rounded == 0) rounded = page;
    if (arena_used + rounded > ARENA_BYTES || shared_allocations == MAX_ALLOCATIONS) {
      fprintf(stderr, "fake_cuda: device memory exhausted; raise ARENA_BYTES\n");
      abort();
    }
    shared_slot = shared_allocations++;
    header->allocations[shared_slot] =
        (SharedAllocation){.serial = next_serial++, .offset = arena_used, .size = size, .live = 1};
    memory = arena + arena_used;
    arena_used += rounded;
  }
  Allocation *a = &allocations[allocation_count++];
  *a = (Allocation){0};
  a->shared_slot = shared_slot;
  a->pool = (int)(flags & 24);
  a->base = (uint64_t)(uintptr_t)memory;
  a->size = size;
  a->memory_type = memory_type;
  a->device = device;
  a->managed = (flags & 1) != 0;
  a->mapped = (flags & 2) == 0;
  a->no_range_attributes = (flags & 4) != 0;
  pthread_mutex_unlock(&lock);
  return a->base;
}

void fake_cuda_refuse_range_attributes(int refuse) { range_attributes_refused = refuse; }

uint64_t fake_cuda_stream_create(int device) {
  pthread_mutex_lock(&lock);
  if (stream_count == MAX_STREAMS) {
    fprintf(stderr, "fake_cuda: more than %d streams; raise MAX_STREAMS\n", MAX_STREAMS);
    abort();
  }
  Stream *s = &streams[stream_count];
  s->id = stream_count++;
  s->context = &contexts[device];
  pthread_mutex_unlock(&lock);
  return (uint64_t)(uintptr_t)s;
}

/* The call of `name` (cuEventRecord, cuMemGetAddressRange, ...) on this thread after `skip`
 * more that succeed fails with `result`. */
void fake_cuda_fail_after(const char *name, int skip, int result) {
  for (int i = 0; i < MAX_FAILURES; i++) {
    if (!failures[i].name[0]) {
      snprintf(failures[i].name, sizeof failures[i].name, "%s", name);
      failures[i].result = result;
      failures[i].skip = skip;
      return;
    }
  }
}

/* The next call of `name` on this thread fails with `result`. */
void fake_cuda_fail(const char *name, int result) { fake_cuda_fail_after(name, 0, result); }

const char *fake_cuda_log(void) { return log_length ? call_log : ""; }

void fake_cuda_log_clear(void) {
  log_length = 0;
  call_log[0] = '\0';
  memset(failures, 0, sizeof failures);
}

int fake_cuda_live_events(void) {
  pthread_mutex_lock(&lock);
  int n = live_events;
  pthread_mutex_unlock(&lock);
  return n;
}

/* From now on cuStreamSynchronize sleeps `ms` milliseconds (0: returns at once). */
void fake_cuda_set_sync_delay_ms(int ms) { __atomic_store_n(&sync_delay_ms, ms, __ATOMIC_SEQ_CST); }

/* CLOCK_MONOTONIC seconds at which the last delayed cuStreamSynchronize began and ended. */
void fake_cuda_last_sync_window(double *begin, double *end) {
  pthread_mutex_lock(&lock);
  *begin = sync_window[0];
  *end = sync_window[1];
  pthread_mutex_unlock(&lock);
}

/* The number of streams in the capture `stream` is in (its origin included); 0 when none. */
int fake_cuda_capture_streams(uint64_t stream) {
  pthread_mutex_lock(&lock);
  Capture *c = capture_of((uintptr_t)stream);
  int n = 0;
  for (int i = 0; c && i < stream_count; i++) n += streams[i].capture == c;
  pthread_mutex_unlock(&lock);
  return n;
}

int fake_cuda_proc_address_lookups(void) { return __atomic_load_n(&proc_address_lookups, __ATOMIC_SEQ_CST); }
int fake_cuda_init_calls(void) { return __atomic_load_n(&init_calls, __ATOMIC_SEQ_CST); }

/* Enqueues a slow kernel on `stream`: it starts once the work the stream is ordered after has
 * finished, then runs `ms` milliseconds; ms < 0: until fake_cuda_finish_slow(id). Returns its
 * id, or -1 for a stream the fake did not make (or a default stream of no current context); on
 * a capturing stream it is captured (a graph node, never run) and the id is -2. */
int fake_cuda_launch_slow(uint64_t stream, int ms) {
  char name[32];
  stream_name((uintptr_t)stream, name, sizeof name);
  int known;
  Context *c = stream_context((uintptr_t)stream, &known);
  if (!known || !c) return -1;
  pthread_mutex_lock(&lock);
  if (legacy_use_refused((uintptr_t)stream) != CUDA_SUCCESS) {
    pthread_mutex_unlock(&lock);
    return -1;
  }
  Capture *capture = capture_of((uintptr_t)stream);
  if (capture) {
    find_stream((uintptr_t)stream)->captured[clock_index((uintptr_t)stream)]++;
    pthread_mutex_unlock(&lock);
    log_call("fake_cuda_launch_slow %s captured", name);
    return -2;
  }
  if (slow_count == MAX_SLOW) {
    fprintf(stderr, "fake_cuda: more than %d slow kernels; raise MAX_SLOW\n", MAX_SLOW);
    abort();
  }
  int index = clock_index((uintptr_t)stream), id = slow_count++;
  uint32_t *clock = *enqueue_on((uintptr_t)stream);
  Slow *w = &slow[id];
  w->after = calloc(CLOCKS, sizeof(uint32_t));
  memcpy(w->after, clock, sizeof(Clock));
  w->stream = index;
  w->tick = ++clock[index];
  w->enqueued_at = monotonic_seconds();
  w->seconds = ms < 0 ? 0 : ms / 1000.0;
  w->held = ms < 0;
  w->released_at = 0;
  pthread_mutex_unlock(&lock);
  log_call("fake_cuda_launch_slow %s K%d ms=%d", name, id, ms);
  return id;
}

/* Lets the held slow kernel `id` finish now (once what it was ordered after has). */
void fake_cuda_finish_slow(int id) {
  pthread_mutex_lock(&lock);
  if (id >= 0 && id < slow_count && slow[id].held && slow[id].released_at == 0) slow[id].released_at = monotonic_seconds();
  /* Interprocess events covering it now finish: tell their importers. */
  for (int i = 0; i < event_count; i++)
    if (events[i].live && events[i].shared && !events[i].opened) publish_finish(&events[i]);
  pthread_cond_broadcast(&slow_released);
  pthread_mutex_unlock(&lock);
}

/* When slow kernel `id` finished (fake_cuda_now's clock), or 0 while it has not. */
double fake_cuda_slow_finished_at(int id) {
  pthread_mutex_lock(&lock);
  double finished = 0;
  if (id >= 0 && id < slow_count) {
    static double finish[MAX_SLOW];
    slow_finishes(finish);
    if (finish[id] <= monotonic_seconds()) finished = finish[id];
  }
  pthread_mutex_unlock(&lock);
  return finished;
}

/* The fake's clock: CLOCK_MONOTONIC seconds (Python's time.monotonic on Linux). */
double fake_cuda_now(void) { return monotonic_seconds(); }
