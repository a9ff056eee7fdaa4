/* The NCCL zcomm backend with one rank (NCCL refuses two ranks of one communicator on one GPU): every
 * collective on device buffers, blocking and with requests, host-buffer staging for bcast and
 * allgather_bytes, and the argument errors. Exits 77 without a GPU. Values must come back bit-exact
 * (a one-rank sum or max is the identity). */
#include <cuda_runtime_api.h>
#include <stdlib.h>
#include <string.h>

#include "base/comm/comm_nccl.h"
#include "zt_cuda.h"


static uint64_t g_rng;

static void fill_bytes(void *p, size_t n) {
    for (size_t i = 0; i < n; i++) ((unsigned char *)p)[i] = (unsigned char)zt_rand_u64(&g_rng);
}

/* Random finite values of dtype t (random bytes could be NaN, which a MAX reduction may canonicalise). */
static void fill_vals(void *p, zinc_dtype t, size_t n) {
    for (size_t i = 0; i < n; i++) {
        float f = (float)zt_rand_normal(&g_rng);
        if (t == ZINC_FP32) ((float *)p)[i] = f;
        else if (t == ZINC_FP16) ((uint16_t *)p)[i] = zinc_f32_to_fp16(f);
        else ((uint16_t *)p)[i] = zinc_f32_to_bf16(f);
    }
}

static void test_allreduce(zcomm *c) {
    const size_t n = 1000003;
    for (int ti = 0; ti < 3; ti++)
        for (int op = 0; op < 2; op++)
            for (int async = 0; async < 2; async++) {
                zinc_dtype t = (zinc_dtype)ti;
                size_t bytes = n * zinc_dtype_size(t);
                void *h = malloc(bytes), *back = malloc(bytes), *d = NULL;
                fill_vals(h, t, n);
                CU(cudaMalloc(&d, bytes));
                CU(cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice));
                zcomm_req *req = NULL;
                ZT_OK(zcomm_allreduce(c, d, n, t, (zcomm_op)op, async ? &req : NULL));
                if (async) {
                    ZT_CHECK(req != NULL, "allreduce request");
                    ZT_OK(zcomm_wait(c, req));
                }
                CU(cudaMemcpy(back, d, bytes, cudaMemcpyDeviceToHost));
                ZT_CHECK(!memcmp(h, back, bytes), "allreduce %s op=%d async=%d changed the data", zinc_dtype_name(t),
                         op, async);
                CU(cudaFree(d));
                free(h);
                free(back);
            }
}

static void test_reduce_scatter_allgather(zcomm *c) {
    const size_t n = 777;
    for (int ti = 0; ti < 3; ti++) {
        zinc_dtype t = (zinc_dtype)ti;
        size_t es = zinc_dtype_size(t);
        void *h = malloc(n * es), *back = malloc(n * es), *ds = NULL, *dr = NULL;
        fill_vals(h, t, n);
        CU(cudaMalloc(&ds, n * es));
        CU(cudaMalloc(&dr, n * es));
        CU(cudaMemcpy(ds, h, n * es, cudaMemcpyHostToDevice));
        CU(cudaMemset(dr, 0xFF, n * es));
        size_t counts[1] = {n}, displs[1] = {0};
        zcomm_req *req = NULL;
        ZT_OK(zcomm_reduce_scatterv(c, ds, dr, counts, t, &req));
        /* the stream-wait path: the default stream waits, the host does not */
        ZT_OK(zcomm_nccl_wait_stream(c, req, NULL));
        CU(cudaDeviceSynchronize());
        CU(cudaMemcpy(back, dr, n * es, cudaMemcpyDeviceToHost));
        ZT_CHECK(!memcmp(h, back, n * es), "reduce_scatterv %s", zinc_dtype_name(t));

        ZT_OK(zcomm_allgatherv_inplace(c, dr, counts, displs, t, NULL));
        CU(cudaMemcpy(back, dr, n * es, cudaMemcpyDeviceToHost));
        ZT_CHECK(!memcmp(h, back, n * es), "allgatherv_inplace %s", zinc_dtype_name(t));
        /* a slice that is not at offset 0 (irregular layout: the broadcast path) */
        size_t c2[1] = {n - 5}, d2[1] = {5};
        ZT_OK(zcomm_allgatherv_inplace(c, dr, c2, d2, t, NULL));
        CU(cudaMemcpy(back, dr, n * es, cudaMemcpyDeviceToHost));
        ZT_CHECK(!memcmp(h, back, n * es), "allgatherv_inplace displaced %s", zinc_dtype_name(t));
        size_t zero[1] = {0};
        ZT_OK(zcomm_reduce_scatterv(c, ds, dr, zero, t, NULL));
        CU(cudaFree(ds));
        CU(cudaFree(dr));
        free(h);
        free(back);
    }
}

static void test_bytes(zcomm *c) {
    unsigned char in[100], out[100];
    fill_bytes(in, sizeof in);
    memset(out, 0, sizeof out);
    ZT_OK(zcomm_allgather_bytes(c, in, out, sizeof in)); /* host buffers: staged */
    ZT_CHECK(!memcmp(in, out, sizeof in), "allgather_bytes host");
    void *din = NULL, *dout = NULL;
    CU(cudaMalloc(&din, 100));
    CU(cudaMalloc(&dout, 100));
    CU(cudaMemcpy(din, in, 100, cudaMemcpyHostToDevice));
    CU(cudaMemset(dout, 0, 100));
    ZT_OK(zcomm_allgather_bytes(c, din, dout, 100)); /* device buffers: direct */
    CU(cudaMemcpy(out, dout, 100, cudaMemcpyDeviceToHost));
    ZT_CHECK(!memcmp(in, out, sizeof in), "allgather_bytes device");

    unsigned char big[10000], big2[10000];
    fill_bytes(big, sizeof big);
    memcpy(big2, big, sizeof big);
    ZT_OK(zcomm_bcast(c, big, sizeof big, 0)); /* host, larger than the first scratch */
    ZT_CHECK(!memcmp(big, big2, sizeof big), "bcast host");
    ZT_OK(zcomm_bcast(c, din, 100, 0));
    CU(cudaMemcpy(out, din, 100, cudaMemcpyDeviceToHost));
    ZT_CHECK(!memcmp(in, out, sizeof in), "bcast device");
    ZT_ERR(zcomm_bcast(c, big, 10, 1), ZINC_ERR_INVALID_ARG, "root");
    ZT_OK(zcomm_barrier(c));
    CU(cudaFree(din));
    CU(cudaFree(dout));
}

int main(void) {
    zt_name = "comm_nccl";
    int ndev = 0;
    cudaError_t e = cudaGetDeviceCount(&ndev);
    if (e != cudaSuccess || ndev <= 0) return zt_skip("no CUDA device");
    g_rng = zt_seed();
    CU(cudaSetDevice(0));
    zcomm *c = NULL;
    ZT_OK(zcomm_create_nccl(NULL, NULL, NULL, &c));
    if (!c) return zt_finish();
    ZT_CHECK(c->rank == 0 && c->size == 1, "rank %d size %d", c->rank, c->size);
    ZT_CHECK(!strcmp(c->ops->name, "nccl"), "backend name");
    ZT_CHECK(zcomm_nccl_stream(c) != NULL, "own stream");
    test_allreduce(c);
    test_reduce_scatter_allgather(c);
    test_bytes(c);
    ZT_ERR(zcomm_allreduce(c, NULL, 4, (zinc_dtype)7, ZCOMM_SUM, NULL), ZINC_ERR_INVALID_ARG, "dtype");
    zcomm_destroy(c);

    /* a communicator on a caller's stream */
    cudaStream_t s;
    CU(cudaStreamCreate(&s));
    ZT_OK(zcomm_create_nccl(NULL, (void *)s, NULL, &c));
    if (c) {
        ZT_CHECK(zcomm_nccl_stream(c) == (void *)s, "caller's stream used");
        ZT_OK(zcomm_barrier(c));
        zcomm_destroy(c);
    }
    CU(cudaStreamDestroy(s));
    return zt_finish();
}
