/* See gpt2.h. Forward: embed -> blocks -> lnf, then "embed" entered again (forward) for the tied output
 * projection: the logits, the loss, and the projection's input gradient dlnf = dlogits wte, which only
 * read wte. Backward: lnf, the blocks last to first, then embed, whose single backward entry computes
 * wte's whole gradient: the projection's dlogits^T lnf (both kept from the forward) plus the token rows.
 * So no module is entered twice for backward: at stages 2-3 the embedding is reduced once per micro-step
 * like any module, with no held buffer. Every module entry reads its parameters as float (in place for
 * fp32, else through the table's to_f32) and every backward exit adds the float gradients of the unscaled
 * loss into the engine's buffers with the table's grad_add, which applies the loss scale; with fp32
 * compute and fp32 gradients the embedding's gradients are written straight into the engine's buffers
 * instead. What is computed is decided here once for every device; where (the host or the GPU) is the
 * table of gpt2_internal.h that create picks from the engine's device. */
#include "gpt2.h"

#include <assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gpt2_gemm.h"
#include "gpt2_internal.h"
#include "gpt2_layers.h"
#include "../common/example_rng.h"

#define NBLOCK_KINDS 12 /* GPT2_LN1W .. GPT2_FCPROJB */

static size_t z(size_t n) { return n ? n : 1; }

/* ---------------------------------------------------------------- deterministic random numbers */

static zinc_status init_param(void *userdata, const zinc_param_info *p, uint64_t seed, float *out) {
    const gpt2_model *m = userdata;
    int kind = m->pkind[p->index], layer = m->player[p->index];
    if (m->init) {
        memcpy(out, m->init + gpt2_llmc_offset(&m->s, kind, layer), (size_t)p->numel * sizeof(float));
        return ZINC_OK;
    }
    double std = 0.02;
    switch (kind) {
    case GPT2_LN1W:
    case GPT2_LN2W:
    case GPT2_LNFW:
        for (int64_t i = 0; i < p->numel; i++) out[i] = 1.0f;
        return ZINC_OK;
    case GPT2_ATTPROJW:
    case GPT2_FCPROJW: std = 0.02 / sqrt(2.0 * m->s.layers); /* fall through */
    case GPT2_WTE:
    case GPT2_WPE:
    case GPT2_QKVW:
    case GPT2_FCW: {
        uint64_t s = seed;
        int64_t n = kind == GPT2_WTE ? (int64_t)m->s.vocab * m->s.channels : p->numel; /* padding rows 0 */
        for (int64_t i = 0; i < p->numel; i++) out[i] = i < n ? (float)(example_normal(&s) * std) : 0.0f;
        return ZINC_OK;
    }
    default: memset(out, 0, (size_t)p->numel * sizeof(float)); return ZINC_OK;
    }
}

/* --init without a copy of the model: zinc_build_ranged asks for pieces of what this rank holds, read
 * from the llm.c file at the parameter's offset. */
static zinc_status init_param_range(void *userdata, const zinc_param_info *p, uint64_t seed, int64_t first, int64_t n,
                                    float *out) {
    (void)seed;
    gpt2_model *m = userdata;
    char err[512];
    if (m->init_read) return m->init_read(m->init_ctx, m->pkind[p->index], m->player[p->index], first, n, out);
    int64_t at = gpt2_llmc_offset(&m->s, m->pkind[p->index], m->player[p->index]) + first;
    zinc_status st = gpt2_model_read_range(m->init_file, at, n, out, err, sizeof err);
    if (st != ZINC_OK) zinc_log(m->e, ZINC_LOG_ERROR, "gpt2: --init: %s", err);
    return st;
}

/* ---------------------------------------------------------------- create / destroy */

/* Weight decay on the matrices; Muon (ZINC_PARAM_MUON, ignored by other optimizers) on the hidden ones:
 * every 2-D weight but the embeddings (wte is also the tied head). */
static unsigned decay_flags(const gpt2_shape *s, int kind) {
    if (gpt2_kind_muon_rows(s, kind)) return ZINC_PARAM_DECAY | ZINC_PARAM_MUON;
    return kind == GPT2_WTE || kind == GPT2_WPE ? ZINC_PARAM_DECAY : ZINC_PARAM_NO_DECAY;
}

static int add_param(gpt2_model *m, int module, int kind, int layer, const char *name) {
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
    zinc_param *p = zinc_param_add(m->e, module, name, ndim, shape, decay_flags(&m->s, kind));
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
static size_t scratch_floats(const gpt2_model *m) {
    size_t block = 0, C = (size_t)m->s.channels, wte = (size_t)m->s.padded_vocab * C,
           wpe = (size_t)m->s.max_context * C;
    for (int k = GPT2_LN1W; k <= GPT2_FCPROJB; k++) block += (size_t)gpt2_kind_numel(&m->s, k);
    size_t need = (m->copies ? 2 : 1) * (block > 2 * C ? block : 2 * C);
    if (m->copies || !m->direct_embed) {
        size_t embed = wte > wpe ? wte : wpe;
        if (embed > need) need = embed;
    }
    if (m->copies && m->ops->embed_widens && wpe + wte > need) need = wpe + wte; /* forward: both at once */
    return need;
}

/* bf16 compute on the host multiplies in bf16 (oneDNN's bf16 GEMM, where it runs on this CPU), and so does
 * any compute dtype with --products bf16 (gpt2_products_selected): the products' operands rounded to bf16
 * as torch autocast rounds them, into one workspace sized for the largest product (bf16_ws_elems).
 * Elsewhere bf16 weights are widened and multiplied in float. */
static int bf16_products(const gpt2_model *m, zinc_dtype compute) {
    gpt2_products p = gpt2_products_selected();
    int want = p == GPT2_PRODUCTS_BF16 || (p == GPT2_PRODUCTS_AUTO && compute == ZINC_BF16);
    return !m->ops->device && want && gpt2_gemm_bf16_available();
}

int gpt2_model_bf16_products(const gpt2_model *m) { return m->bf16_products; }

static size_t bf16_ws_elems(const gpt2_model *m) {
    int64_t N = (int64_t)m->mb * m->T, C = m->s.channels, e = 0;
    const int64_t io[5][2] = {{C, 3 * C}, {C, C}, {C, 4 * C}, {4 * C, C}, {C, m->s.vocab}};
    for (int i = 0; i < 5; i++) {
        int64_t x = gpt2_matmul_bf16_elems(N, (int)io[i][0], (int)io[i][1]);
        if (x > e) e = x;
    }
    return (size_t)e;
}

/* Every buffer the model allocates with its table's alloc, with its bytes and category: the one place they
 * are sized. create allocates them after zinc_build, destroy releases them, and create declares their sum
 * (zinc_memory_declare) before zinc_build, as gpt2_memory does for `zinc mem estimate`; a buffer added
 * here is allocated, freed and declared alike. At most gpt2_nbufs(L) entries. */
typedef struct gpt2_buf {
    void **slot;
    size_t bytes;
    zinc_mem_category cat;
} gpt2_buf;

static int gpt2_nbufs(int L) { return 12 * L + 24; }

static int gpt2_buffers(gpt2_model *m, gpt2_buf *b) {
    int n = 0, L = m->s.layers, C = m->s.channels, V = m->s.vocab, H = m->s.heads, T = m->T;
    size_t N = (size_t)m->mb * (size_t)T, NC = N * (size_t)C, att = (size_t)m->mb * H * T * T, datt = att;
    if (m->ops->attention_fwd_lse) att = (size_t)m->mb * H * T, datt = 0; /* log-sum-exp per row, no matrix */
#define B(p, sz, c) b[n++] = (gpt2_buf){(void **)&(p), (sz), (c)}
    B(m->scratch, scratch_floats(m) * sizeof(float), ZINC_MEM_SCRATCH);
    B(m->xs, (size_t)(L + 1) * NC * sizeof(float), ZINC_MEM_ACTIVATIONS);
    /* with activation checkpointing one block's set, recomputed in each block's backward entry */
    for (int l = 0; l < (m->ckpt ? 1 : L); l++) {
        gpt2_block_acts *a = &m->acts[l];
        const zinc_mem_category A = ZINC_MEM_ACTIVATIONS;
        B(a->ln1, NC * 4, A);
        B(a->ln1m, N * 4, A);
        B(a->ln1r, N * 4, A);
        B(a->qkv, 3 * NC * 4, A);
        B(a->att, z(att) * 4, A);
        B(a->atty, NC * 4, A);
        B(a->res2, NC * 4, A);
        B(a->ln2, NC * 4, A);
        B(a->ln2m, N * 4, A);
        B(a->ln2r, N * 4, A);
        B(a->fch, 4 * NC * 4, A);
        B(a->fchg, 4 * NC * 4, A);
    }
    const zinc_mem_category A = ZINC_MEM_ACTIVATIONS, S = ZINC_MEM_SCRATCH;
    B(m->lnf, NC * 4, A);
    B(m->lnfm, N * 4, A);
    B(m->lnfr, N * 4, A);
    B(m->logits, N * (size_t)V * 4, A);
    B(m->dx, NC * 4, S);
    B(m->dres, NC * 4, S);
    B(m->dln, NC * 4, S);
    B(m->datty, NC * 4, S);
    B(m->dqkv, 3 * NC * 4, S);
    B(m->datt, z(datt) * 4, S);
    /* GELU's gradient at its output and the products' scratch: only for tables without the fused entries */
    B(m->dfchg, z(m->ops->gelu_fwd_deriv ? 0 : 4 * NC) * 4, S);
    B(m->dfch, 4 * NC * 4, S);
    B(m->dtmp, z(m->ops->matmul_fwd_res ? 0 : NC) * 4, S);
    B(m->row_loss, (size_t)m->gas * N * sizeof(double), S);
    if (m->bf16_products) B(m->bf16ws, bf16_ws_elems(m) * sizeof(uint16_t), S);
    if (m->ops->device) { /* the token ids where the table computes (the host path uses inp/tgt) */
        B(m->dinp, N * sizeof(int32_t), S);
        B(m->dtgt, N * sizeof(int32_t), S);
    }
#undef B
    return n;
}

/* Host memory besides the table's buffers: the token ids (and the row losses' host copy on a device), and
 * the host path's BLAS buffers (GPT2_BLAS_* for OpenBLAS, GPT2_ONEDNN_* for oneDNN: base and per thread). */
static size_t host_extra_bytes(const gpt2_model *m, int threads) {
    size_t N = (size_t)m->mb * (size_t)m->T, bytes = 2 * N * sizeof(int32_t);
    if (m->ops->device)
        bytes += (size_t)m->gas * N * sizeof(double);
    else if (gpt2_gemm_selected() == GPT2_GEMM_ONEDNN)
        bytes += GPT2_ONEDNN_BASE_BYTES + (size_t)threads * GPT2_ONEDNN_THREAD_BYTES;
    else
        bytes += GPT2_BLAS_BASE_BYTES + (size_t)threads * GPT2_BLAS_THREAD_BYTES;
    return bytes;
}

/* The sums by category of the buffers (in the table's memory) and the host extras. */
static void buffer_sums(gpt2_model *m, int threads, uint64_t *act, uint64_t *scr, uint64_t *host) {
    gpt2_buf *b = malloc((size_t)gpt2_nbufs(m->s.layers) * sizeof *b);
    *act = *scr = 0;
    *host = host_extra_bytes(m, threads);
    if (!b) return;
    int n = gpt2_buffers(m, b);
    for (int i = 0; i < n; i++) *(b[i].cat == ZINC_MEM_ACTIVATIONS ? act : scr) += b[i].bytes;
    free(b);
}

void gpt2_destroy(gpt2_model *m) {
    if (!m) return;
#ifdef ZINC_GPT2_CUDA
    gpt2_cuda_destroy(m); /* first: it waits for the work that may still use the buffers */
#endif
    gpt2_buf *b = m->ops && m->acts ? malloc((size_t)gpt2_nbufs(m->s.layers) * sizeof *b) : NULL;
    if (b) {
        int n = gpt2_buffers(m, b);
        for (int i = 0; i < n; i++)
            if (*b[i].slot) m->ops->release(m, *b[i].slot);
        free(b);
    }
    free(m->acts);
    free(m->inp);
    free(m->tgt);
    free(m->row_loss_host);
    free(m->mod_block);
    free(m->params);
    free(m->pkind);
    free(m->player);
    free(m);
}

/* Where the model computes: the host when the engine's memory is host memory, else the GPU path. */
static zinc_status choose_ops(gpt2_model *m) {
    if (zinc_device_host_addressable(m->e)) {
        m->ops = &gpt2_host_ops;
        return ZINC_OK;
    }
#ifdef ZINC_GPT2_CUDA
    if (zinc_device(m->e) == ZINC_DEVICE_CUDA) {
        zinc_status st = gpt2_cuda_create(m);
        if (st == ZINC_OK) m->ops = &gpt2_cuda_ops;
        return st;
    }
    return ZINC_ERROR(ZINC_ERR_UNSUPPORTED,
                      "gpt2: the engine's device memory is not host memory and not cuda; the model "
                      "computes on the host (device cpu) or on a CUDA GPU (device cuda)");
#else
    static const char no_gpu[] = "gpt2: the engine is on a GPU but this build of the GPT-2 example has no GPU path "
                                 "(zinc was built without the CUDA backend, or without examples/gpt2/gpt2_kernels.cu); "
                                 "use device cpu (--device cpu), or rebuild with nvcc on the PATH (-DZINC_CUDA=ON)";
    zinc_log(m->e, ZINC_LOG_ERROR, "%s", no_gpu);
    return ZINC_ERROR(ZINC_ERR_UNSUPPORTED, "%s", no_gpu);
#endif
}

/* The activations' size, as the allocations below add it up (double: the message's figure, never a size). */
static double act_gib(const gpt2_model *m) {
    double N = (double)m->mb * m->T, C = m->s.channels, att = N * m->s.heads * m->T, L = m->s.layers;
    double floats = (L + 1) * N * C + L * (14 * N * C + 4 * N + att) + N * C + 2 * N + N * m->s.vocab +
                    (18 * N * C + att) + (double)m->gas * N * 2;
    return floats * 4 / 1073741824.0;
}

zinc_status gpt2_create(zinc_engine *e, const gpt2_config *cfg, gpt2_model **out) {
    char why[256];
    *out = NULL;
    if (!cfg || gpt2_shape_check(&cfg->shape, why, sizeof why))
        return ZINC_ERROR(ZINC_ERR_INVALID_ARG, "gpt2: %s", cfg ? why : "no config");
    if (cfg->context < 1 || cfg->context > cfg->shape.max_context)
        return ZINC_ERROR(ZINC_ERR_INVALID_ARG, "gpt2: context %d must be 1..%d (the model's max context)",
                          cfg->context, cfg->shape.max_context);
    gpt2_layers_init();
    gpt2_model *m = calloc(1, sizeof *m);
    if (!m) return ZINC_ERROR(ZINC_ERR_NOMEM, "gpt2: out of memory for the model");
    m->e = e;
    m->s = cfg->shape;
    m->T = cfg->context;
    m->mb = (int)zinc_micro_batch_size(e);
    m->gas = zinc_grad_accum_steps(e);
    int L = m->s.layers, C = m->s.channels, V = m->s.vocab, H = m->s.heads, T = m->T;
    /* The activation sizes come from the user's micro batch, context, width, heads and vocabulary: each is
     * checked before it is used (a product that wraps would allocate a small buffer and overrun it). */
    uint64_t n64 = 0, nc64 = 0, att64 = 0, nv64 = 0;
    const uint64_t max_elems = (uint64_t)1 << 40;
    if (m->mb < 1 || __builtin_mul_overflow((uint64_t)m->mb, (uint64_t)T, &n64) ||
        __builtin_mul_overflow(n64, (uint64_t)C * 4, &nc64) || __builtin_mul_overflow(n64, (uint64_t)V, &nv64) ||
        __builtin_mul_overflow(n64, (uint64_t)H * (uint64_t)T, &att64) || nc64 > max_elems || nv64 > max_elems ||
        att64 > max_elems) {
        zinc_status bad =
            ZINC_ERROR(ZINC_ERR_INVALID_ARG,
                       "gpt2: micro batch %d x context %d gives activations beyond 2^40 elements (width %d, "
                       "%d heads, vocabulary %d): lower train_micro_batch_size_per_gpu or --context",
                       m->mb, T, C, H, V);
        free(m);
        return bad;
    }
    size_t N = (size_t)n64; /* the buffers' sizes: gpt2_buffers, from the same checked shape */
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

    zinc_status st = choose_ops(m);
    if (st != ZINC_OK) {
        gpt2_destroy(m);
        return st;
    }
    m->copies = zinc_compute_dtype(e) != ZINC_FP32;
    m->direct_embed = !m->copies && zinc_grad_dtype(e) == ZINC_FP32;
    m->ckpt = zinc_activation_checkpointing(e);
    m->bf16_products = bf16_products(m, zinc_compute_dtype(e));
    const gpt2_ops *o = m->ops;
    /* the model's memory, declared before zinc_build (its pre-flight checks the whole process) and
     * allocated after it (the build's scratch is gone by then) */
    uint64_t act, scr, host;
    buffer_sums(m, zinc_cpu_threads(e), &act, &scr, &host);
    zinc_mem_kind where = o->device ? ZINC_MEMKIND_DEVICE : ZINC_MEMKIND_HOST;
    if ((st = zinc_memory_declare(e, ZINC_MEM_ACTIVATIONS, where, act, "gpt2 activations")) != ZINC_OK ||
        (st = zinc_memory_declare(e, ZINC_MEM_SCRATCH, where, scr, "gpt2 gradients of activations, scratch")) !=
            ZINC_OK ||
        (st = zinc_memory_declare(e, ZINC_MEM_SCRATCH, ZINC_MEMKIND_HOST, host, "gpt2 token ids, BLAS buffers")) !=
            ZINC_OK) {
        gpt2_destroy(m);
        return st;
    }

    m->init = cfg->init;
    m->init_file = cfg->init_file;
    m->init_read = cfg->init_read;
    m->init_ctx = cfg->init_ctx;
    st = m->init_file || m->init_read ? zinc_build_ranged(e, init_param_range, m) : zinc_build(e, init_param, m);
    m->init = NULL;
    m->init_file = NULL;
    m->init_read = NULL;
    if (st != ZINC_OK) {
        gpt2_destroy(m);
        return st;
    }

    gpt2_buf *bufs = malloc((size_t)gpt2_nbufs(L) * sizeof *bufs);
    if (!bufs) goto nomem;
    int nb = gpt2_buffers(m, bufs);
    for (int i = 0; i < nb && st == ZINC_OK; i++) st = o->alloc(m, bufs[i].slot, bufs[i].bytes);
    free(bufs);
    if (st != ZINC_OK) goto fail;
    m->inp = malloc(N * sizeof(int32_t)), m->tgt = malloc(N * sizeof(int32_t));
    if (!m->inp || !m->tgt) goto nomem;
    if (!o->device)
        m->dinp = m->inp, m->dtgt = m->tgt;
    else if (!(m->row_loss_host = malloc((size_t)m->gas * N * sizeof(double))))
        goto nomem;
    *out = m;
    return ZINC_OK;
nomem:
    st = ZINC_ERR_NOMEM;
fail:
    /* The model's own buffers (declared to zinc_build's pre-flight, allocated after it): say what they need
     * and how to lower it. */
    st = ZINC_ERROR(st,
                    "gpt2: no %s memory for the model's activations: about %.2f GiB for micro batch %d x context %d x "
                    "width %d x %d layers (+ logits over %d tokens, attention %d heads x context^2); lower "
                    "train_micro_batch_size_per_gpu, --context, --width or --layers",
                    m->ops ? m->ops->name : "host", act_gib(m), m->mb, T, C, L, V, H);
    gpt2_destroy(m);
    return st;
bad:
    gpt2_destroy(m);
    return ZINC_ERR_INVALID_ARG; /* zinc_last_error() holds the engine's message */
}

zinc_status gpt2_memory(const gpt2_config *cfg, int micro_batch, int64_t grad_accum_steps, zinc_dtype compute_dtype,
                        zinc_dtype grad_dtype, int checkpointing, int threads, int on_gpu, uint64_t *activations,
                        uint64_t *scratch, uint64_t *host_extra) {
    char why[256];
    if (!cfg || gpt2_shape_check(&cfg->shape, why, sizeof why) || cfg->context < 1 ||
        cfg->context > cfg->shape.max_context || micro_batch < 1 || grad_accum_steps < 1)
        return ZINC_ERR_INVALID_ARG;
    gpt2_model m = {.s = cfg->shape, .T = cfg->context, .mb = micro_batch, .gas = grad_accum_steps};
#ifdef ZINC_GPT2_CUDA
    m.ops = on_gpu ? &gpt2_cuda_ops : &gpt2_host_ops;
#else
    if (on_gpu) return ZINC_ERR_UNSUPPORTED;
    m.ops = &gpt2_host_ops;
#endif
    m.copies = compute_dtype != ZINC_FP32;
    m.direct_embed = !m.copies && grad_dtype == ZINC_FP32;
    m.ckpt = checkpointing != 0;
    m.bf16_products = bf16_products(&m, compute_dtype);
    m.acts = calloc((size_t)m.s.layers, sizeof *m.acts);
    if (!m.acts) return ZINC_ERR_NOMEM;
    buffer_sums(&m, threads > 0 ? threads : 1, activations, scratch, host_extra);
    free(m.acts);
    return ZINC_OK;
}

const gpt2_shape *gpt2_model_shape(const gpt2_model *m) { return &m->s; }
int gpt2_model_context(const gpt2_model *m) { return m->T; }
void gpt2_capture_grads(gpt2_model *m, float *out) { m->capture = out; }
void gpt2_shuffle(gpt2_model *m, uint64_t seed) {
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
static zinc_status module_enter(gpt2_model *m, int module, zinc_phase ph) {
    double t = now_s();
    zinc_status st = zinc_module_enter(m->e, module, ph);
    if (m->in_step) m->t_engine += now_s() - t;
    return st;
}
static zinc_status module_exit(gpt2_model *m, int module, zinc_phase ph) {
    double t = now_s();
    zinc_status st = zinc_module_exit(m->e, module, ph);
    if (m->in_step) m->t_engine += now_s() - t;
    return st;
}

void gpt2_times(const gpt2_model *m, double *steps_s, double *engine_s) {
    *steps_s = m->t_steps;
    *engine_s = m->t_engine;
}

#define CHECK(expr)                                                                                                    \
    do {                                                                                                               \
        zinc_status st_ = (expr);                                                                                      \
        if (st_ != ZINC_OK) return st_;                                                                                \
    } while (0)

/* Enters a block or lnf, points m->w[kind] at float views of its parameters (in place for fp32, else
 * copies at the start of the scratch) and, in backward, m->g[kind] at zeroed float gradients after them.
 * Parameters first..first+count-1 (registration order). */
static zinc_status enter(gpt2_model *m, int module, zinc_phase ph, int first, int count) {
    CHECK(module_enter(m, module, ph));
    size_t total = 0, off = 0;
    for (int i = first; i < first + count; i++) total += (size_t)gpt2_kind_numel(&m->s, m->pkind[i]);
    float *gbase = m->scratch + (m->copies ? total : 0);
    if (ph == ZINC_BACKWARD) CHECK(m->ops->zero(m, gbase, total * sizeof(float)));
    for (int i = first; i < first + count; i++) {
        int k = m->pkind[i];
        int64_t n = gpt2_kind_numel(&m->s, k);
        const void *data = zinc_param_data(m->params[i]);
        if (!data) return ZINC_ERR_STATE;
        if (!m->copies)
            m->w[k] = (float *)data;
        else {
            m->w[k] = m->scratch + off;
            CHECK(m->ops->to_f32(m, m->w[k], m->params[i], n));
        }
        if (ph == ZINC_BACKWARD) m->g[k] = gbase + off;
        off += (size_t)n;
    }
    return ZINC_OK;
}

/* Inside an entry of "embed": a float view of wte (index 0) or wpe (index 1), in place for fp32, else
 * converted into the start of the scratch (so one at a time). */
static zinc_status embed_view(gpt2_model *m, int index, const float **out) {
    const void *data = zinc_param_data(m->params[index]);
    if (!data) return ZINC_ERR_STATE;
    *out = m->copies ? m->scratch : data;
    return m->copies ? m->ops->to_f32(m, m->scratch, m->params[index], gpt2_kind_numel(&m->s, m->pkind[index]))
                     : ZINC_OK;
}

/* The test hook's copy of n floats of the model's buffer src (host memory, or the device's through to_host). */
static zinc_status capture_copy(gpt2_model *m, float *dst, const float *src, int64_t n) {
    return m->ops->to_host(m, dst, src, (size_t)n * sizeof(float));
}

/* Inside embed's backward entry: the float gradient to add parameter `index` (wte or wpe) into: the
 * engine's own buffer (direct_embed; the test hook then notes its contents first, see embed_grad_done),
 * else the zeroed start of the scratch. */
static zinc_status embed_grad(gpt2_model *m, int index, float **out) {
    int k = m->pkind[index];
    int64_t n = gpt2_kind_numel(&m->s, k);
    if (m->direct_embed) {
        float *g = zinc_param_grad(m->params[index]);
        if (!g) return ZINC_ERR_STATE;
        /* test hook: note the gradient so far, to hand on what this entry adds */
        if (m->capture) CHECK(capture_copy(m, m->capture + gpt2_llmc_offset(&m->s, k, 0), g, n));
        *out = g;
        return ZINC_OK;
    }
    *out = m->scratch;
    return m->ops->zero(m, m->scratch, (size_t)n * sizeof(float));
}

/* The float gradient g of embed_grad is complete: adds it into the engine's (scratch case) and hands it
 * to the test hook (direct case: what was added since embed_grad). */
static zinc_status embed_grad_done(gpt2_model *m, int index, const float *g) {
    int k = m->pkind[index];
    int64_t n = gpt2_kind_numel(&m->s, k);
    float *cap = m->capture ? m->capture + gpt2_llmc_offset(&m->s, k, 0) : NULL;
    if (m->direct_embed) {
        if (!cap) return ZINC_OK;
        float *now = malloc((size_t)n * sizeof(float));
        zinc_status st = now ? capture_copy(m, now, g, n) : ZINC_ERR_NOMEM;
        for (int64_t i = 0; st == ZINC_OK && i < n; i++) cap[i] = now[i] - cap[i];
        free(now);
        return st;
    }
    CHECK(m->ops->grad_add(m, m->params[index], g, n));
    return cap ? capture_copy(m, cap, g, n) : ZINC_OK;
}

/* Adds the module's float gradients (of the unscaled loss) into the engine's, times the loss scale
 * (the table's grad_add), and exits it. */
static zinc_status exit_backward(gpt2_model *m, int module, int first, int count) {
    for (int i = first; i < first + count; i++) {
        int k = m->pkind[i];
        int64_t n = gpt2_kind_numel(&m->s, k);
        CHECK(m->ops->grad_add(m, m->params[i], m->g[k], n));
        if (m->capture) CHECK(capture_copy(m, m->capture + gpt2_llmc_offset(&m->s, k, m->player[i]), m->g[k], n));
    }
    return module_exit(m, module, ZINC_BACKWARD);
}

static int block_first(int l) { return 2 + NBLOCK_KINDS * l; }
static int lnf_first(const gpt2_model *m) { return 2 + NBLOCK_KINDS * m->s.layers; }

/* ---------------------------------------------------------------- forward and backward */

/* Block l's activations: its own set, or with activation checkpointing the one set every block shares. */
static gpt2_block_acts *block_acts(gpt2_model *m, int l) { return &m->acts[m->ckpt ? 0 : l]; }

/* out = res + (x W^T + b): the table's matmul_fwd_res, or the product into dtmp and an add. */
static zinc_status mm_fwd_res(gpt2_model *m, float *out, const float *x, const float *W, const float *b,
                              const float *res, int64_t N, int IC, int OC) {
    const gpt2_ops *o = m->ops;
    if (o->matmul_fwd_res) return o->matmul_fwd_res(m, out, x, W, b, res, N, IC, OC);
    assert(o->add); /* a table without matmul_fwd_res has add (gpt2_internal.h) */
    CHECK(o->matmul_fwd(m, m->dtmp, x, W, b, N, IC, OC));
    return o->add(m, out, res, m->dtmp, N * OC);
}

/* Block l inside an entry of its module (m->w its parameters): its activations from its input xs[l]; with
 * `output`, also its output xs[l + 1]. Backward with activation checkpointing runs it again without the
 * output (backward needs fchg, not fcproj's product): the same kernels on the same inputs, so the same
 * bits as the forward's. */
static zinc_status block_forward(gpt2_model *m, int l, int B, int T, int output) {
    const gpt2_ops *o = m->ops;
    int C = m->s.channels;
    int64_t N = (int64_t)B * T, NC = N * C;
    gpt2_block_acts *a = block_acts(m, l);
    float *const *w = m->w;
    const float *x = m->xs + l * NC;
    float *y = m->xs + (l + 1) * NC;
    CHECK(o->layernorm_fwd(m, a->ln1, a->ln1m, a->ln1r, x, w[GPT2_LN1W], w[GPT2_LN1B], N));
    CHECK(o->matmul_fwd(m, a->qkv, a->ln1, w[GPT2_QKVW], w[GPT2_QKVB], N, C, 3 * C));
    if (o->attention_fwd_lse)
        CHECK(o->attention_fwd_lse(m, a->atty, a->att, a->qkv, B, T));
    else
        CHECK(o->attention_fwd(m, a->atty, a->att, a->qkv, B, T));
    CHECK(mm_fwd_res(m, a->res2, a->atty, w[GPT2_ATTPROJW], w[GPT2_ATTPROJB], x, N, C, C));
    CHECK(o->layernorm_fwd(m, a->ln2, a->ln2m, a->ln2r, a->res2, w[GPT2_LN2W], w[GPT2_LN2B], N));
    CHECK(o->matmul_fwd(m, a->fch, a->ln2, w[GPT2_FCW], w[GPT2_FCB], N, C, 4 * C));
    if (o->gelu_fwd_deriv) /* fch becomes GELU's derivative */
        CHECK(o->gelu_fwd_deriv(m, a->fchg, a->fch, a->fch, 4 * NC));
    else
        CHECK(o->gelu_fwd(m, a->fchg, a->fch, 4 * NC));
    if (!output) return ZINC_OK;
    return mm_fwd_res(m, y, a->fchg, w[GPT2_FCPROJW], w[GPT2_FCPROJB], a->res2, N, 4 * C, C);
}

/* Forward over B sequences of T tokens in m->dinp, up to the final LayerNorm's output in m->lnf. */
static zinc_status forward(gpt2_model *m, int B, int T) {
    const gpt2_ops *o = m->ops;
    int C = m->s.channels, L = m->s.layers;
    int64_t N = (int64_t)B * T, NC = N * C;
    CHECK(module_enter(m, m->mod_embed, ZINC_FORWARD));
    const void *wte = zinc_param_data(m->params[0]); /* rows read as they are: only B*T of them */
    const float *wpe;
    if (!wte) return ZINC_ERR_STATE;
    CHECK(embed_view(m, 1, &wpe));
    /* a table that widens wte whole does it after wpe's copy (scratch_floats counts both) */
    float *wte_f32 = m->copies && o->embed_widens ? m->scratch + gpt2_kind_numel(&m->s, GPT2_WPE) : NULL;
    CHECK(o->embed_fwd(m, m->xs, m->dinp, wte, zinc_compute_dtype(m->e), wpe, wte_f32, B, T));
    CHECK(module_exit(m, m->mod_embed, ZINC_FORWARD));
    for (int l = 0; l < L; l++) {
        CHECK(enter(m, m->mod_block[l], ZINC_FORWARD, block_first(l), NBLOCK_KINDS));
        CHECK(block_forward(m, l, B, T, 1));
        CHECK(module_exit(m, m->mod_block[l], ZINC_FORWARD));
    }
    CHECK(enter(m, m->mod_lnf, ZINC_FORWARD, lnf_first(m), 2));
    CHECK(o->layernorm_fwd(m, m->lnf, m->lnfm, m->lnfr, m->xs + L * NC, m->w[GPT2_LNFW], m->w[GPT2_LNFB], N));
    return module_exit(m, m->mod_lnf, ZINC_FORWARD);
}

/* dx = dout W (written, not added), dW and db added: the table's matmul_bwd_set, or zeroing dx and adding. */
static zinc_status mm_bwd_into(gpt2_model *m, float *dx, float *dW, float *db, const float *dout, const float *x,
                               const float *W, int64_t N, int IC, int OC) {
    const gpt2_ops *o = m->ops;
    if (o->matmul_bwd_set) return o->matmul_bwd_set(m, dx, NULL, dW, db, dout, x, W, N, IC, OC);
    CHECK(o->zero(m, dx, (size_t)(N * IC) * sizeof(float)));
    return o->matmul_bwd(m, dx, dW, db, dout, x, W, N, IC, OC);
}

/* The tied output projection, in a forward re-entry of "embed" (it only reads wte): logits[rows, V] =
 * x wte[:V]^T, x = rows of the final LayerNorm's output. The rows' losses go to row_loss (the caller sums
 * them, sum_losses) when it is given. Training: turns the logits into dlogits (of the mean loss) in
 * place, kept for embed's backward entry, and sets m->dx = dlogits wte[:V]. */
static zinc_status projection(gpt2_model *m, const float *x, int64_t rows, int train, double *row_loss) {
    const gpt2_ops *o = m->ops;
    int C = m->s.channels, V = m->s.vocab;
    const float *wte;
    CHECK(module_enter(m, m->mod_embed, ZINC_FORWARD));
    CHECK(embed_view(m, 0, &wte));
    CHECK(o->matmul_fwd(m, m->logits, x, wte, NULL, rows, C, V));
    if (train) {
        float dscale = 1.0f / (float)rows; /* the loss scale is applied as gradients are added */
        CHECK(o->crossentropy(m, m->logits, m->logits, m->dtgt, rows, dscale, row_loss));
        CHECK(mm_bwd_into(m, m->dx, NULL, NULL, m->logits, x, wte, rows, C, V));
    } else if (row_loss) {
        CHECK(o->crossentropy(m, NULL, m->logits, m->dtgt, rows, 0.0f, row_loss));
    }
    return module_exit(m, m->mod_embed, ZINC_FORWARD);
}

/* After projection(train): the gradients of everything, m->dx being the gradient at lnf's output. */
static zinc_status backward(gpt2_model *m, int B, int T) {
    const gpt2_ops *o = m->ops;
    int C = m->s.channels, L = m->s.layers, V = m->s.vocab;
    int64_t N = (int64_t)B * T, NC = N * C;
    CHECK(enter(m, m->mod_lnf, ZINC_BACKWARD, lnf_first(m), 2));
    CHECK(o->zero(m, m->dres, (size_t)NC * sizeof(float)));
    CHECK(o->layernorm_bwd(m, m->dres, m->g[GPT2_LNFW], m->g[GPT2_LNFB], m->dx, m->xs + L * NC, m->w[GPT2_LNFW],
                           m->lnfm, m->lnfr, N));
    CHECK(exit_backward(m, m->mod_lnf, lnf_first(m), 2));
    /* m->dres: the gradient at the residual stream above the current block */
    for (int l = L - 1; l >= 0; l--) {
        CHECK(enter(m, m->mod_block[l], ZINC_BACKWARD, block_first(l), NBLOCK_KINDS));
        if (m->ckpt) { /* recomputed from its kept input xs[l] (a recompute span on the --trace timeline) */
            int64_t t_re = zinc_trace_begin(m->e);
            CHECK(block_forward(m, l, B, T, 0));
            char name[16];
            snprintf(name, sizeof name, "h%d", l);
            CHECK(zinc_trace_end(m->e, t_re, "recompute", name));
        }
        gpt2_block_acts *a = block_acts(m, l);
        float *const *w = m->w, *const *g = m->g;
        const float *x = m->xs + l * NC;
        /* MLP branch: y = res2 + fcproj(gelu(fc(ln2(res2)))) */
        assert(!o->gelu_fwd_deriv || o->matmul_bwd_set); /* a table with the one has the other (gpt2_internal.h) */
        if (o->gelu_fwd_deriv) { /* fch holds GELU's derivative: dfch = (dres W) * it, in the product's pieces */
            CHECK(o->matmul_bwd_set(m, m->dfch, a->fch, g[GPT2_FCPROJW], g[GPT2_FCPROJB], m->dres, a->fchg,
                                    w[GPT2_FCPROJW], N, 4 * C, C));
        } else {
            CHECK(mm_bwd_into(m, m->dfchg, g[GPT2_FCPROJW], g[GPT2_FCPROJB], m->dres, a->fchg, w[GPT2_FCPROJW], N,
                              4 * C, C));
            CHECK(o->zero(m, m->dfch, (size_t)(4 * NC) * sizeof(float)));
            CHECK(o->gelu_bwd(m, m->dfch, a->fch, m->dfchg, 4 * NC));
        }
        CHECK(mm_bwd_into(m, m->dln, g[GPT2_FCW], g[GPT2_FCB], m->dfch, a->ln2, w[GPT2_FCW], N, C, 4 * C));
        CHECK(o->layernorm_bwd(m, m->dres, g[GPT2_LN2W], g[GPT2_LN2B], m->dln, a->res2, w[GPT2_LN2W], a->ln2m, a->ln2r,
                               N));
        /* attention branch: res2 = x + attproj(attn(qkv(ln1(x)))) */
        CHECK(
            mm_bwd_into(m, m->datty, g[GPT2_ATTPROJW], g[GPT2_ATTPROJB], m->dres, a->atty, w[GPT2_ATTPROJW], N, C, C));
        CHECK(o->zero(m, m->dqkv, (size_t)(3 * NC) * sizeof(float)));
        if (o->attention_fwd_lse)
            CHECK(o->attention_bwd_lse(m, m->dqkv, m->datty, a->atty, a->qkv, a->att, B, T));
        else
            CHECK(o->attention_bwd(m, m->dqkv, m->datt, m->datty, a->qkv, a->att, B, T));
        CHECK(mm_bwd_into(m, m->dln, g[GPT2_QKVW], g[GPT2_QKVB], m->dqkv, a->ln1, w[GPT2_QKVW], N, C, 3 * C));
        CHECK(o->layernorm_bwd(m, m->dres, g[GPT2_LN1W], g[GPT2_LN1B], m->dln, x, w[GPT2_LN1W], a->ln1m, a->ln1r, N));
        CHECK(exit_backward(m, m->mod_block[l], block_first(l), NBLOCK_KINDS));
    }
    /* embed: wte's gradient is the projection's dlogits^T lnf plus the token rows' */
    CHECK(module_enter(m, m->mod_embed, ZINC_BACKWARD));
    float *dwte, *dwpe;
    CHECK(embed_grad(m, 0, &dwte));
    CHECK(o->matmul_bwd(m, NULL, dwte, NULL, m->logits, m->lnf, NULL, N, C, V));
    CHECK(o->embed_bwd(m, dwte, NULL, m->dres, m->dinp, B, T));
    CHECK(embed_grad_done(m, 0, dwte));
    CHECK(embed_grad(m, 1, &dwpe));
    CHECK(o->embed_bwd(m, NULL, dwpe, m->dres, m->dinp, B, T));
    CHECK(embed_grad_done(m, 1, dwpe));
    return module_exit(m, m->mod_embed, ZINC_BACKWARD);
}

/* The token ids of B windows (or of one sequence: windows NULL, tokens given) into m->inp / m->tgt, and
 * to where the model computes. */
static zinc_status load_windows(gpt2_model *m, const uint16_t *windows, int B, int T) {
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            m->inp[b * T + t] = windows[(size_t)b * (T + 1) + t];
            m->tgt[b * T + t] = windows[(size_t)b * (T + 1) + t + 1];
        }
    size_t bytes = (size_t)B * (size_t)T * sizeof(int32_t);
    CHECK(m->ops->to_device(m, m->dinp, m->inp, bytes));
    return m->ops->to_device(m, m->dtgt, m->tgt, bytes);
}

/* The row losses of `slots` forward passes of N rows each (row_loss, slot after slot), readable on the host:
 * on a device this is the one wait for the passes' work. */
static zinc_status row_losses(gpt2_model *m, int64_t slots, int64_t N, const double **rows) {
    *rows = m->row_loss;
    if (m->ops->device) {
        CHECK(m->ops->to_host(m, m->row_loss_host, m->row_loss, (size_t)(slots * N) * sizeof(double)));
        *rows = m->row_loss_host;
    }
    return ZINC_OK;
}

/* One pass's loss: its rows summed in row order from 0, as the host's gpt2_crossentropy sums them. */
static double pass_loss(const double *rows, int64_t N) {
    double total = 0;
    for (int64_t n = 0; n < N; n++) total += rows[n];
    return total;
}

/* Adds the losses of `slots` forward passes of N rows each to *loss_sum, pass after pass. */
static zinc_status sum_losses(gpt2_model *m, int64_t slots, int64_t N, double *loss_sum) {
    const double *r;
    CHECK(row_losses(m, slots, N, &r));
    for (int64_t s = 0; s < slots; s++) *loss_sum += pass_loss(r + s * N, N);
    return ZINC_OK;
}

static zinc_status check_batch(gpt2_model *m, int B) {
    if (B < 1 || B > m->mb) {
        zinc_log(m->e, ZINC_LOG_ERROR, "gpt2: a batch of %d sequences; must be 1..%d (the micro batch)", B, m->mb);
        return ZINC_ERR_INVALID_ARG;
    }
    return ZINC_OK;
}

/* A micro-step whose row losses go to slot `slot` of m->row_loss (summed later by sum_losses). */
static zinc_status microstep(gpt2_model *m, const uint16_t *windows, int B, int64_t slot) {
    CHECK(check_batch(m, B));
    int T = m->T;
    int64_t N = (int64_t)B * T;
    CHECK(load_windows(m, windows, B, T));
    CHECK(forward(m, B, T));
    CHECK(projection(m, m->lnf, N, 1, m->row_loss + slot * N));
    return backward(m, B, T);
}

zinc_status gpt2_microstep(gpt2_model *m, const uint16_t *windows, int B, double *loss_sum) {
    CHECK(microstep(m, windows, B, 0));
    return sum_losses(m, 1, (int64_t)B * m->T, loss_sum);
}

zinc_status gpt2_eval(gpt2_model *m, const uint16_t *windows, int B, double *loss_sum) {
    CHECK(check_batch(m, B));
    int T = m->T;
    int64_t N = (int64_t)B * T;
    CHECK(load_windows(m, windows, B, T));
    CHECK(forward(m, B, T));
    CHECK(projection(m, m->lnf, N, 0, m->row_loss));
    return sum_losses(m, 1, N, loss_sum);
}

zinc_status gpt2_next_logits(gpt2_model *m, const uint16_t *tokens, int n, float *logits) {
    if (n < 1 || n > m->T) {
        zinc_log(m->e, ZINC_LOG_ERROR, "gpt2: %d tokens of context; must be 1..%d", n, m->T);
        return ZINC_ERR_INVALID_ARG;
    }
    for (int t = 0; t < n; t++) m->inp[t] = tokens[t];
    CHECK(m->ops->to_device(m, m->dinp, m->inp, (size_t)n * sizeof(int32_t)));
    CHECK(forward(m, 1, n));
    CHECK(projection(m, m->lnf + (int64_t)(n - 1) * m->s.channels, 1, 0, NULL));
    return m->ops->to_host(m, logits, m->logits, (size_t)m->s.vocab * sizeof(float));
}

/* ---------------------------------------------------------------- training and evaluation */

zinc_status gpt2_train_microstep(gpt2_model *m, const gpt2_tokens *data, int64_t step, int64_t j) {
    zinc_engine *e = m->e;
    int64_t B = zinc_train_batch_size(e);
    int W = zinc_world_size(e), r = zinc_rank(e), T = m->T;
    if (j == 0) m->t_step0 = now_s(), m->in_step = true;
    if (gpt2_batches_per_pass(data, T, B) < 1) {
        zinc_log(e, ZINC_LOG_ERROR,
                 "gpt2: the training data has %lld tokens, fewer than one global batch needs "
                 "(train_batch_size %lld x context %d + 1)",
                 (long long)data->n, (long long)B, T);
        return ZINC_ERR_INVALID_ARG;
    }
    uint16_t *win = malloc((size_t)m->mb * (size_t)(T + 1) * sizeof *win);
    if (!win) return ZINC_ERR_NOMEM;
    int64_t first = step * B + (j * W + r) * m->mb;
    int64_t t_data = zinc_trace_begin(e);
    for (int b = 0; b < m->mb; b++) {
        if (m->shuffle)
            gpt2_window_shuffled(data, T, B, first + b, m->shuffle_seed, win + (size_t)b * (T + 1));
        else
            gpt2_window(data, T, B, first + b, win + (size_t)b * (T + 1));
    }
    zinc_trace_end(e, t_data, "data", "batch"); /* --trace: the batch's windows */
    zinc_status st = microstep(m, win, m->mb, j);
    free(win);
    m->t_micro_end = now_s();
    return st;
}

zinc_status gpt2_step_loss(gpt2_model *m, double *loss) {
    zinc_engine *e = m->e;
    int64_t B = zinc_train_batch_size(e);
    int64_t W = zinc_world_size(e), N = (int64_t)m->mb * m->T;
    double sum = 0;
    /* The micro-steps' losses, after the step (on a GPU its one wait for them), each at its global micro-batch
     * index j x world + r; the all-reduce adds one value to zeros (exact), and every rank adds them in that
     * order: the same bits for every split of the batch into ranks x micro-steps (at one rank, the order of
     * the micro-steps, as before). */
    double *per = calloc((size_t)(W * m->gas), sizeof *per);
    const double *rows = NULL;
    zinc_status st = per ? row_losses(m, m->gas, N, &rows) : ZINC_ERR_NOMEM;
    for (int64_t j = 0; st == ZINC_OK && j < m->gas; j++) per[j * W + zinc_rank(e)] = pass_loss(rows + j * N, N);
    if (st == ZINC_OK) st = zinc_allreduce_sum(e, per, (int)(W * m->gas));
    for (int64_t i = 0; st == ZINC_OK && i < W * m->gas; i++) sum += per[i];
    free(per);
    double t1 = now_s();
    m->t_engine += t1 - m->t_micro_end; /* zinc_step (between the last micro-step and here) and the loss */
    m->t_steps += t1 - m->t_step0;
    m->in_step = false;
    if (st == ZINC_OK && loss) *loss = sum / ((double)B * m->T);
    return st;
}

zinc_status gpt2_train_step(gpt2_model *m, const gpt2_tokens *data, int64_t step, zinc_step_info *info, double *loss) {
    zinc_status st = ZINC_OK;
    for (int64_t j = 0; j < m->gas && st == ZINC_OK; j++) st = gpt2_train_microstep(m, data, step, j);
    if (st == ZINC_OK) st = zinc_step(m->e, info);
    if (st == ZINC_OK) st = gpt2_step_loss(m, loss);
    return st;
}

zinc_status gpt2_val_loss(gpt2_model *m, const gpt2_tokens *data, int64_t batches, double *loss) {
    zinc_engine *e = m->e;
    int64_t B = zinc_train_batch_size(e);
    int W = zinc_world_size(e), r = zinc_rank(e), T = m->T;
    int64_t have = gpt2_batches_per_pass(data, T, B);
    if (have < 1) {
        zinc_log(e, ZINC_LOG_ERROR,
                 "gpt2: the validation data has %lld tokens, fewer than one global batch needs "
                 "(train_batch_size %lld x context %d + 1)",
                 (long long)data->n, (long long)B, T);
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
        st = gpt2_eval(m, win, m->mb, &sum);
    }
    free(win);
    if (st == ZINC_OK) st = zinc_allreduce_sum(e, &sum, 1);
    if (st == ZINC_OK) *loss = sum / ((double)batches * B * T);
    return st;
}

typedef struct llmc_out {
    const gpt2_model *m;
    float *out;
} llmc_out;

static zinc_status to_llmc(void *u, int i, int64_t offset, const float *v, int64_t n) {
    const llmc_out *c = u;
    const gpt2_model *m = c->m;
    memcpy(c->out + gpt2_llmc_offset(&m->s, m->pkind[i], m->player[i]) + offset, v, (size_t)n * sizeof(float));
    return ZINC_OK;
}

/* Streamed (zinc_master_foreach): out is the only copy of the model beside the engine's. */
zinc_status gpt2_gather_llmc(gpt2_model *m, float *out) {
    llmc_out c = {m, out};
    return zinc_master_foreach(m->e, to_llmc, &c);
}
