/* A tiny test harness for the C tests: CHECK counts, and check_summary prints the closing
 * "N passed, N failed" line that the test runners read. */
#ifndef CAI_C_TESTS_CHECK_H
#define CAI_C_TESTS_CHECK_H

#include <stdio.h>
#include <string.h>

static int checks_passed = 0;
static int checks_failed = 0;

#define CHECK(cond)                                                              \
  do {                                                                           \
    if (cond) {                                                                  \
      checks_passed++;                                                           \
    } else {                                                                     \
      checks_failed++;                                                           \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);   \
    }                                                                            \
  } while (0)

#define CHECK_STATUS(call, expected)                                             \
  do {                                                                           \
    int32_t got_ = (call);                                                       \
    if (got_ == (expected)) {                                                    \
      checks_passed++;                                                           \
    } else {                                                                     \
      checks_failed++;                                                           \
      fprintf(stderr, "%s:%d: %s returned %s, expected %s\n", __FILE__, __LINE__, \
              #call, cai_status_string(got_), cai_status_string(expected));      \
    }                                                                            \
  } while (0)

static int check_summary(const char *suite) {
  printf("%s: %d passed, %d failed\n", suite, checks_passed, checks_failed);
  return checks_failed == 0 ? 0 : 1;
}

#endif
