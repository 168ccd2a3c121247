/* fork() and the CUDA driver, on the fake driver (tests/fake_cuda, a test double): a child
 * forked before its parent touched the driver loads its own; a child forked while another
 * thread of its parent was loading it (cuInit held back 500 ms), or after the parent loaded
 * it, is refused at once with CAI_ERROR_NO_DRIVER naming the fork, where it used to wait
 * forever for the parent's unfinished load, or to use a driver state CUDA does not carry over.
 * Each child runs under a 10 s alarm, so a wait fails the test instead of hanging it. Its own
 * process: the driver is loaded once per process. */
#define _POSIX_C_SOURCE 200809L
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cai.h"
#include "check.h"
#include "fork_check.h"

static int (*init_calls)(void);

/* A child's check: cai_driver_status returns `expected` (a refusal naming the fork). */
static int child_driver_status(CaiStatus expected) {
  int32_t version = 0;
  CaiError error;
  memset(&error, 0, sizeof error);
  return child_exit_code("cai_driver_status", cai_driver_status(&version, &error), expected, &error);
}

static void *load_driver(void *unused) {
  (void)unused;
  int32_t version = 0;
  return (void *)(intptr_t)cai_driver_status(&version, NULL);
}

int main(void) {
  const char *path = getenv("CAI_CUDA_DRIVER");
  void *fake = path ? dlopen(path, RTLD_NOW | RTLD_LOCAL) : NULL;
  if (fake) *(void **)&init_calls = dlsym(fake, "fake_cuda_init_calls");
  if (!init_calls) {
    fprintf(stderr, "CAI_CUDA_DRIVER must name the fake driver (tests/fake_cuda)\n");
    return 1;
  }

  /* Before the parent touches the driver, a child loads its own. */
  CHECK(fork_and_check(child_driver_status, CAI_OK, "forked before any load"));
  CHECK(init_calls() == 0);

  /* While another thread's load is under way (its cuInit held back 500 ms). */
  setenv("FAKE_CUDA_INIT_DELAY_MS", "500", 1);
  pthread_t loader;
  CHECK(pthread_create(&loader, NULL, load_driver, NULL) == 0);
  while (init_calls() == 0) {
    struct timespec tick = {0, 1000000L};
    nanosleep(&tick, NULL);
  }
  CHECK(fork_and_check(child_driver_status, CAI_ERROR_NO_DRIVER, "forked while another thread loaded the driver"));
  void *loaded = NULL;
  CHECK(pthread_join(loader, &loaded) == 0);
  CHECK((CaiStatus)(intptr_t)loaded == CAI_OK);
  unsetenv("FAKE_CUDA_INIT_DELAY_MS");

  /* After the load: the parent goes on using its driver, a child is refused. */
  int32_t version = 0;
  CHECK_STATUS(cai_driver_status(&version, NULL), CAI_OK);
  CHECK(fork_and_check(child_driver_status, CAI_ERROR_NO_DRIVER, "forked after the load"));
  CHECK_STATUS(cai_driver_status(&version, NULL), CAI_OK);
  return check_summary("test_fork (fake driver)");
}
