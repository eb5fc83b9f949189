/* fa-bench, decode: the cases of the command line in order, each timed
 * once per call (decode.c) or in loop mode (decode_loop.c). */
#include <string.h>

#include "decode.h"

int bench_kvcache(fcl_context *ctx, const bench_args *a, bench_emit emit) {
  static const int causal_default[1] = {1};
  const int *causal = a->causal_set ? a->causal : causal_default;
  const int n_causal = a->causal_set ? a->n_causal : 1;
  const int64_t one = 1, *news = a->seqlen_set ? a->seqlen_q : &one;
  const int n_news = a->seqlen_set ? a->n_seqlen : 1;
  int setup_failed = 0;
  for (int ci = 0; ci < a->n_context; ci++)
    for (int ni = 0; ni < n_news; ni++)
      for (int ti = 0; ti < a->n_dtypes; ti++)
        for (int fi = 0; fi < a->n_cache; fi++)
          for (int pi = 0; pi < a->n_page_size; pi++) {
            dshape s = decode_shape(a, a->context[ci], news[ni], a->dtypes[ti], a->page_size[pi],
                                    a->cache_k[fi], a->cache_v[fi]);
            dinputs in;
            if (decode_inputs_make(ctx, &s, &in)) {
              setup_failed = 1;
              continue;
            }
            for (int k = 0; k < n_causal; k++)
              for (int si = 0; si < a->n_num_splits; si++) {
                s.causal = causal[k], s.splits = a->num_splits[si];
                bench_row r = decode_row(&s);
                if (a->layers) {
                  for (int plans = 0; plans < 1 + a->plans; plans++) {
                    if (plans) emit(&r), r = decode_row(&s);
                    if (decode_loop_case(ctx, a, plans, &s, &in, &r)) setup_failed = 1;
                  }
                } else if (a->check) {
                  r.check = decode_check(ctx, &s, &in, &r);
                }
                if (!a->layers && strcmp(r.check, "ERROR")) decode_time(ctx, a, &s, &in, &r);
                emit(&r);
              }
            decode_inputs_free(&in);
          }
  return setup_failed;
}
