/* fa-bench: checks flashcl's operations against double-precision references
 * and times them (median of N runs, each bracketed by clFinish and a
 * monotonic clock). Ops: attention forward (fwd) and backward (bwd), in
 * attention.c, reporting TFLOP/s; RWKV6 forward and backward (rwkv6-fwd,
 * rwkv6-bwd), in rwkv6_bench.c, reporting GB/s. This file parses nothing
 * (args.c does) and prints the rows: a table, CSV or JSON. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "args.h"
#include "bench.h"
#include "test_util.h"

static bench_output g_out;
static const char  *g_device;
static int          g_first = 1, g_failed = 0;

static void json_string(const char *str) {
  putchar('"');
  for (; *str; str++) {
    if (*str == '"' || *str == '\\') printf("\\%c", *str);
    else if ((unsigned char)*str < 0x20) printf("\\u%04x", *str);
    else putchar(*str);
  }
  putchar('"');
}

/* A JSON number, or null for NaN and infinities. */
static void json_number(const char *key, double x) {
  if (isfinite(x)) printf("\"%s\": %.6g, ", key, x);
  else printf("\"%s\": null, ", key);
}

static void print_header(void) {
  if (g_out == OUT_TABLE) {
    printf("device: %s\n", g_device);
    printf("%-9s %-14s %4s %4s %4s %6s %6s %4s %4s %-5s %6s %-9s %10s %9s %9s %9s %9s %9s  %s\n",
           "op", "impl", "B", "H", "Hkv", "Nq", "Nk", "D", "Dv", "dtype", "causal", "algo", "ms",
           "TFLOP/s", "GB/s", "err(o)", "err(lse)", "err(grad)", "check");
  } else if (g_out == OUT_CSV) {
    printf("op,impl,device,batch,heads,heads_kv,seqlen_q,seqlen_k,head_dim,head_dim_v,dtype,"
           "causal,algorithm,ms,tflops,gbps,err_o,err_lse,err_grad,check\n");
  } else {
    printf("[");
  }
}

/* Table cells: a number, or "-" when it does not apply. */
static void cell(const char *fmt, double x, int width) {
  if (isnan(x)) printf(" %*s", width, "-");
  else printf(fmt, width, x);
}

static void emit(const bench_row *r) {
  const char *dt = tu_dtype_name(r->t), *op = bench_op_name(r->op);
  const char *algo = r->algorithm < 0 ? NULL : bench_algorithm_name((fcl_rwkv6_algorithm)r->algorithm);
  const double err_o = r->err_o >= 0 ? r->err_o : NAN, err_lse = r->err_lse >= 0 ? r->err_lse : NAN,
               err_grad = r->err_grad >= 0 ? r->err_grad : NAN;
  g_failed |= bench_failed(r->check);
  if (g_out == OUT_TABLE) {
    printf("%-9s %-14s %4lld %4lld %4lld %6lld %6lld %4lld %4lld %-5s ", op, "flashcl",
           (long long)r->b, (long long)r->h, (long long)r->hkv, (long long)r->sq,
           (long long)r->sk, (long long)r->d, (long long)r->dv, dt);
    if (r->causal < 0) printf("%6s ", "-");
    else printf("%6d ", r->causal);
    printf("%-9s", algo ? algo : "-");
    cell(" %*.3f", r->ms, 10);
    cell(" %*.4f", r->tflops, 9);
    cell(" %*.2f", r->gbps, 9);
    cell(" %*.2e", err_o, 9);
    cell(" %*.2e", err_lse, 9);
    cell(" %*.2e", err_grad, 9);
    printf("  %s\n", r->check);
  } else if (g_out == OUT_CSV) {
    printf("%s,flashcl,\"", op);
    for (const char *c = g_device; *c; c++) { /* CSV doubles quotes */
      if (*c == '"') putchar('"');
      putchar(*c);
    }
    printf("\",%lld,%lld,%lld,%lld,%lld,%lld,%lld,%s,", (long long)r->b, (long long)r->h,
           (long long)r->hkv, (long long)r->sq, (long long)r->sk, (long long)r->d,
           (long long)r->dv, dt);
    if (r->causal >= 0) printf("%d", r->causal);
    printf(",%s", algo ? algo : "");
    const double v[6] = {r->ms, r->tflops, r->gbps, err_o, err_lse, err_grad};
    for (int i = 0; i < 6; i++) {
      if (isnan(v[i])) printf(",");
      else printf(i < 3 ? ",%.6g" : ",%.3g", v[i]);
    }
    printf(",%s\n", r->check);
  } else {
    printf("%s\n  {\"op\": \"%s\", \"impl\": \"flashcl\", \"device\": ", g_first ? "" : ",", op);
    json_string(g_device);
    printf(", \"batch\": %lld, \"heads\": %lld, \"heads_kv\": %lld, \"seqlen_q\": %lld, "
           "\"seqlen_k\": %lld, \"head_dim\": %lld, \"head_dim_v\": %lld, \"dtype\": \"%s\", ",
           (long long)r->b, (long long)r->h, (long long)r->hkv, (long long)r->sq,
           (long long)r->sk, (long long)r->d, (long long)r->dv, dt);
    if (r->causal < 0) printf("\"causal\": null, ");
    else printf("\"causal\": %d, ", r->causal);
    if (algo) printf("\"algorithm\": \"%s\", ", algo);
    else printf("\"algorithm\": null, ");
    json_number("ms", r->ms);
    json_number("tflops", r->tflops);
    json_number("gbps", r->gbps);
    json_number("err_o", err_o);
    json_number("err_lse", err_lse);
    json_number("err_grad", err_grad);
    printf("\"check\": \"%s\"}", r->check);
  }
  g_first = 0;
  fflush(stdout);
}

int main(int argc, char **argv) {
  bench_args a;
  int rc = bench_parse_args(argc, argv, &a);
  if (rc) return rc > 0 ? 0 : 2;

  fcl_context *ctx = NULL;
  fcl_status st = fcl_context_create(a.device, &ctx);
  if (st != FCL_OK) {
    fprintf(stderr, "fa-bench: fcl_context_create(%s): %s\n", a.device ? a.device : "NULL",
            fcl_context_last_error(NULL));
    return 1;
  }
  g_out = a.output;
  g_device = fcl_context_device_name(ctx);
  print_header();
  for (int i = 0; i < a.n_ops; i++) {
    const bench_op op = a.ops[i];
    g_failed |= op == OP_FWD || op == OP_BWD ? bench_attention(ctx, &a, op, emit)
                                             : bench_rwkv6(ctx, &a, op, emit);
  }
  if (a.output == OUT_JSON) printf("\n]\n");
  fcl_context_destroy(ctx);
  return g_failed;
}
