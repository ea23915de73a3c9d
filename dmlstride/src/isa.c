#include "isa.h"

#include <string.h>

/* Generic variants: do nothing and leave the work to the caller's scalar
   code (which handles every remainder anyway). */
static void transpose_none(int W, const char *s, int64_t sj, char *d, int64_t dk,
                           int64_t kn, int64_t jn, int flags, int64_t *kdone, int64_t *jdone, char *scratch) {
    (void)W; (void)s; (void)sj; (void)d; (void)dk; (void)kn; (void)jn; (void)flags; (void)scratch;
    *kdone = 0;
    *jdone = 0;
}
static void nt_transpose_none(int W, const char *s, int64_t sj, char *d, int64_t dk,
                              int64_t kn, int64_t jn, int64_t *kdone, char *scratch) {
    (void)W; (void)s; (void)sj; (void)d; (void)dk; (void)kn; (void)jn; (void)scratch;
    *kdone = 0;
}
static void nt_shifted_none(int W, const char *s, int64_t sj, char *d, int64_t dk,
                            int64_t kn, int64_t jn, int64_t *kdone, int64_t *jdone, char *scratch) {
    (void)W; (void)s; (void)sj; (void)d; (void)dk; (void)kn; (void)jn; (void)scratch;
    *kdone = 0;
    *jdone = 0;
}
static void nt_contig_none(int W, const char *s, int64_t sj, char *d,
                           int64_t kn, int64_t jn, int64_t *kdone, char *scratch) {
    (void)W; (void)s; (void)sj; (void)d; (void)kn; (void)jn; (void)scratch;
    *kdone = 0;
}
static void narrow_none(int W, const char *s, int64_t sj, char *d, int64_t dk,
                        int64_t kn, int64_t jn, int64_t *kdone) {
    (void)W; (void)s; (void)sj; (void)d; (void)dk; (void)kn; (void)jn;
    *kdone = 0;
}
static void contig_ragged_none(int W, const char *s, int64_t sj, char *d,
                               int64_t kn, int64_t jn, int flags, int64_t *kdone, char *scratch) {
    (void)W; (void)s; (void)sj; (void)d; (void)kn; (void)jn; (void)flags; (void)scratch;
    *kdone = 0;
}
static void rows_short_none(int W, const char *s, int64_t sj, char *d, int64_t dk,
                            int64_t kn, int64_t jn, int stream, int flags, int64_t *jdone, char *scratch) {
    (void)W; (void)s; (void)sj; (void)d; (void)dk; (void)kn; (void)jn; (void)stream; (void)flags; (void)scratch;
    *jdone = 0;
}
static int64_t deint3_none(const char *s, char *d0, char *d1, char *d2, int64_t n) {
    (void)s; (void)d0; (void)d1; (void)d2; (void)n;
    return 0;
}
static int64_t int3_none(const char *s0, const char *s1, const char *s2, char *d, int64_t n) {
    (void)s0; (void)s1; (void)s2; (void)d; (void)n;
    return 0;
}
static int64_t deint_k_none(const char *s, int64_t sj, char *d, int64_t dk, int K, int64_t n) {
    (void)s; (void)sj; (void)d; (void)dk; (void)K; (void)n;
    return 0;
}
static int packed_none(int W, const char *a, char *b, int64_t kn, int64_t jn) {
    (void)W; (void)a; (void)b; (void)kn; (void)jn;
    return 0;
}
static int64_t pairs_in_order_none(const char *const *sr, char *const *dr, int64_t nk) {
    (void)sr; (void)dr; (void)nk;
    return 0;
}
static int64_t int_k_none(const char *s, int64_t kss, char *d, int K, int64_t n) {
    (void)s; (void)kss; (void)d; (void)K; (void)n;
    return 0;
}
static int64_t nibbles_none(const unsigned char *a, unsigned char *b, int64_t nbytes) {
    (void)a; (void)b; (void)nbytes;
    return 0;
}
static int64_t unpack_none(const unsigned char *q, unsigned char *out, int64_t nbytes, int sign) {
    (void)q; (void)out; (void)nbytes; (void)sign;
    return 0;
}
static int64_t deint_small_none(int W, int K, const char *s, char *d, int64_t dk, int64_t n) {
    (void)W; (void)K; (void)s; (void)d; (void)dk; (void)n;
    return 0;
}
static void stream_copy_plain(char *d, const char *s, int64_t n) { memcpy(d, s, (size_t)n); }
static void fence_none(void) {}
static void copy_plain(char *d, const char *s, int64_t n) { memcpy(d, s, (size_t)n); }
static int64_t block_pairs_none(int W, const char *const *sr, char *const *dr, int64_t nk, int64_t nj) {
    (void)W; (void)sr; (void)dr; (void)nk; (void)nj;
    return 0;
}
static int64_t block_short_none(const char *const *sr, char *const *dr, int64_t kn, int64_t nj) {
    (void)sr; (void)dr; (void)kn; (void)nj;
    return 0;
}
static int64_t tile_wide_none(int W, const char *s, int64_t sj, char *d, int64_t dk, int64_t nk, int64_t nj,
                              int64_t *jdone) {
    (void)W; (void)s; (void)sj; (void)d; (void)dk; (void)nk; (void)nj;
    *jdone = 0;
    return 0;
}

static int64_t fill_rows_none(char *d, const char *s, int w, int64_t n, int64_t rows, int64_t sstep,
                              int64_t dstep) {
    (void)d; (void)s; (void)w; (void)n; (void)rows; (void)sstep; (void)dstep;
    return 0;
}

void dmls_isa_generic(dmls_isa_t *t) {
    t->level = DMLS_ISA_GENERIC;
    t->transpose = transpose_none;
    t->nt_transpose = nt_transpose_none;
    t->nt_contig = nt_contig_none;
    t->contig_ragged = contig_ragged_none;
    t->rows_short = rows_short_none;
    t->deint3_u8 = deint3_none;
    t->deint3_32 = deint3_none;
    t->int3_32 = int3_none;
    t->int3_u8 = int3_none;
    t->unpack_nibbles = unpack_none;
    t->pack_nibbles = nibbles_none;
    t->stream_copy = stream_copy_plain;
    t->store_fence = fence_none;
    t->copy = copy_plain;
    t->block_pairs = block_pairs_none;
    t->tile_wide = tile_wide_none;
    t->tile_jpairs = tile_wide_none;
    t->nt_shifted = nt_shifted_none;
    t->narrow = narrow_none;
    t->deint_k_u8 = deint_k_none;
    t->int_k_u8 = int_k_none;
    t->deint_k_16 = deint_k_none;
    t->int_k_16 = int_k_none;
    t->pairs_in_order = pairs_in_order_none;
    t->fill_rows = fill_rows_none;
    t->deint_k_32 = deint_k_none;
    t->deint_k_64 = deint_k_none;
    t->packed = packed_none;
    t->deint_small = deint_small_none;
    t->block_short = block_short_none;
}

int dmls_band_asks_l2 = 0;

dmls_isa_t dmls_isa = {DMLS_ISA_GENERIC, transpose_none, nt_transpose_none, nt_contig_none, contig_ragged_none,
                       rows_short_none,
                       deint3_none, deint3_none, int3_none, int3_none, unpack_none, nibbles_none,
                       stream_copy_plain, fence_none, copy_plain, block_pairs_none,
                       tile_wide_none, tile_wide_none, nt_shifted_none, narrow_none, deint_k_none,
                       int_k_none, deint_k_none, int_k_none, pairs_in_order_none, fill_rows_none, deint_k_none,
                       deint_k_none, packed_none, deint_small_none, block_short_none};

#if DMLSTRIDE_HAVE_SSSE3
static int cpu_has_ssse3(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("ssse3") ? 1 : 0;
}
#endif
#if DMLSTRIDE_HAVE_AVX2
/* The compiler's check includes the operating system's support for the
   256-bit registers (XCR0), not only the CPUID bit. */
static int cpu_has_avx2(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") ? 1 : 0;
}
#endif

int dmls_isa_select(int max_level) {
    dmls_isa_t t;
    dmls_isa_generic(&t);
#if DMLSTRIDE_HAVE_SIMD
    if (max_level >= DMLS_ISA_SSE2) dmls_isa_sse2(&t);
#endif
#if DMLSTRIDE_HAVE_SSSE3
    if (max_level >= DMLS_ISA_SSSE3 && cpu_has_ssse3()) dmls_isa_ssse3(&t);
#endif
#if DMLSTRIDE_HAVE_AVX2
    if (max_level >= DMLS_ISA_AVX2 && cpu_has_avx2()) dmls_isa_avx2(&t);
#endif
    (void)max_level;
    dmls_isa = t;
    return t.level;
}
