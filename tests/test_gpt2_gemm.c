/* examples/gpt2's matrix product (gpt2_gemm.h) on every backend this build has (OpenBLAS; oneDNN where
 * libdnnl-dev was found) against a float64 reference: the four transpositions, alpha and beta, strided
 * operands, at small shapes and at the model's (GPT-2 124M's pieces: K up to 3072, N up to 2304). A
 * backend whose kernels compute wrong results on this CPU (the reason some machines force an OpenBLAS core
 * type) fails here. Each element within 8 sqrt(K) float epsilons of the sum of |a b| terms (a missing or
 * doubled term is orders of magnitude above), and the whole within 1e-5 normwise. Then: a oneDNN product
 * starts no OpenMP threads (ctest sets OMP_NUM_THREADS=4: without the one-thread setting oneDNN would open
 * a team of 4 beside the engine's threads) and parse/select refuse what they must. Last, the layers' bf16
 * products (gpt2_matmul_*_bf16, bf16 compute): against float64 products of the operands rounded to bf16
 * here (frexp/nearbyint, not the library's bit trick), gpt2_to_bf16 bit for bit against that rounding, and
 * the results bit for bit the same on the calling thread and on an engine's 3 threads. And a storm of
 * signals (SIGALRM every 37 us, a handler on the thread's stack) through thousands of oneDNN products with
 * the heap in use between them: oneDNN 2.6.3 corrupts the heap when a handler runs inside one of its
 * products, which gpt2_gemm.c prevents by holding signals back; without that this test aborts in glibc. */
#include <dirent.h>
#include <float.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <sys/time.h>
#include <stdlib.h>
#include <string.h>

#include "gpt2_gemm.h"
#include "gpt2_layers.h"
#include "zt.h"

static uint64_t rng;

static float *rnd(int64_t n) {
    float *x = malloc((size_t)n * sizeof *x);
    for (int64_t i = 0; i < n; i++) x[i] = (float)zt_rand_normal(&rng);
    return x;
}

static void test_product(char ta, char tb, int64_t M, int64_t N, int64_t K, float alpha, float beta, int pad) {
    int64_t lda = (ta == 'N' ? K : M) + pad, ldb = (tb == 'N' ? N : K) + pad, ldc = N + pad;
    int64_t arows = ta == 'N' ? M : K, brows = tb == 'N' ? K : N;
    float *A = rnd(arows * lda), *B = rnd(brows * ldb), *C = rnd(M * ldc), *C0 = malloc((size_t)(M * ldc) * 4);
    memcpy(C0, C, (size_t)(M * ldc) * 4);
    gpt2_sgemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    double err2 = 0, ref2 = 0, eps = ldexp(1.0, -23);
    int bad = 0;
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            double s = 0, mag = 0;
            for (int64_t k = 0; k < K; k++) {
                double a = ta == 'N' ? A[i * lda + k] : A[k * lda + i], b = tb == 'N' ? B[k * ldb + j] : B[j * ldb + k];
                s += a * b;
                mag += fabs(a * b);
            }
            double want = alpha * s + (double)beta * C0[i * ldc + j], got = C[i * ldc + j];
            double tol = 8 * sqrt((double)K + 1) * eps * (fabs(alpha) * mag + fabs(beta * C0[i * ldc + j])) + 1e-30;
            if (fabs(got - want) > tol && bad++ < 3)
                zt_fail_at(__FILE__, __LINE__, "%s %c%c M%lld N%lld K%lld: C[%lld,%lld] = %.9g, reference %.9g",
                           gpt2_gemm_name(gpt2_gemm_selected()), ta, tb, (long long)M, (long long)N, (long long)K,
                           (long long)i, (long long)j, got, want);
            err2 += (got - want) * (got - want);
            ref2 += want * want;
        }
    for (int64_t i = 0; i < M; i++) /* the padding between rows is not written */
        for (int64_t j = N; j < ldc; j++)
            if (C[i * ldc + j] != C0[i * ldc + j] && bad++ < 3)
                zt_fail_at(__FILE__, __LINE__, "%s wrote C[%lld,%lld] past N", gpt2_gemm_name(gpt2_gemm_selected()),
                           (long long)i, (long long)j);
    ZT_CHECK(sqrt(err2) <= 1e-5 * sqrt(ref2), "%s %c%c M%lld N%lld K%lld: normwise error %.3g",
             gpt2_gemm_name(gpt2_gemm_selected()), ta, tb, (long long)M, (long long)N, (long long)K,
             sqrt(err2 / (ref2 > 0 ? ref2 : 1)));
    if (!bad) zt_passed++;
    free(A), free(B), free(C), free(C0);
}

static int threads_now(void) {
    DIR *d = opendir("/proc/self/task");
    int n = 0;
    if (!d) return -1;
    for (struct dirent *e; (e = readdir(d));) n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

/* Round to nearest even at 8 significant bits, by arithmetic (the library rounds by bit manipulation). */
static float ref_bf16(float x) {
    if (isnan(x) || isinf(x) || x == 0) return x;
    int ex;
    double m = frexp((double)x, &ex);
    return (float)ldexp(nearbyint(ldexp(m, 8)), ex - 8);
}

static int bits_equal(float a, float b) { return !memcmp(&a, &b, 4) || (isnan(a) && isnan(b)); }

static void test_to_bf16(void) {
    enum { n = 4099 };
    float *x = rnd(n);
    x[0] = 1.0f + ldexpf(1.0f, -8);                            /* a tie: rounds down to even */
    x[1] = 1.0f + 3 * ldexpf(1.0f, -8);                        /* a tie: rounds up to even */
    x[2] = INFINITY, x[3] = -0.0f, x[4] = NAN, x[5] = FLT_MAX; /* rounds to infinity */
    uint16_t *h = malloc(n * sizeof *h);
    gpt2_to_bf16(NULL, h, x, n);
    int bad = 0;
    for (int i = 0; i < n; i++) {
        uint32_t u = (uint32_t)h[i] << 16;
        float got, want = ref_bf16(x[i]);
        memcpy(&got, &u, 4);
        if (!bits_equal(got, want) && bad++ < 3)
            zt_fail_at(__FILE__, __LINE__, "bf16 of %.9g: %.9g, expected %.9g", x[i], got, want);
    }
    if (!bad) zt_passed++;
    free(x), free(h);
}

/* out = x W^T + b, then dx += dout W, dW += dout^T x, db += sums of dout; bf16-rounded operands. */
static void test_matmul_bf16(zinc_engine *e, int64_t N, int IC, int OC) {
    float *x = rnd(N * IC), *W = rnd((int64_t)OC * IC), *b = rnd(OC), *dout = rnd(N * OC);
    float *out = malloc((size_t)(N * OC) * 4), *dx = rnd(N * IC), *dW = rnd((int64_t)OC * IC), *db = rnd(OC);
    float *dx0 = malloc((size_t)(N * IC) * 4), *dW0 = malloc((size_t)OC * IC * 4), *db0 = malloc((size_t)OC * 4);
    memcpy(dx0, dx, (size_t)(N * IC) * 4), memcpy(dW0, dW, (size_t)OC * IC * 4), memcpy(db0, db, (size_t)OC * 4);
    uint16_t *ws = malloc((size_t)gpt2_matmul_bf16_elems(N, IC, OC) * sizeof *ws);
    gpt2_matmul_forward_bf16(e, ws, out, x, W, b, NULL, N, IC, OC);
    gpt2_matmul_backward_bf16(e, ws, false, NULL, dx, dW, db, dout, x, W, N, IC, OC);
    double eps = ldexp(1.0, -23);
    int bad = 0;
#define REF(got, base, K, expr_a, expr_b, bias)                                                                        \
    do {                                                                                                               \
        double s_ = 0, mag_ = 0;                                                                                       \
        for (int64_t k = 0; k < (K); k++) {                                                                            \
            double p_ = (double)ref_bf16(expr_a) * ref_bf16(expr_b);                                                   \
            s_ += p_, mag_ += fabs(p_);                                                                                \
        }                                                                                                              \
        double want_ = s_ + (bias), tol_ = 8 * sqrt((double)(K) + 1) * eps * (mag_ + fabs(bias)) + 1e-6;               \
        if (fabs((double)(got) - (base)-want_) > tol_ && bad++ < 3)                                                    \
            zt_fail_at(__FILE__, __LINE__, "bf16 matmul N%lld IC%d OC%d: %s %.9g, reference %.9g", (long long)N, IC,   \
                       OC, #got, (double)(got) - (base), want_);                                                       \
    } while (0)
    for (int64_t n = 0; n < N; n++)
        for (int o = 0; o < OC; o++) REF(out[n * OC + o], 0.0, IC, x[n * IC + k], W[o * IC + k], (double)b[o]);
    for (int64_t n = 0; n < N; n++)
        for (int i = 0; i < IC; i++) REF(dx[n * IC + i], dx0[n * IC + i], OC, dout[n * OC + k], W[k * IC + i], 0.0);
    for (int o = 0; o < OC; o++)
        for (int i = 0; i < IC; i++) REF(dW[o * IC + i], dW0[o * IC + i], N, dout[k * OC + o], x[k * IC + i], 0.0);
#undef REF
    for (int o = 0; o < OC; o++) { /* the bias gradient stays float */
        double s = 0;
        for (int64_t n = 0; n < N; n++) s += dout[n * OC + o];
        if (!zt_near((double)db[o] - db0[o], s, 1e-4, 1e-5) && bad++ < 3)
            zt_fail_at(__FILE__, __LINE__, "bf16 matmul db[%d] %.9g, reference %.9g", o, (double)db[o] - db0[o], s);
    }
    if (!bad) zt_passed++;
    /* the same on the calling thread, bit for bit */
    float *out1 = malloc((size_t)(N * OC) * 4), *dx1 = malloc((size_t)(N * IC) * 4), *dW1 = malloc((size_t)OC * IC * 4);
    memcpy(dx1, dx0, (size_t)(N * IC) * 4), memcpy(dW1, dW0, (size_t)OC * IC * 4);
    gpt2_matmul_forward_bf16(NULL, ws, out1, x, W, b, NULL, N, IC, OC);
    gpt2_matmul_backward_bf16(NULL, ws, false, NULL, dx1, dW1, NULL, dout, x, W, N, IC, OC);
    ZT_CHECK(!memcmp(out, out1, (size_t)(N * OC) * 4) && !memcmp(dx, dx1, (size_t)(N * IC) * 4) &&
                 !memcmp(dW, dW1, (size_t)OC * IC * 4),
             "bf16 matmul N%lld IC%d OC%d differs between the engine's threads and the calling thread", (long long)N,
             IC, OC);
    free(x), free(W), free(b), free(dout), free(out), free(dx), free(dW), free(db), free(dx0), free(dW0), free(db0);
    free(ws), free(out1), free(dx1), free(dW1);
}

static volatile sig_atomic_t storm_hits;
static void storm_handler(int sig) {
    (void)sig;
    storm_hits++;
}

static void test_signal_storm(void) {
    enum { M = 64, N = 64, K = 256, rounds = 20000 }; /* oneDNN's bad path needs K >= 128 */
    float *A = rnd(M * K), *B = rnd(K * N), *C = malloc(M * N * 4), *C0 = malloc(M * N * 4);
    uint16_t *Ah = malloc(M * K * 2), *Bh = malloc(K * N * 2);
    gpt2_to_bf16(NULL, Ah, A, M * K), gpt2_to_bf16(NULL, Bh, B, K * N);
    float *H = malloc(M * N * 4), *H0 = malloc(M * N * 4);
    gpt2_sgemm('N', 'N', M, N, K, 1.0f, A, K, B, N, 0.0f, C0, N);
    gpt2_gemm_bf16('N', 'T', M, N, K, 1.0f, Ah, K, Bh, K, 0.0f, H0, N);
    struct sigaction sa, old_sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = storm_handler;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGALRM, &sa, &old_sa);
    struct itimerval on = {{0, 37}, {0, 37}}, off = {{0, 0}, {0, 0}};
    setitimer(ITIMER_REAL, &on, NULL);
    int wrong = 0;
    for (int i = 0; i < rounds; i++) {
        void *churn = malloc(64 + (size_t)(i % 4096) * 8); /* glibc checks its chunks as they come and go */
        if (i % 2) {
            gpt2_sgemm('N', 'N', M, N, K, 1.0f, A, K, B, N, 0.0f, C, N);
            wrong += memcmp(C, C0, sizeof(float) * M * N) != 0;
        } else {
            gpt2_gemm_bf16('N', 'T', M, N, K, 1.0f, Ah, K, Bh, K, 0.0f, H, N);
            wrong += memcmp(H, H0, sizeof(float) * M * N) != 0;
        }
        free(churn);
    }
    setitimer(ITIMER_REAL, &off, NULL);
    sigaction(SIGALRM, &old_sa, NULL);
    sigset_t now;
    pthread_sigmask(SIG_BLOCK, NULL, &now);
    ZT_CHECK(storm_hits > 100, "only %d signals arrived during %d products", (int)storm_hits, rounds);
    ZT_CHECK(!wrong, "%d of %d products under signals differ from the same product without them", wrong, rounds);
    ZT_CHECK(!sigismember(&now, SIGALRM) && !sigismember(&now, SIGTERM),
             "the caller's signal mask is not restored after oneDNN products");
    free(A), free(B), free(C), free(C0), free(Ah), free(Bh), free(H), free(H0);
}

/* gpt2_par's pieces: signals held inside each piece with oneDNN selected (and products inside still right
 * under the storm), not with OpenBLAS on the calling thread (the engine's own threads block signals
 * always); the caller's mask restored after. */
typedef struct piece_probe {
    const float *A, *B, *C0;
    pthread_t caller;
    int held_pieces, open_pieces, wrong;
} piece_probe;

static void probe_piece(void *arg, int64_t lo, int64_t hi) {
    piece_probe *p = arg;
    sigset_t now;
    pthread_sigmask(SIG_BLOCK, NULL, &now);
    if (pthread_equal(pthread_self(), p->caller))
        __atomic_fetch_add(sigismember(&now, SIGALRM) ? &p->held_pieces : &p->open_pieces, 1, __ATOMIC_RELAXED);
    float C[64 * 64];
    for (int64_t i = lo; i < hi; i++) {
        gpt2_sgemm('N', 'N', 64, 64, 256, 1.0f, p->A, 256, p->B, 64, 0.0f, C, 64);
        if (memcmp(C, p->C0, sizeof C)) __atomic_fetch_add(&p->wrong, 1, __ATOMIC_RELAXED);
    }
}

static void test_par_holds(zinc_engine *e, gpt2_gemm_backend b) {
    gpt2_gemm_select(b);
    float *A = rnd(64 * 256), *B = rnd(256 * 64), *C0 = malloc(64 * 64 * 4);
    gpt2_sgemm('N', 'N', 64, 64, 256, 1.0f, A, 256, B, 64, 0.0f, C0, 64);
    piece_probe p = {A, B, C0, pthread_self(), 0, 0, 0};
    struct sigaction sa, old_sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = storm_handler;
    sa.sa_flags = SA_RESTART;
    sigaction(SIGALRM, &sa, &old_sa);
    struct itimerval on = {{0, 37}, {0, 37}}, off = {{0, 0}, {0, 0}};
    setitimer(ITIMER_REAL, &on, NULL);
    for (int r = 0; r < 20; r++) gpt2_par(e, 400, probe_piece, &p);
    setitimer(ITIMER_REAL, &off, NULL);
    sigaction(SIGALRM, &old_sa, NULL);
    sigset_t now;
    pthread_sigmask(SIG_BLOCK, NULL, &now);
    int onednn = b == GPT2_GEMM_ONEDNN;
    ZT_CHECK(onednn ? p.open_pieces == 0 && p.held_pieces > 0 : p.held_pieces == 0 && p.open_pieces > 0,
             "%s: %d pieces on the calling thread ran with signals held, %d without", gpt2_gemm_name(b), p.held_pieces,
             p.open_pieces);
    ZT_CHECK(!p.wrong, "%s: %d products in pieces differ under signals", gpt2_gemm_name(b), p.wrong);
    ZT_CHECK(!sigismember(&now, SIGALRM), "gpt2_par left SIGALRM blocked on the caller");
    free(A), free(B), free(C0);
}

int main(void) {
    zt_name = "gpt2_gemm";
    rng = zt_seed();
    gpt2_gemm_backend all[2] = {GPT2_GEMM_OPENBLAS, GPT2_GEMM_ONEDNN};
    int nb = gpt2_gemm_have_onednn() ? 2 : 1;
    for (int b = 0; b < nb; b++) {
        gpt2_gemm_select(all[b]);
        ZT_CHECK(gpt2_gemm_selected() == all[b], "selected %s, running %s", gpt2_gemm_name(all[b]),
                 gpt2_gemm_name(gpt2_gemm_selected()));
        int before = threads_now();
        const char tr[2] = {'N', 'T'};
        for (int x = 0; x < 2; x++)
            for (int y = 0; y < 2; y++) {
                test_product(tr[x], tr[y], 3, 5, 7, 1.0f, 0.0f, 0);
                test_product(tr[x], tr[y], 37, 29, 41, 0.5f, 1.0f, 3);
                test_product(tr[x], tr[y], 64, 64, 64, 0.125f, 1.0f, 0);
                test_product(tr[x], tr[y], 1, 300, 17, 1.0f, 1.0f, 1);
            }
        /* the model's pieces at GPT-2 124M: qkv forward, fc backward dx, fcproj dW, attention's score tile */
        test_product('N', 'T', 64, 2304, 768, 1.0f, 0.0f, 0);
        test_product('N', 'N', 64, 768, 3072, 1.0f, 1.0f, 0);
        test_product('T', 'N', 192, 768, 256, 1.0f, 1.0f, 0);
        test_product('N', 'T', 64, 64, 64, 0.125f, 0.0f, 2240);
        ZT_CHECK(threads_now() == before, "%s started threads: %d before its products, %d after",
                 gpt2_gemm_name(all[b]), before, threads_now());
    }
    gpt2_gemm_backend got = GPT2_GEMM_OPENBLAS;
    ZT_CHECK(gpt2_gemm_parse("cublas", &got) == ZINC_ERR_INVALID_ARG &&
                 strstr(zinc_last_error(), "openblas, onednn or auto"),
             "an unknown --gemm is refused naming the choices: %s", zinc_last_error());
    ZT_OK(gpt2_gemm_parse("openblas", &got));
    ZT_CHECK(got == GPT2_GEMM_OPENBLAS, "openblas parsed as %d", (int)got);
    ZT_OK(gpt2_gemm_parse("auto", &got));
    /* auto is oneDNN where it loads */
    ZT_CHECK(got == (gpt2_gemm_have_onednn() ? GPT2_GEMM_ONEDNN : GPT2_GEMM_OPENBLAS), "auto chose %s",
             gpt2_gemm_name(got));
    test_to_bf16();
    if (nb == 2) {
        gpt2_gemm_select(GPT2_GEMM_ONEDNN);
        test_signal_storm();
    }
    zinc_options o = zinc_default_options();
    o.config_json = "{\"train_batch_size\": 1, \"optimizer\": {\"type\": \"Adam\", \"params\": {\"lr\": 0.001}}}";
    o.log_level = ZINC_LOG_WARN;
    o.cpu_threads = 3;
    zinc_engine *engine = NULL;
    ZT_OK(zinc_create(&o, &engine));
    for (int b = 0; b < nb; b++) test_par_holds(engine, all[b]);
    for (int b = 0; b < nb; b++) { /* bf16 products on oneDNN, or widened into sgemm without it */
        gpt2_gemm_select(all[b]);
        test_matmul_bf16(engine, 37, 24, 72);
        test_matmul_bf16(engine, 300, 40, 200); /* several pieces of rows and of output features */
        test_matmul_bf16(engine, 20, 150, 700); /* cut by outputs and by dx's columns */
        test_matmul_bf16(engine, 50, 600, 130); /* dW cut by input features */
    }
    zinc_destroy(engine);
    zinc_finalize();
    zinc_status st = gpt2_gemm_parse("onednn", &got);
    ZT_CHECK(gpt2_gemm_have_onednn() ? st == ZINC_OK
                                     : st == ZINC_ERR_UNSUPPORTED && strstr(zinc_last_error(), "libdnnl2"),
             "onednn: %s (%s)", zinc_status_name(st), zinc_last_error());
    return zt_finish();
}
