"""Context: device selection, an application's queue, the context of an
array's queue, options, timing, stats and config_info."""
import numpy as np
import pyopencl as cl

import flashcl
import reference as ref
from helpers import check_output, dev, rand


def test_device_and_options(ctx):
    assert len(ctx.device_name.split(" / ")) == 3  # platform / device / driver
    options = ctx.options
    assert set(options) == {"timing", "plan_cache", "log", "rwkv6_algorithm", "f32_precision"}
    assert options["plan_cache"] == 256 and options["timing"] == 0
    ctx.set_option(flashcl.Option.RWKV6_ALGORITHM, "chunked")
    ctx.set_option("f32_precision", "high")
    assert ctx.get_option("rwkv6_algorithm") == 2 and ctx.get_option(140) == 1
    ctx.set_option("rwkv6_algorithm", options["rwkv6_algorithm"])
    ctx.set_option("f32_precision", options["f32_precision"])
    assert set(ctx.stats) == {"programs_built", "programs_from_cache", "cache_writes"}


def test_timing(ctx, rng):
    qs, _ = rand(rng, (1, 16, 2, 16), "f32")
    q = dev(ctx, qs)
    ctx.set_option("timing", 1)
    try:
        flashcl.attention(q, q, q)
        assert ctx.last_op_time() > 0.0
    finally:
        ctx.set_option("timing", 0)


def test_application_queue_and_queue_contexts(ctx, rng):
    """Context(queue=) runs on the application's queue; arrays without
    context= use the context of their queue, made once and kept."""
    queue = cl.CommandQueue(ctx.cl_context)
    own = flashcl.Context(queue=queue)
    assert own.queue is queue and flashcl.Context.of_queue(queue) is own
    (qs, q), (ks, k), (vs, v) = (rand(rng, (1, 5, 2, 16), "f32") for _ in range(3))
    qd = dev(own, qs)
    o = flashcl.attention(qd, dev(own, ks), dev(own, vs), causal=True)
    o_ref, _ = ref.attention(q[0], k[0], v[0], causal=True)
    check_output("o", o.get()[0], o_ref, "f32", ref.logit_bound(q[0], k[0], causal=True),
                 np.abs(v).max())
    other = cl.CommandQueue(ctx.cl_context)
    made = flashcl.Context.of_queue(other)
    assert made is flashcl.Context.of_queue(other) and made.queue is other
    own.close()


def test_config_info(ctx, rng):
    x = dev(ctx, rand(rng, (1, 64, 2, 16), "f16")[0])
    info = flashcl.config_info("attention", x, x, x, causal=True)
    assert isinstance(info, flashcl.ConfigInfo)
    assert info.kernel.startswith("attention") and "=" in info.params and info.source
    assert flashcl.config_info("attention_backward", x, x, x).kernel.startswith("attention")
    for algorithm in ("recurrent", "chunked"):
        info = flashcl.config_info("rwkv6", x, x, x, x, algorithm=algorithm)
        assert ("chunk" in info.kernel) == (algorithm == "chunked"), info
    assert flashcl.config_info("rwkv6_backward", x, x, x, x).kernel.startswith("rwkv6")
    # Only shapes and dtypes are read: numpy arrays do, given the context.
    h = np.zeros((1, 64, 2, 16), np.float16)
    assert flashcl.config_info("attention", h, h, h, causal=True, context=ctx) == \
        flashcl.config_info("attention", x, x, x, causal=True)
