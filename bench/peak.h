/* fa-bench: the device's measured peaks, the denominators of the
 * utilisation columns. */
#ifndef FCL_BENCH_PEAK_H
#define FCL_BENCH_PEAK_H

#include "flashcl.h"

typedef struct {
  double gflops; /* f32 multiply-add rate, 2 FLOPs per FMA; NAN if not measured */
  double gbps;   /* copy bandwidth, bytes read + bytes written; NAN if not measured */
  int    gbps_given; /* gbps is fa-bench's --peak-gbps, not measured */
} bench_peak;

/* Measures both once (about a second at most); a part that fails is NAN,
 * with the reason on stderr. */
bench_peak bench_measure_peak(fcl_context *ctx);

#endif
