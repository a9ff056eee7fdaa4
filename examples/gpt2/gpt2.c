/* See gpt2.h. Forward: embed -> blocks -> lnf, then "embed" entered again (forward) for the tied output
 * projection: the logits, the loss, and the projection's input gradient dlnf = dlogits wte, which only
 * read wte. Backward: lnf, the blocks last to first, then embed, whose single backward entry computes
 * wte's whole gradient: the projection's dlogits^T lnf (both kept from the forward) plus the token rows.
 * So no module is entered twice for backward: at stages 2-3 the embedding is reduced once per micro-step
 * like any module, with no held buffer. Every module entry reads its parameters as float (in place for
 * fp32, else through zinc_param_to_f32) and every backward exit adds the float gradients of the unscaled
 * loss into the engine's buffers with zinc_grad_add_f32, which applies the loss scale; with fp32 compute
 * and fp32 gradients the embedding's gradients are written straight into the engine's buffers instead. */
#include "gpt2.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gpt2_layers.h"
#include "../common/example_rng.h"

#define NBLOCK_KINDS 12 /* GPT2_LN1W .. GPT2_FCPROJB */

typedef struct block_acts {
    float *ln1, *ln1m, *ln1r, *qkv, *att, *atty, *res2, *ln2, *ln2m, *ln2r, *fch, *fchg;
} block_acts;

struct zinc_gpt2 {
    zinc_engine *e;
    gpt2_shape s;
    int T, mb;
    int mod_embed, mod_lnf, *mod_block;
    zinc_param **params;    /* registration order: wte, wpe, 12 per block, lnfw, lnfb */
    int *pkind, *player;    /* each registered parameter's kind and layer */
    int nparams;
    const float *init;      /* during create only */
    float *w[GPT2_NKINDS];  /* float views of the entered module's parameters */
    float *g[GPT2_NKINDS];  /* float gradients of the module in backward */
    float *scratch;         /* float copies of the entered module's parameters (bf16/fp16 compute), then its
                               float gradients (size: scratch_floats in create) */
    int copies;             /* compute dtype is not fp32: parameters are read through float copies */
    int direct_embed;       /* fp32 compute and gradients: embed's gradients go straight into the engine's */
    float *xs;              /* residual stream: (L + 1) x N x C */
    block_acts *acts;
    float *lnf, *lnfm, *lnfr, *logits;
    float *dx, *dres, *dln, *datty, *dqkv, *datt, *dfchg, *dfch, *dtmp;
    int32_t *inp, *tgt;
    double *row_loss;       /* the cross-entropy's per-position losses (N) */
    float *capture;
    double t_engine, t_steps; /* seconds inside engine calls, and in whole training steps */
    int shuffle;
    uint64_t shuffle_seed;
};

static size_t z(size_t n) { return n ? n : 1; }

/* ---------------------------------------------------------------- deterministic random numbers */


static zinc_status init_param(void *userdata, const zinc_param_info *p, uint64_t seed, float *out) {
    const zinc_gpt2 *m = userdata;
    int kind = m->pkind[p->index], layer = m->player[p->index];
    if (m->init) {
        memcpy(out, m->init + gpt2_llmc_offset(&m->s, kind, layer), (size_t)p->numel * sizeof(float));
        return ZINC_OK;
    }
    double std = 0.02;
    switch (kind) {
    case GPT2_LN1W: case GPT2_LN2W: case GPT2_LNFW:
        for (int64_t i = 0; i < p->numel; i++) out[i] = 1.0f;
        return ZINC_OK;
    case GPT2_ATTPROJW: case GPT2_FCPROJW: std = 0.02 / sqrt(2.0 * m->s.layers); /* fall through */
    case GPT2_WTE: case GPT2_WPE: case GPT2_QKVW: case GPT2_FCW: {
        uint64_t s = seed;
        int64_t n = kind == GPT2_WTE ? (int64_t)m->s.vocab * m->s.channels : p->numel; /* padding rows 0 */
        for (int64_t i = 0; i < p->numel; i++) out[i] = i < n ? (float)(example_normal(&s) * std) : 0.0f;
        return ZINC_OK;
    }
    default:
        memset(out, 0, (size_t)p->numel * sizeof(float));
        return ZINC_OK;
    }
}

/* ---------------------------------------------------------------- create / destroy */

static unsigned decay_flags(int kind) {
    return kind == GPT2_WTE || kind == GPT2_WPE || kind == GPT2_QKVW || kind == GPT2_ATTPROJW || kind == GPT2_FCW ||
                   kind == GPT2_FCPROJW
               ? ZINC_PARAM_DECAY
               : ZINC_PARAM_NO_DECAY;
}

static int add_param(zinc_gpt2 *m, int module, int kind, int layer, const char *name) {
    int64_t shape[2];
    int64_t C = m->s.channels;
    int ndim = 2;
    switch (kind) {
    case GPT2_WTE: shape[0] = m->s.padded_vocab, shape[1] = C; break;
    case GPT2_WPE: shape[0] = m->s.max_context, shape[1] = C; break;
    case GPT2_QKVW: shape[0] = 3 * C, shape[1] = C; break;
    case GPT2_ATTPROJW: shape[0] = C, shape[1] = C; break;
    case GPT2_FCW: shape[0] = 4 * C, shape[1] = C; break;
    case GPT2_FCPROJW: shape[0] = C, shape[1] = 4 * C; break;
    default: ndim = 1, shape[0] = gpt2_kind_numel(&m->s, kind); break;
    }
    zinc_param *p = zinc_param_add(m->e, module, name, ndim, shape, decay_flags(kind));
    if (!p) return -1;
    m->params[m->nparams] = p;
    m->pkind[m->nparams] = kind;
    m->player[m->nparams] = layer;
    m->nparams++;
    return 0;
}

/* The model's one float scratch, in floats (the largest of what one module entry needs at a time):
 * - a block or lnf entry: its parameters' float copies (bf16/fp16 only; fp32 reads in place), followed in
 *   backward by its float gradients;
 * - embed's forward entries: wpe's copy, then (the projection) wte's copy, one at a time (bf16/fp16);
 * - embed's backward entry: wte's float gradient, then wpe's (unless written straight into the engine's
 *   fp32 buffers: direct_embed).
 * fp32 at GPT-2 124M: one block's 7.1M floats (28 MB); bf16/fp16: wte's 38.6M floats (154 MB). */
static size_t scratch_floats(const zinc_gpt2 *m) {
    size_t block = 0, C = (size_t)m->s.channels, wte = (size_t)m->s.padded_vocab * C,
           wpe = (size_t)m->s.max_context * C;
    for (int k = GPT2_LN1W; k <= GPT2_FCPROJB; k++) block += (size_t)gpt2_kind_numel(&m->s, k);
    size_t need = (m->copies ? 2 : 1) * (block > 2 * C ? block : 2 * C);
    if (m->copies || !m->direct_embed) {
        size_t embed = wte > wpe ? wte : wpe;
        if (embed > need) need = embed;
    }
    return need;
}

void zinc_gpt2_destroy(zinc_gpt2 *m) {
    if (!m) return;
    for (int l = 0; m->acts && l < m->s.layers; l++) {
        block_acts *a = &m->acts[l];
        float **f[] = {&a->ln1, &a->ln1m, &a->ln1r, &a->qkv, &a->att, &a->atty,
                       &a->res2, &a->ln2, &a->ln2m, &a->ln2r, &a->fch, &a->fchg};
        for (size_t i = 0; i < sizeof f / sizeof *f; i++) free(*f[i]);
    }
    free(m->acts);
    float *bufs[] = {m->scratch, m->xs,    m->lnf,  m->lnfm, m->lnfr,  m->logits, m->dx,
                     m->dres,    m->dln,   m->datty, m->dqkv, m->datt, m->dfchg, m->dfch, m->dtmp};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) free(bufs[i]);
    free(m->inp);
    free(m->row_loss);
    free(m->tgt);
    free(m->mod_block);
    free(m->params);
    free(m->pkind);
    free(m->player);
    free(m);
}

zinc_status zinc_gpt2_create(zinc_engine *e, const zinc_gpt2_config *cfg, zinc_gpt2 **out) {
    char why[256];
    *out = NULL;
    if (!cfg || gpt2_shape_check(&cfg->shape, why, sizeof why)) {
        zinc_log(e, ZINC_LOG_ERROR, "gpt2: %s", cfg ? why : "no config");
        return ZINC_ERR_INVALID_ARG;
    }
    if (cfg->context < 1 || cfg->context > cfg->shape.max_context) {
        zinc_log(e, ZINC_LOG_ERROR, "gpt2: context %d must be 1..%d (the model's max context)", cfg->context,
                 cfg->shape.max_context);
        return ZINC_ERR_INVALID_ARG;
    }
    if (!zinc_device_host_addressable(e)) {
        zinc_log(e, ZINC_LOG_ERROR, "gpt2: the model computes on the host and needs an engine on device cpu "
                 "(--device cpu); its GPU path is not written yet");
        return ZINC_ERR_UNSUPPORTED;
    }
    gpt2_layers_init();
    zinc_gpt2 *m = calloc(1, sizeof *m);
    if (!m) return ZINC_ERR_NOMEM;
    m->e = e;
    m->s = cfg->shape;
    m->T = cfg->context;
    m->mb = (int)zinc_micro_batch_size(e);
    int L = m->s.layers, C = m->s.channels, V = m->s.vocab, H = m->s.heads, T = m->T;
    size_t N = (size_t)m->mb * (size_t)T, NC = N * (size_t)C, att = (size_t)m->mb * H * T * T;
    int np = 4 + NBLOCK_KINDS * L;
    m->params = calloc((size_t)np, sizeof *m->params);
    m->pkind = calloc((size_t)np, sizeof *m->pkind);
    m->player = calloc((size_t)np, sizeof *m->player);
    m->mod_block = calloc((size_t)L, sizeof *m->mod_block);
    m->acts = calloc((size_t)L, sizeof *m->acts);
    if (!m->params || !m->pkind || !m->player || !m->mod_block || !m->acts) goto nomem;

    char name[64];
    if ((m->mod_embed = zinc_module_add(e, "embed")) < 0 || add_param(m, m->mod_embed, GPT2_WTE, 0, "wte") ||
        add_param(m, m->mod_embed, GPT2_WPE, 0, "wpe"))
        goto bad;
    for (int l = 0; l < L; l++) {
        snprintf(name, sizeof name, "h%d", l);
        if ((m->mod_block[l] = zinc_module_add(e, name)) < 0) goto bad;
        for (int k = GPT2_LN1W; k <= GPT2_FCPROJB; k++) {
            snprintf(name, sizeof name, "h%d.%s", l, gpt2_kind_name(k));
            if (add_param(m, m->mod_block[l], k, l, name)) goto bad;
        }
    }
    if ((m->mod_lnf = zinc_module_add(e, "lnf")) < 0 || add_param(m, m->mod_lnf, GPT2_LNFW, 0, "lnfw") ||
        add_param(m, m->mod_lnf, GPT2_LNFB, 0, "lnfb"))
        goto bad;

    m->copies = zinc_compute_dtype(e) != ZINC_FP32;
    m->direct_embed = !m->copies && zinc_grad_dtype(e) == ZINC_FP32;
    m->scratch = malloc(scratch_floats(m) * sizeof(float));
    m->xs = malloc((size_t)(L + 1) * NC * sizeof(float));
    for (int l = 0; l < L; l++) {
        block_acts *a = &m->acts[l];
        a->ln1 = malloc(NC * 4), a->ln1m = malloc(N * 4), a->ln1r = malloc(N * 4), a->qkv = malloc(3 * NC * 4);
        a->att = malloc(z(att) * 4), a->atty = malloc(NC * 4), a->res2 = malloc(NC * 4), a->ln2 = malloc(NC * 4);
        a->ln2m = malloc(N * 4), a->ln2r = malloc(N * 4), a->fch = malloc(4 * NC * 4), a->fchg = malloc(4 * NC * 4);
        if (!a->ln1 || !a->ln1m || !a->ln1r || !a->qkv || !a->att || !a->atty || !a->res2 || !a->ln2 || !a->ln2m ||
            !a->ln2r || !a->fch || !a->fchg)
            goto nomem;
    }
    m->lnf = malloc(NC * 4), m->lnfm = malloc(N * 4), m->lnfr = malloc(N * 4), m->logits = malloc(N * V * 4);
    m->dx = malloc(NC * 4), m->dres = malloc(NC * 4), m->dln = malloc(NC * 4), m->datty = malloc(NC * 4);
    m->dqkv = malloc(3 * NC * 4), m->datt = malloc(z(att) * 4), m->dfchg = malloc(4 * NC * 4);
    m->dfch = malloc(4 * NC * 4), m->dtmp = malloc(NC * 4);
    m->inp = malloc(N * sizeof(int32_t)), m->tgt = malloc(N * sizeof(int32_t));
    m->row_loss = malloc(N * sizeof(double));
    if (!m->scratch || !m->xs || !m->lnf || !m->lnfm || !m->lnfr ||
        !m->logits || !m->dx || !m->dres || !m->dln || !m->datty || !m->dqkv || !m->datt || !m->dfchg || !m->dfch ||
        !m->dtmp || !m->inp || !m->tgt || !m->row_loss)
        goto nomem;

    m->init = cfg->init;
    zinc_status st = zinc_build(e, init_param, m);
    m->init = NULL;
    if (st != ZINC_OK) {
        zinc_gpt2_destroy(m);
        return st;
    }
    *out = m;
    return ZINC_OK;
nomem:
    zinc_log(e, ZINC_LOG_ERROR, "gpt2: no memory for the model's buffers (micro batch %d, context %d)", m->mb, T);
    zinc_gpt2_destroy(m);
    return ZINC_ERR_NOMEM;
bad:
    zinc_gpt2_destroy(m);
    return ZINC_ERR_INVALID_ARG; /* zinc_last_error() holds the engine's message */
}

const gpt2_shape *zinc_gpt2_shape(const zinc_gpt2 *m) { return &m->s; }
int zinc_gpt2_context(const zinc_gpt2 *m) { return m->T; }
void zinc_gpt2_capture_grads(zinc_gpt2 *m, float *out) { m->capture = out; }
void zinc_gpt2_shuffle(zinc_gpt2 *m, uint64_t seed) {
    m->shuffle = 1;
    m->shuffle_seed = seed;
}

/* ---------------------------------------------------------------- module entry and exit */

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The engine's calls, timed: the split of a step into the model's compute and the engine's work. */
static zinc_status module_enter(zinc_gpt2 *m, int module, zinc_phase ph) {
    double t = now_s();
    zinc_status st = zinc_module_enter(m->e, module, ph);
    m->t_engine += now_s() - t;
    return st;
}
static zinc_status module_exit(zinc_gpt2 *m, int module, zinc_phase ph) {
    double t = now_s();
    zinc_status st = zinc_module_exit(m->e, module, ph);
    m->t_engine += now_s() - t;
    return st;
}

void zinc_gpt2_times(const zinc_gpt2 *m, double *steps_s, double *engine_s) {
    *steps_s = m->t_steps;
    *engine_s = m->t_engine;
}

#define CHECK(expr)                                                                                        \
    do {                                                                                                   \
        zinc_status st_ = (expr);                                                                          \
        if (st_ != ZINC_OK) return st_;                                                                    \
    } while (0)

/* Float values of n elements of a parameter in dtype t (exact: widening). */
static void to_float(float *dst, const void *src, zinc_dtype t, int64_t n) {
    if (t == ZINC_BF16) {
        const uint16_t *h = src;
        for (int64_t i = 0; i < n; i++) {
            uint32_t u = (uint32_t)h[i] << 16;
            memcpy(&dst[i], &u, 4);
        }
    } else if (t == ZINC_FP16) {
        const uint16_t *h = src;
        for (int64_t i = 0; i < n; i++) dst[i] = zinc_fp16_to_f32(h[i]);
    } else {
        memcpy(dst, src, (size_t)n * sizeof(float));
    }
}

/* Enters a block or lnf, points m->w[kind] at float views of its parameters (in place for fp32, else
 * copies at the start of the scratch) and, in backward, m->g[kind] at zeroed float gradients after them.
 * Parameters first..first+count-1 (registration order). */
static zinc_status enter(zinc_gpt2 *m, int module, zinc_phase ph, int first, int count) {
    CHECK(module_enter(m, module, ph));
    size_t total = 0, off = 0;
    for (int i = first; i < first + count; i++) total += (size_t)gpt2_kind_numel(&m->s, m->pkind[i]);
    float *gbase = m->scratch + (m->copies ? total : 0);
    for (int i = first; i < first + count; i++) {
        int k = m->pkind[i];
        int64_t n = gpt2_kind_numel(&m->s, k);
        const void *data = zinc_param_data(m->params[i]);
        if (!data) return ZINC_ERR_STATE;
        if (!m->copies) m->w[k] = (float *)data;
        else {
            m->w[k] = m->scratch + off;
            CHECK(zinc_param_to_f32(m->params[i], m->w[k]));
        }
        if (ph == ZINC_BACKWARD) {
            m->g[k] = gbase + off;
            memset(m->g[k], 0, (size_t)n * sizeof(float));
        }
        off += (size_t)n;
    }
    return ZINC_OK;
}

/* Inside an entry of "embed": a float view of wte (index 0) or wpe (index 1), in place for fp32, else
 * converted into the start of the scratch (so one at a time). */
static zinc_status embed_view(zinc_gpt2 *m, int index, const float **out) {
    const void *data = zinc_param_data(m->params[index]);
    if (!data) return ZINC_ERR_STATE;
    *out = m->copies ? m->scratch : data;
    return m->copies ? zinc_param_to_f32(m->params[index], m->scratch) : ZINC_OK;
}

/* Inside embed's backward entry: the float gradient to add parameter `index` (wte or wpe) into: the
 * engine's own buffer (direct_embed; the test hook then notes its contents first, see embed_grad_done),
 * else the zeroed start of the scratch. */
static float *embed_grad(zinc_gpt2 *m, int index) {
    int k = m->pkind[index];
    size_t n = (size_t)gpt2_kind_numel(&m->s, k);
    if (m->direct_embed) {
        float *g = zinc_param_grad(m->params[index]);
        /* test hook: note the gradient so far, to hand on what this entry adds */
        if (g && m->capture) memcpy(m->capture + gpt2_llmc_offset(&m->s, k, 0), g, n * sizeof(float));
        return g;
    }
    memset(m->scratch, 0, n * sizeof(float));
    return m->scratch;
}

/* The float gradient g of embed_grad is complete: adds it into the engine's (scratch case) and hands it
 * to the test hook (direct case: what was added since embed_grad). */
static zinc_status embed_grad_done(zinc_gpt2 *m, int index, const float *g) {
    int k = m->pkind[index];
    int64_t n = gpt2_kind_numel(&m->s, k);
    float *cap = m->capture ? m->capture + gpt2_llmc_offset(&m->s, k, 0) : NULL;
    if (m->direct_embed) {
        for (int64_t i = 0; cap && i < n; i++) cap[i] = g[i] - cap[i];
        return ZINC_OK;
    }
    CHECK(zinc_grad_add_f32(m->params[index], g));
    if (cap) memcpy(cap, g, (size_t)n * sizeof(float));
    return ZINC_OK;
}

/* Adds the module's float gradients (of the unscaled loss) into the engine's, times the loss scale
 * (zinc_grad_add_f32), and exits it. */
static zinc_status exit_backward(zinc_gpt2 *m, int module, int first, int count) {
    for (int i = first; i < first + count; i++) {
        int k = m->pkind[i];
        CHECK(zinc_grad_add_f32(m->params[i], m->g[k]));
        if (m->capture)
            memcpy(m->capture + gpt2_llmc_offset(&m->s, k, m->player[i]), m->g[k],
                   (size_t)gpt2_kind_numel(&m->s, k) * sizeof(float));
    }
    return module_exit(m, module, ZINC_BACKWARD);
}

static int block_first(int l) { return 2 + NBLOCK_KINDS * l; }
static int lnf_first(const zinc_gpt2 *m) { return 2 + NBLOCK_KINDS * m->s.layers; }

/* ---------------------------------------------------------------- forward and backward */

typedef struct embed_args {
    zinc_gpt2 *m;
    const void *wte;   /* in the compute dtype */
    const float *wpe;
    zinc_dtype t;
    int T;
} embed_args;

/* x0 rows lo..hi-1: the token's row of wte (widened) plus the position's row of wpe. */
static void embed_rows(void *arg, int64_t lo, int64_t hi) {
    const embed_args *a = arg;
    int C = a->m->s.channels;
    size_t row = (size_t)C * (a->t == ZINC_FP32 ? 4 : 2);
    for (int64_t n = lo; n < hi; n++) {
        float *x = a->m->xs + n * C;
        const float *pe = a->wpe + (n % a->T) * C;
        to_float(x, (const char *)a->wte + (size_t)a->m->inp[n] * row, a->t, C);
        for (int c = 0; c < C; c++) x[c] += pe[c];
    }
}

typedef struct add_args {
    float *y;
    const float *a, *b;
} add_args;

static void add_range(void *arg, int64_t lo, int64_t hi) {
    const add_args *a = arg;
    for (int64_t i = lo; i < hi; i++) a->y[i] = a->a[i] + a->b[i];
}

/* y = a + b elementwise (n floats) on the engine's threads. */
static zinc_status add(zinc_gpt2 *m, float *y, const float *a, const float *b, int64_t n) {
    add_args x = {y, a, b};
    return zinc_parallel_for(m->e, n, add_range, &x);
}

/* Forward over B sequences of T tokens in m->inp, up to the final LayerNorm's output in m->lnf. */
static zinc_status forward(zinc_gpt2 *m, int B, int T) {
    int C = m->s.channels, L = m->s.layers, H = m->s.heads;
    int64_t N = (int64_t)B * T, NC = N * C;
    CHECK(module_enter(m, m->mod_embed, ZINC_FORWARD));
    const void *wte = zinc_param_data(m->params[0]); /* rows read as they are: only B*T of them */
    const float *wpe;
    if (!wte) return ZINC_ERR_STATE;
    CHECK(embed_view(m, 1, &wpe));
    embed_args ea = {m, wte, wpe, zinc_compute_dtype(m->e), T};
    CHECK(zinc_parallel_for(m->e, N, embed_rows, &ea));
    CHECK(module_exit(m, m->mod_embed, ZINC_FORWARD));
    for (int l = 0; l < L; l++) {
        CHECK(enter(m, m->mod_block[l], ZINC_FORWARD, block_first(l), NBLOCK_KINDS));
        block_acts *a = &m->acts[l];
        float *const *w = m->w;
        const float *x = m->xs + l * NC;
        float *y = m->xs + (l + 1) * NC;
        gpt2_layernorm_forward(m->e, a->ln1, a->ln1m, a->ln1r, x, w[GPT2_LN1W], w[GPT2_LN1B], N, C);
        gpt2_matmul_forward(m->e, a->qkv, a->ln1, w[GPT2_QKVW], w[GPT2_QKVB], N, C, 3 * C);
        gpt2_attention_forward(m->e, a->atty, a->att, a->qkv, B, T, C, H);
        gpt2_matmul_forward(m->e, m->dtmp, a->atty, w[GPT2_ATTPROJW], w[GPT2_ATTPROJB], N, C, C);
        CHECK(add(m, a->res2, x, m->dtmp, NC));
        gpt2_layernorm_forward(m->e, a->ln2, a->ln2m, a->ln2r, a->res2, w[GPT2_LN2W], w[GPT2_LN2B], N, C);
        gpt2_matmul_forward(m->e, a->fch, a->ln2, w[GPT2_FCW], w[GPT2_FCB], N, C, 4 * C);
        gpt2_gelu_forward(m->e, a->fchg, a->fch, 4 * NC);
        gpt2_matmul_forward(m->e, m->dtmp, a->fchg, w[GPT2_FCPROJW], w[GPT2_FCPROJB], N, 4 * C, C);
        CHECK(add(m, y, a->res2, m->dtmp, NC));
        CHECK(module_exit(m, m->mod_block[l], ZINC_FORWARD));
    }
    CHECK(enter(m, m->mod_lnf, ZINC_FORWARD, lnf_first(m), 2));
    gpt2_layernorm_forward(m->e, m->lnf, m->lnfm, m->lnfr, m->xs + L * NC, m->w[GPT2_LNFW], m->w[GPT2_LNFB], N, C);
    return module_exit(m, m->mod_lnf, ZINC_FORWARD);
}

/* The tied output projection, in a forward re-entry of "embed" (it only reads wte): logits[rows, V] =
 * x wte[:V]^T, x = rows of the final LayerNorm's output. Training: adds the sum of the rows' losses to
 * *loss_sum, turns the logits into dlogits (of the mean loss) in place, kept for embed's backward entry,
 * and sets m->dx = dlogits wte[:V]. Evaluation: adds the loss sum if loss_sum is given. */
static zinc_status projection(zinc_gpt2 *m, const float *x, int64_t rows, float *logits, int train,
                              double *loss_sum) {
    int C = m->s.channels, V = m->s.vocab;
    const float *wte;
    CHECK(module_enter(m, m->mod_embed, ZINC_FORWARD));
    CHECK(embed_view(m, 0, &wte));
    gpt2_matmul_forward(m->e, logits, x, wte, NULL, rows, C, V);
    if (train) {
        float dscale = 1.0f / (float)rows; /* the loss scale is applied as gradients are added */
        *loss_sum += gpt2_crossentropy(m->e, logits, logits, m->tgt, rows, V, dscale, m->row_loss);
        memset(m->dx, 0, (size_t)(rows * C) * sizeof(float));
        gpt2_matmul_backward(m->e, m->dx, NULL, NULL, logits, x, wte, rows, C, V);
    } else if (loss_sum) {
        *loss_sum += gpt2_crossentropy(m->e, NULL, logits, m->tgt, rows, V, 0.0f, m->row_loss);
    }
    return module_exit(m, m->mod_embed, ZINC_FORWARD);
}

typedef struct scatter_args {
    zinc_gpt2 *m;
    float *g;       /* wte's or wpe's float gradient */
    int64_t N;
    int T, positions; /* 0: rows by token (wte), 1: by position (wpe) */
} scatter_args;

/* Adds the gradient at the residual stream's input (m->dres) into the rows of wte or wpe the positions
 * used, for channels lo..hi-1: rows repeat, so the work is split by channel. */
static void scatter_channels(void *arg, int64_t lo, int64_t hi) {
    const scatter_args *a = arg;
    int64_t C = a->m->s.channels;
    for (int64_t c = lo; c < hi; c++)
        for (int64_t n = 0; n < a->N; n++) {
            int64_t r = a->positions ? n % a->T : (int64_t)a->m->inp[n];
            a->g[r * C + c] += a->m->dres[n * C + c];
        }
}

/* After projection(train): the gradients of everything, m->dx being the gradient at lnf's output. */
static zinc_status backward(zinc_gpt2 *m, int B, int T) {
    int C = m->s.channels, L = m->s.layers, H = m->s.heads, V = m->s.vocab;
    int64_t N = (int64_t)B * T, NC = N * C;
    CHECK(enter(m, m->mod_lnf, ZINC_BACKWARD, lnf_first(m), 2));
    memset(m->dres, 0, (size_t)NC * sizeof(float));
    gpt2_layernorm_backward(m->e, m->dres, m->g[GPT2_LNFW], m->g[GPT2_LNFB], m->dx, m->xs + L * NC, m->w[GPT2_LNFW],
                            m->lnfm, m->lnfr, N, C);
    CHECK(exit_backward(m, m->mod_lnf, lnf_first(m), 2));
    /* m->dres: the gradient at the residual stream above the current block */
    for (int l = L - 1; l >= 0; l--) {
        CHECK(enter(m, m->mod_block[l], ZINC_BACKWARD, block_first(l), NBLOCK_KINDS));
        block_acts *a = &m->acts[l];
        float *const *w = m->w, *const *g = m->g;
        const float *x = m->xs + l * NC;
        /* MLP branch: y = res2 + fcproj(gelu(fc(ln2(res2)))) */
        memset(m->dfchg, 0, (size_t)(4 * NC) * sizeof(float));
        gpt2_matmul_backward(m->e, m->dfchg, g[GPT2_FCPROJW], g[GPT2_FCPROJB], m->dres, a->fchg, w[GPT2_FCPROJW], N,
                             4 * C, C);
        memset(m->dfch, 0, (size_t)(4 * NC) * sizeof(float));
        gpt2_gelu_backward(m->e, m->dfch, a->fch, m->dfchg, 4 * NC);
        memset(m->dln, 0, (size_t)NC * sizeof(float));
        gpt2_matmul_backward(m->e, m->dln, g[GPT2_FCW], g[GPT2_FCB], m->dfch, a->ln2, w[GPT2_FCW], N, C, 4 * C);
        gpt2_layernorm_backward(m->e, m->dres, g[GPT2_LN2W], g[GPT2_LN2B], m->dln, a->res2, w[GPT2_LN2W], a->ln2m,
                                a->ln2r, N, C);
        /* attention branch: res2 = x + attproj(attn(qkv(ln1(x)))) */
        memset(m->datty, 0, (size_t)NC * sizeof(float));
        gpt2_matmul_backward(m->e, m->datty, g[GPT2_ATTPROJW], g[GPT2_ATTPROJB], m->dres, a->atty, w[GPT2_ATTPROJW], N,
                             C, C);
        memset(m->dqkv, 0, (size_t)(3 * NC) * sizeof(float));
        gpt2_attention_backward(m->e, m->dqkv, m->datt, m->datty, a->qkv, a->att, B, T, C, H);
        memset(m->dln, 0, (size_t)NC * sizeof(float));
        gpt2_matmul_backward(m->e, m->dln, g[GPT2_QKVW], g[GPT2_QKVB], m->dqkv, a->ln1, w[GPT2_QKVW], N, C, 3 * C);
        gpt2_layernorm_backward(m->e, m->dres, g[GPT2_LN1W], g[GPT2_LN1B], m->dln, x, w[GPT2_LN1W], a->ln1m, a->ln1r,
                                N, C);
        CHECK(exit_backward(m, m->mod_block[l], block_first(l), NBLOCK_KINDS));
    }
    /* embed: wte's gradient is the projection's dlogits^T lnf plus the token rows' */
    CHECK(module_enter(m, m->mod_embed, ZINC_BACKWARD));
    float *dwte = embed_grad(m, 0);
    if (!dwte) return ZINC_ERR_STATE;
    gpt2_matmul_backward(m->e, NULL, dwte, NULL, m->logits, m->lnf, NULL, N, C, V);
    scatter_args sa = {m, dwte, N, T, 0};
    CHECK(zinc_parallel_for(m->e, C, scatter_channels, &sa));
    CHECK(embed_grad_done(m, 0, dwte));
    float *dwpe = embed_grad(m, 1);
    if (!dwpe) return ZINC_ERR_STATE;
    sa.g = dwpe, sa.positions = 1;
    CHECK(zinc_parallel_for(m->e, C, scatter_channels, &sa));
    CHECK(embed_grad_done(m, 1, dwpe));
    return module_exit(m, m->mod_embed, ZINC_BACKWARD);
}

static void load_windows(zinc_gpt2 *m, const uint16_t *windows, int B, int T) {
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            m->inp[b * T + t] = windows[(size_t)b * (T + 1) + t];
            m->tgt[b * T + t] = windows[(size_t)b * (T + 1) + t + 1];
        }
}

static zinc_status check_batch(zinc_gpt2 *m, int B) {
    if (B < 1 || B > m->mb) {
        zinc_log(m->e, ZINC_LOG_ERROR, "gpt2: a batch of %d sequences; must be 1..%d (the micro batch)", B, m->mb);
        return ZINC_ERR_INVALID_ARG;
    }
    return ZINC_OK;
}

zinc_status zinc_gpt2_microstep(zinc_gpt2 *m, const uint16_t *windows, int B, double *loss_sum) {
    CHECK(check_batch(m, B));
    int T = m->T;
    int64_t N = (int64_t)B * T;
    load_windows(m, windows, B, T);
    CHECK(forward(m, B, T));
    CHECK(projection(m, m->lnf, N, m->logits, 1, loss_sum));
    return backward(m, B, T);
}

zinc_status zinc_gpt2_eval(zinc_gpt2 *m, const uint16_t *windows, int B, double *loss_sum) {
    CHECK(check_batch(m, B));
    int T = m->T;
    int64_t N = (int64_t)B * T;
    load_windows(m, windows, B, T);
    CHECK(forward(m, B, T));
    return projection(m, m->lnf, N, m->logits, 0, loss_sum);
}

zinc_status zinc_gpt2_next_logits(zinc_gpt2 *m, const uint16_t *tokens, int n, float *logits) {
    if (n < 1 || n > m->T) {
        zinc_log(m->e, ZINC_LOG_ERROR, "gpt2: %d tokens of context; must be 1..%d", n, m->T);
        return ZINC_ERR_INVALID_ARG;
    }
    for (int t = 0; t < n; t++) m->inp[t] = tokens[t];
    CHECK(forward(m, 1, n));
    return projection(m, m->lnf + (int64_t)(n - 1) * m->s.channels, 1, logits, 0, NULL);
}

/* ---------------------------------------------------------------- training and evaluation */

zinc_status zinc_gpt2_train_step(zinc_gpt2 *m, const gpt2_tokens *data, int64_t step, zinc_step_info *info,
                                 double *loss) {
    zinc_engine *e = m->e;
    int64_t gas = zinc_grad_accum_steps(e), B = zinc_train_batch_size(e);
    int W = zinc_world_size(e), r = zinc_rank(e), T = m->T;
    if (gpt2_batches_per_pass(data, T, B) < 1) {
        zinc_log(e, ZINC_LOG_ERROR, "gpt2: the training data has %lld tokens, fewer than one global batch needs "
                 "(train_batch_size %lld x context %d + 1)", (long long)data->n, (long long)B, T);
        return ZINC_ERR_INVALID_ARG;
    }
    uint16_t *win = malloc((size_t)m->mb * (size_t)(T + 1) * sizeof *win);
    if (!win) return ZINC_ERR_NOMEM;
    double sum = 0, t0 = now_s();
    zinc_status st = ZINC_OK;
    for (int64_t j = 0; j < gas && st == ZINC_OK; j++) {
        int64_t first = step * B + (j * W + r) * m->mb;
        for (int b = 0; b < m->mb; b++) {
            if (m->shuffle) gpt2_window_shuffled(data, T, B, first + b, m->shuffle_seed, win + (size_t)b * (T + 1));
            else gpt2_window(data, T, B, first + b, win + (size_t)b * (T + 1));
        }
        st = zinc_gpt2_microstep(m, win, m->mb, &sum);
    }
    free(win);
    double ts = now_s();
    if (st == ZINC_OK) st = zinc_step(e, info);
    if (st == ZINC_OK) st = zinc_allreduce_sum(e, &sum, 1);
    double t1 = now_s();
    m->t_engine += t1 - ts;
    m->t_steps += t1 - t0;
    if (st == ZINC_OK && loss) *loss = sum / ((double)B * T);
    return st;
}

zinc_status zinc_gpt2_val_loss(zinc_gpt2 *m, const gpt2_tokens *data, int64_t batches, double *loss) {
    zinc_engine *e = m->e;
    int64_t B = zinc_train_batch_size(e);
    int W = zinc_world_size(e), r = zinc_rank(e), T = m->T;
    int64_t have = gpt2_batches_per_pass(data, T, B);
    if (have < 1) {
        zinc_log(e, ZINC_LOG_ERROR, "gpt2: the validation data has %lld tokens, fewer than one global batch needs "
                 "(train_batch_size %lld x context %d + 1)", (long long)data->n, (long long)B, T);
        return ZINC_ERR_INVALID_ARG;
    }
    if (batches > have) batches = have;
    uint16_t *win = malloc((size_t)m->mb * (size_t)(T + 1) * sizeof *win);
    if (!win) return ZINC_ERR_NOMEM;
    double sum = 0;
    zinc_status st = ZINC_OK;
    int64_t chunks = batches * B / m->mb; /* a multiple of W: B = mb x W x gas */
    for (int64_t c = r; c < chunks && st == ZINC_OK; c += W) {
        for (int b = 0; b < m->mb; b++) gpt2_window(data, T, B, c * m->mb + b, win + (size_t)b * (T + 1));
        st = zinc_gpt2_eval(m, win, m->mb, &sum);
    }
    free(win);
    if (st == ZINC_OK) st = zinc_allreduce_sum(e, &sum, 1);
    if (st == ZINC_OK) *loss = sum / ((double)batches * B * T);
    return st;
}

zinc_status zinc_gpt2_gather_llmc(zinc_gpt2 *m, float *out) {
    int64_t n = zinc_numel_total(m->e);
    float *all = malloc((size_t)n * sizeof *all);
    if (!all) return ZINC_ERR_NOMEM;
    zinc_status st = zinc_gather_master(m->e, all, (size_t)n);
    if (st == ZINC_OK) {
        int64_t off = 0;
        for (int i = 0; i < m->nparams; i++) {
            int k = m->pkind[i];
            int64_t cnt = gpt2_kind_numel(&m->s, k);
            memcpy(out + gpt2_llmc_offset(&m->s, k, m->player[i]), all + off, (size_t)cnt * sizeof(float));
            off += cnt;
        }
    }
    free(all);
    return st;
}
