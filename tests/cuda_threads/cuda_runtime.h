/* CUDA's kernel side on the CPU (see run.sh). A launch runs the blocks one after another; the threads of a
 * block are fibers on the launching thread (switched at the barriers, each running as far as it can before
 * the next starts, in order or in reverse order in alternate launches), or, under ThreadSanitizer (EMU_OS_THREADS), one std::thread each, so that a missing
 * barrier shows as a data race. __syncthreads is a block barrier and the warp intrinsics (full mask only)
 * are warp barriers around an exchange buffer; a barrier that not every thread reaches aborts (fibers) or
 * hangs (threads; run.sh runs under timeout). __shared__ arrays are statics (one block runs at a time); the
 * dynamic shared array is fresh memory filled with 0xFF at each launch. */
#pragma once
#include "cuda_runtime_api.h"
#ifndef EMU_OS_THREADS
#if defined(__SANITIZE_THREAD__)
#define EMU_OS_THREADS 1
#else
#define EMU_OS_THREADS 0
#endif
#endif
#ifdef __cplusplus
#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <cstdio>
#include <thread>
#include <vector>
#include <math.h>

struct dim3 {
    unsigned x, y, z;
    constexpr dim3(unsigned a = 1, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {}
};
enum cudaDeviceAttr { cudaDevAttrMultiProcessorCount = 16, cudaDevAttrMaxSharedMemoryPerBlockOptin = 97 };
enum cudaFuncAttribute { cudaFuncAttributeMaxDynamicSharedMemorySize = 8 };
extern "C" cudaError_t cudaGetDevice(int *d);
extern "C" cudaError_t cudaDeviceGetAttribute(int *v, cudaDeviceAttr a, int dev);

namespace emu {
extern cudaError_t last;
extern int optin;
extern dim3 grid, block;
extern thread_local dim3 tid3, bid3;
extern thread_local int tid, lane;
extern std::vector<uint64_t> xbuf;
extern std::vector<int> fbuf;
extern float *smem;
extern unsigned long long nthreads_run, nlaunches; /* CUDA threads and launches run so far */
void sync_block();
void sync_warp();
/* Whether ZT_PLANT names this optimizer family: run_lib.sh broken's changed constants. */
bool planted(const char *family);
template <class T> T *dyn_smem() { return reinterpret_cast<T *>(smem); }
void run(dim3 g, dim3 b, size_t smem_bytes, void (*body)(void *), void *ctx);
template <class F> void body_of(void *ctx) { (*static_cast<F *>(ctx))(); }
struct Launch {
    dim3 g, b;
    size_t sm;
    template <class F> void operator()(F f) { run(g, b, sm, &body_of<F>, &f); }
};
inline Launch launch(dim3 g, dim3 b, size_t sm = 0, cudaStream_t = nullptr) { return Launch{g, b, sm}; }
} // namespace emu

template <class T> cudaError_t cudaFuncSetAttribute(T *, cudaFuncAttribute, int v) {
    if (v > emu::optin) emu::optin = v;
    return cudaSuccess;
}

#define __global__
#define __launch_bounds__(...)
#define __device__
#define __host__
#define __forceinline__ inline
#define __shared__ static
#define threadIdx emu::tid3
#define blockIdx emu::bid3
#define blockDim emu::block
#define gridDim emu::grid

inline void __syncthreads() { emu::sync_block(); }
inline int __syncthreads_or(int p) {
    emu::fbuf[emu::tid] = p;
    emu::sync_block();
    int r = 0;
    for (int f : emu::fbuf) r |= f != 0;
    emu::sync_block();
    return r;
}
template <class T> T __shfl_xor_sync(unsigned mask, T v, int o) {
    if (mask != 0xffffffffu) abort();
    std::memcpy(&emu::xbuf[emu::tid], &v, sizeof v);
    emu::sync_warp();
    T r;
    std::memcpy(&r, &emu::xbuf[(emu::tid & ~31) | (emu::lane ^ o)], sizeof r);
    emu::sync_warp();
    return r;
}
inline unsigned __ballot_sync(unsigned mask, int p) {
    if (mask != 0xffffffffu) abort();
    emu::xbuf[emu::tid] = p != 0;
    emu::sync_warp();
    unsigned r = 0;
    for (int l = 0; l < 32; l++) r |= (unsigned)emu::xbuf[(emu::tid & ~31) | l] << l;
    emu::sync_warp();
    return r;
}
inline int __ffs(unsigned x) { return __builtin_ffs((int)x); }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fmul_rn(float a, float b) { return a * b; }
/* The remaining round-to-nearest intrinsics zinc's own kernels (kernels/<name>.cu) use: IEEE operations on the
 * host too (run_lib.sh compiles with -ffp-contract=off, so nothing is fused). */
inline float __fdiv_rn(float a, float b) { return a / b; }
inline float __fsqrt_rn(float a) { return std::sqrt(a); }
inline double __dadd_rn(double a, double b) { return a + b; }
inline double __dmul_rn(double a, double b) { return a * b; }
/* The vector types of the 4-wide accesses. */
struct float4 {
    float x, y, z, w;
};
struct uint2 {
    unsigned x, y;
};
inline float4 make_float4(float x, float y, float z, float w) { return float4{x, y, z, w}; }
template <class T> inline T min(T a, T b) { return a < b ? a : b; }
#endif
