/* What the fork tests share: a child's check of what a call returned, as its exit code, and the
 * fork that runs it under a 10 s alarm, so that a child that waits fails the test instead of
 * hanging it. */
#ifndef CAI_C_TESTS_FORK_CHECK_H
#define CAI_C_TESTS_FORK_CHECK_H

#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cai.h"

/* 0 when `call` returned `expected` (a refusal naming the fork), else 2 after saying why. */
static int child_exit_code(const char *call, CaiStatus got, CaiStatus expected, const CaiError *error) {
  if (got != expected) {
    fprintf(stderr, "child: %s returned %s: %s\n", call, cai_status_string(got), error->message);
    return 2;
  }
  if (expected != CAI_OK && strstr(error->message, "forked") == NULL) {
    fprintf(stderr, "child: the refusal does not name the fork: %s\n", error->message);
    return 2;
  }
  return 0;
}

/* Forks a child that exits with child(expected) under a 10 s alarm; true when it exited 0. */
static int fork_and_check(int (*child)(CaiStatus), CaiStatus expected, const char *when) {
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    alarm(10);
    _exit(child(expected));
  }
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) != pid) return 0;
  if (WIFSIGNALED(status)) fprintf(stderr, "%s: the child was killed by signal %d (it waited)\n", when, WTERMSIG(status));
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

#endif
