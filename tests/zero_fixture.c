#include "zero_fixture.h"

#include <string.h>

const int64_t zfx_sizes[ZFX_NMOD] = {40, 1000, 8, 296, 64, 2504};

zinc_status zfx_base_init(zfx_base *b, zcomm *world) {
    memset(b, 0, sizeof *b);
    b->log = (zlog){.fn = NULL, .level = ZINC_LOG_WARN, .rank = world->rank};
    b->world = world;
    zinc_status st = zdev_create_cpu(&b->mem, &b->dev);
    if (st != ZINC_OK) return st;
    if ((st = b->dev->ops->comm_create(b->dev, world, &b->log, &b->dcomm)) != ZINC_OK) return st;
    int64_t off = 0;
    for (int i = 0; i < ZFX_NMOD; i++) {
        b->mods[i] = (zmodule){.name = (char *)"m",
                               .first_param = i,
                               .nparams = 1,
                               .flat_begin = off,
                               .flat_end = off + zfx_sizes[i]};
        off += zfx_sizes[i];
        if (zfx_sizes[i] > b->biggest) b->biggest = zfx_sizes[i];
    }
    zpart_init(&b->part, off, world->size, world->rank);
    return ZINC_OK;
}

void zfx_base_free(zfx_base *b) {
    if (b->dcomm && b->dcomm != b->world) zcomm_destroy(b->dcomm);
    if (b->dev) zdev_destroy(b->dev);
}

uint64_t zfx_tracked(const zfx_base *b, zinc_mem_category c) {
    uint64_t t = 0;
    for (int k = 0; k < ZINC_MEMKIND_COUNT; k++) t += b->mem.current[k][c];
    return t;
}
