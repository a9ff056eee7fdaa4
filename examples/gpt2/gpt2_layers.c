/* See gpt2_layers.h. */
#include "gpt2_layers.h"

#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <string.h>

void gpt2_layernorm_forward(float *out, float *mean, float *rstd, const float *x, const float *w, const float *b,
                            int64_t N, int C) {
#pragma omp parallel for schedule(static)
    for (int64_t n = 0; n < N; n++) {
        const float *xr = x + n * C;
        float m = 0;
        for (int c = 0; c < C; c++) m += xr[c];
        m /= (float)C;
        float v = 0;
        for (int c = 0; c < C; c++) {
            float d = xr[c] - m;
            v += d * d;
        }
        v /= (float)C;
        float s = 1.0f / sqrtf(v + GPT2_LN_EPS);
        float *o = out + n * C;
        for (int c = 0; c < C; c++) o[c] = (xr[c] - m) * s * w[c] + b[c];
        mean[n] = m;
        rstd[n] = s;
    }
}

void gpt2_layernorm_backward(float *dx, float *dw, float *db, const float *dout, const float *x, const float *w,
                             const float *mean, const float *rstd, int64_t N, int C) {
#pragma omp parallel for schedule(static)
    for (int64_t n = 0; n < N; n++) {
        const float *xr = x + n * C, *dr = dout + n * C;
        float m = mean[n], s = rstd[n], dnorm_mean = 0, dnorm_xhat_mean = 0;
        for (int c = 0; c < C; c++) {
            float xhat = (xr[c] - m) * s, dn = dr[c] * w[c];
            dnorm_mean += dn;
            dnorm_xhat_mean += dn * xhat;
        }
        dnorm_mean /= (float)C;
        dnorm_xhat_mean /= (float)C;
        float *dxr = dx + n * C;
        for (int c = 0; c < C; c++) {
            float xhat = (xr[c] - m) * s, dn = dr[c] * w[c];
            dxr[c] += s * (dn - dnorm_mean - xhat * dnorm_xhat_mean);
        }
    }
#pragma omp parallel for schedule(static)
    for (int c = 0; c < C; c++) {
        float sw = 0, sb = 0;
        for (int64_t n = 0; n < N; n++) {
            float d = dout[n * C + c];
            sw += d * (x[n * C + c] - mean[n]) * rstd[n];
            sb += d;
        }
        dw[c] += sw;
        db[c] += sb;
    }
}

/* OpenBLAS runs single-threaded (gpt2_layers_init) inside the model's own OpenMP threads, each taking a
 * slice of rows: one set of threads, so none spins waiting while another pool needs the cores. */
static void slice(int64_t n, int64_t *lo, int64_t *hi) {
    int t = omp_get_thread_num(), nt = omp_get_num_threads();
    *lo = n * t / nt;
    *hi = n * (t + 1) / nt;
}

void gpt2_layers_init(void) { openblas_set_num_threads(1); }

void gpt2_matmul_forward(float *out, const float *x, const float *W, const float *b, int64_t N, int IC, int OC) {
#pragma omp parallel
    {
        int64_t lo, hi;
        slice(N, &lo, &hi);
        if (hi > lo) {
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)(hi - lo), OC, IC, 1.0f, x + lo * IC, IC, W, IC,
                        0.0f, out + lo * OC, OC);
            if (b)
                for (int64_t n = lo; n < hi; n++)
                    for (int o = 0; o < OC; o++) out[n * OC + o] += b[o];
        }
    }
}

void gpt2_matmul_backward(float *dx, float *dW, float *db, const float *dout, const float *x, const float *W,
                          int64_t N, int IC, int OC) {
#pragma omp parallel
    {
        int64_t lo, hi;
        if (dx) {
            slice(N, &lo, &hi);
            if (hi > lo)
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)(hi - lo), IC, OC, 1.0f, dout + lo * OC, OC,
                            W, IC, 1.0f, dx + lo * IC, IC);
        }
        slice(OC, &lo, &hi);
        if (hi > lo && dW)
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)(hi - lo), IC, (int)N, 1.0f, dout + lo, OC, x, IC,
                        1.0f, dW + lo * IC, IC);
        if (db)
            for (int64_t o = lo; o < hi; o++) {
                float s = 0;
                for (int64_t n = 0; n < N; n++) s += dout[n * OC + o];
                db[o] += s;
            }
    }
}

void gpt2_attention_forward(float *out, float *att, const float *qkv, int B, int T, int C, int H) {
    int hs = C / H, C3 = 3 * C;
    float scale = 1.0f / sqrtf((float)hs);
#pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++) {
            const float *base = qkv + (int64_t)b * T * C3;
            float *a = att + ((int64_t)b * H + h) * T * T;
            for (int t = 0; t < T; t++) {
                const float *q = base + (int64_t)t * C3 + h * hs;
                float *ar = a + (int64_t)t * T, mx = -INFINITY;
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
                float *o = out + ((int64_t)b * T + t) * C + h * hs;
                for (int i = 0; i < hs; i++) o[i] = 0;
                for (int u = 0; u <= t; u++) {
                    const float *v = base + (int64_t)u * C3 + 2 * C + h * hs;
                    for (int i = 0; i < hs; i++) o[i] += ar[u] * v[i];
                }
            }
        }
}

void gpt2_attention_backward(float *dqkv, float *datt, const float *dout, const float *qkv, const float *att, int B,
                             int T, int C, int H) {
    int hs = C / H, C3 = 3 * C;
    float scale = 1.0f / sqrtf((float)hs);
#pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++) {
            const float *base = qkv + (int64_t)b * T * C3;
            float *dbase = dqkv + (int64_t)b * T * C3;
            const float *a = att + ((int64_t)b * H + h) * T * T;
            float *da = datt + ((int64_t)b * H + h) * T * T;
            for (int t = 0; t < T; t++) {
                const float *ar = a + (int64_t)t * T, *dor = dout + ((int64_t)b * T + t) * C + h * hs;
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

#define GELU_K 0.7978845608028654f /* sqrt(2/pi) */

void gpt2_gelu_forward(float *out, const float *x, int64_t n) {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++) {
        float v = x[i];
        out[i] = 0.5f * v * (1.0f + tanhf(GELU_K * (v + 0.044715f * v * v * v)));
    }
}

void gpt2_gelu_backward(float *dx, const float *x, const float *dout, int64_t n) {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++) {
        float v = x[i], u = GELU_K * (v + 0.044715f * v * v * v), th = tanhf(u);
        float sech2 = 1.0f - th * th;
        float g = 0.5f * (1.0f + th) + 0.5f * v * sech2 * GELU_K * (1.0f + 3.0f * 0.044715f * v * v);
        dx[i] += g * dout[i];
    }
}

double gpt2_crossentropy(float *dlogits, const float *logits, const int32_t *targets, int64_t N, int V, float dscale) {
    double total = 0;
#pragma omp parallel for reduction(+ : total) schedule(static)
    for (int64_t n = 0; n < N; n++) {
        const float *z = logits + n * V;
        float mx = z[0];
        for (int k = 1; k < V; k++)
            if (z[k] > mx) mx = z[k];
        double sum = 0;
        for (int k = 0; k < V; k++) sum += exp((double)(z[k] - mx));
        total += log(sum) - (double)(z[targets[n]] - mx);
        if (dlogits) {
            float *d = dlogits + n * V;
            float inv = (float)(1.0 / sum);
            for (int k = 0; k < V; k++) d[k] = expf(z[k] - mx) * inv * dscale;
            d[targets[n]] -= dscale;
        }
    }
    return total;
}
