/* A decoupled save's checksums taken while its writer copies (checkpoint_async.c). The manifest keeps one
 * CRC32C per 1 MiB block of a shard file, and the writer's copies run piece by piece per section, in any
 * order (the guard copies some on the training thread). So the file is cut, once per save, into segments
 * that each lie inside one block and inside one region (the header, a piece of a section, the zeros
 * between sections); each copy checksums its segments from the source chunk by chunk, while the chunk is
 * still in the cache, and the image is not read again for them. At the end, the segments no copy
 * checksummed (the zeros, the guard's pieces) are read from the image, and each block's CRC is combined
 * from its segments'. The result is the CRC of the image's bytes, as the pass over the image gave. */
#include <stdlib.h>
#include <string.h>

#include "base/core/crc32c.h"
#include "base/core/error.h"
#include "kernels/cpu_kernels.h"
#include "runtime/checkpoint/checkpoint_internal.h"

/* Bytes checksummed, then copied, at a time: three lanes of the SSE4.2 CRC (crc32c.c), inside L1. */
#define COPY_CHUNK ((size_t)24 << 10)

/* Appends [off, off + len), cut at block boundaries; n counts the segments without storing them (seg NULL). */
static void add(zckpt_segs *s, int64_t off, int64_t len) {
    while (len > 0) {
        int64_t end = (off / s->block + 1) * s->block, n = len < end - off ? len : end - off;
        if (s->seg) s->seg[s->n] = (zckpt_seg){.off = off, .len = n};
        s->n++;
        off += n;
        len -= n;
    }
}

/* Walks the file's regions in order: the gaps and header as filler, each section's pieces (or the whole
 * section as filler where src[sec] is false). first (may be NULL) gets each piece's first segment. */
static void walk(zckpt_segs *s, const zckpt_file *f, int nsec, const bool have[4], int64_t nelem, int64_t piece,
                 const size_t esz[4], int64_t *first) {
    int64_t pos = 0, npieces = (nelem + piece - 1) / piece;
    s->n = 0;
    for (int k = 0; k < nsec; k++) {
        int64_t start = f->sec_offset[k];
        add(s, pos, start - pos);
        pos = start;
        if (!have[k]) continue; /* its zeros are filler, up to the next region */
        for (int64_t p = 0; p < npieces; p++) {
            int64_t a = p * piece, n = nelem - a < piece ? nelem - a : piece;
            if (first) first[p * ZCKPT_NSEC + k] = s->n;
            add(s, start + a * (int64_t)esz[k], n * (int64_t)esz[k]);
        }
        pos = start + nelem * (int64_t)esz[k];
    }
    add(s, pos, f->bytes - pos);
}

zinc_status zckpt_segs_build(zckpt_segs *s, const zckpt_file *f, int nsec, const bool have[4], int64_t nelem,
                             int64_t piece, const size_t esz[4]) {
    zinc_status st = ZINC_OK;
    memset(s, 0, sizeof *s);
    s->block = f->block_bytes;
    int64_t npieces = (nelem + piece - 1) / piece;
    walk(s, f, nsec, have, nelem, piece, esz, NULL);
    TRY_ALLOC(s->seg, s->n > 0 ? s->n : 1, "checkpoint checksum segments");
    TRY_ALLOC(s->first, npieces * ZCKPT_NSEC > 0 ? npieces * ZCKPT_NSEC : 1, "checkpoint checksum segments");
    walk(s, f, nsec, have, nelem, piece, esz, s->first);
fail:
    if (st != ZINC_OK) zckpt_segs_free(s);
    return st;
}

void zckpt_segs_free(zckpt_segs *s) {
    free(s->seg);
    free(s->first);
    memset(s, 0, sizeof *s);
}

int zckpt_segs_copy(zckpt_segs *s, int64_t p, int sec, uint8_t *image, const void *src, int64_t off, int64_t bytes,
                    int f32) {
    int bad = 0;
    const uint8_t *from = src;
    for (int64_t k = s->first[p * ZCKPT_NSEC + sec]; k < s->n && s->seg[k].off < off + bytes; k++) {
        zckpt_seg *g = &s->seg[k];
        uint32_t crc = 0;
        for (int64_t o = g->off; o < g->off + g->len; o += (int64_t)COPY_CHUNK) {
            size_t n = (size_t)(g->off + g->len - o) < COPY_CHUNK ? (size_t)(g->off + g->len - o) : COPY_CHUNK;
            crc = zcrc32c(crc, from + (o - off), n);
            bad |= zk_copy_stream(image + o, from + (o - off), n, f32);
        }
        g->crc = crc;
        g->have = true;
    }
    return bad;
}

void zckpt_segs_finish(zckpt_segs *s, const uint8_t *image, zckpt_file *f) {
    int64_t k = 0;
    f->crc = 0;
    for (int64_t b = 0; b < f->nblocks; b++) {
        int64_t end = (b + 1) * f->block_bytes < f->bytes ? (b + 1) * f->block_bytes : f->bytes;
        uint32_t c = 0;
        if (!s->seg) c = zcrc32c(0, image + b * f->block_bytes, (size_t)(end - b * f->block_bytes));
        for (; s->seg && k < s->n && s->seg[k].off < end; k++) {
            zckpt_seg *g = &s->seg[k];
            if (!g->have) g->crc = zcrc32c(0, image + g->off, (size_t)g->len);
            c = g->off == b * f->block_bytes ? g->crc : zcrc32c_combine(c, g->crc, (size_t)g->len);
        }
        f->block_crc[b] = c;
        f->crc = zcrc32c_combine(f->crc, c, (size_t)(end - b * f->block_bytes));
    }
}
