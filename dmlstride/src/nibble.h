/* 4-bit elements: byte b holds element 2i in its low nibble and element
   2i + 1 in its high nibble.  Nibble offsets count elements. */
#ifndef DMLS_NIBBLE_H
#define DMLS_NIBBLE_H

#include <stdint.h>

#include "plan.h"

/* n nibbles from nibble offset nib0 of s into one byte each (sign-extended
   from bit 3 when sign is set). */
void dmls_unpack(const uint8_t *s, int64_t nib0, int64_t n, uint8_t *out, int sign);

/* n bytes' low nibbles into d from nibble offset nib0; the nibbles around
   the range are left as they were. */
void dmls_pack(const uint8_t *src, int64_t n, uint8_t *d, int64_t nib0);

/* Elements so (source) and do_ (destination) onwards, n of them at strides
   ss and ds, on the element-wise nibble path (p->src_nibble, p->dst_nibble,
   p->sign_extend say which side holds nibbles). */
void dmls_nibble_row(const dmls_plan *p, const uint8_t *s, uint8_t *d,
                     int64_t so, int64_t do_, int64_t n, int64_t ss, int64_t ds);

#endif
