/* Search spaces of fa-tune: each variant's axes of candidate values
 * (flashcl_tuning.h: fcl_tuning_axes), mapped to its parameters by the
 * variant itself. Points the device cannot run are pruned by the library's
 * own validity check before anything is built. */
#include "tune.h"

#include <string.h>

void tune_space_init(tune_space *sp, const fcl_tuning_class *cls) {
  memset(sp, 0, sizeof *sp);
  sp->cls = *cls;
  sp->naxes = fcl_tuning_axes(cls, sp->axes);
}

long tune_space_size(const tune_space *sp) {
  long n = 1;
  for (int i = 0; i < sp->naxes; ++i) n *= sp->axes[i].n;
  return n;
}

void tune_space_config(const tune_space *sp, const int *idx, fcl_config *cfg) {
  int v[FCL_TUNING_MAX_AXES];
  for (int i = 0; i < sp->naxes; ++i) v[i] = sp->axes[i].values[idx[i]];
  fcl_tuning_point(&sp->cls, v, cfg);
}
