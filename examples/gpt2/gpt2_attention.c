/* Causal self-attention in blocks through sgemm (gpt2_layers.h: gpt2_attention_forward_blocked): no
 * B x H x T x T matrix. Per (sequence, head) and per block of ATT_BQ queries, the keys go by in blocks of
 * ATT_BK: scores S = scale Q K^T (sgemm), an online softmax (running row maximum and sum, the output
 * rescaled when the maximum grows: numerically as stable as the two-pass softmax), out += P V (sgemm).
 * The forward keeps each row's log-sum-exp; backward recomputes P = exp(S - lse) block by block and
 * takes dV += P^T dO, dS = P (dO V^T - rowsum(dO o O)) scale, dQ += dS K, dK += dS^T Q, all sgemm. The
 * blocks are fixed sizes and each (sequence, head) is one task on one thread, so nothing depends on the
 * thread count. Scratch: two ATT_BQ x ATT_BK tiles on the stack. */
#include "gpt2_gemm.h"
#include <math.h>
#include <string.h>

#include "gpt2_layers.h"
#include "gpt2_vecmath.h"

#define ATT_BQ 64
#define ATT_BK 64

typedef struct att_blk {
    float *out, *lse, *dqkv;
    const float *qkv, *dout, *cout, *clse;
    const gpt2_vecmath *vm;
    int T, C, H;
} att_blk;

/* Keys of query row t (absolute) inside the key block starting at u0 with nk keys: u0..min(t, u0+nk-1). */
static int keys_seen(int t, int u0, int nk) {
    int c = t - u0 + 1;
    return c < 0 ? 0 : c > nk ? nk : c;
}

GPT2_VECTOR_CLONES static void att_fwd_heads(void *arg, int64_t lo, int64_t hi) {
    const att_blk *a = arg;
    int T = a->T, C = a->C, H = a->H, hs = C / H, C3 = 3 * C;
    float scale = 1.0f / sqrtf((float)hs), S[ATT_BQ * ATT_BK], mrow[ATT_BQ], lrow[ATT_BQ];
    for (int64_t bh = lo; bh < hi; bh++) {
        int64_t b = bh / H;
        int h = (int)(bh % H);
        const float *Q = a->qkv + b * T * C3 + h * hs, *K = Q + C, *V = Q + 2 * C;
        float *O = a->out + b * T * C + h * hs, *lse = a->lse + bh * T;
        for (int t0 = 0; t0 < T; t0 += ATT_BQ) {
            int nq = T - t0 < ATT_BQ ? T - t0 : ATT_BQ;
            for (int i = 0; i < nq; i++) {
                mrow[i] = -INFINITY, lrow[i] = 0;
                memset(O + (int64_t)(t0 + i) * C, 0, (size_t)hs * sizeof(float));
            }
            for (int u0 = 0; u0 < t0 + nq; u0 += ATT_BK) {
                int nk = t0 + nq - u0 < ATT_BK ? t0 + nq - u0 : ATT_BK;
                gpt2_sgemm('N', 'T', nq, nk, hs, scale, Q + (int64_t)t0 * C3, C3, K + (int64_t)u0 * C3, C3, 0.0f, S,
                           ATT_BK);
                for (int i = 0; i < nq; i++) {
                    float *s = S + i * ATT_BK;
                    int cnt = keys_seen(t0 + i, u0, nk);
                    if (cnt > 0) {
                        float mx = a->vm->max(s, cnt), mnew = mx > mrow[i] ? mx : mrow[i];
                        float keep = expf(mrow[i] - mnew); /* 0 on the first block: mrow = -inf */
                        lrow[i] = lrow[i] * keep + a->vm->exp_shift_f32(s, s, cnt, mnew);
                        mrow[i] = mnew;
                        if (keep != 1.0f) {
                            float *o = O + (int64_t)(t0 + i) * C;
                            for (int k = 0; k < hs; k++) o[k] *= keep;
                        }
                    }
                    for (int j = cnt; j < nk; j++) s[j] = 0;
                }
                gpt2_sgemm('N', 'N', nq, hs, nk, 1.0f, S, ATT_BK, V + (int64_t)u0 * C3, C3, 1.0f, O + (int64_t)t0 * C,
                           C);
            }
            for (int i = 0; i < nq; i++) {
                float inv = 1.0f / lrow[i], *o = O + (int64_t)(t0 + i) * C;
                for (int k = 0; k < hs; k++) o[k] *= inv;
                lse[t0 + i] = mrow[i] + logf(lrow[i]);
            }
        }
    }
}

void gpt2_attention_forward_blocked(zinc_engine *e, float *out, float *lse, const float *qkv, int B, int T, int C,
                                    int H) {
    att_blk a = {.out = out, .lse = lse, .qkv = qkv, .vm = gpt2_vecmath_get(), .T = T, .C = C, .H = H};
    gpt2_par(e, (int64_t)B * H, att_fwd_heads, &a);
}

GPT2_VECTOR_CLONES static void att_bwd_heads(void *arg, int64_t lo, int64_t hi) {
    const att_blk *a = arg;
    int T = a->T, C = a->C, H = a->H, hs = C / H, C3 = 3 * C;
    float scale = 1.0f / sqrtf((float)hs), P[ATT_BQ * ATT_BK], dS[ATT_BQ * ATT_BK], D[ATT_BQ];
    for (int64_t bh = lo; bh < hi; bh++) {
        int64_t b = bh / H;
        int h = (int)(bh % H);
        const float *Q = a->qkv + b * T * C3 + h * hs, *K = Q + C, *V = Q + 2 * C;
        const float *O = a->cout + b * T * C + h * hs, *dO = a->dout + b * T * C + h * hs, *lse = a->clse + bh * T;
        float *dQ = a->dqkv + b * T * C3 + h * hs, *dK = dQ + C, *dV = dQ + 2 * C;
        for (int t0 = 0; t0 < T; t0 += ATT_BQ) {
            int nq = T - t0 < ATT_BQ ? T - t0 : ATT_BQ;
            for (int i = 0; i < nq; i++) { /* rowsum(dO o O) = sum_u P_tu (dO_t . v_u) */
                const float *o = O + (int64_t)(t0 + i) * C, *d = dO + (int64_t)(t0 + i) * C;
                float s = 0;
                for (int k = 0; k < hs; k++) s += o[k] * d[k];
                D[i] = s;
            }
            for (int u0 = 0; u0 < t0 + nq; u0 += ATT_BK) {
                int nk = t0 + nq - u0 < ATT_BK ? t0 + nq - u0 : ATT_BK;
                gpt2_sgemm('N', 'T', nq, nk, hs, scale, Q + (int64_t)t0 * C3, C3, K + (int64_t)u0 * C3, C3, 0.0f, P,
                           ATT_BK);
                gpt2_sgemm('N', 'T', nq, nk, hs, 1.0f, dO + (int64_t)t0 * C, C, V + (int64_t)u0 * C3, C3, 0.0f, dS,
                           ATT_BK);
                for (int i = 0; i < nq; i++) {
                    float *p = P + i * ATT_BK, *ds = dS + i * ATT_BK;
                    int cnt = keys_seen(t0 + i, u0, nk);
                    if (cnt > 0) a->vm->exp_shift_f32(p, p, cnt, lse[t0 + i]);
                    for (int j = 0; j < cnt; j++) ds[j] = p[j] * (ds[j] - D[i]) * scale;
                    for (int j = cnt; j < nk; j++) p[j] = 0, ds[j] = 0;
                }
                gpt2_sgemm('T', 'N', nk, hs, nq, 1.0f, P, ATT_BK, dO + (int64_t)t0 * C, C, 1.0f, dV + (int64_t)u0 * C3,
                           C3);
                gpt2_sgemm('N', 'N', nq, hs, nk, 1.0f, dS, ATT_BK, K + (int64_t)u0 * C3, C3, 1.0f,
                           dQ + (int64_t)t0 * C3, C3);
                gpt2_sgemm('T', 'N', nk, hs, nq, 1.0f, dS, ATT_BK, Q + (int64_t)t0 * C3, C3, 1.0f,
                           dK + (int64_t)u0 * C3, C3);
            }
        }
    }
}

void gpt2_attention_backward_blocked(zinc_engine *e, float *dqkv, const float *dout, const float *out, const float *qkv,
                                     const float *lse, int B, int T, int C, int H) {
    att_blk a = {.dqkv = dqkv,
                 .dout = dout,
                 .cout = out,
                 .qkv = qkv,
                 .clse = lse,
                 .vm = gpt2_vecmath_get(),
                 .T = T,
                 .C = C,
                 .H = H};
    gpt2_par(e, (int64_t)B * H, att_bwd_heads, &a);
}
