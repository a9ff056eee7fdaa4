/* examples/gpt2's matrix product (gpt2_gemm.h) on every backend this build has (OpenBLAS; oneDNN where
 * libdnnl-dev was found) against a float64 reference: the four transpositions, alpha and beta, strided
 * operands, at small shapes and at the model's (GPT-2 124M's pieces: K up to 3072, N up to 2304). A
 * backend whose kernels compute wrong results on this CPU (the reason some machines force an OpenBLAS core
 * type) fails here. Each element within 8 sqrt(K) float epsilons of the sum of |a b| terms (a missing or
 * doubled term is orders of magnitude above), and the whole within 1e-5 normwise. Then: a oneDNN product
 * starts no OpenMP threads (ctest sets OMP_NUM_THREADS=4: without the one-thread setting oneDNN would open
 * a team of 4 beside the engine's threads) and parse/select refuse what they must. */
#include <dirent.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gpt2_gemm.h"
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
    ZT_CHECK(got == (gpt2_gemm_have_onednn() ? GPT2_GEMM_ONEDNN : GPT2_GEMM_OPENBLAS), "auto chose %s",
             gpt2_gemm_name(got));
    zinc_status st = gpt2_gemm_parse("onednn", &got);
    ZT_CHECK(gpt2_gemm_have_onednn() ? st == ZINC_OK
                                     : st == ZINC_ERR_UNSUPPORTED && strstr(zinc_last_error(), "libdnnl-dev"),
             "onednn: %s (%s)", zinc_status_name(st), zinc_last_error());
    return zt_finish();
}
