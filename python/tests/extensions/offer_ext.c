// A C producer offered through cai_python_offer: `Image`, a heap type, and `StaticImage`, a
// static type, both described by one fill function; a `fault` chosen at construction makes the
// fill break one rule (for the tests of the glue's errors). The module also reads any object's
// C-level CAI table as a C consumer would (docs/c-level-cai.md section 10), and through
// cai_python_view.
#define PY_SSIZE_T_CLEAN
#include "cai_python.h"

#include <pthread.h>

#include <string.h>

enum Fault {
  FAULT_NONE,
  FAULT_REFUSES,         // returns CAI_ERROR_INVALID_SHAPE with a message
  FAULT_RAISES,          // raises RuntimeError, returns CAI_ERROR_PYTHON
  FAULT_NEGATIVE_SHAPE,  // an invalid layout
  FAULT_SETS_RELEASE,    // sets release (a fill describes a borrowed view)
  FAULT_SILENT_PYTHON,   // returns CAI_ERROR_PYTHON with no exception set
  FAULT_CHANGES,         // a different shape on every call
  FAULT_BAD_DEVICE,      // a device type other than CUDA or CPU
  FAULT_SILENT_REFUSAL,  // returns CAI_ERROR_INVALID_TYPESTR with no message
  FAULT_OPENCL_MEMORY,   // describes OpenCL memory, which the table's 1.0 does not carry
  FAULT_HOST_DEVICE_ID,  // host memory on device (kDLCPU, 5): DLPack's host device is 0
  FAULT_CUDA_DEVICE_ID,  // a CUDA ordinal below -1
  VIEWS_BASE,            // not a fault: views `base` through cai_python_view first (re-enters libcai)
  FAULT_REFUSES_AROUND_A_VIEW,  // writes its refusal, views `base` (re-enters libcai), then refuses
  EXPORTS_BASE,          // not a fault: exports `base` by its __dlpack__ last (re-enters libcai's export)
  FILLS_FROM_BASE,       // any fill: copies `base` (a CaiArray's bytes, then a control byte) over the struct
  NAMES_DEVICE_1,        // names CUDA device 1, wherever its data is
};

typedef struct {
  PyObject_HEAD
  PyObject *base;  // what keeps the memory alive
  unsigned long long data;
  Py_ssize_t height, width;
  char typestr[8];
  unsigned long long stream;
  int readonly, host, fault, calls;
  CaiArray raw_mask;  // FILLS_FROM_BASE's mask, shaped as the array
} Image;

static void noop_release(CaiArray *array) { (void)array; }

// What FILLS_FROM_BASE points `mask` and `descr` at: a mask, copied into the instance with the
// array's shape (and, when asked, in OpenCL memory), and two fields, so that every pointer the
// fill hands over is valid, as the fill's contract requires.
static const CaiArray RAW_MASK = {
    .abi_version = CAI_ABI_VERSION, .version = 3, .ndim = 2, .shape = {2, 3}, .typestr = "|b1", .data = 0x20000};
#define RAW_FIELD_COUNT 2
static const CaiField RAW_FIELDS[RAW_FIELD_COUNT] = {{"x", "<f4", 0}, {"y", "<i8", 4}};

// The struct of FILLS_FROM_BASE and of a Foreign made with `raw`: the bytes of `raw` (a
// CaiArray's, then a control byte) as they are, but for its pointers, set by the control byte:
// bit 0 the mask (bit 4 too: a mask in OpenCL memory), bit 1 the descr (its count cut to the
// fields there are), bit 2 sets `bit2_release` (a release where none belongs), bit 3 keeps the
// raw `owner`. A device instance (not `host`) keeps its own `data` and a stream of 0, 1 or 2
// (the fake driver is not handed arbitrary handles). CAI_OK, or CAI_ERROR_PYTHON with an
// exception set.
static CaiStatus copy_raw_struct(PyObject *raw, CaiArray *raw_mask, int host, unsigned long long data,
                                 void (*bit2_release)(CaiArray *), CaiArray *out) {
  char *bytes;
  Py_ssize_t size;
  if (PyBytes_AsStringAndSize(raw, &bytes, &size) < 0) return CAI_ERROR_PYTHON;
  if (size != (Py_ssize_t)sizeof(CaiArray) + 1) {
    PyErr_SetString(PyExc_ValueError, "raw: a CaiArray's bytes and a control byte");
    return CAI_ERROR_PYTHON;
  }
  unsigned control = (unsigned char)bytes[sizeof(CaiArray)];
  memcpy(out, bytes, sizeof(CaiArray));
  out->mask = NULL;
  if (control & 1) {  // shaped as the array, where its rank is one
    *raw_mask = RAW_MASK;
    if (control & 16) raw_mask->memory = CAI_MEMORY_OPENCL;
    if (out->ndim >= 0 && out->ndim <= CAI_MAX_NDIM) {
      raw_mask->ndim = out->ndim;
      memcpy(raw_mask->shape, out->shape, sizeof(int64_t) * (size_t)out->ndim);
    }
    out->mask = raw_mask;
  }
  out->descr = (control & 2) ? RAW_FIELDS : NULL;
  out->descr_count = (control & 2) ? out->descr_count % (RAW_FIELD_COUNT + 1) : out->descr_count;
  out->release = (control & 4) ? bit2_release : NULL;
  if (!(control & 8)) out->owner = NULL;
  if (!host) {
    out->data = data;
    out->stream %= 3;
  }
  return CAI_OK;
}

static CaiStatus image_fill(PyObject *self, CaiArray *out, CaiDLDevice *device, CaiError *error) {
  Image *im = (Image *)self;
  im->calls++;
  out->data = im->data;
  out->ndim = 2;
  out->shape[0] = im->height;
  out->shape[1] = im->width;
  strcpy(out->typestr, im->typestr);
  out->readonly = (uint32_t)im->readonly;
  out->stream = im->stream;
  if (im->host) {
    device->device_type = CAI_DL_CPU;
    device->device_id = 0;
  }
  switch (im->fault) {
    case FAULT_REFUSES:
      error->code = CAI_ERROR_INVALID_SHAPE;
      strcpy(error->message, "height is not set yet (call load() first)");
      return CAI_ERROR_INVALID_SHAPE;
    case FAULT_RAISES:
      PyErr_SetString(PyExc_RuntimeError, "the image was closed");
      return CAI_ERROR_PYTHON;
    case FAULT_NEGATIVE_SHAPE:
      out->shape[0] = -3;
      break;
    case FAULT_SETS_RELEASE:
      out->release = noop_release;
      break;
    case FAULT_SILENT_PYTHON:
      return CAI_ERROR_PYTHON;
    case FAULT_CHANGES:
      out->shape[0] = im->calls;
      break;
    case FAULT_BAD_DEVICE:
      device->device_type = 7;
      break;
    case FAULT_SILENT_REFUSAL:
      return CAI_ERROR_INVALID_TYPESTR;
    case FAULT_OPENCL_MEMORY:
      out->memory = CAI_MEMORY_OPENCL;
      break;
    case FAULT_HOST_DEVICE_ID:
      device->device_type = CAI_DL_CPU;
      device->device_id = 5;
      break;
    case FAULT_CUDA_DEVICE_ID:
      device->device_id = -7;
      break;
    case NAMES_DEVICE_1:
      device->device_id = 1;
      break;
    case VIEWS_BASE: {  // after writing `out`, so that a view into the same struct would show
      CaiImportOptions options = {0};
      options.allow_host = 1;
      options.sync_mode = CAI_SYNC_NONE;
      CaiArray inner;
      if (cai_python_view(im->base, &options, &inner, NULL) != CAI_OK) return CAI_ERROR_PYTHON;  // raised
      break;
    }
    case EXPORTS_BASE: {  // after writing `out`, so that an export into the same struct would show
      PyObject *capsule = PyObject_CallMethod(im->base, "__dlpack__", NULL);
      if (!capsule) return CAI_ERROR_PYTHON;  // raised
      Py_DECREF(capsule);
      break;
    }
    case FILLS_FROM_BASE:  // `base` copied over the struct, bit 2 a release (a fill's is the glue's)
      return copy_raw_struct(im->base, &im->raw_mask, im->host, im->data, noop_release, out);
    case FAULT_REFUSES_AROUND_A_VIEW: {  // the message must survive the view made meanwhile
      error->code = CAI_ERROR_INVALID_SHAPE;
      strcpy(error->message, "the outer image refuses");
      CaiImportOptions options = {0};
      options.allow_host = 1;
      options.sync_mode = CAI_SYNC_NONE;
      CaiArray inner;
      if (cai_python_view(im->base, &options, &inner, NULL) != CAI_OK) return CAI_ERROR_PYTHON;  // raised
      return CAI_ERROR_INVALID_SHAPE;
    }
  }
  return CAI_OK;
}

static int image_init(PyObject *self, PyObject *args, PyObject *kwargs) {
  static char *names[] = {"data", "height", "width", "typestr", "stream", "readonly", "host", "fault", "base", NULL};
  Image *im = (Image *)self;
  const char *typestr = "|u1";
  PyObject *base = Py_None;
  im->stream = 0;
  im->readonly = im->host = im->fault = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "Knn|sKppiO", names, &im->data, &im->height, &im->width, &typestr,
                                   &im->stream, &im->readonly, &im->host, &im->fault, &base))
    return -1;
  if (strlen(typestr) >= sizeof im->typestr) {
    PyErr_SetString(PyExc_ValueError, "typestr too long");
    return -1;
  }
  strcpy(im->typestr, typestr);
  Py_INCREF(base);
  Py_XSETREF(im->base, base);
  return 0;
}

static int image_traverse(PyObject *self, visitproc visit, void *arg) {
  Py_VISIT(((Image *)self)->base);
  Py_VISIT(Py_TYPE(self));
  return 0;
}

static int image_clear(PyObject *self) {
  Py_CLEAR(((Image *)self)->base);
  return 0;
}

static void image_dealloc(PyObject *self) {
  PyTypeObject *type = Py_TYPE(self);
  PyObject_GC_UnTrack(self);
  image_clear(self);
  type->tp_free(self);
  if (type->tp_flags & Py_TPFLAGS_HEAPTYPE) Py_DECREF(type);
}

static PyObject *image_calls(PyObject *self, void *closure) {
  (void)closure;
  return PyLong_FromLong(((Image *)self)->calls);
}

static PyGetSetDef image_getset[] = {{"calls", image_calls, NULL, "how often the fill ran", NULL}, {NULL}};

static PyType_Slot image_slots[] = {
    {Py_tp_init, image_init},       {Py_tp_dealloc, image_dealloc}, {Py_tp_traverse, image_traverse},
    {Py_tp_clear, image_clear},     {Py_tp_getset, image_getset},   {Py_tp_new, PyType_GenericNew},
    {0, NULL}};

static PyType_Spec image_spec = {"cai_offer_ext.Image", sizeof(Image), 0,
                                 Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC, image_slots};

static PyTypeObject StaticImageType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "cai_offer_ext.StaticImage",
    .tp_basicsize = sizeof(Image),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_init = image_init,
    .tp_dealloc = image_dealloc,
    .tp_traverse = image_traverse,
    .tp_clear = image_clear,
    .tp_getset = image_getset,
    .tp_new = PyType_GenericNew,
};

// `Foreign`: a producer that writes its C-level table by hand, without libcai's glue, as
// docs/c-level-cai.md lets any library do: a 2 x 3 "<f4" array at the instance's `data`, in the
// memory kind it was made with (anything but CUDA's breaks the table's 1.0); made with `raw`, any
// struct (copy_raw_struct's, its bit 2 a view with a release or an acquire without one). Its
// acquire counts what it hands out and its release what comes back (`foreign_outstanding()`); a
// view's release, which no consumer may call, counts its calls (`foreign_view_releases()`).
typedef struct {
  PyObject_HEAD
  unsigned long long data;
  unsigned int memory;
  int host;
  PyObject *raw;
  CaiArray raw_mask;
} Foreign;

static long foreign_outstanding_count, foreign_view_release_count;

static void foreign_release(CaiArray *array) {
  (void)array;
  foreign_outstanding_count--;
}

static void foreign_view_release(CaiArray *array) {
  (void)array;
  foreign_view_release_count++;
}

static CaiStatus foreign_view(const CaiCApi *api, PyObject *obj, const CaiRequest *request, CaiArray *out,
                              CaiError *error) {
  (void)api, (void)request, (void)error;
  Foreign *f = (Foreign *)obj;
  if (f->raw != NULL) return copy_raw_struct(f->raw, &f->raw_mask, f->host, f->data, foreign_view_release, out);
  memset(out, 0, sizeof *out);
  out->abi_version = CAI_ABI_VERSION;
  out->version = 3;
  out->ndim = 2;
  out->shape[0] = 2;
  out->shape[1] = 3;
  strcpy(out->typestr, "<f4");
  out->data = f->data;
  out->memory = f->memory;
  return CAI_OK;
}

static CaiStatus foreign_acquire(const CaiCApi *api, PyObject *obj, const CaiRequest *request, CaiArray *out,
                                 CaiError *error) {
  CaiStatus status = foreign_view(api, obj, request, out, error);
  if (status != CAI_OK) return status;
  if (out->release == foreign_view_release) {  // raw's bit 2: an acquire handing out no release
    out->release = NULL;
    return CAI_OK;
  }
  if (out->owner == NULL) out->owner = obj;
  out->release = foreign_release;
  foreign_outstanding_count++;
  return CAI_OK;
}

static const CaiCApi FOREIGN_API = {{{CAI_C_API_MAJOR, CAI_C_API_MINOR}, NULL}, foreign_view, foreign_acquire, NULL};

static int foreign_init(PyObject *self, PyObject *args, PyObject *kwargs) {
  static char *names[] = {"data", "memory", "raw", "host", NULL};
  Foreign *f = (Foreign *)self;
  PyObject *raw = NULL;
  f->memory = 0;
  f->host = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "K|IO!p", names, &f->data, &f->memory, &PyBytes_Type, &raw,
                                   &f->host))
    return -1;
  Py_XINCREF(raw);
  Py_XSETREF(f->raw, raw);
  return 0;
}

static void foreign_dealloc(PyObject *self) {
  PyTypeObject *type = Py_TYPE(self);
  Py_CLEAR(((Foreign *)self)->raw);
  type->tp_free(self);
  Py_DECREF(type);
}

static PyType_Slot foreign_slots[] = {
    {Py_tp_init, foreign_init}, {Py_tp_new, PyType_GenericNew}, {Py_tp_dealloc, foreign_dealloc}, {0, NULL}};

static PyType_Spec foreign_spec = {"cai_offer_ext.Foreign", sizeof(Foreign), 0, Py_TPFLAGS_DEFAULT, foreign_slots};

static PyObject *foreign_view_releases(PyObject *self, PyObject *unused) {
  (void)self, (void)unused;
  return PyLong_FromLong(foreign_view_release_count);
}

static PyObject *foreign_outstanding(PyObject *self, PyObject *unused) {
  (void)self, (void)unused;
  return PyLong_FromLong(foreign_outstanding_count);
}

// The C-level table of `obj`'s type, as a C consumer finds it: 1 found, 0 not offered, -1 raised.
static int c_api_of(PyTypeObject *type, const CaiCApi **api) {
  *api = NULL;
  PyObject *cap = PyObject_GetAttrString((PyObject *)type, CAI_C_API_ATTRIBUTE);
  if (cap == NULL) {
    if (!PyErr_ExceptionMatches(PyExc_AttributeError)) return -1;
    PyErr_Clear();
    return 0;
  }
  if (cap == Py_None) {
    Py_DECREF(cap);
    return 0;
  }
  const CaiCApiHeader *h = PyCapsule_GetPointer(cap, CAI_C_API_CAPSULE_NAME);
  Py_DECREF(cap);
  if (h == NULL) return -1;
  for (int hops = 0; h != NULL && hops < 16; h = h->prev_api, hops++)
    if (h->version.major == CAI_C_API_MAJOR) {
      *api = (const CaiCApi *)h;
      return 1;
    }
  return 0;
}

static PyObject *described(const CaiArray *a) {
  PyObject *shape = PyTuple_New(a->ndim);
  if (shape == NULL) return NULL;
  for (int i = 0; i < a->ndim; i++) PyTuple_SET_ITEM(shape, i, PyLong_FromLongLong(a->shape[i]));
  return Py_BuildValue("{sKsNsssisKsO}", "data", (unsigned long long)a->data, "shape", shape, "typestr", a->typestr,
                       "readonly", (int)a->readonly, "stream", (unsigned long long)a->stream, "owning",
                       a->release != NULL ? Py_True : Py_False);
}

static PyObject *raise_status(CaiStatus status, const CaiError *e) {
  return PyErr_Format(PyExc_ValueError, "%s: %s", cai_status_string(status), e->message);
}

// table_view(obj, allow_host=False, acquire=False, flags=0, via=None): the table of
// type(obj) (or of the type `via`) asked to view (or acquire, then release) obj into a
// struct, as a dict; the table's own refusal as ValueError("STATUS: message").
static PyObject *table_view(PyObject *self, PyObject *args, PyObject *kwargs) {
  static char *names[] = {"obj", "allow_host", "acquire", "flags", "via", NULL};
  PyObject *obj, *via = NULL;
  int allow_host = 0, acquire = 0;
  unsigned long long flags = 0;
  (void)self;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|ppKO!", names, &obj, &allow_host, &acquire, &flags,
                                   &PyType_Type, &via))
    return NULL;
  const CaiCApi *api;
  int found = c_api_of(via != NULL ? (PyTypeObject *)via : Py_TYPE(obj), &api);
  if (found < 0) return NULL;
  if (found == 0) Py_RETURN_NONE;
  CaiRequest request = {0};
  request.flags = flags | (allow_host ? CAI_REQUEST_ALLOW_HOST : 0);
  CaiArray a;
  CaiError e;
  CaiStatus s = (acquire ? api->acquire : api->view)(api, obj, &request, &a, &e);
  if (s == CAI_ERROR_PYTHON) return NULL;
  if (PyErr_Occurred()) return PyErr_Format(PyExc_SystemError, "an exception set with status %d", (int)s);
  if (s != CAI_OK) return raise_status(s, &e);
  PyObject *result = described(&a);
  if (acquire) cai_release(&a, NULL);
  return result;
}

// The arguments (obj, allow_host=False) of `view` and `import_kept`, as the object and the
// import's options (no sync): 0, or -1 with an exception set.
static int object_and_options(PyObject *args, PyObject *kwargs, PyObject **obj, CaiImportOptions *options) {
  static char *names[] = {"obj", "allow_host", NULL};
  int allow_host = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|p", names, obj, &allow_host)) return -1;
  *options = (CaiImportOptions){0};
  options->allow_host = (uint32_t)allow_host;
  options->sync_mode = CAI_SYNC_NONE;
  return 0;
}

// view(obj, allow_host=False): cai_python_view's struct, as a dict; view_or_own(obj,
// allow_host=False): cai_python_view_or_own's ("owning": whether it owns what it read), released
// before returning.
static PyObject *viewed(PyObject *args, PyObject *kwargs, int or_own) {
  PyObject *obj;
  CaiImportOptions options;
  if (object_and_options(args, kwargs, &obj, &options) != 0) return NULL;
  CaiArray a;
  if ((or_own ? cai_python_view_or_own : cai_python_view)(obj, &options, &a, NULL) != CAI_OK) return NULL;
  PyObject *result = described(&a);
  cai_release(&a, NULL);
  return result;
}

static PyObject *view(PyObject *self, PyObject *args, PyObject *kwargs) {
  (void)self;
  return viewed(args, kwargs, 0);
}

static PyObject *view_or_own(PyObject *self, PyObject *args, PyObject *kwargs) {
  (void)self;
  return viewed(args, kwargs, 1);
}

// acquire_kept(obj): the table's acquire, handed back as a capsule whose destructor releases it
// (for the lifetime tests: the object lives while the capsule does).
static void release_capsule(PyObject *capsule) {
  CaiArray *a = PyCapsule_GetPointer(capsule, "cai_offer_ext.acquired");
  cai_release(a, NULL);
  PyMem_Free(a);
}

static PyObject *acquire_kept(PyObject *self, PyObject *obj) {
  (void)self;
  const CaiCApi *api;
  int found = c_api_of(Py_TYPE(obj), &api);
  if (found <= 0) return found < 0 ? NULL : PyErr_Format(PyExc_TypeError, "no C-level table");
  CaiArray *a = PyMem_Malloc(sizeof *a);
  CaiError e;
  if (a == NULL) return PyErr_NoMemory();
  CaiStatus s = api->acquire(api, obj, NULL, a, &e);
  if (s != CAI_OK) {
    PyMem_Free(a);
    return s == CAI_ERROR_PYTHON ? NULL : raise_status(s, &e);
  }
  PyObject *capsule = PyCapsule_New(a, "cai_offer_ext.acquired", release_capsule);
  if (capsule == NULL) {
    cai_release(a, NULL);
    PyMem_Free(a);
  }
  return capsule;
}

// Runs work(arg) on a new thread that never attaches to the interpreter, as a C consumer's
// worker thread would, and waits for it: 0, or -1 with OSError set (work then ran here).
static int run_on_a_thread(void *(*work)(void *), void *arg) {
  pthread_t thread;
  int failed;
  Py_BEGIN_ALLOW_THREADS
  failed = pthread_create(&thread, NULL, work, arg);
  if (!failed) pthread_join(thread, NULL);
  Py_END_ALLOW_THREADS
  if (failed) {
    work(arg);
    PyErr_Format(PyExc_OSError, "pthread_create: %d", failed);
    return -1;
  }
  return 0;
}

// import_kept(obj, allow_host=False): (cai_python_from_object's struct as a dict, a capsule
// whose destructor releases the struct): whatever the struct holds of obj lives while the
// capsule does.
static void release_imported_capsule(PyObject *capsule) {
  CaiArray *a = PyCapsule_GetPointer(capsule, "cai_offer_ext.imported");
  cai_release(a, NULL);
  PyMem_Free(a);
}

static PyObject *import_kept(PyObject *self, PyObject *args, PyObject *kwargs) {
  PyObject *obj;
  CaiImportOptions options;
  (void)self;
  if (object_and_options(args, kwargs, &obj, &options) != 0) return NULL;
  CaiArray *a = PyMem_Malloc(sizeof *a);
  if (a == NULL) return PyErr_NoMemory();
  if (cai_python_from_object(obj, &options, a, NULL) != CAI_OK) {
    PyMem_Free(a);
    return NULL;
  }
  PyObject *description = described(a);
  PyObject *capsule = PyCapsule_New(a, "cai_offer_ext.imported", release_imported_capsule);
  if (capsule == NULL) {
    cai_release(a, NULL);
    PyMem_Free(a);
  }
  if (description == NULL || capsule == NULL) {
    Py_XDECREF(description);
    Py_XDECREF(capsule);
    return NULL;
  }
  return Py_BuildValue("(NN)", description, capsule);
}

// import_owner_is(obj, allow_host=False): whether the owner of cai_python_from_object's struct
// is obj itself (the struct released before returning).
static PyObject *import_owner_is(PyObject *self, PyObject *args, PyObject *kwargs) {
  PyObject *obj;
  CaiImportOptions options;
  (void)self;
  if (object_and_options(args, kwargs, &obj, &options) != 0) return NULL;
  CaiArray a;
  if (cai_python_from_object(obj, &options, &a, NULL) != CAI_OK) return NULL;
  int itself = a.owner == (void *)obj;
  cai_release(&a, NULL);
  return PyBool_FromLong(itself);
}

// release_on_a_thread(obj): obj's table acquires it (host memory allowed), and a versioned
// DLPack capsule of obj is taken as a consumer takes one (renamed "used_dltensor_versioned");
// the acquired struct's release and the tensor's deleter then run on a new thread that never
// attaches to the interpreter, as a C consumer's worker thread would run them.
static void *release_both(void *held) {
  CaiArray *acquired = ((void **)held)[0];
  CaiDLManagedTensorVersioned *tensor = ((void **)held)[1];
  acquired->release(acquired);
  tensor->deleter(tensor);
  return NULL;
}

// import_released_on_a_thread(obj): cai_python_from_object's struct (host memory allowed),
// released on a new thread that never attaches to the interpreter.
static void *release_one(void *array) {
  cai_release(array, NULL);
  return NULL;
}

static PyObject *import_released_on_a_thread(PyObject *self, PyObject *obj) {
  (void)self;
  CaiImportOptions options = {0};
  options.allow_host = 1;
  options.sync_mode = CAI_SYNC_NONE;
  CaiArray a;
  if (cai_python_from_object(obj, &options, &a, NULL) != CAI_OK) return NULL;
  if (run_on_a_thread(release_one, &a) != 0) return NULL;
  Py_RETURN_NONE;
}

static PyObject *release_on_a_thread(PyObject *self, PyObject *obj) {
  (void)self;
  const CaiCApi *api;
  int found = c_api_of(Py_TYPE(obj), &api);
  if (found <= 0) return found < 0 ? NULL : PyErr_Format(PyExc_TypeError, "no C-level table");
  CaiRequest request = {0};
  request.flags = CAI_REQUEST_ALLOW_HOST;
  CaiArray acquired;
  CaiError e;
  CaiStatus s = api->acquire(api, obj, &request, &acquired, &e);
  if (s != CAI_OK) return s == CAI_ERROR_PYTHON ? NULL : raise_status(s, &e);
  PyObject *method = PyObject_GetAttrString(obj, "__dlpack__");
  PyObject *no_arguments = PyTuple_New(0);
  PyObject *keywords = Py_BuildValue("{s(ii)si}", "max_version", 1, 0, "stream", -1);
  PyObject *capsule = method && no_arguments && keywords ? PyObject_Call(method, no_arguments, keywords) : NULL;
  Py_XDECREF(method);
  Py_XDECREF(no_arguments);
  Py_XDECREF(keywords);
  CaiDLManagedTensorVersioned *tensor =
      capsule == NULL ? NULL : PyCapsule_GetPointer(capsule, "dltensor_versioned");
  if (tensor == NULL || PyCapsule_SetName(capsule, "used_dltensor_versioned") < 0) {
    Py_XDECREF(capsule);
    acquired.release(&acquired);
    return NULL;
  }
  Py_DECREF(capsule);  /* renamed: its destructor leaves the tensor to this consumer */
  void *held[2] = {&acquired, tensor};
  if (run_on_a_thread(release_both, held) < 0) return NULL;
  Py_RETURN_NONE;
}

// delete_on_a_thread(capsule): takes a versioned DLPack capsule's tensor as a consumer does
// (renamed "used_dltensor_versioned") and runs its deleter on a new thread that never attaches
// to the interpreter, as a C consumer's worker thread would.
static void *delete_tensor(void *tensor) {
  ((CaiDLManagedTensorVersioned *)tensor)->deleter(tensor);
  return NULL;
}

static PyObject *delete_on_a_thread(PyObject *self, PyObject *capsule) {
  (void)self;
  CaiDLManagedTensorVersioned *tensor = PyCapsule_GetPointer(capsule, "dltensor_versioned");
  if (tensor == NULL || PyCapsule_SetName(capsule, "used_dltensor_versioned") < 0) return NULL;
  if (run_on_a_thread(delete_tensor, tensor) < 0) return NULL;
  Py_RETURN_NONE;
}

// offer(type): offers any type with this module's fill (the tests offer twice, and a
// type whose instances are no Image, to see the refusals).
static PyObject *offer(PyObject *self, PyObject *type) {
  (void)self;
  if (!PyType_Check(type)) return PyErr_Format(PyExc_TypeError, "a type, please");
  if (cai_python_offer((PyTypeObject *)type, image_fill) < 0) return NULL;
  Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"table_view", (PyCFunction)(void (*)(void))table_view, METH_VARARGS | METH_KEYWORDS, NULL},
    {"view", (PyCFunction)(void (*)(void))view, METH_VARARGS | METH_KEYWORDS, NULL},
    {"view_or_own", (PyCFunction)(void (*)(void))view_or_own, METH_VARARGS | METH_KEYWORDS, NULL},
    {"acquire_kept", acquire_kept, METH_O, NULL},
    {"release_on_a_thread", release_on_a_thread, METH_O, NULL},
    {"import_kept", (PyCFunction)(void (*)(void))import_kept, METH_VARARGS | METH_KEYWORDS, NULL},
    {"import_owner_is", (PyCFunction)(void (*)(void))import_owner_is, METH_VARARGS | METH_KEYWORDS, NULL},
    {"import_released_on_a_thread", import_released_on_a_thread, METH_O, NULL},
    {"delete_on_a_thread", delete_on_a_thread, METH_O, NULL},
    {"offer", offer, METH_O, NULL},
    {"foreign_outstanding", foreign_outstanding, METH_NOARGS, NULL},
    {"foreign_view_releases", foreign_view_releases, METH_NOARGS, NULL},
    {NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "cai_offer_ext", NULL, -1, methods};

PyMODINIT_FUNC PyInit_cai_offer_ext(void) {
  if (cai_python_import() < 0) return NULL;
  PyObject *m = PyModule_Create(&module);
  if (m == NULL) return NULL;
#ifdef Py_GIL_DISABLED
  /* Free-threaded CPython: loading the module keeps the GIL off (its state is per instance). */
  if (PyUnstable_Module_SetGIL(m, Py_MOD_GIL_NOT_USED) < 0) goto fail;
#endif
  PyObject *image = PyType_FromSpec(&image_spec);
  if (image == NULL || cai_python_offer((PyTypeObject *)image, image_fill) < 0 ||
      PyModule_AddObject(m, "Image", image) < 0)
    goto fail;
  if (PyType_Ready(&StaticImageType) < 0 || cai_python_offer(&StaticImageType, image_fill) < 0) goto fail;
  Py_INCREF(&StaticImageType);
  if (PyModule_AddObject(m, "StaticImage", (PyObject *)&StaticImageType) < 0) goto fail;
  PyObject *foreign = PyType_FromSpec(&foreign_spec);
  PyObject *foreign_api = PyCapsule_New((void *)&FOREIGN_API, CAI_C_API_CAPSULE_NAME, NULL);
  int foreign_set = foreign && foreign_api ? PyObject_SetAttrString(foreign, CAI_C_API_ATTRIBUTE, foreign_api) : -1;
  Py_XDECREF(foreign_api);
  if (foreign_set < 0 || PyModule_AddObject(m, "Foreign", foreign) < 0) {
    Py_XDECREF(foreign);
    goto fail;
  }
  PyModule_AddIntConstant(m, "FAULT_REFUSES", FAULT_REFUSES);
  PyModule_AddIntConstant(m, "FAULT_RAISES", FAULT_RAISES);
  PyModule_AddIntConstant(m, "FAULT_NEGATIVE_SHAPE", FAULT_NEGATIVE_SHAPE);
  PyModule_AddIntConstant(m, "FAULT_SETS_RELEASE", FAULT_SETS_RELEASE);
  PyModule_AddIntConstant(m, "FAULT_SILENT_PYTHON", FAULT_SILENT_PYTHON);
  PyModule_AddIntConstant(m, "FAULT_CHANGES", FAULT_CHANGES);
  PyModule_AddIntConstant(m, "FAULT_REFUSES_AROUND_A_VIEW", FAULT_REFUSES_AROUND_A_VIEW);
  PyModule_AddIntConstant(m, "FAULT_BAD_DEVICE", FAULT_BAD_DEVICE);
  PyModule_AddIntConstant(m, "FILLS_FROM_BASE", FILLS_FROM_BASE);
  PyModule_AddIntConstant(m, "NAMES_DEVICE_1", NAMES_DEVICE_1);
  PyModule_AddIntConstant(m, "FAULT_OPENCL_MEMORY", FAULT_OPENCL_MEMORY);
  PyModule_AddIntConstant(m, "FAULT_HOST_DEVICE_ID", FAULT_HOST_DEVICE_ID);
  PyModule_AddIntConstant(m, "FAULT_CUDA_DEVICE_ID", FAULT_CUDA_DEVICE_ID);
  PyModule_AddIntConstant(m, "FAULT_SILENT_REFUSAL", FAULT_SILENT_REFUSAL);
  PyModule_AddIntConstant(m, "VIEWS_BASE", VIEWS_BASE);
  PyModule_AddIntConstant(m, "EXPORTS_BASE", EXPORTS_BASE);
  return m;
fail:
  Py_DECREF(m);
  return NULL;
}
