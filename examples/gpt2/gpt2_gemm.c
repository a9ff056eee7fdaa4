/* See gpt2_gemm.h. oneDNN (Debian's libdnnl2) is loaded at the first product that asks for it (dlopen),
 * so a process that never selects it (the MLP, --gemm openblas) maps none of its 39 MB nor its OpenMP
 * runtime. It is built on OpenMP: dnnl_sgemm opens a team of omp_get_max_threads() threads, a count kept
 * per calling thread, so each product sets the calling thread's to 1 (with one thread oneDNN runs the
 * product inline, no team is started) and puts the caller's back afterwards: a program that uses OpenMP
 * itself keeps its own setting. */
#include "gpt2_gemm.h"

#include <cblas.h>
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* oneDNN's row-major products (dnnl_dim_t is int64_t, dnnl_success 0). dnnl_gemm_bf16bf16f32 is exported
 * by libdnnl (DNNL_API, extern "C" in its src/cpu/gemm/gemm.cpp) for its own tests, not declared in the
 * installed headers; a library without it leaves bf16 products to the float fallback. */
typedef int (*sgemm_fn)(char, char, int64_t, int64_t, int64_t, float, const float *, int64_t, const float *, int64_t,
                        float, float *, int64_t);
typedef int (*bf16_fn)(char, char, int64_t, int64_t, int64_t, float, const uint16_t *, int64_t, const uint16_t *,
                       int64_t, float, float *, int64_t);
static struct {
    sgemm_fn sgemm;
    bf16_fn bf16;
    int (*omp_get_max_threads)(void);
    void (*omp_set_num_threads)(int);
    char why[256]; /* why it could not be loaded */
} dnnl;
static pthread_once_t dnnl_once = PTHREAD_ONCE_INIT;

static void dnnl_load(void) {
    void *h = dlopen("libdnnl.so.2", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        snprintf(dnnl.why, sizeof dnnl.why, "%s", dlerror());
        return;
    }
    /* the OpenMP runtime is libdnnl's own dependency: found through its handle */
    *(void **)&dnnl.omp_get_max_threads = dlsym(h, "omp_get_max_threads");
    *(void **)&dnnl.omp_set_num_threads = dlsym(h, "omp_set_num_threads");
    *(void **)&dnnl.bf16 = dlsym(h, "dnnl_gemm_bf16bf16f32");
    void *s = dlsym(h, "dnnl_sgemm");
    if (!s || !dnnl.omp_get_max_threads || !dnnl.omp_set_num_threads) {
        snprintf(dnnl.why, sizeof dnnl.why, "libdnnl.so.2 lacks dnnl_sgemm or its OpenMP runtime's thread count");
        return;
    }
    *(void **)&dnnl.sgemm = s; /* last: the mark that it loaded */
}

int gpt2_gemm_have_onednn(void) {
    pthread_once(&dnnl_once, dnnl_load);
    return dnnl.sgemm != NULL;
}

static atomic_int selected = -1; /* -1: auto, not yet resolved (resolving loads oneDNN) */

const char *gpt2_gemm_name(gpt2_gemm_backend b) { return b == GPT2_GEMM_ONEDNN ? "onednn" : "openblas"; }

zinc_status gpt2_gemm_parse(const char *name, gpt2_gemm_backend *out) {
    if (!strcmp(name, "openblas")) {
        *out = GPT2_GEMM_OPENBLAS;
    } else if (!strcmp(name, "onednn")) {
        if (!gpt2_gemm_have_onednn())
            return ZINC_ERROR(ZINC_ERR_UNSUPPORTED,
                              "--gemm onednn: oneDNN could not be loaded (%s): install it (Debian: libdnnl2, "
                              "scripts/install-deps.sh), or use --gemm openblas",
                              dnnl.why);
        *out = GPT2_GEMM_ONEDNN;
    } else if (!strcmp(name, "auto")) {
        /* oneDNN where it loads: 1.08-1.12x faster products here, bf16 dot products (bench/RESULTS.md) */
        *out = gpt2_gemm_have_onednn() ? GPT2_GEMM_ONEDNN : GPT2_GEMM_OPENBLAS;
    } else {
        return ZINC_ERROR(ZINC_ERR_INVALID_ARG, "--gemm '%s': expected openblas, onednn or auto", name);
    }
    return ZINC_OK;
}

void gpt2_gemm_select(gpt2_gemm_backend b) {
    atomic_store(&selected, b == GPT2_GEMM_ONEDNN && gpt2_gemm_have_onednn() ? GPT2_GEMM_ONEDNN : GPT2_GEMM_OPENBLAS);
    openblas_set_num_threads(1);
}

gpt2_gemm_backend gpt2_gemm_selected(void) {
    int s = atomic_load_explicit(&selected, memory_order_relaxed);
    if (s < 0) {
        gpt2_gemm_select(GPT2_GEMM_ONEDNN); /* auto: see gpt2_gemm_parse (OpenBLAS where oneDNN is missing) */
        s = atomic_load(&selected);
    }
    return (gpt2_gemm_backend)s;
}

/* Asynchronous signals held back while a oneDNN product runs. oneDNN 2.6.3's products with K >= 128 (every
 * ISA it dispatches, AVX2 to AVX-512 bf16) corrupt the heap when a signal handler runs on the thread's stack
 * in the middle of one: glibc aborts later with "corrupted size vs. prev_size" (a SIGTERM to a preemptible
 * run, a profiler's SIGPROF, any program's SIGALRM). The same handler on an alternate stack (sigaltstack)
 * is harmless: the kernel's signal frame lands where oneDNN keeps live data. Signals that arrive meanwhile
 * are delivered when the product returns (a few microseconds to milliseconds later); faults stay unblocked
 * so a crash inside oneDNN still reports itself. Two rt_sigprocmask calls, about 0.5 us (bench/RESULTS.md). */
static void hold_signals(sigset_t *old) {
    sigset_t s;
    sigfillset(&s);
    const int sync_sigs[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGABRT, SIGSYS};
    for (size_t i = 0; i < sizeof sync_sigs / sizeof *sync_sigs; i++) sigdelset(&s, sync_sigs[i]);
    pthread_sigmask(SIG_BLOCK, &s, old);
}

/* Signals held for a whole piece of a loop (gpt2_par) on this thread: the products inside skip their own
 * two system calls, which at the README's shape (about 4,300 products a step, most of them attention
 * tiles) would cost about 2 ms a step. */
static _Thread_local int piece_holds;

/* One oneDNN call with the calling thread's OpenMP thread count set to 1 and signals held back. */
#define ONEDNN_CALL(call)                                                                                              \
    do {                                                                                                               \
        sigset_t old_;                                                                                                 \
        if (!piece_holds) hold_signals(&old_);                                                                         \
        int callers_ = dnnl.omp_get_max_threads();                                                                     \
        if (callers_ != 1) dnnl.omp_set_num_threads(1);                                                                \
        st = (call);                                                                                                   \
        if (callers_ != 1) dnnl.omp_set_num_threads(callers_);                                                         \
        if (!piece_holds) pthread_sigmask(SIG_SETMASK, &old_, NULL);                                                   \
    } while (0)

typedef struct held_job {
    void (*fn)(void *, int64_t, int64_t);
    void *ctx;
} held_job;

static void run_held(void *arg, int64_t lo, int64_t hi) {
    const held_job *j = arg;
    sigset_t old;
    int hold = !piece_holds && gpt2_gemm_selected() == GPT2_GEMM_ONEDNN;
    if (hold) hold_signals(&old);
    piece_holds += hold;
    j->fn(j->ctx, lo, hi);
    piece_holds -= hold;
    if (hold) pthread_sigmask(SIG_SETMASK, &old, NULL);
}

void gpt2_par(zinc_engine *e, int64_t n, void (*fn)(void *, int64_t, int64_t), void *ctx) {
    if (n <= 0) return;
    held_job j = {fn, ctx};
    if (!e || zinc_parallel_for(e, n, run_held, &j) != ZINC_OK) run_held(&j, 0, n);
}

void gpt2_sgemm(char ta, char tb, int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
                const float *B, int64_t ldb, float beta, float *C, int64_t ldc) {
    if (M <= 0 || N <= 0) return;
    if (gpt2_gemm_selected() == GPT2_GEMM_ONEDNN) {
        int st;
        ONEDNN_CALL(dnnl.sgemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc));
        if (st == 0) return; /* it refuses only arguments OpenBLAS would refuse too */
    }
    cblas_sgemm(CblasRowMajor, ta == 'T' ? CblasTrans : CblasNoTrans, tb == 'T' ? CblasTrans : CblasNoTrans, (int)M,
                (int)N, (int)K, alpha, A, (int)lda, B, (int)ldb, beta, C, (int)ldc);
}

static atomic_int bf16_works = -1; /* -1: not tried yet */
static atomic_int products = GPT2_PRODUCTS_AUTO;

const char *gpt2_products_name(gpt2_products p) {
    return p == GPT2_PRODUCTS_BF16 ? "bf16" : p == GPT2_PRODUCTS_FP32 ? "fp32" : "auto";
}

zinc_status gpt2_products_parse(const char *name, gpt2_products *out) {
    if (!strcmp(name, "auto")) {
        *out = GPT2_PRODUCTS_AUTO;
    } else if (!strcmp(name, "fp32")) {
        *out = GPT2_PRODUCTS_FP32;
    } else if (!strcmp(name, "bf16")) {
        if (!gpt2_gemm_bf16_available())
            return ZINC_ERROR(ZINC_ERR_UNSUPPORTED,
                              "--products bf16: no bf16 dot products here (%s): they need oneDNN (--gemm onednn or "
                              "auto, Debian: libdnnl2) and a CPU with AVX-512 bf16; use --products fp32 or auto",
                              gpt2_gemm_selected() != GPT2_GEMM_ONEDNN ? "the product backend is OpenBLAS"
                              : !dnnl.bf16                             ? "this libdnnl lacks dnnl_gemm_bf16bf16f32"
                                           : "oneDNN's bf16 product does not run on this CPU");
        *out = GPT2_PRODUCTS_BF16;
    } else {
        return ZINC_ERROR(ZINC_ERR_INVALID_ARG, "--products '%s': expected auto, fp32 or bf16", name);
    }
    return ZINC_OK;
}

void gpt2_products_select(gpt2_products p) { atomic_store(&products, (int)p); }
gpt2_products gpt2_products_selected(void) { return (gpt2_products)atomic_load(&products); }

int gpt2_gemm_bf16_available(void) {
    if (gpt2_gemm_selected() != GPT2_GEMM_ONEDNN || !dnnl.bf16) return 0;
    int w = atomic_load(&bf16_works);
    if (w < 0) {
        const uint16_t one = 0x3f80; /* 1.0 */
        float c = 0;
        int st;
        ONEDNN_CALL(dnnl.bf16('N', 'N', 1, 1, 1, 1.0f, &one, 1, &one, 1, 0.0f, &c, 1));
        w = st == 0 && c == 1.0f;
        atomic_store(&bf16_works, w);
    }
    return w > 0;
}

static float *widen(const uint16_t *x, int64_t rows, int64_t cols, int64_t ld) {
    float *f = malloc((size_t)(rows * cols) * sizeof *f);
    if (!f) return NULL;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++) {
            uint32_t u = (uint32_t)x[r * ld + c] << 16;
            memcpy(&f[r * cols + c], &u, sizeof u);
        }
    return f;
}

void gpt2_gemm_bf16(char ta, char tb, int64_t M, int64_t N, int64_t K, float alpha, const uint16_t *A, int64_t lda,
                    const uint16_t *B, int64_t ldb, float beta, float *C, int64_t ldc) {
    if (M <= 0 || N <= 0) return;
    if (gpt2_gemm_bf16_available()) {
        int st;
        ONEDNN_CALL(dnnl.bf16(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc));
        if (st == 0) return;
    }
    int64_t ar = ta == 'N' ? M : K, ac = ta == 'N' ? K : M, br = tb == 'N' ? K : N, bc = tb == 'N' ? N : K;
    float *Af = widen(A, ar, ac, lda), *Bf = widen(B, br, bc, ldb);
    if (Af && Bf) {
        gpt2_sgemm(ta, tb, M, N, K, alpha, Af, ac, Bf, bc, beta, C, ldc);
    } else { /* no memory for the widened copies: element by element */
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++) {
                float s = 0;
                for (int64_t k = 0; k < K; k++) {
                    uint32_t a = (uint32_t)(ta == 'N' ? A[i * lda + k] : A[k * lda + i]) << 16,
                             b = (uint32_t)(tb == 'N' ? B[k * ldb + j] : B[j * ldb + k]) << 16;
                    float af, bf;
                    memcpy(&af, &a, 4), memcpy(&bf, &b, 4);
                    s += af * bf;
                }
                C[i * ldc + j] = alpha * s + (beta == 0.0f ? 0.0f : beta * C[i * ldc + j]);
            }
    }
    free(Af);
    free(Bf);
}
