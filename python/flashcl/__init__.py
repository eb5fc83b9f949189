"""flashcl: fused attention kernels in OpenCL C, on pyopencl arrays.

The functions take pyopencl.array.Array inputs (any strides, the last one
1) and enqueue their work on the arrays' queue; names and keywords follow
flash-attn (attention, attention_with_kvcache), FlashInfer (merge_states)
and fla (rwkv6, rwkv7). flashcl.host does the same on numpy arrays (slower: it
copies to and from the device). Errors raise flashcl.Error.
"""
from . import _capi
from ._capi import (ERROR_BUILD, ERROR_INTERNAL, ERROR_INVALID_ARGUMENT, ERROR_NO_DEVICE,
                    ERROR_OPENCL, ERROR_OUT_OF_MEMORY, ERROR_TUNING_DB, ERROR_UNSUPPORTED, OK)
from ._config import ConfigInfo
from ._config_info import config_info
from ._context import Context, Option
from ._errors import Error
from ._attention import attention, attention_backward
from ._kvcache import attention_with_kvcache, merge_states
from ._rwkv6 import rwkv6, rwkv6_backward
from ._rwkv7 import rwkv7, rwkv7_backward
from . import host  # noqa: E402  (the numpy layer)

__version__ = _capi.lib.fcl_version_string().decode()

__all__ = ["Context", "Option", "Error", "ConfigInfo", "config_info", "attention",
           "attention_backward", "attention_with_kvcache", "merge_states", "rwkv6",
           "rwkv6_backward", "rwkv7", "rwkv7_backward", "host", "OK", "ERROR_INVALID_ARGUMENT", "ERROR_UNSUPPORTED",
           "ERROR_OPENCL", "ERROR_BUILD", "ERROR_OUT_OF_MEMORY", "ERROR_NO_DEVICE",
           "ERROR_TUNING_DB", "ERROR_INTERNAL"]
