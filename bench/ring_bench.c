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
 * Inputs are seeded values made on the device (bench/ring_data.cl), so that
 * sequences of 128K tokens take no host time to set up.
 * R ranks sharing one GPU compete for it: compute then includes waiting
 * for the other rank's kernels. */
#include "flashcl_mpi.h"
#include "ring_data.h"

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

/* A whole-sequence device tensor [b, n, h, d] and this rank's rows of it
 * (slice sl): seeded uniform values in [-a, a] (the same on every rank),
 * or left unset where a is 0 (outputs). */
static void make_pair(fcl_context *ctx, const fcl_ring_slice_info *sl, int64_t b, int64_t n,
                      int64_t h, int64_t d, fcl_dtype t, double a, unsigned seed,
                      tu_tensor *whole, tu_tensor *mine) {
  if (ring_data_tensor(ctx, b, n, h, d, t, whole) ||
      ring_data_tensor(ctx, b, sl->length, h, d, t, mine) ||
      (a != 0.0 && (ring_data_fill(ctx, whole, seed, a, n, NULL) ||
                    ring_data_fill(ctx, mine, seed, a, n, sl)))) {
    fprintf(stderr, "fa-ring-bench: rank %d: making a tensor of %lld x %lld x %lld x %lld failed\n",
            g_rank, (long long)b, (long long)n, (long long)h, (long long)d);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
}

/* The transfers of one ring call alone: R - 1 steps of a K/V slice (and
 * for the backward R steps of f32 dK/dV), MPI_Sendrecv between host
 * buffers, in ms. One untimed round first, so that the buffers' pages are
 * in place (first touches are slow in some VMs). */
static double comm_only(size_t kv_bytes, size_t dkv_bytes, int bwd) {
  if (g_size == 1) return 0.0;
  /* Every rank moves the largest slice's bytes (slices differ by a token
   * where the ranks do not divide the length): matching counts. */
  unsigned long long mine[2] = {kv_bytes, dkv_bytes}, most_of[2];
  MPI_Allreduce(mine, most_of, 2, MPI_UNSIGNED_LONG_LONG, MPI_MAX, MPI_COMM_WORLD);
  kv_bytes = (size_t)most_of[0], dkv_bytes = (size_t)most_of[1];
  const size_t most = kv_bytes > dkv_bytes ? kv_bytes : dkv_bytes;
  char *a = malloc(most), *b = malloc(most);
  if (!a || !b) MPI_Abort(MPI_COMM_WORLD, 2);
  memset(a, 1, most), memset(b, 0, most);
  const int next = (g_rank + 1) % g_size, prev = (g_rank + g_size - 1) % g_size;
  double ms = 0.0;
  for (int round = 0; round < 2; ++round) {
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
    ms = (MPI_Wtime() - t0) * 1e3;
  }
  free(a), free(b);
  return ms;
}

static void run_case(fcl_context *ctx, fcl_ring *ring, const opts *o, int64_t n, fcl_dtype dt,
                     int causal);

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
        run_case(ctx, ring, &o, o.seqlen[i], (fcl_dtype)o.dtypes[t], o.causal[c]);
      }
  fcl_ring_destroy(ring);
  fcl_context_destroy(ctx);
  MPI_Finalize();
  return 0;
}

/* One pass's figures over the timed calls. */
typedef struct {
  double wall[64], comp[64], wait[64], single, err;
  int    steps;
} pass_times;

/* Rank 0 prints a pass's line (medians; the slowest rank's wall time). */
static void report(const opts *o, pass_times *p, int bwd, fcl_dtype dt, int causal, int64_t n,
                   int it, size_t kv, size_t dkv, const char *device) {
  const double comm = comm_only(kv, dkv, bwd);
  double m[4] = {median(p->wall, it), median(p->comp, it), median(p->wait, it), p->err};
  double mx[4], sum[4], cm = comm;
  MPI_Allreduce(m, mx, 4, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  MPI_Allreduce(m, sum, 4, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  MPI_Allreduce(&comm, &cm, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  const double compute = sum[1] / g_size, overlap = compute > 0 ? compute / mx[0] : -1.0;
  if (g_rank != 0) return;
  const char *op = bwd ? "bwd" : "fwd", *dn = tu_dtype_name(dt);
  if (o->json)
    printf("{\"op\": \"ring-%s\", \"dtype\": \"%s\", \"causal\": %d, \"layout\": \"%s\", "
           "\"batch\": %lld, \"heads\": %lld, \"heads_kv\": %lld, \"head_dim\": %lld, "
           "\"seqlen\": %lld, \"ranks\": %d, \"steps\": %d, \"ms\": %.4f, \"step_ms\": %.4f, "
           "\"compute_ms\": %.4f, \"overlap\": %.4f, \"wait_ms\": %.4f, \"comm_ms\": %.4f, "
           "\"single_ms\": %.4f, \"err\": %.3g, \"device\": \"%s\"}\n",
           op, dn, causal, o->zigzag ? "zigzag" : "contiguous", (long long)o->batch,
           (long long)o->heads, (long long)o->heads_kv, (long long)o->head_dim, (long long)n,
           g_size, p->steps, mx[0], mx[0] / p->steps, compute, overlap, sum[2] / g_size, cm,
           p->single, mx[3], device);
  else
    printf("%-4s %-4s %-6d %7lld %4d %9.3f %9.3f %9.3f %7.2f %8.3f %9.3f %9.3f %9.2g\n", op, dn,
           causal, (long long)n, g_size, mx[0], mx[0] / p->steps, compute, overlap,
           sum[2] / g_size, cm, p->single, mx[3]);
  fflush(stdout);
}

/* One shape: the inputs are made once, then the forward (and backward)
 * passes are timed and checked together; each pass gets its own line. */
static void run_case(fcl_context *ctx, fcl_ring *ring, const opts *o, int64_t n, fcl_dtype dt,
                     int causal) {
  const int64_t B = o->batch, H = o->heads, HK = o->heads_kv, D = o->head_dim;
  const int bwd = o->bwd;
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
  /* The whole sequence's tensors (same seeds on every rank) and this rank's rows. */
  tu_tensor Q, K, V, DO, O, DQ, DK, DV, lq, lk, lv, ldo, lo, ldq, ldk, ldv;
  make_pair(ctx, &sl, B, n, H, D, dt, 2.0, 1, &Q, &lq);
  make_pair(ctx, &sl, B, n, HK, D, dt, 2.0, 2, &K, &lk);
  make_pair(ctx, &sl, B, n, HK, D, dt, 1.0, 3, &V, &lv);
  make_pair(ctx, &sl, B, n, H, D, dt, bwd ? 1.0 : 0.0, 4, &DO, &ldo);
  make_pair(ctx, &sl, B, n, H, D, dt, 0.0, 5, &O, &lo);
  make_pair(ctx, &sl, B, n, H, D, dt, 0.0, 6, &DQ, &ldq);
  make_pair(ctx, &sl, B, n, HK, D, dt, 0.0, 7, &DK, &ldk);
  make_pair(ctx, &sl, B, n, HK, D, dt, 0.0, 8, &DV, &ldv);
  cl_context cl = fcl_context_cl(ctx);
  cl_command_queue qu = fcl_context_queue(ctx);
  cl_mem lse = tu_buffer_poison(cl, qu, (size_t)(B * H * n) * 4);
  cl_mem llse = tu_buffer_poison(cl, qu, (size_t)(B * H * L) * 4);
  const int it = o->iters < 64 ? o->iters : 64;
  pass_times pf = {.steps = g_size}, pb = {.steps = g_size};

  /* The single-process calls (one warm-up on every rank), timed alone on rank 0's device. */
  fcl_status s = fcl_attention_forward(ctx, a, &Q.t, &K.t, &V.t, &O.t, lse);
  if (!s && bwd)
    s = fcl_attention_backward(ctx, a, &Q.t, &K.t, &V.t, &O.t, lse, &DO.t, &DQ.t, &DK.t, &DV.t);
  clFinish(qu);
  MPI_Barrier(MPI_COMM_WORLD);
  if (g_rank == 0 && !s) {
    double tf[64], tb[64] = {0};
    for (int i = 0; i < it && !s; ++i) {
      double t0 = MPI_Wtime();
      s = fcl_attention_forward(ctx, a, &Q.t, &K.t, &V.t, &O.t, lse);
      clFinish(qu);
      tf[i] = (MPI_Wtime() - t0) * 1e3;
      if (s || !bwd) continue;
      t0 = MPI_Wtime();
      s = fcl_attention_backward(ctx, a, &Q.t, &K.t, &V.t, &O.t, lse, &DO.t, &DQ.t, &DK.t, &DV.t);
      clFinish(qu);
      tb[i] = (MPI_Wtime() - t0) * 1e3;
    }
    pf.single = median(tf, it), pb.single = median(tb, it);
  }
  if (s) fprintf(stderr, "rank %d: single-process call: %s\n", g_rank, fcl_context_last_error(ctx));
  MPI_Barrier(MPI_COMM_WORLD);

  /* The ring: the forward gives o and lse (the backward's inputs). */
  fcl_ring_stats st = {0};
  for (int i = -o->warmup - 1; i < it && !s; ++i) {
    MPI_Barrier(MPI_COMM_WORLD);
    s = fcl_ring_attention_forward(ring, &rd, &lq.t, &lk.t, &lv.t, &lo.t, llse);
    fcl_ring_last_stats(ring, &st);
    if (i >= 0) pf.wall[i] = st.wall_ms, pf.comp[i] = st.compute_ms, pf.wait[i] = st.wait_ms;
    if (s || !bwd) continue;
    MPI_Barrier(MPI_COMM_WORLD);
    s = fcl_ring_attention_backward(ring, &rd, &lq.t, &lk.t, &lv.t, &lo.t, llse, &ldo.t, &ldq.t,
                                    &ldk.t, &ldv.t);
    fcl_ring_last_stats(ring, &st);
    if (i >= 0) pb.wall[i] = st.wall_ms, pb.comp[i] = st.compute_ms, pb.wait[i] = st.wait_ms;
  }
  pf.steps = pb.steps = st.steps > 0 ? st.steps : g_size;
  if (s) {
    fprintf(stderr, "rank %d: ring call: %s\n", g_rank, fcl_ring_last_error(ring));
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  if (o->check) { /* this rank's rows against the single process's */
    pf.err = ring_data_maxdiff(ctx, &O, &lo, n, &sl);
    if (bwd)
      pb.err = fmax(ring_data_maxdiff(ctx, &DQ, &ldq, n, &sl),
                    fmax(ring_data_maxdiff(ctx, &DK, &ldk, n, &sl),
                         ring_data_maxdiff(ctx, &DV, &ldv, n, &sl)));
    if (pf.err < 0 || pb.err < 0) {
      fprintf(stderr, "fa-ring-bench: rank %d: the check's kernel failed\n", g_rank);
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
  }
  const size_t es = fcl_dtype_size(dt);
  const size_t kv = (size_t)(B * L * HK * 2 * D) * es, dkv = (size_t)(B * L * HK * 2 * D) * 4;
  const char *dev = fcl_context_device_name(ctx);
  if (o->fwd) report(o, &pf, 0, dt, causal, n, it, kv, dkv, dev);
  if (bwd) report(o, &pb, 1, dt, causal, n, it, kv, dkv, dev);
  tu_tensor *all[] = {&Q, &K, &V, &DO, &O, &DQ, &DK, &DV, &lq, &lk, &lv, &ldo, &lo, &ldq, &ldk, &ldv};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i) tu_tensor_release(all[i]);
  clReleaseMemObject(lse), clReleaseMemObject(llse);
}
