/* See gpt2_layers.h. Every loop over rows, columns or (batch, head) pairs runs on the engine's threads
 * (zinc_parallel_for), each piece writing its own outputs. Matrix products are cut into MM_PIECES pieces
 * (of rows, or of output features for the weight gradient) whose size follows from the shape alone, so
 * every sgemm call has the same shape whatever the thread count (OpenBLAS's kernels may round differently
 * for another shape), and column sums run down blocks of COL_BLOCK columns, each column summed in row
 * order: results do not depend on the thread count. Few large pieces, since OpenBLAS packs the other
 * operand again in every call (its copies cost as much as the products at these sizes). */
#include "gpt2_layers.h"

#include "gpt2_gemm.h"
#include <math.h>
#include <string.h>

#include "gpt2_vecmath.h"

#define MM_PIECES 4 /* pieces per product, up to MM_PIECE_MAX rows or features each */
#define MM_PIECE_MIN 64
#define MM_PIECE_MAX 512
#define COL_BLOCK 64

static int64_t pieces(int64_t n, int64_t size) { return (n + size - 1) / size; }
/* The piece size for n rows or features: n / MM_PIECES rounded up to 16, within MM_PIECE_MIN..MAX. */
static int64_t mm_piece(int64_t n) {
    int64_t s = (pieces(n, MM_PIECES) + 15) / 16 * 16;
    return s < MM_PIECE_MIN ? MM_PIECE_MIN : s > MM_PIECE_MAX ? MM_PIECE_MAX : s;
}

typedef struct ln_args {
    float *out, *mean, *rstd, *dx, *dw, *db;
    const float *x, *w, *b, *dout;
    const float *cmean, *crstd;
    int64_t N;
    int C;
} ln_args;

/* Sums of a row in LANES interleaved partial sums (vectorisable; the order depends on C only). Inlined, so
 * they are vectorised as wide as the clone that calls them (GPT2_VECTOR_CLONES). */
#define LANES 16
__attribute__((always_inline)) static inline float row_sum(const float *x, int C) {
    float acc[LANES] = {0}, s = 0;
    int c = 0;
    for (; c + LANES <= C; c += LANES)
        for (int j = 0; j < LANES; j++) acc[j] += x[c + j];
    for (; c < C; c++) acc[c % LANES] += x[c];
    for (int j = 0; j < LANES; j++) s += acc[j];
    return s;
}
__attribute__((always_inline)) static inline float row_sq_dev(const float *x, float m, int C) {
    float acc[LANES] = {0}, s = 0;
    int c = 0;
    for (; c + LANES <= C; c += LANES)
        for (int j = 0; j < LANES; j++) acc[j] += (x[c + j] - m) * (x[c + j] - m);
    for (; c < C; c++) acc[c % LANES] += (x[c] - m) * (x[c] - m);
    for (int j = 0; j < LANES; j++) s += acc[j];
    return s;
}

GPT2_VECTOR_CLONES static void ln_forward_rows(void *arg, int64_t lo, int64_t hi) {
    const ln_args *a = arg;
    int C = a->C;
    for (int64_t n = lo; n < hi; n++) {
        const float *xr = a->x + n * C;
        float m = row_sum(xr, C) / (float)C;
        float v = row_sq_dev(xr, m, C) / (float)C;
        float s = 1.0f / sqrtf(v + GPT2_LN_EPS);
        float *o = a->out + n * C;
        for (int c = 0; c < C; c++) o[c] = (xr[c] - m) * s * a->w[c] + a->b[c];
        a->mean[n] = m;
        a->rstd[n] = s;
    }
}

void gpt2_layernorm_forward(zinc_engine *e, float *out, float *mean, float *rstd, const float *x, const float *w,
                            const float *b, int64_t N, int C) {
    ln_args a = {.out = out, .mean = mean, .rstd = rstd, .x = x, .w = w, .b = b, .N = N, .C = C};
    gpt2_par(e, N, ln_forward_rows, &a);
}

GPT2_VECTOR_CLONES static void ln_backward_rows(void *arg, int64_t lo, int64_t hi) {
    const ln_args *a = arg;
    int C = a->C;
    for (int64_t n = lo; n < hi; n++) {
        const float *xr = a->x + n * C, *dr = a->dout + n * C;
        float m = a->cmean[n], s = a->crstd[n], am[LANES] = {0}, ax[LANES] = {0}, dnorm_mean = 0, dnorm_xhat_mean = 0;
        int c = 0;
        for (; c + LANES <= C; c += LANES)
            for (int j = 0; j < LANES; j++) {
                float xhat = (xr[c + j] - m) * s, dn = dr[c + j] * a->w[c + j];
                am[j] += dn;
                ax[j] += dn * xhat;
            }
        for (; c < C; c++) {
            float xhat = (xr[c] - m) * s, dn = dr[c] * a->w[c];
            am[c % LANES] += dn;
            ax[c % LANES] += dn * xhat;
        }
        for (int j = 0; j < LANES; j++) dnorm_mean += am[j], dnorm_xhat_mean += ax[j];
        dnorm_mean /= (float)C;
        dnorm_xhat_mean /= (float)C;
        float *dxr = a->dx + n * C;
        for (c = 0; c < C; c++) {
            float xhat = (xr[c] - m) * s, dn = dr[c] * a->w[c];
            dxr[c] += s * (dn - dnorm_mean - xhat * dnorm_xhat_mean);
        }
    }
}

/* dw and db over blocks of COL_BLOCK columns: rows read contiguously, each column summed in row order. */
GPT2_VECTOR_CLONES static void ln_backward_cols(void *arg, int64_t lo, int64_t hi) {
    const ln_args *a = arg;
    int64_t C = a->C;
    for (int64_t blk = lo; blk < hi; blk++) {
        int64_t c0 = blk * COL_BLOCK, nc = C - c0 < COL_BLOCK ? C - c0 : COL_BLOCK;
        float sw[COL_BLOCK] = {0}, sb[COL_BLOCK] = {0};
        for (int64_t n = 0; n < a->N; n++) {
            const float *d = a->dout + n * C + c0, *x = a->x + n * C + c0;
            float m = a->cmean[n], r = a->crstd[n];
            for (int64_t c = 0; c < nc; c++) {
                sw[c] += d[c] * (x[c] - m) * r;
                sb[c] += d[c];
            }
        }
        for (int64_t c = 0; c < nc; c++) {
            a->dw[c0 + c] += sw[c];
            a->db[c0 + c] += sb[c];
        }
    }
}

void gpt2_layernorm_backward(zinc_engine *e, float *dx, float *dw, float *db, const float *dout, const float *x,
                             const float *w, const float *mean, const float *rstd, int64_t N, int C) {
    ln_args a =
        {.dx = dx, .dw = dw, .db = db, .dout = dout, .x = x, .w = w, .cmean = mean, .crstd = rstd, .N = N, .C = C};
    gpt2_par(e, N, ln_backward_rows, &a);
    gpt2_par(e, pieces(C, COL_BLOCK), ln_backward_cols, &a);
}

/* OpenBLAS runs single-threaded (gpt2_layers_init) inside the engine's threads, each taking a slice of
 * rows: one set of threads, so none spins waiting while another pool needs the cores. */
void gpt2_layers_init(void) { gpt2_gemm_select(gpt2_gemm_selected()); }

typedef struct mm_args {
    float *out, *dx, *dW, *db;
    const float *x, *W, *b, *dout;
    const uint16_t *half[3]; /* bf16 products: x, W and dout rounded to bf16 (NULL: float products) */
    int64_t N, piece;        /* piece: rows or output features per piece (mm_piece) */
    int IC, OC;
    float dx_beta;       /* backward: 1 adds dout W to dx, 0 writes it (no zeroing pass before) */
    const float *dx_mul; /* backward, with dx_beta 0: dx = (dout W) * dx_mul, element by element (NULL: 1) */
    const float *res;    /* forward: out = res + (x W^T + b), the residual added in the piece (NULL: none) */
} mm_args;

enum { OP_X, OP_W, OP_DOUT };

/* C = op(A) op(B) + beta C for operands named by OP_*, at element offsets: in float, or in bf16 from the
 * rounded copies when the product has them. */
static void prod(const mm_args *a, char ta, char tb, int64_t M, int64_t N, int64_t K, int opa, int64_t offa,
                 int64_t lda, int opb, int64_t offb, int64_t ldb, float beta, float *C, int64_t ldc) {
    if (a->half[0] || a->half[1] || a->half[2]) {
        gpt2_gemm_bf16(ta, tb, M, N, K, 1.0f, a->half[opa] + offa, lda, a->half[opb] + offb, ldb, beta, C, ldc);
    } else {
        const float *f[3] = {a->x, a->W, a->dout};
        gpt2_sgemm(ta, tb, M, N, K, 1.0f, f[opa] + offa, lda, f[opb] + offb, ldb, beta, C, ldc);
    }
}

/* The size of piece p of `size` items out of n: size, or what is left for the last piece. */
static int64_t piece_rows(int64_t p, int64_t size, int64_t n) { return n - p * size < size ? n - p * size : size; }

GPT2_VECTOR_CLONES static void mm_forward_rows(void *arg, int64_t plo, int64_t phi) {
    const mm_args *a = arg;
    int IC = a->IC, OC = a->OC;
    for (int64_t p = plo; p < phi; p++) {
        int64_t lo = p * a->piece, rows = piece_rows(p, a->piece, a->N);
        prod(a, 'N', 'T', rows, OC, IC, OP_X, lo * IC, IC, OP_W, 0, IC, 0.0f, a->out + lo * OC, OC);
        if (a->b)
            for (int64_t n = lo; n < lo + rows; n++)
                for (int o = 0; o < OC; o++) a->out[n * OC + o] += a->b[o];
        if (a->res) /* after the bias, as a separate add would: the same bits */
            for (int64_t i = lo * OC; i < (lo + rows) * OC; i++) a->out[i] = a->res[i] + a->out[i];
    }
}

/* Forward over pieces of output features. */
GPT2_VECTOR_CLONES static void mm_forward_outs(void *arg, int64_t plo, int64_t phi) {
    const mm_args *a = arg;
    int IC = a->IC, OC = a->OC;
    for (int64_t p = plo; p < phi; p++) {
        int64_t lo = p * a->piece, outs = piece_rows(p, a->piece, OC);
        prod(a, 'N', 'T', a->N, outs, IC, OP_X, 0, IC, OP_W, lo * IC, IC, 0.0f, a->out + lo, OC);
        if (a->b)
            for (int64_t n = 0; n < a->N; n++)
                for (int64_t o = lo; o < lo + outs; o++) a->out[n * OC + o] += a->b[o];
        if (a->res)
            for (int64_t n = 0; n < a->N; n++)
                for (int64_t o = lo; o < lo + outs; o++) a->out[n * OC + o] = a->res[n * OC + o] + a->out[n * OC + o];
    }
}

/* Each product is cut along the dimension whose cut repacks the smaller operand in every piece: rows of x
 * when there are more rows than outputs, else output features (GPT-2 124M at B x T = 256: a slice of wte
 * per piece instead of all 154 MB of it). A choice by shape alone, like the pieces' sizes. */
static void mm_forward(zinc_engine *e, mm_args *a) {
    if (a->N >= a->OC) {
        a->piece = mm_piece(a->N);
        gpt2_par(e, pieces(a->N, a->piece), mm_forward_rows, a);
    } else {
        a->piece = mm_piece(a->OC);
        gpt2_par(e, pieces(a->OC, a->piece), mm_forward_outs, a);
    }
}

void gpt2_matmul_forward(zinc_engine *e, float *out, const float *x, const float *W, const float *b, int64_t N, int IC,
                         int OC) {
    mm_args a = {.out = out, .x = x, .W = W, .b = b, .N = N, .IC = IC, .OC = OC};
    mm_forward(e, &a);
}

void gpt2_matmul_forward_res(zinc_engine *e, float *out, const float *x, const float *W, const float *b,
                             const float *res, int64_t N, int IC, int OC) {
    mm_args a = {.out = out, .x = x, .W = W, .b = b, .res = res, .N = N, .IC = IC, .OC = OC};
    mm_forward(e, &a);
}

/* ---------------------------------------------------------------- bf16 products */

typedef struct bf16_args {
    uint16_t *dst;
    const float *src;
    int64_t n;
} bf16_args;

#define BF16_CHUNK 16384
/* Round to nearest even (as torch's and oneDNN's conversions); NaN stays NaN (quiet). */
GPT2_VECTOR_CLONES static void bf16_chunks(void *arg, int64_t lo, int64_t hi) {
    const bf16_args *a = arg;
    for (int64_t k = lo; k < hi; k++) {
        int64_t i0 = k * BF16_CHUNK, i1 = i0 + BF16_CHUNK < a->n ? i0 + BF16_CHUNK : a->n;
        for (int64_t i = i0; i < i1; i++) {
            uint32_t u;
            memcpy(&u, &a->src[i], sizeof u);
            uint32_t r = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
            a->dst[i] = (u & 0x7fffffffu) > 0x7f800000u ? (uint16_t)((u >> 16) | 0x40u) : (uint16_t)r;
        }
    }
}

void gpt2_to_bf16(zinc_engine *e, uint16_t *dst, const float *src, int64_t n) {
    bf16_args a = {dst, src, n};
    gpt2_par(e, pieces(n, BF16_CHUNK), bf16_chunks, &a);
}

int64_t gpt2_matmul_bf16_elems(int64_t N, int IC, int OC) { return N * IC + (int64_t)OC * IC + N * OC; }

void gpt2_matmul_forward_bf16(zinc_engine *e, uint16_t *ws, float *out, const float *x, const float *W, const float *b,
                              const float *res, int64_t N, int IC, int OC) {
    mm_args a = {.out = out, .x = x, .W = W, .b = b, .res = res, .N = N, .IC = IC, .OC = OC};
    uint16_t *xh = ws, *Wh = ws + N * IC;
    gpt2_to_bf16(e, xh, x, N * IC);
    gpt2_to_bf16(e, Wh, W, (int64_t)OC * IC);
    a.half[OP_X] = xh, a.half[OP_W] = Wh;
    mm_forward(e, &a);
}

/* dx over pieces of rows of dout. */
GPT2_VECTOR_CLONES static void mm_backward_rows(void *arg, int64_t plo, int64_t phi) {
    const mm_args *a = arg;
    int IC = a->IC, OC = a->OC;
    for (int64_t p = plo; p < phi; p++) {
        int64_t lo = p * a->piece, rows = piece_rows(p, a->piece, a->N);
        prod(a, 'N', 'N', rows, IC, OC, OP_DOUT, lo * OC, OC, OP_W, 0, IC, a->dx_beta, a->dx + lo * IC, IC);
        if (a->dx_mul) /* while the piece is in cache */
            for (int64_t i = lo * IC; i < (lo + rows) * IC; i++) a->dx[i] *= a->dx_mul[i];
    }
}

/* dx over pieces of its columns. */
GPT2_VECTOR_CLONES static void mm_backward_cols(void *arg, int64_t plo, int64_t phi) {
    const mm_args *a = arg;
    int IC = a->IC, OC = a->OC;
    for (int64_t p = plo; p < phi; p++) {
        int64_t lo = p * a->piece, cols = piece_rows(p, a->piece, IC);
        prod(a, 'N', 'N', a->N, cols, OC, OP_DOUT, 0, OC, OP_W, lo, IC, a->dx_beta, a->dx + lo, IC);
        if (a->dx_mul)
            for (int64_t n = 0; n < a->N; n++)
                for (int64_t i = n * IC + lo; i < n * IC + lo + cols; i++) a->dx[i] *= a->dx_mul[i];
    }
}

static void mm_backward_inputs(void *arg, int64_t plo, int64_t phi) { /* dW over pieces of input features */
    const mm_args *a = arg;
    int IC = a->IC, OC = a->OC;
    for (int64_t p = plo; p < phi; p++) {
        int64_t lo = p * a->piece, cols = piece_rows(p, a->piece, IC);
        prod(a, 'T', 'N', OC, cols, a->N, OP_DOUT, 0, OC, OP_X, lo, IC, 1.0f, a->dW + lo, IC);
    }
}

static void mm_backward_outs(void *arg, int64_t plo, int64_t phi) { /* dW over pieces of outputs */
    const mm_args *a = arg;
    int IC = a->IC, OC = a->OC;
    for (int64_t p = plo; p < phi; p++) {
        int64_t lo = p * a->piece, outs = piece_rows(p, a->piece, OC);
        prod(a, 'T', 'N', outs, IC, a->N, OP_DOUT, lo, OC, OP_X, 0, IC, 1.0f, a->dW + lo * IC, IC);
    }
}

/* db over blocks of COL_BLOCK outputs. */
GPT2_VECTOR_CLONES static void mm_backward_bias(void *arg, int64_t blo, int64_t bhi) {
    const mm_args *a = arg;
    int OC = a->OC;
    for (int64_t blk = blo; blk < bhi; blk++) { /* rows read contiguously; each column summed in row order */
        int64_t lo = blk * COL_BLOCK, outs = piece_rows(blk, COL_BLOCK, OC);
        float s[COL_BLOCK] = {0};
        for (int64_t n = 0; n < a->N; n++) {
            const float *d = a->dout + n * OC + lo;
            for (int64_t o = 0; o < outs; o++) s[o] += d[o];
        }
        for (int64_t o = 0; o < outs; o++) a->db[lo + o] += s[o];
    }
}

static void mm_backward(zinc_engine *e, mm_args *p) {
    mm_args a = *p;
    float *dx = a.dx, *dW = a.dW, *db = a.db;
    int64_t N = a.N;
    int IC = a.IC, OC = a.OC;
    if (dx && N >= IC) { /* cut where the repacked operand (W, or dout) is the smaller, as forward */
        a.piece = mm_piece(N);
        gpt2_par(e, pieces(N, a.piece), mm_backward_rows, &a);
    } else if (dx) {
        a.piece = mm_piece(IC);
        gpt2_par(e, pieces(IC, a.piece), mm_backward_cols, &a);
    }
    if (dW && OC >= IC) { /* x repacked per piece of outputs, or dout per piece of inputs */
        a.piece = mm_piece(OC);
        gpt2_par(e, pieces(OC, a.piece), mm_backward_outs, &a);
    } else if (dW) {
        a.piece = mm_piece(IC);
        gpt2_par(e, pieces(IC, a.piece), mm_backward_inputs, &a);
    }
    if (db) gpt2_par(e, pieces(OC, COL_BLOCK), mm_backward_bias, &a);
}

/* The backward's arguments: dx added to (dx_beta 1) or written (0, times dx_mul when given). */
static mm_args bwd_args(float *dx, float dx_beta, const float *dx_mul, float *dW, float *db, const float *dout,
                        const float *x, const float *W, int64_t N, int IC, int OC) {
    return (mm_args){.dx = dx,
                     .dx_beta = dx_beta,
                     .dx_mul = dx_beta == 0.0f ? dx_mul : NULL,
                     .dW = dW,
                     .db = db,
                     .dout = dout,
                     .x = x,
                     .W = W,
                     .N = N,
                     .IC = IC,
                     .OC = OC};
}

void gpt2_matmul_backward(zinc_engine *e, float *dx, float *dW, float *db, const float *dout, const float *x,
                          const float *W, int64_t N, int IC, int OC) {
    mm_args a = bwd_args(dx, 1.0f, NULL, dW, db, dout, x, W, N, IC, OC);
    mm_backward(e, &a);
}

void gpt2_matmul_backward_set(zinc_engine *e, float *dx, const float *dx_mul, float *dW, float *db, const float *dout,
                              const float *x, const float *W, int64_t N, int IC, int OC) {
    mm_args a = bwd_args(dx, 0.0f, dx_mul, dW, db, dout, x, W, N, IC, OC);
    mm_backward(e, &a);
}

void gpt2_matmul_backward_bf16(zinc_engine *e, uint16_t *ws, bool dx_set, const float *dx_mul, float *dx, float *dW,
                               float *db, const float *dout, const float *x, const float *W, int64_t N, int IC,
                               int OC) {
    mm_args a = bwd_args(dx, dx_set ? 0.0f : 1.0f, dx_mul, dW, db, dout, x, W, N, IC, OC);
    uint16_t *douth = ws, *Wh = ws + N * OC, *xh = Wh + (int64_t)OC * IC;
    gpt2_to_bf16(e, douth, dout, N * OC);
    if (dx) gpt2_to_bf16(e, Wh, W, (int64_t)OC * IC);
    if (dW) gpt2_to_bf16(e, xh, x, N * IC);
    a.half[OP_DOUT] = douth, a.half[OP_W] = Wh, a.half[OP_X] = xh;
    mm_backward(e, &a);
}

typedef struct att_args {
    float *out, *att, *dqkv, *datt;
    const float *qkv, *catt, *dout;
    int T, C, H;
} att_args;

static void att_forward_heads(void *arg, int64_t lo, int64_t hi) {
    const att_args *a = arg;
    int T = a->T, C = a->C, H = a->H, hs = C / H, C3 = 3 * C;
    float scale = 1.0f / sqrtf((float)hs);
    for (int64_t bh = lo; bh < hi; bh++) {
        int64_t b = bh / H;
        int h = (int)(bh % H);
        const float *base = a->qkv + b * T * C3;
        float *att = a->att + bh * T * T;
        for (int t = 0; t < T; t++) {
            const float *q = base + (int64_t)t * C3 + h * hs;
            float *ar = att + (int64_t)t * T, mx = -INFINITY;
            for (int u = 0; u <= t; u++) {
                const float *k = base + (int64_t)u * C3 + C + h * hs;
                float s = 0;
                for (int i = 0; i < hs; i++) s += q[i] * k[i];
                s *= scale;
                ar[u] = s;
                if (s > mx) mx = s;
            }
            float sum = 0;
            for (int u = 0; u <= t; u++) {
                ar[u] = expf(ar[u] - mx);
                sum += ar[u];
            }
            float inv = 1.0f / sum;
            for (int u = 0; u <= t; u++) ar[u] *= inv;
            for (int u = t + 1; u < T; u++) ar[u] = 0;
            float *o = a->out + (b * T + t) * C + h * hs;
            for (int i = 0; i < hs; i++) o[i] = 0;
            for (int u = 0; u <= t; u++) {
                const float *v = base + (int64_t)u * C3 + 2 * C + h * hs;
                for (int i = 0; i < hs; i++) o[i] += ar[u] * v[i];
            }
        }
    }
}

void gpt2_attention_forward(zinc_engine *e, float *out, float *att, const float *qkv, int B, int T, int C, int H) {
    att_args a = {.out = out, .att = att, .qkv = qkv, .T = T, .C = C, .H = H};
    gpt2_par(e, (int64_t)B * H, att_forward_heads, &a);
}

static void att_backward_heads(void *arg, int64_t lo, int64_t hi) {
    const att_args *a = arg;
    int T = a->T, C = a->C, H = a->H, hs = C / H, C3 = 3 * C;
    float scale = 1.0f / sqrtf((float)hs);
    for (int64_t bh = lo; bh < hi; bh++) {
        int64_t b = bh / H;
        int h = (int)(bh % H);
        const float *base = a->qkv + b * T * C3;
        float *dbase = a->dqkv + b * T * C3;
        const float *att = a->catt + bh * T * T;
        float *da = a->datt + bh * T * T;
        for (int t = 0; t < T; t++) {
            const float *ar = att + (int64_t)t * T, *dor = a->dout + (b * T + t) * C + h * hs;
            float *dar = da + (int64_t)t * T;
            /* through out_t = sum_u a_tu v_u */
            float dot = 0;
            for (int u = 0; u <= t; u++) {
                const float *v = base + (int64_t)u * C3 + 2 * C + h * hs;
                float *dv = dbase + (int64_t)u * C3 + 2 * C + h * hs;
                float s = 0;
                for (int i = 0; i < hs; i++) {
                    s += dor[i] * v[i];
                    dv[i] += ar[u] * dor[i];
                }
                dar[u] = s;
                dot += s * ar[u];
            }
            /* through the softmax, then the scaled scores q_t . k_u */
            const float *q = base + (int64_t)t * C3 + h * hs;
            float *dq = dbase + (int64_t)t * C3 + h * hs;
            for (int u = 0; u <= t; u++) {
                float ds = ar[u] * (dar[u] - dot) * scale;
                const float *k = base + (int64_t)u * C3 + C + h * hs;
                float *dk = dbase + (int64_t)u * C3 + C + h * hs;
                for (int i = 0; i < hs; i++) {
                    dq[i] += ds * k[i];
                    dk[i] += ds * q[i];
                }
            }
        }
    }
}

void gpt2_attention_backward(zinc_engine *e, float *dqkv, float *datt, const float *dout, const float *qkv,
                             const float *att, int B, int T, int C, int H) {
    att_args a = {.dqkv = dqkv, .datt = datt, .dout = dout, .qkv = qkv, .catt = att, .T = T, .C = C, .H = H};
    gpt2_par(e, (int64_t)B * H, att_backward_heads, &a);
}

#define GELU_K 0.7978845608028654f /* sqrt(2/pi) */

typedef struct gelu_args {
    float *out;
    const float *x, *dout;
} gelu_args;

static void gelu_forward_range(void *arg, int64_t lo, int64_t hi) {
    const gelu_args *a = arg;
    for (int64_t i = lo; i < hi; i++) {
        float v = a->x[i];
        a->out[i] = 0.5f * v * (1.0f + tanhf(GELU_K * (v + 0.044715f * v * v * v)));
    }
}

void gpt2_gelu_forward(zinc_engine *e, float *out, const float *x, int64_t n) {
    gelu_args a = {.out = out, .x = x};
    gpt2_par(e, n, gelu_forward_range, &a);
}

static void gelu_backward_range(void *arg, int64_t lo, int64_t hi) {
    const gelu_args *a = arg;
    for (int64_t i = lo; i < hi; i++) {
        float v = a->x[i], u = GELU_K * (v + 0.044715f * v * v * v), th = tanhf(u);
        float sech2 = 1.0f - th * th;
        float g = 0.5f * (1.0f + th) + 0.5f * v * sech2 * GELU_K * (1.0f + 3.0f * 0.044715f * v * v);
        a->out[i] += g * a->dout[i];
    }
}

void gpt2_gelu_backward(zinc_engine *e, float *dx, const float *x, const float *dout, int64_t n) {
    gelu_args a = {.out = dx, .x = x, .dout = dout};
    gpt2_par(e, n, gelu_backward_range, &a);
}

typedef struct gelu_deriv_args {
    float *out, *deriv;
    const float *x;
    const gpt2_vecmath *vm;
} gelu_deriv_args;

static void gelu_deriv_fwd_range(void *arg, int64_t lo, int64_t hi) {
    const gelu_deriv_args *a = arg;
    a->vm->gelu_fwd(a->out + lo, a->deriv + lo, a->x + lo, hi - lo);
}

void gpt2_gelu_forward_deriv(zinc_engine *e, float *out, float *deriv, const float *x, int64_t n) {
    gelu_deriv_args a = {.out = out, .deriv = deriv, .x = x, .vm = gpt2_vecmath_get()};
    gpt2_par(e, n, gelu_deriv_fwd_range, &a);
}

typedef struct ce_args {
    float *dlogits;
    const float *logits;
    const int32_t *targets;
    double *row_loss;
    const gpt2_vecmath *vm;
    int V;
    float dscale;
} ce_args;

/* The exponentials once per row (vectorised, gpt2_vecmath.h), summed in double, written straight into
 * dlogits when there is one. */
GPT2_VECTOR_CLONES static void ce_rows(void *arg, int64_t lo, int64_t hi) {
    const ce_args *a = arg;
    int V = a->V;
    for (int64_t n = lo; n < hi; n++) {
        const float *z = a->logits + n * V;
        float mx = a->vm->max(z, V), zt = z[a->targets[n]];
        float *d = a->dlogits ? a->dlogits + n * V : NULL;
        double sum = a->vm->exp_shift(d, z, V, mx);
        a->row_loss[n] = log(sum) - (double)(zt - mx);
        if (d) {
            float inv = (float)(1.0 / sum);
            for (int k = 0; k < V; k++) d[k] = d[k] * inv * a->dscale;
            d[a->targets[n]] -= a->dscale;
        }
    }
}

double gpt2_crossentropy(zinc_engine *e, float *dlogits, const float *logits, const int32_t *targets, int64_t N, int V,
                         float dscale, double *row_loss) {
    ce_args a = {dlogits, logits, targets, row_loss, gpt2_vecmath_get(), V, dscale};
    gpt2_par(e, N, ce_rows, &a);
    double total = 0; /* in row order: the same sum for any thread count */
    for (int64_t n = 0; n < N; n++) total += row_loss[n];
    return total;
}

typedef struct embed_args {
    float *out, *dwte, *dwpe;
    const float *wpe, *dout;
    const void *wte;
    const int32_t *inp;
    zinc_dtype t;
    int64_t N;
    int T, C;
} embed_args;

GPT2_VECTOR_CLONES static void embed_rows(void *arg, int64_t lo, int64_t hi) {
    const embed_args *a = arg;
    int C = a->C;
    for (int64_t n = lo; n < hi; n++) {
        float *x = a->out + n * C;
        const float *pe = a->wpe + (n % a->T) * C;
        size_t r = (size_t)a->inp[n] * (size_t)C;
        if (a->t == ZINC_BF16) {
            const uint16_t *h = (const uint16_t *)a->wte + r;
            for (int c = 0; c < C; c++) {
                uint32_t u = (uint32_t)h[c] << 16;
                memcpy(&x[c], &u, 4);
            }
        } else if (a->t == ZINC_FP16) {
            const uint16_t *h = (const uint16_t *)a->wte + r;
            for (int c = 0; c < C; c++) x[c] = zinc_fp16_to_f32(h[c]);
        } else {
            memcpy(x, (const float *)a->wte + r, (size_t)C * sizeof(float));
        }
        for (int c = 0; c < C; c++) x[c] += pe[c];
    }
}

void gpt2_embed_forward(zinc_engine *e, float *out, const int32_t *inp, const void *wte, zinc_dtype t, const float *wpe,
                        int B, int T, int C) {
    embed_args a = {.out = out, .wpe = wpe, .wte = wte, .inp = inp, .t = t, .T = T, .C = C};
    gpt2_par(e, (int64_t)B * T, embed_rows, &a);
}

/* Over blocks of COL_BLOCK channels: each gradient element gets its additions in (b,t) order. */
GPT2_VECTOR_CLONES static void embed_backward_channels(void *arg, int64_t lo, int64_t hi) {
    const embed_args *a = arg;
    int64_t C = a->C;
    for (int64_t blk = lo; blk < hi; blk++) {
        int64_t c0 = blk * COL_BLOCK, c1 = C - c0 < COL_BLOCK ? C : c0 + COL_BLOCK;
        for (int64_t n = 0; n < a->N; n++) {
            const float *d = a->dout + n * C;
            if (a->dwte) {
                float *g = a->dwte + (int64_t)a->inp[n] * C;
                for (int64_t c = c0; c < c1; c++) g[c] += d[c];
            }
            if (a->dwpe) {
                float *g = a->dwpe + (n % a->T) * C;
                for (int64_t c = c0; c < c1; c++) g[c] += d[c];
            }
        }
    }
}

void gpt2_embed_backward(zinc_engine *e, float *dwte, float *dwpe, const float *dout, const int32_t *inp, int B, int T,
                         int C) {
    embed_args a = {.dwte = dwte, .dwpe = dwpe, .dout = dout, .inp = inp, .N = (int64_t)B * T, .T = T, .C = C};
    gpt2_par(e, pieces(C, COL_BLOCK), embed_backward_channels, &a);
}
