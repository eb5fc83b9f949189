/* fa-bench --plot: throughput against sequence length as a PNG, one line per
 * configuration; attention in TFLOP/s and RWKV6 in GB/s on separate panels. */
#ifndef FCL_BENCH_PLOT_H
#define FCL_BENCH_PLOT_H

#include "bench.h"

/* Draws the timed rows (those without a time are left out) and writes the
 * PNG to path; 0 on success, -1 with the reason on stderr. */
int plot_write(const char *path, const bench_row *rows, int n, const char *device);

#endif
