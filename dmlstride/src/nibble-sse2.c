/* SSE2 nibble (un)packing, 16 packed bytes at a time. */
#include "isa.h"

#if DMLSTRIDE_HAVE_SIMD
#include <emmintrin.h>

/* Nibble (un)packing, 16 bytes at a time: byte b holds element 2i in its
   low nibble and element 2i + 1 in its high nibble.  Each returns the
   number of bytes done (a multiple of 16); the caller finishes the rest. */
static int64_t dmls_unpack_nibbles(const unsigned char *q, unsigned char *out, int64_t nbytes, int sign) {
    const __m128i m = _mm_set1_epi8(0x0F);
    /* Sign extension of a 4-bit value v: (v ^ 8) - 8; with sign unset, x ^ 0 - 0. */
    const __m128i s8 = _mm_set1_epi8(sign ? 0x08 : 0);
    int64_t k;
    for (k = 0; k + 16 <= nbytes; k += 16) {
        __m128i b = _mm_loadu_si128((const __m128i *)(q + k));
        __m128i lo = _mm_and_si128(b, m);
        __m128i hi = _mm_and_si128(_mm_srli_epi16(b, 4), m);
        lo = _mm_sub_epi8(_mm_xor_si128(lo, s8), s8);
        hi = _mm_sub_epi8(_mm_xor_si128(hi, s8), s8);
        _mm_storeu_si128((__m128i *)(out + 2 * k), _mm_unpacklo_epi8(lo, hi));
        _mm_storeu_si128((__m128i *)(out + 2 * k + 16), _mm_unpackhi_epi8(lo, hi));
    }
    return k;
}
static int64_t dmls_pack_nibbles(const unsigned char *src, unsigned char *q, int64_t nbytes) {
    const __m128i lo = _mm_set1_epi16(0x000F);
    const __m128i hi = _mm_set1_epi16(0x00F0);
    int64_t k;
    for (k = 0; k + 16 <= nbytes; k += 16) {
        __m128i a = _mm_loadu_si128((const __m128i *)(src + 2 * k));
        __m128i b = _mm_loadu_si128((const __m128i *)(src + 2 * k + 16));
        a = _mm_or_si128(_mm_and_si128(a, lo), _mm_and_si128(_mm_srli_epi16(a, 4), hi));
        b = _mm_or_si128(_mm_and_si128(b, lo), _mm_and_si128(_mm_srli_epi16(b, 4), hi));
        _mm_storeu_si128((__m128i *)(q + k), _mm_packus_epi16(a, b));
    }
    return k;
}

void dmls_nibble_sse2(dmls_isa_t *t) {
    t->unpack_nibbles = dmls_unpack_nibbles;
    t->pack_nibbles = dmls_pack_nibbles;
}
#endif
