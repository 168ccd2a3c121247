/* fork() and the OpenCL library, on a fake one (tests/fake_opencl, a test double, named by
 * CAI_OPENCL_LIBRARY): a child forked before its parent loaded the library loads its own; a
 * child forked while another thread of its parent was inside the library's first load (its
 * dlopen held back 500 ms) is refused at once with CAI_ERROR_NO_DRIVER naming the fork, where
 * it used to wait forever for the parent's unfinished load; a child forked after the load uses
 * it. Each child runs under a 10 s alarm, so a wait fails the test instead of hanging it. Its
 * own process: the library is loaded once per process. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cai.h"
#include "check.h"
#include "fork_check.h"

/* Imports a 4-float OpenCL array in the fake buffer 0x1000, its bounds checked (which needs the
 * library); `error` may be NULL. */
static CaiStatus import_opencl(CaiError *error) {
  CaiArray a;
  memset(&a, 0, sizeof a);
  a.version = 3;
  a.ndim = 1;
  a.shape[0] = 4;
  strcpy(a.typestr, "<f4");
  a.memory = CAI_MEMORY_OPENCL;
  a.data = 0x1000;
  CaiImportOptions options;
  memset(&options, 0, sizeof options);
  options.sync_mode = CAI_SYNC_NONE;
  options.pointer_check = CAI_POINTER_CHECK_ALWAYS;
  return cai_import(&a, &options, NULL, error);
}

/* A child's check: its import returns `expected` (a refusal naming the fork). */
static int child_import(CaiStatus expected) {
  CaiError error;
  memset(&error, 0, sizeof error);
  return child_exit_code("cai_import", import_opencl(&error), expected, &error);
}

static void *load_library(void *unused) {
  (void)unused;
  return (void *)(intptr_t)import_opencl(NULL);
}

int main(void) {
  if (!getenv("CAI_OPENCL_LIBRARY") || !strstr(getenv("CAI_OPENCL_LIBRARY"), "fake_opencl")) {
    fprintf(stderr, "CAI_OPENCL_LIBRARY must name the fake OpenCL library (tests/fake_opencl)\n");
    return 1;
  }

  /* Before the parent touches the library, a child loads its own. */
  CHECK(fork_and_check(child_import, CAI_OK, "forked before any load"));

  /* While another thread's load is under way: its dlopen signals, then waits 500 ms. */
  int signal[2];
  CHECK(pipe(signal) == 0);
  char fd[16];
  snprintf(fd, sizeof fd, "%d", signal[1]);
  setenv("FAKE_OPENCL_LOAD_SIGNAL_FD", fd, 1);
  setenv("FAKE_OPENCL_LOAD_DELAY_MS", "500", 1);
  pthread_t loader;
  CHECK(pthread_create(&loader, NULL, load_library, NULL) == 0);
  char byte = 0;
  CHECK(read(signal[0], &byte, 1) == 1);
  CHECK(fork_and_check(child_import, CAI_ERROR_NO_DRIVER, "forked while another thread loaded the library"));
  void *loaded = NULL;
  CHECK(pthread_join(loader, &loaded) == 0);
  CHECK((CaiStatus)(intptr_t)loaded == CAI_OK);
  unsetenv("FAKE_OPENCL_LOAD_SIGNAL_FD");
  close(signal[0]);
  close(signal[1]);

  /* After the load: the parent and a child both use it. */
  CHECK_STATUS(import_opencl(NULL), CAI_OK);
  CHECK(fork_and_check(child_import, CAI_OK, "forked after the load"));
  CHECK_STATUS(import_opencl(NULL), CAI_OK);
  return check_summary("test_fork_opencl (fake OpenCL library)");
}
