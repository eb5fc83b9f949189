"""Context: one fcl_context (a device and its in-order queue), its options,
and the context the operations use for arrays that name none."""
import ctypes
import enum
import threading
import weakref

import pyopencl as cl

from . import _capi
from ._errors import check, invalid

lib = _capi.lib


class Option(enum.IntEnum):
    """fcl_option: settings of a context for every later call on it."""
    TIMING = 100           # 1: keep profiling events for last_op_time()
    PLAN_CACHE = 110       # plans kept, 0..4096 (default 256)
    LOG = 120              # 1: the library's decisions on stderr
    RWKV6_ALGORITHM = 130  # what algorithm="auto" runs: 0 auto, 1 recurrent, 2 chunked
    F32_PRECISION = 140    # 0 highest, 1 high, 2 medium


RWKV6_ALGORITHMS = {"auto": 0, "recurrent": 1, "chunked": 2}
F32_PRECISIONS = {"highest": 0, "high": 1, "medium": 2}
_OPTION_VALUES = {Option.RWKV6_ALGORITHM: RWKV6_ALGORITHMS,
                  Option.F32_PRECISION: F32_PRECISIONS}


def _option(option):
    if isinstance(option, str):
        try:
            return Option[option.upper()]
        except KeyError:
            raise invalid("option: %r is not one of %s" % (
                option, ", ".join(o.name.lower() for o in Option))) from None
    return int(option)  # an unknown number is the library's to refuse


class Context:
    """A flashcl context: a device, an OpenCL context and an in-order queue.

    ``Context(device)`` selects a device as fcl_context_create does: None
    means $FCL_DEVICE, else the first GPU, else the first CPU; "P:D" picks
    platform P, device D; any other string is a case-insensitive part of the
    platform, vendor or device name ("pocl", "nvidia", "rusticl").
    ``Context(queue=q)`` uses an application's in-order pyopencl queue.
    Arrays for it are made on ``ctx.queue`` (in ``ctx.cl_context``).

    Operations given arrays without ``context=`` use the context of their
    queue (``Context.of_queue``), made on first use and kept.
    """

    _by_queue = weakref.WeakValueDictionary()  # queue handle -> Context
    _kept = {}                                 # contexts made by of_queue
    _registry_lock = threading.Lock()

    def __init__(self, device=None, *, queue=None, **options):
        self._handle = None
        h = _capi.fcl_context_p()
        if queue is not None:
            if device is not None:
                raise invalid("device: give a device or a queue, not both")
            check(lib.fcl_context_create_from_queue(queue.int_ptr, ctypes.byref(h)), None)
            self.queue = queue
        else:
            sel = None if device is None else str(device).encode()
            check(lib.fcl_context_create(sel, ctypes.byref(h)), None)
            self.queue = cl.CommandQueue.from_int_ptr(lib.fcl_context_queue(h), retain=True)
        self._handle = h
        self.cl_context = self.queue.context
        self.lock = threading.RLock()  # a context is not thread-safe
        for name, value in options.items():
            self.set_option(name, value)
        with Context._registry_lock:
            Context._by_queue[self.queue.int_ptr] = self

    @classmethod
    def of_queue(cls, queue):
        """The context that runs work on this pyopencl queue: one made with
        Context(..) whose queue it is, else one made from it (and kept)."""
        with cls._registry_lock:
            ctx = cls._by_queue.get(queue.int_ptr)
        if ctx is None:
            ctx = cls(queue=queue)
            with cls._registry_lock:
                cls._kept[queue.int_ptr] = ctx
        return ctx

    @property
    def handle(self):
        """The fcl_context pointer (ctypes c_void_p)."""
        if self._handle is None:
            raise invalid("ctx: the context is closed")
        return self._handle

    @property
    def device_name(self):
        """"platform / device / driver" of the context."""
        return lib.fcl_context_device_name(self.handle).decode("utf-8", "replace")

    def set_option(self, option, value):
        """Sets an Option (or its name, "timing", "rwkv6_algorithm", ...);
        RWKV6_ALGORITHM and F32_PRECISION also take their names
        ("chunked", "high")."""
        opt = _option(option)
        if isinstance(value, str):
            names = _OPTION_VALUES.get(opt, {})
            if value.lower() not in names:
                raise invalid("value: %r is not a value of option %s" % (value, option))
            value = names[value.lower()]
        with self.lock:
            check(lib.fcl_context_set_option(self.handle, opt, int(value)), self.handle)

    def get_option(self, option):
        out = ctypes.c_int64()
        with self.lock:
            check(lib.fcl_context_get_option(self.handle, _option(option), ctypes.byref(out)),
                  self.handle)
        return out.value

    @property
    def options(self):
        """Every option's value, by name."""
        return {o.name.lower(): self.get_option(o) for o in Option}

    def last_op_time(self):
        """Device time in ms of the last operation (needs Option.TIMING)."""
        ms = ctypes.c_double()
        with self.lock:
            check(lib.fcl_context_last_op_time(self.handle, ctypes.byref(ms)), self.handle)
        return ms.value

    @property
    def stats(self):
        """Programs built from source, loaded from the cache, cache writes."""
        s = _capi.ContextStats()
        check(lib.fcl_context_get_stats(self.handle, ctypes.byref(s)), self.handle)
        return {name: getattr(s, name) for name, _ in s._fields_}

    def call(self, fn, *args):
        """Calls fn(handle, *args) under the context's lock; raises Error."""
        with self.lock:
            check(fn(self.handle, *args), self.handle)

    def close(self):
        if self._handle is not None and lib is not None:
            lib.fcl_context_destroy(self._handle)
        self._handle = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:  # interpreter shutdown
            pass

    def __repr__(self):
        return "flashcl.Context(%r)" % (self.device_name if self._handle else "closed")


_default = None


def default_context():
    """The context of operations given host arrays without context=: made
    once with Context() (so $FCL_DEVICE, else the first GPU, else a CPU)."""
    global _default
    if _default is None:
        _default = Context()
    return _default
