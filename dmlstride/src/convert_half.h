/* float16 conversions: a bit-exact software path for every CPU and, where
   the CPU has F16C, its conversion instructions (chosen at run time).

   Both round to nearest even, turn overflow into infinity, keep subnormals
   and keep a NaN a NaN (payload's top bits kept, quiet NaNs unchanged). */
#ifndef DMLS_CONVERT_HALF_H
#define DMLS_CONVERT_HALF_H

#include <stdint.h>

#include "convert.h"

uint16_t convert_f32_to_f16(float f);
uint16_t convert_f64_to_f16(double d);
float convert_f16_to_f32(uint16_t h);

/* Contiguous rows, in the software path. */
void convert_f16_to_f32_row_soft(const uint16_t *s, int64_t n, float *d);
void convert_f32_to_f16_row_soft(const float *s, int64_t n, uint16_t *d);

/* The F16C variants (compiled with a target attribute, only on x86). */
#if CONVERT_HAVE_X86
#define CONVERT_HAVE_F16C 1
void convert_f16_to_f32_row_f16c(const uint16_t *s, int64_t n, float *d);
void convert_f32_to_f16_row_f16c(const float *s, int64_t n, uint16_t *d);
#else
#define CONVERT_HAVE_F16C 0
#endif

/* The row conversions in use (see convert_dispatch.c). */
typedef struct {
    void (*f16_to_f32)(const uint16_t *s, int64_t n, float *d);
    void (*f32_to_f16)(const float *s, int64_t n, uint16_t *d);
    int hardware;    /* 1: F16C, 0: software */
} convert_half_ops;

extern convert_half_ops convert_half;

/* Choose the conversions: hardware when allowed and the CPU has it.
   Returns 1 if the hardware path is in use.  Call with the GIL held (no
   conversion may be running). */
int convert_half_select(int allow_hardware);

#endif
