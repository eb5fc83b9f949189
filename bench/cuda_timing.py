"""Median CUDA-event time of a callable, shared by the PyTorch anchor
scripts (fla_rwkv6.py, ring_anchor.py)."""
import statistics

import torch


def timed(fn, iters, warmup):
    """Median milliseconds of fn() over iters calls, after warmup calls."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)
