/* See cuda_runtime.h and cuda_runtime_api.h. */
#include "cuda_runtime.h"
namespace emu {
cudaError_t last = cudaSuccess;
int optin = 48 * 1024;
dim3 grid, block;
thread_local dim3 tid3, bid3;
thread_local int tid, lane;
std::barrier<> *bar;
std::vector<std::barrier<> *> wbar;
std::vector<uint64_t> xbuf;
std::vector<int> fbuf;
float *smem;

void run(dim3 g, dim3 b, size_t smem_bytes, void (*body)(void *), void *ctx) {
    unsigned nt = b.x * b.y * b.z;
    if (nt == 0 || nt > 1024 || nt % 32 || g.x == 0 || g.y == 0 || g.z == 0 || g.y > 65535 || g.z > 65535 ||
        smem_bytes > (size_t)optin) {
        fprintf(stderr, "emu: bad launch grid (%u,%u,%u) block (%u,%u,%u) smem %zu\n", g.x, g.y, g.z, b.x, b.y, b.z,
                smem_bytes);
        last = cudaErrorInvalidValue;
        return;
    }
    grid = g, block = b;
    std::barrier<> B(nt);
    bar = &B;
    std::vector<std::barrier<> *> wb;
    for (unsigned w = 0; w < nt / 32; w++) wb.push_back(new std::barrier<>(32));
    wbar = wb;
    xbuf.assign(nt, 0);
    fbuf.assign(nt, 0);
    smem = smem_bytes ? static_cast<float *>(malloc(smem_bytes)) : nullptr;
    if (smem) memset(smem, 0xFF, smem_bytes); /* garbage, as shared memory starts */
    std::vector<std::thread> th;
    for (unsigned t = 0; t < nt; t++)
        th.emplace_back([=] {
            tid = (int)t, lane = (int)(t % 32);
            tid3 = dim3(t % b.x, (t / b.x) % b.y, t / (b.x * b.y));
            for (unsigned z = 0; z < g.z; z++)
                for (unsigned y = 0; y < g.y; y++)
                    for (unsigned x = 0; x < g.x; x++) {
                        bid3 = dim3(x, y, z);
                        body(ctx);
                        bar->arrive_and_wait(); /* the block is done before the next reuses shared memory */
                    }
        });
    for (auto &x : th) x.join();
    for (auto *w : wb) delete w;
    free(smem);
    smem = nullptr;
}
} // namespace emu

extern "C" {
cudaError_t cudaGetDevice(int *d) { *d = 0; return cudaSuccess; }
/* Two multiprocessors: kernels sized by them (kernels/cuda_common.cuh's grid_for) get a few blocks, so their
 * grid-stride loops take several turns. */
cudaError_t cudaDeviceGetAttribute(int *v, cudaDeviceAttr a, int) {
    *v = a == cudaDevAttrMultiProcessorCount ? 2 : 227 * 1024;
    return cudaSuccess;
}
cudaError_t cudaGetDeviceCount(int *n) { *n = 1; return cudaSuccess; }
cudaError_t cudaMalloc(void **p, size_t bytes) { *p = malloc(bytes); return *p ? cudaSuccess : cudaErrorInvalidValue; }
cudaError_t cudaFree(void *p) { free(p); return cudaSuccess; }
cudaError_t cudaMemset(void *p, int v, size_t bytes) { memset(p, v, bytes); return cudaSuccess; }
cudaError_t cudaMemcpy(void *d, const void *s, size_t bytes, cudaMemcpyKind) { memcpy(d, s, bytes); return cudaSuccess; }
cudaError_t cudaStreamCreate(cudaStream_t *s) { *s = nullptr; return cudaSuccess; }
cudaError_t cudaStreamDestroy(cudaStream_t) { return cudaSuccess; }
cudaError_t cudaStreamSynchronize(cudaStream_t) { return cudaSuccess; }
cudaError_t cudaDeviceSynchronize(void) { return cudaSuccess; }
cudaError_t cudaGetLastError(void) { cudaError_t e = emu::last; emu::last = cudaSuccess; return e; }
const char *cudaGetErrorString(cudaError_t e) { return e == cudaSuccess ? "no error" : e == cudaErrorInvalidValue ? "invalid argument" : "error"; }
/* gpt2_layers.c with e == NULL and tests/zt.c on the paths the test takes never call these; weak, so that
 * run_lib.sh's programs, which link the library, get its own. */
#include "zinc.h"
__attribute__((weak)) zinc_status zinc_parallel_for(zinc_engine *, int64_t, void (*)(void *, int64_t, int64_t), void *) { abort(); }
}
extern "C" __attribute__((weak)) const char *zinc_last_error(void) { return ""; }
extern "C" __attribute__((weak)) const char *zinc_status_name(zinc_status) { return "?"; }
