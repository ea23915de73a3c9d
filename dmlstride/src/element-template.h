/* Element kernels for one element width, included once per width by
   elements.h with T (the element type) and W (its size in bytes) defined.
   Every access goes through memcpy: elements need not be aligned. */

#define DMLS_CAT_(a, b) a##b
#define DMLS_CAT(a, b) DMLS_CAT_(a, b)
#define DMLS_FN(name) DMLS_CAT(name, W)

/* n elements, source stride ss and destination stride ds (bytes). */
static inline void DMLS_FN(dmls_strided_)(const char *s, char *d, int64_t n, int64_t ss, int64_t ds) {
    T v;
    int64_t j;
    for (j = 0; j < n; j++) {
        memcpy(&v, s + j * ss, W);
        memcpy(d + j * ds, &v, W);
    }
}

/* n copies of the element at s, destination stride ds. */
static inline void DMLS_FN(dmls_fill_)(const char *s, char *d, int64_t n, int64_t ds) {
    T v;
    int64_t j;
    memcpy(&v, s, W);
    if (ds == W) {   /* a constant stride lets the compiler vectorize */
        for (j = 0; j < n; j++) memcpy(d + j * W, &v, W);
    } else {
        for (j = 0; j < n; j++) memcpy(d + j * ds, &v, W);
    }
}

/* Transpose a kn x [j0, j1) block through a staging tile: the source's fast
   dimension is k, the destination's is j.  Each tile is read in source
   order (a short contiguous run of k per j) into the L1-resident stage, then
   written out in destination order, one contiguous burst per k.  stage:
   DMLS_TILE_STAGE_BYTES. */
static inline void DMLS_FN(dmls_tile_)(const char *s, char *d, int64_t kn, int64_t kss, int64_t kds,
                                       int64_t j0, int64_t j1, int64_t iss, int64_t ids, char *stage) {
    /* TK rows of P = TJ * W + DMLS_TILE_PAD bytes, TK * TJ * W <= DMLS_TILE_BYTES,
       TK <= DMLS_TILE_ROW_BYTES. */
    int64_t TK = DMLS_TILE_ROW_BYTES / W, TJ, P, kb, ke, jb, je, a, b, nk, nj;
    const char *sp;
    char *tp;
    T v;
    if (TK > kn) TK = kn;
    TJ = DMLS_TILE_BYTES / (TK * W) / 16 * 16;
    if (TJ > 1024) TJ = 1024;
    P = TJ * W + DMLS_TILE_PAD;
    for (kb = 0; kb < kn; kb = ke) {
        ke = kb + TK < kn ? kb + TK : kn;
        nk = ke - kb;
        for (jb = j0; jb < j1; jb = je) {
            je = jb + TJ < j1 ? jb + TJ : j1;
            nj = je - jb;
            for (b = 0; b < nj; b++) {          /* gather the tile into stage[a][b] */
                sp = s + kb * kss + (jb + b) * iss;
                tp = stage + b * W;
                for (a = 0; a < nk; a++) {
                    memcpy(&v, sp + a * kss, W);
                    memcpy(tp + a * P, &v, W);
                }
            }
            if (ids == W) {                     /* one burst per destination row */
                for (a = 0; a < nk; a++)
                    memcpy(d + (kb + a) * kds + jb * ids, stage + a * P, (size_t)(nj * ids));
            } else {
                for (a = 0; a < nk; a++) {
                    tp = stage + a * P;
                    for (b = 0; b < nj; b++) {
                        memcpy(&v, tp + b * W, W);
                        memcpy(d + (kb + a) * kds + (jb + b) * ids, &v, W);
                    }
                }
            }
        }
    }
}

/* kn (2-4) interleaved channels (k stride one element, j stride kn
   elements) into kn contiguous planes kds bytes apart; n pixels.  Constant
   strides per branch let the compiler vectorize. */
static inline void DMLS_FN(dmls_deinterleave_)(const char *s, char *d, int64_t kn, int64_t kds, int64_t n) {
    char *d0 = d, *d1 = d + kds, *d2 = d + 2 * kds, *d3 = d + 3 * kds;
    T v0, v1, v2, v3;
    int64_t b, done = 0;
    /* One vector kernel at most: four two-byte channels also went on to
       deint_small, which has no variant for them, and its 0 sent every
       pixel deint_k_16 had done through the loop below again.  Two builds
       side by side (benchmarks/compare_builds.py, 2 threads, two passes of
       7 repeats): NHWC to NCHW gathers of 4 int16, uint16 and float16
       channels (3.7-48 MB) ran 1.53-2.99x faster, 1.04-1.83x faster than
       the loop alone, and a float16 permutation whose slabs de-interleave
       4 channels (the slowest against PyTorch of its kind, 0.80x) 1.25x. */
    if (kn == 3 && W == 1)
        done = dmls_isa.deint3_u8(s, d0, d1, d2, n);
    else if (kn >= 3 && W == 2 && n > 16 / (kn * W))
        /* 16-byte reads: pixels whose read stays within the n pixels */
        done = dmls_isa.deint_k_16(s, kn * W, d0, kds, (int)kn, n - 16 / (kn * W));
    else if (kn == 3 && W == 4)
        done = dmls_isa.deint3_32(s, d0, d1, d2, n);
    else if (kn == 2 || kn == 4)
        done = dmls_isa.deint_small(W, (int)kn, s, d0, kds, n);
    s += kn * done * W;
    d0 += done * W;
    d1 += done * W;
    d2 += done * W;
    d3 += done * W;
    n -= done;
    if (kn == 2) {
        for (b = 0; b < n; b++) {
            memcpy(&v0, s + (2 * b) * W, W);
            memcpy(&v1, s + (2 * b + 1) * W, W);
            memcpy(d0 + b * W, &v0, W);
            memcpy(d1 + b * W, &v1, W);
        }
    } else if (kn == 3) {
        for (b = 0; b < n; b++) {
            memcpy(&v0, s + (3 * b) * W, W);
            memcpy(&v1, s + (3 * b + 1) * W, W);
            memcpy(&v2, s + (3 * b + 2) * W, W);
            memcpy(d0 + b * W, &v0, W);
            memcpy(d1 + b * W, &v1, W);
            memcpy(d2 + b * W, &v2, W);
        }
    } else {
        for (b = 0; b < n; b++) {
            memcpy(&v0, s + (4 * b) * W, W);
            memcpy(&v1, s + (4 * b + 1) * W, W);
            memcpy(&v2, s + (4 * b + 2) * W, W);
            memcpy(&v3, s + (4 * b + 3) * W, W);
            memcpy(d0 + b * W, &v0, W);
            memcpy(d1 + b * W, &v1, W);
            memcpy(d2 + b * W, &v2, W);
            memcpy(d3 + b * W, &v3, W);
        }
    }
}

/* K (2-8, a constant where it is inlined) planes kss bytes apart
   interleaved into d, pixel by pixel: K loads, then K adjacent stores. */
static inline void DMLS_FN(dmls_interleave_k_)(const char *s0, int64_t kss, char *d, int64_t n, const int K) {
    int64_t b;
    int a;
    T v[8];
    for (b = 0; b < n; b++) {
        for (a = 0; a < K; a++) memcpy(&v[a], s0 + a * kss + b * W, W);
        for (a = 0; a < K; a++) memcpy(d + (K * b + a) * W, &v[a], W);
    }
}

/* The inverse: kn (2-7; 2-8 of one byte) contiguous planes kss bytes apart interleaved into
   d[j * kn + a] = plane_a[j]; n pixels. */
static inline void DMLS_FN(dmls_interleave_)(const char *s, char *d, int64_t kn, int64_t kss, int64_t n) {
    int64_t done = 0;
    if (kn == 3 && W == 4) done = dmls_isa.int3_32(s, s + kss, s + 2 * kss, d, n);
    if (kn == 3 && W == 1) done = dmls_isa.int3_u8(s, s + kss, s + 2 * kss, d, n);
    if (kn >= 5 && W == 1) done = dmls_isa.int_k_u8(s, kss, d, (int)kn, n);
    /* (4 two-byte channels: the loop below ran 1.4x faster in cache) */
    if (kn >= 3 && kn != 4 && W == 2) done = dmls_isa.int_k_16(s, kss, d, (int)kn, n);
    s += done * W;
    d += kn * done * W;
    n -= done;
    switch (kn) {
    case 2: DMLS_FN(dmls_interleave_k_)(s, kss, d, n, 2); break;
    case 3: DMLS_FN(dmls_interleave_k_)(s, kss, d, n, 3); break;
    case 4: DMLS_FN(dmls_interleave_k_)(s, kss, d, n, 4); break;
    case 5: DMLS_FN(dmls_interleave_k_)(s, kss, d, n, 5); break;
    case 6: DMLS_FN(dmls_interleave_k_)(s, kss, d, n, 6); break;
    case 7: DMLS_FN(dmls_interleave_k_)(s, kss, d, n, 7); break;
    default: DMLS_FN(dmls_interleave_k_)(s, kss, d, n, 8); break;
    }
}

/* A transposition with few (<= DMLS_SMALL_TILE) source-fast channels k:
   each channel is copied as a strided run, in blocks of j so that the
   source block stays in cache across channels; 2-4 interleaved channels
   into planes take the de-interleave kernel. */
static inline void DMLS_FN(dmls_small_k_)(const char *s, char *d, int64_t kn, int64_t kss, int64_t kds,
                                          int64_t j0, int64_t j1, int64_t iss, int64_t ids) {
    const int64_t block = 4096;
    int64_t jb, je, a;
    for (jb = j0; jb < j1; jb = je) {
        je = jb + block < j1 ? jb + block : j1;
        if (kss == W && iss == kn * W && ids == W && kn <= 4) {
            DMLS_FN(dmls_deinterleave_)(s + jb * iss, d + jb * ids, kn, kds, je - jb);
        } else {
            for (a = 0; a < kn; a++)
                DMLS_FN(dmls_strided_)(s + a * kss + jb * iss, d + a * kds + jb * ids, je - jb, iss, ids);
        }
    }
}

#undef DMLS_FN
#undef DMLS_CAT
#undef DMLS_CAT_
