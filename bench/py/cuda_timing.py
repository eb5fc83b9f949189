"""Timings of callables shared by the PyTorch anchor scripts (fla_rwkv6.py,
ring_anchor.py, torch_sdpa.py): the median CUDA-event time of a call, the
per-call GPU time of calls replayed from a CUDA graph, and the per-call wall
time of calls made back to back with one synchronize a step."""
import statistics
import time

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


def graph_per_call_us(fn, calls, iters, warmup, check=None):
    """GPU time of one fn() in us, without the host's launch cost: `calls` calls
    captured in one torch.cuda.CUDAGraph (after warm-up calls on a side stream, as
    capture wants), the median of `iters` replays (after `warmup`) timed with CUDA
    events, / calls. check(out), given the last captured call's output after the
    replays, gives the second value returned (None without check)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(calls):
            out = fn()
    ms = timed(graph.replay, iters, warmup)
    result = check(out) if check else None
    del graph, out
    return ms * 1e3 / calls, result


def loop_per_call_us(fns, steps, synchronize):
    """Wall time of one call in us when the calls run as a model's decode step makes
    them: every fn in fns back to back, then synchronize(); the median over `steps`
    steps (after one warm-up step) of the step's time.perf_counter time / len(fns)."""
    def step():
        t0 = time.perf_counter()
        for fn in fns:
            fn()
        synchronize()
        return (time.perf_counter() - t0) / len(fns)
    synchronize()
    step()
    return statistics.median(step() for _ in range(steps)) * 1e6
