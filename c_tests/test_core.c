/* The pure half of libcai from C: struct layout, validation rules, layout queries, export
 * normalization, release and hostile input. Conformance rows are named where they apply. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cai.h"
#include "check.h"

/* The same numbers as the const asserts in src/array.rs: C and Rust cannot drift apart. */
_Static_assert(sizeof(void *) != 8 || sizeof(CaiArray) == 1160, "CaiArray size");
_Static_assert(offsetof(CaiArray, version) == 0, "version");
_Static_assert(offsetof(CaiArray, ndim) == 4, "ndim");
_Static_assert(offsetof(CaiArray, readonly) == 8, "readonly");
_Static_assert(offsetof(CaiArray, strides_given) == 12, "strides_given");
_Static_assert(offsetof(CaiArray, typestr) == 16, "typestr");
_Static_assert(offsetof(CaiArray, data) == 48, "data");
_Static_assert(offsetof(CaiArray, stream) == 56, "stream");
_Static_assert(offsetof(CaiArray, shape) == 64, "shape");
_Static_assert(offsetof(CaiArray, strides) == 576, "strides");
_Static_assert(sizeof(void *) != 8 || offsetof(CaiArray, mask) == 1088, "mask");
_Static_assert(sizeof(void *) != 8 || offsetof(CaiArray, descr) == 1096, "descr");
_Static_assert(sizeof(void *) != 8 || offsetof(CaiArray, descr_count) == 1104, "descr_count");
_Static_assert(sizeof(void *) != 8 || offsetof(CaiArray, owner) == 1112, "owner");
_Static_assert(sizeof(void *) != 8 || offsetof(CaiArray, release) == 1120, "release");
_Static_assert(sizeof(void *) != 8 || offsetof(CaiArray, reserved) == 1128, "reserved");
_Static_assert(sizeof(CaiField) == 104 && offsetof(CaiField, offset) == 96, "CaiField");
_Static_assert(CAI_MAX_NDIM == 64, "CAI_MAX_NDIM");

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
  test_move();
  test_bad_input();
  test_typestr_parse();
  return check_summary("c_tests/test_core");
}
