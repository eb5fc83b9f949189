/* fa-bench, RWKV6: the cases of the command line in order, each timed once
 * per call (rwkv6_bench.c) or in loop mode (rwkv6_loop.c). */
#include <string.h>

#include "bench.h"
#include "rwkv6_bench.h"
#include "test_util.h"

int bench_rwkv6(fcl_context *ctx, const bench_args *a, bench_op op, bench_emit emit) {
  const int bwd = op == OP_RWKV6_BWD;
  int setup_failed = 0;
  for (int si = 0; si < a->n_seqlen; si++) {
    for (int ti = 0; ti < a->n_dtypes; ti++) {
      const fcl_dtype dt = a->dtypes[ti];
      rshape s = {a->batch, a->seqlen_q[si], a->heads, a->head_dim, a->head_dim_v, dt,
                  FCL_RWKV6_AUTO,
                  dt == FCL_F32 && bench_f32_precision(ctx) == FCL_F32_PRECISION_MEDIUM
                      ? FCL_BF16 : dt};
      rinputs in;
      if (rwkv6_inputs_make(ctx, &s, bwd, &in)) {
        setup_failed = 1;
        continue;
      }
      const double es = (double)tu_dtype_size(s.dt), tok = (double)rwkv6_tokens(&s);
      const double u_bytes = (double)(s.h * s.k) * es;
      /* fwd: r, k, w, v in, o out; bwd: r, k, w, v, dout in, dr, dk, dw, dv out. */
      const double bytes = bwd ? tok * (double)(6 * s.k + 3 * s.v) * es + 2 * u_bytes
                               : tok * (double)(3 * s.k + 2 * s.v) * es + u_bytes;
      for (int ai = 0; ai < a->n_algorithms; ai++) {
        s.alg = a->algorithms[ai];
        bench_row r = bench_row_init(op);
        r.b = s.b, r.h = s.h, r.hkv = s.h, r.sq = r.sk = s.t, r.d = s.k, r.dv = s.v;
        r.t = s.dt, r.algorithm = (int)s.alg, r.bytes = bytes;
        if (a->layers && !bwd) {
          const bench_row fresh = r;
          for (int plans = 0; plans < 1 + a->plans; plans++) {
            r = fresh;
            if (rwkv6_loop_case(ctx, a, plans, &s, &in, &r)) setup_failed = 1;
            emit(&r);
          }
          continue;
        }
        if (a->check) r.check = rwkv6_check(ctx, &s, bwd, &in, &r);
        if (strcmp(r.check, "ERROR")) rwkv6_time(ctx, a, &s, bwd, &in, &r);
        emit(&r);
      }
      rwkv6_inputs_free(&in);
    }
  }
  return setup_failed;
}
