/* zinc mem estimate | measure: per-rank memory by category and memory kind, predicted by the estimator
 * (runtime/mem/mem_estimate.h) and measured from the engine's accounting, with DeepSpeed's own estimators
 * beside them (docs/mem.md). */
#include <stdarg.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/mem_whole.h"
#include "cli/commands.h"
#include "cli/mem_cli.h"
#include "cli/mem_plot.h"

/* ---------------------------------------------------------------- configs */

/* The config as JSON text with the overrides applied: a micro-batch of 1 (batch sizes do not change
 * memory, and any rank count fits), the stage and the optimizer offload, offload_param dropped below
 * stage 3, and an NVMe path placeholder where none is written. */
char *mc_config_text(json_t *base, int stage, const char *offload) {
    json_t *j = json_deep_copy(base);
    if (!j) return NULL;
    json_t *gas = json_object_get(j, "gradient_accumulation_steps");
    json_int_t g = json_is_integer(gas) ? json_integer_value(gas)
                   : json_is_real(gas)  ? (json_int_t)json_real_value(gas)
                                        : 1;
    json_object_del(j, "train_batch_size");
    json_object_set_new(j, "train_micro_batch_size_per_gpu", json_integer(1));
    json_object_set_new(j, "gradient_accumulation_steps", json_integer(g > 0 ? g : 1));
    json_t *z = json_object_get(j, "zero_optimization");
    if (!json_is_object(z)) {
        z = json_object();
        json_object_set_new(j, "zero_optimization", z);
    }
    if (stage >= 0) json_object_set_new(z, "stage", json_integer(stage));
    json_t *st = json_object_get(z, "stage");
    int eff = json_is_integer(st) ? (int)json_integer_value(st) : 0;
    if (eff < 3) json_object_del(z, "offload_param");
    if (offload) {
        json_t *oo = json_object_get(z, "offload_optimizer");
        if (!json_is_object(oo)) {
            oo = json_object();
            json_object_set_new(z, "offload_optimizer", oo);
        }
        json_object_set_new(oo, "device", json_string(offload));
        if (!strcmp(offload, "nvme") && !json_is_string(json_object_get(oo, "nvme_path")))
            json_object_set_new(oo, "nvme_path", json_string("/tmp"));
    }
    char *s = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    return s;
}

static void log_to_stderr(void *u, zinc_log_level l, int rank, const char *msg) {
    (void)u;
    if (rank == 0) fprintf(stderr, "zinc mem: %s%s\n", l >= ZINC_LOG_WARN ? "warning: " : "", msg);
}

/* Loads a variant; quiet for the table (problems are reported for the main config only). */
zinc_status mc_load_variant(json_t *base, const char *origin, int stage, const char *offload, int world, bool quiet,
                            zinc_config *cfg) {
    char *text = mc_config_text(base, stage, offload);
    if (!text) return ZINC_ERR_NOMEM;
    zlog log = {.fn = quiet ? NULL : log_to_stderr, .level = ZINC_LOG_WARN};
    /* the schedule's length changes no byte: an "auto" total_num_steps needs no --steps here */
    zcfg_load_opts lo = {.run_steps = 1,
                         .run_steps_from = "a placeholder (the schedule length does not change memory)"};
    zinc_status st = zcfg_load_text_ex(text, origin, world, &lo, &log, cfg);
    free(text);
    return st;
}

/* ---------------------------------------------------------------- estimate */

typedef struct variant {
    int stage;
    zcfg_offload_device off;
    bool valid;
    char why[160];
    zest_estimate est;
    zest_ds_estimate ds;
} variant;

static void print_matrix(const zest_estimate *e, bool exact) {
    char lab[64], v[32];
    printf("%-32s", "category");
    for (int k = 0; k < ZINC_MEMKIND_COUNT; k++) printf(" %12s", mc_kind_title(k));
    printf(" %12s\n", "total");
    for (int c = 0; c < ZINC_MEM_CATEGORY_COUNT; c++) {
        uint64_t row = 0;
        for (int k = 0; k < ZINC_MEMKIND_COUNT; k++) row += e->bytes[k][c];
        mc_cat_label(e, c, lab, sizeof lab);
        printf("%-32s", lab);
        for (int k = 0; k < ZINC_MEMKIND_COUNT; k++) {
            mc_human(v, sizeof v, e->bytes[k][c], exact);
            printf(" %12s", v);
        }
        mc_human(v, sizeof v, row, exact);
        printf(" %12s\n", v);
    }
    uint64_t all = 0;
    printf("%-32s", "total");
    for (int k = 0; k < ZINC_MEMKIND_COUNT; k++) {
        mc_human(v, sizeof v, e->total[k], exact);
        printf(" %12s", v);
        all += e->total[k];
    }
    mc_human(v, sizeof v, all, exact);
    printf(" %12s\n", v);
}

static void print_notes(const zest_estimate *e, const mopts *o) {
    char a[32], b[32], n1[32], n2[32], n3[32];
    zinc_mem_kind ck = e->device == ZINC_DEVICE_CUDA ? ZINC_MEMKIND_DEVICE : ZINC_MEMKIND_HOST;
    if (e->nbuckets) {
        mc_prose(a, sizeof a, e->bytes[ck][ZINC_MEM_BUCKETS], o->exact);
        printf("  buckets: %d x %s elements (reduce_bucket_size%s%s)%s = %s\n", e->nbuckets,
               mc_commas(e->bucket_cap, n1, sizeof n1),
               e->bucket_cap == e->padded ? ", capped at the whole buffer" : "",
               e->nbuckets > 1 ? "; two with overlap_comm" : "",
               e->bytes_landing ? " + a landing buffer for modules larger than a bucket" : "", a);
    }
    if (e->stage == 3)
        printf("  gather: at most %s elements of the %d non-persistent modules gathered at once (modules entered in "
               "order, forward then backward; a module's own gather ignores stage3_max_live_parameters, and "
               "stage3_max_reuse_distance keeps modules that return soon); %d persistent module%s (%s elements) stay "
               "gathered, counted under params\n",
               mc_commas(e->gather_peak_numel, n1, sizeof n1), e->nmodules - e->npersistent, e->npersistent,
               e->npersistent == 1 ? "" : "s", mc_commas(e->persistent_numel, n2, sizeof n2));
    if (e->offload == ZOFFLOAD_NVME) {
        mc_prose(a, sizeof a, e->nvme_swap_each, o->exact);
        mc_prose(b, sizeof b, e->nvme_swap_each * (uint64_t)e->nvme_swap_buffers, o->exact);
        bool three = e->state_tensors > 2;
        printf("  nvme: %s; %d swap buffer%s of one %s-element chunk of each (%s each) = %s, pinned when io_uring "
               "registers them (host memory otherwise); a smaller sub_group_size shrinks them\n",
               three ? "3 files (master, m, v)" : "2 files (master, m: Lion keeps no v)", e->nvme_swap_buffers,
               e->nvme_swap_buffers == 1 ? "" : "s", mc_commas(e->state_chunk, n1, sizeof n1), a, b);
    }
    printf("  layout: %s parameters, flat buffer %s elements (tensors aligned to 8), shard %s per rank (aligned to "
           "64)\n",
           mc_commas(e->numel, n1, sizeof n1), mc_commas(e->flat_numel, n2, sizeof n2),
           mc_commas(e->shard, n3, sizeof n3));
    char sc[32], mt[32];
    mc_prose(sc, sizeof sc, e->init_scratch, o->exact);
    mc_prose(mt, sizeof mt, e->comm_temp, o->exact);
    printf("  transients (in the process's peak, not in the rows): %s of initialisation scratch at zinc_build_ranged "
           "(zinc_build with a whole-tensor init_fn: the largest tensor in fp32, or none in place), %s of MPI "
           "temporaries (%d piece%s of %" PRId64 " elements)\n",
           sc, mt, e->comm_pending, e->comm_pending == 1 ? "" : "s", e->comm_piece);
    printf("  not counted: activations and the model's own buffers, NCCL internals, allocator overhead\n");
    if (e->device == ZINC_DEVICE_CUDA)
        printf("  GPU: the engine's allocations on the device, with zinc's pinned staging; not the CUDA context or the "
               "CUDA runtime's own scratch. zinc's CUDA backend has not yet run on a GPU: these bytes are checked "
               "against an emulated discrete device on the CPU (ZINC_CPU_DISCRETE=1), not against cudaMemGetInfo\n");
}

static const char *ds_short(const zest_ds_estimate *d) {
    return !d->available ? "" : strstr(d->function, "zero2") ? "zero2" : "zero3";
}

static void print_variants(const variant *v, int nv, const mopts *o, int nodes, int gpn) {
    char s[5][32];
    printf("\nEvery stage and offload choice, per rank (DeepSpeed: GPU per GPU, CPU per node of %d GPU%s):\n", gpn,
           gpn == 1 ? "" : "s");
    printf("%-5s %-7s %12s %12s %12s %12s | %-6s %12s %14s\n", "stage", "offload", "GPU", "host", "pinned", "NVMe",
           "DS fn", "DS GPU", "DS CPU/node");
    for (int i = 0; i < nv; i++) {
        const variant *x = &v[i];
        if (!x->valid) {
            printf("%-5d %-7s  %s\n", x->stage, mc_offload_name(x->off), x->why);
            continue;
        }
        for (int k = 0; k < 4; k++) mc_human(s[k], sizeof s[k], x->est.total[k], o->exact);
        printf("%-5d %-7s %12s %12s %12s %12s | ", x->stage, mc_offload_name(x->off), s[0], s[1], s[2], s[3]);
        if (!x->ds.available) {
            printf("%s\n", x->stage == 0 ? "none (DeepSpeed has no stage-0 estimator)"
                                         : "none (DeepSpeed's estimators have no NVMe case)");
            continue;
        }
        mc_human(s[0], sizeof s[0], x->ds.gpu_bytes, o->exact);
        mc_human(s[1], sizeof s[1], x->ds.cpu_bytes, o->exact);
        printf("%-6s %12s %14s%s\n", ds_short(&x->ds), s[0], s[1],
               x->stage == 3   ? " (zero_init)"
               : x->stage == 1 ? " (ZeRO-2 formula)"
                               : "");
    }
    (void)nodes;
}

/* Why zinc's numbers differ from DeepSpeed's for the chosen config. */
/* One difference from DeepSpeed's estimate: a topic and a sentence. */
static void why_add(json_t *arr, const char *topic, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void why_add(json_t *arr, const char *topic, const char *fmt, ...) {
    char text[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    json_array_append_new(arr, json_pack("{s:s, s:s}", "topic", topic, "text", text));
}

/* Why zinc's numbers differ from DeepSpeed's for one variant, as a list every output format carries. */
/* The differences in where the state lives: offload, the mask and scratch, the host, the padding. */
static void why_placement(json_t *w, const variant *v, const mopts *o, int gpn, bool off_param) {
    const zest_estimate *e = &v->est;
    char a[32], b[32];
    zinc_mem_kind ck = e->device == ZINC_DEVICE_CUDA ? ZINC_MEMKIND_DEVICE : ZINC_MEMKIND_HOST;
    if (e->offload != ZOFFLOAD_NONE)
        why_add(w, "offload",
                "Offload: DeepSpeed's GPU figure keeps fp16 parameters (2 bytes per parameter%s) on the GPU; zinc "
                "also keeps its gradient shard and buckets there and puts only master, m and v in host "
                "memory.",
                e->stage == 3 ? " per rank" : "");
    if (off_param)
        why_add(w, "offload_param",
                e->stage == 3
                    ? "offload_param: DeepSpeed's ZeRO-3 estimator moves the parameters to the CPU; zinc keeps them on "
                      "the GPU (it does not offload parameters), so its GPU figure does not shrink."
                    : "offload_param has no effect below stage 3 (DeepSpeed applies it only to ZeRO-3; zinc drops it), "
                      "so neither figure changes.");
    mc_prose(a, sizeof a, e->bytes[ck][ZINC_MEM_OTHER], o->exact);
    mc_prose(b, sizeof b, e->bytes[ck][ZINC_MEM_STAGING], o->exact);
    why_add(w, "mask_scratch",
            "Mask and scratch: zinc counts its weight-decay mask (%s, one byte per 8 own elements)%s%s; DeepSpeed "
            "counts "
            "neither.",
            a, e->bytes[ck][ZINC_MEM_STAGING] ? " and its device scratch and staging " : "",
            e->bytes[ck][ZINC_MEM_STAGING] ? b : "");
    mc_prose(a, sizeof a, v->ds.cpu_bytes, o->exact);
    uint64_t host = e->total[ZINC_MEMKIND_HOST] + e->total[ZINC_MEMKIND_PINNED];
    mc_prose(b, sizeof b, host * (uint64_t)gpn, o->exact);
    why_add(w, "host",
            "Host: DeepSpeed's CPU figure (%s per node%s) is mostly the model each rank loads before partitioning, "
            "times additional_buffer_factor 1.5%s; zinc builds the parameters in place and counts what stays: "
            "%s per node of %d rank%s%s.",
            a, e->stage == 3 ? ", with zero_init" : "",
            e->offload != ZOFFLOAD_NONE ? ", plus the offloaded optimizer state" : "", b, gpn, gpn == 1 ? "" : "s",
            e->offload == ZOFFLOAD_CPU    ? " (master, m and v in host memory)"
            : e->offload == ZOFFLOAD_NVME ? " (the NVMe swap buffers)"
                                          : "");
    why_add(w, "padding",
            "Padding: zinc aligns every tensor to 8 elements and every shard to 64; DeepSpeed divides P by G "
            "exactly. Neither estimator counts activations.");
}

static json_t *why_list(const variant *v, const mopts *o, int64_t P, int64_t L, int G, int gpn, bool off_param) {
    json_t *w = json_array();
    const zest_estimate *e = &v->est;
    char a[32], b[32], c[32], n1[32], n2[32];
    if (!v->valid) return w;
    if (!v->ds.available) {
        why_add(w, "no_estimator", "DeepSpeed has no estimator for %s; zinc's numbers are the only ones.",
                e->stage == 0 ? "stage 0" : "NVMe offload");
        return w;
    }
    zinc_mem_kind ck = e->device == ZINC_DEVICE_CUDA ? ZINC_MEMKIND_DEVICE : ZINC_MEMKIND_HOST;
    mc_prose(a, sizeof a, v->ds.gpu_bytes, o->exact);
    mc_prose(b, sizeof b, e->total[ck], o->exact);
    why_add(w, "totals", "DeepSpeed says %s per GPU (%s), zinc %s per rank on the %s, for P = %s, L = %s, G = %d.", a,
            v->ds.function, b, ck == ZINC_MEMKIND_DEVICE ? "GPU" : "host (--device cpu)", mc_commas(P, n1, sizeof n1),
            mc_commas(L, n2, sizeof n2), G);
    mc_prose(a, sizeof a, e->bytes[ck][ZINC_MEM_BUCKETS], o->exact);
    why_add(w, "buckets",
            "Buckets: DeepSpeed leaves out its reduce/ipg buckets; zinc counts its %d x %s-element bucket%s: %s.",
            e->nbuckets, mc_commas(e->bucket_cap, n1, sizeof n1), e->nbuckets == 1 ? "" : "s", a);
    if (e->compute_dtype == ZINC_FP32 || e->grad_dtype == ZINC_FP32)
        why_add(w, "dtype",
                "Dtypes: DeepSpeed's formulas count 2 bytes per parameter and gradient (fp16) whatever the config; "
                "this config keeps %s parameters and %s gradients (%zu and %zu bytes).",
                zinc_dtype_name(e->compute_dtype), zinc_dtype_name(e->grad_dtype), zinc_dtype_size(e->compute_dtype),
                zinc_dtype_size(e->grad_dtype));
    if (e->stage <= 2 && e->offload == ZOFFLOAD_NONE)
        why_add(w, "gradients",
                "Gradients: DeepSpeed's 18 bytes per partitioned parameter are 2 (fp16 grads) + 4 (fp32 grads) + 4 "
                "(fp32 params) + 8 (m, v); zinc keeps %s gradients and %d bytes of optimizer state per own "
                "element%s.",
                e->stage == 2 ? "only the 4-byte fp32 shard of the"
                              : "the full compute-dtype buffer and the fp32 shard of the",
                4 * e->state_tensors, e->state_tensors > 2 ? "" : " (Lion: master and m, no v)");
    if (e->stage == 1 && e->offload != ZOFFLOAD_NONE) {
        mc_prose(a, sizeof a, e->bytes[ck][ZINC_MEM_GRADS], o->exact);
        why_add(w, "stage1_offload_grads",
                "Stage 1 with offload: DeepSpeed's ZeRO-2 formula partitions the gradients; "
                "zinc's stage 1 keeps the whole %s gradient buffer and the fp32 shard on the "
                "GPU (%s), since only stage 2 shards gradients.",
                zinc_dtype_name(e->grad_dtype), a);
    }
    if (e->stage == 3) {
        mc_prose(a, sizeof a, (uint64_t)(4 * L), o->exact);
        mc_prose(b, sizeof b, e->bytes[ck][ZINC_MEM_GATHER], o->exact);
        mc_prose(c, sizeof c, (uint64_t)e->persistent_numel * zinc_dtype_size(e->compute_dtype), o->exact);
        why_add(w, "gather",
                "Gathered parameters: DeepSpeed allows 4L = %s (the largest layer's fp16 parameters and gradients); "
                "zinc's gather "
                "schedule peaks at %s, plus %s of persistent modules, because modules reused within "
                "stage3_max_reuse_distance stay gathered and prefetch runs ahead.",
                a, b, c);
    }
    why_placement(w, v, o, gpn, off_param);
    return w;
}

static void print_why(const variant *v, const mopts *o, int64_t P, int64_t L, int G, int gpn, bool off_param) {
    printf("\nWhy DeepSpeed's estimate differs (its estimate_zero2/3_model_states_mem_needs, DeepSpeed 0.19; "
           "docs/mem.md):\n");
    json_t *w = why_list(v, o, P, L, G, gpn, off_param);
    size_t i;
    json_t *x;
    json_array_foreach(w, i, x) printf("  - %s\n", json_string_value(json_object_get(x, "text")));
    json_decref(w);
}

/* A CSV field: quoted, inner quotes doubled. */
static void csv_text(const char *t) {
    putchar('"');
    for (; *t; t++) {
        if (*t == '"') putchar('"');
        putchar(*t);
    }
    putchar('"');
}

static int plot(const mopts *o, json_t *base, const char *origin, const zplan_model *md, const char *md_desc,
                int world) {
    char dat[4200], gp[4200], sub[1200];
    if (zcli_plot_check_name("zinc mem", o->plot)) return -1;
    snprintf(dat, sizeof dat, "%s.dat", o->plot);
    snprintf(gp, sizeof gp, "%s.gp", o->plot);
    zfile_out od;
    FILE *f = zcli_plot_open("zinc mem", dat, o->config, &od);
    if (!f) return -1;
    int xs[64], nx = 0, maxr = world > 64 ? world : 64;
    for (int r = 1; r <= maxr && nx < 60; r *= 2) xs[nx++] = r;
    if (world > 1 && (world & (world - 1))) xs[nx++] = world; /* the asked-for rank count too */
    for (int i = 1; i < nx; i++)                              /* sorted */
        for (int j = i; j > 0 && xs[j] < xs[j - 1]; j--) {
            int t = xs[j];
            xs[j] = xs[j - 1];
            xs[j - 1] = t;
        }
    zinc_mem_kind ck = o->device == ZINC_DEVICE_CUDA ? ZINC_MEMKIND_DEVICE : ZINC_MEMKIND_HOST;
    double unit = o->units_gb ? 1e9 : 1073741824.0;
    fprintf(f, "# ranks  stage0 stage1 stage2 stage3 (%s per rank, %s memory%s)\n", o->units_gb ? "GB" : "GiB",
            mc_kind_title(ck), ck == ZINC_MEMKIND_HOST ? " incl. pinned" : "");
    for (int i = 0; i < nx; i++) {
        fprintf(f, "%d", xs[i]);
        for (int s = 0; s <= 3; s++) {
            zinc_config cfg;
            zest_estimate e;
            const char *off = s == 0 ? "none" : o->offload;
            if (mc_load_variant(base, origin, s, off, xs[i], true, &cfg) != ZINC_OK ||
                zest_compute(md, &cfg, xs[i], 0, o->device, &e) != ZINC_OK) {
                fprintf(f, " NaN");
                continue;
            }
            uint64_t y = e.total[ck] + (ck == ZINC_MEMKIND_HOST ? e.total[ZINC_MEMKIND_PINNED] : 0);
            fprintf(f, " %.6g", (double)y / unit);
        }
        fprintf(f, "\n");
    }
    if (zcli_plot_close("zinc mem", f, &od) != 0) return -1;
    char title[128], ylabel[64];
    snprintf(title, sizeof title, "zinc mem estimate: %s bytes per rank against rank count", mc_kind_title(ck));
    snprintf(sub, sizeof sub, "%s; %s; offload %s", md_desc, origin, o->offload ? o->offload : "as configured");
    snprintf(ylabel, sizeof ylabel, "%s per rank", o->units_gb ? "GB" : "GiB");
    zcli_plot p = {.out = o->plot,
                   .dat = dat,
                   .script = gp,
                   .title = title,
                   .subtitle = sub,
                   .xlabel = "ranks",
                   .ylabel = ylabel,
                   .unit = o->units_gb ? "GB" : "GiB",
                   .capacity = ck == ZINC_MEMKIND_DEVICE ? (double)o->gpu_mem / unit : 0,
                   .input = o->config};
    return zcli_plot_render("zinc mem", &p);
}

static json_t *est_json(const zest_estimate *e) {
    json_t *j = json_object(), *by = json_object();
    for (int k = 0; k < ZINC_MEMKIND_COUNT; k++) {
        json_t *row = json_object();
        for (int c = 0; c < ZINC_MEM_CATEGORY_COUNT; c++)
            json_object_set_new(row, zinc_mem_category_name((zinc_mem_category)c),
                                json_integer((json_int_t)e->bytes[k][c]));
        json_object_set_new(row, "total", json_integer((json_int_t)e->total[k]));
        json_object_set_new(by, zinc_mem_kind_name((zinc_mem_kind)k), row);
    }
    json_object_set_new(j, "stage", json_integer(e->stage));
    json_object_set_new(j, "offload_optimizer", json_string(mc_offload_name(e->offload)));
    json_object_set_new(j, "world", json_integer(e->world));
    json_object_set_new(j, "device", json_string(e->device == ZINC_DEVICE_CUDA ? "cuda" : "cpu"));
    json_object_set_new(j, "compute_dtype", json_string(zinc_dtype_name(e->compute_dtype)));
    json_object_set_new(j, "grad_dtype", json_string(zinc_dtype_name(e->grad_dtype)));
    json_object_set_new(j, "comm_dtype", json_string(zinc_dtype_name(e->comm_dtype)));
    json_object_set_new(j, "shard_elements", json_integer(e->shard));
    json_object_set_new(j, "padded_elements", json_integer(e->padded));
    json_object_set_new(j, "buckets", json_integer(e->nbuckets));
    json_object_set_new(j, "bucket_elements", json_integer(e->bucket_cap));
    json_object_set_new(j, "gather_peak_elements", json_integer(e->gather_peak_numel));
    json_object_set_new(j, "persistent_modules", json_integer(e->npersistent));
    json_object_set_new(j, "persistent_elements", json_integer(e->persistent_numel));
    json_object_set_new(j, "bytes", by);
    return j;
}

static json_t *ds_json(const zest_ds_estimate *d) {
    if (!d->available) return json_null();
    return json_pack("{s:s, s:I, s:I, s:I}", "function", d->function, "gpu_bytes_per_gpu", (json_int_t)d->gpu_bytes,
                     "cpu_bytes_per_node", (json_int_t)d->cpu_bytes, "cpu_bytes_per_node_no_zero_init",
                     (json_int_t)d->cpu_bytes_no_zero_init);
}

int mc_load_base(const mopts *o, json_t **base) {
    json_error_t err;
    *base = o->config ? json_load_file(o->config, 0, &err) : json_object();
    if (!*base) {
        fprintf(stderr, "zinc mem: %s:%d:%d: %s\n", o->config, err.line, err.column, err.text);
        return -1;
    }
    if (!json_is_object(*base)) {
        fprintf(stderr, "zinc mem: %s: the ds_config must be a JSON object\n", o->config);
        json_decref(*base);
        return -1;
    }
    return 0;
}

static int64_t largest_module(const mmodel *m) {
    int64_t best = 0, cur = 0;
    for (int i = 0; i < m->n; i++) {
        cur = (i > 0 && m->p[i].module == m->p[i - 1].module) ? cur + m->p[i].numel : m->p[i].numel;
        if (cur > best) best = cur;
    }
    return best;
}

/* One estimate: the model, the config and its ranks, the main variant and every stage x offload variant. */
typedef struct est_run {
    const mopts *o;
    const mmodel *m;
    json_t *base;
    const char *origin;
    int64_t *numel;
    int *module;
    zplan_model md;
    zinc_config cfg;
    int nodes, gpn, G;
    int64_t P, L;
    bool off_param;
    variant main_v, vars[16];
    int nv;
} est_run;

static int est_load(est_run *r) {
    const mopts *o = r->o;
    if (mc_load_base(o, &r->base) || mc_model_arrays(r->m, &r->numel, &r->module)) return -1;
    r->md = (zplan_model){.nparams = r->m->n, .numel = r->numel, .module = r->module};
    if (mc_load_variant(r->base, r->origin, (int)o->stage, o->offload, r->G, false, &r->cfg) != ZINC_OK) {
        fprintf(stderr, "zinc mem: %s\n", zinc_last_error());
        return -1;
    }
    r->P = mc_model_total(r->m), r->L = largest_module(r->m);
    variant *v = &r->main_v;
    *v = (variant){.stage = r->cfg.zero.stage, .off = r->cfg.zero.offload_optimizer.device, .valid = true};
    if (zest_compute(&r->md, &r->cfg, r->G, 0, o->device, &v->est) != ZINC_OK) {
        fprintf(stderr, "zinc mem: %s\n", zinc_last_error());
        return -1;
    }
    r->off_param = r->cfg.zero.offload_param.device != ZOFFLOAD_NONE;
    zest_deepspeed(v->stage, v->off, r->off_param, r->P, r->L, r->nodes, r->gpn, 1.5, &v->ds);
    return 0;
}

/* Every stage and offload choice, each valid or with why not. */
static void est_variants(est_run *r) {
    static const zcfg_offload_device offs[] = {ZOFFLOAD_NONE, ZOFFLOAD_CPU, ZOFFLOAD_NVME};
    for (int s = 0; s <= 3; s++)
        for (int k = 0; k < 3; k++) {
            variant *x = &r->vars[r->nv++];
            *x = (variant){.stage = s, .off = offs[k]};
            zinc_config vc;
            if (s == 0 && k > 0) {
                snprintf(x->why, sizeof x->why, "not a valid combination: offload needs stage 1, 2 or 3");
                continue;
            }
            if (mc_load_variant(r->base, r->origin, s, mc_offload_name(offs[k]), r->G, true, &vc) != ZINC_OK) {
                snprintf(x->why, sizeof x->why, "config refused: %.120s", zinc_last_error());
                continue;
            }
            if (zest_compute(&r->md, &vc, r->G, 0, r->o->device, &x->est) != ZINC_OK) {
                snprintf(x->why, sizeof x->why, "%.150s", zinc_last_error());
                continue;
            }
            x->valid = true;
            zest_deepspeed(s, offs[k], s == 3 && r->off_param, r->P, r->L, r->nodes, r->gpn, 1.5, &x->ds);
        }
}

static json_t *est_why(const est_run *r, const variant *v) {
    return why_list(v, r->o, r->P, r->L, r->G, r->gpn, v == &r->main_v ? r->off_param : v->stage == 3 && r->off_param);
}

static void est_print_json(const est_run *r) {
    json_t *j = json_object(), *tab = json_array();
    json_object_set_new(j, "command", json_string("estimate"));
    json_object_set_new(j, "model",
                        json_pack("{s:s, s:I, s:i, s:i, s:I}", "description", r->m->desc, "parameters",
                                  (json_int_t)r->P, "tensors", r->m->n, "modules", r->m->nmodules, "largest_module",
                                  (json_int_t)r->L));
    json_object_set_new(j, "config", json_string(r->origin));
    json_object_set_new(j, "nodes", json_integer(r->nodes));
    json_object_set_new(j, "gpus_per_node", json_integer(r->gpn));
    json_object_set_new(j, "estimate", est_json(&r->main_v.est));
    json_object_set_new(j, "deepspeed", ds_json(&r->main_v.ds));
    json_object_set_new(j, "deepspeed_differences", est_why(r, &r->main_v));
    for (int i = 0; i < r->nv; i++) {
        const variant *v = &r->vars[i];
        json_t *row = v->valid ? est_json(&v->est) : json_object();
        json_object_set_new(row, "stage", json_integer(v->stage));
        json_object_set_new(row, "offload_optimizer", json_string(mc_offload_name(v->off)));
        if (!v->valid) json_object_set_new(row, "invalid", json_string(v->why));
        json_object_set_new(row, "deepspeed", ds_json(&v->ds));
        json_object_set_new(row, "deepspeed_differences", est_why(r, v));
        json_array_append_new(tab, row);
    }
    json_object_set_new(j, "variants", tab);
    char *s = json_dumps(j, JSON_INDENT(2));
    if (s) printf("%s\n", s);
    free(s);
    json_decref(j);
}

/* One variant's CSV rows: totals, DeepSpeed's figures, and why they differ (table "why": the topic under
 * category, the sentence in the bytes column). */
static void est_csv_variant(const est_run *r, const variant *v) {
    const char *off = mc_offload_name(v->off);
    for (int k = 0; k < ZINC_MEMKIND_COUNT; k++)
        printf("variant,%d,%s,%s,total,%" PRIu64 "\n", v->stage, off, zinc_mem_kind_name((zinc_mem_kind)k),
               v->est.total[k]);
    if (v->ds.available) {
        printf("deepspeed,%d,%s,gpu_per_gpu,%s,%" PRIu64 "\n", v->stage, off, v->ds.function, v->ds.gpu_bytes);
        printf("deepspeed,%d,%s,cpu_per_node,%s,%" PRIu64 "\n", v->stage, off, v->ds.function, v->ds.cpu_bytes);
    }
    json_t *w = est_why(r, v), *wx;
    size_t wi;
    json_array_foreach(w, wi, wx) {
        printf("why,%d,%s,deepspeed,%s,", v->stage, off, json_string_value(json_object_get(wx, "topic")));
        csv_text(json_string_value(json_object_get(wx, "text")));
        putchar('\n');
    }
    json_decref(w);
}

static void est_print_csv(const est_run *r) {
    const variant *mv = &r->main_v;
    printf("table,stage,offload,kind,category,bytes\n");
    for (int k = 0; k < ZINC_MEMKIND_COUNT; k++)
        for (int c = 0; c < ZINC_MEM_CATEGORY_COUNT; c++)
            printf("estimate,%d,%s,%s,%s,%" PRIu64 "\n", mv->stage, mc_offload_name(mv->off),
                   zinc_mem_kind_name((zinc_mem_kind)k), zinc_mem_category_name((zinc_mem_category)c),
                   mv->est.bytes[k][c]);
    for (int i = 0; i < r->nv; i++)
        if (r->vars[i].valid) est_csv_variant(r, &r->vars[i]);
}

static void est_print_text(const est_run *r) {
    const zest_estimate *e = &r->main_v.est;
    const mopts *o = r->o;
    char n1[32], n2[32];
    printf("model:  %s: %s parameters in %d tensors, %d modules; largest module %s\n", r->m->desc,
           mc_commas(r->P, n1, sizeof n1), r->m->n, r->m->nmodules, mc_commas(r->L, n2, sizeof n2));
    printf("config: %s: ZeRO stage %d, %s parameters, %s gradient accumulation, %s on the wire, "
           "offload_optimizer %s%s\n",
           r->origin, e->stage, zinc_dtype_name(e->compute_dtype), zinc_dtype_name(e->grad_dtype),
           zinc_dtype_name(e->comm_dtype), mc_offload_name(e->offload),
           r->cfg.zero.offload_optimizer.pin_memory && e->offload == ZOFFLOAD_CPU ? " (pin_memory)" : "");
    printf("ranks:  %d node%s x %d GPU%s = %d; estimated for device %s\n\n", r->nodes, r->nodes == 1 ? "" : "s", r->gpn,
           r->gpn == 1 ? "" : "s", r->G, e->device == ZINC_DEVICE_CUDA ? "cuda" : "cpu (where zinc runs today)");
    printf("Per rank, peak bytes:\n");
    print_matrix(e, o->exact);
    print_notes(e, o);
    print_variants(r->vars, r->nv, o, r->nodes, r->gpn);
    print_why(&r->main_v, o, r->P, r->L, r->G, r->gpn, r->off_param);
}

static int cmd_estimate(const mopts *o, mmodel *m) {
    est_run r = {.o = o,
                 .m = m,
                 .origin = o->config ? o->config : "<defaults>",
                 .nodes = (int)o->nodes,
                 .gpn = (int)o->gpn};
    r.G = r.nodes * r.gpn;
    int rc = 1;
    if (est_load(&r)) goto done;
    est_variants(&r);
    if (o->json)
        est_print_json(&r);
    else if (o->csv)
        est_print_csv(&r);
    else
        est_print_text(&r);
    if (o->plot && plot(o, r.base, r.origin, &r.md, m->desc, r.G)) goto done;
    rc = 0;
done:
    json_decref(r.base);
    free(r.numel);
    free(r.module);
    return rc;
}

int zcli_cmd_mem(int argc, char **argv) {
    if (argc < 2 || (strcmp(argv[1], "estimate") && strcmp(argv[1], "measure") && strcmp(argv[1], "plan"))) {
        bool help = argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"));
        mc_usage(help ? stdout : stderr);
        return help ? 0 : 2;
    }
    if (!strcmp(argv[1], "estimate") && zcli_mem_whole_wanted(argc - 1, argv + 1))
        return zcli_mem_whole(argc - 1, argv + 1); /* the whole training process (mem_whole.c) */
    mopts o = {.measure = !strcmp(argv[1], "measure"),
               .nodes = 1,
               .gpn = 1,
               .device = ZINC_DEVICE_CUDA,
               .stage = -1,
               .steps = 3,
               .seed = 1,
               .rss_tol_pct = 5,
               .rss_slack_mib = 4,
               .plan = !strcmp(argv[1], "plan"),
               .max_gpus = 1024};
    if (o.plan) o.gpn = 8;
    int status;
    if (mc_parse_args(argc, argv, &o, &status)) return status;
    if (o.plan && zest_headroom_read(&o.headroom_pct) != ZINC_OK) {
        fprintf(stderr, "zinc mem plan: %s\n", zinc_last_error());
        return 2;
    }
    mmodel m = {0};
    if (mc_build_model(&o, &m)) {
        mc_model_free(&m);
        return 2;
    }
    int rc = o.measure ? mc_cmd_measure(&o, &m) : o.plan ? mc_cmd_plan(&o, &m) : cmd_estimate(&o, &m);
    mc_model_free(&m);
    return rc;
}
