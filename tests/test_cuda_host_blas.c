/* The CUDA emulation's cuBLAS SGEMM (tests/cuda_host/cuda_host_blas.c), which the example models' GPU
 * paths are tested on: every transpose pair the models use and the fourth (N/T x N/T), leading dimensions
 * larger than the matrices, alpha and beta (beta 0 must not read C, which starts as NaN in emulated device
 * memory), against a float64 reference (relative 1e-6 of the sum of |terms|), and the result only after
 * the stream runs (lazy streams). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "cublas_v2.h"
#include "cuda_runtime_api.h"
#include "zt.h"

enum { M = 5, N = 4, K = 3, PAD = 2 };

static float *dev(const float *host, size_t n) {
    void *p = NULL;
    if (cudaMalloc(&p, n * sizeof(float)) != cudaSuccess) return NULL;
    if (host) cudaMemcpy(p, host, n * sizeof(float), cudaMemcpyHostToDevice);
    return p;
}

int main(void) {
    zt_name = "cuda_host_blas";
    uint64_t rng = 5;
    cublasHandle_t h;
    cudaStream_t s;
    ZT_CHECK(cublasCreate(&h) == CUBLAS_STATUS_SUCCESS && cudaStreamCreate(&s) == cudaSuccess, "handle and stream");
    ZT_CHECK(cublasSetStream(h, s) == CUBLAS_STATUS_SUCCESS, "set stream");
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++)
            for (int bi = 0; bi < 2; bi++) {
                float alpha = 0.5f, beta = bi ? 1.5f : 0.0f;
                int arows = ta ? K : M, acols = ta ? M : K, brows = tb ? N : K, bcols = tb ? K : N;
                int lda = arows + PAD, ldb = brows + PAD, ldc = M + PAD;
                float A[(K + PAD) * M + M * K], B[(N + PAD) * K + K * N], C[(M + PAD) * N], got[(M + PAD) * N];
                for (int i = 0; i < lda * acols; i++) A[i] = (float)zt_rand_normal(&rng);
                for (int i = 0; i < ldb * bcols; i++) B[i] = (float)zt_rand_normal(&rng);
                for (int i = 0; i < ldc * N; i++) C[i] = (float)zt_rand_normal(&rng);
                float *dA = dev(A, (size_t)(lda * acols)), *dB = dev(B, (size_t)(ldb * bcols)),
                      *dC = dev(bi ? C : NULL, (size_t)(ldc * N)); /* beta 0: C left as the emulation's NaN */
                ZT_CHECK(cublasSgemm(h, ta ? CUBLAS_OP_T : CUBLAS_OP_N, tb ? CUBLAS_OP_T : CUBLAS_OP_N, M, N, K,
                                     &alpha, dA, lda, dB, ldb, &beta, dC, ldc) == CUBLAS_STATUS_SUCCESS,
                         "sgemm %d%d", ta, tb);
                cudaStreamSynchronize(s);
                cudaMemcpy(got, dC, sizeof(float) * (size_t)(ldc * N), cudaMemcpyDeviceToHost);
                for (int j = 0; j < N; j++)
                    for (int i = 0; i < M; i++) {
                        double acc = 0, mag = 0;
                        for (int q = 0; q < K; q++) {
                            double a = ta ? A[i * lda + q] : A[q * lda + i], b = tb ? B[q * ldb + j] : B[j * ldb + q];
                            acc += a * b;
                            mag += fabs(a * b);
                        }
                        double want = alpha * acc + (bi ? beta * C[j * ldc + i] : 0.0);
                        mag = alpha * mag + (bi ? fabs(beta * C[j * ldc + i]) : 0.0);
                        ZT_CHECK(fabs(got[j * ldc + i] - want) <= 1e-6 * mag + 1e-30,
                                 "op(A) %c op(B) %c beta %g: C[%d,%d] %.9g, want %.9g", ta ? 'T' : 'N', tb ? 'T' : 'N',
                                 (double)beta, i, j, (double)got[j * ldc + i], want);
                    }
                cudaFree(dA);
                cudaFree(dB);
                cudaFree(dC);
            }
    cublasDestroy(h);
    cudaStreamDestroy(s);
    return zt_finish();
}
