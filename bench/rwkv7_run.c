/* fa-bench, RWKV7: the cases of the command line in order, each timed once
 * per call (rwkv7_bench.c) or in loop mode (rwkv7_loop.c). */
#include <string.h>

#include "bench.h"
#include "rwkv7_bench.h"
#include "test_util.h"

int bench_rwkv7(fcl_context *ctx, const bench_args *a, bench_op op, bench_emit emit) {
  const int bwd = op == OP_RWKV7_BWD;
  int setup_failed = 0;
  for (int si = 0; si < a->n_seqlen; si++) {
    for (int ti = 0; ti < a->n_dtypes; ti++) {
      const r7shape s = {a->batch, a->seqlen_q[si], a->heads, a->head_dim, a->head_dim_v,
                         a->dtypes[ti]};
      r7inputs in;
      if (rwkv7_inputs_make(ctx, &s, bwd, &in)) {
        setup_failed = 1;
        continue;
      }
      const double es = (double)tu_dtype_size(s.dt), tok = (double)rwkv7_rows(&s, s.b);
      const double st = 4.0 * (double)rwkv7_state_n(&s, s.b);
      /* fwd: r, w, k, a, b, v, h0 in, o, ht out; bwd: those and dout in
       * (no o), dr, dw, dk, da, db, dv, dh0 out. */
      bench_row r = bench_row_init(op);
      r.b = s.b, r.h = s.h, r.hkv = s.h, r.sq = r.sk = s.t, r.d = s.k, r.dv = s.v, r.t = s.dt;
      r.bytes = bwd ? tok * (double)(10 * s.k + 3 * s.v) * es + 2 * st
                    : tok * (double)(5 * s.k + 2 * s.v) * es + 2 * st;
      if (a->layers && !bwd) {
        if (rwkv7_loop_case(ctx, a, &s, &in, &r)) setup_failed = 1;
      } else {
        if (a->check) r.check = rwkv7_check(ctx, &s, bwd, &in, &r);
        if (strcmp(r.check, "ERROR")) rwkv7_time(ctx, a, &s, bwd, &in, &r);
      }
      emit(&r);
      rwkv7_inputs_free(&in);
    }
  }
  return setup_failed;
}
