/* 4-bit elements: byte b holds element 2i in its low nibble and element
   2i + 1 in its high nibble.  Nibble offsets count elements. */
#ifndef DMLS_NIBBLE_H
#define DMLS_NIBBLE_H

#include <stdint.h>

#include "plan.h"

/* Set the low (high = 0) or high nibble of *byte to v & 15 in one atomic
   update, so that a concurrent writer of the byte's other nibble (another
   thread writing a neighbouring tensor) loses nothing.  Used for every byte
   a kernel shares with a nibble it does not write. */
static inline void dmls_set_nibble(uint8_t *byte, int high, unsigned v) {
    const unsigned keep = high ? 0x0Fu : 0xF0u, put = high ? (v & 15u) << 4 : (v & 15u);
#if (defined(__GNUC__) || defined(__clang__)) && !defined(DMLS_NIBBLE_PLAIN_RMW)
    uint8_t old = __atomic_load_n(byte, __ATOMIC_RELAXED);
    while (!__atomic_compare_exchange_n(byte, &old, (uint8_t)((old & keep) | put), 1,
                                        __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
    }
#else
    *byte = (uint8_t)((*byte & keep) | put);
#endif
}

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
