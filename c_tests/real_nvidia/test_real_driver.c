/* libcai from C on NVIDIA's real libcuda.so.1 (Debian's non-free libcuda1, fetched by
 * scripts/nvidia-driver.sh) on a machine without a GPU: cuInit answers CUDA_ERROR_NO_DEVICE.
 * What needs a device fails with CAI_ERROR_NO_DRIVER, driver_result 100 and a message that says
 * how to go on; what does not (CAI_SYNC_NONE, the default pointer check, DLPack with a given
 * device) succeeds. Run with CAI_CUDA_DRIVER naming that library. */
#include <stdint.h>
#include <string.h>

#include "cai.h"
#include "check.h"

static int says_no_device(const CaiError *e) {
  return e->driver_result == 100 && strstr(e->message, "CUDA_ERROR_NO_DEVICE (100)") &&
         strstr(e->message, "found no CUDA device") && strstr(e->message, "CAI_SYNC_NONE") &&
         strstr(e->message, "CAI_POINTER_CHECK_NEVER");
}

static int releases = 0;
static void count_release(CaiArray *array) {
  (void)array;
  releases++;
}

static CaiArray array_on_stream(uint64_t stream) {
  CaiArray a;
  memset(&a, 0, sizeof a);
  a.version = 3;
  a.ndim = 2;
  a.shape[0] = 4;
  a.shape[1] = 3;
  strcpy(a.typestr, "<f4");
  a.data = 0x7f0000001000u;
  a.stream = stream;
  return a;
}

int main(void) {
  CaiError e;
  int32_t version = -1;
  CHECK_STATUS(cai_driver_status(&version, &e), CAI_ERROR_NO_DRIVER);
  CHECK(says_no_device(&e) && version == -1);
  printf("%s\n", e.message);

  CaiPointerInfo info;
  CaiArray a = array_on_stream(0x5000);
  CaiImportOptions options;
  memset(&options, 0, sizeof options);
  CHECK_STATUS(cai_import(&a, &options, &info, &e), CAI_ERROR_NO_DRIVER); /* the default sync */
  CHECK(says_no_device(&e));
  options.sync_mode = CAI_SYNC_NONE;
  CHECK_STATUS(cai_import(&a, &options, &info, &e), CAI_OK); /* default check: skipped */
  CHECK(info.checked == 0);
  options.pointer_check = CAI_POINTER_CHECK_ALWAYS;
  CHECK_STATUS(cai_import(&a, &options, &info, &e), CAI_ERROR_NO_DRIVER);
  CHECK(says_no_device(&e));
  options.pointer_check = CAI_POINTER_CHECK_NEVER;
  CHECK_STATUS(cai_import(&a, &options, &info, &e), CAI_OK);

  CaiSyncOptions sync;
  memset(&sync, 0, sizeof sync);
  CHECK_STATUS(cai_sync(&a, &sync, &e), CAI_ERROR_NO_DRIVER);
  CHECK(says_no_device(&e));
  CHECK_STATUS(cai_pointer_info(a.data, &info, &e), CAI_ERROR_NO_DRIVER);
  CHECK(says_no_device(&e));

  /* A producer joining its work streams needs the driver; one without them does not. */
  uint64_t work[2] = {0x7000, 0x7100};
  CaiExportOptions export_options;
  memset(&export_options, 0, sizeof export_options);
  export_options.work_streams = work;
  export_options.work_stream_count = 2;
  CaiArray exported = array_on_stream(0);
  CHECK_STATUS(cai_export(&exported, &export_options, &e), CAI_ERROR_NO_DRIVER);
  CHECK(says_no_device(&e));
  CHECK_STATUS(cai_export(&exported, NULL, &e), CAI_OK);

  /* DLPack: asking the driver where the data is fails; a given device does not ask. */
  CaiArray b = array_on_stream(0);
  CaiDLManagedTensorVersioned *tensor = NULL;
  CHECK_STATUS(cai_to_dlpack(&b, NULL, &tensor, &e), CAI_ERROR_NO_DRIVER);
  CHECK(says_no_device(&e) && tensor == NULL);
  CaiDLDevice device = {CAI_DL_CUDA, 0};
  CHECK_STATUS(cai_to_dlpack(&b, &device, &tensor, &e), CAI_OK);
  CaiArray back;
  CHECK_STATUS(cai_from_dlpack(tensor, NULL, &back, &e), CAI_OK);
  CHECK(back.data == b.data && back.shape[1] == 3);
  CHECK_STATUS(cai_release(&back, &e), CAI_OK);

  /* Releasing after a stream (row 97): with nothing queued the drain needs no driver; a release
     after a CUstream needs the driver, fails with its answer and takes nothing; stream 0 and a
     borrowed array need none. */
  uint64_t left = 99;
  CHECK_STATUS(cai_release_pending(CAI_PENDING_WAIT, &left, &e), CAI_OK);
  CHECK(left == 0);
  CaiArray owned = array_on_stream(0);
  owned.release = count_release;
  CHECK_STATUS(cai_release_after(&owned, 0x5000, &e), CAI_ERROR_NO_DRIVER);
  CHECK(e.driver_result == 100 && strstr(e.message, "CUDA_ERROR_NO_DEVICE (100)") && strstr(e.message, "found no CUDA device") &&
        strstr(e.message, "queued nothing, the array is still yours"));
  printf("%s\n", e.message);
  CHECK(owned.release == count_release && releases == 0);
  CHECK_STATUS(cai_release_pending(CAI_PENDING_POLL, &left, &e), CAI_OK);
  CHECK(left == 0);
  CHECK_STATUS(cai_release_after(&owned, CAI_STREAM_NONE, &e), CAI_OK);
  CHECK(releases == 1 && owned.release == NULL);
  CaiArray borrowed = array_on_stream(0);
  CHECK_STATUS(cai_release_after(&borrowed, 0x5000, &e), CAI_OK);
  return check_summary("C on the real NVIDIA driver, no GPU");
}
