/* fa-bench output: the rows as a table, CSV or JSON on stdout, with the
 * rates and utilisations derived from each row's counts and the peaks. */
#ifndef FCL_BENCH_OUTPUT_H
#define FCL_BENCH_OUTPUT_H

#include "bench.h"
#include "peak.h"

/* Derived columns of a row; NAN where they do not apply. */
typedef struct { double tflops, gbps, alu_pct, bw_pct; } bench_rates;
bench_rates bench_rates_of(const bench_row *r, const bench_peak *peak);

/* The library's host time a call beyond its launches: host_ms less
 * kernels_per_call bare launches (with an event where the timed steps had
 * the library's events on); NAN outside loop mode. */
double bench_lib_host_ms(const bench_row *r);

/* Header (table: the device and peaks; CSV) or opening bracket (JSON).
 * decode: CSV gets the decode columns (page_size, num_splits, append,
 * context, us) at the end; the table prints a header of its own before the
 * decode rows, with the time in us and the cache layout. loop (--layers):
 * CSV gets the loop columns (layers, steps, kernels_per_call,
 * timing_events, wall_us, device_us, host_us, launch_us, launch_event_us,
 * lib_host_us) after those; loop rows have a table of their own, in us,
 * and these members in JSON. */
void out_begin(bench_output format, const char *device, const bench_peak *peak, int decode,
               int loop);
void out_row(const bench_row *r);
void out_end(void);

#endif
