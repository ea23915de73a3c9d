/* Element kernels for every element width (1, 2, 4 and 8 bytes), inlined
   where they are used; dmls_<kernel>(W, ...) picks the width at run time
   (once per row, never per element). */
#ifndef DMLS_ELEMENTS_H
#define DMLS_ELEMENTS_H

#include <stdint.h>
#include <string.h>

#include "isa.h"

/* The scalar staging tile: DMLS_TILE_BYTES of elements sized for L1, rows
   padded by DMLS_TILE_PAD bytes (breaks 4 KiB aliasing), at most
   DMLS_TILE_ROW_BYTES bytes of k per tile. */
#define DMLS_TILE_BYTES 16384
#define DMLS_TILE_PAD 64
#define DMLS_TILE_ROW_BYTES 128
#define DMLS_TILE_STAGE_BYTES (DMLS_TILE_BYTES + DMLS_TILE_ROW_BYTES * DMLS_TILE_PAD)

#define T uint8_t
#define W 1
#include "element-template.h"
#undef T
#undef W
#define T uint16_t
#define W 2
#include "element-template.h"
#undef T
#undef W
#define T uint32_t
#define W 4
#include "element-template.h"
#undef T
#undef W
#define T uint64_t
#define W 8
#include "element-template.h"
#undef T
#undef W

#define DMLS_BY_WIDTH(w, name, args) do {          \
        switch (w) {                               \
        case 1: name##1 args; break;               \
        case 2: name##2 args; break;               \
        case 4: name##4 args; break;               \
        default: name##8 args; break;              \
        }                                          \
    } while (0)

#endif
