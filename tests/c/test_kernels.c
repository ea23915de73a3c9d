/* C-level tests of the engine's kernels (dmlstride/src), each compared with a
   plain reference loop on buffers full of random bytes: every element width,
   tile remainders, source and destination at odd offsets, every instruction
   set level the CPU has, the nibble paths, the blocked transpose, plain
   plans (tiny and packed tiles among them) through the executor, the scratch arena and the thread pool with 1,
   2 and more threads.

   Built and run by tests/test_c_kernels.py (and by tests/asan.sh with
   sanitizers):  cc -O1 -pthread -I dmlstride/src tests/c/test_kernels.c
   dmlstride/src/<every .c but alloc.c>.  Prints one line per failure and a
   summary; exit status 0 when every check passed. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "block.h"
#include "elements.h"
#include "execute.h"
#include "isa.h"
#include "nibble.h"
#include "plan.h"
#include "pool.h"
#include "scratch.h"
#include "tile.h"
#include "tile-runs.h"

static int checks = 0, failures = 0;
static int level_in_use = 0;

#define CHECK(cond, ...) do {                                                 \
        checks++;                                                             \
        if (!(cond)) {                                                        \
            failures++;                                                       \
            if (failures <= 30) {                                             \
                printf("FAIL %s:%d (isa level %d): ", __FILE__, __LINE__,    \
                       level_in_use);                                         \
                printf(__VA_ARGS__);                                          \
                printf("\n");                                                 \
            }                                                                 \
        }                                                                     \
    } while (0)

static uint64_t rng_state = 88172645463325252ULL;
static unsigned rnd(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (unsigned)(rng_state >> 11);
}
static void fill_random(unsigned char *p, size_t n) {
    size_t i;
    for (i = 0; i < n; i++) p[i] = (unsigned char)rnd();
}

/* The reference: element (i0, ..., i{nd-1}) of W bytes from s + sum i*ss to
   d + sum i*ds, in C order. */
static void ref_copy(int nd, const int64_t *n, const int64_t *ss, const int64_t *ds, int W,
                     const char *s, char *d) {
    int64_t idx[8] = {0}, so = 0, dof = 0;
    int i;
    for (;;) {
        memcpy(d + dof, s + so, (size_t)W);
        for (i = nd - 1; i >= 0; i--) {
            idx[i]++;
            so += ss[i];
            dof += ds[i];
            if (idx[i] < n[i]) break;
            so -= n[i] * ss[i];
            dof -= n[i] * ds[i];
            idx[i] = 0;
        }
        if (i < 0) return;
    }
}

/* Source and destination buffers with room around the tensor; the
   destination is compared whole (bytes outside the tensor must survive). */
typedef struct {
    unsigned char *src, *dst, *want;
    size_t sbytes, dbytes;
} bufs;

static void bufs_new(bufs *b, size_t sbytes, size_t dbytes) {
    b->sbytes = sbytes;
    b->dbytes = dbytes;
    b->src = malloc(sbytes);
    b->dst = malloc(dbytes);
    b->want = malloc(dbytes);
    fill_random(b->src, sbytes);
    fill_random(b->dst, dbytes);
    memcpy(b->want, b->dst, dbytes);
}
static void bufs_free(bufs *b) {
    free(b->src);
    free(b->dst);
    free(b->want);
}

static const int widths[4] = {1, 2, 4, 8};

/* ---- the transposing tile path (SIMD variants + scalar staging tile) ---- */
static void test_transpose(void) {
    static const int64_t shapes[][2] = {{297, 17}, {129, 33}, {64, 64}, {17, 300}, {16, 16},
                                        {31, 1030}, {8, 9}, {100, 64}, {48, 128}, {130, 70},
                                        {256, 44}, {5, 300}, {7, 130}, {3001, 300},
                                        /* bands of N to 2N - 1 rows of k (1- and 2-byte
                                           values: pairs side by side in j), whole or
                                           the last band of a tile */
                                        {24, 100}, {12, 47}, {20, 33}, {280, 70}, {140, 90}};
    int wi, si, off, stream;
    char *scratch = dmls_scratch();
    for (wi = 0; wi < 4; wi++)
        for (si = 0; si < (int)(sizeof shapes / sizeof shapes[0]); si++)
            for (off = 0; off < 5; off++)
                for (stream = 0; stream < 2; stream++) {
                    const int W = widths[wi];
                    const int64_t kn = shapes[si][0], jn = shapes[si][1];
                    /* source k fast (contiguous), destination j fast; odd offsets;
                       off 3: destination rows a multiple of 4 KiB apart; off 4:
                       rows off line boundaries, through L2 when streaming (the
                       3001 x 300 shape in chunks of k) */
                    const int64_t soff = off == 1 ? 3 : 0, doff = off == 2 || off == 4 ? 5 : (off == 1 ? 64 : 0);
                    const int64_t kds = off == 4 ? jn * W + 3 * W
                                        : off == 3 ? (jn * W + 4095) / 4096 * 4096
                                        : stream && off == 0 ? jn * W : (jn * W + 63) / 64 * 64 + 64 * off;
                    int64_t n[2] = {kn, jn}, ss[2] = {W, kn * W}, ds[2] = {kds, W};
                    dmls_plan p;
                    bufs b;
                    bufs_new(&b, (size_t)(soff + kn * jn * W), (size_t)(doff + kn * kds + 64));
                    memset(&p, 0, sizeof p);
                    p.mode = DMLS_MODE_TILE;
                    p.width = W;
                    p.stream = stream;
                    p.tile_size = kn;
                    p.tile_src_stride = W;
                    p.tile_dst_stride = kds;
                    p.inner_size = jn;
                    p.inner_src_stride = kn * W;
                    p.inner_dst_stride = W;
                    p.l2 = off == 4 ? DMLS_L2_BOTH : DMLS_L2_NONE;
                    if (kn == 3001 && off != 4) {   /* the large shape only through L2 */
                        bufs_free(&b);
                        continue;
                    }
                    {
                        /* a next task's rows to ask for (the same ones: prefetches read nothing) */
                        dmls_rows next = {(char *)b.src + soff, NULL, p.inner_src_stride, jn, 0};
                        dmls_transpose(&p, (char *)b.src + soff, (char *)b.dst + doff, 0, jn,
                                       off == 4 ? &next : NULL, scratch);
                    }
                    dmls_isa.store_fence();
                    ref_copy(2, n, ss, ds, W, (char *)b.src + soff, (char *)b.want + doff);
                    CHECK(memcmp(b.dst, b.want, b.dbytes) == 0,
                          "transpose W=%d k=%lld j=%lld off=%d stream=%d", W, (long long)kn,
                          (long long)jn, off, stream);
                    bufs_free(&b);
                }
}

/* ---- the run tile (runs of 3, 5-7 and 9-64 bytes): every width, tile
   remainders on both sides, padded source rows, destination rows with gaps
   (which must survive), and the source buffer ending at the last run's last
   byte (a sanitizer sees any read past it); directly and through the
   executor in segments ---- */
static void test_run_tile(void) {
    static const int64_t shapes[][2] = {{1, 1}, {85, 64}, {86, 65}, {7, 200}, {300, 3}, {200, 130},
                                        {2, 1000}, {129, 1}, {1, 129}};
    int W, si, pad, via;
    char *scratch = dmls_scratch();
    for (W = 3; W <= DMLS_RUN_TILE_WIDE_MAX; W++) {
        if (!dmls_run_tile_width(W)) continue;
        for (si = 0; si < (int)(sizeof shapes / sizeof shapes[0]); si++)
            for (pad = 0; pad < 2; pad++)
                for (via = 0; via < 2; via++) {
                    const int64_t kn = shapes[si][0], jn = shapes[si][1];
                    const int64_t iss = kn * W + 5 * pad, kds = jn * W + 7 * pad;
                    int64_t n[2] = {kn, jn}, ss[2] = {W, iss}, ds[2] = {kds, W};
                    bufs b;
                    bufs_new(&b, (size_t)((jn - 1) * iss + kn * W), (size_t)(3 + kn * kds + 64));
                    if (via == 0) {
                        dmls_run_tile(W, (char *)b.src, iss, (char *)b.dst + 3, kds, kn, jn, scratch);
                    } else {
                        dmls_copy c;
                        memset(&c, 0, sizeof c);
                        c.kind = DMLS_COPY_PLAIN;
                        c.main.mode = DMLS_MODE_TILE;
                        c.main.width = W;
                        c.main.outer_count = 1;
                        c.main.tile_size = kn;
                        c.main.tile_src_stride = W;
                        c.main.tile_dst_stride = kds;
                        c.main.inner_size = jn;
                        c.main.inner_src_stride = iss;
                        c.main.inner_dst_stride = W;
                        c.main.segment_len = 64;
                        c.main.segments = (jn + 63) / 64;
                        c.main.tasks = c.main.segments;
                        c.main.dst_bytes = (int64_t)1 << 20;
                        dmls_run(&c, (char *)b.src, (char *)b.dst + 3, 2, scratch);
                    }
                    ref_copy(2, n, ss, ds, W, (char *)b.src, (char *)b.want + 3);
                    CHECK(memcmp(b.dst, b.want, b.dbytes) == 0, "run tile W=%d k=%lld j=%lld pad=%d via=%d", W,
                          (long long)kn, (long long)jn, pad, via);
                    bufs_free(&b);
                }
    }
    CHECK(!dmls_run_tile_width(1) && !dmls_run_tile_width(2) && !dmls_run_tile_width(4) &&
          !dmls_run_tile_width(8) && dmls_run_tile_width(16) && dmls_run_tile_width(DMLS_RUN_TILE_MAX + 1) &&
          !dmls_run_tile_width(DMLS_RUN_TILE_WIDE_MAX + 1) && dmls_run_block_width(DMLS_RUN_TILE_MAX) &&
          !dmls_run_block_width(DMLS_RUN_TILE_MAX + 1), "run tile widths");
}

/* TILE_BATCH kn x jn tiles of W-byte values through the task runner, tasks
   run in two ranges: tile t's source rows of kn values back to back from
   t * bs, its destination rows of jn values back to back from t * bd, in
   buffers of sbytes and dbytes; the whole destination compared with the
   reference. */
#define TILE_BATCH 37
static void check_tile_batch(int W, int64_t kn, int64_t jn, int64_t bs, int64_t bd, size_t sbytes, size_t dbytes,
                             int stream, const char *what) {
    const int64_t B = TILE_BATCH;
    int64_t n[3] = {B, kn, jn}, ss[3] = {bs, W, kn * W}, ds[3] = {bd, jn * W, W};
    char *scratch = dmls_scratch();
    dmls_plan p;
    bufs b;
    bufs_new(&b, sbytes, dbytes);
    memset(&p, 0, sizeof p);
    p.mode = DMLS_MODE_TILE;
    p.width = W;
    p.stream = stream;
    p.outer_ndim = 1;
    p.outer_size[0] = B;
    p.outer_src_stride[0] = bs;
    p.outer_dst_stride[0] = bd;
    p.tile_size = kn;
    p.tile_src_stride = W;
    p.tile_dst_stride = jn * W;
    p.inner_size = jn;
    p.inner_src_stride = kn * W;
    p.inner_dst_stride = W;
    p.segments = 1;
    p.segment_len = jn;
    p.tasks = B;
    dmls_run_tasks(&p, (char *)b.src, (char *)b.dst, 0, 10, scratch);
    dmls_run_tasks(&p, (char *)b.src, (char *)b.dst, 10, B, scratch);
    if (stream) dmls_isa.store_fence();
    ref_copy(3, n, ss, ds, W, (char *)b.src, (char *)b.want);
    CHECK(memcmp(b.dst, b.want, b.dbytes) == 0, "%s W=%d k=%lld j=%lld stream %d", what, W, (long long)kn,
          (long long)jn, stream);
    bufs_free(&b);
}

/* ---- batches of tiny tiles through the task runner (a permutation that swaps
   two short dimensions): element by element unless mostly micro-blocks;
   four values a row (two-byte ones: the word kernel, its last eight rows
   ending at the tile's); tiles apart on both sides ---- */
static void test_tiny_tiles(void) {
    static const int64_t shapes[][2] = {{5, 13}, {7, 15}, {33, 9}, {16, 8}, {3, 5}, {9, 5}, {64, 2},
                                        {4, 8}, {4, 11}, {4, 70}};
    int wi, si;
    for (wi = 0; wi < 4; wi++)
        for (si = 0; si < (int)(sizeof shapes / sizeof shapes[0]); si++) {
            const int W = widths[wi];
            const int64_t kn = shapes[si][0], jn = shapes[si][1];
            const int64_t bs = kn * jn * W + 3 * W, bd = kn * jn * W + 5 * W;
            check_tile_batch(W, kn, jn, bs, bd, (size_t)(TILE_BATCH * bs), (size_t)(TILE_BATCH * bd), 0,
                             "tiny tiles");
        }
}

/* ---- runs of packed tiles through the task runner (tiles contiguous on
   both sides, the destination's back to back): every kind of block by
   shape, moved-back and padded edges, streamed and not; buffers of exactly
   the tensor's bytes (a sanitizer build sees any read or write past
   them) ---- */
static void test_packed_tiles(void) {
    static const int64_t shapes[][2] = {{5, 40}, {7, 9}, {2, 11}, {9, 11}, {13, 21}, {17, 20}, {17, 45},
                                        {37, 19}, {19, 11}, {66, 24}, {24, 66}, {16, 8}, {8, 16}, {32, 16},
                                        {5, 13}, {40, 3}, {100, 70}, {6, 300}, {130, 130}};
    int wi, si, stream;
    for (stream = 0; stream <= 1; stream++)
        for (wi = 0; wi < 4; wi++)
            for (si = 0; si < (int)(sizeof shapes / sizeof shapes[0]); si++) {
                const int W = widths[wi];
                const int64_t kn = shapes[si][0], jn = shapes[si][1], tb = kn * jn * W, bs = tb + 3 * W;
                check_tile_batch(W, kn, jn, bs, tb, (size_t)((TILE_BATCH - 1) * bs + tb),
                                 (size_t)(TILE_BATCH * tb), stream, "packed tiles");
            }
}

/* ---- element kernels: strided, fill, (de)interleave ---- */
/* The vector de-interleaves, each run and then the pixels it took (its
   return) overwritten with MARK: the scalar loop after them must take only
   the pixels past those (taken), never do the vector kernel's again. */
#define MARK 0x5a
static dmls_isa_t real_isa;
static int64_t taken;
static int64_t marked(int64_t r, int K, int W, char *d0, int64_t dk) {
    int k;
    if (r <= 0) return r;
    for (k = 0; k < K; k++) memset(d0 + k * dk, MARK, (size_t)(r * W));
    taken = r;
    return r;
}
static int64_t mark3_u8(const char *s, char *d0, char *d1, char *d2, int64_t n) {
    return marked(real_isa.deint3_u8(s, d0, d1, d2, n), 3, 1, d0, d1 - d0);
}
static int64_t mark3_32(const char *s, char *d0, char *d1, char *d2, int64_t n) {
    return marked(real_isa.deint3_32(s, d0, d1, d2, n), 3, 4, d0, d1 - d0);
}
static int64_t mark_k_16(const char *s, int64_t sj, char *d, int64_t dk, int K, int64_t n) {
    return marked(real_isa.deint_k_16(s, sj, d, dk, K, n), K, 2, d, dk);
}
static int64_t mark_small(int W, int K, const char *s, char *d, int64_t dk, int64_t n) {
    return marked(real_isa.deint_small(W, K, s, d, dk, n), K, W, d, dk);
}

/* Every width and 2-4 channels: the planes hold MARK where a vector kernel
   took the pixels, the source's values past them. */
static void test_deinterleave_keeps_the_vector_pixels(void) {
    int wi, kn, k;
    real_isa = dmls_isa;
    dmls_isa.deint3_u8 = mark3_u8;
    dmls_isa.deint3_32 = mark3_32;
    dmls_isa.deint_k_16 = mark_k_16;
    dmls_isa.deint_small = mark_small;
    for (wi = 0; wi < 4; wi++)
        for (kn = 2; kn <= 4; kn++) {
            const int W = widths[wi];
            const int64_t n = 203, dk = n * W + 16;
            int64_t nn[2] = {kn, n}, ss[2] = {W, kn * W}, ds[2] = {dk, W}, j;
            int ok = 1;
            bufs b;
            bufs_new(&b, (size_t)(kn * n * W), (size_t)(kn * dk));
            taken = 0;
            DMLS_BY_WIDTH(W, dmls_deinterleave_, ((char *)b.src, (char *)b.dst, kn, dk, n));
            ref_copy(2, nn, ss, ds, W, (char *)b.src, (char *)b.want);
            for (k = 0; k < kn; k++)
                for (j = 0; j < n * W; j++)
                    if (j < taken * W ? b.dst[k * dk + j] != MARK : b.dst[k * dk + j] != b.want[k * dk + j])
                        ok = 0;
            CHECK(ok, "de-interleave W=%d kn=%d: the %lld pixels a vector kernel took done again", W, kn,
                  (long long)taken);
            bufs_free(&b);
        }
    dmls_isa = real_isa;
}
#undef MARK

static void test_elements(void) {
    int wi, kn, off;
    for (wi = 0; wi < 4; wi++)
        for (off = 0; off < 2; off++) {
            const int W = widths[wi];
            const int64_t n = 1000 + 7 * off, o = off ? 3 : 0;
            bufs b;
            /* strided: every third source element to every second destination one */
            {
                int64_t nn[1] = {n}, ss[1] = {3 * W}, ds[1] = {2 * W};
                bufs_new(&b, (size_t)(o + 3 * n * W), (size_t)(o + 2 * n * W));
                DMLS_BY_WIDTH(W, dmls_strided_, ((char *)b.src + o, (char *)b.dst + o, n, 3 * W, 2 * W));
                ref_copy(1, nn, ss, ds, W, (char *)b.src + o, (char *)b.want + o);
                CHECK(memcmp(b.dst, b.want, b.dbytes) == 0, "strided W=%d off=%d", W, off);
                bufs_free(&b);
            }
            /* fill, contiguous and strided destination */
            {
                int64_t nn[1] = {n}, ss[1] = {0}, ds[1] = {W};
                int step;
                for (step = 1; step <= 2; step++) {
                    ds[0] = step * W;
                    bufs_new(&b, (size_t)(o + W), (size_t)(o + step * n * W));
                    DMLS_BY_WIDTH(W, dmls_fill_, ((char *)b.src + o, (char *)b.dst + o, n, step * W));
                    ref_copy(1, nn, ss, ds, W, (char *)b.src + o, (char *)b.want + o);
                    CHECK(memcmp(b.dst, b.want, b.dbytes) == 0, "fill W=%d step=%d", W, step);
                    bufs_free(&b);
                }
            }
            for (kn = 2; kn <= 4; kn++) {
                /* de-interleave: n pixels of kn channels into kn planes */
                int64_t nn[2] = {kn, n}, ss[2] = {W, kn * W}, ds[2] = {n * W + 16, W};
                bufs_new(&b, (size_t)(o + kn * n * W), (size_t)(o + kn * (n * W + 16)));
                DMLS_BY_WIDTH(W, dmls_deinterleave_, ((char *)b.src + o, (char *)b.dst + o, kn, n * W + 16, n));
                ref_copy(2, nn, ss, ds, W, (char *)b.src + o, (char *)b.want + o);
                CHECK(memcmp(b.dst, b.want, b.dbytes) == 0, "deinterleave W=%d kn=%d off=%d", W, kn, off);
                bufs_free(&b);
                /* interleave: the reverse */
                {
                    int64_t nn2[2] = {kn, n}, ss2[2] = {n * W + 16, W}, ds2[2] = {W, kn * W};
                    bufs_new(&b, (size_t)(o + kn * (n * W + 16)), (size_t)(o + kn * n * W));
                    DMLS_BY_WIDTH(W, dmls_interleave_, ((char *)b.src + o, (char *)b.dst + o, kn, n * W + 16, n));
                    ref_copy(2, nn2, ss2, ds2, W, (char *)b.src + o, (char *)b.want + o);
                    CHECK(memcmp(b.dst, b.want, b.dbytes) == 0, "interleave W=%d kn=%d off=%d", W, kn, off);
                    bufs_free(&b);
                }
            }
        }
}

/* ---- streamed fills: every offset in a line, every head and tail ---- */
/* The ordinary-store copy of a run (memcpy below DMLS_OWN_COPY_MIN bytes,
   its own line-aligned loop from there): lengths on either side of that
   bound and of whole lines, at every destination offset in a line and
   several source offsets, exactly [d, d + n) written. */
static void test_copy(void) {
    static const int64_t lengths[] = {0, 1, 63, 64, 65, 511, 639, 640, 641, 703, 704, 1001, 1200,
                                      2047, 2048, 2049, 4095, 4160, 6001};
    static const int soffs[] = {0, 1, 16, 33, 63};
    unsigned char *sbuf = malloc(8192), *dbuf = aligned_alloc(64, 8320), *want = malloc(8320);
    size_t li;
    int si, off;
    fill_random(sbuf, 8192);
    for (li = 0; li < sizeof lengths / sizeof *lengths; li++)
        for (si = 0; si < 5; si++) {
            const int64_t n = lengths[li];
            int ok = 1;
            for (off = 0; off < 64; off++) {
                fill_random(dbuf, 8320);
                memcpy(want, dbuf, 8320);
                memcpy(want + 64 + off, sbuf + soffs[si], (size_t)n);
                dmls_isa.copy((char *)dbuf + 64 + off, (const char *)sbuf + soffs[si], n);
                ok = ok && memcmp(dbuf, want, 8320) == 0;
            }
            CHECK(ok, "copy n=%lld source offset %d, every destination offset", (long long)n, soffs[si]);
        }
    free(sbuf);
    free(dbuf);
    free(want);
}

/* Runs whose destination lies 1 to 511 bytes past the source modulo 4 KiB
   are copied backwards (lines.h): both copies, ordinary and streaming, at
   distances on either side of those bounds and of 0, lengths on either
   side of the backward copy's least and of whole lines, exactly [d, d + n)
   written with the source's bytes. */
static void test_copy_near_source(void) {
    static const int64_t lengths[] = {640, 1023, 1024, 1025, 1087, 1088, 2048, 4160, 6001, 9000};
    static const int64_t dists[] = {0, 1, 15, 16, 24, 63, 64, 100, 510, 511, 512, 513, 2048, 4095};
    enum { SIZE = 40960, SRC = 128, DST = 20480 };
    unsigned char *buf = aligned_alloc(4096, SIZE), *want = malloc(SIZE);
    size_t li, di;
    int stream;
    for (stream = 0; stream < 2; stream++)
        for (li = 0; li < sizeof lengths / sizeof *lengths; li++)
            for (di = 0; di < sizeof dists / sizeof *dists; di++) {
                const int64_t n = lengths[li];
                int ok = 1, so;
                for (so = 0; so < 64; so += 7) {
                    char *sp = (char *)buf + SRC + so, *dp = (char *)buf + DST + so + dists[di];
                    fill_random(buf, SIZE);
                    memcpy(want, buf, SIZE);
                    memcpy(want + (dp - (char *)buf), sp, (size_t)n);
                    if (stream) {
                        dmls_isa.stream_copy(dp, sp, n);
                        dmls_isa.store_fence();
                    } else {
                        dmls_isa.copy(dp, sp, n);
                    }
                    ok = ok && memcmp(buf, want, SIZE) == 0;
                }
                CHECK(ok, "%s n=%lld destination %lld bytes past the source modulo 4 KiB",
                      stream ? "stream_copy" : "copy", (long long)n, (long long)dists[di]);
            }
    free(buf);
    free(want);
}

/* ---- nibbles ---- */
static unsigned nib(const unsigned char *p, int64_t i) { return (p[i >> 1] >> ((i & 1) * 4)) & 15; }
static void set_nib(unsigned char *p, int64_t i, unsigned v) {
    p[i >> 1] = (unsigned char)((p[i >> 1] & ~(15u << ((i & 1) * 4))) | ((v & 15) << ((i & 1) * 4)));
}

static void test_nibbles(void) {
    static const int64_t lengths[] = {1, 2, 3, 31, 32, 33, 64, 65, 1000, 1001};
    int li, nib0, sign;
    for (li = 0; li < (int)(sizeof lengths / sizeof lengths[0]); li++)
        for (nib0 = 0; nib0 < 4; nib0++) {
            const int64_t n = lengths[li];
            unsigned char packed[1200], out[2100], again[1200], want[1200];
            int64_t i;
            int ok = 1;
            fill_random(packed, sizeof packed);
            for (sign = 0; sign < 2; sign++) {
                dmls_unpack(packed, nib0, n, out, sign);
                for (i = 0; i < n; i++) {
                    unsigned v = nib(packed, nib0 + i);
                    unsigned expect = sign && (v & 8) ? (v | 0xF0) : v;
                    if (out[i] != expect) ok = 0;
                }
                CHECK(ok, "unpack n=%lld nib0=%d sign=%d", (long long)n, nib0, sign);
            }
            /* pack into a random buffer: nibbles outside the range survive */
            fill_random(again, sizeof again);
            memcpy(want, again, sizeof want);
            for (i = 0; i < n; i++) {
                out[i] = (unsigned char)rnd();   /* high bits must be ignored */
                set_nib(want, nib0 + i, out[i]);
            }
            dmls_pack(out, n, again, nib0);
            CHECK(memcmp(again, want, sizeof want) == 0, "pack n=%lld nib0=%d", (long long)n, nib0);
        }
    /* element-wise nibble rows: nibbles -> nibbles at strides 3 and 2 */
    {
        unsigned char s[400], d[400], want[400];
        dmls_plan p;
        int64_t i;
        memset(&p, 0, sizeof p);
        p.src_nibble = p.dst_nibble = 1;
        fill_random(s, sizeof s);
        fill_random(d, sizeof d);
        memcpy(want, d, sizeof d);
        for (i = 0; i < 200; i++) set_nib(want, 1 + 2 * i, nib(s, 3 + 3 * i));
        dmls_nibble_row(&p, s, d, 3, 1, 200, 3, 2);
        CHECK(memcmp(d, want, sizeof d) == 0, "nibble row");
    }
}

/* A block group of two dimensions, fastest first. */
static void set_group(dmls_group *g, int64_t n0, int64_t stride0, int64_t n1, int64_t stride1) {
    g->ndim = 2;
    g->size[0] = n0;
    g->stride[0] = stride0;
    g->size[1] = n1;
    g->stride[1] = stride1;
    g->elems = n0 * n1;
}

/* lines of k a chunk read in place takes of each source row (dmls_plan.l2_lines) in the block cases */
static int case_l2_lines = 1;

/* One blocked transpose of a 4-D tensor (j1, k1, j0, k0): in the source k0
   is fastest, then k1, j0, j1; in the destination j0, j1, k0, k1.  J = (j0,
   j1) is destination-contiguous, K = (k0, k1) source-contiguous; both
   buffers start o bytes in.  Returns whether it matched the reference. */
static int block_case_segs(int W, int64_t j0n, int64_t j1n, int64_t k0n, int64_t k1n, int64_t o, int lines,
                           int stage_src, int stage_dst, int l2, int stream, int64_t seg, int only) {
    /* source strides (bytes) */
    const int64_t s_k0 = W, s_k1 = k0n * W, s_j0 = k1n * k0n * W, s_j1 = j0n * k1n * k0n * W;
    /* destination strides */
    const int64_t d_j0 = W, d_j1 = j0n * W, d_k0 = j1n * j0n * W, d_k1 = k0n * j1n * j0n * W;
    const int64_t total = j0n * j1n * k0n * k1n;
    int64_t n[4] = {k1n, k0n, j1n, j0n}, ss[4] = {s_k1, s_k0, s_j1, s_j0}, ds[4] = {d_k1, d_k0, d_j1, d_j0};
    const int64_t jn = j0n * j1n;
    int64_t j, k, a = 0, e = jn;
    unsigned char *before;
    dmls_plan p;
    bufs b;
    int ok;
    bufs_new(&b, (size_t)(o + total * W), (size_t)(o + total * W));
    memset(&p, 0, sizeof p);
    p.mode = DMLS_MODE_BLOCK;
    p.width = W;
    set_group(&p.jgroup, j0n, s_j0, j1n, s_j1);
    set_group(&p.kgroup, k0n, d_k0, k1n, d_k1);
    p.block_lines = lines;
    p.block_stage_src = stage_src;
    p.block_stage_dst = stage_dst;
    p.l2 = l2;
    p.l2_lines = case_l2_lines;
    p.stream = stream;
    /* in place, the last tiles ask for the next block's first (here this
       block's own, which is where a next block with the same tables lies) */
    p.block_next = !l2 && !stream;
    dmls_block_tables(&p, dmls_scratch());
    /* in segments of seg values of j (the last one the rest), as tasks; or
       only segment number only (0 based) */
    for (j = 0; j < jn; j += seg)
        if (only < 0 || j == only * seg) {
            a = j;
            e = j + seg < jn ? j + seg : jn;
            dmls_block(&p, (char *)b.src + o, (char *)b.dst + o, a, e, (char *)b.src + o, (char *)b.dst + o,
                       dmls_scratch());
        }
    if (p.stream) dmls_isa.store_fence();
    before = malloc(b.dbytes);
    memcpy(before, b.want, b.dbytes);
    ref_copy(4, n, ss, ds, W, (char *)b.src + o, (char *)b.want + o);
    /* The destination is k rows of J values: with only, the columns of each
       row outside the segment, [0, a) and [e, jn), as they were. */
    if (only >= 0)
        for (k = 0; k < k0n * k1n; k++) {
            memcpy(b.want + o + k * jn * W, before + o + k * jn * W, (size_t)(a * W));
            memcpy(b.want + o + (k * jn + e) * W, before + o + (k * jn + e) * W, (size_t)((jn - e) * W));
        }
    free(before);
    ok = memcmp(b.dst, b.want, b.dbytes) == 0;
    bufs_free(&b);
    return ok;
}

/* The whole block as one task. */
static int block_case(int W, int64_t j0n, int64_t j1n, int64_t k0n, int64_t k1n, int64_t o, int lines,
                      int stage_src, int stage_dst, int l2, int stream) {
    return block_case_segs(W, j0n, j1n, k0n, k1n, o, lines, stage_src, stage_dst, l2, stream, j0n * j1n, -1);
}

/* ---- the blocked transpose: sizes that leave ragged micro-block edges (J and K
   not multiples of 16 / W, or shorter), with and without the L2 buffers ---- */
static void test_block(void) {
    static const int64_t shapes[][4] = {{13, 5, 16, 3}, {11, 7, 5, 19}, {3, 1, 7, 1}, {9, 7, 17, 3}, {2, 3, 31, 1}};
    int wi, off, si, lines, l2;
    for (si = 0; si < (int)(sizeof shapes / sizeof shapes[0]); si++)
    for (wi = 0; wi < 4; wi++)
        for (off = 0; off < 2; off++)
            for (l2 = DMLS_L2_NONE; l2 <= DMLS_L2_BOTH; l2++)
                for (lines = 1; lines <= 4; lines += 3) {
                    const int W = widths[wi];
                    const int64_t j0n = shapes[si][0], j1n = shapes[si][1], k0n = shapes[si][2], k1n = shapes[si][3];
                    /* BOTH writes its rows with streaming stores on one pass */
                    CHECK(block_case(W, j0n, j1n, k0n, k1n, off ? 7 : 0, lines, off, off && W <= 2, l2,
                                     l2 == DMLS_L2_BOTH && off),
                          "block %lldx%lldx%lldx%lld W=%d off=%d lines=%d l2=%d", (long long)j0n, (long long)j1n,
                          (long long)k0n, (long long)k1n, W, off, lines, l2);
                }
}

/* ---- a block cut into segments of j (tasks): segments of whole tiles, of
   whole lines, of a part of a micro-block, and a last one shorter; every
   mode, the streaming line kernels with segments that start off a line; all
   segments, and the first three alone, which must leave every other value
   of the destination as it was ---- */
static void test_block_segments(void) {
    static const int64_t segs[] = {64, 128, 48, 5};
    int wi, si, l2, lines, stream, only;
    for (wi = 0; wi < 4; wi++)
        for (si = 0; si < 4; si++)
            for (l2 = DMLS_L2_NONE; l2 <= DMLS_L2_BOTH; l2++)
                for (lines = 1; lines <= 4; lines += 3)
                    for (stream = 0; stream < 2; stream++) {
                        const int W = widths[wi];
                        /* J = 23 x 13 = 299, K = 16 x 5: the destination's k rows
                           are 299 * W bytes apart; streamed, they must start on a
                           line (K's strides multiples of 64: J = 64 x 5) */
                        const int64_t j0n = stream ? 64 : 23, j1n = stream ? 5 : 13;
                        if (stream && (lines != 1 || l2 == DMLS_L2_SOURCE)) continue;
                        for (only = -1; only < 3; only++)
                            CHECK(block_case_segs(W, j0n, j1n, 16, 5, 0, lines, si & 1, 0, l2, stream, segs[si],
                                                  only),
                                  "block segments W=%d seg=%lld only=%d l2=%d lines=%d stream=%d", W,
                                  (long long)segs[si], only, l2, lines, stream);
                    }
}

/* ---- a block larger than the L2 buffers goes through them in chunks of j and k:
   J = (30, 20) x K = (35, 20), chunks ending mid-block and short last ones ---- */
static void test_block_chunks(void) {
    int wi, l2, stream, lines;
    for (wi = 0; wi < 4; wi++)
        for (l2 = DMLS_L2_SOURCE; l2 <= DMLS_L2_BOTH; l2++)
            for (stream = 0; stream < 2; stream++)
                for (lines = 1; lines <= (l2 == DMLS_L2_BOTH ? 2 : 1); lines++) {
                    const int W = widths[wi];
                    int64_t jc, kc;
                    dmls_block_chunks(W, 600, 700, 0, 1, &jc, &kc);
                    /* chunks of j (every width) and of k (W > 1), the last ones short */
                    CHECK(jc > 0 && kc > 0 && jc < 600 && 600 % jc != 0 && (W == 1 || (kc < 700 && 700 % kc != 0)),
                          "block chunks W=%d: %lld x %lld", W, (long long)jc, (long long)kc);
                    /* through both buffers, one line of k a source row or two */
                    case_l2_lines = lines;
                    CHECK(block_case(W, 30, 20, 35, 20, 3 * W, 1, 0, 0, l2, stream && l2 == DMLS_L2_BOTH),
                          "block chunks W=%d l2=%d stream=%d lines=%d", W, l2, stream, lines);
                    case_l2_lines = 1;
                }
    for (wi = 0; wi < 4; wi++) {
        /* in place, from a run of j on: lines of k (16 values at least) */
        const int W = widths[wi];
        int64_t jc, kc;
        for (lines = 1; lines <= 2; lines++) {
            dmls_block_in_place_chunks(W, 2000, 700, lines, &jc, &kc);
            CHECK(jc == DMLS_BLOCK_L2_RUN / W && kc == (64 * lines / W > 16 ? 64 * lines / W : 16),
                  "in-place chunks W=%d lines=%d: %lld x %lld", W, lines, (long long)jc, (long long)kc);
        }
    }
    {
        /* source rows of 607 bytes: a block takes them whole, a tile (longer
           destination rows) destination runs of DMLS_BLOCK_L2_RUN bytes */
        int64_t jc, kc;
        dmls_block_chunks(1, 4915, 607, 0, 1, &jc, &kc);
        CHECK(jc == 448 && kc == 607, "block chunks of 607-byte rows: %lld x %lld", (long long)jc, (long long)kc);
        dmls_block_chunks(1, 4915, 607, 1, 1, &jc, &kc);
        CHECK(jc == DMLS_BLOCK_L2_RUN && kc > 0 && kc < 607 && kc % 64 == 0,
              "tile chunks of 607-byte rows: %lld x %lld", (long long)jc, (long long)kc);
        dmls_block_chunks(1, 4915, DMLS_TILE_L2_WHOLE_ROW, 1, 1, &jc, &kc);
        CHECK(kc == DMLS_TILE_L2_WHOLE_ROW, "tile chunks of short rows: %lld x %lld", (long long)jc, (long long)kc);
    }
}

/* ---- groups past the L2 buffers' row table (DMLS_BLOCK_L2_ROWS values of j):
   J = (43, 47) = 2021 and K = (47, 43), the most a group holds (2048) less a
   few, in place and through L2, whose chunks then take at most
   DMLS_BLOCK_L2_ROWS values of j ---- */
static void test_block_large_groups(void) {
    int wi, l2;
    for (wi = 0; wi < 4; wi++) {
        const int W = widths[wi];
        int64_t jc, kc;
        dmls_block_chunks(W, 2021, 16, 0, 1, &jc, &kc);
        CHECK(jc > 0 && jc <= DMLS_BLOCK_L2_ROWS && kc == 16, "block chunks W=%d: %lld x %lld", W,
              (long long)jc, (long long)kc);
        dmls_block_chunks(W, 2021, 2021, 0, 1, &jc, &kc);
        CHECK(jc > 0 && jc <= DMLS_BLOCK_L2_ROWS && kc > 0, "block chunks W=%d: %lld x %lld", W,
              (long long)jc, (long long)kc);
        for (l2 = DMLS_L2_NONE; l2 <= DMLS_L2_BOTH; l2++) {
            CHECK(block_case(W, 43, 47, 4, 4, 3 * W, 1, 0, 0, l2, 0),
                  "large J W=%d l2=%d", W, l2);
            CHECK(block_case(W, 5, 3, 47, 43, 0, 1, 0, 0, l2, 0), "large K W=%d l2=%d", W, l2);
        }
    }
}

/* ---- plain plans through the executor, 1 and 4 threads, whole or cut in
   two (the first 123 rows, then the rest from their offsets) ---- */
static void test_execute(void) {
    int wi, mode, threads, cut;
    for (wi = 0; wi < 4; wi++)
        for (mode = 0; mode < 3; mode++)
            for (threads = 1; threads <= 4; threads += 3)
            for (cut = 0; cut <= 1; cut++) {
                const int W = widths[wi];
                const int64_t rows = 300, cols = 257;
                /* memcpy: rows of cols contiguous; fill: stride-0 source;
                   strided: source stride 2 elements, destination 3 */
                const int64_t iss = mode == 0 ? W : (mode == 1 ? 0 : 2 * W);
                const int64_t ids = mode == 2 ? 3 * W : W;
                const int64_t oss = mode == 1 ? W : cols * iss + 5 * W, ods = cols * ids + 3 * W;
                int64_t n[2] = {rows, cols}, ss[2] = {oss, iss}, ds[2] = {ods, ids};
                dmls_copy c;
                bufs b;
                bufs_new(&b, (size_t)(1 + rows * oss + cols * iss + W), (size_t)(1 + rows * ods));
                memset(&c, 0, sizeof c);
                c.kind = DMLS_COPY_PLAIN;
                c.main.mode = mode == 0 ? DMLS_MODE_MEMCPY : (mode == 1 ? DMLS_MODE_FILL : DMLS_MODE_STRIDED);
                c.main.width = W;
                c.main.outer_ndim = 1;
                c.main.outer_size[0] = rows;
                c.main.outer_src_stride[0] = oss;
                c.main.outer_dst_stride[0] = ods;
                c.main.outer_count = rows;
                c.main.inner_size = cols;
                c.main.inner_src_stride = iss;
                c.main.inner_dst_stride = ids;
                c.main.segment_len = 100;      /* three segments per row: a ragged last one */
                c.main.segments = 3;
                c.main.tasks = rows * 3;
                c.main.dst_bytes = (int64_t)1 << 20;   /* large enough to split over threads */
                if (cut) {
                    c.rest = c.main;
                    c.main.outer_size[0] = c.main.outer_count = 123;
                    c.main.tasks = 123 * 3;
                    c.rest.outer_size[0] = c.rest.outer_count = rows - 123;
                    c.rest.tasks = (rows - 123) * 3;
                    c.has_rest = 1;
                    c.rest_src = 123 * oss;
                    c.rest_dst = 123 * ods;
                }
                dmls_run(&c, (char *)b.src + 1, (char *)b.dst + 1, threads, dmls_scratch());
                ref_copy(2, n, ss, ds, W, (char *)b.src + 1, (char *)b.want + 1);
                CHECK(memcmp(b.dst, b.want, b.dbytes) == 0, "execute W=%d mode=%d threads=%d cut=%d", W, mode,
                      threads, cut);
                bufs_free(&b);
            }
}

/* ---- scratch and pool ---- */
static void *other_scratch(void *arg) {
    *(char **)arg = dmls_scratch();
    return NULL;
}

static int64_t *chunk_runs;
static void count_chunk(void *ctx, int64_t c) {
    (void)ctx;
    __atomic_fetch_add(&chunk_runs[c], 1, __ATOMIC_RELAXED);
}

#if DMLSTRIDE_HAVE_THREADS
/* Which thread ran each chunk, and in what order the chunks started. */
static int64_t lane_seq_next;
static int lane_tid_next;
static __thread int lane_tid;
static int64_t *chunk_seq;
static int *chunk_tid;
static void note_chunk(void *ctx, int64_t c) {
    (void)ctx;
    if (lane_tid == 0) lane_tid = __atomic_add_fetch(&lane_tid_next, 1, __ATOMIC_RELAXED);
    chunk_tid[c] = lane_tid;
    chunk_seq[c] = __atomic_fetch_add(&lane_seq_next, 1, __ATOMIC_RELAXED);
    usleep(200);   /* long enough for the helper to join */
}

/* Two threads: the chunks are cut into two lanes of nearly equal runs (the
   longer first), the caller's lane 0.  Whatever the timing, each lane is a
   run its owner took from the front, in order, then a run the other thread
   took from the back, last first. */
static void test_pool_lanes(void) {
    static const int64_t counts[] = {2, 3, 16, 17, 40};
    int i;
    for (i = 0; i < (int)(sizeof counts / sizeof counts[0]); i++) {
        const int64_t n = counts[i], len = n / 2, bounds[3] = {0, len + n % 2, n};
        int64_t c, r, m;
        int ok = 1;
        chunk_seq = calloc((size_t)n, sizeof *chunk_seq);
        chunk_tid = calloc((size_t)n, sizeof *chunk_tid);
        lane_seq_next = 0;
        dmls_parallel(note_chunk, NULL, n, 2);
        for (r = 0; r < 2; r++) {
            const int64_t a = bounds[r], b = bounds[r + 1];
            for (m = a + 1; m < b && chunk_tid[m] == chunk_tid[a] && chunk_seq[m] > chunk_seq[m - 1]; m++) {}
            for (c = m + 1; c < b; c++)
                if (chunk_seq[c] > chunk_seq[c - 1] || chunk_tid[c] != chunk_tid[m]) ok = 0;
        }
        CHECK(ok, "pool lanes: %lld chunks, each lane taken from its front in order, the rest from its back",
              (long long)n);
        free(chunk_seq);
        free(chunk_tid);
    }
}
#endif

static void test_pool(void) {
    int threads, rep;
    char *mine = dmls_scratch(), *theirs = NULL;
    pthread_t th;
    CHECK(mine != NULL && mine == dmls_scratch(), "scratch: one arena per thread");
    pthread_create(&th, NULL, other_scratch, &theirs);
    pthread_join(th, NULL);
    CHECK(theirs != NULL && theirs != mine, "scratch: another thread gets its own arena");
    chunk_runs = calloc(1000, sizeof *chunk_runs);
    for (threads = 1; threads <= 16; threads *= 2)
        for (rep = 0; rep < 20; rep++) {
            const int64_t nchunks = 1 + rep * 50;
            int64_t c;
            int ok = 1;
            memset(chunk_runs, 0, 1000 * sizeof *chunk_runs);
            dmls_parallel(count_chunk, NULL, nchunks, threads);
            for (c = 0; c < 1000; c++)
                if (chunk_runs[c] != (c < nchunks)) ok = 0;
            CHECK(ok, "pool: %d threads, %lld chunks, each run once", threads, (long long)nchunks);
        }
    free(chunk_runs);
#if DMLSTRIDE_HAVE_THREADS
    test_pool_lanes();
    CHECK(dmls_pool_workers() == 15, "pool: 15 workers for 16 threads, got %d", dmls_pool_workers());
    dmls_pool_set_threads(2);
    for (rep = 0; rep < 500 && dmls_pool_workers() > 1; rep++) usleep(2000);
    CHECK(dmls_pool_workers() == 1, "pool: surplus workers exit, %d left", dmls_pool_workers());
#endif
}

int main(void) {
    int levels[4] = {DMLS_ISA_GENERIC, DMLS_ISA_SSE2, DMLS_ISA_SSSE3, DMLS_ISA_AVX2}, i, seen = -1;
    CHECK(dmls_scratch() != NULL, "scratch arena");
    for (i = 0; i < 4; i++) {
        level_in_use = dmls_isa_select(levels[i]);
        if (level_in_use == seen) continue;   /* the CPU (or the build) has no such level */
        seen = level_in_use;
        test_transpose();
        test_run_tile();
        test_elements();
        test_deinterleave_keeps_the_vector_pixels();
        test_copy();
        test_copy_near_source();
        test_nibbles();
        test_block();
        test_block_segments();
        test_block_chunks();
        test_block_large_groups();
        test_tiny_tiles();
        test_packed_tiles();
        test_execute();
    }
    test_pool();
    printf("%d checks, %d failures (highest isa level %d)\n", checks, failures, seen);
    return failures != 0;
}
