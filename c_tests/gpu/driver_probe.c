/* scripts/gpu-check.sh's first step: can libcai use a CUDA device here? Exit 0: yes; 77: the
 * driver loads but cuInit finds no device (CUDA_ERROR_NO_DEVICE); 1: no usable driver. The
 * driver's message goes to stderr. */
#include <stdio.h>

#include "cai.h"

int main(void) {
  CaiError e;
  int32_t version = 0;
  if (cai_driver_status(&version, &e) == CAI_OK) {
    printf("CUDA driver %d.%d\n", version / 1000, version % 1000 / 10);
    return 0;
  }
  fprintf(stderr, "%s\n", e.message);
  return e.driver_result == 100 ? 77 : 1;
}
