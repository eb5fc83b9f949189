"""config_info: which kernel and parameters an operation would use, and
where they come from (fcl_attention_config, fcl_rwkv6_config,
fcl_rwkv7_config)."""
import collections
import ctypes

from . import _capi

ConfigInfo = collections.namedtuple("ConfigInfo", "kernel params source")
ConfigInfo.__doc__ = """kernel: the variant's name ("attention_fwd", ...);
params: "BLOCK_M=64,BLOCK_N=32,..."; source: the tuning database's path
and row, "built-in defaults (reason)" or "override"."""


def config_info_of(ctx, fn, desc, dtype, backward):
    info = _capi.ConfigInfo()
    ctx.call(fn, ctypes.byref(desc), dtype, 1 if backward else 0, ctypes.byref(info))
    return ConfigInfo(*(getattr(info, f).decode("utf-8", "replace")
                        for f in ("kernel", "params", "source")))


def config_info(op, *args, **kwargs):
    """config_info("attention" | "attention_backward" | "rwkv6" |
    "rwkv6_backward" | "rwkv7" | "rwkv7_backward", arrays..., keywords...)
    takes the arrays and keywords the operation takes (attention: q, k, v;
    rwkv6: r, k, v, w, u; rwkv7: r, w, k, v, a, b) and
    returns the ConfigInfo the library chooses for them. The tuning itself
    is fa-tune's (the C tool): this reads what it stored."""
    from ._attention import attention_config
    from ._rwkv6 import rwkv6_config
    from ._rwkv7 import rwkv7_config
    ops = {"attention": (attention_config, False),
           "attention_backward": (attention_config, True),
           "rwkv6": (rwkv6_config, False), "rwkv6_backward": (rwkv6_config, True),
           "rwkv7": (rwkv7_config, False), "rwkv7_backward": (rwkv7_config, True)}
    if op not in ops:
        from ._errors import invalid
        raise invalid("op: %r is not one of %s" % (op, ", ".join(ops)))
    fn, backward = ops[op]
    return fn(*args, backward=backward, **kwargs)
