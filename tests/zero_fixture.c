#include "zero_fixture.h"

#include <string.h>

#include "zero/sizing.h"

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

zinc_status zfx_grads_init(zfx_grads *f, zcomm *world, const zfx_grads_opts *o) {
    memset(f, 0, sizeof *f);
    zinc_status st = zfx_base_init(&f->b, world);
    if (st != ZINC_OK) return st;
    zgrads_plan_in in = {.stage = o->stage,
                         .world = world->size,
                         .part = &f->b.part,
                         .grad_dtype = o->dtype,
                         .comm_dtype = o->dtype,
                         .send_needs_copy = zsize_send_needs_copy(o->dtype, o->dtype, o->prescale, 1.0, world->size),
                         .reduce_bucket_size = o->bucket,
                         .biggest_module = f->b.biggest,
                         .overlap_comm = o->overlap,
                         .deterministic = o->deterministic,
                         .gas = o->gas};
    zgrads_plan_make(&in, &f->plan);
    zgrads_ctx c = {.dev = f->b.dev,
                    .dcomm = f->b.dcomm,
                    .log = &f->b.log,
                    .part = &f->b.part,
                    .stage = o->stage,
                    .rank = world->rank,
                    .world = world->size,
                    .grad_dtype = o->dtype,
                    .comm_dtype = o->dtype,
                    .prescale_gradients = o->prescale,
                    .predivide_factor = 1.0,
                    .modules = f->b.mods,
                    .nmodules = ZFX_NMOD,
                    .sizes = &f->plan,
                    .deterministic = o->deterministic,
                    .gas = o->gas};
    zgrads_init(&f->g, &c);
    return ZINC_OK;
}

void zfx_grads_free(zfx_grads *f) {
    zgrads_free(&f->g);
    zfx_base_free(&f->b);
}
