/* The pure half of libcai from C: struct layout, validation rules, layout queries, export
 * normalization, release and hostile input. Conformance rows are named where they apply. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cai.h"
#include "check.h"

/* Every repr(C) type, with the same numbers as the const asserts in src/abi.rs: C and Rust
 * cannot drift apart. Offsets of the stable prefix (abi_version, owner, release) never change. */
_Static_assert(sizeof(void *) != 8 || offsetof(CaiArray, abi_version) == 0, "CaiArray.abi_version");
_Static_assert(sizeof(void *) != 8 || offsetof(CaiArray, version) == 4, "CaiArray.version");
_Static_assert(sizeof(void *) != 8 || offsetof(CaiArray, owner) == 8, "CaiArray.owner");
_Static_assert(sizeof(void *) != 8 || offsetof(CaiArray, release) == 16, "CaiArray.release");
_Static_assert(sizeof(void *) != 8 || offsetof(CaiArray, ndim) == 24, "CaiArray.ndim");
_Static_assert(sizeof(void *) != 8 || offsetof(CaiArray, readonly) == 28, "CaiArray.readonly");
_Static_assert(sizeof(void *) != 8 || offsetof(CaiArray, strides_given) == 32, "CaiArray.strides_given");
_Static_assert(sizeof(void *) != 8 || offsetof(CaiArray, descr_count) == 36, "CaiArray.descr_count");
_Static_assert(sizeof(void *) != 8 || offsetof(CaiArray, data) == 40, "CaiArray.data");
_Static_assert(sizeof(void *) != 8 || offsetof(CaiArray, stream) == 48, "CaiArray.stream");
_Static_assert(sizeof(void *) != 8 || offsetof(CaiArray, typestr) == 56, "CaiArray.typestr");
_Static_assert(sizeof(void *) != 8 || offsetof(CaiArray, shape) == 88, "CaiArray.shape");
_Static_assert(sizeof(void *) != 8 || offsetof(CaiArray, strides) == 600, "CaiArray.strides");
_Static_assert(sizeof(void *) != 8 || offsetof(CaiArray, mask) == 1112, "CaiArray.mask");
_Static_assert(sizeof(void *) != 8 || offsetof(CaiArray, descr) == 1120, "CaiArray.descr");
_Static_assert(sizeof(void *) != 8 || offsetof(CaiArray, memory) == 1128, "CaiArray.memory");
_Static_assert(sizeof(void *) != 8 || offsetof(CaiArray, stream_kind) == 1132, "CaiArray.stream_kind");
_Static_assert(sizeof(void *) != 8 || offsetof(CaiArray, byte_offset) == 1136, "CaiArray.byte_offset");
_Static_assert(sizeof(void *) != 8 || offsetof(CaiArray, dl_dtype) == 1144, "CaiArray.dl_dtype");
_Static_assert(sizeof(void *) != 8 || offsetof(CaiArray, reserved_half) == 1148, "CaiArray.reserved_half");
_Static_assert(sizeof(void *) != 8 || offsetof(CaiArray, reserved) == 1152, "CaiArray.reserved");
_Static_assert(sizeof(void *) != 8 || sizeof(CaiArray) == 1160, "sizeof(CaiArray)");
_Static_assert(sizeof(void *) != 8 || offsetof(CaiField, name) == 0, "CaiField.name");
_Static_assert(sizeof(void *) != 8 || offsetof(CaiField, typestr) == 64, "CaiField.typestr");
_Static_assert(sizeof(void *) != 8 || offsetof(CaiField, offset) == 96, "CaiField.offset");
_Static_assert(sizeof(void *) != 8 || sizeof(CaiField) == 104, "sizeof(CaiField)");
_Static_assert(sizeof(void *) != 8 || offsetof(CaiDtype, itemsize) == 0, "CaiDtype.itemsize");
_Static_assert(sizeof(void *) != 8 || offsetof(CaiDtype, kind) == 8, "CaiDtype.kind");
_Static_assert(sizeof(void *) != 8 || offsetof(CaiDtype, byteorder) == 9, "CaiDtype.byteorder");
_Static_assert(sizeof(void *) != 8 || sizeof(CaiDtype) == 16, "sizeof(CaiDtype)");
_Static_assert(sizeof(void *) != 8 || offsetof(CaiLayout, element_count) == 0, "CaiLayout.element_count");
_Static_assert(sizeof(void *) != 8 || offsetof(CaiLayout, nbytes) == 8, "CaiLayout.nbytes");
_Static_assert(sizeof(void *) != 8 || offsetof(CaiLayout, extent_begin) == 16, "CaiLayout.extent_begin");
_Static_assert(sizeof(void *) != 8 || offsetof(CaiLayout, extent_end) == 24, "CaiLayout.extent_end");
_Static_assert(sizeof(void *) != 8 || offsetof(CaiLayout, c_contiguous) == 32, "CaiLayout.c_contiguous");
_Static_assert(sizeof(void *) != 8 || offsetof(CaiLayout, f_contiguous) == 36, "CaiLayout.f_contiguous");
_Static_assert(sizeof(void *) != 8 || offsetof(CaiLayout, strides_itemsize_aligned) == 40, "CaiLayout.strides_itemsize_aligned");
_Static_assert(sizeof(void *) != 8 || offsetof(CaiLayout, reserved) == 44, "CaiLayout.reserved");
_Static_assert(sizeof(void *) != 8 || sizeof(CaiLayout) == 64, "sizeof(CaiLayout)");
_Static_assert(sizeof(void *) != 8 || offsetof(CaiError, code) == 0, "CaiError.code");
_Static_assert(sizeof(void *) != 8 || offsetof(CaiError, driver_result) == 4, "CaiError.driver_result");
_Static_assert(sizeof(void *) != 8 || offsetof(CaiError, message) == 8, "CaiError.message");
_Static_assert(sizeof(void *) != 8 || sizeof(CaiError) == 520, "sizeof(CaiError)");
_Static_assert(sizeof(void *) != 8 || offsetof(CaiPointerInfo, device_pointer) == 0, "CaiPointerInfo.device_pointer");
_Static_assert(sizeof(void *) != 8 || offsetof(CaiPointerInfo, allocation_base) == 8, "CaiPointerInfo.allocation_base");
_Static_assert(sizeof(void *) != 8 || offsetof(CaiPointerInfo, allocation_size) == 16, "CaiPointerInfo.allocation_size");
_Static_assert(sizeof(void *) != 8 || offsetof(CaiPointerInfo, context) == 24, "CaiPointerInfo.context");
_Static_assert(sizeof(void *) != 8 || offsetof(CaiPointerInfo, device_ordinal) == 32, "CaiPointerInfo.device_ordinal");
_Static_assert(sizeof(void *) != 8 || offsetof(CaiPointerInfo, memory_type) == 36, "CaiPointerInfo.memory_type");
_Static_assert(sizeof(void *) != 8 || offsetof(CaiPointerInfo, is_managed) == 40, "CaiPointerInfo.is_managed");
_Static_assert(sizeof(void *) != 8 || offsetof(CaiPointerInfo, checked) == 44, "CaiPointerInfo.checked");
_Static_assert(sizeof(void *) != 8 || offsetof(CaiPointerInfo, reserved) == 48, "CaiPointerInfo.reserved");
_Static_assert(sizeof(void *) != 8 || sizeof(CaiPointerInfo) == 64, "sizeof(CaiPointerInfo)");
_Static_assert(sizeof(void *) != 8 || offsetof(CaiImportOptions, consumer_stream) == 0, "CaiImportOptions.consumer_stream");
_Static_assert(sizeof(void *) != 8 || offsetof(CaiImportOptions, sync_mode) == 8, "CaiImportOptions.sync_mode");
_Static_assert(sizeof(void *) != 8 || offsetof(CaiImportOptions, pointer_check) == 12, "CaiImportOptions.pointer_check");
_Static_assert(sizeof(void *) != 8 || offsetof(CaiImportOptions, writable) == 16, "CaiImportOptions.writable");
_Static_assert(sizeof(void *) != 8 || offsetof(CaiImportOptions, native_only) == 20, "CaiImportOptions.native_only");
_Static_assert(sizeof(void *) != 8 || offsetof(CaiImportOptions, allow_host) == 24, "CaiImportOptions.allow_host");
_Static_assert(sizeof(void *) != 8 || offsetof(CaiImportOptions, reserved) == 28, "CaiImportOptions.reserved");
_Static_assert(sizeof(void *) != 8 || sizeof(CaiImportOptions) == 48, "sizeof(CaiImportOptions)");
_Static_assert(sizeof(void *) != 8 || offsetof(CaiExportOptions, work_streams) == 0, "CaiExportOptions.work_streams");
_Static_assert(sizeof(void *) != 8 || offsetof(CaiExportOptions, work_stream_count) == 8, "CaiExportOptions.work_stream_count");
_Static_assert(sizeof(void *) != 8 || offsetof(CaiExportOptions, version) == 16, "CaiExportOptions.version");
_Static_assert(sizeof(void *) != 8 || offsetof(CaiExportOptions, check_pointer) == 20, "CaiExportOptions.check_pointer");
_Static_assert(sizeof(void *) != 8 || offsetof(CaiExportOptions, per_thread_default_stream) == 24, "CaiExportOptions.per_thread_default_stream");
_Static_assert(sizeof(void *) != 8 || offsetof(CaiExportOptions, reserved) == 28, "CaiExportOptions.reserved");
_Static_assert(sizeof(void *) != 8 || sizeof(CaiExportOptions) == 48, "sizeof(CaiExportOptions)");
_Static_assert(CAI_ABI_VERSION == 0, "CAI_ABI_VERSION");
_Static_assert(CAI_MAX_NDIM == 64, "CAI_MAX_NDIM");
/* Every reserved tail is sized by its named constant. */
_Static_assert(sizeof(void *) != 8 || sizeof(CaiSyncOptions) == 32, "sizeof(CaiSyncOptions)");
_Static_assert(sizeof(((CaiSyncOptions *)0)->reserved) == CAI_SYNC_OPTIONS_RESERVED_WORDS * 4, "sync reserved");
_Static_assert(sizeof(((CaiImportOptions *)0)->reserved) == CAI_IMPORT_OPTIONS_RESERVED_WORDS * 4, "import reserved");
_Static_assert(sizeof(((CaiExportOptions *)0)->reserved) == CAI_EXPORT_OPTIONS_RESERVED_WORDS * 4, "export reserved");
_Static_assert(sizeof(((CaiDLPackOptions *)0)->reserved) == CAI_DLPACK_OPTIONS_RESERVED_WORDS * 4, "dlpack reserved");

static CaiArray make(int32_t ndim, const int64_t *shape, const char *typestr) {
  CaiArray a;
  memset(&a, 0, sizeof a);
  a.version = 3;
  a.ndim = ndim;
  for (int32_t i = 0; i < ndim; i++) a.shape[i] = shape[i];
  strcpy(a.typestr, typestr);
  a.data = 0x10000;
  return a;
}

static int message_has(const CaiError *e, const char *part) { return strstr(e->message, part) != NULL; }

static void test_accepts_and_rejects(void) {
  const int64_t shape4[] = {4};
  const int64_t shape23[] = {2, 3};
  CaiError e;
  CaiArray a = make(1, shape4, "<f4");
  CHECK_STATUS(cai_validate(&a, &e), CAI_OK); /* row 1 */

  a.version = 4; /* row 4 */
  CHECK_STATUS(cai_validate(&a, &e), CAI_ERROR_INVALID_VERSION);
  CHECK(e.code == CAI_ERROR_INVALID_VERSION && message_has(&e, "version 4"));

  a = make(1, shape4, "<f4");
  a.shape[0] = -1; /* row 10 */
  CHECK_STATUS(cai_validate(&a, &e), CAI_ERROR_INVALID_SHAPE);
  CHECK(message_has(&e, "shape[0] is -1"));

  a = make(1, shape4, "<f4");
  a.ndim = 65; /* row 11 */
  CHECK_STATUS(cai_validate(&a, &e), CAI_ERROR_INVALID_SHAPE);
  CHECK(message_has(&e, "CAI_MAX_NDIM"));
  a.ndim = -1;
  CHECK_STATUS(cai_validate(&a, &e), CAI_ERROR_INVALID_SHAPE);

  a = make(1, shape4, "<f4");
  a.data = 0; /* row 22 */
  CHECK_STATUS(cai_validate(&a, &e), CAI_ERROR_INVALID_DATA);
  a.shape[0] = 0; /* row 20 */
  CHECK_STATUS(cai_validate(&a, &e), CAI_OK);

  a = make(1, shape4, "|O8"); /* row 31 */
  CHECK_STATUS(cai_validate(&a, &e), CAI_ERROR_INVALID_TYPESTR);
  CHECK(message_has(&e, "\"|O8\""));
  a = make(1, shape4, "<f");
  CHECK_STATUS(cai_validate(&a, &e), CAI_ERROR_INVALID_TYPESTR);

  a = make(1, shape4, ">i4"); /* row 29 */
  CHECK_STATUS(cai_validate(&a, &e), CAI_OK);

  a = make(2, shape23, "<f4"); /* row 18 */
  a.shape[0] = INT64_C(1) << 40;
  a.shape[1] = INT64_C(1) << 40;
  CHECK_STATUS(cai_validate(&a, &e), CAI_ERROR_OVERFLOW);
}

static void test_layout(void) {
  const int64_t shape34[] = {3, 4};
  CaiLayout l;
  CaiArray a = make(2, shape34, "<f4");
  a.strides_given = 1;
  a.strides[0] = -16; /* row 15: a[::-1, :] */
  a.strides[1] = 4;
  CHECK_STATUS(cai_layout(&a, &l, NULL), CAI_OK);
  CHECK(l.element_count == 12 && l.nbytes == 48);
  CHECK(l.extent_begin == -32 && l.extent_end == 16);
  CHECK(!l.c_contiguous && !l.f_contiguous);

  a.strides[0] = 4; /* row 13: F order */
  a.strides[1] = 12;
  CHECK_STATUS(cai_layout(&a, &l, NULL), CAI_OK);
  CHECK(!l.c_contiguous && l.f_contiguous);

  a.strides[0] = 16; /* row 16 */
  a.strides[1] = 6;
  CHECK_STATUS(cai_layout(&a, &l, NULL), CAI_OK);
  CHECK(!l.strides_itemsize_aligned);
}

static void test_export(void) {
  const int64_t shape23[] = {2, 3};
  const int64_t empty[] = {0, 3};
  CaiArray a = make(2, shape23, "f4");
  a.strides_given = 1; /* row 12: explicit C strides export as None */
  a.strides[0] = 12;
  a.strides[1] = 4;
  a.readonly = 1;
  CHECK_STATUS(cai_export(&a, NULL, NULL), CAI_OK);
  CHECK(a.strides_given == 0 && a.strides[0] == 0);
  CHECK(a.version == 3 && a.readonly == 1); /* row 38 */
  CHECK(a.typestr[0] == '<' || a.typestr[0] == '>');

  a = make(2, empty, "<f4"); /* row 21 */
  CHECK_STATUS(cai_export(&a, NULL, NULL), CAI_OK);
  CHECK(a.data == 0);

  CaiExportOptions v2;
  memset(&v2, 0, sizeof v2);
  v2.version = 2; /* row 48 */
  a = make(2, shape23, "<f4");
  a.stream = CAI_STREAM_LEGACY;
  CHECK_STATUS(cai_export(&a, &v2, NULL), CAI_OK);
  CHECK(a.version == 2 && a.stream == CAI_STREAM_NONE);
}

static void test_descr_and_mask(void) {
  const int64_t shape2[] = {2};
  const int64_t shape3[] = {3};
  CaiField fields[2];
  memset(fields, 0, sizeof fields);
  strcpy(fields[0].name, "x");
  strcpy(fields[0].typestr, "<f4");
  fields[0].offset = 0;
  strcpy(fields[1].name, "n");
  strcpy(fields[1].typestr, "<i8");
  fields[1].offset = 4;
  CaiArray a = make(1, shape2, "|V12"); /* row 32 */
  a.descr = fields;
  a.descr_count = 2;
  CHECK_STATUS(cai_validate(&a, NULL), CAI_OK);
  a.descr_count = 1;
  CHECK_STATUS(cai_validate(&a, NULL), CAI_ERROR_INVALID_DESCR);

  CaiArray mask = make(1, shape2, "|b1"); /* row 35 */
  a = make(1, shape2, "<f4");
  a.mask = &mask;
  CHECK_STATUS(cai_validate(&a, NULL), CAI_OK);
  CaiArray wrong = make(1, shape3, "|b1"); /* row 36 */
  a.mask = &wrong;
  CHECK_STATUS(cai_validate(&a, NULL), CAI_ERROR_INVALID_MASK);
  a.mask = &a;
  CHECK_STATUS(cai_validate(&a, NULL), CAI_ERROR_INVALID_MASK);
}

static int releases = 0;
static void release_counter(struct CaiArray *array) {
  releases++;
  free(array->owner);
}

static void test_release(void) {
  const int64_t shape2[] = {2};
  CaiArray a = make(1, shape2, "<f4"); /* row 50 */
  a.owner = malloc(16);
  a.release = release_counter;
  CHECK_STATUS(cai_release(&a, NULL), CAI_OK);
  CHECK_STATUS(cai_release(&a, NULL), CAI_OK);
  CHECK(releases == 1 && a.release == NULL);
}

/* A later layout (abi_version above CAI_ABI_VERSION) is refused by every reader, yet its
 * owner and release sit where they always do: it can still be released. */
static void test_newer_abi_is_only_released(void) {
  const int64_t shape2[] = {2};
  CaiArray a = make(1, shape2, "<f4");
  a.abi_version = CAI_ABI_VERSION + 1;
  a.owner = malloc(16);
  a.release = release_counter;
  CaiError e;
  CHECK_STATUS(cai_validate(&a, &e), CAI_ERROR_ABI_VERSION);
  CHECK(message_has(&e, "abi_version 1"));
  CaiLayout layout;
  CHECK_STATUS(cai_layout(&a, &layout, NULL), CAI_ERROR_ABI_VERSION);
  CHECK_STATUS(cai_import(&a, NULL, NULL, NULL), CAI_ERROR_ABI_VERSION);
  int before = releases;
  CHECK_STATUS(cai_release(&a, NULL), CAI_OK);
  CHECK(releases == before + 1 && a.release == NULL);
}

static void test_move(void) {
  const int64_t shape2[] = {2};
  CaiError e;
  CaiArray src = make(1, shape2, "<f4");
  src.owner = malloc(16);
  src.release = release_counter;
  CaiArray dst;
  memset(&dst, 0, sizeof dst);
  int before = releases;
  CHECK_STATUS(cai_move(&dst, &src, NULL), CAI_OK);
  CHECK(src.release == NULL && dst.release == release_counter && dst.owner == src.owner);
  CHECK(dst.shape[0] == 2 && strcmp(dst.typestr, "<f4") == 0);
  CHECK_STATUS(cai_release(&src, NULL), CAI_OK);
  CHECK(releases == before); /* the moved-from array owns nothing */

  CaiArray other = make(1, shape2, "<f4");
  other.owner = malloc(16);
  other.release = release_counter;
  CHECK_STATUS(cai_move(&dst, &other, &e), CAI_ERROR_INVALID_ARGUMENT); /* dst still owns */
  CHECK(message_has(&e, "dst still owns") && other.release == release_counter && dst.owner != other.owner);
  CHECK_STATUS(cai_move(&dst, &dst, NULL), CAI_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(cai_move(NULL, &other, NULL), CAI_ERROR_NULL_ARGUMENT);
  CHECK_STATUS(cai_move(&src, NULL, NULL), CAI_ERROR_NULL_ARGUMENT);
  CHECK_STATUS(cai_release(&dst, NULL), CAI_OK);
  CHECK_STATUS(cai_release(&other, NULL), CAI_OK);
  CHECK(releases == before + 2);
}

static void test_bad_input(void) {
  const int64_t shape2[] = {2};
  CaiError e;
  CaiDtype d;
  CaiLayout l;
  CHECK_STATUS(cai_validate(NULL, &e), CAI_ERROR_NULL_ARGUMENT);
  CHECK(message_has(&e, "array is NULL"));
  CHECK_STATUS(cai_layout(NULL, &l, NULL), CAI_ERROR_NULL_ARGUMENT);
  CHECK_STATUS(cai_export(NULL, NULL, NULL), CAI_ERROR_NULL_ARGUMENT);
  CHECK_STATUS(cai_release(NULL, NULL), CAI_ERROR_NULL_ARGUMENT);
  CHECK_STATUS(cai_typestr_parse(NULL, &d, NULL), CAI_ERROR_NULL_ARGUMENT);

  CaiArray a = make(1, shape2, "<f4");
  memset(a.typestr, 'f', sizeof a.typestr); /* no NUL anywhere in the buffer */
  CHECK_STATUS(cai_validate(&a, &e), CAI_ERROR_INVALID_TYPESTR);
  CHECK(message_has(&e, "NUL"));

  a = make(1, shape2, "<f4");
  a.reserved[0] = 0xdeadbeef;
  CHECK_STATUS(cai_validate(&a, NULL), CAI_ERROR_INVALID_ARGUMENT);
  a = make(1, shape2, "<f4");
  a.readonly = 7;
  CHECK_STATUS(cai_validate(&a, NULL), CAI_ERROR_INVALID_DATA);

  CHECK(strcmp(cai_status_string(CAI_ERROR_PANIC), "CAI_ERROR_PANIC") == 0);
  CHECK(strcmp(cai_status_string(-3), "CAI_ERROR_UNKNOWN") == 0);
  CHECK(strlen(cai_library_version()) >= 5);
  /* The header's version macros are the library's version, and usable in #if. */
  char version[32];
  snprintf(version, sizeof version, "%d.%d.%d", CAI_VERSION_MAJOR, CAI_VERSION_MINOR, CAI_VERSION_PATCH);
  CHECK(strcmp(version, cai_library_version()) == 0);
#if CAI_VERSION_MAJOR < 0
#error "CAI_VERSION_MAJOR is not a preprocessor number"
#endif
  CaiStatus status = cai_validate(&a, NULL); /* every status-returning function returns a CaiStatus */
  CHECK(status == CAI_ERROR_INVALID_DATA);
}

/* cai_sync takes its options as a struct that can grow: NULL is the defaults, reserved words
   must be zero. A NULL-stream array needs no driver. */
static void test_sync_options(void) {
  const int64_t shape[] = {4};
  CaiArray a = make(1, shape, "<f4");
  CaiSyncOptions options;
  memset(&options, 0, sizeof options);
  CaiError e;
  CHECK_STATUS(cai_sync(NULL, &options, &e), CAI_ERROR_NULL_ARGUMENT);
  CHECK_STATUS(cai_sync(&a, NULL, &e), CAI_OK);
  CHECK_STATUS(cai_sync(&a, &options, &e), CAI_OK);
  options.reserved[4] = 1;
  CHECK_STATUS(cai_sync(&a, &options, &e), CAI_ERROR_INVALID_ARGUMENT);
  CHECK(message_has(&e, "CaiSyncOptions.reserved"));
  options.reserved[4] = 0;
  options.sync_mode = 9;
  CHECK_STATUS(cai_sync(&a, &options, &e), CAI_ERROR_INVALID_ARGUMENT);
}

static void test_typestr_parse(void) {
  CaiDtype d;
  CHECK_STATUS(cai_typestr_parse("<U3", &d, NULL), CAI_OK); /* row 30 */
  CHECK(d.itemsize == 12 && d.kind == 'U' && d.byteorder == '<');
  CHECK_STATUS(cai_typestr_parse(">b1", &d, NULL), CAI_OK);
  CHECK(d.itemsize == 1 && d.kind == 'b' && d.byteorder == '|');
}

int main(void) {
  test_accepts_and_rejects();
  test_layout();
  test_export();
  test_descr_and_mask();
  test_release();
  test_newer_abi_is_only_released();
  test_move();
  test_bad_input();
  test_typestr_parse();
  test_sync_options();
  return check_summary("c_tests/test_core");
}
