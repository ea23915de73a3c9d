#include "nibble.h"

#include "isa.h"

void dmls_unpack(const uint8_t *s, int64_t nib0, int64_t n, uint8_t *out, int sign) {
    int64_t i = 0, k, pairs;
    const uint8_t *q;
    /* Sign extension of a 4-bit value v: (v ^ 8) - 8; with sign unset, v. */
    const uint8_t x8 = sign ? 0x08 : 0;
    if (n <= 0) return;
    if (nib0 & 1) {
        out[0] = (uint8_t)(((s[nib0 >> 1] >> 4) ^ x8) - x8);
        i = 1;
    }
    q = s + ((nib0 + i) >> 1);
    pairs = (n - i) >> 1;
    for (k = dmls_isa.unpack_nibbles(q, out + i, pairs, sign); k < pairs; k++) {
        out[i + 2 * k] = (uint8_t)(((q[k] & 0x0F) ^ x8) - x8);
        out[i + 2 * k + 1] = (uint8_t)(((q[k] >> 4) ^ x8) - x8);
    }
    if (i + 2 * pairs < n) out[n - 1] = (uint8_t)(((q[pairs] & 0x0F) ^ x8) - x8);
}

void dmls_pack(const uint8_t *src, int64_t n, uint8_t *d, int64_t nib0) {
    int64_t i = 0, k, pairs;
    uint8_t *q;
    if (n <= 0) return;
    if (nib0 & 1) {
        dmls_set_nibble(&d[nib0 >> 1], 1, src[0]);
        i = 1;
    }
    q = d + ((nib0 + i) >> 1);
    pairs = (n - i) >> 1;
    for (k = dmls_isa.pack_nibbles(src + i, q, pairs); k < pairs; k++)
        q[k] = (uint8_t)((src[i + 2 * k] & 0x0F) | ((src[i + 2 * k + 1] & 0x0F) << 4));
    if (i + 2 * pairs < n) dmls_set_nibble(&q[pairs], 0, src[n - 1]);
}

void dmls_nibble_row(const dmls_plan *p, const uint8_t *s, uint8_t *d,
                     int64_t so, int64_t do_, int64_t n, int64_t ss, int64_t ds) {
    int64_t j, x, y;
    uint8_t v;
    for (j = 0; j < n; j++) {
        x = so + j * ss;
        y = do_ + j * ds;
        if (p->src_nibble)
            v = (x & 1) ? (uint8_t)(s[x >> 1] >> 4) : (uint8_t)(s[x >> 1] & 0x0F);
        else
            v = s[x] & 0x0F;
        if (p->dst_nibble) {
            /* Inside a run of consecutive nibbles both nibbles of a byte are
               this row's; elsewhere the other one may belong to a concurrent
               writer. */
            if (ds == 1 && j > 0 && j < n - 1)
                d[y >> 1] = (uint8_t)((y & 1) ? (d[y >> 1] & 0x0F) | (v << 4) : (d[y >> 1] & 0xF0) | v);
            else
                dmls_set_nibble(&d[y >> 1], (int)(y & 1), v);
        } else {
            d[y] = (p->sign_extend && (v & 0x08)) ? (uint8_t)(v | 0xF0) : v;
        }
    }
}
