"""The exception libcai's Python binding raises for a descriptor or call it refuses."""

from ._native import STATUS_CODES


class CaiError(ValueError):
    """A descriptor or call libcai refused. `status` is the CAI_ERROR_* name, `code` its
    number, `cu_result` the raw CUresult of a failed driver call (0 otherwise)."""

    def __init__(self, status: str, message: str, cu_result: int = 0):
        self.status = status
        self.code = STATUS_CODES.get(status, -1)
        self.cu_result = cu_result
        super().__init__(message if message.startswith(status) else f"{status}: {message}")
