"""The sequences of test_rwkv6.py and test_rwkv7.py: packed by cu_seqlens or
one a batch row, and the reference run one sequence at a time."""
import numpy as np


def packed(lens):
    """cu_seqlens (int32) of sequences of these lengths in batch row 0, and
    the sequences as (batch index, time slice)."""
    cu = np.concatenate([[0], np.cumsum(lens)]).astype(np.int32)
    return cu, [(0, slice(cu[n], cu[n + 1])) for n in range(len(lens))]


def dense(B):
    """B sequences, one a batch row, as (batch index, time slice)."""
    return [(b, slice(None)) for b in range(B)]


def per_seq(run, o_shape, h0, seqs):
    """o and the stacked final states of run(batch index, time slice, h0 of
    the sequence or None) -> (o, ht, ...) over seqs."""
    o = np.zeros(o_shape)
    hts = []
    for n, (b, ts) in enumerate(seqs):
        ob, ht = run(b, ts, None if h0 is None else h0[n])[:2]
        o[b, ts] = ob
        hts.append(ht)
    return o, np.stack(hts)
