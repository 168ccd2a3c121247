# A Cython extension built against the installed cai package only (cai/capi.pxd).
from libc.string cimport memset

from cai.capi cimport (CaiArray, CaiError, CaiImportOptions, cai_python_from_buffer_interface,
                       cai_python_from_object, cai_python_import, cai_python_to_object, cai_python_view,
                       cai_release)

cdef extern from "description.h":
    object cai_test_description(const CaiArray *a)

cai_python_import()


cdef object released_description(CaiArray *a):
    """The description of an owning struct, released once read."""
    try:
        return cai_test_description(a)
    finally:
        cai_release(a, NULL)


cdef object described(obj, bint allow_host):
    cdef CaiArray a
    cdef CaiError e
    cdef CaiImportOptions options
    memset(&options, 0, sizeof(options))
    options.allow_host = allow_host
    cai_python_from_object(obj, &options, &a, &e)
    return released_description(&a)


def describe(obj):
    return described(obj, False)


def describe_host(obj):
    return described(obj, True)


def hand_back(obj):
    cdef CaiArray a
    cdef CaiError e
    cai_python_from_object(obj, NULL, &a, &e)
    try:
        return cai_python_to_object(&a)
    except BaseException:
        cai_release(&a, NULL)
        raise


def describe_view(obj):
    cdef CaiArray a
    cdef CaiError e
    cai_python_view(obj, NULL, &a, &e)
    return cai_test_description(&a)


def describe_buffer_interface(obj):
    cdef CaiArray a
    cdef CaiError e
    cai_python_from_buffer_interface(obj, NULL, &a, &e)
    return released_description(&a)
