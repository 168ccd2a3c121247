"""Type stubs for cai._native, libcai's CPython extension module (python/src)."""

from typing import Any, Final, NoReturn

SYNC_DEFAULT: Final[int]
SYNC_STREAM_ORDERED: Final[int]
SYNC_BLOCKING: Final[int]
SYNC_NONE: Final[int]
POINTER_CHECK_DEFAULT: Final[int]
POINTER_CHECK_ALWAYS: Final[int]
POINTER_CHECK_NEVER: Final[int]
STATUS_CODES: Final[dict[str, int]]
__version__: Final[str]
# The C API for compiled extensions (include/cai_python.h): a capsule named "cai._native._C_API".
_C_API: Final[object]

class Array:
    """A validated device array; pass it to C as `CaiArray*` (ctypes: as is; cffi: `.ptr`)."""

    @classmethod
    def from_c(cls, pointer: Any) -> Array:
        """Takes over a CaiArray made in C (a ctypes pointer, `byref`, struct, or an address):
        its release callback runs once, when this Array is garbage-collected."""
    @property
    def ptr(self) -> int:
        """Address of the CaiArray, valid while this Array lives."""
    @property
    def _as_parameter_(self) -> Any: ...
    @property
    def shape(self) -> tuple[int, ...]:
        """The extent of each dimension, as a tuple of ints (`()` for a 0-d array)."""
    @property
    def ndim(self) -> int:
        """The number of dimensions (`len(shape)`), 0 to 64."""
    @property
    def typestr(self) -> str:
        """The struct's typestr (numpy's canonical spelling for what was read from a dict or DLPack)."""
    @property
    def itemsize(self) -> int:
        """Bytes per element, from the typestr (`'<f4'`: 4)."""
    @property
    def dtype(self) -> Any:
        """numpy's dtype for the typestr (needs numpy)."""
    @property
    def element_type(self) -> str | None:
        """The elements' type by the name torch, jax and ml_dtypes share ('bfloat16',
        'float8_e4m3fn', 'float32'); None for a typestr that names no such type."""
    @property
    def strides(self) -> tuple[int, ...]:
        """Byte strides; C-contiguous ones when the descriptor gave none."""
    @property
    def size(self) -> int:
        """The number of elements: the product of `shape` (1 for a 0-d array)."""
    @property
    def nbytes(self) -> int:
        """Bytes the elements occupy: `size * itemsize` (not the span of a strided array)."""
    @property
    def readonly(self) -> bool:
        """True when the producer marked the data read-only."""
    @property
    def is_c_contiguous(self) -> bool:
        """True when the elements lie in row-major order with no gaps."""
    @property
    def is_f_contiguous(self) -> bool:
        """True when the elements lie in column-major order with no gaps."""
    @property
    def data_ptr(self) -> int:
        """The address of the first element as an int (0 for an empty array)."""
    @property
    def stream(self) -> int | None:
        """The producer's stream (None, 1, 2 or a handle)."""
    @property
    def pointer_info(self) -> dict[str, int] | None:
        """What the driver said about the data pointer at import, or None when the pointer was
        not checked (an empty array, POINTER_CHECK_NEVER, `from_c`, or no driver)."""
    @property
    def owner(self) -> Any:
        """The object this Array keeps alive (the producer), or None."""
    @property
    def mask(self) -> Array | None:
        """The mask as a cai.Array, or None."""
    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        """The interface in libcai's export form, as `cai_export` writes it."""
    @property
    def buffer(self) -> Any:
        """The Buffer Interface's `buffer`: the cl_mem's holder for OpenCL memory, the device
        pointer for CUDA memory."""
    @property
    def offset(self) -> int:
        """The Buffer Interface's `offset` (always 0 for CUDA memory)."""
    def release(self, *, stream: Any = None) -> None:
        """Lets go of the memory now; the metadata stays readable. With `stream`, what keeps
        the memory alive is let go of once the GPU has passed the work enqueued on it so far."""
    def __dlpack_device__(self) -> tuple[int, int]:
        """DLPack's `(device_type, device_id)` of the memory."""
    def __dlpack__(
        self,
        *,
        stream: Any = None,
        max_version: tuple[int, int] | None = None,
        dl_device: tuple[int, int] | None = None,
        copy: bool | None = None,
    ) -> Any:
        """A DLPack capsule viewing this array's memory; never copies."""
    def __reduce__(self) -> tuple[Any, tuple[bytes]]:
        """Pickles device memory to its IPC descriptor (`ipc_export`), opened by `ipc_open`
        when loaded in another process, and this Array itself in this one while it lives;
        host memory is refused."""
    def __deepcopy__(self, memo: Any, /) -> NoReturn:
        """Raises TypeError: a deep copy would be this same view; copy with the producer."""

def from_object(
    obj: Any,
    stream: Any = None,
    sync: bool | int | None = None,
    writable: bool = False,
    pointer_check: int | None = None,
    allow_host: bool = False,
) -> Array:
    """Imports a CAI or DLPack producer: validated, pointer-checked where a driver loads (else
    cai.PointerNotCheckedWarning), synchronized; raises cai.CaiError naming the rule broken."""
def from_buffer_interface(
    obj: Any,
    queue: Any = None,
    sync: bool | int | None = None,
    writable: bool = False,
) -> Array:
    """Imports an object of the OpenCL/CUDA Buffer Interface (or a pyopencl.array.Array),
    checked by the same rules as a CAI array and ordered after its producer."""
def ipc_export(obj: Any, stream: Any = None) -> bytes:
    """The bytes of a CaiIpcDescriptor of `obj`'s device memory, for `ipc_open` in another
    process on this machine; `obj` must stay alive while that process uses the memory."""
def ipc_open(descriptor: bytes | bytearray, stream: Any = None, sync: bool | int | None = None) -> Array:
    """Opens an IPC descriptor another process exported: a view of the same memory, ordered
    after the exporter's work, whose release closes the handle."""
def _ipc_rebuild(descriptor: bytes | bytearray) -> Array:
    """What a pickled cai.Array calls when loaded: `ipc_open(descriptor)`."""
def release_pending(wait: bool = False) -> int:
    """Runs the releases deferred by `Array.release(stream=...)` whose stream has passed the
    point (with `wait=True` all of them, waiting); returns how many are still pending."""
def validate(obj: Any) -> None:
    """Checks a CAI dict (or an object exposing one) by every rule of the spec; raises
    cai.CaiError naming the rule broken."""
def _read_protocol(obj: Any, protocol: str) -> tuple[Array, tuple[int, int] | None, bool] | None:
    """For cai.testing: `obj` read by one protocol alone ("c_api_view", "c_api_acquire",
    "exchange", "exchange_view", "buffer_interface", or "capsule" for a DLPack capsule), with
    no sync and no pointer check: the Array, the device the protocol reported, and whether it
    owned a release; None when the type does not offer that table."""
