# cython: freethreading_compatible=True
# A Cython extension built against the installed cai package only (cai/capi.pxd), and an image
# type it offers (cai_python_offer).
from cpython.object cimport PyTypeObject
from libc.stdint cimport uint64_t, uintptr_t
from libc.string cimport memset, strcpy

from cai.capi cimport (CAI_DL_CPU, CAI_ERROR_INVALID_SHAPE, CAI_ERROR_PYTHON, CAI_OK, CAI_TYPESTR_CAPACITY,
                       CaiArray, CaiDLDevice, CaiError, CaiImportOptions, CaiStatus,
                       cai_python_from_buffer_interface, cai_python_from_object, cai_python_import,
                       cai_python_offer, cai_python_to_object, cai_python_view, cai_python_view_or_own,
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


cdef CaiImportOptions import_options(bint allow_host):
    """The default options, host memory allowed or not."""
    cdef CaiImportOptions options
    memset(&options, 0, sizeof(options))
    options.allow_host = allow_host
    return options


cdef object described(obj, bint allow_host):
    cdef CaiArray a
    cdef CaiError e
    cdef CaiImportOptions options = import_options(allow_host)
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


def view_or_own_describe(obj, bint allow_host):
    """(what cai_python_view_or_own saw, whether it owns an import): the C module's."""
    cdef CaiArray a
    cdef CaiError e
    cdef CaiImportOptions options = import_options(allow_host)
    cai_python_view_or_own(obj, &options, &a, &e)
    owns = a.release != NULL
    return released_description(&a), owns


def describe_buffer_interface(obj):
    cdef CaiArray a
    cdef CaiError e
    cai_python_from_buffer_interface(obj, NULL, &a, &e)
    return released_description(&a)


# An image type offered by cai_python_offer from Cython: a 2-d array over device memory it is
# given (the fake driver's), or over host memory it owns (the bytes it is given); a `fault`
# chosen at construction makes its fill break one rule, for the tests of the glue's errors.
FAULT_REFUSES = 1
FAULT_RAISES = 2
FAULT_NEGATIVE_SHAPE = 7

cdef int live = 0


def live_images():
    return live


cdef class Image:
    cdef readonly uint64_t data
    cdef readonly Py_ssize_t height, width
    cdef bytes typestr
    cdef tuple strides
    cdef uint64_t stream
    cdef bint is_readonly, host
    cdef int fault
    cdef bytes own
    cdef readonly int calls
    cdef object __weakref__

    def __cinit__(self, uint64_t data, Py_ssize_t height, Py_ssize_t width, str typestr="|u1", strides=None,
                  uint64_t stream=0, bint readonly=False, bint host=False, int fault=0, bytes own=None):
        global live
        self.typestr = typestr.encode()
        if len(self.typestr) >= CAI_TYPESTR_CAPACITY:
            raise ValueError("typestr too long")
        self.strides = None if strides is None else tuple(strides)
        if self.strides is not None and len(self.strides) != 2:
            raise ValueError("two strides, or None")
        self.own = own
        self.data = data if own is None else <uint64_t><uintptr_t><const char *>own
        self.height, self.width, self.stream = height, width, stream
        self.is_readonly, self.host, self.fault = readonly, host, fault
        live += 1

    def __dealloc__(self):
        global live
        live -= 1


cdef CaiStatus image_fill(object self, CaiArray *out, CaiDLDevice *device, CaiError *error) except CAI_ERROR_PYTHON:
    cdef Image image = <Image>self
    image.calls += 1
    out.data = image.data
    out.ndim = 2
    out.shape[0] = image.height
    out.shape[1] = image.width
    strcpy(out.typestr, image.typestr)
    if image.strides is not None:
        out.strides_given = 1
        out.strides[0] = image.strides[0]
        out.strides[1] = image.strides[1]
    out.readonly = image.is_readonly
    out.stream = image.stream
    if image.host:
        device.device_type = CAI_DL_CPU
        device.device_id = 0
    if image.fault == FAULT_REFUSES:
        error.code = CAI_ERROR_INVALID_SHAPE
        strcpy(error.message, b"height is not set yet (call load() first)")
        return CAI_ERROR_INVALID_SHAPE
    if image.fault == FAULT_RAISES:
        raise RuntimeError("the image was closed")
    if image.fault == FAULT_NEGATIVE_SHAPE:
        out.shape[0] = -3
    return CAI_OK


cai_python_offer(<PyTypeObject *>Image, image_fill)


def offer_again():
    """Offers the type again (the tests see the TypeError)."""
    cai_python_offer(<PyTypeObject *>Image, image_fill)
