/* See gpt2.h. Forward: embed -> blocks -> lnf, then the tied output projection and the loss outside any
 * module (on the float copy of wte). Backward: the projection first (into dlnf and the float wte
 * gradient), then lnf, the blocks last to first, and embed, where the projection's wte gradient joins the
 * embedding's. Every module entry reads its parameters as float (in place for fp32, else through
 * zinc_param_to_f32) and every backward exit adds the float gradients of the unscaled loss into the
 * engine's buffers with zinc_grad_add_f32, which applies the loss scale. */
#include "gpt2.h"

#include <math.h>
#include <omp.h>
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
    float *wscratch, *gscratch;
    float *wte_f, *dwte_f;  /* the tied projection: first V rows of wte, and their gradient from it */
    float *xs;              /* residual stream: (L + 1) x N x C */
    block_acts *acts;
    float *lnf, *lnfm, *lnfr, *logits;
    float *dx, *dres, *dln, *datty, *dqkv, *datt, *dfchg, *dfch, *dtmp;
    int32_t *inp, *tgt;
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

void zinc_gpt2_destroy(zinc_gpt2 *m) {
    if (!m) return;
    for (int l = 0; m->acts && l < m->s.layers; l++) {
        block_acts *a = &m->acts[l];
        float **f[] = {&a->ln1, &a->ln1m, &a->ln1r, &a->qkv, &a->att, &a->atty,
                       &a->res2, &a->ln2, &a->ln2m, &a->ln2r, &a->fch, &a->fchg};
        for (size_t i = 0; i < sizeof f / sizeof *f; i++) free(*f[i]);
    }
    free(m->acts);
    float *bufs[] = {m->wscratch, m->gscratch, m->wte_f, m->dwte_f, m->xs,    m->lnf,   m->lnfm,  m->lnfr,
                     m->logits,   m->dx,       m->dres,  m->dln,    m->datty, m->dqkv,  m->datt,  m->dfchg,
                     m->dfch,     m->dtmp};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) free(bufs[i]);
    free(m->inp);
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
    if (cfg->threads > 0) omp_set_num_threads(cfg->threads);
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

    size_t embed = (size_t)(m->s.padded_vocab + m->s.max_context) * (size_t)C, block = 0;
    for (int k = GPT2_LN1W; k <= GPT2_FCPROJB; k++) block += (size_t)gpt2_kind_numel(&m->s, k);
    size_t scratch = embed > block ? embed : block;
    /* fp32 parameters are read in place: the float copies are for bf16/fp16 only */
    m->wscratch = malloc((zinc_compute_dtype(e) == ZINC_FP32 ? 1 : scratch) * sizeof(float));
    m->gscratch = malloc(scratch * sizeof(float));
    m->wte_f = malloc((size_t)V * C * sizeof(float));
    m->dwte_f = malloc((size_t)V * C * sizeof(float));
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
    if (!m->wscratch || !m->gscratch || !m->wte_f || !m->dwte_f || !m->xs || !m->lnf || !m->lnfm || !m->lnfr ||
        !m->logits || !m->dx || !m->dres || !m->dln || !m->datty || !m->dqkv || !m->datt || !m->dfchg || !m->dfch ||
        !m->dtmp || !m->inp || !m->tgt)
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

static void to_float(float *dst, const void *src, zinc_dtype t, int64_t n) {
    if (t == ZINC_BF16) {
        const uint16_t *h = src;
#pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < n; i++) {
            uint32_t u = (uint32_t)h[i] << 16;
            memcpy(&dst[i], &u, 4);
        }
    } else if (t == ZINC_FP16) {
        const uint16_t *h = src;
#pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < n; i++) dst[i] = zinc_fp16_to_f32(h[i]);
    } else {
        memcpy(dst, src, (size_t)n * sizeof(float));
    }
}

/* Enters a module, points m->w[kind] at float views of its parameters (in place for fp32) and, in
 * backward, m->g[kind] at zeroed float gradients. Parameters first..first+count-1 (registration order). */
static zinc_status enter(zinc_gpt2 *m, int module, zinc_phase ph, int first, int count) {
    CHECK(module_enter(m, module, ph));
    zinc_dtype t = zinc_compute_dtype(m->e);
    size_t off = 0;
    for (int i = first; i < first + count; i++) {
        int k = m->pkind[i];
        int64_t n = gpt2_kind_numel(&m->s, k);
        const void *data = zinc_param_data(m->params[i]);
        if (!data) return ZINC_ERR_STATE;
        if (t == ZINC_FP32) m->w[k] = (float *)data;
        else if (k == GPT2_WTE) m->w[k] = NULL; /* only its first V rows are read, through wte_f */
        else {
            m->w[k] = m->wscratch + off;
            CHECK(zinc_param_to_f32(m->params[i], m->w[k]));
        }
        if (k == GPT2_WTE && ph == ZINC_FORWARD) to_float(m->wte_f, data, t, (int64_t)m->s.vocab * m->s.channels);
        if (ph == ZINC_BACKWARD) {
            m->g[k] = m->gscratch + off;
            memset(m->g[k], 0, (size_t)n * sizeof(float));
        }
        off += (size_t)n;
    }
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

/* Forward over B sequences of T tokens in m->inp, up to the final LayerNorm's output in m->lnf. */
static zinc_status forward(zinc_gpt2 *m, int B, int T) {
    int C = m->s.channels, L = m->s.layers, H = m->s.heads;
    int64_t N = (int64_t)B * T, NC = N * C;
    CHECK(enter(m, m->mod_embed, ZINC_FORWARD, 0, 2));
    float *x0 = m->xs;
    const float *wpe = m->w[GPT2_WPE];
#pragma omp parallel for schedule(static)
    for (int64_t n = 0; n < N; n++) {
        const float *te = m->wte_f + (int64_t)m->inp[n] * C, *pe = wpe + (n % T) * C;
        for (int c = 0; c < C; c++) x0[n * C + c] = te[c] + pe[c];
    }
    CHECK(module_exit(m, m->mod_embed, ZINC_FORWARD));
    for (int l = 0; l < L; l++) {
        CHECK(enter(m, m->mod_block[l], ZINC_FORWARD, block_first(l), NBLOCK_KINDS));
        block_acts *a = &m->acts[l];
        float *const *w = m->w;
        const float *x = m->xs + l * NC;
        float *y = m->xs + (l + 1) * NC;
        gpt2_layernorm_forward(a->ln1, a->ln1m, a->ln1r, x, w[GPT2_LN1W], w[GPT2_LN1B], N, C);
        gpt2_matmul_forward(a->qkv, a->ln1, w[GPT2_QKVW], w[GPT2_QKVB], N, C, 3 * C);
        gpt2_attention_forward(a->atty, a->att, a->qkv, B, T, C, H);
        gpt2_matmul_forward(m->dtmp, a->atty, w[GPT2_ATTPROJW], w[GPT2_ATTPROJB], N, C, C);
        for (int64_t i = 0; i < NC; i++) a->res2[i] = x[i] + m->dtmp[i];
        gpt2_layernorm_forward(a->ln2, a->ln2m, a->ln2r, a->res2, w[GPT2_LN2W], w[GPT2_LN2B], N, C);
        gpt2_matmul_forward(a->fch, a->ln2, w[GPT2_FCW], w[GPT2_FCB], N, C, 4 * C);
        gpt2_gelu_forward(a->fchg, a->fch, 4 * NC);
        gpt2_matmul_forward(m->dtmp, a->fchg, w[GPT2_FCPROJW], w[GPT2_FCPROJB], N, 4 * C, C);
        for (int64_t i = 0; i < NC; i++) y[i] = a->res2[i] + m->dtmp[i];
        CHECK(module_exit(m, m->mod_block[l], ZINC_FORWARD));
    }
    CHECK(enter(m, m->mod_lnf, ZINC_FORWARD, lnf_first(m), 2));
    gpt2_layernorm_forward(m->lnf, m->lnfm, m->lnfr, m->xs + L * NC, m->w[GPT2_LNFW], m->w[GPT2_LNFB], N, C);
    return module_exit(m, m->mod_lnf, ZINC_FORWARD);
}

static zinc_status backward(zinc_gpt2 *m, int B, int T) {
    int C = m->s.channels, L = m->s.layers, H = m->s.heads, V = m->s.vocab;
    int64_t N = (int64_t)B * T, NC = N * C;
    /* the tied projection: logits = lnf wte[:V]^T */
    memset(m->dx, 0, (size_t)NC * sizeof(float));
    memset(m->dwte_f, 0, (size_t)V * C * sizeof(float));
    gpt2_matmul_backward(m->dx, m->dwte_f, NULL, m->logits, m->lnf, m->wte_f, N, C, V);

    CHECK(enter(m, m->mod_lnf, ZINC_BACKWARD, lnf_first(m), 2));
    memset(m->dres, 0, (size_t)NC * sizeof(float));
    gpt2_layernorm_backward(m->dres, m->g[GPT2_LNFW], m->g[GPT2_LNFB], m->dx, m->xs + L * NC, m->w[GPT2_LNFW],
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
        gpt2_matmul_backward(m->dfchg, g[GPT2_FCPROJW], g[GPT2_FCPROJB], m->dres, a->fchg, w[GPT2_FCPROJW], N, 4 * C,
                             C);
        memset(m->dfch, 0, (size_t)(4 * NC) * sizeof(float));
        gpt2_gelu_backward(m->dfch, a->fch, m->dfchg, 4 * NC);
        memset(m->dln, 0, (size_t)NC * sizeof(float));
        gpt2_matmul_backward(m->dln, g[GPT2_FCW], g[GPT2_FCB], m->dfch, a->ln2, w[GPT2_FCW], N, C, 4 * C);
        gpt2_layernorm_backward(m->dres, g[GPT2_LN2W], g[GPT2_LN2B], m->dln, a->res2, w[GPT2_LN2W], a->ln2m,
                                a->ln2r, N, C);
        /* attention branch: res2 = x + attproj(attn(qkv(ln1(x)))) */
        memset(m->datty, 0, (size_t)NC * sizeof(float));
        gpt2_matmul_backward(m->datty, g[GPT2_ATTPROJW], g[GPT2_ATTPROJB], m->dres, a->atty, w[GPT2_ATTPROJW], N, C,
                             C);
        memset(m->dqkv, 0, (size_t)(3 * NC) * sizeof(float));
        gpt2_attention_backward(m->dqkv, m->datt, m->datty, a->qkv, a->att, B, T, C, H);
        memset(m->dln, 0, (size_t)NC * sizeof(float));
        gpt2_matmul_backward(m->dln, g[GPT2_QKVW], g[GPT2_QKVB], m->dqkv, a->ln1, w[GPT2_QKVW], N, C, 3 * C);
        gpt2_layernorm_backward(m->dres, g[GPT2_LN1W], g[GPT2_LN1B], m->dln, x, w[GPT2_LN1W], a->ln1m, a->ln1r, N, C);
        CHECK(exit_backward(m, m->mod_block[l], block_first(l), NBLOCK_KINDS));
    }
    CHECK(enter(m, m->mod_embed, ZINC_BACKWARD, 0, 2));
    float *dwte = m->g[GPT2_WTE], *dwpe = m->g[GPT2_WPE];
    int64_t VC = (int64_t)V * C;
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < VC; i++) dwte[i] += m->dwte_f[i];
    /* token rows repeat, so the scatter runs over channels in parallel */
#pragma omp parallel for schedule(static)
    for (int c = 0; c < C; c++)
        for (int64_t n = 0; n < N; n++) {
            float d = m->dres[n * C + c];
            dwte[(int64_t)m->inp[n] * C + c] += d;
            dwpe[(n % T) * C + c] += d;
        }
    return exit_backward(m, m->mod_embed, 0, 2);
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
    int T = m->T, C = m->s.channels, V = m->s.vocab;
    int64_t N = (int64_t)B * T;
    load_windows(m, windows, B, T);
    CHECK(forward(m, B, T));
    gpt2_matmul_forward(m->logits, m->lnf, m->wte_f, NULL, N, C, V);
    float dscale = 1.0f / (float)N; /* the loss scale is applied as gradients are added (exit_backward) */
    *loss_sum += gpt2_crossentropy(m->logits, m->logits, m->tgt, N, V, dscale); /* dlogits in place */
    return backward(m, B, T);
}

zinc_status zinc_gpt2_eval(zinc_gpt2 *m, const uint16_t *windows, int B, double *loss_sum) {
    CHECK(check_batch(m, B));
    int T = m->T, C = m->s.channels, V = m->s.vocab;
    int64_t N = (int64_t)B * T;
    load_windows(m, windows, B, T);
    CHECK(forward(m, B, T));
    gpt2_matmul_forward(m->logits, m->lnf, m->wte_f, NULL, N, C, V);
    *loss_sum += gpt2_crossentropy(NULL, m->logits, m->tgt, N, V, 0.0f);
    return ZINC_OK;
}

zinc_status zinc_gpt2_next_logits(zinc_gpt2 *m, const uint16_t *tokens, int n, float *logits) {
    if (n < 1 || n > m->T) {
        zinc_log(m->e, ZINC_LOG_ERROR, "gpt2: %d tokens of context; must be 1..%d", n, m->T);
        return ZINC_ERR_INVALID_ARG;
    }
    for (int t = 0; t < n; t++) m->inp[t] = tokens[t];
    CHECK(forward(m, 1, n));
    gpt2_matmul_forward(logits, m->lnf + (int64_t)(n - 1) * m->s.channels, m->wte_f, NULL, 1, m->s.channels,
                        m->s.vocab);
    return ZINC_OK;
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
