# cython: freethreading_compatible=True
# A Cython extension whose module never calls cai_python_import(): the table is read on first use.
from cai.capi cimport CaiArray, CaiError, cai_python_from_object, cai_release

cdef extern from "description.h":
    object cai_test_description(const CaiArray *a)


def describe(obj):
    cdef CaiArray a
    cdef CaiError e
    cai_python_from_object(obj, NULL, &a, &e)
    try:
        return cai_test_description(&a)
    finally:
        cai_release(&a, NULL)
