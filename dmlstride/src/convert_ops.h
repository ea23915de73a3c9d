/* The arithmetic between loading and storing, on a staging buffer of n
   values.  Parameters are a single value (step 0) or one per element
   (step 1); scale and shift have the same step. */
#ifndef DMLS_CONVERT_OPS_H
#define DMLS_CONVERT_OPS_H

#include <stdint.h>

/* op: CONVERT_OP_*; scale and shift (bias or zero point) are float[]. */
void convert_op32(int op, float *x, int64_t n, const float *scale, int scale_step,
                  const float *shift, int shift_step);
/* CONVERT_OP_AFFINE in double. */
void convert_op64(double *x, int64_t n, const double *scale, int scale_step,
                  const double *shift, int shift_step);

#endif
