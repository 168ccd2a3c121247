"""The exception libcai's Python binding raises for a descriptor it refuses."""

from ._lib import STATUS_CODES, STATUS_NAMES


class CaiError(ValueError):
    """A descriptor or call libcai refused. `status` is the CAI_ERROR_* name, `code` its
    number, `cu_result` the raw CUresult of a failed driver call (0 otherwise)."""

    def __init__(self, status, message, cu_result=0):
        self.status = status
        self.code = STATUS_CODES.get(status, -1)
        self.cu_result = cu_result
        super().__init__(message if message.startswith(status) else f"{status}: {message}")


def refuse(status, message):
    """Raises the CaiError for a rule the Python side checks (the dict's Python types)."""
    raise CaiError(status, message)


def c_message(error):
    """The message libcai wrote into a CaiError struct, without its leading status name."""
    text = error.message.decode("utf-8", "replace")
    name = STATUS_NAMES.get(error.code, "")
    return text[len(name) + 2:] if name and text.startswith(name + ": ") else text


def raise_for(status, error):
    """Raises the CaiError a libcai call reported, if any."""
    if status != 0:
        name = STATUS_NAMES.get(status, f"CAI_ERROR_UNKNOWN({status})")
        raise CaiError(name, c_message(error) or name, error.cu_result)
