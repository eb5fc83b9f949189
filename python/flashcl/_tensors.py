"""pyopencl arrays as flashcl.h arguments: strided views (fcl_tensor),
raw buffers (cl_mem), dtypes, and the checks of shapes that the C API
cannot see (it knows a view's strides and extent, not its extents)."""
import numpy as np
import pyopencl.array as cl_array

from . import _capi
from ._context import Context
from ._errors import invalid

_BF16_NAMES = ("bf16", "bfloat16")


def resolve_context(context, arrays):
    """The context to run on: context=, else that of the first array's
    queue. Arrays whose work is on another queue are waited for first."""
    arrays = [a for a in arrays if isinstance(a, cl_array.Array)]
    if context is None:
        queued = [a for a in arrays if a.queue is not None]
        if not queued:
            raise invalid("context: none given and no array has a queue")
        context = Context.of_queue(queued[0].queue)
    waited = {context.queue.int_ptr}
    for a in arrays:
        if a.queue is not None and a.queue.int_ptr not in waited:
            waited.add(a.queue.int_ptr)
            a.queue.finish()
    return context


def fcl_dtype(a, name, dtype=None):
    """The fcl_dtype of an array: float32, float16, or uint16 with dtype="bf16"."""
    dt = np.dtype(a.dtype)
    if dt == np.float32:
        return _capi.F32
    if dt == np.float16:
        return _capi.F16
    if dt == np.uint16:
        if dtype is not None and str(dtype).lower() in _BF16_NAMES:
            return _capi.BF16
        raise invalid("%s: is uint16; pass dtype='bf16' for bfloat16 bits" % name)
    raise invalid("%s: dtype %s; flashcl takes float32, float16 and bf16 (uint16 "
                  "with dtype='bf16')" % (name, dt))


def check_dtype_arg(dtype):
    if dtype is not None and str(dtype).lower() not in _BF16_NAMES + (
            "f32", "float32", "f16", "float16"):
        raise invalid("dtype: %r is not None, 'f32', 'f16' or 'bf16'" % (dtype,))


def _array(a, name):
    if not isinstance(a, cl_array.Array):
        raise invalid("%s: is a %s, not a pyopencl.array.Array (flashcl.host takes "
                      "numpy arrays)" % (name, type(a).__name__))
    return a


def buffer_of(a):
    return a.base_data.int_ptr if a.base_data is not None else None


def tensor(a, name, dtype=None, ndim=4):
    """An fcl_tensor viewing array a, of ndim dimensions (4: batch, seq,
    head, dim; 3: token, head, dim, for varlen calls)."""
    _array(a, name)
    if a.ndim != ndim:
        raise invalid("%s: has %d dimensions, must have %d (%s)" % (
            name, a.ndim, ndim, "batch, seqlen, heads, head_dim" if ndim == 4 else
            "tokens, heads, head_dim"))
    t = _capi.Tensor()
    t.buffer = buffer_of(a)
    t.offset = a.offset
    t.dtype = fcl_dtype(a, name, dtype)
    item = a.dtype.itemsize
    strides = [0] * (4 - ndim) + [s // item for s in a.strides]
    if any(s % item for s in a.strides):
        raise invalid("%s: strides %s (bytes) are not multiples of its element size %d"
                      % (name, a.strides, item))
    for i, s in enumerate(strides):
        t.strides[i] = s
    return t


def expect_shape(a, name, shape, what):
    if tuple(a.shape) != tuple(shape):
        raise invalid("%s: has shape %s, expected %s (%s)" % (
            name, tuple(a.shape), tuple(shape), what))


def raw(a, name, np_dtype, shape, what):
    """A cl_mem argument: None, or a C-contiguous array of that dtype and
    shape at offset 0 of its buffer (the C API takes no offset for it)."""
    if a is None:
        return None
    _array(a, name)
    if np.dtype(a.dtype) != np.dtype(np_dtype):
        raise invalid("%s: dtype %s, must be %s" % (name, a.dtype, np.dtype(np_dtype)))
    expect_shape(a, name, shape, what)
    if not a.flags.c_contiguous or a.offset != 0:
        raise invalid("%s: must be C-contiguous at offset 0 of its buffer (the C API "
                      "takes it as a plain cl_mem)" % name)
    return buffer_of(a)


def empty(ctx, shape, np_dtype):
    return cl_array.empty(ctx.queue, tuple(int(s) for s in shape), np_dtype)


def output(ctx, out, name, shape, like, what):
    """out (checked: shape and dtype of like) or a new array."""
    if out is None:
        return empty(ctx, shape, like.dtype)
    _array(out, name)
    expect_shape(out, name, shape, what)
    if out.dtype != like.dtype:
        raise invalid("%s: dtype %s, must be %s" % (name, out.dtype, like.dtype))
    return out


def int32_array(ctx, x, name):
    """A device int32 array from a pyopencl array (as it is) or host data
    (uploaded), and its host copy (None for a device array)."""
    if x is None:
        return None, None
    if isinstance(x, cl_array.Array):
        return x, None
    host = np.ascontiguousarray(np.asarray(x), dtype=np.int32)
    if not np.array_equal(host, np.asarray(x)):
        raise invalid("%s: values do not fit int32" % name)
    return cl_array.to_device(ctx.queue, host), host


def scale_arg(scale):
    return 0.0 if scale is None else float(scale)


def window_arg(window_size):
    try:
        left, right = window_size
    except (TypeError, ValueError):
        raise invalid("window_size: is %r, must be a pair (left, right); -1 is unlimited"
                      % (window_size,)) from None
    return int(left), int(right)
