/* libFuzzer target: arbitrary bytes as a DLPack tensor, taken by cai_from_dlpack (the versioned
 * struct: the rules checked before anything is written) and by cai_from_dlpack_legacy (the
 * same DLTensor: read into the struct, then validated), each the other's oracle, then exported
 * again by cai_to_dlpack and taken back. No driver (LLVMFuzzerInitialize points libcai at a
 * library that does not exist); CPU memory is allowed when the control byte says so.
 *
 * Input: [Head][shape: ndim int64][strides: ndim int64]; a short input reads as zeros. The
 * shape and strides arrays are allocated to exactly `ndim` entries (none for a rank outside 0
 * to 64), so AddressSanitizer reports any read past them.
 *
 * A finding: a crash or sanitizer report; CAI_ERROR_PANIC (libcai is built with overflow
 * checks, so an unchecked overflow panics) or a status outside the header's; the two takes
 * disagreeing (status, or any field of the array but the read-only flag, which the legacy
 * struct lacks); a taken array that cai_validate refuses; a deleter run other than once; an
 * exported array that does not come back as the same array. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cai.h"

#define REQUIRE(cond)     \
  do {                    \
    if (!(cond)) abort(); \
  } while (0)

/* The fixed part of an input. */
typedef struct {
  uint8_t control;  /* bit 0 allow_host, 1 NULL shape, 2 NULL strides, 3 raw major, 4 raw ndim */
  uint8_t code, bits;
  uint8_t device_choice; /* a known device type by its low 2 bits, else raw with bit 7 */
  uint16_t lanes;
  uint16_t unused;
  int32_t device_type, device_id;
  int32_t ndim;
  uint32_t major, minor;
  uint64_t flags;
  uint64_t data;
  uint64_t byte_offset;
} Head;

static int known_status(int32_t s) { return s >= CAI_OK && s <= CAI_ERROR_NOT_SUPPORTED && s != CAI_ERROR_PANIC; }

static int deleted_versioned, deleted_legacy;
static void delete_versioned(CaiDLManagedTensorVersioned *t) {
  (void)t;
  deleted_versioned++;
}
static void delete_legacy(CaiDLManagedTensor *t) {
  (void)t;
  deleted_legacy++;
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  setenv("CAI_CUDA_DRIVER", "/nonexistent/libcuda.so.1", 1);
  return 0;
}

/* `n` int64 values from the input at `*at` (zeros past its end), in a buffer of exactly `n`. */
static int64_t *take_values(const uint8_t *data, size_t size, size_t *at, int32_t n) {
  int64_t *values = malloc(n > 0 ? (size_t)n * sizeof(int64_t) : 1);
  REQUIRE(values != NULL);
  for (int32_t i = 0; i < n; i++) {
    int64_t v = 0;
    size_t left = *at < size ? size - *at : 0;
    memcpy(&v, data + *at, left < sizeof v ? left : sizeof v);
    *at += sizeof v;
    values[i] = v;
  }
  return values;
}

/* Every field two takes of one tensor share (all but owner, release and, for the legacy struct,
 * readonly), compared field by field: entries past ndim are never written, so not compared. */
static void same_array(const CaiArray *a, const CaiArray *b) {
  REQUIRE(a->abi_version == b->abi_version && a->memory == b->memory && a->version == b->version);
  REQUIRE(a->ndim == b->ndim && a->strides_given == b->strides_given && a->descr_count == b->descr_count);
  REQUIRE(a->data == b->data && a->stream == b->stream && a->mask == b->mask && a->descr == b->descr);
  REQUIRE(memcmp(a->typestr, b->typestr, sizeof a->typestr) == 0);
  for (int32_t i = 0; i < a->ndim; i++) {
    REQUIRE(a->shape[i] == b->shape[i]);
    REQUIRE(!a->strides_given || a->strides[i] == b->strides[i]);
  }
}

static void same_layout(const CaiArray *a, const CaiArray *b) {
  CaiLayout la, lb;
  CaiError e;
  REQUIRE(cai_layout(a, &la, &e) == CAI_OK && cai_layout(b, &lb, &e) == CAI_OK);
  REQUIRE(la.element_count == lb.element_count && la.nbytes == lb.nbytes);
  REQUIRE(la.extent_begin == lb.extent_begin && la.extent_end == lb.extent_end);
  REQUIRE(la.c_contiguous == lb.c_contiguous && la.f_contiguous == lb.f_contiguous);
}

/* The array taken from `tensor` exported again on the tensor's device and taken back: the same
 * array (strides now always given, the same layout), and one release runs the chain down to
 * the first tensor's deleter. Consumes `taken`. */
static void round_trip(CaiArray *taken, CaiDLDevice device, const CaiDLPackOptions *options) {
  CaiArray before = *taken;
  CaiDLManagedTensorVersioned *exported = NULL;
  CaiError e;
  /* No rule of the export refuses what an import took. */
  REQUIRE(cai_to_dlpack(taken, &device, &exported, &e) == CAI_OK);
  REQUIRE(taken->release == NULL && exported != NULL);
  REQUIRE(exported->dl_tensor.device.device_type == device.device_type);
  REQUIRE(((exported->flags & CAI_DLPACK_FLAG_READ_ONLY) != 0) == (before.readonly == 1));
  CaiArray back;
  memset(&back, 0, sizeof back);
  REQUIRE(cai_from_dlpack(exported, options, &back, &e) == CAI_OK);
  /* A 0-d tensor's strides are none, given or not. */
  REQUIRE(back.strides_given == (back.ndim > 0) && back.readonly == before.readonly && back.ndim == before.ndim);
  REQUIRE(back.data == before.data && memcmp(back.typestr, before.typestr, sizeof back.typestr) == 0);
  for (int32_t i = 0; i < back.ndim; i++) REQUIRE(back.shape[i] == before.shape[i]);
  if (before.strides_given)
    for (int32_t i = 0; i < back.ndim; i++) REQUIRE(back.strides[i] == before.strides[i]);
  same_layout(&back, &before);
  REQUIRE(cai_release(&back, &e) == CAI_OK);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  Head head;
  memset(&head, 0, sizeof head);
  memcpy(&head, data, size < sizeof head ? size : sizeof head);
  size_t at = sizeof head;

  int32_t ndim = (head.control & 16) ? head.ndim : (int32_t)((uint32_t)head.ndim % 9);
  int32_t entries = ndim >= 0 && ndim <= 64 ? ndim : 0;
  int64_t *shape = take_values(data, size, &at, entries);
  int64_t *strides = take_values(data, size, &at, entries);
  static const int32_t devices[4] = {CAI_DL_CPU, CAI_DL_CUDA, CAI_DL_CUDA_HOST, CAI_DL_CUDA_MANAGED};
  CaiDLTensor dl = {
      .data = (void *)(uintptr_t)head.data,
      .device = {(head.device_choice & 128) ? head.device_type : devices[head.device_choice & 3], head.device_id},
      .ndim = ndim,
      .dtype = {head.code, head.bits, head.lanes},
      .shape = (head.control & 2) ? NULL : shape,
      .strides = (head.control & 4) ? NULL : strides,
      .byte_offset = head.byte_offset,
  };
  CaiDLPackOptions options;
  memset(&options, 0, sizeof options);
  options.allow_host = head.control & 1;

  CaiDLManagedTensorVersioned versioned = {
      .version = {(head.control & 8) ? head.major : CAI_DLPACK_MAJOR_VERSION, head.minor},
      .manager_ctx = NULL,
      .deleter = delete_versioned,
      .flags = head.flags,
      .dl_tensor = dl,
  };
  CaiDLManagedTensor legacy = {.dl_tensor = dl, .manager_ctx = NULL, .deleter = delete_legacy};
  deleted_versioned = deleted_legacy = 0;

  CaiArray a, b;
  memset(&a, 0, sizeof a);
  memset(&b, 0, sizeof b);
  CaiError ea, eb;
  int32_t sa = cai_from_dlpack(&versioned, &options, &a, &ea);
  int32_t sb = cai_from_dlpack_legacy(&legacy, &options, &b, &eb);
  REQUIRE(known_status(sa) && known_status(sb));
  REQUIRE(deleted_versioned == (sa != CAI_OK) && deleted_legacy == (sb != CAI_OK));
  if (sa != CAI_OK) REQUIRE(ea.code == sa && memchr(ea.message, 0, sizeof ea.message) != NULL);
  if (sb != CAI_OK) REQUIRE(eb.code == sb && memchr(eb.message, 0, sizeof eb.message) != NULL);

  /* One verdict from the two readers, but for a sub-byte scalar the versioned tensor's flags say
     is padded (one element a byte): the legacy tensor has no flags, so its reader takes it as
     packed, DLPack's default, and refuses it. */
  int padded = (versioned.flags & CAI_DLPACK_FLAG_SUBBYTE_PADDED) != 0 &&
               ((uint32_t)dl.dtype.bits * dl.dtype.lanes) % 8 != 0;
  if (versioned.version.major == CAI_DLPACK_MAJOR_VERSION) {
    REQUIRE(sa == sb || (padded && sb == CAI_ERROR_INVALID_TYPESTR));
  } else {
    REQUIRE(sa == CAI_ERROR_ABI_VERSION);
  }
  if (sb == CAI_OK) {
    CaiError e;
    REQUIRE(cai_validate(&b, &e) == CAI_OK);
    REQUIRE(b.readonly == 0 && b.owner == (void *)&legacy);
    if (sa == CAI_OK) {
      REQUIRE(cai_validate(&a, &e) == CAI_OK);
      REQUIRE(a.readonly == ((head.flags & CAI_DLPACK_FLAG_READ_ONLY) != 0));
      same_array(&a, &b);
      same_layout(&a, &b);
      round_trip(&a, dl.device, &options);
      REQUIRE(deleted_versioned == 1);
    }
    REQUIRE(cai_release(&b, &e) == CAI_OK && deleted_legacy == 1);
  } else if (sa == CAI_OK) { /* a padded sub-byte scalar, taken by the versioned reader alone */
    CaiError e;
    REQUIRE(padded && cai_validate(&a, &e) == CAI_OK && a.dl_dtype.lanes == 1);
    round_trip(&a, dl.device, &options);
    REQUIRE(deleted_versioned == 1);
  }
  free(shape);
  free(strides);
  return 0;
}
