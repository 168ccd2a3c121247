// libcai for compiled Python extensions (C, C++, pybind11, nanobind, Cython): take any array
// the `cai` package takes from a PyObject*, hand a CaiArray back to Python, and call every
// function of cai.h by its own name, all through a table of function pointers the installed
// `cai` package publishes (the capsule cai._native._C_API). No libcai.so and no link flag:
// build with -I$(python -c "import cai; print(cai.get_include())").
//
//   static PyObject *f(PyObject *self, PyObject *arg) {
//     CaiArray a; CaiError e;
//     if (cai_python_from_object(arg, NULL, &a, &e) != CAI_OK) return NULL;  // exception set
//     ... a.data, a.shape, a.typestr ...
//     cai_release(&a, NULL);
//     Py_RETURN_NONE;
//   }
//   PyMODINIT_FUNC PyInit_m(void) { if (cai_python_import() < 0) return NULL; ... }
//
// In a hot path, cai_python_view(arg, NULL, &a, &e) reads the same struct borrowed (no
// reference, no allocation, nothing to release; valid while `arg` is held and no Python code
// runs), and refuses what it cannot borrow: see the table's member. cai_python_view_or_own
// borrows where it can and imports the rest owning (`out->release` says which).
//
// Every function here needs the caller attached to the main interpreter (holding the GIL), but
// for the release callbacks of what they write, which run on any thread; in a subinterpreter,
// importing the table raises ImportError, and an extension imported in the main interpreter
// and used in a subinterpreter is refused there (CAI_ERROR_NOT_SUPPORTED and a RuntimeError;
// a release run there leaks what it held). Call cai_python_import()
// in the module's init: a module that forgot is given the table on its first call instead, or
// an ImportError, never a crash. In a program split over
// several C files, define CAI_PYTHON_TABLE_EXTERN in every file and define the table pointer
// once: `const CaiPythonApi *cai_python_api;`. C++17 needs nothing: the pointer is one inline
// variable. Include this header before any other libcai header, in every file of the
// extension: cai.h's names are then macros that call through the table.
#ifndef CAI_PYTHON_H
#define CAI_PYTHON_H

#include <Python.h>

#include "cai.h"

// The table's version: a major changes its layout, a minor appends members. An extension
// accepts a table of its own major and of its minor or later.
#define CAI_PYTHON_API_MAJOR 1
#define CAI_PYTHON_API_MINOR 5
// The capsule holding the table (PyCapsule_Import's dotted form).
#define CAI_PYTHON_CAPSULE_NAME "cai._native._C_API"

#ifdef __cplusplus
extern "C" {
#endif

// The C-level CUDA Array Interface (docs/c-level-cai.md, version 1.0): a producer type offers
// a table of C functions as the type attribute CAI_C_API_ATTRIBUTE, a PyCapsule named
// CAI_C_API_CAPSULE_NAME; a consumer looks it up once per type and calls `view` per object.
#define CAI_C_API_ATTRIBUTE    "__cuda_array_interface_c_api__"
#define CAI_C_API_CAPSULE_NAME "cuda_array_interface_c_api"
#define CAI_C_API_MAJOR 1
#define CAI_C_API_MINOR 1

typedef struct CaiCApiVersion { uint32_t major, minor; } CaiCApiVersion;

/* Stable across every version: a consumer reads it before anything else. */
typedef struct CaiCApiHeader {
  CaiCApiVersion version;                /* of the table this header starts */
  const struct CaiCApiHeader *prev_api;  /* a table of an older major, or NULL */
} CaiCApiHeader;

/* What the consumer asks. NULL means all zero. */
typedef struct CaiRequest {
  uint64_t flags;            /* CAI_REQUEST_*: bits 0-31 must be understood, 32-63 may be ignored */
  uint64_t consumer_stream;  /* hint: where the consumer will use the data (CAI encoding), 0: not said */
  uint64_t reserved[2];      /* zero; later minors give them ignorable meanings only */
} CaiRequest;

#define CAI_REQUEST_ALLOW_HOST (1u << 0)  /* must be understood: host memory may be described */

typedef struct CaiCApi {
  CaiCApiHeader header;      /* {CAI_C_API_MAJOR, CAI_C_API_MINOR}, prev_api */
  CaiStatus (*view)(const struct CaiCApi *api, PyObject *obj, const CaiRequest *request,
                    CaiArray *out, CaiError *error);
  CaiStatus (*acquire)(const struct CaiCApi *api, PyObject *obj, const CaiRequest *request,
                       CaiArray *out, CaiError *error);
  CaiStatus (*current_stream)(const struct CaiCApi *api, int32_t device_ordinal,
                              uint64_t *stream, CaiError *error);  /* may be NULL */
} CaiCApi;

// A producer's fill function, for cai_python_offer: describes `self` (an instance of the offered
// type or of a subclass) into `out`, borrowed. Before the call the glue has written a 0-d,
// writable, C-contiguous "|u1" array at data 0 with no mask, no descr, stream 0 (no work pending)
// and CUDA memory; the fill writes what differs: data, ndim, shape, typestr, strides (with
// strides_given = 1), readonly, stream (the stream its pending work is on), mask and descr
// (pointing into storage `self` keeps), dl_dtype where the typestr is opaque bytes of a type
// DLPack names ("<V2" with {CAI_DL_BFLOAT, 16, 1}), never owner, release or memory. `*device` is preset to
// {CAI_DL_CUDA, -1} (found from the pointer when asked); a fill may set the CUDA ordinal it knows
// (0 or more, used without asking the driver; a libcai reader that checks the pointer refuses one
// the driver contradicts); an array in host memory sets {CAI_DL_CPU, 0}. Returns CAI_OK, or a status
// with `error` written (its message names the field), or CAI_ERROR_PYTHON with a Python exception
// set. It runs with the caller attached to the interpreter, may be called concurrently on a
// free-threaded build, and must not run Python code that could change `self`.
typedef CaiStatus (*CaiPythonFill)(PyObject *self, CaiArray *out, CaiDLDevice *device, CaiError *error);

// The table. Members are named as the functions they are; see cai.h for cai_* ones.
typedef struct CaiPythonApi {
  // CAI_PYTHON_API_MAJOR and _MINOR of the library.
  uint32_t major;
  uint32_t minor;
  // sizeof(CaiPythonApi) as the library was built.
  uint64_t size;
  // cai.from_object from C: a CAI dict (versions 0-3) or an object exposing one, a cai.Array
  // (no dict round trip), a DLPack producer (its type's exchange table, else __dlpack__),
  // validated, pointer-checked and synchronized as `options` say (NULL: the defaults; set
  // allow_host to take host memory). On CAI_OK, `out` owns what keeps the data alive: a
  // reference to `obj` (and to any DLPack tensor taken), or, for an object read through its
  // type's exchange table, only the managed tensor the table gave (as any DLPack consumer
  // holds it): release it with cai_release, from any thread. Otherwise `out` is
  // untouched, `error` (may be NULL) says why, and a Python exception is set: cai.CaiError
  // (a ValueError) for libcai's refusals, with their status; CAI_ERROR_PYTHON for any other
  // exception (TypeError for an object that is no array at all). Where no
  // CUDA driver loads, the default pointer check is skipped and nothing says so (no
  // CaiPointerInfo comes out): set pointer_check = CAI_POINTER_CHECK_ALWAYS to have
  // CAI_ERROR_NO_DRIVER instead, or ask cai_driver_status first.
  int32_t (*cai_python_from_object)(PyObject *obj, const CaiImportOptions *options, CaiArray *out,
                                    CaiError *error);
  // Moves `array` (a C producer's, validated first) into a new cai.Array, which offers the
  // CAI and DLPack and runs the array's release once Python lets go. Returns the new reference;
  // on failure NULL with an exception set, and `array` still the caller's.
  PyObject *(*cai_python_to_object)(CaiArray *array);
  CaiStatus (*cai_validate)(const CaiArray *array, CaiError *error);
  CaiStatus (*cai_layout)(const CaiArray *array, CaiLayout *layout, CaiError *error);
  CaiStatus (*cai_export)(CaiArray *array, const CaiExportOptions *options, CaiError *error);
  CaiStatus (*cai_release)(CaiArray *array, CaiError *error);
  CaiStatus (*cai_move)(CaiArray *dst, CaiArray *src, CaiError *error);
  CaiStatus (*cai_import)(const CaiArray *array, const CaiImportOptions *options, CaiPointerInfo *info,
                          CaiError *error);
  CaiStatus (*cai_sync)(const CaiArray *array, const CaiSyncOptions *options, CaiError *error);
  CaiStatus (*cai_pointer_info)(uint64_t pointer, CaiPointerInfo *info, CaiError *error);
  CaiStatus (*cai_driver_status)(int32_t *version, CaiError *error);
  CaiStatus (*cai_from_dlpack)(CaiDLManagedTensorVersioned *tensor, const CaiDLPackOptions *options,
                               CaiArray *out, CaiError *error);
  CaiStatus (*cai_from_dlpack_legacy)(CaiDLManagedTensor *tensor, const CaiDLPackOptions *options,
                                      CaiArray *out, CaiError *error);
  CaiStatus (*cai_to_dlpack)(CaiArray *array, const CaiDLDevice *device, CaiDLManagedTensorVersioned **out,
                             CaiError *error);
  CaiStatus (*cai_to_dlpack_legacy)(CaiArray *array, const CaiDLDevice *device, CaiDLManagedTensor **out,
                                    CaiError *error);
  CaiStatus (*cai_typestr_parse)(const char *typestr, CaiDtype *dtype, CaiError *error);
  const char *(*cai_status_string)(CaiStatus status);
  const char *(*cai_library_version)(void);
  // Minor 1. cai_python_from_object borrowed: the same negotiation, validation, pointer check
  // and synchronization, and the same struct, but no reference is taken and nothing is
  // allocated: `out->release` and `out->owner` are NULL, and the struct is valid while the
  // caller holds `obj` and runs no Python code that could change or free it (a kernel launch
  // is fine; anything that may run Python code, or release the GIL to another thread that
  // may, is not). For a kernel argument in a hot path. Taken borrowed:
  //  - a CAI dict (versions 0-3) or an object exposing one, without a mask or named descr
  //    fields (a descr that restates the typestr, as numpy writes it, is fine);
  //  - a cai.Array: its own struct (its descr and mask point into the cai.Array);
  //  - a DLPack producer whose type's exchange table offers dltensor_from_py_object_no_sync
  //    (torch, paddle, cai.Array), read without a managed tensor;
  //  - a `__dlpack__` producer (numpy, jax): asked for its own memory (copy=False; a producer
  //    from before DLPack 1.0 never copies), the tensor read and deleted before the call
  //    returns: the data stays valid while `obj` is held, as above.
  // Refused with CAI_ERROR_INVALID_ARGUMENT and a message naming cai_python_from_object,
  // which takes them, because a borrowed struct cannot hold them:
  //  - a dict with a mask, or with named descr fields (their structs would need memory);
  //  - a type whose exchange table lacks dltensor_from_py_object_no_sync (its managed tensor
  //    must be owned, and the table promises no view of the object's own memory).
  // Every other refusal is cai_python_from_object's, with the same status and message.
  int32_t (*cai_python_view)(PyObject *obj, const CaiImportOptions *options, CaiArray *out, CaiError *error);
  // Minor 1. cai.from_buffer_interface from C: an object of the OpenCL/CUDA Buffer Interface
  // (or a pyopencl.array.Array), checked as a CAI array is and, for OpenCL memory, against its
  // buffer (and, given a consumer cl_command_queue as options->consumer_stream, its context),
  // the consumer ordered after the producer as options->sync_mode says. Owning, as
  // cai_python_from_object: on CAI_OK `out` holds a reference to `obj`; release it with
  // cai_release. Failures as cai_python_from_object's.
  int32_t (*cai_python_from_buffer_interface)(PyObject *obj, const CaiImportOptions *options, CaiArray *out,
                                              CaiError *error);
  // Minor 2. What cai_python_offer (below) calls: gives `type` every producer protocol from
  // `fill`, setting the attributes on the type when `type_dict` is NULL, else writing them
  // into `type_dict` (the dict of a static or immutable type) and calling PyType_Modified.
  // Returns 0, or -1 with an exception set.
  int32_t (*cai_python_offer_to)(PyTypeObject *type, CaiPythonFill fill, PyObject *type_dict);
  // Minor 3. cai_python_view where a borrowed struct can hold the array, else
  // cai_python_from_object: what cai_python_view refuses because a borrowed struct cannot hold
  // it (a mask, named descr fields, an exchange table without dltensor_from_py_object_no_sync)
  // is imported owning instead, with no exception raised on the way. On CAI_OK `out->release`
  // says which: NULL for a borrowed struct (valid as cai_python_view's), set for an owning one
  // (release it with cai_release). Every failure is cai_python_from_object's. For a caster that
  // borrows where it can, such as cai::ArrayView's.
  int32_t (*cai_python_view_or_own)(PyObject *obj, const CaiImportOptions *options, CaiArray *out,
                                    CaiError *error);
  // Minor 4. cai.h's release after a stream, on the package's queue (see cai.h).
  CaiStatus (*cai_release_after)(CaiArray *array, uint64_t stream, CaiError *error);
  CaiStatus (*cai_release_pending)(int32_t mode, uint64_t *left, CaiError *error);
  // Minor 5. cai.h's arrays across processes, with the package's event pool and its table of
  // opened allocations (see cai.h).
  CaiStatus (*cai_ipc_export)(const CaiArray *array, CaiIpcDescriptor *out, CaiError *error);
  CaiStatus (*cai_ipc_open)(const CaiIpcDescriptor *desc, const CaiImportOptions *options, CaiArray *out,
                            CaiError *error);
} CaiPythonApi;

#ifdef __cplusplus
}
#endif

// The table read by cai_python_import; NULL before it ran.
#if defined(__cplusplus) && __cplusplus >= 201703L
inline const CaiPythonApi *cai_python_api = nullptr;
#elif defined(CAI_PYTHON_TABLE_EXTERN)
extern const CaiPythonApi *cai_python_api;
#else
static const CaiPythonApi *cai_python_api = NULL;
#endif

// The table pointer is read and written atomically (threads of a free-threaded build may read
// the table for the first time together): GCC's and Clang's builtins, else a volatile access
// (MSVC gives those acquire and release semantics).
#if defined(__GNUC__) || defined(__clang__)
#define CAI_PYTHON_API_LOAD() __atomic_load_n(&cai_python_api, __ATOMIC_ACQUIRE)
#define CAI_PYTHON_API_STORE(api) __atomic_store_n(&cai_python_api, (api), __ATOMIC_RELEASE)
#else
#define CAI_PYTHON_API_LOAD() (*(const CaiPythonApi *const volatile *)&cai_python_api)
#define CAI_PYTHON_API_STORE(api) (*(const CaiPythonApi *volatile *)&cai_python_api = (api))
#endif

// Reads the table from the installed `cai` package: 0, or -1 with an exception set (an
// ImportError naming both versions when the package's table is not one this header reads).
// Call it once, in the module's init function, so that a mismatch fails the import of the
// module; a module that does not is given the table on its first call (see cai_python_table).
static inline int cai_python_import(void) {
  const CaiPythonApi *api = (const CaiPythonApi *)PyCapsule_Import(CAI_PYTHON_CAPSULE_NAME, 0);
  if (api == NULL) return -1;
  if (api->major != CAI_PYTHON_API_MAJOR || api->minor < CAI_PYTHON_API_MINOR ||
      api->size < sizeof(CaiPythonApi)) {
    PyErr_Format(PyExc_ImportError,
                 "the installed cai package offers C API %u.%u; this extension was built against "
                 "cai_python.h %d.%d and needs %d.%d or a later minor: install a cai package that "
                 "matches it, or rebuild the extension against the installed one",
                 (unsigned)api->major, (unsigned)api->minor, CAI_PYTHON_API_MAJOR, CAI_PYTHON_API_MINOR,
                 CAI_PYTHON_API_MAJOR, CAI_PYTHON_API_MINOR);
    return -1;
  }
  CAI_PYTHON_API_STORE(api);
  return 0;
}

// The table that stands in while the real one cannot be read: every function fails without
// touching its arguments. The Python entry points leave the ImportError set and return
// CAI_ERROR_PYTHON (NULL for cai_python_to_object); the functions of cai.h write it into
// `error` (they may run on threads that do not hold the GIL, so they raise nothing).
#define CAI_PYTHON_UNAVAILABLE_MESSAGE \
  "ImportError: libcai's C API could not be read from the installed cai package (cai_python_import failed)"

static inline CaiStatus cai_python_unavailable_(CaiError *error) {
  if (error != NULL) {
    const char *message = CAI_PYTHON_UNAVAILABLE_MESSAGE;
    size_t i = 0;
    for (; message[i] != '\0' && i + 1 < sizeof error->message; i++) error->message[i] = message[i];
    error->message[i] = '\0';
    error->code = CAI_ERROR_PYTHON;
    error->driver_result = 0;
  }
  return CAI_ERROR_PYTHON;
}
static inline int32_t cai_python_unavailable_from_object_(PyObject *o, const CaiImportOptions *p, CaiArray *a,
                                                          CaiError *e) {
  (void)o, (void)p, (void)a;
  return cai_python_unavailable_(e);
}
static inline PyObject *cai_python_unavailable_to_object_(CaiArray *a) {
  (void)a;
  return NULL;
}
static inline CaiStatus cai_python_unavailable_array_(const CaiArray *a, CaiError *e) {
  (void)a;
  return cai_python_unavailable_(e);
}
static inline CaiStatus cai_python_unavailable_layout_(const CaiArray *a, CaiLayout *l, CaiError *e) {
  (void)a, (void)l;
  return cai_python_unavailable_(e);
}
static inline CaiStatus cai_python_unavailable_export_(CaiArray *a, const CaiExportOptions *o, CaiError *e) {
  (void)a, (void)o;
  return cai_python_unavailable_(e);
}
static inline CaiStatus cai_python_unavailable_release_(CaiArray *a, CaiError *e) {
  (void)a;
  return cai_python_unavailable_(e);
}
static inline CaiStatus cai_python_unavailable_move_(CaiArray *d, CaiArray *s, CaiError *e) {
  (void)d, (void)s;
  return cai_python_unavailable_(e);
}
static inline CaiStatus cai_python_unavailable_import_(const CaiArray *a, const CaiImportOptions *o,
                                                       CaiPointerInfo *i, CaiError *e) {
  (void)a, (void)o, (void)i;
  return cai_python_unavailable_(e);
}
static inline CaiStatus cai_python_unavailable_sync_(const CaiArray *a, const CaiSyncOptions *o, CaiError *e) {
  (void)a, (void)o;
  return cai_python_unavailable_(e);
}
static inline CaiStatus cai_python_unavailable_pointer_info_(uint64_t p, CaiPointerInfo *i, CaiError *e) {
  (void)p, (void)i;
  return cai_python_unavailable_(e);
}
static inline CaiStatus cai_python_unavailable_driver_status_(int32_t *v, CaiError *e) {
  (void)v;
  return cai_python_unavailable_(e);
}
static inline CaiStatus cai_python_unavailable_from_dlpack_(CaiDLManagedTensorVersioned *t,
                                                            const CaiDLPackOptions *o, CaiArray *a, CaiError *e) {
  (void)t, (void)o, (void)a;
  return cai_python_unavailable_(e);
}
static inline CaiStatus cai_python_unavailable_from_dlpack_legacy_(CaiDLManagedTensor *t, const CaiDLPackOptions *o,
                                                                   CaiArray *a, CaiError *e) {
  (void)t, (void)o, (void)a;
  return cai_python_unavailable_(e);
}
static inline CaiStatus cai_python_unavailable_to_dlpack_(CaiArray *a, const CaiDLDevice *d,
                                                          CaiDLManagedTensorVersioned **t, CaiError *e) {
  (void)a, (void)d, (void)t;
  return cai_python_unavailable_(e);
}
static inline CaiStatus cai_python_unavailable_to_dlpack_legacy_(CaiArray *a, const CaiDLDevice *d,
                                                                 CaiDLManagedTensor **t, CaiError *e) {
  (void)a, (void)d, (void)t;
  return cai_python_unavailable_(e);
}
static inline CaiStatus cai_python_unavailable_typestr_parse_(const char *s, CaiDtype *d, CaiError *e) {
  (void)s, (void)d;
  return cai_python_unavailable_(e);
}
static inline const char *cai_python_unavailable_status_string_(CaiStatus status) {
  (void)status;
  return "CAI_ERROR_PYTHON";
}
static inline const char *cai_python_unavailable_library_version_(void) { return "unavailable"; }
static inline int32_t cai_python_unavailable_offer_to_(PyTypeObject *t, CaiPythonFill f, PyObject *d) {
  (void)t, (void)f, (void)d;
  return -1;
}

static inline CaiStatus cai_python_unavailable_release_after_(CaiArray *a, uint64_t s, CaiError *e) {
  (void)a, (void)s;
  return cai_python_unavailable_(e);
}
static inline CaiStatus cai_python_unavailable_release_pending_(int32_t m, uint64_t *l, CaiError *e) {
  (void)m, (void)l;
  return cai_python_unavailable_(e);
}

static inline CaiStatus cai_python_unavailable_ipc_export_(const CaiArray *a, CaiIpcDescriptor *d, CaiError *e) {
  (void)a, (void)d;
  return cai_python_unavailable_(e);
}
static inline CaiStatus cai_python_unavailable_ipc_open_(const CaiIpcDescriptor *d, const CaiImportOptions *o,
                                                         CaiArray *a, CaiError *e) {
  (void)d, (void)o, (void)a;
  return cai_python_unavailable_(e);
}

static const CaiPythonApi cai_python_unavailable_api_ = {
    CAI_PYTHON_API_MAJOR,
    CAI_PYTHON_API_MINOR,
    sizeof(CaiPythonApi),
    cai_python_unavailable_from_object_,
    cai_python_unavailable_to_object_,
    cai_python_unavailable_array_,
    cai_python_unavailable_layout_,
    cai_python_unavailable_export_,
    cai_python_unavailable_release_,
    cai_python_unavailable_move_,
    cai_python_unavailable_import_,
    cai_python_unavailable_sync_,
    cai_python_unavailable_pointer_info_,
    cai_python_unavailable_driver_status_,
    cai_python_unavailable_from_dlpack_,
    cai_python_unavailable_from_dlpack_legacy_,
    cai_python_unavailable_to_dlpack_,
    cai_python_unavailable_to_dlpack_legacy_,
    cai_python_unavailable_typestr_parse_,
    cai_python_unavailable_status_string_,
    cai_python_unavailable_library_version_,
    cai_python_unavailable_from_object_,
    cai_python_unavailable_from_object_,
    cai_python_unavailable_offer_to_,
    cai_python_unavailable_from_object_,
    cai_python_unavailable_release_after_,
    cai_python_unavailable_release_pending_,
    cai_python_unavailable_ipc_export_,
    cai_python_unavailable_ipc_open_,
};

// The table every name below calls through: the one cai_python_import read, or, in a module
// whose init never called it, read on first use (attaching to the interpreter for it, from any
// thread; concurrent first uses read the same table). When it cannot be read, the call raises
// ImportError (set here) and fails through the stand-in table: never a NULL dereference.
static inline const CaiPythonApi *cai_python_table(void) {
  const CaiPythonApi *api = CAI_PYTHON_API_LOAD();
  if (api != NULL) return api;
  if (!Py_IsInitialized()) return &cai_python_unavailable_api_;
  PyGILState_STATE state = PyGILState_Ensure();
  if (cai_python_import() == 0) {
    api = CAI_PYTHON_API_LOAD();
  } else {
    if (!PyErr_ExceptionMatches(PyExc_ImportError)) {
      PyObject *type, *value, *traceback;
      PyErr_Fetch(&type, &value, &traceback);
      PyErr_Format(PyExc_ImportError, "libcai's C API (%s) could not be read: %S", CAI_PYTHON_CAPSULE_NAME,
                   value ? value : Py_None);
      Py_XDECREF(type);
      Py_XDECREF(value);
      Py_XDECREF(traceback);
    }
    api = &cai_python_unavailable_api_;
  }
  PyGILState_Release(state);
  return api;
}

// Every function by its own name, through the table.
#define cai_python_from_object (cai_python_table()->cai_python_from_object)
#define cai_python_to_object (cai_python_table()->cai_python_to_object)
#define cai_validate (cai_python_table()->cai_validate)
#define cai_layout (cai_python_table()->cai_layout)
#define cai_export (cai_python_table()->cai_export)
#define cai_release (cai_python_table()->cai_release)
#define cai_move (cai_python_table()->cai_move)
#define cai_import (cai_python_table()->cai_import)
#define cai_sync (cai_python_table()->cai_sync)
#define cai_pointer_info (cai_python_table()->cai_pointer_info)
#define cai_driver_status (cai_python_table()->cai_driver_status)
#define cai_from_dlpack (cai_python_table()->cai_from_dlpack)
#define cai_from_dlpack_legacy (cai_python_table()->cai_from_dlpack_legacy)
#define cai_to_dlpack (cai_python_table()->cai_to_dlpack)
#define cai_to_dlpack_legacy (cai_python_table()->cai_to_dlpack_legacy)
#define cai_typestr_parse (cai_python_table()->cai_typestr_parse)
#define cai_status_string (cai_python_table()->cai_status_string)
#define cai_library_version (cai_python_table()->cai_library_version)
#define cai_python_view (cai_python_table()->cai_python_view)
#define cai_python_from_buffer_interface (cai_python_table()->cai_python_from_buffer_interface)
#define cai_python_view_or_own (cai_python_table()->cai_python_view_or_own)
#define cai_release_after (cai_python_table()->cai_release_after)
#define cai_release_pending (cai_python_table()->cai_release_pending)
#define cai_ipc_export (cai_python_table()->cai_ipc_export)
#define cai_ipc_open (cai_python_table()->cai_ipc_open)

// Gives `type` (after PyType_Ready) every producer protocol, each read through `fill`:
// `__cuda_array_interface__` (v3, built when asked; host arrays lack it, as torch's do),
// `__dlpack__` and `__dlpack_device__` (versioned and legacy capsules, the producer's stream
// ordered before the consumer's, `self` kept alive until the deleter runs), DLPack's exchange
// table `__dlpack_c_exchange_api__`, and the C-level table `__cuda_array_interface_c_api__`.
// Subclasses inherit them. Returns 0, or -1 with an exception set: a TypeError when the type
// defines one of those attributes itself already. A heap type is given the attributes; a
// static or immutable one has them written into its dict, which needs the full C API (under
// Py_LIMITED_API make the type a heap type with PyType_FromSpec).
static inline int cai_python_offer(PyTypeObject *type, CaiPythonFill fill) {
  PyObject *type_dict = NULL;
  if (type == NULL || fill == NULL) {
    PyErr_SetString(PyExc_TypeError, "cai_python_offer: type and fill must not be NULL");
    return -1;
  }
#ifndef Py_LIMITED_API
  unsigned long flags = PyType_GetFlags(type);
  if (!(flags & Py_TPFLAGS_HEAPTYPE) || (flags & Py_TPFLAGS_IMMUTABLETYPE)) type_dict = type->tp_dict;
#endif
  return cai_python_table()->cai_python_offer_to(type, fill, type_dict);
}

#ifdef __cplusplus
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <new>

#include "cai.hpp"
#if defined(__GXX_RTTI) || defined(_CPPRTTI)
#include <typeinfo>
#if defined(__GNUG__)
#include <cxxabi.h>
#endif
#endif

namespace cai {
namespace detail {
// What the offer glue of cai/pybind11.h and cai/nanobind.h makes of a fill's refusal or of a
// C++ exception it threw (nothing unwinds into the C caller): `error` written and its status
// returned.
inline CaiStatus fill_refused(CaiError& error, CaiStatus status, const char* message) noexcept {
  if (status == CAI_OK || status == CAI_ERROR_PYTHON) status = CAI_ERROR_INVALID_ARGUMENT;
  std::snprintf(error.message, sizeof error.message, "%s", message);
  error.code = status;
  error.driver_result = 0;
  return status;
}

// CAI_ERROR_INVALID_ARGUMENT, the message naming the exception's type where RTTI says it.
inline CaiStatus fill_threw(CaiError& error, const std::exception& e) noexcept {
  const char* name = "std::exception or a subclass";
  char* readable = nullptr;
#if defined(__GXX_RTTI) || defined(_CPPRTTI)
  name = typeid(e).name();
#if defined(__GNUG__)
  int demangled = -1;
  readable = abi::__cxa_demangle(name, nullptr, nullptr, &demangled);
  if (demangled == 0 && readable != nullptr) name = readable;
#endif
#endif
  char message[sizeof error.message];
  std::snprintf(message, sizeof message, "the fill function threw a C++ exception (%s): %s", name, e.what());
  std::free(readable);
  return fill_refused(error, CAI_ERROR_INVALID_ARGUMENT, message);
}

// The status of the exception being handled, for the C++ exceptions every binding shares; called
// from a `catch (...)` of the glue, after the binding's own exception types: std::bad_alloc is a
// MemoryError (CAI_ERROR_PYTHON), cai::Error keeps its status and message, any other exception
// is CAI_ERROR_INVALID_ARGUMENT naming it.
inline CaiStatus fill_failed(CaiError& error) noexcept {
  try {
    throw;
  } catch (const std::bad_alloc&) {
    PyErr_NoMemory();
    return CAI_ERROR_PYTHON;
  } catch (const ::cai::Error& e) {
    return fill_refused(error, e.code(), e.what());
  } catch (const std::exception& e) {
    return fill_threw(error, e);
  } catch (...) {
    return fill_refused(error, CAI_ERROR_INVALID_ARGUMENT,
                        "the fill function threw a C++ exception that is no std::exception");
  }
}
}  // namespace detail

// A borrowed CaiArray: nothing to release, valid while what it views is. What the pybind11 and
// nanobind casters (cai/pybind11.h, cai/nanobind.h) give a function that takes it: borrowed by
// cai_python_view_or_own where it can, else a view of an array the caster owns for the call.
class ArrayView {
 public:
  ArrayView() noexcept : raw_{} {}
  explicit ArrayView(const CaiArray& viewed) noexcept : raw_(viewed) {
    raw_.owner = nullptr;
    raw_.release = nullptr;
  }
  const CaiArray& raw() const noexcept { return raw_; }
  CaiArray& raw() noexcept { return raw_; }

 private:
  CaiArray raw_;
};
}  // namespace cai
#endif

#endif  // CAI_PYTHON_H
