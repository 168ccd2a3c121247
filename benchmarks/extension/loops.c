/* C loops for benchmarks/extension_bench.py: each runs one import n times and returns the
   nanoseconds per call, so that nothing but the call itself is timed. Built against the
   installed cai package (cai_python.h) and numpy's headers. */
#define PY_SSIZE_T_CLEAN
#include "cai_python.h"

#define NPY_NO_DEPRECATED_API NPY_2_0_API_VERSION
#include <numpy/arrayobject.h>
#include <time.h>

#if defined(__has_include)
#if __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>
#define CAI_BENCH_CALLGRIND 1
#endif
#endif

static double now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

/* The arguments of the import loops: (object, n, allow_host, sync mode). */
static int import_loop_args(PyObject *args, PyObject **obj, long long *n, CaiImportOptions *options) {
  int allow_host, sync_mode;
  if (!PyArg_ParseTuple(args, "OLpi", obj, n, &allow_host, &sync_mode)) return 0;
  *options = (CaiImportOptions){0};
  options->allow_host = (uint32_t)allow_host;
  options->sync_mode = sync_mode;
  return 1;
}

/* cai_python_from_object + cai_release, sync and pointer check as asked. */
static PyObject *cai_loop(PyObject *self, PyObject *args) {
  PyObject *obj;
  long long n;
  CaiImportOptions options;
  if (!import_loop_args(args, &obj, &n, &options)) return NULL;
  double start = now_ns();
  for (long long i = 0; i < n; i++) {
    CaiArray a;
    if (cai_python_from_object(obj, &options, &a, NULL) != CAI_OK) return NULL;
    cai_release(&a, NULL);
  }
  return PyFloat_FromDouble((now_ns() - start) / (double)n);
}

#if CAI_PYTHON_API_MINOR >= 1
/* cai_python_view: the borrowed twin of cai_python_from_object (no reference, nothing to
   release), measured once the C API has it (API 1.1). */
static PyObject *view_loop(PyObject *self, PyObject *args) {
  PyObject *obj;
  long long n;
  CaiImportOptions options;
  if (!import_loop_args(args, &obj, &n, &options)) return NULL;
  double start = now_ns();
  for (long long i = 0; i < n; i++) {
    CaiArray a;
    if (cai_python_view(obj, &options, &a, NULL) != CAI_OK) return NULL;
  }
  return PyFloat_FromDouble((now_ns() - start) / (double)n);
}
#endif

/* NumPy's C-level import of an object exposing __array_interface__. */
static PyObject *numpy_loop(PyObject *self, PyObject *args) {
  PyObject *obj;
  long long n;
  if (!PyArg_ParseTuple(args, "OL", &obj, &n)) return NULL;
  double start = now_ns();
  for (long long i = 0; i < n; i++) {
    PyObject *array = PyArray_FromAny(obj, NULL, 0, 0, 0, NULL);
    if (array == NULL) return NULL;
    Py_DECREF(array);
  }
  return PyFloat_FromDouble((now_ns() - start) / (double)n);
}

/* DLPack 1.3's exchange table (dlpack.h's DLPackExchangeAPI, as libcai declares it). */
typedef struct ExchangeApi {
  CaiDLPackVersion version;
  const void *prev_version_api;
  const void *managed_tensor_allocator;
  int (*managed_tensor_from_py_object_no_sync)(void *, CaiDLManagedTensorVersioned **);
  int (*managed_tensor_to_py_object_no_sync)(CaiDLManagedTensorVersioned *, void **);
  int (*dltensor_from_py_object_no_sync)(void *, CaiDLTensor *);
  int (*current_work_stream)(int32_t, int32_t, void **);
} ExchangeApi;

static const ExchangeApi *exchange_api_of(PyObject *obj) {
  PyObject *capsule = PyObject_GetAttrString((PyObject *)Py_TYPE(obj), "__dlpack_c_exchange_api__");
  if (capsule == NULL) return NULL;
  const ExchangeApi *api = PyCapsule_GetPointer(capsule, "dlpack_exchange_api");
  Py_DECREF(capsule);
  return api;
}

/* The producer's raw exchange: a non-owning DLTensor (the floor for any consumer), or an
   owning tensor taken and deleted (what a consumer that keeps it must do). */
static PyObject *exchange_loop(PyObject *self, PyObject *args) {
  PyObject *obj;
  long long n;
  int owning;
  if (!PyArg_ParseTuple(args, "OLp", &obj, &n, &owning)) return NULL;
  const ExchangeApi *api = exchange_api_of(obj);
  if (api == NULL) return NULL;
  double start = now_ns();
  for (long long i = 0; i < n; i++) {
    if (owning) {
      CaiDLManagedTensorVersioned *tensor;
      if (api->managed_tensor_from_py_object_no_sync(obj, &tensor) != 0) return NULL;
      if (tensor->deleter) tensor->deleter(tensor);
    } else {
      CaiDLTensor tensor;
      if (api->dltensor_from_py_object_no_sync(obj, &tensor) != 0) return NULL;
    }
  }
  return PyFloat_FromDouble((now_ns() - start) / (double)n);
}

/* n calls of a Python callable with no arguments, counted by callgrind when the process runs
   under it (benchmarks/dlpack_bench.py --instructions): counts zeroed before the loop, collected
   in it only, dumped under `label` after it. */
static PyObject *counted_calls(PyObject *self, PyObject *args) {
  PyObject *call;
  long long n;
  const char *label;
  if (!PyArg_ParseTuple(args, "OLs", &call, &n, &label)) return NULL;
#ifdef CAI_BENCH_CALLGRIND
  CALLGRIND_START_INSTRUMENTATION;
  CALLGRIND_ZERO_STATS;
  CALLGRIND_TOGGLE_COLLECT;
  for (long long i = 0; i < n; i++) {
    PyObject *result = PyObject_CallNoArgs(call);
    if (result == NULL) {
      CALLGRIND_TOGGLE_COLLECT;
      return NULL;
    }
    Py_DECREF(result);
  }
  CALLGRIND_TOGGLE_COLLECT;
  CALLGRIND_DUMP_STATS_AT(label);
  Py_RETURN_NONE;
#else
  (void)call, (void)n, (void)label;
  PyErr_SetString(PyExc_RuntimeError, "built without valgrind/callgrind.h: install valgrind to count instructions");
  return NULL;
#endif
}

static PyMethodDef methods[] = {
    {"cai_loop", cai_loop, METH_VARARGS, NULL},
    {"numpy_loop", numpy_loop, METH_VARARGS, NULL},
    {"exchange_loop", exchange_loop, METH_VARARGS, NULL},
#if CAI_PYTHON_API_MINOR >= 1
    {"view_loop", view_loop, METH_VARARGS, NULL},
#endif
    {"counted_calls", counted_calls, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "cai_bench_loops", NULL, -1, methods};

PyMODINIT_FUNC PyInit_cai_bench_loops(void) {
  if (cai_python_import() < 0) return NULL;
  import_array();
  return PyModule_Create(&module);
}
