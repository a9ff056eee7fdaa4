// See gpt2_kernels.h. Every kernel writes each output element from one thread, and every sum runs in an
// order fixed by the shapes alone (sequential loops, butterfly shuffles, partial sums over a fixed number
// of row groups combined in group order): no atomics, so two runs give the same bits on any GPU.
// Where the host reference (gpt2_layers.c) accumulates sequentially into an output (attention's out, dq,
// dk, dv; the embedding gradients) the kernels do the same additions in the same order; reductions the
// host does in one sequential loop (LayerNorm and softmax sums, column sums) are split here, which moves
// results by a few float rounding steps.
#include "gpt2_kernels.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <math.h>

extern "C" {
#include "gpt2_layers.h" /* GPT2_LN_EPS */
}

namespace {

constexpr int kThreads = 256; // elementwise and per-row kernels
constexpr unsigned kFull = 0xffffffffu;
constexpr int64_t kMaxBlocks = 65535LL * 16;

// Attention: a block takes kTile query rows (or key rows) of one (batch, head) and walks the other side
// kTile rows at a time; 256 threads = kTile rows x 8 threads per row in the score phase.
constexpr int kTile = 32;
constexpr int kAttThreads = 256;
static_assert(kTile * 8 == kAttThreads, "score phase: 8 threads per query row");

// Column sums (LayerNorm dw/db, bias gradients): a block covers kColTile columns with kRowGroups
// threads each; a thread sums a fixed contiguous range of rows, the ranges are then added in order.
constexpr int kColTile = 8;
constexpr int kRowGroups = 128;

unsigned blocks_for(int64_t work, int per_block) {
    int64_t b = (work + per_block - 1) / per_block;
    if (b < 1) b = 1;
    return (unsigned)(b > kMaxBlocks ? kMaxBlocks : b);
}

bool valid_dtype(zinc_dtype t) { return t == ZINC_FP32 || t == ZINC_FP16 || t == ZINC_BF16; }

#define GRID_STRIDE(i, n)                                                                                              \
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < (n); i += (int64_t)gridDim.x * blockDim.x)

__device__ __forceinline__ float to_f(float x) { return x; }
__device__ __forceinline__ float to_f(__half x) { return __half2float(x); }
__device__ __forceinline__ float to_f(__nv_bfloat16 x) { return __bfloat162float(x); }
template <class T> __device__ __forceinline__ T from_f(float x);
template <> __device__ __forceinline__ float from_f<float>(float x) { return x; }
template <> __device__ __forceinline__ __half from_f<__half>(float x) { return __float2half_rn(x); }
template <> __device__ __forceinline__ __nv_bfloat16 from_f<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }

// Butterfly reductions: lane L adds its partner's value to its own, and a + b == b + a exactly, so every
// lane ends with the same bits.
__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(kFull, v, o);
    return v;
}
__device__ __forceinline__ double warp_sum(double v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(kFull, v, o);
    return v;
}
__device__ __forceinline__ float warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(kFull, v, o));
    return v;
}

// Block-wide reductions for blockDim.x == kThreads: warp results in shared memory, then every thread adds
// them in warp order (the same bits everywhere). The caller syncs before `part` is written again.
__device__ __forceinline__ float block_max(float v, float *part) {
    v = warp_max(v);
    if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = v;
    __syncthreads();
    float r = part[0];
    for (int w = 1; w < kThreads / 32; w++) r = fmaxf(r, part[w]);
    return r;
}
__device__ __forceinline__ double block_sum(double v, double *part) {
    v = warp_sum(v);
    if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = v;
    __syncthreads();
    double r = part[0];
    for (int w = 1; w < kThreads / 32; w++) r += part[w];
    return r;
}

// ------------------------------------------------------------------ elementwise

template <class T> __global__ void k_to_f32(float *dst, const T *src, int64_t n) {
    GRID_STRIDE(i, n) dst[i] = to_f(src[i]);
}

// The bits of zcu_axpy_f32 then a cast (what zinc_grad_add_f32 does on a device): one rounded product,
// one rounded sum, one rounding to T.
template <class T> __global__ void k_grad_add(T *grad, const float *add, float scale, int64_t n) {
    GRID_STRIDE(i, n) grad[i] = from_f<T>(__fadd_rn(to_f(grad[i]), __fmul_rn(scale, add[i])));
}

__global__ void k_add(float *y, const float *a, const float *b, int64_t n) { GRID_STRIDE(i, n) y[i] = a[i] + b[i]; }

#define GELU_K 0.7978845608028654f /* sqrt(2/pi), as gpt2_layers.c */

__global__ void k_gelu_forward(float *out, const float *x, int64_t n) {
    GRID_STRIDE(i, n) {
        float v = x[i];
        out[i] = 0.5f * v * (1.0f + tanhf(GELU_K * (v + 0.044715f * v * v * v)));
    }
}

__global__ void k_gelu_backward(float *dx, const float *x, const float *dout, int64_t n) {
    GRID_STRIDE(i, n) {
        float v = x[i], u = GELU_K * (v + 0.044715f * v * v * v), th = tanhf(u);
        float sech2 = 1.0f - th * th;
        float g = 0.5f * (1.0f + th) + 0.5f * v * sech2 * GELU_K * (1.0f + 3.0f * 0.044715f * v * v);
        dx[i] += g * dout[i];
    }
}

__global__ void k_bias_forward(float *out, const float *b, int64_t N, int OC) {
    GRID_STRIDE(i, N * OC) out[i] += b[i % OC];
}

// ------------------------------------------------------------------ embedding

__global__ void k_embed_forward(float *out, const int32_t *inp, const float *wte, const float *wpe, int64_t N, int T,
                                int C) {
    GRID_STRIDE(i, N * C) {
        int64_t n = i / C, c = i % C;
        out[i] = wte[(int64_t)inp[n] * C + c] + wpe[(n % T) * C + c];
    }
}

// dwpe[t, c] += dout[b, t, c] for b = 0, 1, ...: the host's order for each element.
__global__ void k_embed_dwpe(float *dwpe, const float *dout, int B, int T, int C) {
    GRID_STRIDE(i, (int64_t)T * C) {
        int64_t t = i / C, c = i % C;
        float acc = dwpe[i];
        for (int b = 0; b < B; b++) acc += dout[((int64_t)b * T + t) * C + c];
        dwpe[i] = acc;
    }
}

// dwte's row r gets the rows of dout at every position n with inp[n] == r, in position order. The block of
// position n does it if n is r's first position (no sort, no atomics): it first looks for r among the
// earlier positions (most blocks stop there), then finds r's positions from n on, kThreads at a time,
// through ballots, and adds their rows in order, each thread its own channels.
constexpr int kEmbedCheck = kThreads * 8; // positions looked at between two block-wide votes

__global__ void k_embed_dwte(float *dwte, const float *dout, const int32_t *inp, int64_t N, int C) {
    __shared__ unsigned masks[kThreads / 32];
    for (int64_t n = blockIdx.x; n < N; n += gridDim.x) {
        const int32_t r = inp[n];
        bool seen = false;
        for (int64_t lo = 0; lo < n && !seen; lo += kEmbedCheck) {
            int hit = 0;
            int64_t hi = lo + kEmbedCheck < n ? lo + kEmbedCheck : n;
            for (int64_t j = lo + threadIdx.x; j < hi; j += blockDim.x) hit |= inp[j] == r;
            seen = __syncthreads_or(hit) != 0; /* the same value in every thread */
        }
        if (seen) continue;
        float *g = dwte + (int64_t)r * C;
        for (int64_t base = n; base < N; base += blockDim.x) {
            int64_t j = base + threadIdx.x;
            unsigned m = __ballot_sync(kFull, j < N && inp[j] == r);
            if ((threadIdx.x & 31) == 0) masks[threadIdx.x >> 5] = m;
            __syncthreads();
            for (int w = 0; w < (int)(blockDim.x >> 5); w++) {
                for (unsigned mw = masks[w]; mw; mw &= mw - 1) {
                    const float *d = dout + (base + w * 32 + (__ffs(mw) - 1)) * C;
                    for (int c = threadIdx.x; c < C; c += blockDim.x) g[c] += d[c];
                }
            }
            __syncthreads(); /* masks are rewritten next round */
        }
    }
}

// ------------------------------------------------------------------ LayerNorm (one warp per row)

__global__ void k_ln_forward(float *out, float *mean, float *rstd, const float *x, const float *w, const float *b,
                             int64_t N, int C) {
    const int lane = threadIdx.x & 31;
    const int64_t nwarps = (int64_t)gridDim.x * (blockDim.x >> 5);
    for (int64_t n = blockIdx.x * (int64_t)(blockDim.x >> 5) + (threadIdx.x >> 5); n < N; n += nwarps) {
        const float *xr = x + n * C;
        float s = 0.0f;
        for (int c = lane; c < C; c += 32) s += xr[c];
        const float m = warp_sum(s) / (float)C;
        float v = 0.0f;
        for (int c = lane; c < C; c += 32) {
            float d = xr[c] - m;
            v += d * d;
        }
        v = warp_sum(v) / (float)C;
        const float rs = 1.0f / sqrtf(v + GPT2_LN_EPS);
        float *o = out + n * C;
        for (int c = lane; c < C; c += 32) o[c] = (xr[c] - m) * rs * w[c] + b[c];
        if (lane == 0) {
            mean[n] = m;
            rstd[n] = rs;
        }
    }
}

__global__ void k_ln_backward_rows(float *dx, const float *dout, const float *x, const float *w, const float *mean,
                                   const float *rstd, int64_t N, int C) {
    const int lane = threadIdx.x & 31;
    const int64_t nwarps = (int64_t)gridDim.x * (blockDim.x >> 5);
    for (int64_t n = blockIdx.x * (int64_t)(blockDim.x >> 5) + (threadIdx.x >> 5); n < N; n += nwarps) {
        const float *xr = x + n * C, *dr = dout + n * C;
        const float m = mean[n], s = rstd[n];
        float dmean = 0.0f, dxhat = 0.0f;
        for (int c = lane; c < C; c += 32) {
            float xhat = (xr[c] - m) * s, dn = dr[c] * w[c];
            dmean += dn;
            dxhat += dn * xhat;
        }
        dmean = warp_sum(dmean) / (float)C;
        dxhat = warp_sum(dxhat) / (float)C;
        float *dxr = dx + n * C;
        for (int c = lane; c < C; c += 32) {
            float xhat = (xr[c] - m) * s, dn = dr[c] * w[c];
            dxr[c] += s * (dn - dmean - xhat * dxhat);
        }
    }
}

// Column sums over N rows: db[c] += sum_n dout[n, c]; with LN also dw[c] += sum_n dout * xhat. Thread
// (tx, ty) sums rows [ty * chunk, (ty + 1) * chunk) of column c in row order; thread ty = 0 then adds the
// kRowGroups partial sums in group order. blockDim = (kColTile, kRowGroups).
template <bool LN>
__global__ void k_col_sums(float *dw, float *db, const float *dout, const float *x, const float *mean,
                           const float *rstd, int64_t N, int C) {
    __shared__ float pw[kRowGroups][kColTile], pb[kRowGroups][kColTile];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int64_t chunk = (N + kRowGroups - 1) / kRowGroups;
    const int64_t lo = ty * chunk, hi = lo + chunk < N ? lo + chunk : N;
    for (int64_t c0 = (int64_t)blockIdx.x * kColTile; c0 < C; c0 += (int64_t)gridDim.x * kColTile) {
        const int64_t c = c0 + tx;
        float sw = 0.0f, sb = 0.0f;
        if (c < C)
            for (int64_t n = lo; n < hi; n++) {
                float d = dout[n * C + c];
                if (LN) sw += d * (x[n * C + c] - mean[n]) * rstd[n];
                sb += d;
            }
        pw[ty][tx] = sw;
        pb[ty][tx] = sb;
        __syncthreads();
        if (ty == 0 && c < C) {
            float tw = 0.0f, tb = 0.0f;
            for (int k = 0; k < kRowGroups; k++) {
                tw += pw[k][tx];
                tb += pb[k][tx];
            }
            if (LN) dw[c] += tw;
            db[c] += tb;
        }
        __syncthreads(); /* pw, pb are rewritten for the next column tile */
    }
}

// ------------------------------------------------------------------ attention
//
// qkv[b, t, :] = q (C) | k (C) | v (C); head h uses channels h*hs .. h*hs+hs-1 of each. att[b, h, t, u].
// Tiles of kTile rows x hs floats live in shared memory with row stride hs + 1 (rows in different banks).

__device__ __forceinline__ int64_t qkv_row(int64_t b, int T, int64_t t, int64_t C3) { return (b * T + t) * C3; }

// Loads rows r0 .. r0+kTile-1 (those < rows_end; the others as zeros) of head h of one part (0 q, 1 k,
// 2 v) of qkv, or of a [B, T, C] buffer when C3 == C and part == 0.
__device__ __forceinline__ void load_tile(float *dst, int ld, const float *src, int64_t b, int T, int64_t C3,
                                          int64_t part_off, int r0, int rows_end, int hs) {
    for (int p = threadIdx.x; p < kTile * hs; p += blockDim.x) {
        int r = p / hs, i = p % hs, t = r0 + r;
        dst[r * ld + i] = t < rows_end ? src[qkv_row(b, T, t, C3) + part_off + i] : 0.0f;
    }
}

// Raw scores S[t][u] = (a_t . b_u) * scale for the block's query rows t0 .. t0+nq-1 and u <= t, written
// to rows of dst (T x T of this (b, h)); a_t in sA (kTile x ld, loaded), b_u loaded tile by tile into sB.
// Thread (qi = tid / 8, kj = tid % 8 + 8 r) computes 4 scores per key tile, each dot in channel order.
__device__ void score_tiles(float *dst, const float *sA, float *sB, int ld, const float *qkv, int64_t b, int T,
                            int64_t C3, int64_t b_off, int t0, int nq, int hs, float scale) {
    const int tlast = t0 + nq - 1, qi = threadIdx.x >> 3, kb = threadIdx.x & 7, t = t0 + qi;
    for (int u0 = 0; u0 <= tlast; u0 += kTile) {
        __syncthreads(); /* the previous tile's reads of sB are done; sA is loaded */
        load_tile(sB, ld, qkv, b, T, C3, b_off, u0, tlast + 1, hs);
        __syncthreads();
        float s[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        for (int i = 0; i < hs; i++) {
            float a = sA[qi * ld + i];
#pragma unroll
            for (int r = 0; r < 4; r++) s[r] += a * sB[(kb + 8 * r) * ld + i];
        }
        if (qi < nq)
#pragma unroll
            for (int r = 0; r < 4; r++) {
                int u = u0 + kb + 8 * r;
                if (u <= t) dst[(int64_t)t * T + u] = s[r] * scale;
            }
    }
    __syncthreads(); /* every score is in dst */
}

// acc[qi][i] += sum over u <= t of P[t][u] * m_u[i] (u ascending), for the block's query rows: P rows from
// global (entries u <= t only), m_u from qkv part m_off, kTile keys at a time. acc is kTile x ld, owned
// element by element by one thread throughout.
__device__ void weighted_rows(float *acc, float *sM, float *sP, int ld, const float *P, const float *qkv, int64_t b,
                              int T, int64_t C3, int64_t m_off, int t0, int nq, int hs) {
    const int tlast = t0 + nq - 1;
    for (int u0 = 0; u0 <= tlast; u0 += kTile) {
        __syncthreads();
        load_tile(sM, ld, qkv, b, T, C3, m_off, u0, tlast + 1, hs);
        for (int p = threadIdx.x; p < kTile * kTile; p += blockDim.x) {
            int r = p / kTile, j = p % kTile, t = t0 + r, u = u0 + j;
            sP[r * (kTile + 1) + j] = r < nq && u <= t ? P[(int64_t)t * T + u] : 0.0f;
        }
        __syncthreads();
        for (int p = threadIdx.x; p < nq * hs; p += blockDim.x) {
            int qi = p / hs, i = p % hs, jn = t0 + qi - u0 + 1;
            if (jn > kTile) jn = kTile;
            float a = acc[qi * ld + i];
            for (int j = 0; j < jn; j++) a += sP[qi * (kTile + 1) + j] * sM[j * ld + i];
            acc[qi * ld + i] = a;
        }
    }
    __syncthreads();
}

// Forward for query rows t0 = blockIdx.x * kTile ..: scores, softmax in place (zeros above the diagonal),
// then out = att . v. Shared: sQ (q rows, later the output rows), sK (k rows, later v rows), sP.
__global__ void k_att_forward(float *out, float *att, const float *qkv, int B, int T, int C, int H, float scale) {
    extern __shared__ float sm[];
    const int hs = C / H, ld = hs + 1, t0 = blockIdx.x * kTile, nq = min(kTile, T - t0);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
    const int64_t C3 = 3 * (int64_t)C;
    float *sQ = sm, *sK = sQ + kTile * ld, *sP = sK + kTile * ld;
    for (int64_t bh = blockIdx.y; bh < (int64_t)B * H; bh += gridDim.y) {
        const int64_t b = bh / H, h = bh % H;
        float *ab = att + bh * T * T;
        __syncthreads(); /* the previous (b, h)'s reads of sQ are done */
        load_tile(sQ, ld, qkv, b, T, C3, h * hs, t0, t0 + nq, hs);
        score_tiles(ab, sQ, sK, ld, qkv, b, T, C3, C + h * hs, t0, nq, hs, scale);
        for (int qi = warp; qi < nq; qi += nwarps) {
            const int t = t0 + qi;
            float *ar = ab + (int64_t)t * T;
            float mx = -INFINITY;
            for (int u = lane; u <= t; u += 32) mx = fmaxf(mx, ar[u]);
            mx = warp_max(mx);
            float sum = 0.0f;
            for (int u = lane; u <= t; u += 32) {
                float e = expf(ar[u] - mx);
                ar[u] = e;
                sum += e;
            }
            const float inv = 1.0f / warp_sum(sum);
            for (int u = lane; u <= t; u += 32) ar[u] *= inv;
            for (int u = t + 1 + lane; u < T; u += 32) ar[u] = 0.0f;
        }
        for (int p = threadIdx.x; p < kTile * hs; p += blockDim.x) sQ[(p / hs) * ld + p % hs] = 0.0f;
        weighted_rows(sQ, sK, sP, ld, ab, qkv, b, T, C3, 2 * C + h * hs, t0, nq, hs);
        for (int p = threadIdx.x; p < nq * hs; p += blockDim.x) {
            int qi = p / hs, i = p % hs;
            out[(b * T + t0 + qi) * C + h * hs + i] = sQ[qi * ld + i];
        }
    }
}

// Backward, query side, for query rows t0 ..: datt[t][u] = dout_t . v_u, then through the softmax
// ds[t][u] = att (datt - sum_u datt att) * scale (kept in datt), then dq_t += sum_u ds[t][u] k_u.
// Shared: sD (dout rows, later the dq rows), sK (v rows, later k rows), sP.
__global__ void k_att_backward_q(float *dqkv, float *datt, const float *dout, const float *qkv, const float *att, int B,
                                 int T, int C, int H, float scale) {
    extern __shared__ float sm[];
    const int hs = C / H, ld = hs + 1, t0 = blockIdx.x * kTile, nq = min(kTile, T - t0);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
    const int64_t C3 = 3 * (int64_t)C;
    float *sD = sm, *sK = sD + kTile * ld, *sP = sK + kTile * ld;
    for (int64_t bh = blockIdx.y; bh < (int64_t)B * H; bh += gridDim.y) {
        const int64_t b = bh / H, h = bh % H;
        const float *ab = att + bh * T * T;
        float *db = datt + bh * T * T;
        __syncthreads();
        load_tile(sD, ld, dout, b, T, C, h * hs, t0, t0 + nq, hs);
        score_tiles(db, sD, sK, ld, qkv, b, T, C3, 2 * C + h * hs, t0, nq, hs, 1.0f);
        for (int qi = warp; qi < nq; qi += nwarps) {
            const int64_t row = (int64_t)(t0 + qi) * T;
            const int t = t0 + qi;
            float dot = 0.0f;
            for (int u = lane; u <= t; u += 32) dot += db[row + u] * ab[row + u];
            dot = warp_sum(dot);
            for (int u = lane; u <= t; u += 32) db[row + u] = ab[row + u] * (db[row + u] - dot) * scale;
        }
        for (int p = threadIdx.x; p < nq * hs; p += blockDim.x) {
            int qi = p / hs, i = p % hs;
            sD[qi * ld + i] = dqkv[qkv_row(b, T, t0 + qi, C3) + h * hs + i];
        }
        weighted_rows(sD, sK, sP, ld, db, qkv, b, T, C3, C + h * hs, t0, nq, hs);
        for (int p = threadIdx.x; p < nq * hs; p += blockDim.x) {
            int qi = p / hs, i = p % hs;
            dqkv[qkv_row(b, T, t0 + qi, C3) + h * hs + i] = sD[qi * ld + i];
        }
    }
}

// Backward, key side, for key rows u0 = blockIdx.x * kTile ..: dv_u += sum_{t >= u} att[t][u] dout_t and
// dk_u += sum_{t >= u} ds[t][u] q_t, t ascending (the host's order), ds from k_att_backward_q.
// Shared: sQ, sD (q and dout rows of a query tile), sDK, sDV (the key rows' gradients), sA, sS (att and ds
// of the tile, [t][u]).
__global__ void k_att_backward_kv(float *dqkv, const float *ds, const float *dout, const float *qkv, const float *att,
                                  int B, int T, int C, int H) {
    extern __shared__ float sm[];
    const int hs = C / H, ld = hs + 1, u0 = blockIdx.x * kTile, nk = min(kTile, T - u0);
    const int64_t C3 = 3 * (int64_t)C;
    float *sQ = sm, *sD = sQ + kTile * ld, *sDK = sD + kTile * ld, *sDV = sDK + kTile * ld;
    float *sA = sDV + kTile * ld, *sS = sA + kTile * (kTile + 1);
    for (int64_t bh = blockIdx.y; bh < (int64_t)B * H; bh += gridDim.y) {
        const int64_t b = bh / H, h = bh % H;
        const float *ab = att + bh * T * T, *sb = ds + bh * T * T;
        __syncthreads();
        for (int p = threadIdx.x; p < nk * hs; p += blockDim.x) {
            int uj = p / hs, i = p % hs;
            int64_t row = qkv_row(b, T, u0 + uj, C3) + h * hs + i;
            sDK[uj * ld + i] = dqkv[row + C];
            sDV[uj * ld + i] = dqkv[row + 2 * C];
        }
        for (int q0 = u0; q0 < T; q0 += kTile) {
            __syncthreads(); /* the previous tile's reads are done */
            load_tile(sQ, ld, qkv, b, T, C3, h * hs, q0, T, hs);
            load_tile(sD, ld, dout, b, T, C, h * hs, q0, T, hs);
            for (int p = threadIdx.x; p < kTile * kTile; p += blockDim.x) {
                int tj = p / kTile, uj = p % kTile, t = q0 + tj, u = u0 + uj;
                bool in = t < T && uj < nk && u <= t;
                sA[tj * (kTile + 1) + uj] = in ? ab[(int64_t)t * T + u] : 0.0f;
                sS[tj * (kTile + 1) + uj] = in ? sb[(int64_t)t * T + u] : 0.0f;
            }
            __syncthreads();
            const int tend = min(kTile, T - q0);
            for (int p = threadIdx.x; p < nk * hs; p += blockDim.x) {
                int uj = p / hs, i = p % hs, tj = u0 + uj - q0;
                if (tj < 0) tj = 0;
                float dv = sDV[uj * ld + i], dk = sDK[uj * ld + i];
                for (; tj < tend; tj++) {
                    dv += sA[tj * (kTile + 1) + uj] * sD[tj * ld + i];
                    dk += sS[tj * (kTile + 1) + uj] * sQ[tj * ld + i];
                }
                sDV[uj * ld + i] = dv;
                sDK[uj * ld + i] = dk;
            }
        }
        __syncthreads();
        for (int p = threadIdx.x; p < nk * hs; p += blockDim.x) {
            int uj = p / hs, i = p % hs;
            int64_t row = qkv_row(b, T, u0 + uj, C3) + h * hs + i;
            dqkv[row + C] = sDK[uj * ld + i];
            dqkv[row + 2 * C] = sDV[uj * ld + i];
        }
    }
}

// Dynamic shared memory above the default 48 KB needs the kernel's opt-in (large head sizes only).
template <class K> cudaError_t allow_smem(K kernel, size_t bytes) {
    if (bytes <= 48 * 1024) return cudaSuccess;
    int dev = 0, max_optin = 0;
    cudaError_t e = cudaGetDevice(&dev);
    if (e == cudaSuccess) e = cudaDeviceGetAttribute(&max_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev);
    if (e != cudaSuccess) return e;
    if (bytes > (size_t)max_optin) return cudaErrorInvalidValue; /* head size too large for one tile */
    return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes);
}

size_t tile_floats(int hs) { return (size_t)kTile * (size_t)(hs + 1); }
size_t ptile_floats() { return (size_t)kTile * (kTile + 1); }

// ------------------------------------------------------------------ cross-entropy (one block per row)

// The host's ce_rows: max and the probabilities in float, the normaliser and the loss in double. Every
// read of the row (max, sum, the target's logit) happens before the first write, so dlogits may be logits.
__global__ void k_crossentropy(float *dlogits, const float *logits, const int32_t *targets, int64_t N, int V,
                               float dscale, double *row_loss) {
    __shared__ float pmax[kThreads / 32];
    __shared__ double psum[kThreads / 32];
    for (int64_t n = blockIdx.x; n < N; n += gridDim.x) {
        const float *z = logits + n * V;
        const int32_t tg = targets[n];
        const bool ok = tg >= 0 && tg < V;
        const float zt = ok ? z[tg] : 0.0f;
        float mx = -INFINITY;
        for (int k = threadIdx.x; k < V; k += blockDim.x) mx = fmaxf(mx, z[k]);
        mx = block_max(mx, pmax);
        double sum = 0.0;
        for (int k = threadIdx.x; k < V; k += blockDim.x) sum += exp((double)(z[k] - mx));
        sum = block_sum(sum, psum);
        if (threadIdx.x == 0) row_loss[n] = ok ? log(sum) - (double)(zt - mx) : (double)NAN;
        if (dlogits) {
            float *d = dlogits + n * V;
            const float inv = (float)(1.0 / sum);
            for (int k = threadIdx.x; k < V; k += blockDim.x) {
                float p = __fmul_rn(__fmul_rn(expf(z[k] - mx), inv), dscale);
                d[k] = k == tg ? __fsub_rn(p, dscale) : p;
            }
        }
        __syncthreads(); /* pmax, psum are rewritten for the next row */
    }
}

} // namespace

// ------------------------------------------------------------------ launchers

extern "C" {

cudaError_t gpt2_cu_to_f32(float *dst, const void *src, zinc_dtype t, int64_t n, cudaStream_t s) {
    if (n < 0) return cudaErrorInvalidValue;
    if (n == 0) return cudaSuccess;
    if (!dst || !src || !valid_dtype(t)) return cudaErrorInvalidValue;
    unsigned g = blocks_for(n, kThreads);
    if (t == ZINC_FP16)
        k_to_f32<<<g, kThreads, 0, s>>>(dst, static_cast<const __half *>(src), n);
    else if (t == ZINC_BF16)
        k_to_f32<<<g, kThreads, 0, s>>>(dst, static_cast<const __nv_bfloat16 *>(src), n);
    else
        k_to_f32<<<g, kThreads, 0, s>>>(dst, static_cast<const float *>(src), n);
    return cudaGetLastError();
}

cudaError_t gpt2_cu_grad_add(void *grad, zinc_dtype t, const float *add, float scale, int64_t n, cudaStream_t s) {
    if (n < 0) return cudaErrorInvalidValue;
    if (n == 0) return cudaSuccess;
    if (!grad || !add || !valid_dtype(t)) return cudaErrorInvalidValue;
    unsigned g = blocks_for(n, kThreads);
    if (t == ZINC_FP16)
        k_grad_add<<<g, kThreads, 0, s>>>(static_cast<__half *>(grad), add, scale, n);
    else if (t == ZINC_BF16)
        k_grad_add<<<g, kThreads, 0, s>>>(static_cast<__nv_bfloat16 *>(grad), add, scale, n);
    else
        k_grad_add<<<g, kThreads, 0, s>>>(static_cast<float *>(grad), add, scale, n);
    return cudaGetLastError();
}

cudaError_t gpt2_cu_add(float *y, const float *a, const float *b, int64_t n, cudaStream_t s) {
    if (n < 0) return cudaErrorInvalidValue;
    if (n == 0) return cudaSuccess;
    if (!y || !a || !b) return cudaErrorInvalidValue;
    k_add<<<blocks_for(n, kThreads), kThreads, 0, s>>>(y, a, b, n);
    return cudaGetLastError();
}

cudaError_t gpt2_cu_embed_forward(float *out, const int32_t *inp, const float *wte, const float *wpe, int B, int T,
                                  int C, cudaStream_t s) {
    if (B < 0 || T < 0 || C < 0) return cudaErrorInvalidValue;
    if (B == 0 || T == 0 || C == 0) return cudaSuccess;
    if (!out || !inp || !wte || !wpe) return cudaErrorInvalidValue;
    int64_t N = (int64_t)B * T;
    k_embed_forward<<<blocks_for(N * C, kThreads), kThreads, 0, s>>>(out, inp, wte, wpe, N, T, C);
    return cudaGetLastError();
}

cudaError_t gpt2_cu_embed_backward(float *dwte, float *dwpe, const float *dout, const int32_t *inp, int B, int T, int C,
                                   cudaStream_t s) {
    if (B < 0 || T < 0 || C < 0) return cudaErrorInvalidValue;
    if (B == 0 || T == 0 || C == 0 || (!dwte && !dwpe)) return cudaSuccess;
    if (!dout || (dwte && !inp)) return cudaErrorInvalidValue;
    int64_t N = (int64_t)B * T;
    if (dwte) {
        k_embed_dwte<<<blocks_for(N, 1), kThreads, 0, s>>>(dwte, dout, inp, N, C);
        cudaError_t e = cudaGetLastError();
        if (e != cudaSuccess) return e;
    }
    if (dwpe) k_embed_dwpe<<<blocks_for((int64_t)T * C, kThreads), kThreads, 0, s>>>(dwpe, dout, B, T, C);
    return cudaGetLastError();
}

cudaError_t gpt2_cu_layernorm_forward(float *out, float *mean, float *rstd, const float *x, const float *w,
                                      const float *b, int64_t N, int C, cudaStream_t s) {
    if (N < 0 || C < 0) return cudaErrorInvalidValue;
    if (N == 0 || C == 0) return cudaSuccess;
    if (!out || !mean || !rstd || !x || !w || !b) return cudaErrorInvalidValue;
    k_ln_forward<<<blocks_for(N, kThreads / 32), kThreads, 0, s>>>(out, mean, rstd, x, w, b, N, C);
    return cudaGetLastError();
}

cudaError_t gpt2_cu_layernorm_backward(float *dx, float *dw, float *db, const float *dout, const float *x,
                                       const float *w, const float *mean, const float *rstd, int64_t N, int C,
                                       cudaStream_t s) {
    if (N < 0 || C < 0) return cudaErrorInvalidValue;
    if (N == 0 || C == 0) return cudaSuccess;
    if (!dx || !dw || !db || !dout || !x || !w || !mean || !rstd) return cudaErrorInvalidValue;
    k_ln_backward_rows<<<blocks_for(N, kThreads / 32), kThreads, 0, s>>>(dx, dout, x, w, mean, rstd, N, C);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) return e;
    k_col_sums<true><<<blocks_for(C, kColTile), dim3(kColTile, kRowGroups), 0, s>>>(dw, db, dout, x, mean, rstd, N, C);
    return cudaGetLastError();
}

cudaError_t gpt2_cu_bias_forward(float *out, const float *b, int64_t N, int OC, cudaStream_t s) {
    if (N < 0 || OC < 0) return cudaErrorInvalidValue;
    if (N == 0 || OC == 0) return cudaSuccess;
    if (!out || !b) return cudaErrorInvalidValue;
    k_bias_forward<<<blocks_for(N * OC, kThreads), kThreads, 0, s>>>(out, b, N, OC);
    return cudaGetLastError();
}

cudaError_t gpt2_cu_bias_backward(float *db, const float *dout, int64_t N, int OC, cudaStream_t s) {
    if (N < 0 || OC < 0) return cudaErrorInvalidValue;
    if (N == 0 || OC == 0) return cudaSuccess;
    if (!db || !dout) return cudaErrorInvalidValue;
    k_col_sums<false><<<blocks_for(OC, kColTile), dim3(kColTile, kRowGroups), 0, s>>>(nullptr, db, dout, nullptr,
                                                                                      nullptr, nullptr, N, OC);
    return cudaGetLastError();
}

// Shapes shared by the attention launchers: 1 = empty (nothing to do), 0 = launch, -1 = invalid.
static int att_shape(int B, int T, int C, int H) {
    if (B < 0 || T < 0 || C < 0 || H <= 0 || C % H != 0) return -1;
    return B == 0 || T == 0 || C == 0 ? 1 : 0;
}
static dim3 att_grid(int B, int T, int H) {
    int64_t bh = (int64_t)B * H;
    return dim3((unsigned)((T + kTile - 1) / kTile), (unsigned)(bh > 65535 ? 65535 : bh));
}

cudaError_t gpt2_cu_attention_forward(float *out, float *att, const float *qkv, int B, int T, int C, int H,
                                      cudaStream_t s) {
    int sh = att_shape(B, T, C, H);
    if (sh) return sh > 0 ? cudaSuccess : cudaErrorInvalidValue;
    if (!out || !att || !qkv) return cudaErrorInvalidValue;
    const int hs = C / H;
    const float scale = 1.0f / sqrtf((float)hs); /* the host's expression: the same bits */
    size_t smem = (2 * tile_floats(hs) + ptile_floats()) * sizeof(float);
    cudaError_t e = allow_smem(k_att_forward, smem);
    if (e != cudaSuccess) return e;
    k_att_forward<<<att_grid(B, T, H), kAttThreads, smem, s>>>(out, att, qkv, B, T, C, H, scale);
    return cudaGetLastError();
}

cudaError_t gpt2_cu_attention_backward(float *dqkv, float *datt, const float *dout, const float *qkv, const float *att,
                                       int B, int T, int C, int H, cudaStream_t s) {
    int sh = att_shape(B, T, C, H);
    if (sh) return sh > 0 ? cudaSuccess : cudaErrorInvalidValue;
    if (!dqkv || !datt || !dout || !qkv || !att) return cudaErrorInvalidValue;
    const int hs = C / H;
    const float scale = 1.0f / sqrtf((float)hs);
    size_t smem_q = (2 * tile_floats(hs) + ptile_floats()) * sizeof(float);
    size_t smem_kv = (4 * tile_floats(hs) + 2 * ptile_floats()) * sizeof(float);
    cudaError_t e = allow_smem(k_att_backward_q, smem_q);
    if (e == cudaSuccess) e = allow_smem(k_att_backward_kv, smem_kv);
    if (e != cudaSuccess) return e;
    dim3 grid = att_grid(B, T, H);
    k_att_backward_q<<<grid, kAttThreads, smem_q, s>>>(dqkv, datt, dout, qkv, att, B, T, C, H, scale);
    e = cudaGetLastError();
    if (e != cudaSuccess) return e;
    k_att_backward_kv<<<grid, kAttThreads, smem_kv, s>>>(dqkv, datt, dout, qkv, att, B, T, C, H);
    return cudaGetLastError();
}

cudaError_t gpt2_cu_gelu_forward(float *out, const float *x, int64_t n, cudaStream_t s) {
    if (n < 0) return cudaErrorInvalidValue;
    if (n == 0) return cudaSuccess;
    if (!out || !x) return cudaErrorInvalidValue;
    k_gelu_forward<<<blocks_for(n, kThreads), kThreads, 0, s>>>(out, x, n);
    return cudaGetLastError();
}

cudaError_t gpt2_cu_gelu_backward(float *dx, const float *x, const float *dout, int64_t n, cudaStream_t s) {
    if (n < 0) return cudaErrorInvalidValue;
    if (n == 0) return cudaSuccess;
    if (!dx || !x || !dout) return cudaErrorInvalidValue;
    k_gelu_backward<<<blocks_for(n, kThreads), kThreads, 0, s>>>(dx, x, dout, n);
    return cudaGetLastError();
}

cudaError_t gpt2_cu_crossentropy(float *dlogits, const float *logits, const int32_t *targets, int64_t N, int V,
                                 float dscale, double *row_loss, cudaStream_t s) {
    if (N < 0 || V < 0) return cudaErrorInvalidValue;
    if (N == 0) return cudaSuccess;
    if (V == 0 || !logits || !targets || !row_loss) return cudaErrorInvalidValue;
    k_crossentropy<<<blocks_for(N, 1), kThreads, 0, s>>>(dlogits, logits, targets, N, V, dscale, row_loss);
    return cudaGetLastError();
}

} // extern "C"
