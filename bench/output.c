/* fa-bench output (see output.h). */
#include "output.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "test_util.h"

static bench_output g_format;
static const char  *g_device;
static bench_peak   g_peak;
static int          g_first = 1;
static int          g_decode_cols, g_loop_cols;
/* The last table header: TABLE_OPS attention/RWKV6, TABLE_DECODE, TABLE_LOOP. */
enum { TABLE_NONE = -1, TABLE_OPS, TABLE_DECODE, TABLE_LOOP };
static int          g_table_kind = TABLE_NONE;

bench_rates bench_rates_of(const bench_row *r, const bench_peak *peak) {
  bench_rates x = {NAN, NAN, NAN, NAN};
  if (!(r->ms > 0)) return x;
  x.tflops = r->flops / (r->ms * 1e9);
  x.gbps = r->bytes / (r->ms * 1e6);
  /* An FMA is one instruction: the instruction peak is half the FLOP peak. */
  x.alu_pct = 100.0 * (r->instrs / (r->ms * 1e-3)) / (peak->gflops * 1e9 / 2);
  x.bw_pct = 100.0 * x.gbps / peak->gbps;
  return x;
}

static void json_string(const char *str) {
  putchar('"');
  for (; *str; str++) {
    if (*str == '"' || *str == '\\') printf("\\%c", *str);
    else if ((unsigned char)*str < 0x20) printf("\\u%04x", *str);
    else putchar(*str);
  }
  putchar('"');
}

/* A JSON member: a number, or null for NaN and infinities. */
static void json_number(const char *key, double x, const char *sep) {
  if (isfinite(x)) printf("\"%s\": %.6g%s", key, x, sep);
  else printf("\"%s\": null%s", key, sep);
}

/* A table cell: a number, or "-" when it does not apply. */
static void cell(const char *fmt, double x, int width) {
  if (isnan(x)) printf(" %*s", width, "-");
  else printf(fmt, width, x);
}

double bench_lib_host_ms(const bench_row *r) {
  if (r->layers <= 0) return NAN;
  return r->host_ms - r->kernels_per_call * (r->events_off ? r->launch_ms : r->launch_event_ms);
}

void out_begin(bench_output format, const char *device, const bench_peak *peak, int decode,
               int loop) {
  g_format = format, g_device = device, g_peak = *peak, g_decode_cols = decode || loop;
  g_loop_cols = loop;
  if (format == OUT_TABLE) {
    printf("device: %s\n", device);
    if (peak->gbps_given && isnan(peak->gflops))
      printf("peak: bandwidth %.1f GB/s (given: --peak-gbps); FMA rate not measured\n",
             peak->gbps);
    else if (peak->gbps_given)
      printf("peak: %.1f GFLOP/s f32 FMA (measured); bandwidth %.1f GB/s (given: --peak-gbps)\n",
             peak->gflops, peak->gbps);
    else if (isnan(peak->gflops) && isnan(peak->gbps))
      printf("peak: not measured (%%alu and %%bw are empty)\n");
    else
      printf("peak (measured): %.1f GFLOP/s f32 FMA = %.1f G instr/s; copy %.1f GB/s\n",
             peak->gflops, peak->gflops / 2, peak->gbps);
  } else if (format == OUT_CSV) {
    printf("op,impl,device,batch,heads,heads_kv,seqlen_q,seqlen_k,head_dim,head_dim_v,dtype,"
           "causal,algorithm,ms,tflops,gbps,err_o,err_lse,err_grad,check,wall_ms,alu_pct,"
           "bw_pct,gain,peak_gflops,peak_gbps%s%s\n",
           g_decode_cols ? ",page_size,num_splits,append,context,us,cache_dtype" : "",
           loop ? ",layers,steps,kernels_per_call,timing_events,wall_us,device_us,host_us,"
                  "launch_us,launch_event_us,lib_host_us,empty_kernel_us,device_b2b_us,empty_b2b_us"
                : "");
  } else {
    printf("[");
  }
}

/* The table's header for rows of one kind, printed before the first row of
 * that kind (again after rows of the other kind). */
static void table_header(int kind) {
  if (g_table_kind == kind) return;
  if (g_table_kind != TABLE_NONE) printf("\n");
  g_table_kind = kind;
  if (kind == TABLE_LOOP)
    printf("%-9s %-12s %4s %4s %4s %5s %6s %4s %4s %-5s %6s %-18s %4s %5s %9s %9s %9s %9s %9s %9s "
           "%3s %3s %9s %9s %9s %9s %9s  %s\n",
           "op", "impl", "B", "H", "Hkv", "new", "keys", "D", "Dv", "dtype", "causal", "kind", "L",
           "steps", "wall_us", "dev_us", "b2b_us", "host_us", "launch_us", "launch+ev", "ev", "K",
           "lib_us", "empty_us", "empty_b2b", "GB/s", "err(o)", "check");
  else if (kind == TABLE_DECODE)
    printf("%-9s %-14s %4s %4s %4s %6s %7s %4s %4s %-5s %6s %-14s %6s %10s %9s %6s %9s %9s "
           "%9s  %s\n",
           "op", "impl", "B", "H", "Hkv", "new", "keys", "D", "Dv", "dtype", "causal", "cache",
           "splits", "us", "GB/s", "%bw", "TFLOP/s", "err(o)", "err(lse)", "check");
  else
    printf("%-9s %-14s %4s %4s %4s %6s %6s %4s %4s %-5s %6s %-9s %10s %9s %9s %6s %6s %7s "
           "%9s %9s %9s  %s\n",
           "op", "impl", "B", "H", "Hkv", "Nq", "Nk", "D", "Dv", "dtype", "causal", "algo", "ms",
           "TFLOP/s", "GB/s", "%alu", "%bw", "gain", "err(o)", "err(lse)", "err(grad)",
           "check");
}

/* A decode cache's format: q's dtype, a format, or K's/V's. */
static void cache_format(const bench_row *r, char *buf, size_t size) {
  if (r->cache_k == r->cache_v) snprintf(buf, size, "%s", tu_dtype_name(r->cache_k));
  else snprintf(buf, size, "%s/%s", tu_dtype_name(r->cache_k), tu_dtype_name(r->cache_v));
}

/* A decode cache's layout: contig or pageN, +append, and its format where
 * it is not q's dtype. */
static void cache_layout(const bench_row *r, char *buf, size_t size) {
  if (r->page_size > 0) snprintf(buf, size, "page%lld", (long long)r->page_size);
  else snprintf(buf, size, "contig");
  if (r->append > 0) strncat(buf, "+append", size - strlen(buf) - 1);
  if (r->cache_k != r->t || r->cache_v != r->t) {
    char f[32];
    cache_format(r, f, sizeof f);
    snprintf(buf + strlen(buf), size - strlen(buf), " %s", f);
  }
}

/* A decode row of the table: the time in us, the cache's layout. */
static void table_decode_row(const bench_row *r, const bench_rates *x, double err_o,
                             double err_lse) {
  char cache[64], splits[24];
  cache_layout(r, cache, sizeof cache);
  if (r->num_splits > 0) snprintf(splits, sizeof splits, "%lld", (long long)r->num_splits);
  else snprintf(splits, sizeof splits, "auto");
  printf("%-9s %-14s %4lld %4lld %4lld %6lld %7lld %4lld %4lld %-5s %6d %-14s %6s",
         bench_op_name(r->op), r->impl, (long long)r->b, (long long)r->h, (long long)r->hkv,
         (long long)r->sq, (long long)r->sk, (long long)r->d, (long long)r->dv,
         tu_dtype_name(r->t), r->causal, cache, splits);
  cell(" %*.2f", r->ms * 1e3, 10);
  cell(" %*.2f", x->gbps, 9);
  cell(" %*.1f", x->bw_pct, 6);
  cell(" %*.4f", x->tflops, 9);
  cell(" %*.2e", err_o, 9);
  cell(" %*.2e", err_lse, 9);
  printf("  %s\n", r->check);
}

/* A loop-mode row of the table: per-call times in us. */
static void table_loop_row(const bench_row *r, const bench_rates *x, double err_o) {
  char kind[64];
  const int decode = r->op == OP_DECODE;
  if (decode) {
    cache_layout(r, kind, sizeof kind);
    if (r->num_splits > 0)
      snprintf(kind + strlen(kind), sizeof kind - strlen(kind), "/s%lld",
               (long long)r->num_splits);
  } else {
    snprintf(kind, sizeof kind, "%s",
             r->algorithm < 0 ? "-" : bench_algorithm_name((fcl_rwkv6_algorithm)r->algorithm));
  }
  printf("%-9s %-12s %4lld %4lld %4lld %5lld", bench_op_name(r->op), r->impl, (long long)r->b,
         (long long)r->h, (long long)r->hkv, (long long)r->sq);
  if (decode) printf(" %6lld", (long long)r->sk);
  else printf(" %6s", "-");
  printf(" %4lld %4lld %-5s", (long long)r->d, (long long)r->dv, tu_dtype_name(r->t));
  if (r->causal < 0) printf(" %6s", "-");
  else printf(" %6d", r->causal);
  printf(" %-18s %4d %5d", kind, r->layers, r->steps);
  cell(" %*.2f", r->wall_ms * 1e3, 9);
  cell(" %*.2f", r->ms * 1e3, 9);
  cell(" %*.2f", r->b2b_ms * 1e3, 9);
  cell(" %*.2f", r->host_ms * 1e3, 9);
  cell(" %*.2f", r->launch_ms * 1e3, 9);
  cell(" %*.2f", r->launch_event_ms * 1e3, 9);
  printf(" %3s %3d", r->events_off ? "off" : "on", r->kernels_per_call);
  cell(" %*.2f", bench_lib_host_ms(r) * 1e3, 9);
  cell(" %*.2f", r->empty_dev_ms * 1e3, 9);
  cell(" %*.2f", r->empty_b2b_ms * 1e3, 9);
  cell(" %*.2f", x->gbps, 9);
  cell(" %*.2e", err_o, 9);
  printf("  %s\n", r->check);
}

void out_row(const bench_row *r) {
  const char *dt = tu_dtype_name(r->t), *op = bench_op_name(r->op);
  const char *algo = r->algorithm < 0 ? NULL : bench_algorithm_name((fcl_rwkv6_algorithm)r->algorithm);
  const double err_o = r->err_o >= 0 ? r->err_o : NAN, err_lse = r->err_lse >= 0 ? r->err_lse : NAN,
               err_grad = r->err_grad >= 0 ? r->err_grad : NAN;
  const bench_rates x = bench_rates_of(r, &g_peak);
  const int decode = r->op == OP_DECODE, loop = r->layers > 0;
  if (g_format == OUT_TABLE)
    table_header(loop ? TABLE_LOOP : decode ? TABLE_DECODE : TABLE_OPS);
  if (g_format == OUT_TABLE && loop) {
    table_loop_row(r, &x, err_o);
  } else if (g_format == OUT_TABLE && decode) {
    table_decode_row(r, &x, err_o, err_lse);
  } else if (g_format == OUT_TABLE) {
    printf("%-9s %-14s %4lld %4lld %4lld %6lld %6lld %4lld %4lld %-5s ", op, r->impl,
           (long long)r->b, (long long)r->h, (long long)r->hkv, (long long)r->sq,
           (long long)r->sk, (long long)r->d, (long long)r->dv, dt);
    if (r->causal < 0) printf("%6s ", "-");
    else printf("%6d ", r->causal);
    printf("%-9s", algo ? algo : "-");
    cell(" %*.3f", r->ms, 10);
    cell(" %*.4f", x.tflops, 9);
    cell(" %*.2f", x.gbps, 9);
    cell(" %*.1f", x.alu_pct, 6);
    cell(" %*.1f", x.bw_pct, 6);
    cell(" %*.2f", r->gain, 6), printf(isnan(r->gain) ? " " : "x");
    cell(" %*.2e", err_o, 9);
    cell(" %*.2e", err_lse, 9);
    cell(" %*.2e", err_grad, 9);
    printf("  %s\n", r->check);
  } else if (g_format == OUT_CSV) {
    printf("%s,%s,\"", op, r->impl);
    for (const char *c = g_device; *c; c++) { /* CSV doubles quotes */
      if (*c == '"') putchar('"');
      putchar(*c);
    }
    printf("\",%lld,%lld,%lld,%lld,%lld,%lld,%lld,%s,", (long long)r->b, (long long)r->h,
           (long long)r->hkv, (long long)r->sq, (long long)r->sk, (long long)r->d,
           (long long)r->dv, dt);
    if (r->causal >= 0) printf("%d", r->causal);
    printf(",%s", algo ? algo : "");
    const double v1[6] = {r->ms, x.tflops, x.gbps, err_o, err_lse, err_grad};
    for (int i = 0; i < 6; i++) {
      if (isnan(v1[i])) printf(",");
      else printf(i < 3 ? ",%.6g" : ",%.3g", v1[i]);
    }
    printf(",%s", r->check);
    const double v2[6] = {r->wall_ms, x.alu_pct, x.bw_pct, r->gain, g_peak.gflops, g_peak.gbps};
    for (int i = 0; i < 6; i++) {
      if (isnan(v2[i])) printf(",");
      else printf(",%.6g", v2[i]);
    }
    if (g_decode_cols && decode) {
      char f[32];
      cache_format(r, f, sizeof f);
      printf(",%lld,%lld,%d,%lld,", (long long)r->page_size, (long long)r->num_splits,
             r->append, (long long)r->context);
      if (!isnan(r->ms)) printf("%.6g", r->ms * 1e3);
      printf(",%s", f);
    } else if (g_decode_cols)
      printf(",,,,,,");
    if (g_loop_cols && loop) {
      printf(",%d,%d,%d,%s", r->layers, r->steps, r->kernels_per_call,
             r->events_off ? "off" : "on");
      const double v3[9] = {r->wall_ms, r->ms, r->host_ms, r->launch_ms, r->launch_event_ms,
                            bench_lib_host_ms(r), r->empty_dev_ms, r->b2b_ms, r->empty_b2b_ms};
      for (int i = 0; i < 9; i++) {
        if (isnan(v3[i])) printf(",");
        else printf(",%.6g", v3[i] * 1e3);
      }
    } else if (g_loop_cols) {
      printf(",,,,,,,,,,,,,");
    }
    printf("\n");
  } else {
    printf("%s\n  {\"op\": \"%s\", \"impl\": \"%s\", \"device\": ", g_first ? "" : ",", op,
           r->impl);
    json_string(g_device);
    printf(", \"batch\": %lld, \"heads\": %lld, \"heads_kv\": %lld, \"seqlen_q\": %lld, "
           "\"seqlen_k\": %lld, \"head_dim\": %lld, \"head_dim_v\": %lld, \"dtype\": \"%s\", ",
           (long long)r->b, (long long)r->h, (long long)r->hkv, (long long)r->sq,
           (long long)r->sk, (long long)r->d, (long long)r->dv, dt);
    if (r->causal < 0) printf("\"causal\": null, ");
    else printf("\"causal\": %d, ", r->causal);
    if (algo) printf("\"algorithm\": \"%s\", ", algo);
    else printf("\"algorithm\": null, ");
    json_number("ms", r->ms, ", ");
    json_number("tflops", x.tflops, ", ");
    json_number("gbps", x.gbps, ", ");
    json_number("err_o", err_o, ", ");
    json_number("err_lse", err_lse, ", ");
    json_number("err_grad", err_grad, ", ");
    printf("\"check\": \"%s\", ", r->check);
    json_number("wall_ms", r->wall_ms, ", ");
    json_number("alu_pct", x.alu_pct, ", ");
    json_number("bw_pct", x.bw_pct, ", ");
    json_number("gain", r->gain, ", ");
    json_number("peak_gflops", g_peak.gflops, ", ");
    json_number("peak_gbps", g_peak.gbps, "");
    if (r->dropout > 0) printf(", \"dropout\": %g", r->dropout);
    if (decode) { /* extra members of decode rows */
      printf(", ");
      json_number("us", r->ms * 1e3, "");
      char f[32];
      cache_format(r, f, sizeof f);
      printf(", \"page_size\": %lld, \"num_splits\": %lld, \"append\": %d, \"context\": %lld, "
             "\"cache_dtype\": \"%s\"",
             (long long)r->page_size, (long long)r->num_splits, r->append,
             (long long)r->context, f);
    }
    if (loop) { /* extra members of loop-mode rows, per call, in us */
      printf(", \"layers\": %d, \"steps\": %d, \"kernels_per_call\": %d, "
             "\"timing_events\": \"%s\", ",
             r->layers, r->steps, r->kernels_per_call, r->events_off ? "off" : "on");
      json_number("wall_us", r->wall_ms * 1e3, ", ");
      json_number("device_us", r->ms * 1e3, ", ");
      json_number("host_us", r->host_ms * 1e3, ", ");
      json_number("launch_us", r->launch_ms * 1e3, ", ");
      json_number("launch_event_us", r->launch_event_ms * 1e3, ", ");
      json_number("lib_host_us", bench_lib_host_ms(r) * 1e3, ", ");
      json_number("empty_kernel_us", r->empty_dev_ms * 1e3, ", ");
      json_number("device_b2b_us", r->b2b_ms * 1e3, ", ");
      json_number("empty_b2b_us", r->empty_b2b_ms * 1e3, "");
    }
    printf("}");
  }
  g_first = 0;
  fflush(stdout);
}

void out_end(void) {
  if (g_format == OUT_JSON) printf("\n]\n");
}
