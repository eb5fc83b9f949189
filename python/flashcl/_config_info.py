"""config_info(op, ...): the operation's config call by name (above the
operations' modules, which use _config.py)."""
from ._attention import attention_config
from ._errors import invalid
from ._rwkv6 import rwkv6_config
from ._rwkv7 import rwkv7_config


def config_info(op, *args, **kwargs):
    """config_info("attention" | "attention_backward" | "rwkv6" |
    "rwkv6_backward" | "rwkv7" | "rwkv7_backward", arrays..., keywords...)
    takes the arrays and keywords the operation takes (attention: q, k, v;
    rwkv6: r, k, v, w, u; rwkv7: r, w, k, v, a, b) and
    returns the ConfigInfo the library chooses for them. The tuning itself
    is fa-tune's (the C tool): this reads what it stored."""
    ops = {"attention": (attention_config, False),
           "attention_backward": (attention_config, True),
           "rwkv6": (rwkv6_config, False), "rwkv6_backward": (rwkv6_config, True),
           "rwkv7": (rwkv7_config, False), "rwkv7_backward": (rwkv7_config, True)}
    if op not in ops:
        raise invalid("op: %r is not one of %s" % (op, ", ".join(ops)))
    fn, backward = ops[op]
    return fn(*args, backward=backward, **kwargs)
