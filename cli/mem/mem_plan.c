/* zinc mem plan: for each ZeRO stage and optimizer offload, the smallest number of GPUs (and nodes of
 * --gpus-per-node) whose memory holds one rank's estimate with the headroom, the largest micro-batch
 * that fits beside it when activations are given, and bytes per GPU against GPU count. --paper uses the
 * ZeRO paper's byte model instead (Rajbhandari et al. 2020, Table 1: 2 + 2 + K bytes per parameter, K = 12,
 * divided as P_os / P_os+g / P_os+g+p), which has no offload and no buffers. */
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/mem/mem_cli.h"
#include "cli/mem/mem_plot.h"

/* The paper's bytes per GPU for Psi parameters on N data-parallel GPUs (mixed precision, Adam K = 12). */
double mc_paper_bytes(int stage, double psi, double n) {
    const double K = 12.0;
    switch (stage) {
    case 0: return (2 + 2 + K) * psi;
    case 1: return 2 * psi + 2 * psi + K * psi / n;
    case 2: return 2 * psi + (2 + K) * psi / n;
    default: return (2 + 2 + K) * psi / n;
    }
}

typedef struct prow {
    int stage;
    zcfg_offload_device off;
    bool fits;
    int gpus, nodes;
    uint64_t gpu_bytes, host_bytes, nvme_bytes; /* per rank at that count (host, nvme: per node) */
    int64_t micro_batch;                        /* -1: no activations given */
    char why[200];
} prow;

static const char *off_name(zcfg_offload_device d) { return mc_offload_name(d); }

/* One rank's needs at N GPUs: device bytes, host bytes per node, NVMe bytes per node. */
static int needs(const mopts *o, json_t *base, const char *origin, const zplan_model *md, double psi, int stage,
                 zcfg_offload_device off, int n, uint64_t *dev, uint64_t *host, uint64_t *nvme) {
    int per_node = n < o->gpn ? n : (int)o->gpn;
    if (o->paper) {
        *dev = (uint64_t)llround(mc_paper_bytes(stage, psi, n));
        *host = *nvme = 0;
        return 0;
    }
    zinc_config cfg;
    zest_estimate e;
    if (mc_load_variant(base, origin, stage, off_name(off), n, true, &cfg) != ZINC_OK ||
        zest_compute(md, &cfg, n, 0, ZINC_DEVICE_CUDA, &e) != ZINC_OK)
        return -1;
    *dev = e.total[ZINC_MEMKIND_DEVICE];
    *host = zest_rss(&e, false) * (uint64_t)per_node;
    *nvme = e.total[ZINC_MEMKIND_NVME] * (uint64_t)per_node;
    return 0;
}

static double unit_bytes(const mopts *o) { return o->units_gb ? 1e9 : 1073741824.0; }
static const char *unit_name(const mopts *o) { return o->units_gb ? "GB" : "GiB"; }

static int write_plot(const mopts *o, json_t *base, const char *origin, const zplan_model *md, double psi,
                      const char *desc) {
    size_t L = strlen(o->plot);
    char *dat = malloc(L + 8), *gp = malloc(L + 8);
    int rc = -1;
    FILE *f = NULL;
    zfile_out od = {.fd = -1};
    if (!dat || !gp || zcli_plot_check_name("zinc mem plan", o->plot)) goto done;
    snprintf(dat, L + 8, "%s.dat", o->plot);
    snprintf(gp, L + 8, "%s.gp", o->plot);
    if (!(f = zcli_plot_open("zinc mem plan", dat, o->config, &od))) goto done;
    fprintf(f, "# gpus  stage0 stage1 stage2 stage3 (%s per GPU, offload none)\n", unit_name(o));
    for (int n = 1; n <= o->max_gpus; n *= 2) {
        fprintf(f, "%d", n);
        for (int s = 0; s <= 3; s++) {
            uint64_t d, h, v;
            if (needs(o, base, origin, md, psi, s, ZOFFLOAD_NONE, n, &d, &h, &v))
                fprintf(f, " NaN");
            else
                fprintf(f, " %.6g", (double)d / unit_bytes(o));
        }
        fprintf(f, "\n");
    }
    int closed = zcli_plot_close("zinc mem plan", f, &od);
    f = NULL;
    if (closed != 0) goto done;
    char sub[1200], ylabel[64];
    snprintf(sub, sizeof sub, "%s%s", desc, o->paper ? " (ZeRO paper byte model)" : "");
    snprintf(ylabel, sizeof ylabel, "%s per GPU", unit_name(o));
    zcli_plot p = {.out = o->plot,
                   .dat = dat,
                   .script = gp,
                   .title = "zinc mem plan: GPU memory per GPU against GPU count",
                   .subtitle = sub,
                   .xlabel = "GPUs",
                   .ylabel = ylabel,
                   .unit = unit_name(o),
                   .capacity = (double)o->gpu_mem / unit_bytes(o),
                   .input = o->config};
    rc = zcli_plot_render("zinc mem plan", &p);
done:
    if (f) {
        fclose(f);
        zfile_out_abort(&od);
    }
    free(dat);
    free(gp);
    return rc;
}

/* One plan: the model and config, the usable bytes per GPU, and a row per stage and offload. */
typedef struct plan_run {
    const mopts *o;
    const mmodel *m;
    json_t *base;
    const char *origin;
    zplan_model md;
    double psi, U, room; /* parameters; the unit's bytes; usable bytes per GPU */
    prow rows[12];
    int nr;
} plan_run;

/* The paper's Table 1 layout: bytes per GPU for these GPU counts. */
static const int table_n[] = {1, 4, 16, 64, 256, 1024};
#define TABLE_N ((int)(sizeof table_n / sizeof table_n[0]))

static int plan_needs(const plan_run *p, int stage, zcfg_offload_device off, int n, uint64_t *d, uint64_t *h,
                      uint64_t *v) {
    return needs(p->o, p->base, p->origin, &p->md, p->psi, stage, off, n, d, h, v);
}

/* The fewest GPUs that hold one rank of this stage and offload. */
static void plan_fit(const plan_run *p, prow *r) {
    const mopts *o = p->o;
    for (int n = 1; n <= o->max_gpus; n++) {
        uint64_t d, h, v;
        if (plan_needs(p, r->stage, r->off, n, &d, &h, &v)) {
            snprintf(r->why, sizeof r->why, "the config is refused at %d GPUs: %s", n, zinc_last_error());
            break;
        }
        if ((double)d > p->room) continue;
        if (o->host_mem && (double)h > (double)o->host_mem * 100.0 / (100.0 + (double)o->headroom_pct)) {
            if (n >= o->gpn) snprintf(r->why, sizeof r->why, "host memory per node short at %d GPUs", n);
            continue;
        }
        if (o->nvme_bytes && v > o->nvme_bytes) continue;
        r->fits = true, r->gpus = n, r->nodes = (int)((n + o->gpn - 1) / o->gpn);
        r->gpu_bytes = d, r->host_bytes = h, r->nvme_bytes = v;
        if (o->act_bytes) r->micro_batch = (int64_t)floor((p->room - (double)d) / (double)o->act_bytes);
        r->why[0] = 0;
        break;
    }
    if (!r->fits && !r->why[0])
        snprintf(r->why, sizeof r->why, "does not fit on %" PRId64 " GPUs (--max-gpus)", o->max_gpus);
}

static void plan_rows(plan_run *p) {
    for (int s = 0; s <= 3; s++)
        for (int f = 0; f < 3; f++) {
            zcfg_offload_device off = f == 0 ? ZOFFLOAD_NONE : f == 1 ? ZOFFLOAD_CPU : ZOFFLOAD_NVME;
            if (off != ZOFFLOAD_NONE && (s == 0 || p->o->paper)) continue; /* the config refuses; the paper has none */
            prow *r = &p->rows[p->nr++];
            *r = (prow){.stage = s, .off = off, .micro_batch = -1};
            plan_fit(p, r);
        }
}

static json_t *plan_row_json(const plan_run *p, const prow *r) {
    json_t *x = json_pack("{s:i, s:s, s:b}", "stage", r->stage, "offload", off_name(r->off), "fits", r->fits);
    if (!r->fits) {
        json_object_set_new(x, "why", json_string(r->why));
        return x;
    }
    json_object_set_new(x, "gpus", json_integer(r->gpus));
    json_object_set_new(x, "nodes", json_integer(r->nodes));
    json_object_set_new(x, "gpu_bytes", json_integer((json_int_t)r->gpu_bytes));
    json_object_set_new(x, "gpu", json_real((double)r->gpu_bytes / p->U));
    json_object_set_new(x, "host_bytes_per_node", json_integer((json_int_t)r->host_bytes));
    json_object_set_new(x, "nvme_bytes_per_node", json_integer((json_int_t)r->nvme_bytes));
    if (r->micro_batch >= 0) json_object_set_new(x, "max_micro_batch", json_integer(r->micro_batch));
    return x;
}

static json_t *plan_table_json(const plan_run *p) {
    json_t *tab = json_array();
    for (int t = 0; t < TABLE_N; t++) {
        json_t *x = json_pack("{s:i}", "gpus", table_n[t]);
        for (int s = 0; s <= 3; s++) {
            uint64_t d, h, v;
            char key[16];
            snprintf(key, sizeof key, "stage%d", s);
            if (plan_needs(p, s, ZOFFLOAD_NONE, table_n[t], &d, &h, &v) == 0)
                json_object_set_new(x, key, json_real((double)d / p->U));
        }
        json_array_append_new(tab, x);
    }
    return tab;
}

static const char note_paper[] =
    "ZeRO paper, Table 1: stage 0 (2+2+K)Psi, P_os 4Psi + K Psi/N, P_os+g 2Psi + "
    "(2+K)Psi/N, P_os+g+p (2+2+K)Psi/N with K = 12; no buffers, no activations, no offload";
static const char note_zinc[] =
    "zinc's own layout (estimate --device cuda): besides the paper's 2+2+K bytes (K = 12 for Adam and LAMB, 8 for "
    "Lion, which keeps no exp_avg_sq) it keeps an fp32 gradient shard (4 bytes per own parameter, as DeepSpeed's "
    "implementation does), reduce buckets, stage-3 gather buffers, the weight-decay mask and device scratch; "
    "--paper gives the paper's model";

static void plan_print_json(const plan_run *p) {
    const mopts *o = p->o;
    json_t *j =
        json_pack("{s:s, s:s, s:s, s:I, s:b, s:s, s:f, s:I, s:I, s:i}", "command", "plan", "model", p->m->desc,
                  "config", o->paper ? "the ZeRO paper's byte model (2 + 2 + 12 bytes per parameter)" : p->origin,
                  "parameters", (json_int_t)p->psi, "paper", o->paper, "units", unit_name(o), "gpu_mem",
                  (double)o->gpu_mem / p->U, "gpu_mem_bytes", (json_int_t)o->gpu_mem, "gpus_per_node",
                  (json_int_t)o->gpn, "headroom_pct", (int)o->headroom_pct);
    json_t *arr = json_array();
    for (int i = 0; i < p->nr; i++) json_array_append_new(arr, plan_row_json(p, &p->rows[i]));
    json_object_set_new(j, "plan", arr);
    json_object_set_new(j, "per_gpu", plan_table_json(p));
    json_object_set_new(j, "note", json_string(o->paper ? note_paper : note_zinc));
    char *txt = json_dumps(j, JSON_INDENT(2));
    if (txt) printf("%s\n", txt);
    free(txt);
    json_decref(j);
}

static void plan_print_text(const plan_run *p) {
    const mopts *o = p->o;
    printf("model:  %s: %.0f parameters\n", p->m->desc, p->psi);
    printf("byte model: %s\n", o->paper ? "the ZeRO paper's (2 + 2 + 12 bytes per parameter, Table 1; no buffers)"
                                        : "zinc's own (`zinc mem estimate --device cuda`; --paper for the paper's)");
    printf("GPU: %.4g %s each, %" PRId64 " per node, %u%% headroom kept free%s%s\n\n", (double)o->gpu_mem / p->U,
           unit_name(o), o->gpn, o->headroom_pct, o->host_mem ? "; host memory per node given" : "",
           o->nvme_bytes ? "; NVMe per node given" : "");
    printf("%-6s %-8s %8s %6s %14s %16s  %s\n", "stage", "offload", "GPUs", "nodes", "per GPU", "host per node",
           o->act_bytes ? "max micro-batch" : "");
    for (int i = 0; i < p->nr; i++) {
        const prow *r = &p->rows[i];
        if (!r->fits) {
            printf("%-6d %-8s %8s  %s\n", r->stage, off_name(r->off), "-", r->why);
            continue;
        }
        char mb[32] = "";
        if (r->micro_batch >= 0) snprintf(mb, sizeof mb, "%" PRId64, r->micro_batch);
        printf("%-6d %-8s %8d %6d %10.3f %-3s %12.3f %-3s  %s\n", r->stage, off_name(r->off), r->gpus, r->nodes,
               (double)r->gpu_bytes / p->U, unit_name(o), (double)r->host_bytes / p->U, unit_name(o), mb);
    }
    printf("\nPer GPU (%s), offload none:\n%-8s %12s %12s %12s %12s\n", unit_name(o), "GPUs", "stage 0", "stage 1",
           "stage 2", "stage 3");
    for (int t = 0; t < TABLE_N; t++) {
        printf("%-8d", table_n[t]);
        for (int s = 0; s <= 3; s++) {
            uint64_t d, h, v;
            if (plan_needs(p, s, ZOFFLOAD_NONE, table_n[t], &d, &h, &v))
                printf(" %12s", "-");
            else
                printf(" %12.4g", (double)d / p->U);
        }
        printf("\n");
    }
}

int mc_cmd_plan(const mopts *o, mmodel *m) {
    int rc = 1;
    int64_t *numel = NULL;
    int *module = NULL;
    plan_run p = {.o = o, .m = m, .origin = o->config ? o->config : "<defaults>"};
    if (!o->gpu_mem) {
        fprintf(stderr, "zinc mem plan: --gpu-mem SIZE is required (e.g. 80GB or 80GiB)\n");
        return 2;
    }
    if (mc_load_base(o, &p.base) || mc_model_arrays(m, &numel, &module)) goto done;
    p.md = (zplan_model){.nparams = m->n, .numel = numel, .module = module};
    p.psi = (double)mc_model_total(m), p.U = unit_bytes(o);
    p.room = (double)o->gpu_mem * 100.0 / (100.0 + (double)o->headroom_pct); /* usable per GPU */
    plan_rows(&p);
    if (o->json)
        plan_print_json(&p);
    else
        plan_print_text(&p);
    rc = 0;
    if (o->plot && write_plot(o, p.base, p.origin, &p.md, p.psi, m->desc)) rc = 1;
done:
    free(numel);
    free(module);
    json_decref(p.base);
    return rc;
}
