/* See cuda_runtime.h and cuda_runtime_api.h. */
#include "cuda_runtime.h"

#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif

namespace emu {
cudaError_t last = cudaSuccess;
int optin = 48 * 1024;
dim3 grid, block;
thread_local dim3 tid3, bid3;
thread_local int tid, lane;
std::vector<uint64_t> xbuf;
std::vector<int> fbuf;
float *smem;
unsigned long long nthreads_run, nlaunches;

bool planted(const char *family) {
    static const char *plant = getenv("ZT_PLANT");
    return plant && !strcmp(plant, family);
}

namespace {
bool bad_launch(dim3 g, dim3 b, size_t smem_bytes) {
    unsigned nt = b.x * b.y * b.z;
    if (nt == 0 || nt > 1024 || g.x == 0 || g.y == 0 || g.z == 0 || g.y > 65535 || g.z > 65535 ||
        smem_bytes > (size_t)optin) {
        fprintf(stderr, "emu: bad launch grid (%u,%u,%u) block (%u,%u,%u) smem %zu\n", g.x, g.y, g.z, b.x, b.y, b.z,
                smem_bytes);
        last = cudaErrorInvalidValue;
        return true;
    }
    return false;
}
/* The warp intrinsics take the full mask only: a warp that is not whole (the last of a block whose size is no
 * multiple of 32) may not call them. */
void whole_warp(unsigned t) {
    if ((t | 31) >= block.x * block.y * block.z) {
        fprintf(stderr, "emu: a warp intrinsic with the full mask in a warp of fewer than 32 threads (block size "
                        "(%u,%u,%u))\n", block.x, block.y, block.z);
        abort();
    }
}
void set_thread(unsigned t, dim3 b) {
    tid = (int)t, lane = (int)(t % 32);
    tid3 = dim3(t % b.x, (t / b.x) % b.y, t / (b.x * b.y));
}

#if EMU_OS_THREADS
/* One std::thread per CUDA thread of a block; the blocks run one after another. */
std::barrier<> *bar;
std::vector<std::barrier<> *> wbar;

void run_blocks(dim3 g, dim3 b, void (*body)(void *), void *ctx) {
    unsigned nt = b.x * b.y * b.z;
    std::barrier<> B(nt);
    bar = &B;
    std::vector<std::barrier<> *> wb;
    for (unsigned w = 0; w < nt / 32; w++) wb.push_back(new std::barrier<>(32)); /* whole warps only */
    wbar = wb;
    std::vector<std::thread> th;
    for (unsigned t = 0; t < nt; t++)
        th.emplace_back([=] {
            set_thread(t, b);
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
}
} // namespace
void sync_block() { bar->arrive_and_wait(); }
void sync_warp() {
    whole_warp((unsigned)tid);
    wbar[tid / 32]->arrive_and_wait();
}
#else
/* One fiber per CUDA thread of a block, all on the launching OS thread, switched at the barriers only: each
 * thread runs as far as it can before the next starts, thread 0 first in even launches, the last thread first
 * in odd ones, which makes a missing barrier a wrong value on every run (one thread reads what another has
 * not written yet) rather than a race that may not show. A barrier that a thread of the block (or of
 * the warp, for the warp intrinsics) does not reach, because it returned or waits at another, aborts with
 * the block named. On x86-64 a switch is six pushes and pops (emu_switch below); elsewhere, or with
 * -DEMU_UCONTEXT=1, it is ucontext's swapcontext (a system call each: several times slower). */
#ifndef EMU_UCONTEXT
#if defined(__x86_64__)
#define EMU_UCONTEXT 0
#else
#define EMU_UCONTEXT 1
#endif
#endif
enum State { READY, AT_BLOCK, AT_WARP, DONE };
constexpr size_t kStack = 256 * 1024; /* AddressSanitizer's redzones make frames large */
constexpr size_t kTop = 16 * 1024;
#if EMU_UCONTEXT
struct Ctx {
    ucontext_t uc;
};
void ctx_switch(Ctx *from, Ctx *to) { swapcontext(&from->uc, &to->uc); }
void ctx_start(Ctx *c, char *stack, void (*entry)()) {
    getcontext(&c->uc);
    c->uc.uc_stack.ss_sp = stack;
    c->uc.uc_stack.ss_size = kStack;
    c->uc.uc_link = nullptr;
    makecontext(&c->uc, entry, 0);
    /* AddressSanitizer's swapcontext clears the shadow of the stack it switches to (slow for every switch,
     * and wrong for a fiber that resumes with live frames); makecontext has used the size already. */
    c->uc.uc_stack.ss_size = 0;
}
#else
struct Ctx {
    void *sp;
};
} // namespace
/* Saves the callee-saved registers on the current stack, stores its pointer in *from, and returns on the
 * stack `to` (System V x86-64 ABI; the floating-point control words are left alone: no kernel changes them). */
extern "C" void emu_switch(void **from, void *to);
asm(".text\n.globl emu_switch\n.type emu_switch,@function\nemu_switch:\n"
    "  pushq %rbp\n  pushq %rbx\n  pushq %r12\n  pushq %r13\n  pushq %r14\n  pushq %r15\n"
    "  movq %rsp, (%rdi)\n  movq %rsi, %rsp\n"
    "  popq %r15\n  popq %r14\n  popq %r13\n  popq %r12\n  popq %rbx\n  popq %rbp\n  ret\n"
    ".size emu_switch,.-emu_switch\n");
namespace {
void ctx_switch(Ctx *from, Ctx *to) { emu_switch(&from->sp, to->sp); }
/* A fresh stack as emu_switch leaves one: six zero registers, then the entry as the return address (and a
 * null one above it: the entry never returns), so that the entry starts with the stack aligned as after a
 * call. */
void ctx_start(Ctx *c, char *stack, void (*entry)()) {
    void **top = reinterpret_cast<void **>(stack + kStack); /* 16-byte aligned: mmap'd pages */
    void **sp = top - 8;
    for (int i = 0; i < 6; i++) sp[i] = nullptr;
    sp[6] = reinterpret_cast<void *>(entry);
    sp[7] = nullptr;
    c->sp = sp;
}
#endif
struct Fiber {
    Ctx ctx;
    char *stack;
    State st;
};
std::vector<Fiber> fibers;
Ctx sched;
unsigned cur, at_block, nt_cur;
std::vector<unsigned> at_warp;
void (*cur_body)(void *);
void *cur_ctx;
#if defined(__SANITIZE_ADDRESS__)
void *sched_fake;
const void *sched_bottom;
size_t sched_size;
#endif

/* AddressSanitizer follows stack switches only when told (its fiber annotations). */
void to_fiber(unsigned t) {
    cur = t;
    set_thread(t, block);
#if defined(__SANITIZE_ADDRESS__)
    __sanitizer_start_switch_fiber(&sched_fake, fibers[t].stack, kStack);
#endif
    ctx_switch(&sched, &fibers[t].ctx);
#if defined(__SANITIZE_ADDRESS__)
    __sanitizer_finish_switch_fiber(sched_fake, nullptr, nullptr);
#endif
}
void to_sched(State st) {
    Fiber &f = fibers[cur];
    f.st = st;
#if defined(__SANITIZE_ADDRESS__)
    void *fake = nullptr;
    __sanitizer_start_switch_fiber(st == DONE ? nullptr : &fake, sched_bottom, sched_size);
#endif
    ctx_switch(&f.ctx, &sched);
#if defined(__SANITIZE_ADDRESS__)
    __sanitizer_finish_switch_fiber(fake, &sched_bottom, &sched_size);
#endif
}
void fiber_main() {
#if defined(__SANITIZE_ADDRESS__)
    __sanitizer_finish_switch_fiber(nullptr, &sched_bottom, &sched_size);
#endif
    cur_body(cur_ctx);
    to_sched(DONE);
    abort(); /* a finished fiber is never resumed */
}
[[noreturn]] void stuck(const char *what) {
    fprintf(stderr, "emu: %s (block (%u,%u,%u), block size (%u,%u,%u)): a barrier not every thread reaches\n", what,
            bid3.x, bid3.y, bid3.z, block.x, block.y, block.z);
    abort();
}
void run_block(unsigned nt) {
    for (unsigned t = 0; t < nt; t++) {
        Fiber &f = fibers[t];
        ctx_start(&f.ctx, f.stack, fiber_main);
        /* A fiber's frames are unpoisoned as they return, except the two it ends in (fiber_main, to_sched),
         * at the top of its stack: cleared before the stack is used again. */
#if defined(__SANITIZE_ADDRESS__)
        __asan_unpoison_memory_region(f.stack + kStack - kTop, kTop);
#endif
        f.st = READY;
    }
    at_block = 0;
    at_warp.assign((nt + 31) / 32, 0);
    for (;;) {
        bool ran = false;
        unsigned done = 0;
        for (unsigned i = 0; i < nt; i++) {
            unsigned t = nlaunches & 1 ? nt - 1 - i : i;
            if (fibers[t].st == READY) {
                to_fiber(t);
                ran = true;
            }
            done += fibers[t].st == DONE;
        }
        if (done == nt) return;
        if (!ran) stuck(at_block ? "__syncthreads" : "a warp intrinsic");
    }
}
} // namespace
/* The last arrival releases the others and goes on; the rest wait in the scheduler. */
void sync_block() {
    unsigned me = cur;
    if (++at_block == nt_cur) {
        at_block = 0;
        for (unsigned t = 0; t < nt_cur; t++)
            if (fibers[t].st == AT_BLOCK) fibers[t].st = READY;
        return;
    }
    to_sched(AT_BLOCK);
    set_thread(me, block);
}
void sync_warp() {
    unsigned me = cur, w = me / 32;
    whole_warp(me);
    if (++at_warp[w] == 32) {
        at_warp[w] = 0;
        for (unsigned t = w * 32; t < w * 32 + 32; t++)
            if (fibers[t].st == AT_WARP) fibers[t].st = READY;
        return;
    }
    to_sched(AT_WARP);
    set_thread(me, block);
}
namespace {
void run_blocks(dim3 g, dim3 b, void (*body)(void *), void *ctx) {
    unsigned nt = b.x * b.y * b.z;
    fibers.reserve(1024); /* never moved: a ucontext_t points into itself */
    while (fibers.size() < nt) {
        void *p = mmap(nullptr, kStack + 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) abort();
        mprotect(p, 4096, PROT_NONE); /* a guard page below the stack */
        fibers.push_back(Fiber{{}, static_cast<char *>(p) + 4096, DONE});
    }
    nt_cur = nt, cur_body = body, cur_ctx = ctx;
    for (unsigned z = 0; z < g.z; z++)
        for (unsigned y = 0; y < g.y; y++)
            for (unsigned x = 0; x < g.x; x++) {
                bid3 = dim3(x, y, z);
                run_block(nt);
            }
}
} // namespace
#endif

void run(dim3 g, dim3 b, size_t smem_bytes, void (*body)(void *), void *ctx) {
    if (bad_launch(g, b, smem_bytes)) return;
    grid = g, block = b;
    unsigned nt = b.x * b.y * b.z;
    xbuf.assign((nt + 31) / 32 * 32, 0);
    fbuf.assign(nt, 0);
    smem = smem_bytes ? static_cast<float *>(malloc(smem_bytes)) : nullptr;
    if (smem) memset(smem, 0xFF, smem_bytes); /* garbage, as shared memory starts */
    run_blocks(g, b, body, ctx);
    nlaunches++;
    nthreads_run += (unsigned long long)nt * g.x * g.y * g.z;
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
/* What the program ran, for the scripts' logs (a smaller grid or fewer cases shows here). */
static void report() {
    fprintf(stderr, "emu: %llu launches, %llu CUDA threads, %s\n", emu::nlaunches, emu::nthreads_run,
            EMU_OS_THREADS ? "one OS thread each" : "as fibers");
}
__attribute__((constructor)) static void at_start() { atexit(report); }
