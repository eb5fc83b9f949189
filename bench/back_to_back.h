/* fa-bench loop mode: the device time of a step's calls when they run
 * back to back, with no host between them, the way a CUDA graph replays
 * PyTorch's calls. A spinning kernel holds the queue while the L calls
 * are enqueued behind it (the library's timing events off); the time from
 * its end to the start of an empty kernel enqueued after them, / L, is a
 * call's share. The spin is made long enough that every call was enqueued
 * before it ended (checked on the host clock; else it is made longer and
 * the step run again). */
#ifndef FCL_BENCH_BACK_TO_BACK_H
#define FCL_BENCH_BACK_TO_BACK_H

#include "loop.h"

/* `steps` such steps (after one untimed); r->b2b_ms gets the median per
 * call (NAN where the queue does not profile), r->empty_b2b_ms the same of
 * L empty kernels in place of the calls (the floor of one launch). 0, or -1 with the reason on
 * stderr. */
int bench_loop_b2b(bench_loop *lp, int steps, bench_row *r);

#endif
