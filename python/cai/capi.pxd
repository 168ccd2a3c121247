# Cython declarations of libcai's C API for compiled extensions (include/cai_python.h):
#
#     from cai.capi cimport CaiArray, CaiError, cai_python_import, cai_python_from_object, cai_release
#     cai_python_import()                          # once, at module level
#     def nbytes(obj):
#         cdef CaiArray a
#         cdef CaiError e
#         cai_python_from_object(obj, NULL, &a, &e)  # raises libcai's exception on failure
#         ...
#         cai_release(&a, NULL)
#
# Build with include_dirs=[cai.get_include()]; no library to link. Every name is the one of
# cai.h and cai_python.h; structs list the fields a consumer reads (all of them).
#
# A cdef class becomes a producer with one fill function (cai_python.h's CaiPythonFill says
# what it writes), declared `except CAI_ERROR_PYTHON` so that it may raise: the exception
# reaches the consumer as it is. README.md's "Compiled Python extensions" has the whole example:
#
#     cdef CaiStatus fill(object self, CaiArray *out, CaiDLDevice *device,
#                         CaiError *error) except CAI_ERROR_PYTHON:
#         cdef Image image = <Image>self
#         out.data = <uintptr_t><char *>image.pixels
#         ...
#         return CAI_OK
#
#     cai_python_offer(<PyTypeObject *>Image, fill)   # at module level, after the class
#
# A cdef class is a static type (a heap type with Cython's type specs) that Cython marks
# immutable: the offer writes the attributes into its dict.

from cpython.object cimport PyTypeObject
from libc.stdint cimport int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t

cdef extern from "cai_python.h":
    ctypedef int32_t CaiStatus

    enum:
        CAI_OK
        CAI_MAX_NDIM
        CAI_TYPESTR_CAPACITY
        CAI_ERROR_MESSAGE_CAPACITY
        CAI_MEMORY_CUDA
        CAI_MEMORY_OPENCL
        CAI_STREAM_NONE
        CAI_STREAM_LEGACY
        CAI_STREAM_PER_THREAD
        CAI_SYNC_DEFAULT
        CAI_SYNC_STREAM_ORDERED
        CAI_SYNC_BLOCKING
        CAI_SYNC_NONE
        CAI_PENDING_POLL
        CAI_PENDING_WAIT
        CAI_POINTER_CHECK_DEFAULT
        CAI_POINTER_CHECK_ALWAYS
        CAI_POINTER_CHECK_NEVER
        CAI_ERROR_NULL_ARGUMENT
        CAI_ERROR_INVALID_ARGUMENT
        CAI_ERROR_INVALID_VERSION
        CAI_ERROR_INVALID_SHAPE
        CAI_ERROR_INVALID_STRIDES
        CAI_ERROR_INVALID_TYPESTR
        CAI_ERROR_INVALID_DATA
        CAI_ERROR_INVALID_STREAM
        CAI_ERROR_INVALID_MASK
        CAI_ERROR_INVALID_DESCR
        CAI_ERROR_OVERFLOW
        CAI_ERROR_READONLY
        CAI_ERROR_NO_DRIVER
        CAI_ERROR_DRIVER
        CAI_ERROR_NOT_DEVICE_POINTER
        CAI_ERROR_OUT_OF_BOUNDS
        CAI_ERROR_PANIC
        CAI_ERROR_ABI_VERSION
        CAI_ERROR_PYTHON
        CAI_ERROR_HOST_MEMORY
        CAI_ERROR_WRONG_CONTEXT
        CAI_ERROR_NOT_SUPPORTED
        CAI_ERROR_STREAM_CAPTURING
        CAI_ERROR_NOT_SHAREABLE
        CAI_ERROR_IPC_DESCRIPTOR
        CAI_PYTHON_API_MAJOR
        CAI_PYTHON_API_MINOR
        CAI_DL_CPU
        CAI_DL_CUDA
        CAI_ABI_MINOR
        CAI_DL_INT
        CAI_DL_UINT
        CAI_DL_FLOAT
        CAI_DL_BFLOAT
        CAI_DL_COMPLEX
        CAI_DL_BOOL
        CAI_DL_FLOAT8_E3M4
        CAI_DL_FLOAT8_E4M3
        CAI_DL_FLOAT8_E4M3B11FNUZ
        CAI_DL_FLOAT8_E4M3FN
        CAI_DL_FLOAT8_E4M3FNUZ
        CAI_DL_FLOAT8_E5M2
        CAI_DL_FLOAT8_E5M2FNUZ
        CAI_DL_FLOAT8_E8M0FNU
        CAI_DL_FLOAT6_E2M3FN
        CAI_DL_FLOAT6_E3M2FN
        CAI_DL_FLOAT4_E2M1FN
        CAI_C_API_MAJOR
        CAI_C_API_MINOR
        CAI_REQUEST_ALLOW_HOST

    ctypedef struct CaiField:
        char name[64]
        char typestr[32]
        uint64_t offset

    ctypedef struct CaiDLDataType:
        uint8_t code
        uint8_t bits
        uint16_t lanes

    ctypedef struct CaiArray:
        uint32_t abi_version
        int32_t version
        void *owner
        void (*release)(CaiArray *array) noexcept nogil
        int32_t ndim
        uint32_t readonly
        uint32_t strides_given
        uint32_t descr_count
        uint64_t data
        uint64_t stream
        char typestr[32]
        int64_t shape[64]
        int64_t strides[64]
        const CaiArray *mask
        const CaiField *descr
        uint32_t memory
        uint32_t stream_kind
        uint64_t byte_offset
        CaiDLDataType dl_dtype

    ctypedef struct CaiError:
        int32_t code
        int32_t driver_result
        char message[512]

    ctypedef struct CaiLayout:
        uint64_t element_count
        uint64_t nbytes
        int64_t extent_begin
        int64_t extent_end
        uint32_t c_contiguous
        uint32_t f_contiguous
        uint32_t strides_itemsize_aligned

    ctypedef struct CaiImportOptions:
        uint64_t consumer_stream
        int32_t sync_mode
        int32_t pointer_check
        uint32_t writable
        uint32_t native_only
        uint32_t allow_host

    ctypedef struct CaiSyncOptions:
        uint64_t consumer_stream
        int32_t sync_mode

    ctypedef struct CaiPointerInfo:
        uint64_t device_pointer
        uint64_t allocation_base
        uint64_t allocation_size
        void *context
        int32_t device_ordinal
        uint32_t memory_type
        uint32_t is_managed
        uint32_t checked

    ctypedef struct CaiDLDevice:
        int32_t device_type
        int32_t device_id

    # The C-level CUDA Array Interface (docs/c-level-cai.md): what a consumer finds in the
    # capsule CAI_C_API_CAPSULE_NAME of the type attribute CAI_C_API_ATTRIBUTE.
    const char *CAI_C_API_ATTRIBUTE
    const char *CAI_C_API_CAPSULE_NAME

    ctypedef struct CaiCApiVersion:
        uint32_t major
        uint32_t minor

    ctypedef struct CaiCApiHeader:
        CaiCApiVersion version
        const CaiCApiHeader *prev_api

    ctypedef struct CaiRequest:
        uint64_t flags
        uint64_t consumer_stream
        uint64_t reserved[2]

    ctypedef struct CaiCApi:
        CaiCApiHeader header
        CaiStatus (*view)(const CaiCApi *api, object obj, const CaiRequest *request, CaiArray *out,
                          CaiError *error) noexcept
        CaiStatus (*acquire)(const CaiCApi *api, object obj, const CaiRequest *request, CaiArray *out,
                             CaiError *error) noexcept
        CaiStatus (*current_stream)(const CaiCApi *api, int32_t device_ordinal, uint64_t *stream,
                                    CaiError *error) noexcept

    # A producer's fill function (see cai_python.h): describes `self` into `out`; returns CAI_OK,
    # a status with `error` written, or CAI_ERROR_PYTHON with an exception set, which a Cython
    # fill declared `except CAI_ERROR_PYTHON` does by raising.
    ctypedef CaiStatus (*CaiPythonFill)(object self, CaiArray *out, CaiDLDevice *device,
                                        CaiError *error) except CAI_ERROR_PYTHON

    # Reads the table from the installed cai package (raises ImportError on a mismatch).
    int cai_python_import() except -1
    # Raises libcai's exception (cai.CaiError, or the object's own) when it fails.
    int32_t cai_python_from_object(object obj, const CaiImportOptions *options, CaiArray *out,
                                   CaiError *error) except *
    # The same, borrowed: no reference, no allocation, `release` NULL; valid while `obj` is held
    # and no Python code runs. Refuses a mask and named descr fields (see cai_python.h).
    # Raises libcai's exception when it fails.
    int32_t cai_python_view(object obj, const CaiImportOptions *options, CaiArray *out,
                            CaiError *error) except *
    # cai_python_view where it can borrow, else cai_python_from_object (`out.release` NULL for
    # a borrowed struct, set for an owning one: cai_release it). Raises libcai's exception when
    # it fails.
    int32_t cai_python_view_or_own(object obj, const CaiImportOptions *options, CaiArray *out,
                                   CaiError *error) except *
    # cai.from_buffer_interface from C: an object of the OpenCL/CUDA Buffer Interface (or a
    # pyopencl.array.Array), owning as cai_python_from_object (the consumer's cl_command_queue
    # or stream as options.consumer_stream). Raises libcai's exception when it fails.
    int32_t cai_python_from_buffer_interface(object obj, const CaiImportOptions *options, CaiArray *out,
                                             CaiError *error) except *
    # A new cai.Array that owns `array`; raises (and leaves `array` the caller's) on failure.
    object cai_python_to_object(CaiArray *array)
    # Gives the type (a cdef class, after its definition) __cuda_array_interface__, __dlpack__,
    # __dlpack_device__, DLPack's exchange table and the C-level CAI table, each read through
    # `fill`; raises TypeError when the type defines one of them itself or was offered already.
    int cai_python_offer(PyTypeObject *type, CaiPythonFill fill) except -1

    CaiStatus cai_validate(const CaiArray *array, CaiError *error) noexcept
    CaiStatus cai_layout(const CaiArray *array, CaiLayout *layout, CaiError *error) noexcept
    CaiStatus cai_release(CaiArray *array, CaiError *error) noexcept nogil
    CaiStatus cai_move(CaiArray *dst, CaiArray *src, CaiError *error) noexcept nogil
    CaiStatus cai_import(const CaiArray *array, const CaiImportOptions *options, CaiPointerInfo *info,
                         CaiError *error) noexcept nogil
    CaiStatus cai_sync(const CaiArray *array, const CaiSyncOptions *options, CaiError *error) noexcept nogil
    CaiStatus cai_pointer_info(uint64_t pointer, CaiPointerInfo *info, CaiError *error) noexcept nogil
    CaiStatus cai_driver_status(int32_t *version, CaiError *error) noexcept nogil
    # Releases `array` once the GPU has passed the work enqueued on `stream` so far (the
    # package's queue, drained at interpreter exit); on failure `array` is still the caller's.
    CaiStatus cai_release_after(CaiArray *array, uint64_t stream, CaiError *error) noexcept nogil
    CaiStatus cai_release_pending(int32_t mode, uint64_t *left, CaiError *error) noexcept nogil
    const char *cai_status_string(CaiStatus status) noexcept
    const char *cai_library_version() noexcept
