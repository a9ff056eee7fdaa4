/* zinc mem plan: for each ZeRO stage and optimizer offload, the smallest number of GPUs (and nodes of
 * --gpus-per-node) whose memory holds one rank's estimate with the headroom, the largest micro-batch
 * that fits beside it when activations are given, and bytes per GPU against GPU count. --paper uses the
 * ZeRO paper's byte model instead (Rajbhandari et al. 2020, Table 1: 2 + 2 + K bytes per parameter, K = 12,
 * divided as P_os / P_os+g / P_os+g+p), which has no offload and no buffers. Without --gpu-mem, the host
 * plan: for a CPU machine of --host-mem (and --nvme) per node, every stage x offload_optimizer x offload_param
 * choice's host and NVMe bytes per node, and the cheapest that fits (host_rule). */
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/mem/mem_cli.h"
#include "cli/common/plot.h"

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

/* ---------------------------------------------------------------- the host plan (no --gpu-mem) */

/* One stage x offload_optimizer x offload_param choice on the cpu device, per node. */
typedef struct hrow {
    int stage;
    zcfg_offload_device opt, par;
    bool valid, fits;
    uint64_t host, pinned, nvme, io; /* io: bytes read from and written to NVMe per optimizer step */
    uint64_t nvme_cat[ZINC_MEM_CATEGORY_COUNT];
    int64_t max_in_cpu; /* offload_param nvme: parameter elements per rank kept in memory (-1: no such row) */
    char why[240];
} hrow;

#define HOST_MAX_NODES_X 1024 /* nothing fits: node counts tried, up to this many times --nodes */
#define HROWS 18              /* stages 0-2 x 3 optimizer offloads, stage 3 x 3 x 3 parameter offloads */

typedef struct host_run {
    const mopts *o;
    const mmodel *m;
    json_t *base;
    const char *origin;
    zplan_model md;
    double psi, U, room; /* room: host bytes per node usable with the headroom kept free */
    int ranks, nodes, per_node;
    hrow rows[HROWS];
    int nr, best, closest; /* the cheapest that fits; else the one missing least (-1: none) */
    int more_nodes;        /* nothing fits: the fewest nodes (as many ranks each) where one does, and its cheapest */
    hrow more;
} host_run;

static const zcfg_offload_device offs[3] = {ZOFFLOAD_NONE, ZOFFLOAD_CPU, ZOFFLOAD_NVME};

static bool host_fits(const host_run *h, const hrow *r) {
    const mopts *o = h->o;
    return r->valid && (double)r->host <= h->room && (!o->nvme_bytes || r->nvme <= o->nvme_bytes);
}

static void host_fill(const host_run *h, int per_node, const zinc_config *cfg, const zest_estimate *e, hrow *r);

/* One row's bytes per node at `ranks` ranks, `per_node` of them on each node. With the parameters on NVMe,
 * the config's offload_param.max_in_cpu (elements per rank kept in memory; DeepSpeed's default 1e9 keeps a
 * shard below it whole) when that fits, else the largest that does (zest_resident_fit; none kept when even
 * that is short). */
static void host_needs(const host_run *h, int ranks, int per_node, hrow *r) {
    zinc_config cfg;
    zest_estimate e;
    const char *par = r->stage == 3 ? off_name(r->par) : NULL;
    r->max_in_cpu = -1;
    r->valid =
        mc_load_variant_param(h->base, h->origin, r->stage, off_name(r->opt), par, ranks, true, &cfg) == ZINC_OK &&
        zest_compute(&h->md, &cfg, ranks, 0, ZINC_DEVICE_CPU, &e) == ZINC_OK;
    if (!r->valid) {
        snprintf(r->why, sizeof r->why, "refused: %s", zinc_last_error());
        for (char *c = r->why; *c; c++)
            if (*c == '\n') *c = ' ';
        return;
    }
    host_fill(h, per_node, &cfg, &e, r);
    if (r->stage != 3 || r->par != ZOFFLOAD_NVME) return;
    r->max_in_cpu = e.param_resident;
    if (r->fits || e.param_resident == 0) return;
    zinc_config c0 = cfg;
    c0.zero.offload_param.max_in_cpu = 0;
    zest_estimate e0;
    if (zest_compute(&h->md, &c0, ranks, 0, ZINC_DEVICE_CPU, &e0) != ZINC_OK) return; /* keeps the config's row */
    uint64_t esz = e.param_resident_bytes / (uint64_t)e.param_resident, k = (uint64_t)per_node;
    double host0 = (double)(zest_rss(&e0, true) * k);
    int64_t keep = zest_resident_fit(host0, (double)(esz * k), e.param_resident, h->room);
    for (; keep > 0; keep = keep > 1024 ? keep - keep / 64 : 0) { /* the estimate's rounding: settle it */
        zinc_config ck = cfg;
        ck.zero.offload_param.max_in_cpu = keep;
        zest_estimate ek;
        if (zest_compute(&h->md, &ck, ranks, 0, ZINC_DEVICE_CPU, &ek) != ZINC_OK) break;
        hrow t = *r;
        host_fill(h, per_node, &ck, &ek, &t);
        if (t.fits) {
            *r = t;
            r->max_in_cpu = keep;
            return;
        }
    }
    host_fill(h, per_node, &c0, &e0, r); /* none kept: the least host memory, fitting or not */
    r->max_in_cpu = 0;
}

static void host_fill(const host_run *h, int per_node, const zinc_config *cfg, const zest_estimate *e, hrow *r) {
    uint64_t k = (uint64_t)per_node;
    r->host = zest_rss(e, true) * k;
    r->pinned = e->total[ZINC_MEMKIND_PINNED] * k;
    r->nvme = e->total[ZINC_MEMKIND_NVME] * k;
    r->io = zest_disk_io(e, cfg->gradient_accumulation_steps) * k;
    for (int c = 0; c < ZINC_MEM_CATEGORY_COUNT; c++) r->nvme_cat[c] = e->bytes[ZINC_MEMKIND_NVME][c] * k;
    r->fits = host_fits(h, r);
}

/* The cheapest rule: the least disk traffic per step, then the least host memory; ties: the first. */
static bool cheaper(const hrow *a, const hrow *b) { return a->io != b->io ? a->io < b->io : a->host < b->host; }

/* Bytes short of the limits (host with the headroom added back, NVMe where --nvme is given). */
static void host_short(const host_run *h, const hrow *r, uint64_t *host, uint64_t *nvme) {
    double need = ceil((double)r->host * (100.0 + (double)h->o->headroom_pct) / 100.0);
    *host = need > (double)h->o->host_mem ? (uint64_t)need - h->o->host_mem : 0;
    *nvme = h->o->nvme_bytes && r->nvme > h->o->nvme_bytes ? r->nvme - h->o->nvme_bytes : 0;
}

static bool row_wanted(const mopts *o, int stage, zcfg_offload_device opt) {
    return (o->stage < 0 || o->stage == stage) && (!o->offload || !strcmp(o->offload, off_name(opt)));
}

/* The rows at `ranks` ranks; the index of the cheapest that fits, or -1. */
static int host_rows(host_run *h, hrow *rows, int *nr, int ranks, int per_node) {
    int best = -1;
    *nr = 0;
    for (int s = 0; s <= 3; s++)
        for (int a = 0; a < 3; a++)
            for (int b = 0; b < (s == 3 ? 3 : 1); b++) {
                if (!row_wanted(h->o, s, offs[a])) continue;
                hrow *r = &rows[(*nr)++];
                *r = (hrow){.stage = s, .opt = offs[a], .par = offs[b]};
                host_needs(h, ranks, per_node, r);
                if (r->fits && (best < 0 || cheaper(r, &rows[best]))) best = *nr - 1;
            }
    return best;
}

/* Nothing fits: the row missing least, and the fewest nodes (of as many ranks each) where one fits. */
static void host_misses(host_run *h) {
    uint64_t least = UINT64_MAX;
    for (int i = 0; i < h->nr; i++) {
        uint64_t a, b;
        if (!h->rows[i].valid) continue;
        host_short(h, &h->rows[i], &a, &b);
        if (a + b < least) least = a + b, h->closest = i;
    }
    hrow tmp[HROWS];
    int n;
    for (int k = 2; k <= HOST_MAX_NODES_X && h->closest >= 0; k *= 2) {
        int best = host_rows(h, tmp, &n, h->ranks * k, h->per_node);
        if (best >= 0) {
            h->more_nodes = h->nodes * k, h->more = tmp[best];
            return;
        }
    }
}

static const char host_rule[] =
    "cheapest: the least data read from and written to NVMe per optimizer step (optimizer state files read and "
    "written once; the parameter file read by each micro-step's forward and backward gathers and written once), "
    "then the least host memory";

static const char *size_text(const host_run *h, uint64_t b, char *buf, size_t cap) {
    snprintf(buf, cap, "%.3f %s", (double)b / h->U, unit_name(h->o));
    return buf;
}

static json_t *host_row_json(const host_run *h, const hrow *r) {
    json_t *x = json_pack("{s:i, s:s, s:s, s:b}", "stage", r->stage, "offload_optimizer", off_name(r->opt),
                          "offload_param", off_name(r->stage == 3 ? r->par : ZOFFLOAD_NONE), "valid", r->valid);
    if (!r->valid) {
        json_object_set_new(x, "why", json_string(r->why));
        json_object_set_new(x, "fits", json_false());
        return x;
    }
    json_t *cat = json_object();
    for (int c = 0; c < ZINC_MEM_CATEGORY_COUNT; c++)
        if (r->nvme_cat[c])
            json_object_set_new(cat, zinc_mem_category_name((zinc_mem_category)c),
                                json_integer((json_int_t)r->nvme_cat[c]));
    uint64_t sh, sn;
    host_short(h, r, &sh, &sn);
    json_object_set_new(x, "fits", json_boolean(r->fits));
    json_object_set_new(x, "host_bytes_per_node", json_integer((json_int_t)r->host));
    json_object_set_new(x, "pinned_bytes_per_node", json_integer((json_int_t)r->pinned));
    json_object_set_new(x, "nvme_bytes_per_node", json_integer((json_int_t)r->nvme));
    json_object_set_new(x, "nvme_by_category", cat);
    json_object_set_new(x, "disk_io_bytes_per_step", json_integer((json_int_t)r->io));
    if (r->max_in_cpu >= 0) json_object_set_new(x, "max_in_cpu", json_integer((json_int_t)r->max_in_cpu));
    json_object_set_new(x, "host_short_bytes", json_integer((json_int_t)sh));
    json_object_set_new(x, "nvme_short_bytes", json_integer((json_int_t)sn));
    return x;
}

static json_t *choice_json(const hrow *r) {
    json_t *c = json_pack("{s:i, s:s, s:s}", "stage", r->stage, "offload_optimizer", off_name(r->opt), "offload_param",
                          off_name(r->stage == 3 ? r->par : ZOFFLOAD_NONE));
    if (r->max_in_cpu >= 0) json_object_set_new(c, "max_in_cpu", json_integer((json_int_t)r->max_in_cpu));
    return c;
}

static void host_print_json(const host_run *h) {
    const mopts *o = h->o;
    json_t *j = json_pack("{s:s, s:s, s:s, s:s, s:I, s:s, s:I, s:i, s:i, s:i, s:i, s:s}", "command", "plan", "mode",
                          "host", "model", h->m->desc, "config", h->origin, "parameters", (json_int_t)h->psi, "units",
                          unit_name(o), "host_mem_bytes", (json_int_t)o->host_mem, "ranks", h->ranks, "nodes", h->nodes,
                          "ranks_per_node", h->per_node, "headroom_pct", (int)o->headroom_pct, "rule", host_rule);
    json_object_set_new(j, "nvme_limit_bytes", o->nvme_bytes ? json_integer((json_int_t)o->nvme_bytes) : json_null());
    json_t *arr = json_array();
    for (int i = 0; i < h->nr; i++) json_array_append_new(arr, host_row_json(h, &h->rows[i]));
    json_object_set_new(j, "plan", arr);
    json_object_set_new(j, "cheapest", h->best >= 0 ? choice_json(&h->rows[h->best]) : json_null());
    if (h->best < 0 && h->closest >= 0) {
        const hrow *r = &h->rows[h->closest];
        uint64_t sh, sn;
        host_short(h, r, &sh, &sn);
        json_t *c = choice_json(r);
        json_object_set_new(c, "host_short_bytes", json_integer((json_int_t)sh));
        json_object_set_new(c, "nvme_short_bytes", json_integer((json_int_t)sn));
        json_object_set_new(c, "host_mem_needed_bytes", json_integer((json_int_t)(o->host_mem + sh)));
        json_object_set_new(c, "nvme_needed_bytes", json_integer((json_int_t)(r->nvme)));
        json_object_set_new(j, "closest", c);
        json_t *m = json_null();
        if (h->more_nodes) {
            m = choice_json(&h->more);
            json_object_set_new(m, "nodes", json_integer(h->more_nodes));
            json_object_set_new(m, "ranks", json_integer(h->more_nodes * h->per_node));
            json_object_set_new(m, "host_bytes_per_node", json_integer((json_int_t)h->more.host));
            json_object_set_new(m, "nvme_bytes_per_node", json_integer((json_int_t)h->more.nvme));
        }
        json_object_set_new(j, "more_nodes", m);
    }
    char *txt = json_dumps(j, JSON_INDENT(2));
    if (txt) printf("%s\n", txt);
    free(txt);
    json_decref(j);
}

static void host_print_choice(const hrow *r, char *buf, size_t cap) {
    int n = snprintf(buf, cap, "stage %d, offload_optimizer %s, offload_param %s", r->stage, off_name(r->opt),
                     off_name(r->stage == 3 ? r->par : ZOFFLOAD_NONE));
    if (r->max_in_cpu >= 0 && n > 0 && (size_t)n < cap)
        snprintf(buf + n, cap - (size_t)n, " (max_in_cpu %" PRId64 ")", r->max_in_cpu);
}

static void host_print_verdict(const host_run *h) {
    const mopts *o = h->o;
    char c[160], a[32], b[32], d[32];
    if (h->best >= 0) {
        const hrow *r = &h->rows[h->best];
        host_print_choice(r, c, sizeof c);
        printf("\ncheapest that fits: %s (%s host memory, %s NVMe per node, %s of disk IO per step)\n", c,
               size_text(h, r->host, a, sizeof a), size_text(h, r->nvme, b, sizeof b),
               size_text(h, r->io, d, sizeof d));
        return;
    }
    if (h->closest < 0) {
        printf("\nnothing fits: the config refuses every choice\n");
        return;
    }
    const hrow *r = &h->rows[h->closest];
    uint64_t sh, sn;
    host_short(h, r, &sh, &sn);
    host_print_choice(r, c, sizeof c);
    printf("\nnothing fits. Closest: %s, short by %s of host memory", c, size_text(h, sh, a, sizeof a));
    if (sn) printf(" and %s of NVMe", size_text(h, sn, b, sizeof b));
    printf(" per node: it fits with --host-mem %s", size_text(h, o->host_mem + sh, a, sizeof a));
    if (sn) printf(" --nvme %s", size_text(h, r->nvme, b, sizeof b));
    if (h->more_nodes) {
        host_print_choice(&h->more, c, sizeof c);
        printf(";\n  or on %d nodes of %d rank%s each (--ranks %d --nodes %d): %s fits", h->more_nodes, h->per_node,
               h->per_node == 1 ? "" : "s", h->more_nodes * h->per_node, h->more_nodes, c);
    } else {
        printf(";\n  no node count up to %d (as many ranks each) makes one fit", h->nodes * HOST_MAX_NODES_X);
    }
    printf("\n");
}

static void host_print_text(const host_run *h) {
    const mopts *o = h->o;
    char a[32], b[32];
    printf("model:  %s: %.0f parameters\n", h->m->desc, h->psi);
    printf("host plan (cpu device): %d rank%s on %d node%s (%d per node); host memory %s per node, %u%% headroom "
           "kept free; NVMe %s per node\n",
           h->ranks, h->ranks == 1 ? "" : "s", h->nodes, h->nodes == 1 ? "" : "s", h->per_node,
           size_text(h, o->host_mem, a, sizeof a), o->headroom_pct,
           o->nvme_bytes ? size_text(h, o->nvme_bytes, b, sizeof b) : "not limited (--nvme not given)");
    printf("host/node: the process's peak growth (host and pinned memory) x ranks per node; %s\n\n", host_rule);
    printf("%-6s %-9s %-9s %14s %14s %14s %14s  %s\n", "stage", "opt", "param", "host/node", "pinned/node", "NVMe/node",
           "disk IO/step", "fits");
    for (int i = 0; i < h->nr; i++) {
        const hrow *r = &h->rows[i];
        const char *par = off_name(r->stage == 3 ? r->par : ZOFFLOAD_NONE);
        if (!r->valid) {
            printf("%-6d %-9s %-9s  %s\n", r->stage, off_name(r->opt), par, r->why);
            continue;
        }
        char x[4][32];
        uint64_t v[4] = {r->host, r->pinned, r->nvme, r->io};
        for (int k = 0; k < 4; k++) snprintf(x[k], sizeof x[k], "%.3f %s", (double)v[k] / h->U, unit_name(o));
        char keep[48] = "";
        if (r->max_in_cpu >= 0) snprintf(keep, sizeof keep, "  (max_in_cpu %" PRId64 ")", r->max_in_cpu);
        printf("%-6d %-9s %-9s %14s %14s %14s %14s  %s%s\n", r->stage, off_name(r->opt), par, x[0], x[1], x[2], x[3],
               r->fits ? "yes" : "no", keep);
    }
    host_print_verdict(h);
}

/* CSV: one line per choice (bytes per node), then the cheapest (or "none"). */
static void host_print_csv(const host_run *h) {
    printf("stage,offload_optimizer,offload_param,valid,fits,host_bytes_per_node,pinned_bytes_per_node,"
           "nvme_bytes_per_node,disk_io_bytes_per_step,max_in_cpu,why\n");
    for (int i = 0; i < h->nr; i++) {
        const hrow *r = &h->rows[i];
        printf("%d,%s,%s,%d,%d,%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",", r->stage, off_name(r->opt),
               off_name(r->stage == 3 ? r->par : ZOFFLOAD_NONE), r->valid, r->fits, r->host, r->pinned, r->nvme, r->io);
        if (r->max_in_cpu >= 0) printf("%" PRId64, r->max_in_cpu);
        printf(",\"");
        for (const char *c = r->valid ? "" : r->why; *c; c++) {
            if (*c == '"') putchar('"');
            putchar(*c);
        }
        printf("\"\n");
    }
    const hrow *b = h->best >= 0 ? &h->rows[h->best] : NULL;
    if (b)
        printf("cheapest,%d,%s,%s\n", b->stage, off_name(b->opt), off_name(b->stage == 3 ? b->par : ZOFFLOAD_NONE));
    else
        printf("cheapest,none\n");
}

/* The host plan's usage errors: what it cannot take, and ranks that do not spread over the nodes. */
static int host_check(const mopts *o) {
    const char *bad = o->paper       ? "--paper (the paper's model has no host memory)"
                      : o->act_bytes ? "--activation-bytes-per-sample (the host plan has no micro-batch column)"
                      : o->plot      ? "--plot (the host plan draws nothing)"
                                     : NULL;
    if (bad) {
        fprintf(stderr, "zinc mem plan: %s needs --gpu-mem\n", bad);
        return 2;
    }
    int64_t ranks = o->ranks ? o->ranks : 1;
    if (ranks % o->nodes) {
        fprintf(stderr, "zinc mem plan: --ranks %" PRId64 " does not spread evenly over --nodes %" PRId64 "\n", ranks,
                o->nodes);
        return 2;
    }
    return 0;
}

/* --nvme where no choice planned puts anything on NVMe is a mistake worth saying. */
static int host_check_nvme(const host_run *h) {
    if (!h->o->nvme_bytes) return 0;
    for (int i = 0; i < h->nr; i++)
        if (h->rows[i].valid && h->rows[i].nvme) return 0;
    fprintf(stderr,
            "zinc mem plan: --nvme given, but none of the choices planned puts anything on NVMe (%s); drop "
            "--nvme, or allow offload_optimizer nvme (--offload) or stage 3\n",
            h->o->stage >= 0 || h->o->offload ? "--stage/--offload restrict them" : "the config refuses NVMe offload");
    return 2;
}

static int host_plan(const mopts *o, mmodel *m, json_t *base, const zplan_model *md) {
    int rc = host_check(o);
    if (rc) return rc;
    host_run h =
        {.o = o, .m = m, .base = base, .origin = o->config ? o->config : "<defaults>", .md = *md, .closest = -1};
    h.ranks = (int)(o->ranks ? o->ranks : 1), h.nodes = (int)o->nodes, h.per_node = h.ranks / h.nodes;
    h.psi = (double)mc_model_total(m), h.U = unit_bytes(o);
    h.room = (double)o->host_mem * 100.0 / (100.0 + (double)o->headroom_pct);
    h.best = host_rows(&h, h.rows, &h.nr, h.ranks, h.per_node);
    if ((rc = host_check_nvme(&h))) return rc;
    if (h.best < 0) host_misses(&h);
    if (o->json)
        host_print_json(&h);
    else if (o->csv)
        host_print_csv(&h);
    else
        host_print_text(&h);
    return 0;
}

int mc_cmd_plan(const mopts *o, mmodel *m) {
    int rc = 1;
    int64_t *numel = NULL;
    int *module = NULL;
    plan_run p = {.o = o, .m = m, .origin = o->config ? o->config : "<defaults>"};
    if (!o->gpu_mem && !o->host_mem) {
        fprintf(stderr, "zinc mem plan: --gpu-mem SIZE (GPUs) or --host-mem SIZE (a CPU machine, without --gpu-mem) "
                        "is required (e.g. 80GB or 80GiB)\n");
        return 2;
    }
    if (o->gpu_mem && o->ranks) {
        fprintf(stderr, "zinc mem plan: --ranks is for the host plan (without --gpu-mem); the GPU plan finds the GPU "
                        "count itself (up to --max-gpus)\n");
        return 2;
    }
    if (mc_load_base(o, &p.base) || mc_model_arrays(m, &numel, &module)) goto done;
    p.md = (zplan_model){.nparams = m->n, .numel = numel, .module = module};
    if (!o->gpu_mem) {
        rc = host_plan(o, m, p.base, &p.md);
        goto done;
    }
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
