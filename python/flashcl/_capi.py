"""ctypes declarations of flashcl.h: the structs, enums and functions the
package calls, and the shared library that holds them.

The structs mirror flashcl.h field by field (tests/test_layout.py checks
them against the ABI reference, abi/libflashcl.abi). Every descriptor
starts with its size, set here from ctypes.sizeof, as FCL_*_DESC_INIT does.
"""
import ctypes
import glob
import os
from ctypes import (POINTER, Structure, c_char, c_char_p, c_double, c_float, c_int,
                    c_int32, c_int64, c_size_t, c_uint, c_uint32, c_uint64, c_void_p)

cl_mem = c_void_p
cl_command_queue = c_void_p
cl_context = c_void_p
fcl_status = c_int
fcl_dtype = c_int
fcl_context_p = c_void_p

# fcl_status
OK = 0
ERROR_INVALID_ARGUMENT = 1
ERROR_UNSUPPORTED = 2
ERROR_OPENCL = 3
ERROR_BUILD = 4
ERROR_OUT_OF_MEMORY = 5
ERROR_NO_DEVICE = 6
ERROR_TUNING_DB = 7
ERROR_INTERNAL = 8
STATUS_NAMES = {
    OK: "FCL_OK",
    ERROR_INVALID_ARGUMENT: "FCL_ERROR_INVALID_ARGUMENT",
    ERROR_UNSUPPORTED: "FCL_ERROR_UNSUPPORTED",
    ERROR_OPENCL: "FCL_ERROR_OPENCL",
    ERROR_BUILD: "FCL_ERROR_BUILD",
    ERROR_OUT_OF_MEMORY: "FCL_ERROR_OUT_OF_MEMORY",
    ERROR_NO_DEVICE: "FCL_ERROR_NO_DEVICE",
    ERROR_TUNING_DB: "FCL_ERROR_TUNING_DB",
    ERROR_INTERNAL: "FCL_ERROR_INTERNAL",
}

# fcl_dtype
F32, F16, BF16 = 0, 1, 2


class Tensor(Structure):
    _fields_ = [("buffer", cl_mem), ("offset", c_size_t), ("dtype", fcl_dtype),
                ("strides", c_int64 * 4)]


class AttentionDesc(Structure):
    _fields_ = [("size", c_size_t), ("batch", c_int64), ("seqlen_q", c_int64),
                ("seqlen_k", c_int64), ("heads_q", c_int64), ("heads_kv", c_int64),
                ("head_dim", c_int64), ("head_dim_v", c_int64),
                ("softmax_scale", c_float), ("causal", c_int),
                ("window_left", c_int64), ("window_right", c_int64),
                ("softcap", c_float), ("alibi_slopes", cl_mem),
                ("cu_seqlens_q", cl_mem), ("cu_seqlens_k", cl_mem),
                ("diag_shift", c_int64),
                ("cu_seqlens_q_host", POINTER(c_int32)),
                ("cu_seqlens_k_host", POINTER(c_int32)),
                ("dropout_p", c_float), ("reserved0", c_uint32),
                ("dropout_seed", c_uint64), ("dropout_offset", c_uint64)]


class KvcacheDesc(Structure):
    _fields_ = [("size", c_size_t), ("batch", c_int64), ("seqlen_q", c_int64),
                ("heads_q", c_int64), ("heads_kv", c_int64), ("head_dim", c_int64),
                ("head_dim_v", c_int64), ("cache_capacity", c_int64),
                ("page_size", c_int64), ("num_pages", c_int64), ("cache_batch", c_int64),
                ("softmax_scale", c_float), ("causal", c_int),
                ("window_left", c_int64), ("window_right", c_int64),
                ("softcap", c_float), ("alibi_slopes", cl_mem),
                ("cache_seqlens", cl_mem), ("cache_batch_idx", cl_mem),
                ("block_table", cl_mem), ("cu_seqlens_q", cl_mem),
                ("rotary_cos", cl_mem), ("rotary_sin", cl_mem),
                ("rotary_dim", c_int64), ("rotary_positions", c_int64),
                ("rotary_interleaved", c_int), ("num_splits", c_int),
                ("k_scale", cl_mem), ("v_scale", cl_mem), ("scale_count", c_int64)]


class Rwkv6Desc(Structure):
    _fields_ = [("size", c_size_t), ("batch", c_int64), ("seqlen", c_int64),
                ("heads", c_int64), ("head_dim_k", c_int64), ("head_dim_v", c_int64),
                ("scale", c_float), ("reverse", c_int), ("cu_seqlens", cl_mem),
                ("algorithm", c_int), ("cu_seqlens_host", POINTER(c_int32))]


class Rwkv7Desc(Structure):
    _fields_ = [("size", c_size_t), ("batch", c_int64), ("seqlen", c_int64),
                ("heads", c_int64), ("head_dim_k", c_int64), ("head_dim_v", c_int64),
                ("scale", c_float), ("reverse", c_int), ("cu_seqlens", cl_mem),
                ("cu_seqlens_host", POINTER(c_int32)), ("decay_lower_bound", c_float),
                ("reserved0", ctypes.c_uint32)]


class ConfigInfo(Structure):
    _fields_ = [("kernel", c_char * 32), ("params", c_char * 160), ("source", c_char * 512)]


class ContextStats(Structure):
    _fields_ = [("programs_built", c_int), ("programs_from_cache", c_int),
                ("cache_writes", c_int)]


def attention_desc():
    """FCL_ATTENTION_DESC_INIT."""
    d = AttentionDesc()
    d.size = ctypes.sizeof(AttentionDesc)
    d.window_left = d.window_right = -1
    return d


def kvcache_desc():
    """FCL_KVCACHE_DESC_INIT."""
    d = KvcacheDesc()
    d.size = ctypes.sizeof(KvcacheDesc)
    d.window_left = d.window_right = -1
    return d


def rwkv6_desc():
    """FCL_RWKV6_DESC_INIT."""
    d = Rwkv6Desc()
    d.size = ctypes.sizeof(Rwkv6Desc)
    return d


def rwkv7_desc():
    """FCL_RWKV7_DESC_INIT."""
    d = Rwkv7Desc()
    d.size = ctypes.sizeof(Rwkv7Desc)
    return d


_T = POINTER(Tensor)
_SIGNATURES = {
    "fcl_version_number": (c_uint, []),
    "fcl_version_string": (c_char_p, []),
    "fcl_status_string": (c_char_p, [fcl_status]),
    "fcl_context_create": (fcl_status, [c_char_p, POINTER(fcl_context_p)]),
    "fcl_context_create_from_queue": (fcl_status, [cl_command_queue, POINTER(fcl_context_p)]),
    "fcl_context_destroy": (None, [fcl_context_p]),
    "fcl_context_last_error": (c_char_p, [fcl_context_p]),
    "fcl_context_cl": (cl_context, [fcl_context_p]),
    "fcl_context_queue": (cl_command_queue, [fcl_context_p]),
    "fcl_context_device_name": (c_char_p, [fcl_context_p]),
    "fcl_context_get_stats": (fcl_status, [fcl_context_p, POINTER(ContextStats)]),
    "fcl_context_set_option": (fcl_status, [fcl_context_p, c_int, c_int64]),
    "fcl_context_get_option": (fcl_status, [fcl_context_p, c_int, POINTER(c_int64)]),
    "fcl_context_last_op_time": (fcl_status, [fcl_context_p, POINTER(c_double)]),
    "fcl_attention_forward": (fcl_status, [fcl_context_p, POINTER(AttentionDesc),
                                           _T, _T, _T, _T, cl_mem]),
    "fcl_attention_backward": (fcl_status, [fcl_context_p, POINTER(AttentionDesc),
                                            _T, _T, _T, _T, cl_mem, _T, _T, _T, _T]),
    "fcl_attention_kvcache": (fcl_status, [fcl_context_p, POINTER(KvcacheDesc),
                                           _T, _T, _T, _T, _T, _T, cl_mem]),
    "fcl_attention_merge": (fcl_status, [fcl_context_p, POINTER(AttentionDesc), c_int64,
                                         _T, POINTER(cl_mem), _T, cl_mem]),
    "fcl_rwkv6_forward": (fcl_status, [fcl_context_p, POINTER(Rwkv6Desc), _T, _T, _T, _T,
                                       cl_mem, cl_mem, _T, cl_mem]),
    "fcl_rwkv6_backward": (fcl_status, [fcl_context_p, POINTER(Rwkv6Desc), _T, _T, _T, _T,
                                        cl_mem, cl_mem, _T, cl_mem, _T, _T, _T, _T,
                                        cl_mem, cl_mem]),
    "fcl_rwkv7_forward": (fcl_status, [fcl_context_p, POINTER(Rwkv7Desc), _T, _T, _T, _T,
                                       _T, _T, cl_mem, _T, cl_mem]),
    "fcl_rwkv7_backward": (fcl_status, [fcl_context_p, POINTER(Rwkv7Desc), _T, _T, _T, _T,
                                        _T, _T, cl_mem, _T, cl_mem, _T, _T, _T, _T, _T, _T,
                                        cl_mem]),
    "fcl_rwkv7_config": (fcl_status, [fcl_context_p, POINTER(Rwkv7Desc), fcl_dtype, c_int,
                                      POINTER(ConfigInfo)]),
    "fcl_attention_config": (fcl_status, [fcl_context_p, POINTER(AttentionDesc), fcl_dtype,
                                          c_int, POINTER(ConfigInfo)]),
    "fcl_rwkv6_config": (fcl_status, [fcl_context_p, POINTER(Rwkv6Desc), fcl_dtype, c_int,
                                      POINTER(ConfigInfo)]),
}


def _library_path():
    """$FLASHCL_LIBRARY, else the library installed beside this file."""
    path = os.environ.get("FLASHCL_LIBRARY")
    if path:
        return path
    here = os.path.dirname(os.path.abspath(__file__))
    for pattern in ("libflashcl.so*", "libflashcl*.dylib", "flashcl.dll"):
        found = sorted(glob.glob(os.path.join(here, pattern)))
        if found:
            return found[0]
    raise ImportError(
        "flashcl: libflashcl is not installed beside %s (install the package with "
        "`pip install .`, or set FLASHCL_LIBRARY to the library's path)" % here)


def _load():
    lib = ctypes.CDLL(_library_path())
    for name, (restype, argtypes) in _SIGNATURES.items():
        fn = getattr(lib, name)
        fn.restype = restype
        fn.argtypes = argtypes
    return lib


lib = _load()
