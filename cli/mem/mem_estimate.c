/* zinc mem estimate: one rank's bytes for the config, every stage x offload variant beside DeepSpeed's own
 * estimators, as tables, JSON or CSV, and a plot against rank count. */
#include <inttypes.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/mem/mem_cli.h"
#include "cli/common/plot.h"

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
    return mc_why_list(v, r->o, r->P, r->L, r->G, r->gpn,
                       v == &r->main_v ? r->off_param : v->stage == 3 && r->off_param);
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
    mc_print_why(&r->main_v, o, r->P, r->L, r->G, r->gpn, r->off_param);
}

int mc_cmd_estimate(const mopts *o, mmodel *m) {
    est_run r = {.o = o,
                 .m = m,
                 .origin = o->config ? o->config : "<defaults>",
                 .nodes = (int)o->nodes,
                 .gpn = (int)o->gpn};
    int rc = 1;
    if ((int64_t)r.nodes * r.gpn > (1 << 20)) { /* each is in range; their product may pass INT_MAX */
        fprintf(stderr,
                "zinc mem estimate: --nodes %d x --gpus-per-node %d = %lld ranks: at most 2^20 (1048576); give "
                "fewer nodes or GPUs per node\n",
                r.nodes, r.gpn, (long long)r.nodes * r.gpn);
        return 2;
    }
    r.G = r.nodes * r.gpn;
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
