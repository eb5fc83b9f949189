"""ConfigInfo and config_info_of: which kernel and parameters an
operation would use, and where they come from (fcl_attention_config,
fcl_rwkv6_config, fcl_rwkv7_config); the operations' modules call it,
_config_info.py dispatches by name."""
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
