/* The engine's entry points: lifecycle, build (partition, allocate, initialise), the module hooks, the step
 * and the accessors. The roof of runtime/engine: it calls the files below and none calls it (README,
 * "Floors"). Registration lives in engine_model.c, the step's work in engine_step.c, the observers in
 * engine_observe.c, gradient reduction in zero/grads.c, stage-3 gathering in zero/gather.c. */
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime/engine/engine_internal.h"
#include "base/core/env.h"
#include "base/core/error.h"
#include "base/core/signals.h"
#include "base/core/trace.h"
#include "kernels/cpu_kernels.h"
#include "runtime/engine/engine_mem.h"
#include "offload/param_nvme.h"
#include "offload/state_nvme.h"
#include "base/comm/watchdog.h"

zinc_options zinc_default_options(void) {
    zinc_options o;
    memset(&o, 0, sizeof o);
    o.struct_size = sizeof o;
    o.device = ZINC_DEVICE_AUTO;
    o.log_fn = zinc_log_stderr;
    o.log_level = ZINC_LOG_INFO;
    o.seed = 1234;
    o.trace_first_step = 1;
    o.trace_last_step = 5;
    return o;
}

/* The caller's options over the defaults: only the fields its zinc.h had (struct_size bytes). */
static zinc_status options_read(const zinc_options *opts, zinc_options *o) {
    if (!opts) return ZINC_OK;
    if (opts->struct_size == 0)
        return ZERR(ZINC_ERR_INVALID_ARG, "zinc_create: options.struct_size is 0: start from zinc_default_options() "
                                          "and set the fields you need by name");
    if (opts->struct_size > sizeof *o)
        return ZERR(ZINC_ERR_UNSUPPORTED,
                    "zinc_create: options.struct_size %zu is larger than this libzinc (%s) knows "
                    "(%zu bytes): the program was compiled against a newer zinc.h; run it with "
                    "the libzinc it was built for",
                    opts->struct_size, ZINC_VERSION, sizeof *o);
    if (opts->struct_size < offsetof(zinc_options, config_json) + sizeof o->config_json)
        return ZERR(ZINC_ERR_INVALID_ARG,
                    "zinc_create: options.struct_size %zu is smaller than any zinc_options "
                    "(%zu bytes); start from zinc_default_options()",
                    opts->struct_size, offsetof(zinc_options, config_json) + sizeof o->config_json);
    memcpy(o, opts, opts->struct_size);
    o->struct_size = sizeof *o;
    return ZINC_OK;
}

/* zinc_options.preempt: the handler only records the signal; zinc_step's all-gather carries it. */
static void enable_preempt(zinc_engine *e) {
    zsig_install();
    zsig_defer(true);
    e->preempt = true;
    static const int sigs[3] = {SIGTERM, SIGINT, SIGUSR1};
    static const char *const names[3] = {"SIGTERM", "SIGINT", "SIGUSR1"};
    for (int i = 0; i < 3; i++) {
        struct sigaction now;
        /* an ignored signal (a background job's SIGINT) cannot stop the run at all: nothing to say */
        if (zsig_handles(sigs[i]) || (sigaction(sigs[i], NULL, &now) == 0 && now.sa_handler == SIG_IGN)) continue;
        ZLOG_WARN(&e->log,
                  "zinc_options.preempt: %s has the program's own handler: it does "
                  "not stop the run at a step boundary",
                  names[i]);
    }
}

int zinc_preempt_requested(const zinc_engine *e) { return e ? e->preempt_signal : 0; }

/* zinc_create's checks of the options that need no engine. */
static zinc_status options_check(const zinc_options *o) {
    if (!o->config_path && !o->config_json)
        return ZERR(ZINC_ERR_INVALID_ARG, "zinc_create: give options.config_path (a ds_config.json file) or "
                                          "options.config_json (the JSON text)");
    if ((int)o->log_level < ZINC_LOG_DEBUG || (int)o->log_level > ZINC_LOG_OFF)
        return ZERR(ZINC_ERR_INVALID_ARG,
                    "zinc_create: options.log_level %d is not a zinc_log_level: want ZINC_LOG_DEBUG (0) to "
                    "ZINC_LOG_OFF (4)",
                    (int)o->log_level);
    if ((int)o->device < ZINC_DEVICE_AUTO || (int)o->device > ZINC_DEVICE_CUDA)
        return ZERR(ZINC_ERR_INVALID_ARG,
                    "zinc_create: options.device %d is not a zinc_device_kind: want ZINC_DEVICE_AUTO (0), "
                    "ZINC_DEVICE_CPU (1) or ZINC_DEVICE_CUDA (2)",
                    (int)o->device);
    if (o->cpu_threads < 0 || o->cpu_threads > ZPOOL_MAX_THREADS)
        return ZERR(ZINC_ERR_INVALID_ARG,
                    "zinc_create: options.cpu_threads %d: want 0 (cores / ranks on this node) "
                    "or 1 to %d",
                    o->cpu_threads, ZPOOL_MAX_THREADS);
    if (o->preempt != 0 && o->preempt != 1)
        return ZERR(ZINC_ERR_INVALID_ARG,
                    "zinc_create: options.preempt %d: want 0 (off) or 1 (a SIGTERM, SIGINT "
                    "or SIGUSR1 is agreed on at the next zinc_step)",
                    o->preempt);
    return ZINC_OK;
}

/* The host communicator and what comes with the rank: the watchdog, preemption, the kernels' warning. */
static zinc_status open_comm(zinc_engine *e, const zinc_options *o) {
    zinc_status st = zcomm_create(&e->log, &e->comm);
    if (st != ZINC_OK) return st;
    e->rank = e->comm->rank;
    e->world = e->comm->size;
    e->log.rank = e->rank;
    zwatch_configure(&e->log, e->rank);
    if (o->preempt) enable_preempt(e);
    const char *kernels_said = zkernels_warning();
    if (kernels_said) ZLOG_WARN(&e->log, "%s", kernels_said);
    return ZINC_OK;
}

/* The config, on every rank: a rank whose config fails must not leave the others waiting in the
 * collectives that follow. */
static zinc_status load_config(zinc_engine *e, const zinc_options *o) {
    zinc_status st;
    if (o->total_steps < 0)
        return ZERR(ZINC_ERR_INVALID_ARG,
                    "zinc_create: options.total_steps is %lld; give the run's optimizer steps, or 0 "
                    "when not known",
                    (long long)o->total_steps);
    zcfg_load_opts lo = {.sets = o->config_overrides, .run_steps = o->total_steps};
    if (o->config_path)
        st = zcfg_load_file_ex(o->config_path, e->world, &lo, &e->log, &e->cfg);
    else
        st = zcfg_load_text_ex(o->config_json, "<json text>", e->world, &lo, &e->log, &e->cfg);
    return zcomm_agree_status(e->comm, st);
}

/* The compute device, its communicator and comms_logger on both (before the first collective it counts),
 * the optimizer's descriptor and where it may run, and ZeRO++'s groups. */
static zinc_status open_device(zinc_engine *e, const zinc_options *o) {
    zinc_status st = ZINC_OK;
    zinc_device_kind want = o->device != ZINC_DEVICE_AUTO ? o->device : e->cfg.device;
    /* the device and the monitors' directories (rank 0 writes them), as zinc config check checks them */
    TRY(zcomm_agree_status(e->comm, zengine_check_run(&e->cfg, o->device, e->rank == 0)));
    if (want == ZINC_DEVICE_AUTO)
        want = zengine_cuda_allowed() && zdev_cuda_count() > 0 ? ZINC_DEVICE_CUDA : ZINC_DEVICE_CPU;
    e->device = want;
    TRY(zcomm_agree_status(e->comm,
                           zdev_create(want, &e->mem, &e->log, e->comm->local_rank,
                                       o->cpu_threads > 0 ? o->cpu_threads : zpool_default_threads(e->comm->local_size),
                                       &e->dev)));
    TRY(e->dev->ops->comm_create(e->dev, e->comm, &e->log, &e->dcomm));
    TRY(zengine_comms_start(e));
    e->optim = zopt_get(e->cfg.optimizer.type);
    if (!e->optim)
        FAIL(ZINC_ERR_INTERNAL, "optimizer type %d has no descriptor; please report this", e->cfg.optimizer.type);
    TRY(zopt_check_placement(e->optim, e->dev, e->cfg.zero.offload_optimizer.device != ZOFFLOAD_NONE));
    /* ZeRO++: hpZ's group, qgZ's node groups, what the device must offer */
    TRY(zpp_setup(&e->cfg.zero, &e->log, e->comm, e->dcomm, e->dev, &e->hcomm, &e->qgz_intra, &e->qgz_inter));
fail:
    return st;
}

/* The stage, the dtypes and the loss scaler from the config. */
static zinc_status training_setup(zinc_engine *e) {
    e->stage = e->cfg.zero.stage;
    e->compute_dtype = e->cfg.compute_dtype;
    e->comm_dtype = e->cfg.comm_dtype;
    e->grad_dtype = zcfg_grad_dtype(&e->cfg);
    if (e->stage >= 2 && e->cfg.grad_accum_dtype_set && e->cfg.grad_accum_dtype != ZINC_FP32)
        ZLOG_WARN(&e->log,
                  "data_types.grad_accum_dtype=%s: in stage %d zinc accumulates the gradient shard "
                  "in fp32 (more accurate, 4 bytes per shard element)",
                  zinc_dtype_name(e->cfg.grad_accum_dtype), e->stage);
    zinc_status st = zengine_pstore_check(e); /* offload_param "nvme": what this device cannot do */
    if (st != ZINC_OK) return st;
    if (e->cfg.fp16.enabled) {
        if (e->cfg.fp16.loss_scale == 0)
            zls_init_dynamic(&e->scaler, e->cfg.fp16.initial_scale_power, e->cfg.fp16.loss_scale_window,
                             e->cfg.fp16.hysteresis, e->cfg.fp16.consecutive_hysteresis, e->cfg.fp16.min_loss_scale);
        else
            zls_init_static(&e->scaler, e->cfg.fp16.loss_scale);
    } else {
        zls_init_static(&e->scaler, 1.0);
    }
    return ZINC_OK;
}

zinc_status zinc_create(const zinc_options *opts, zinc_engine **out) {
    zinc_status st = ZINC_OK;
    zinc_engine *e = NULL;
    if (!out) return ZERR(ZINC_ERR_INVALID_ARG, "zinc_create: out is NULL");
    *out = NULL;
    zinc_options o = zinc_default_options();
    TRY(options_read(opts, &o));
    TRY(options_check(&o));
    TRY_ALLOC(e, 1, "the engine");
    e->log.fn = o.log_fn;
    e->log.userdata = o.log_userdata;
    e->log.level = o.log_level;
    e->log.rank = 0;
    e->seed = o.seed;
    e->nonfinite = o.nonfinite;
    zengine_micro_steps_reset(e);
    TRY(open_comm(e, &o));
    TRY(load_config(e, &o));
    TRY(open_device(e, &o));
    TRY(training_setup(e));
    ZLOG_INFO(&e->log,
              "zinc %s: %d rank%s (%s), device %s, ZeRO stage %d, %s compute, %s communication, "
              "batch %lld = micro %lld x accumulation %lld x ranks %d, %d kernel thread%s (%s)",
              zinc_version(), e->world, e->world == 1 ? "" : "s", e->dcomm->ops->name, e->dev->ops->name, e->stage,
              zinc_dtype_name(e->compute_dtype), zinc_dtype_name(e->comm_dtype), (long long)e->cfg.train_batch_size,
              (long long)e->cfg.train_micro_batch_size_per_gpu, (long long)e->cfg.gradient_accumulation_steps, e->world,
              zpool_threads(e->dev->pool), zpool_threads(e->dev->pool) == 1 ? "" : "s", zkernels_simd_name());
    TRY(zengine_observers_create(e, &o)); /* the monitors, the trace (engine_observe.c) */
    *out = e;
    return ZINC_OK;
fail:
    zinc_destroy(e);
    return st;
}

void zengine_settle_ckpt_image(zinc_engine *e) {
    if (e->ckpt_image_faulting) pthread_join(e->ckpt_image_thread, NULL);
    e->ckpt_image_faulting = false;
}

void zengine_drop_ckpt_image(zinc_engine *e) {
    zengine_settle_ckpt_image(e);
    if (e->ckpt_image) zmem_host_free(&e->mem, ZINC_MEMKIND_HOST, ZINC_MEM_STAGING, e->ckpt_image, e->ckpt_image_alloc);
    e->ckpt_image = NULL;
    e->ckpt_image_alloc = 0;
}

void zinc_destroy(zinc_engine *e) {
    if (!e) return;
    /* the decoupled checkpoint before the state it may still read; then the observers (engine_observe.c),
     * while the module names the trace's spans use are still there */
    if (e->ckpt_async && e->ckpt_async_drop) e->ckpt_async_drop(e);
    zengine_drop_ckpt_image(e);
    zengine_observers_destroy(e);
    if (e->built) {
        zgather_free(&e->gather);
        zgrads_free(&e->grads);
        zengine_f32_free(e);
        zengine_buffers_free(e); /* the plan's buffers the engine holds (engine_buffers.c) */
        zstate_destroy(e->state);
        zengine_muon_free(e);
        zstate_param_destroy(e->pstore);
        zengine_gstore_destroy(e);
    }
    for (int i = 0; i < e->nparams; i++) {
        free(e->params[i]->name);
        free(e->params[i]);
    }
    free(e->params);
    for (int i = 0; i < e->nmodules; i++) free(e->modules[i].name);
    zengine_agree_free(e);
    zplan_free(&e->plan);
    free(e->modules);
    zcomm_destroy(e->hcomm);
    zcomm_destroy(e->qgz_intra);
    zcomm_destroy(e->qgz_inter);
    if (e->dcomm != e->comm) zcomm_destroy(e->dcomm);
    zdev_destroy(e->dev);
    zcomm_destroy(e->comm);
    free(e);
}

/* ---------------------------------------------------------------- build */

/* A per-parameter seed from the engine seed and the parameter's name (FNV-1a, then splitmix64), so it
 * is the same on every rank and for every rank count. */
static uint64_t param_seed(uint64_t seed, const char *name) {
    uint64_t h = 1469598103934665603ull ^ seed;
    for (const unsigned char *s = (const unsigned char *)name; *s; s++) h = (h ^ *s) * 1099511628211ull;
    h += 0x9e3779b97f4a7c15ull;
    h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ull;
    h = (h ^ (h >> 27)) * 0x94d049bb133111ebull;
    return h ^ (h >> 31);
}

/* The flat layout from the plan: parameter offsets, module ranges, the partition and the own range. */
static void layout(zinc_engine *e) {
    const zplan *pl = &e->plan;
    for (int i = 0; i < e->nparams; i++) e->params[i]->flat_offset = pl->flat_offset[i];
    for (int m = 0; m < e->nmodules; m++) {
        e->modules[m].flat_begin = pl->module_begin[m];
        e->modules[m].flat_end = pl->module_end[m];
    }
    e->part = pl->part;
    e->own_lo = pl->own_lo;
    e->own_hi = pl->own_hi;
}

/* The mask is written here one byte per ZPART_PARAM_ALIGN elements (every parameter starts on such a
 * boundary, so a byte never covers two parameters) and read by the kernels one byte per ZADAM_MASK_GROUP:
 * the two must be the same number. */
_Static_assert(ZADAM_MASK_GROUP == ZPART_PARAM_ALIGN,
               "the decay mask's group (kernels/cpu_kernels.h) must equal the parameter alignment (zero/partition.h)");

static void fill_decay_mask(zinc_engine *e) {
    int64_t groups = (e->own_hi - e->own_lo) / ZPART_PARAM_ALIGN;
    for (int64_t g = 0; g < groups; g++) {
        zinc_param *p = zengine_param_at(e, e->own_lo + g * ZPART_PARAM_ALIGN);
        e->decay_mask[g] =
            (uint8_t)((p && (p->flags & ZINC_PARAM_DECAY)) |
                      (p && e->optim->whole_matrix && (p->flags & ZINC_PARAM_MUON) ? ZOPT_MASK_MATRIX : 0));
    }
}

/* Copies the float values of parameter p's elements that fall into [lo, hi) to dst (compute dtype, on
 * the device, indexed from dst_base). */
static zinc_status place_param(zinc_engine *e, const zinc_param *p, const float *vals, void *dst, int64_t dst_base,
                               int64_t lo, int64_t hi) {
    int64_t a = p->flat_offset > lo ? p->flat_offset : lo;
    int64_t b = p->flat_offset + p->numel < hi ? p->flat_offset + p->numel : hi;
    if (b <= a) return ZINC_OK;
    if (e->stage == 3) return zengine_params_upload_f32(e, a - e->own_lo, vals + (a - p->flat_offset), b - a);
    size_t esz = zinc_dtype_size(e->compute_dtype);
    return zdev_upload_f32(e->dev, (char *)dst + (size_t)(a - dst_base) * esz, e->compute_dtype,
                           vals + (a - p->flat_offset), (size_t)(b - a));
}

/* The master weights start as the compute-dtype parameters widened, so master and parameters agree
 * exactly; the moments start at zero (Lion's store has no exp_avg_sq: v is NULL). */
static zinc_status init_state(zinc_engine *e) {
    zinc_status st = ZINC_OK;
    size_t csz = zinc_dtype_size(e->compute_dtype);
    const char *own =
        e->stage <= 2 ? (const char *)e->params_full + (size_t)e->own_lo * csz : (const char *)e->params_shard;
    zdevice *d = e->dev;
    bool on_dev = zengine_state_on_device(e);
    TRY(zstate_pass_begin(e->state, ZSTATE_WRITE));
    for (int64_t i = 0; i < e->state->nchunks; i++) {
        zstate_view v;
        TRY(zstate_acquire(e->state, i, &v));
        size_t nb = (size_t)v.n * sizeof(float), vb = (size_t)v.vn * sizeof(float); /* v: its kept elements */
        if (!own) { /* offload_param nvme (cpu only): the chunk swapped in piece by piece */
            int64_t cap = zengine_pstore_chunk(e);
            void *buf = zstate_param_scratch(e->pstore);
            for (int64_t o = 0; o < v.n; o += cap) {
                int64_t k = v.n - o < cap ? v.n - o : cap;
                TRY(zengine_params_read(e, v.lo + o, k, buf));
                TRY(d->ops->cast_to_f32(d, v.master + o, buf, e->compute_dtype, (size_t)k));
            }
            TRY(d->ops->memset0(d, v.m, nb));
            if (v.v) TRY(d->ops->memset0(d, v.v, vb));
        } else if (on_dev) {
            const char *src = own + (size_t)v.lo * csz;
            TRY(d->ops->cast_to_f32(d, v.master, src, e->compute_dtype, (size_t)v.n));
            TRY(d->ops->memset0(d, v.m, nb));
            if (v.v) TRY(d->ops->memset0(d, v.v, vb));
        } else { /* offloaded state, parameters on the GPU */
            TRY(zdev_download_f32(d, v.master, own + (size_t)v.lo * csz, e->compute_dtype, (size_t)v.n));
            memset(v.m, 0, nb);
            if (v.v) memset(v.v, 0, vb);
        }
        TRY(zstate_release(e->state, i));
    }
    TRY(zstate_pass_end(e->state));
    return ZINC_OK;
fail:
    zstate_pass_abort(e->state);
    return st;
}

/* The elements of parameter p this rank initialises: the whole tensor at stages 0-2, its own part at 3. */
static bool init_range(const zinc_engine *e, const zinc_param *p, int64_t *lo, int64_t *hi) {
    int64_t p_lo = p->flat_offset, p_hi = p->flat_offset + p->numel;
    if (e->stage <= 2) {
        *lo = p_lo, *hi = p_hi;
        return true;
    }
    *lo = p_lo > e->own_lo ? p_lo : e->own_lo;
    *hi = p_hi < e->own_hi ? p_hi : e->own_hi;
    return *hi > *lo;
}

static zinc_status init_params(zinc_engine *e, zinc_init_fn whole, zinc_init_range_fn ranged, void *userdata) {
    zinc_status st = ZINC_OK;
    float *vals = NULL;
    if (!whole && !ranged) return ZINC_OK; /* zinc_build(e, NULL, ...): the buffers are allocated zeroed */
    /* The plan's scratch: pieces for a ranged initialiser, the largest tensor for a whole one (none in place).
     * Counted as host staging while the build holds it (the estimate's build peak counts it there too), and
     * from the tracker's allocator, which maps a block this large, so that its pages go back to the system
     * when the build ends (issue 41: after a model freed a large block, glibc's raised mmap threshold put a
     * malloc'ed scratch on the heap, where it stayed resident past the build, counted nowhere). */
    int64_t cap = ranged ? e->plan.init_scratch_ranged : e->plan.init_scratch_whole;
    size_t vbytes = (size_t)cap * sizeof *vals;
    void *scratch = NULL;
    TRY(zmem_host_alloc(&e->mem, ZINC_MEMKIND_HOST, ZINC_MEM_STAGING, vbytes, "parameter initialisation", &scratch));
    vals = scratch;
    for (int i = 0; i < e->nparams; i++) {
        zinc_param *p = e->params[i];
        int64_t lo, hi;
        if (!init_range(e, p, &lo, &hi)) continue;
        zinc_param_info info;
        zinc_param_get_info(p, &info);
        uint64_t seed = param_seed(e->seed, p->name);
        void *dst = e->stage <= 2 ? e->params_full : e->params_shard;
        int64_t dst_base = e->stage <= 2 ? 0 : e->own_lo;
        if (ranged) { /* pieces of at most ZINC_INIT_PIECE elements, only the ones this rank holds */
            for (int64_t a = lo; a < hi; a += cap) {
                int64_t n = hi - a < cap ? hi - a : cap;
                memset(vals, 0, (size_t)n * sizeof *vals);
                st = ranged(userdata, &info, seed, a - p->flat_offset, n, vals);
                if (st != ZINC_OK) {
                    zinc__error_trace(__FILE__, __LINE__);
                    goto fail;
                }
                if (e->stage == 3)
                    TRY(zengine_params_upload_f32(e, a - e->own_lo, vals, n));
                else
                    TRY(zdev_upload_f32(e->dev,
                                        (char *)dst + (size_t)(a - dst_base) * zinc_dtype_size(e->compute_dtype),
                                        e->compute_dtype, vals, (size_t)n));
            }
        } else if (!vals) { /* in place: the fp32 host buffer holds the tensor contiguously, zeroed */
            st = whole(userdata, &info, seed, (float *)e->params_full + p->flat_offset);
            if (st != ZINC_OK) {
                zinc__error_trace(__FILE__, __LINE__);
                goto fail;
            }
        } else {
            memset(vals, 0, (size_t)p->numel * sizeof *vals);
            st = whole(userdata, &info, seed, vals);
            if (st != ZINC_OK) {
                zinc__error_trace(__FILE__, __LINE__);
                goto fail;
            }
            TRY(place_param(e, p, vals, dst, dst_base, lo, hi));
        }
    }
fail:
    zmem_host_free(&e->mem, ZINC_MEMKIND_HOST, ZINC_MEM_STAGING, vals, vbytes);
    return st;
}

/* What zinc_build allocated against the plan it allocated from, which the estimate and the pre-flight
 * summed: a difference means they were off by it. The NVMe files' size depends on the alignment the
 * store found when it opened them, so the plan is made again with it. */
static void check_plan(zinc_engine *e) {
    zstate_nvme_stats ns;
    zplan real = {0};
    const zplan *p = &e->plan;
    if (e->cfg.zero.offload_optimizer.device == ZOFFLOAD_NVME) {
        if (zstate_nvme_stats_get(e->state, &ns) != ZINC_OK || zengine_plan(e, &e->cfg, ns.align, &real) != ZINC_OK) {
            zinc__error_clear();
            return;
        }
        p = &real;
    }
    zinc_mem_kind k;
    zinc_mem_category c;
    uint64_t want;
    if (zplan_differs(p, ZPLAN_AT_BUILD, (const uint64_t(*)[ZINC_MEM_CATEGORY_COUNT])e->mem.current, &k, &c, &want))
        ZLOG_WARN(&e->log,
                  "zinc_build: %s memory for %s holds %llu bytes, but the sizing plan (runtime/mem/plan.c) says %llu: "
                  "the memory estimate and the pre-flight are off by the difference; please report this",
                  zinc_mem_kind_name(k), zinc_mem_category_name(c), (unsigned long long)e->mem.current[k][c],
                  (unsigned long long)want);
    zplan_free(&real);
}

static zinc_status build(zinc_engine *e, zinc_init_fn whole, zinc_init_range_fn ranged, void *userdata,
                         const char *fn) {
    zinc_status st = ZINC_OK;
    if (!e) return ZERR(ZINC_ERR_INVALID_ARG, "%s: engine is NULL", fn);
    if (e->build_failed[0]) return zengine_build_failed_error(e, fn);
    if (e->built) return ZERR(ZINC_ERR_STATE, "%s: the engine is already built", fn);
    if (e->nparams == 0) return ZERR(ZINC_ERR_STATE, "%s: no parameters were added", fn);

    /* The sizing plan: the layout and every buffer's size (runtime/mem/plan.h). */
    zplan_free(&e->plan);
    TRY(zengine_plan(e, &e->cfg, 0, &e->plan));
    layout(e);
    int64_t t_agree = ztrace_begin();
    TRY(zengine_agree(e)); /* one collective: config, model and the caller's items agree on every rank */
    if (t_agree) ztrace_span(t_agree, ZTRACE_ENGINE, "rank agreement", 0, NULL, 0, NULL, 0);
    e->init_ranged = ranged != NULL;
    e->init_none = !whole && !ranged;
    e->init_in_place = !ranged && e->plan.init_in_place;
    TRY(zengine_preflight(e, &e->plan)); /* refuses, with the numbers, a config this machine cannot hold */
    const zplan_entry *pb = e->plan.buf;
    int64_t own = e->own_hi - e->own_lo;
    e->built = true; /* from here on zinc_destroy frees what was allocated */
    /* The plan's buffers the engine holds, by one loop over the plan (engine_buffers.c): the parameters,
     * the decay mask and its device copy, the offload staging (pinned once for the run, not per step:
     * pinning and unpinning a chunk's pages costs about as much as copying them, and cudaFreeHost waits
     * for the whole device), a per-tensor optimizer's sums. */
    TRY(zengine_buffers_alloc(e));
    /* The state store places itself as the plan does (offload/state.c, sized by zstate_chunk_elems). */
    e->bytes_state = (size_t)own * sizeof(float);
    zengine_contexts(e); /* what zero/ and offload/ see of the engine (engine_ctx.c) */
    TRY(zstate_create(&e->state_ctx, own, &e->state));
    TRY(zengine_pstore_create(e)); /* offload_param nvme: the shard's file (collective) */
    TRY(zengine_gstore_create(e)); /* and the gradient shard's (engine_gstore.c) */
    fill_decay_mask(e);
    if (e->decay_mask_dev)
        TRY(e->dev->ops->copy(e->dev, e->decay_mask_dev, e->decay_mask, pb[ZPLAN_DECAY_MASK].each, ZDEV_H2D));
    else
        e->decay_mask_dev = e->decay_mask;
    TRY(zengine_muon_build(e));
    /* Gradients and buckets, at the plan's sizes (e->plan.grads, handed to zero/ in its context). */
    TRY(zgrads_alloc(&e->grads));

    /* Initialise: every rank computes every parameter it holds any part of from the same seed. */
    TRY(init_params(e, whole, ranged, userdata));
    TRY(init_state(e));
    if (e->stage == 3) TRY(zgather_after_step(&e->gather)); /* gathers the persistent modules */
    check_plan(e);

    int64_t total = 0;
    for (int i = 0; i < e->nparams; i++) total += e->params[i]->numel;
    ZLOG_INFO(&e->log,
              "built: %lld parameters in %d tensors, %d modules; flat buffer %lld elements, shard %lld per rank; "
              "optimizer state %.1f MiB per rank",
              (long long)total, e->nparams, e->nmodules, (long long)e->part.padded, (long long)e->part.shard,
              3.0 * (double)e->bytes_state / 1048576.0);
    return ZINC_OK;
fail : {
    const char *msg = zinc_last_error();
    size_t n = strcspn(msg, "\n");
    snprintf(e->build_failed, sizeof e->build_failed, "%.*s", (int)(n < 400 ? n : 400), msg);
    return st;
}
}

zinc_status zinc_build(zinc_engine *e, zinc_init_fn init_fn, void *userdata) {
    return build(e, init_fn, NULL, userdata, "zinc_build"); /* init_fn NULL: every weight 0 (init_params) */
}

zinc_status zinc_build_ranged(zinc_engine *e, zinc_init_range_fn init_fn, void *userdata) {
    if (!init_fn) return ZERR(ZINC_ERR_INVALID_ARG, "zinc_build_ranged: init_fn is required");
    return build(e, NULL, init_fn, userdata, "zinc_build_ranged");
}

/* ---------------------------------------------------------------- training entry points */

static zinc_status check_module(zinc_engine *e, int module, int phase, const char *fn) {
    if (!e) return ZERR(ZINC_ERR_INVALID_ARG, "%s: engine is NULL", fn);
    zinc_status built = zengine_require_built(e, fn);
    if (built != ZINC_OK) return built;
    if (module < 0 || module >= e->nmodules)
        return ZERR(ZINC_ERR_INVALID_ARG, "%s: module %d does not exist (%d modules)", fn, module, e->nmodules);
    if (phase != ZINC_FORWARD && phase != ZINC_BACKWARD)
        return ZERR(ZINC_ERR_INVALID_ARG, "%s: phase %d is neither ZINC_FORWARD nor ZINC_BACKWARD", fn, phase);
    return ZINC_OK;
}

/* Points the module's parameters at their gradients (grads: the module's first element), or at none. */
static void point_grads(zinc_engine *e, const zmodule *m, void *grads) {
    size_t gsz = zinc_dtype_size(e->grad_dtype);
    for (int i = 0; i < m->nparams; i++) {
        zinc_param *p = e->params[m->first_param + i];
        p->grad = grads ? (char *)grads + (size_t)(p->flat_offset - m->flat_begin) * gsz : NULL;
    }
}

static const char *phase_name(int phase) { return phase == ZINC_FORWARD ? "forward" : "backward"; }

zinc_status zinc_module_enter(zinc_engine *e, int module, zinc_phase phase) {
    zinc_status st = check_module(e, module, (int)phase, "zinc_module_enter");
    if (st != ZINC_OK) return st;
    if ((st = zengine_check_usable(e, "zinc_module_enter")) != ZINC_OK) return st;
    if (ztrace_active() && e->trace) ztrace_step_begin(); /* the step's spans begin with its first module */
    zmodule *m = &e->modules[module];
    if (m->in_phase[phase])
        return ZERR(ZINC_ERR_STATE,
                    "zinc_module_enter: module \"%s\" is already in %s (missing zinc_module_exit); a module is "
                    "entered again only after it exits (nesting other modules inside it is fine)",
                    m->name, phase_name(phase));
    /* A forward after a completed backward begins the next micro-step: finish this one's reductions. A
     * forward inside an open backward is a recomputation (activation checkpointing), not a new micro-step. */
    bool new_micro_step = phase == ZINC_FORWARD && e->last_phase == ZINC_BACKWARD && e->open_backward == 0;
    if (new_micro_step) {
        int64_t w0 = zengine_wc_now(e);
        TRY(zgrads_flush(&e->grads));
        zengine_wc_reduced(e, w0);
        zengine_wc_micro_end(e);
        e->in_backward_pass = false;
    }
    zengine_wc_module_enter(e, (int)phase);
    if (phase == ZINC_BACKWARD && !e->in_backward_pass) {
        e->in_backward_pass = true;
        e->micro_steps++;
    }
    if (m->nparams > 0) { /* a module without parameters only marks the micro-step's phases */
        if (e->stage == 3) TRY(zgather_module_enter(&e->gather, module, (int)phase, new_micro_step));
        if (e->stage == 3) zengine_params_guess_ahead(e, module, (int)phase);
        if (phase == ZINC_BACKWARD) {
            void *grads = NULL;
            TRY(zgrads_module_backward_enter(&e->grads, module, &grads));
            point_grads(e, m, grads);
        }
    }
    m->in_phase[phase] = true;
    if (phase == ZINC_BACKWARD) e->open_backward++;
    e->last_phase = (int)phase;
    zengine_state_ahead(e); /* after the module's own swap-ins: the optimizer state's reads behind them */
    if (ztrace_active() && e->trace) zengine_trace_module_enter(e, module, (int)phase);
    return ZINC_OK;
fail:
    return st;
}

zinc_status zinc_module_exit(zinc_engine *e, int module, zinc_phase phase) {
    zinc_status st = check_module(e, module, (int)phase, "zinc_module_exit");
    if (st != ZINC_OK) return st;
    zmodule *m = &e->modules[module];
    if (!m->in_phase[phase])
        return ZERR(ZINC_ERR_STATE, "zinc_module_exit: module \"%s\" was not entered for %s", m->name,
                    phase_name(phase));
    int64_t span_t0 = ztrace_active() && e->trace ? zengine_trace_module_exit(e, module, (int)phase) : 0;
    m->in_phase[phase] = false;
    if (phase == ZINC_BACKWARD) e->open_backward--;
    if (m->nparams > 0 && phase == ZINC_BACKWARD) {
        point_grads(e, m, NULL);
        int64_t w0 = zengine_wc_now(e);
        e->grads.trace_producer_t0 = span_t0; /* the trace's arrows to the buckets issued from now on */
        TRY(zgrads_module_backward_exit(&e->grads, module, e->open_backward == 0));
        zengine_wc_reduced(e, w0);
    }
    if (m->nparams > 0 && e->stage == 3) TRY(zgather_module_exit(&e->gather, module, (int)phase));
    zengine_state_ahead(e);
    zengine_wc_module_exit(e, (int)phase);
    return ZINC_OK;
fail:
    return st;
}

zinc_status zinc_step(zinc_engine *e, zinc_step_info *info) {
    if (!e) return ZERR(ZINC_ERR_INVALID_ARG, "zinc_step: engine is NULL");
    zinc_status built = zengine_require_built(e, "zinc_step");
    if (built != ZINC_OK) return built;
    zinc_status usable = zengine_check_usable(e, "zinc_step");
    if (usable != ZINC_OK) return usable;
    if (zengine_in_parallel_body())
        return ZERR(ZINC_ERR_STATE, "zinc_step: called from inside a zinc_parallel_for body; the step is collective "
                                    "and uses the same threads: call it after zinc_parallel_for returns");
    for (int m = 0; m < e->nmodules; m++)
        if (e->modules[m].in_phase[0] || e->modules[m].in_phase[1])
            return ZERR(ZINC_ERR_STATE, "zinc_step: module \"%s\" is still entered (%s); exit it first",
                        e->modules[m].name, e->modules[m].in_phase[0] ? "forward" : "backward");
    if (e->micro_steps == 0)
        return ZERR(ZINC_ERR_STATE,
                    "zinc_step: no backward pass since the last step (no module was entered for backward), so there "
                    "is no gradient to apply; run forward and backward (zinc_module_enter(..., ZINC_BACKWARD)) "
                    "before each step");
    /* A decoupled checkpoint in flight: every rank asks whether all writers are done (one small collective per
     * step while one is); when they are, it is published here, and a writer's failure fails this step. */
    if (e->ckpt_async && e->ckpt_async_poll) {
        zinc_status polled = e->ckpt_async_poll(e, false);
        if (polled != ZINC_OK) return polled;
    }
    zinc_step_info tmp;
    zengine_observers_step_begin(e);
    zinc_status st = zengine_step(e, info ? info : &tmp);
    return zengine_observers_step_end(e, info ? info : &tmp, st); /* engine_observe.c */
}

/* ---------------------------------------------------------------- accessors */

/* Accessors: a NULL engine is a caller's bug, answered the same way by each (include/zinc.h, Conventions). */
#define ACCESS(type, name, none, expr)                                                                                 \
    type name(const zinc_engine *e) {                                                                                  \
        if (!e) {                                                                                                      \
            ZERR(ZINC_ERR_INVALID_ARG, #name ": NULL engine");                                                         \
            return none;                                                                                               \
        }                                                                                                              \
        return expr;                                                                                                   \
    }
ACCESS(zinc_dtype, zinc_compute_dtype, ZINC_FP32, e->compute_dtype)
ACCESS(zinc_dtype, zinc_grad_dtype, ZINC_FP32, e->grad_dtype)
ACCESS(float, zinc_loss_scale, 0.0f, (float)e->scaler.cur_scale)
ACCESS(int, zinc_rank, -1, e->rank)
ACCESS(int, zinc_world_size, -1, e->world)
ACCESS(int, zinc_zero_stage, -1, e->stage)
ACCESS(int64_t, zinc_micro_batch_size, -1, e->cfg.train_micro_batch_size_per_gpu)
ACCESS(int64_t, zinc_grad_accum_steps, -1, e->cfg.gradient_accumulation_steps)
ACCESS(int64_t, zinc_train_batch_size, -1, e->cfg.train_batch_size)
ACCESS(int64_t, zinc_steps_per_print, -1, e->cfg.steps_per_print)
ACCESS(zinc_device_kind, zinc_device, ZINC_DEVICE_AUTO, e->device)
ACCESS(int, zinc_device_host_addressable, -1, e->dev ? e->dev->host_addressable : 0)
ACCESS(void *, zinc_stream, NULL, e->dev ? e->dev->compute_stream : NULL)
#undef ACCESS

void zinc_log(const zinc_engine *e, zinc_log_level level, const char *fmt, ...) {
    if (!e || !e->log.fn || level < e->log.level) return;
    char buf[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    e->log.fn(e->log.userdata, level, e->rank, buf);
}

zinc_status zinc_copy_to_host(zinc_engine *e, void *host_dst, const void *src, size_t bytes) {
    if (!e || !e->dev || ((!host_dst || !src) && bytes))
        return ZERR(ZINC_ERR_INVALID_ARG, "zinc_copy_to_host: NULL argument");
    return bytes ? e->dev->ops->copy(e->dev, host_dst, src, bytes, ZDEV_D2H) : ZINC_OK;
}

zinc_status zinc_copy_from_host(zinc_engine *e, void *dst, const void *host_src, size_t bytes) {
    if (!e || !e->dev || ((!dst || !host_src) && bytes))
        return ZERR(ZINC_ERR_INVALID_ARG, "zinc_copy_from_host: NULL argument");
    return bytes ? e->dev->ops->copy(e->dev, dst, host_src, bytes, ZDEV_H2D) : ZINC_OK;
}
