"""The exception libcai's Python binding raises for a descriptor or call it refuses."""

from ._native import STATUS_CODES


class CaiError(ValueError):
    """A descriptor or call libcai refused. `status` is the CAI_ERROR_* name, `code` its
    number, `driver_result` the raw result of a failed driver call (a CUresult, or an OpenCL cl_int;
    0 otherwise)."""

    # The name the documentation uses and tracebacks print: `cai.CaiError`, where it is exported.
    __module__ = "cai"

    def __init__(self, status: str, message: str, driver_result: int = 0):
        if not (isinstance(status, str) and isinstance(message, str) and isinstance(driver_result, int)):
            raise TypeError(
                f"CaiError(status, message, driver_result=0) takes a CAI_ERROR_* name (str), a message (str) and "
                f"an int, not {type(status).__name__}, {type(message).__name__}, {type(driver_result).__name__}")
        self.status = status
        self.code = STATUS_CODES.get(status, -1)
        self.driver_result = driver_result
        super().__init__(message if message.startswith(status) else f"{status}: {message}")


class PointerNotCheckedWarning(UserWarning):
    """`cai.from_object` took an array whose data pointer no driver checked: the default
    pointer check was skipped because no CUDA driver could be loaded (or it found no device),
    so the array is its producer's word alone. Not issued for an empty array, for a tensor its
    producer declared host memory (kDLCPU, taken with `allow_host=True`), or with an explicit
    `pointer_check=cai.POINTER_CHECK_NEVER`. Make it an error with
    `warnings.simplefilter("error", cai.PointerNotCheckedWarning)` (or pass
    `pointer_check=cai.POINTER_CHECK_ALWAYS`, which raises CAI_ERROR_NO_DRIVER and says why)."""

    __module__ = "cai"
