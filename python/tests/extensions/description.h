/* What a test extension saw of an array, as a Python tuple the tests compare with what
   cai.from_object made: (version, ndim, shape, strides or None, typestr, data, readonly,
   stream, memory, descr, mask's description or None, dl_dtype as (code, bits, lanes)). */
#ifndef CAI_TEST_DESCRIPTION_H
#define CAI_TEST_DESCRIPTION_H

#include "cai_python.h"

static PyObject *cai_test_description(const CaiArray *a) {
  PyObject *shape = PyTuple_New(a->ndim), *strides = Py_None, *descr = PyList_New(0), *mask = Py_None;
  if (shape == NULL || descr == NULL) return NULL;
  for (int i = 0; i < a->ndim; i++) PyTuple_SET_ITEM(shape, i, PyLong_FromLongLong(a->shape[i]));
  if (a->strides_given) {
    strides = PyTuple_New(a->ndim);
    for (int i = 0; i < a->ndim; i++) PyTuple_SET_ITEM(strides, i, PyLong_FromLongLong(a->strides[i]));
  } else {
    Py_INCREF(Py_None);
  }
  for (uint32_t i = 0; i < a->descr_count; i++) {
    PyObject *field = Py_BuildValue("(ssK)", a->descr[i].name, a->descr[i].typestr,
                                    (unsigned long long)a->descr[i].offset);
    PyList_Append(descr, field);
    Py_DECREF(field);
  }
  if (a->mask != NULL) {
    mask = cai_test_description(a->mask);
  } else {
    Py_INCREF(Py_None);
  }
  return Py_BuildValue("(iiNNsKIKINN(iii))", a->version, a->ndim, shape, strides, a->typestr,
                       (unsigned long long)a->data, a->readonly, (unsigned long long)a->stream, a->memory,
                       descr, mask, (int)a->dl_dtype.code, (int)a->dl_dtype.bits, (int)a->dl_dtype.lanes);
}

#endif
