"""What rwkv6_desc and rwkv7_desc share: the shape checks of their inputs and
the sequence fields of the desc (dense batch, or packed by cu_seqlens)."""
from ._errors import invalid
from ._tensors import expect_shape, scale_arg
from ._attention import _cu_seqlens


def check_4d(named):
    """Each (name, array) of named is [batch, seqlen, heads, head_dim]."""
    for name, x in named:
        if getattr(x, "ndim", None) != 4:
            raise invalid("%s: has %s dimensions, must have 4 (batch, seqlen, heads, "
                          "head_dim)" % (name, getattr(x, "ndim", "no")))


def fill_sequences(ctx, d, r, v, like_r, cu_seqlens, scale, reverse, keep):
    """Checks like_r ((name, array) pairs) against r's shape and v against its
    batch, seqlen and heads; sets d's heads, head dims, batch, seqlen (those
    of cu_seqlens where given), scale and reverse. Returns the state shape."""
    B, T, H, K = r.shape
    V = v.shape[3]
    for name, x in like_r:
        expect_shape(x, name, r.shape, "r's shape")
    expect_shape(v, "v", (B, T, H, V), "batch, seqlen, heads of r")
    d.heads, d.head_dim_k, d.head_dim_v = H, K, V
    if cu_seqlens is not None:
        if B != 1:
            raise invalid("r: batch is %d; with cu_seqlens the sequences are packed "
                          "along seqlen of batch 1 (as fla)" % B)
        d.cu_seqlens, d.cu_seqlens_host, d.seqlen, d.batch = _cu_seqlens(
            ctx, cu_seqlens, "cu_seqlens", None, keep)
    else:
        d.batch, d.seqlen = B, T
    d.scale = scale_arg(scale)
    d.reverse = 1 if reverse else 0
    return (d.batch, H, K, V)
