"""flashcl.Error: a status of flashcl.h and the library's message."""
from . import _capi


class Error(RuntimeError):
    """A call was refused or failed; nothing was enqueued or written.

    ``status`` is the fcl_status code (an int, ``flashcl.ERROR_*``),
    ``status_name`` its name in flashcl.h and ``message`` what the library
    (fcl_context_last_error) or, for a shape the C API cannot see, the
    binding says about the argument at fault.
    """

    def __init__(self, status, message):
        self.status = int(status)
        self.status_name = _capi.STATUS_NAMES.get(self.status, "fcl_status %d" % self.status)
        self.message = message
        super().__init__("%s: %s" % (self.status_name, message))


def invalid(message):
    """The binding's own check of an argument the C API cannot see (a shape,
    the dtype of a raw buffer): FCL_ERROR_INVALID_ARGUMENT, as the library's."""
    return Error(_capi.ERROR_INVALID_ARGUMENT, message)


def check(status, handle):
    """Raises Error for a status other than FCL_OK, with the message of the
    context handle (None: of the last fcl_context_create in this thread)."""
    if status != _capi.OK:
        msg = _capi.lib.fcl_context_last_error(handle)
        raise Error(status, msg.decode("utf-8", "replace") if msg else
                    _capi.lib.fcl_status_string(status).decode())
