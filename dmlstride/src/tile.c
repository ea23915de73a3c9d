#include "tile.h"

#include "elements.h"
#include "isa.h"

void dmls_tile(int W, const char *s, char *d, int64_t kn, int64_t kss, int64_t kds,
               int64_t j0, int64_t j1, int64_t iss, int64_t ids, char *scratch) {
    DMLS_BY_WIDTH(W, dmls_tile_, (s, d, kn, kss, kds, j0, j1, iss, ids, scratch));
}

void dmls_transpose(const dmls_plan *p, const char *s, char *d, int64_t j0, int64_t j1, char *scratch) {
    const int w = p->width;
    const int64_t jn = j1 - j0, kn = p->tile_size, kss = p->tile_src_stride, kds = p->tile_dst_stride;
    const int64_t iss = p->inner_src_stride, ids = p->inner_dst_stride;
    const char *sj = s + j0 * iss;
    char *dj = d + j0 * ids;
    int64_t kdone = 0, ja = 0, jb = 0, body;
    /* The SIMD variant covers rows k < kdone of columns ja..jb; the scalar
       tile does the rest. */
    if (dmls_isa.level >= DMLS_ISA_SSE2 && kss == w && ids == w) {
        if (p->stream && kds == jn * w && jn % (16 / w) == 0 && jn * w <= 1024) {
            /* Whole destination rows back to back: one contiguous stream. */
            dmls_isa.nt_contig(w, sj, iss, dj, kn, jn, &kdone, scratch);
            jb = jn;
        } else if (p->stream && kds % 64 == 0) {
            /* Line-aligned strips; the columns before the first line
               boundary and after the last one are left to the scalar tile. */
            body = dmls_whole_lines(dj, w, jn, &ja);
            jb = ja + body;
            if (body > 0)
                dmls_isa.nt_transpose(w, sj + ja * iss, iss, dj + ja * w, kds, kn, jb - ja, &kdone, scratch);
        } else {
            dmls_isa.transpose(w, sj, iss, dj, kds, kn, jn, &kdone, &jb, scratch);
        }
    }
    if (kdone == 0) ja = jb = 0;
    if (ja > 0) dmls_tile(w, sj, dj, kn, kss, kds, 0, ja, iss, ids, scratch);
    if (jb < jn) dmls_tile(w, sj, dj, kn, kss, kds, jb, jn, iss, ids, scratch);
    if (kdone < kn && jb > ja)
        dmls_tile(w, sj + kdone * kss, dj + kdone * kds, kn - kdone, kss, kds, ja, jb, iss, ids, scratch);
}
