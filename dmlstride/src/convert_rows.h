/* Row loaders and storers: one row of n elements at an element stride,
   to and from a float or double staging buffer.  Element e of a 4-bit
   tensor is nibble e & 1 (low first) of byte e >> 1. */
#ifndef DMLS_CONVERT_ROWS_H
#define DMLS_CONVERT_ROWS_H

#include <stdint.h>

#include "convert.h"

/* Load n elements base[e0 + i * stride] into out (float[] or double[]). */
typedef void (*convert_load_fn)(const char *base, int64_t e0, int64_t stride, int64_t n, void *out);
/* Store n values of in (float[] or double[]) to base[e0 + i * stride]:
   floats round to nearest even; integers are rounded half to even and
   saturated to [lo, hi], NaN becoming 0. */
typedef void (*convert_store_fn)(const void *in, int64_t n, char *base, int64_t e0, int64_t stride,
                                 double lo, double hi);

extern const convert_load_fn convert_load32[CONVERT_NTYPES];
extern const convert_load_fn convert_load64[CONVERT_NTYPES];
extern const convert_store_fn convert_store32[CONVERT_NTYPES];
extern const convert_store_fn convert_store64[CONVERT_NTYPES];

#endif
