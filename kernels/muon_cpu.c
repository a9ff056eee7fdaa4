/* Muon's CPU kernels (kernels/cpu_kernels.h states the formulas): the elementwise apply of a whole-matrix
 * update and the Newton-Schulz iteration. The iteration's products are GEMMs: cblas_sgemm of the process's
 * CBLAS (loaded at first use, base/core/dynlib.h), each in row blocks of the output on the current pool;
 * without a CBLAS, row dot products (A = X X^T and A A, A being symmetric) and row combinations (B X)
 * accumulated in double, each output row a task. */
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <string.h>

#include "base/core/dynlib.h"
#include "base/core/error.h"
#include "kernels/adam_scalar.h"
#include "kernels/thread_pool.h"

void zmuon_apply_ref(const zmuon_hparams *h, size_t n, float *master, float *m, const void *grad, zinc_dtype gdt,
                     const float *upd, void *param_out, zinc_dtype pdt, const uint8_t *decay_mask) {
    float keep = 1.0f - h->lr * h->weight_decay; /* p.mul_(1 - lr * wd): one float factor */
    for (size_t i = 0; i < n; i++) {
        float g = zk_load(grad, gdt, i) * h->grad_factor;
        m[i] = zmuon_momentum(m[i], g, h->beta);
        float p = master[i];
        int decayed = decay_mask ? (decay_mask[i / ZADAM_MASK_GROUP] & 1) : 1;
        if (decayed && h->weight_decay != 0.0f) p = p * keep;
        p = p - h->lr * (upd[i] * h->upd_scale);
        master[i] = p;
        if (param_out) zk_store(param_out, (int)pdt, i, p);
    }
}

double zmuon_nesterov_ref(const zmuon_hparams *h, size_t n, const float *m, const void *grad, zinc_dtype gdt,
                          float *u) {
    double g2 = 0;
    for (size_t i = 0; i < n; i++) {
        float g = zk_load(grad, gdt, i) * h->grad_factor;
        g2 += (double)g * (double)g;
        u[i] = h->nesterov ? zmuon_nesterov(zmuon_momentum(m[i], g, h->beta), g, h->beta)
                           : zmuon_momentum(m[i], g, h->beta);
    }
    return g2;
}

double zmuon_ns_flops(int64_t rows, int64_t cols, int steps) {
    double n = (double)(rows < cols ? rows : cols), k = (double)(rows < cols ? cols : rows);
    return steps * (4.0 * n * n * k + 2.0 * n * n * n);
}

size_t zmuon_ns_work_floats(int64_t rows, int64_t cols) {
    size_t n = (size_t)(rows < cols ? rows : cols), mm = (size_t)(rows < cols ? cols : rows);
    return 2 * n * mm + 2 * n * n; /* X (wide), the next X, A, B */
}

typedef struct prod_job {
    const float *a, *b; /* row-major inputs */
    float *out;
    size_t n, k;            /* out is n x n (dot) or n x k (comb) */
    float alpha, beta_coef; /* comb: out = alpha * x + B x; dot: out = beta_coef * (a a^T) */
    const float *x;         /* comb: the matrix whose rows are combined */
} prod_job;

/* out[i][j] = sum_l a[i][l] * a[j][l] over l < k (a is n x k): row i. */
static void dot_task(void *ctx, size_t i) {
    const prod_job *j = ctx;
    const float *ai = j->a + i * j->k;
    for (size_t r = 0; r < j->n; r++) {
        const float *ar = j->a + r * j->k;
        double s = 0;
        for (size_t l = 0; l < j->k; l++) s += (double)ai[l] * (double)ar[l];
        j->out[i * j->n + r] = (float)s;
    }
}

/* out[i][:] = alpha * x[i][:] + sum_l b[i][l] * x[l][:] (b is n x n, x is n x k): row i, in double, in
 * blocks of columns held on the stack. */
#define COMB_BLOCK 256
static void comb_task(void *ctx, size_t i) {
    const prod_job *j = ctx;
    double acc[COMB_BLOCK];
    const float *xi = j->x + i * j->k;
    float *o = j->out + i * j->k;
    for (size_t c0 = 0; c0 < j->k; c0 += COMB_BLOCK) {
        size_t w = j->k - c0 < COMB_BLOCK ? j->k - c0 : COMB_BLOCK;
        for (size_t c = 0; c < w; c++) acc[c] = (double)j->alpha * (double)xi[c0 + c];
        for (size_t l = 0; l < j->n; l++) {
            double bl = (double)j->b[i * j->n + l];
            const float *xl = j->x + l * j->k + c0;
            for (size_t c = 0; c < w; c++) acc[c] += bl * (double)xl[c];
        }
        for (size_t c = 0; c < w; c++) o[c0 + c] = (float)acc[c];
    }
}

static void run_rows(size_t n, zpool_fn fn, prod_job *j) {
    zpool *pool = zk_pool_for(n);
    if (!pool)
        for (size_t i = 0; i < n; i++) fn(j, i);
    else
        zpool_for(pool, n, fn, j);
}

/* ---------------------------------------------------------------- the CBLAS */
static pthread_mutex_t blas_mu = PTHREAD_MUTEX_INITIALIZER;
static zmuon_blas blas_table;
static bool blas_loaded;

zinc_status zmuon_blas_load(const zmuon_blas **out, const zlog *log) {
    zinc_status st = ZINC_OK;
    static const char *const names[] = {"libopenblas.so.0", "libcblas.so.3", "libblas.so.3", NULL};
    static const char *const symbols[] = {"cblas_sgemm", NULL};
    static const zdynlib lib = {
        .what = "optimizer Muon's Newton-Schulz needs a CBLAS (cblas_sgemm)",
        .env = "ZINC_BLAS_LIBRARY",
        .names = names,
        .symbols = symbols,
        .fix = "install OpenBLAS (Debian: libopenblas0, scripts/install-deps.sh) or name a CBLAS in ZINC_BLAS_LIBRARY",
    };
    pthread_mutex_lock(&blas_mu);
    if (!blas_loaded) {
        void *fn[1];
        TRY(zdynlib_load(&lib, fn, log));
        *(void **)&blas_table.sgemm = fn[0];
        blas_loaded = true;
    }
    *out = &blas_table;
fail:
    pthread_mutex_unlock(&blas_mu);
    return st;
}

enum { ROW_MAJOR = 101, NO_TRANS = 111, TRANS = 112, GEMM_MIN_ROWS = 32 };

/* out = alpha * a op(b) + beta * c0, row blocks of m rows: a is m x kk, op(b) kk x nn (b^T when tb),
 * c0 (m x nn, or NULL for beta 0) copied into out first. */
typedef struct gemm_job {
    const zmuon_blas *blas;
    const float *a, *b, *c0;
    float *out;
    size_t m, nn, kk, rows_per;
    int tb;
    float alpha, beta;
} gemm_job;

static void gemm_task(void *ctx, size_t t) {
    const gemm_job *j = ctx;
    size_t r0 = t * j->rows_per, r1 = r0 + j->rows_per < j->m ? r0 + j->rows_per : j->m;
    if (r0 >= r1) return;
    if (j->c0) memcpy(j->out + r0 * j->nn, j->c0 + r0 * j->nn, (r1 - r0) * j->nn * sizeof(float));
    j->blas->sgemm(ROW_MAJOR, NO_TRANS, j->tb ? TRANS : NO_TRANS, (int)(r1 - r0), (int)j->nn, (int)j->kk, j->alpha,
                   j->a + r0 * j->kk, (int)j->kk, j->b, j->tb ? (int)j->kk : (int)j->nn, j->c0 ? j->beta : 0.0f,
                   j->out + r0 * j->nn, (int)j->nn);
}

static void gemm(gemm_job *j) {
    zpool *pool = zk_pool_for(j->m / GEMM_MIN_ROWS);
    size_t tasks = pool ? (size_t)zpool_threads(pool) : 1;
    if (tasks > j->m / GEMM_MIN_ROWS) tasks = j->m / GEMM_MIN_ROWS ? j->m / GEMM_MIN_ROWS : 1;
    j->rows_per = (j->m + tasks - 1) / tasks;
    if (tasks == 1)
        gemm_task(j, 0);
    else
        zpool_for(pool, tasks, gemm_task, j);
}

/* One step X <- a X + (b A + c A A) X on GEMMs: A = X X^T, B = c A A + b A, Y = B X + a X. */
static void ns_step_blas(const zmuon_blas *blas, size_t n, size_t k, const float *X, float *Y, float *A, float *B,
                         float a, float b, float c) {
    gemm_job j = {.blas = blas, .a = X, .b = X, .out = A, .m = n, .nn = n, .kk = k, .tb = 1, .alpha = 1.0f};
    gemm(&j);
    j = (gemm_job){.blas = blas, .a = A, .b = A, .c0 = A, .out = B, .m = n, .nn = n, .kk = n, .alpha = c, .beta = b};
    gemm(&j);
    j = (gemm_job){.blas = blas, .a = B, .b = X, .c0 = X, .out = Y, .m = n, .nn = k, .kk = n, .alpha = 1.0f, .beta = a};
    gemm(&j);
}

void zmuon_newton_schulz(float *x, int64_t rows, int64_t cols, int steps, float *work, const zmuon_blas *blas) {
    const float a = 3.4445f, b = -4.7750f, c = 2.0315f;
    bool tall = rows > cols;
    size_t n = (size_t)(tall ? cols : rows), k = (size_t)(tall ? rows : cols);
    float *X = work, *Y = X + n * k, *A = Y + n * k, *B = A + n * n;
    if (tall) /* X = x^T */
        for (size_t i = 0; i < (size_t)rows; i++)
            for (size_t jj = 0; jj < (size_t)cols; jj++) X[jj * k + i] = x[i * (size_t)cols + jj];
    else
        memcpy(X, x, n * k * sizeof *X);
    double ss = 0;
    for (size_t i = 0; i < n * k; i++) ss += (double)X[i] * (double)X[i];
    float inv = (float)(1.0 / (sqrt(ss) + 1e-7));
    for (size_t i = 0; i < n * k; i++) X[i] *= inv;
    for (int s = 0; s < steps; s++) {
        if (blas) {
            ns_step_blas(blas, n, k, X, Y, A, B, a, b, c);
            float *t = X;
            X = Y;
            Y = t;
            continue;
        }
        prod_job j = {.a = X, .out = A, .n = n, .k = k};
        run_rows(n, dot_task, &j); /* A = X X^T */
        j = (prod_job){.a = A, .out = B, .n = n, .k = n};
        run_rows(n, dot_task, &j); /* B = A A (A symmetric: rows dot rows) */
        for (size_t i = 0; i < n * n; i++) B[i] = (float)((double)b * A[i] + (double)c * B[i]);
        j = (prod_job){.b = B, .x = X, .out = Y, .n = n, .k = k, .alpha = a};
        run_rows(n, comb_task, &j); /* Y = a X + B X */
        float *t = X;
        X = Y;
        Y = t;
    }
    float scale = tall ? (float)sqrt((double)rows / (double)cols) : 1.0f;
    if (tall)
        for (size_t i = 0; i < (size_t)rows; i++)
            for (size_t jj = 0; jj < (size_t)cols; jj++) x[i * (size_t)cols + jj] = X[jj * k + i] * scale;
    else
        for (size_t i = 0; i < n * k; i++) x[i] = X[i] * scale;
}
