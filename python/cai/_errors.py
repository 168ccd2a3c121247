"""The exception libcai's Python binding raises for a descriptor or call it refuses."""

from ._native import STATUS_CODES


class CaiError(ValueError):
    """A descriptor or call libcai refused. `status` is the CAI_ERROR_* name, `code` its
    number, `driver_result` the raw result of a failed driver call (a CUresult, or an OpenCL cl_int;
    0 otherwise)."""

    def __init__(self, status: str, message: str, driver_result: int = 0):
        self.status = status
        self.code = STATUS_CODES.get(status, -1)
        self.driver_result = driver_result
        super().__init__(message if message.startswith(status) else f"{status}: {message}")
