/* A plain C extension built against the installed cai package only (cai.get_include()):
   everything it calls comes through cai_python.h's table. */
#define PY_SSIZE_T_CLEAN
#include "description.h" /* Python.h first, as CPython asks */

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* The arguments every import function takes, (obj[, allow_host]), as an object and options. */
static int import_arguments(PyObject *args, PyObject **obj, CaiImportOptions *options) {
  int allow_host = 0;
  if (!PyArg_ParseTuple(args, "O|p", obj, &allow_host)) return 0;
  memset(options, 0, sizeof *options);
  options->allow_host = (uint32_t)allow_host;
  return 1;
}

static PyObject *describe(PyObject *self, PyObject *args) {
  PyObject *obj;
  CaiImportOptions options;
  if (!import_arguments(args, &obj, &options)) return NULL;
  CaiArray a;
  CaiError e;
  if (cai_python_from_object(obj, &options, &a, &e) != CAI_OK) return NULL;
  PyObject *seen = cai_test_description(&a);
  cai_release(&a, NULL);
  return seen;
}

/* What cai_python_view saw of obj (nothing to release). */
static PyObject *view_describe(PyObject *self, PyObject *args) {
  PyObject *obj;
  CaiImportOptions options;
  if (!import_arguments(args, &obj, &options)) return NULL;
  CaiArray a;
  CaiError e;
  if (cai_python_view(obj, &options, &a, &e) != CAI_OK) return NULL;
  if (a.release != NULL || a.owner != NULL) {
    PyErr_SetString(PyExc_AssertionError, "a view with a release or an owner");
    return NULL;
  }
  return cai_test_description(&a);
}

/* (what cai_python_view_or_own saw of obj, whether it owns); an owning struct is released once
   described, a borrowed one (no owner) has nothing to release. */
static PyObject *view_or_own_describe(PyObject *self, PyObject *args) {
  PyObject *obj;
  CaiImportOptions options;
  if (!import_arguments(args, &obj, &options)) return NULL;
  CaiArray a;
  CaiError e;
  if (cai_python_view_or_own(obj, &options, &a, &e) != CAI_OK) return NULL;
  int owns = a.release != NULL;
  if (!owns && a.owner != NULL) {
    PyErr_SetString(PyExc_AssertionError, "a borrowed struct with an owner");
    return NULL;
  }
  PyObject *seen = cai_test_description(&a);
  cai_release(&a, NULL);
  if (seen == NULL) return NULL;
  return Py_BuildValue("(NO)", seen, owns ? Py_True : Py_False);
}

/* (status, CaiError message, exception) of a refused import, from cai_python_from_object or,
   with view=True, cai_python_view; None if it imports. */
static PyObject *refusal(PyObject *self, PyObject *args, PyObject *kwargs) {
  static char *keywords[] = {"obj", "allow_host", "view", NULL};
  PyObject *obj;
  int allow_host = 0, view = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|pp", keywords, &obj, &allow_host, &view)) return NULL;
  CaiImportOptions options;
  memset(&options, 0, sizeof options);
  options.allow_host = (uint32_t)allow_host;
  CaiArray a;
  CaiError e;
  int32_t status = view ? cai_python_view(obj, &options, &a, &e) : cai_python_from_object(obj, &options, &a, &e);
  if (status == CAI_OK) {
    cai_release(&a, NULL);
    Py_RETURN_NONE;
  }
  if (!PyErr_Occurred()) {
    PyErr_SetString(PyExc_AssertionError, "a refusal set no exception");
    return NULL;
  }
  PyObject *type, *value, *traceback;
  PyErr_Fetch(&type, &value, &traceback);
  PyObject *result = Py_BuildValue("(isO)", status, e.message, value ? value : Py_None);
  Py_XDECREF(type);
  Py_XDECREF(value);
  Py_XDECREF(traceback);
  return result;
}

/* (status, the struct's bytes, the CaiError message, the exception's type name) of
   cai_python_from_object (own 1), cai_python_view (own 0) or cai_python_view_or_own (own 2)
   into a struct first filled with 0xA5, with
   the options given; an owning struct is released once its bytes are copied. For comparing two
   ways of writing `out` (straight, or through a struct of libcai's), and the entries' two ways
   in (a negotiation, and the choice this thread remembers for the type). */
static PyObject *entry_outcome(PyObject *self, PyObject *args) {
  PyObject *obj;
  int own, allow_host, native_only, pointer_check, sync_mode;
  if (!PyArg_ParseTuple(args, "Oiipii", &obj, &own, &allow_host, &native_only, &pointer_check, &sync_mode))
    return NULL;
  CaiImportOptions options;
  memset(&options, 0, sizeof options);
  options.allow_host = (uint32_t)allow_host;
  options.native_only = (uint32_t)native_only;
  options.pointer_check = pointer_check;
  options.sync_mode = sync_mode;
  CaiArray a;
  memset(&a, 0xA5, sizeof a);
  CaiError e;
  memset(&e, 0, sizeof e);
  int32_t status = own == 1   ? cai_python_from_object(obj, &options, &a, &e)
                   : own == 2 ? cai_python_view_or_own(obj, &options, &a, &e)
                              : cai_python_view(obj, &options, &a, &e);
  if (status == CAI_OK) {
    PyObject *result = Py_BuildValue("(iy#ss)", status, (const char *)&a, (Py_ssize_t)sizeof a, "", "");
    cai_release(&a, NULL); /* nothing to do for a borrowed struct */
    return result;
  }
  if (!PyErr_Occurred()) {
    PyErr_SetString(PyExc_AssertionError, "a refusal set no exception");
    return NULL;
  }
  PyObject *type, *value, *traceback;
  PyErr_Fetch(&type, &value, &traceback);
  PyObject *result = Py_BuildValue("(iy#ss)", status, (const char *)&a, (Py_ssize_t)sizeof a, e.message,
                                   ((PyTypeObject *)type)->tp_name);
  Py_XDECREF(type);
  Py_XDECREF(value);
  Py_XDECREF(traceback);
  return result;
}

/* n imports and releases of obj, in C; with view, n views (nothing to release). */
static PyObject *import_many(PyObject *self, PyObject *args) {
  PyObject *obj;
  long long n;
  int allow_host = 0, view = 0;
  if (!PyArg_ParseTuple(args, "OL|pp", &obj, &n, &allow_host, &view)) return NULL;
  CaiImportOptions options;
  memset(&options, 0, sizeof options);
  options.allow_host = (uint32_t)allow_host;
  for (long long i = 0; i < n; i++) {
    CaiArray a;
    int32_t status = view ? cai_python_view(obj, &options, &a, NULL) : cai_python_from_object(obj, &options, &a, NULL);
    if (status != CAI_OK) return NULL;
    cai_release(&a, NULL);
  }
  Py_RETURN_NONE;
}

static void *release_array(void *array) {
  cai_release((CaiArray *)array, NULL);
  return NULL;
}

/* Imports obj and releases it on a new thread that never holds the GIL. */
static PyObject *release_on_a_thread(PyObject *self, PyObject *obj) {
  CaiArray a;
  if (cai_python_from_object(obj, NULL, &a, NULL) != CAI_OK) return NULL;
  pthread_t thread;
  int failed;
  Py_BEGIN_ALLOW_THREADS
  failed = pthread_create(&thread, NULL, release_array, &a);
  if (!failed) pthread_join(thread, NULL);
  Py_END_ALLOW_THREADS
  if (failed) return PyErr_Format(PyExc_OSError, "pthread_create: %d", failed);
  Py_RETURN_NONE;
}

/* Imports obj (host memory too if asked) and keeps the struct until after the interpreter is
   gone: its release then runs from a Py_AtExit callback, when nothing may touch Python any more. */
static CaiArray kept;

static void release_kept(void) { cai_release(&kept, NULL); }

static PyObject *keep_until_exit(PyObject *self, PyObject *args) {
  PyObject *obj;
  int allow_host = 0;
  if (!PyArg_ParseTuple(args, "O|p", &obj, &allow_host)) return NULL;
  CaiImportOptions options = {0};
  options.allow_host = (uint32_t)allow_host;
  if (cai_python_from_object(obj, &options, &kept, NULL) != CAI_OK) return NULL;
  if (Py_AtExit(release_kept) != 0) return PyErr_Format(PyExc_RuntimeError, "Py_AtExit is full");
  Py_RETURN_NONE;
}

/* Imports obj and hands the struct back to Python as a new cai.Array. */
static PyObject *hand_back(PyObject *self, PyObject *args) {
  PyObject *obj;
  CaiImportOptions options;
  if (!import_arguments(args, &obj, &options)) return NULL;
  CaiArray a;
  if (cai_python_from_object(obj, &options, &a, NULL) != CAI_OK) return NULL;
  PyObject *made = cai_python_to_object(&a);
  if (made == NULL) cai_release(&a, NULL);
  return made;
}

/* A C producer: n floats of its own memory, released by counting. */
static atomic_int released;

static void release_block(CaiArray *array) {
  free(array->owner);
  atomic_fetch_add(&released, 1);
}

static CaiArray block(long long n) {
  CaiArray a;
  memset(&a, 0, sizeof a);
  a.version = 3;
  a.ndim = 1;
  a.shape[0] = n;
  strcpy(a.typestr, "<f4");
  a.owner = calloc((size_t)n + 1, 4);
  a.data = (uint64_t)(uintptr_t)a.owner;
  a.release = release_block;
  return a;
}

static PyObject *produce(PyObject *self, PyObject *args) {
  long long n;
  if (!PyArg_ParseTuple(args, "L", &n)) return NULL;
  CaiArray a = block(n);
  PyObject *made = cai_python_to_object(&a);
  if (made == NULL) cai_release(&a, NULL); /* still ours on failure */
  return made;
}

/* Hands Python an invalid array: returns (the exception, whether the array was still ours). */
static PyObject *produce_invalid(PyObject *self, PyObject *unused) {
  CaiArray a = block(4);
  a.ndim = -1;
  PyObject *made = cai_python_to_object(&a);
  if (made != NULL) return made;
  PyObject *type, *value, *traceback;
  PyErr_Fetch(&type, &value, &traceback);
  int still_ours = a.release == release_block;
  cai_release(&a, NULL);
  PyObject *result = Py_BuildValue("(Oi)", value ? value : Py_None, still_ours);
  Py_XDECREF(type);
  Py_XDECREF(value);
  Py_XDECREF(traceback);
  return result;
}

static PyObject *released_count(PyObject *self, PyObject *unused) { return PyLong_FromLong(atomic_load(&released)); }

static PyObject *library_version(PyObject *self, PyObject *unused) {
  return PyUnicode_FromString(cai_library_version());
}

static PyMethodDef methods[] = {
    {"describe", describe, METH_VARARGS, NULL},
    {"refusal", (PyCFunction)(void (*)(void))refusal, METH_VARARGS | METH_KEYWORDS, NULL},
    {"view_describe", view_describe, METH_VARARGS, NULL},
    {"view_or_own_describe", view_or_own_describe, METH_VARARGS, NULL},
    {"entry_outcome", entry_outcome, METH_VARARGS, NULL},
    {"import_many", import_many, METH_VARARGS, NULL},
    {"release_on_a_thread", release_on_a_thread, METH_O, NULL},
    {"hand_back", hand_back, METH_VARARGS, NULL},
    {"keep_until_exit", keep_until_exit, METH_VARARGS, NULL},
    {"produce", produce, METH_VARARGS, NULL},
    {"produce_invalid", produce_invalid, METH_NOARGS, NULL},
    {"released_count", released_count, METH_NOARGS, NULL},
    {"library_version", library_version, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL},
};

#ifdef CAI_TEST_NO_IMPORT
/* The same module whose init forgot cai_python_import(): the table is read on first use. */
static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "cai_c_ext_no_import", NULL, -1, methods};

PyMODINIT_FUNC PyInit_cai_c_ext_no_import(void) { return PyModule_Create(&module); }
#else
static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "cai_c_ext", NULL, -1, methods};

PyMODINIT_FUNC PyInit_cai_c_ext(void) {
  if (cai_python_import() < 0) return NULL;
  return PyModule_Create(&module);
}
#endif
