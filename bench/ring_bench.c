/* fa-ring-bench: ring attention across MPI ranks (flashcl_mpi), timed.
 *
 *   mpirun -np R fa-ring-bench [--op fwd,bwd] [--device SEL] [--batch N]
 *       [--heads N] [--heads-kv N] [--seqlen LIST] [--head-dim N]
 *       [--dtype f32,f16,bf16] [--causal 0,1] [--layout zigzag|contiguous]
 *       [--iters N] [--warmup N] [--check 0|1] [--json]
 *
 * seqlen is the whole sequence; each rank holds its slice (fcl_ring_slice).
 * In SEL, "%r" stands for the rank's index on its node, so that one GPU a
 * rank is e.g. --device 0:%r (platform 0, device local rank).
 * Per case it reports, over the --iters calls (medians; the slowest rank
 * for the wall time, the mean over ranks for the rest):
 *   ms        wall time of one ring call        step_ms   ms / ring steps
 *   compute   device time of the attention and merge work (profiling
 *             events between the steps' markers)
 *   overlap   compute / wall: 1 when every transfer hides behind compute
 *   wait      host time blocked on the transfers after a step's compute
 *             was enqueued
 *   comm      the same transfers alone (MPI between host buffers, no
 *             device work): what overlapping saves at most
 *   single    fcl_attention_(forward|backward) on the whole sequence on
 *             rank 0's device, alone (the 1-device baseline)
 *   err       with --check 1 (default), the largest difference of o (or
 *             dq, dk, dv) from the single-process call, over all ranks.
 * R ranks sharing one GPU compete for it: compute then includes waiting
 * for the other rank's kernels. */
#include "flashcl_mpi.h"
#include "test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  const char *device;
  int         fwd, bwd, iters, warmup, check, json, zigzag;
  int64_t     batch, heads, heads_kv, head_dim, seqlen[16];
  int         nseq, dtypes[3], ndt, causal[2], ncausal;
} opts;

static int g_rank, g_size;

static void usage(void) {
  if (g_rank == 0)
    printf("usage: mpirun -np R fa-ring-bench [--op fwd,bwd] [--device SEL (%%r: local rank)] [--batch N] "
           "[--heads N] [--heads-kv N] [--seqlen LIST] [--head-dim N] [--dtype LIST] "
           "[--causal LIST] [--layout zigzag|contiguous] [--iters N] [--warmup N] "
           "[--check 0|1] [--json]\n");
}

/* The selector with "%r" replaced by the rank's index among the ranks of
 * its node (empty: none given). */
static void device_for_rank(const char *sel, char *out, size_t n) {
  out[0] = '\0';
  if (!sel) return;
  MPI_Comm node;
  int local = 0;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, g_rank, MPI_INFO_NULL, &node);
  MPI_Comm_rank(node, &local);
  MPI_Comm_free(&node);
  size_t k = 0;
  for (const char *c = sel; *c && k + 12 < n; ++c) {
    if (c[0] == '%' && c[1] == 'r') {
      k += (size_t)snprintf(out + k, n - k, "%d", local);
      ++c;
    } else {
      out[k++] = *c;
    }
  }
  out[k] = '\0';
}

static int parse(int argc, char **argv, opts *o) {
  *o = (opts){NULL, 1, 0, 10, 2, 1, 0, 1, 1, 8, 8, 64, {8192}, 1, {FCL_F16}, 1, {0, 1}, 2};
  for (int i = 1; i < argc; ++i) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--json")) { o->json = 1; continue; }
    if (!v) return usage(), 0;
    ++i;
    if (!strcmp(a, "--op")) o->fwd = !!strstr(v, "fwd"), o->bwd = !!strstr(v, "bwd");
    else if (!strcmp(a, "--device")) o->device = v;
    else if (!strcmp(a, "--batch")) o->batch = atoll(v);
    else if (!strcmp(a, "--heads")) o->heads = atoll(v);
    else if (!strcmp(a, "--heads-kv")) o->heads_kv = atoll(v);
    else if (!strcmp(a, "--head-dim")) o->head_dim = atoll(v);
    else if (!strcmp(a, "--iters")) o->iters = atoi(v);
    else if (!strcmp(a, "--warmup")) o->warmup = atoi(v);
    else if (!strcmp(a, "--check")) o->check = atoi(v);
    else if (!strcmp(a, "--layout")) o->zigzag = strcmp(v, "contiguous") != 0;
    else if (!strcmp(a, "--seqlen")) {
      o->nseq = 0;
      for (const char *p = v; *p && o->nseq < 16; p = strchr(p, ',') ? strchr(p, ',') + 1 : "")
        o->seqlen[o->nseq++] = atoll(p);
    } else if (!strcmp(a, "--causal")) {
      o->ncausal = 0;
      for (const char *p = v; *p && o->ncausal < 2; p = strchr(p, ',') ? strchr(p, ',') + 1 : "")
        o->causal[o->ncausal++] = atoi(p);
    } else if (!strcmp(a, "--dtype")) {
      o->ndt = 0;
      const char *names[3] = {"f32", "f16", "bf16"};
      for (int t = 0; t < 3; ++t)
        for (const char *p = v; (p = strstr(p, names[t])); p += strlen(names[t]))
          if ((p == v || p[-1] == ',') && (p[strlen(names[t])] == ',' || !p[strlen(names[t])])) {
            o->dtypes[o->ndt++] = t;
            break;
          }
    } else return usage(), 0;
  }
  if (o->heads_kv <= 0 || o->heads % o->heads_kv) o->heads_kv = o->heads;
  return o->iters > 0 && o->nseq > 0 && o->ndt > 0 && (o->fwd || o->bwd);
}

static int cmp_d(const void *a, const void *b) {
  const double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}
static double median(double *x, int n) {
  qsort(x, (size_t)n, sizeof *x, cmp_d);
  return n % 2 ? x[n / 2] : 0.5 * (x[n / 2 - 1] + x[n / 2]);
}

/* A device tensor [b, s, h, d] of uniform values in [-a, a] (seeded). */
static tu_tensor rand_tensor(fcl_context *ctx, int64_t b, int64_t s, int64_t h, int64_t d,
                             fcl_dtype t, double a, uint64_t seed) {
  const size_t n = (size_t)(b * s * h * d);
  double *x = malloc(n * sizeof *x);
  tu_rng g;
  tu_rng_seed(&g, seed);
  if (x) tu_fill_uniform(&g, x, n, -a, a);
  tu_tensor out;
  memset(&out, 0, sizeof out);
  if (!x || tu_tensor_create(fcl_context_cl(ctx), fcl_context_queue(ctx), x, b, s, h, d, t,
                             TU_BSHD, 0, 0, &out)) {
    fprintf(stderr, "fa-ring-bench: rank %d: allocation of %zu elements failed\n", g_rank, n);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  free(x);
  return out;
}

/* Rows of this rank's slice of a dense [b][n][hd] into [b][len][hd]. */
static void take(const double *all, double *mine, const fcl_ring_slice_info *s, int64_t b,
                 int64_t n, int64_t hd) {
  tu_take_rows(all, mine, s->pieces, s->start, s->len, s->length, b, n, hd);
}

/* The transfers of one ring call alone: R - 1 steps of a K/V slice (and
 * for the backward R steps of f32 dK/dV), MPI_Sendrecv between host
 * buffers, in ms. */
static double comm_only(size_t kv_bytes, size_t dkv_bytes, int bwd) {
  if (g_size == 1) return 0.0;
  const size_t most = kv_bytes > dkv_bytes ? kv_bytes : dkv_bytes;
  char *a = malloc(most), *b = malloc(most);
  if (!a || !b) MPI_Abort(MPI_COMM_WORLD, 2);
  memset(a, 1, most);
  const int next = (g_rank + 1) % g_size, prev = (g_rank + g_size - 1) % g_size;
  MPI_Barrier(MPI_COMM_WORLD);
  const double t0 = MPI_Wtime();
  for (int s = 0; s < g_size; ++s) {
    for (size_t at = 0; s < g_size - 1 && at < kv_bytes; at += 1 << 30) {
      const int n = (int)(kv_bytes - at < (1u << 30) ? kv_bytes - at : 1u << 30);
      MPI_Sendrecv(a + at, n, MPI_BYTE, next, 0, b + at, n, MPI_BYTE, prev, 0, MPI_COMM_WORLD,
                   MPI_STATUS_IGNORE);
    }
    for (size_t at = 0; bwd && at < dkv_bytes; at += 1 << 30) {
      const int n = (int)(dkv_bytes - at < (1u << 30) ? dkv_bytes - at : 1u << 30);
      MPI_Sendrecv(a + at, n, MPI_BYTE, next, 1, b + at, n, MPI_BYTE, prev, 1, MPI_COMM_WORLD,
                   MPI_STATUS_IGNORE);
    }
  }
  const double ms = (MPI_Wtime() - t0) * 1e3;
  free(a), free(b);
  return ms;
}

static void run_case(fcl_context *ctx, fcl_ring *ring, const opts *o, int64_t n, fcl_dtype dt,
                     int causal, int bwd);

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g_size);
  opts o;
  if (!parse(argc, argv, &o)) {
    MPI_Finalize();
    return 2;
  }
  char device[256];
  device_for_rank(o.device, device, sizeof device);
  fcl_context *ctx = NULL;
  fcl_ring *ring = NULL;
  fcl_status s = fcl_context_create(device[0] ? device : NULL, &ctx);
  if (!s) s = fcl_ring_create(ctx, MPI_COMM_WORLD, &ring);
  if (s) {
    fprintf(stderr, "fa-ring-bench: rank %d: %s: %s%s\n", g_rank, fcl_status_string(s),
            fcl_context_last_error(NULL), fcl_ring_last_error(NULL));
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  if (g_rank == 0 && !o.json)
    printf("device: %s; %d ranks, %s\n%-4s %-4s %-6s %7s %4s %9s %9s %9s %7s %8s %9s %9s %9s\n",
           fcl_context_device_name(ctx), g_size, o.zigzag ? "zig-zag" : "contiguous", "op",
           "dt", "causal", "seqlen", "R", "ms", "step_ms", "compute", "overlap", "wait",
           "comm", "single", "err");
  for (int i = 0; i < o.nseq; ++i)
    for (int t = 0; t < o.ndt; ++t)
      for (int c = 0; c < o.ncausal; ++c) {
        if (o.fwd) run_case(ctx, ring, &o, o.seqlen[i], (fcl_dtype)o.dtypes[t], o.causal[c], 0);
        if (o.bwd) run_case(ctx, ring, &o, o.seqlen[i], (fcl_dtype)o.dtypes[t], o.causal[c], 1);
      }
  fcl_ring_destroy(ring);
  fcl_context_destroy(ctx);
  MPI_Finalize();
  return 0;
}

static void run_case(fcl_context *ctx, fcl_ring *ring, const opts *o, int64_t n, fcl_dtype dt,
                     int causal, int bwd) {
  const int64_t B = o->batch, H = o->heads, HK = o->heads_kv, D = o->head_dim;
  fcl_ring_desc rd = FCL_RING_DESC_INIT;
  fcl_attention_desc *a = &rd.attn;
  a->batch = B, a->seqlen_q = a->seqlen_k = n, a->heads_q = H, a->heads_kv = HK;
  a->head_dim = a->head_dim_v = D, a->causal = causal;
  rd.layout = o->zigzag ? FCL_RING_ZIGZAG : FCL_RING_CONTIGUOUS;
  fcl_ring_slice_info sl;
  if (fcl_ring_slice(rd.layout, n, g_size, g_rank, &sl)) {
    if (g_rank == 0) printf("seqlen %lld: too short for %d ranks\n", (long long)n, g_size);
    return;
  }
  const int64_t L = sl.length;
  /* The whole sequence's inputs (same seeds on every rank), and this rank's rows. */
  tu_tensor Q = rand_tensor(ctx, B, n, H, D, dt, 2.0, 1), K = rand_tensor(ctx, B, n, HK, D, dt, 2.0, 2);
  tu_tensor V = rand_tensor(ctx, B, n, HK, D, dt, 1.0, 3), DO = rand_tensor(ctx, B, n, H, D, dt, 1.0, 4);
  tu_tensor O = rand_tensor(ctx, B, n, H, D, dt, 0.0, 5), DQ = rand_tensor(ctx, B, n, H, D, dt, 0.0, 6);
  tu_tensor DK = rand_tensor(ctx, B, n, HK, D, dt, 0.0, 7), DV = rand_tensor(ctx, B, n, HK, D, dt, 0.0, 8);
  cl_context cl = fcl_context_cl(ctx);
  cl_command_queue qu = fcl_context_queue(ctx);
  cl_mem lse = tu_buffer_poison(cl, qu, (size_t)(B * H * n) * 4);
  tu_tensor *whole[4] = {&Q, &K, &V, &DO}, local[4];
  const int64_t hs[4] = {H, HK, HK, H};
  for (int i = 0; i < 4; ++i) {
    const size_t cnt = (size_t)(B * n * hs[i] * D), mine = (size_t)(B * L * hs[i] * D);
    double *all = malloc(cnt * sizeof *all), *part = malloc(mine * sizeof *part);
    if (!all || !part) MPI_Abort(MPI_COMM_WORLD, 2);
    tu_tensor_read(qu, whole[i], all, NULL);
    take(all, part, &sl, B, n, hs[i] * D);
    tu_tensor_create(cl, qu, part, B, L, hs[i], D, dt, TU_BSHD, 0, 0, &local[i]);
    free(all), free(part);
  }
  tu_tensor lo = rand_tensor(ctx, B, L, H, D, dt, 0.0, 9), ldq = rand_tensor(ctx, B, L, H, D, dt, 0.0, 10);
  tu_tensor ldk = rand_tensor(ctx, B, L, HK, D, dt, 0.0, 11), ldv = rand_tensor(ctx, B, L, HK, D, dt, 0.0, 12);
  cl_mem llse = tu_buffer_poison(cl, qu, (size_t)(B * H * L) * 4);

  /* The single-process call, alone on rank 0's device. */
  double single = 0.0;
  fcl_status s = fcl_attention_forward(ctx, a, &Q.t, &K.t, &V.t, &O.t, lse);
  if (!s && bwd)
    s = fcl_attention_backward(ctx, a, &Q.t, &K.t, &V.t, &O.t, lse, &DO.t, &DQ.t, &DK.t, &DV.t);
  clFinish(qu);
  MPI_Barrier(MPI_COMM_WORLD);
  if (g_rank == 0 && !s) {
    double t[64];
    const int it = o->iters < 64 ? o->iters : 64;
    for (int i = 0; i < it; ++i) {
      const double t0 = MPI_Wtime();
      s = bwd ? fcl_attention_backward(ctx, a, &Q.t, &K.t, &V.t, &O.t, lse, &DO.t, &DQ.t, &DK.t,
                                       &DV.t)
              : fcl_attention_forward(ctx, a, &Q.t, &K.t, &V.t, &O.t, lse);
      clFinish(qu);
      t[i] = (MPI_Wtime() - t0) * 1e3;
    }
    single = median(t, it);
  }
  if (s) fprintf(stderr, "rank %d: single-process call: %s\n", g_rank, fcl_context_last_error(ctx));
  MPI_Barrier(MPI_COMM_WORLD);

  /* The ring: the forward gives o and lse (the backward's inputs). */
  double wall[64], comp[64], wait[64];
  const int it = o->iters < 64 ? o->iters : 64;
  fcl_ring_stats st = {0};
  for (int i = -o->warmup - 1; i < it && !s; ++i) {
    MPI_Barrier(MPI_COMM_WORLD);
    s = fcl_ring_attention_forward(ring, &rd, &local[0].t, &local[1].t, &local[2].t, &lo.t, llse);
    if (!s && bwd)
      s = fcl_ring_attention_backward(ring, &rd, &local[0].t, &local[1].t, &local[2].t, &lo.t,
                                      llse, &local[3].t, &ldq.t, &ldk.t, &ldv.t);
    fcl_ring_last_stats(ring, &st);
    if (i >= 0) wall[i] = st.wall_ms, comp[i] = st.compute_ms, wait[i] = st.wait_ms;
  }
  if (s) {
    fprintf(stderr, "rank %d: ring call: %s\n", g_rank, fcl_ring_last_error(ring));
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  double err = 0.0;
  if (o->check) { /* this rank's rows against the single process's */
    tu_tensor *got[4] = {&lo, &ldq, &ldk, &ldv}, *ref[4] = {&O, &DQ, &DK, &DV};
    for (int i = bwd ? 1 : 0; i < (bwd ? 4 : 1); ++i) {
      const int64_t h = i >= 2 ? HK : H;
      const size_t cnt = (size_t)(B * n * h * D), mine = (size_t)(B * L * h * D);
      double *all = malloc(cnt * 8), *x = malloc(mine * 8), *y = malloc(mine * 8);
      if (!all || !x || !y) MPI_Abort(MPI_COMM_WORLD, 2);
      tu_tensor_read(qu, ref[i], all, NULL);
      take(all, x, &sl, B, n, h * D);
      tu_tensor_read(qu, got[i], y, NULL);
      for (size_t j = 0; j < mine; ++j) err = fmax(err, fabs(x[j] - y[j]));
      free(all), free(x), free(y);
    }
  }
  const size_t es = fcl_dtype_size(dt);
  const size_t kv = (size_t)(B * L * HK * 2 * D) * es, dkv = (size_t)(B * L * HK * 2 * D) * 4;
  const double comm = comm_only(kv, dkv, bwd);
  double m[4] = {median(wall, it), median(comp, it), median(wait, it), err}, mx[4], sum[4];
  MPI_Allreduce(m, mx, 4, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  MPI_Allreduce(m, sum, 4, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  double cm = comm;
  MPI_Allreduce(&comm, &cm, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  const double compute = sum[1] / g_size, overlap = compute > 0 ? compute / mx[0] : -1.0;
  if (g_rank == 0) {
    const char *op = bwd ? "bwd" : "fwd", *dn = tu_dtype_name(dt);
    if (o->json)
      printf("{\"op\": \"ring-%s\", \"dtype\": \"%s\", \"causal\": %d, \"layout\": \"%s\", "
             "\"batch\": %lld, \"heads\": %lld, \"heads_kv\": %lld, \"head_dim\": %lld, "
             "\"seqlen\": %lld, \"ranks\": %d, \"steps\": %d, \"ms\": %.4f, \"step_ms\": %.4f, "
             "\"compute_ms\": %.4f, \"overlap\": %.4f, \"wait_ms\": %.4f, \"comm_ms\": %.4f, "
             "\"single_ms\": %.4f, \"err\": %.3g, \"device\": \"%s\"}\n",
             op, dn, causal, o->zigzag ? "zigzag" : "contiguous", (long long)B, (long long)H,
             (long long)HK, (long long)D, (long long)n, g_size, st.steps, mx[0],
             mx[0] / st.steps, compute, overlap, sum[2] / g_size, cm, single, mx[3],
             fcl_context_device_name(ctx));
    else
      printf("%-4s %-4s %-6d %7lld %4d %9.3f %9.3f %9.3f %7.2f %8.3f %9.3f %9.3f %9.2g\n", op,
             dn, causal, (long long)n, g_size, mx[0], mx[0] / st.steps, compute, overlap,
             sum[2] / g_size, cm, single, mx[3]);
    fflush(stdout);
  }
  tu_tensor *all[] = {&Q, &K, &V, &DO, &O, &DQ, &DK, &DV, &local[0], &local[1], &local[2],
                      &local[3], &lo, &ldq, &ldk, &ldv};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i) tu_tensor_release(all[i]);
  clReleaseMemObject(lse), clReleaseMemObject(llse);
}
