/* See cuda_runtime_api.h and cuda_host.h in this folder. */
#include <stdarg.h>
#include <time.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_host.h"

#define POISON 0xff
#define QUARANTINE_BYTES ((size_t)256 << 20)
#define TOTAL_BYTES ((size_t)80 << 30) /* what cudaMemGetInfo reports as the device's size */

/* ---------------------------------------------------------------- errors */

static cudaError_t last_error = cudaSuccess;

/* A misuse the emulation caught is a bug in the code under test: stop the test program loudly. */
void cuda_host_error(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "cuda_host: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    abort();
}

static cudaError_t ret(cudaError_t e) {
    if (e != cudaSuccess) last_error = e;
    return e;
}

cudaError_t cudaGetLastError(void) {
    cudaError_t e = last_error;
    last_error = cudaSuccess;
    return e;
}

const char *cudaGetErrorString(cudaError_t e) {
    switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidResourceHandle: return "invalid resource handle";
    case cudaErrorNotReady: return "device not ready";
    case cudaErrorHostMemoryAlreadyRegistered: return "part or all of the requested memory range is already mapped";
    case cudaErrorHostMemoryNotRegistered: return "pointer does not correspond to a registered memory region";
    }
    return "unrecognized error code";
}

/* ---------------------------------------------------------------- the device */

static int current_device;

static int device_count(void) {
    const char *v = getenv("ZINC_CUDA_HOST_DEVICES"); /* tests may emulate a node with several GPUs */
    return v && *v ? atoi(v) : 1;
}

cudaError_t cudaGetDeviceCount(int *count) {
    *count = device_count();
    return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) {
    if (device < 0 || device >= device_count()) return ret(cudaErrorInvalidValue);
    current_device = device;
    return cudaSuccess;
}

cudaError_t cudaGetDevice(int *device) {
    *device = current_device;
    return cudaSuccess;
}

/* ---------------------------------------------------------------- memory registry */

typedef enum { BLOCK_DEVICE, BLOCK_PINNED, BLOCK_REGISTERED } block_kind;

typedef struct block {
    char *p;
    size_t bytes;
    block_kind kind;
    struct block *next;
} block;

static block *blocks;     /* live allocations and registrations */
static block *quarantine; /* freed device memory, poisoned, oldest last */
static size_t in_use, quarantined;

static block *find(const void *p) {
    for (block *b = blocks; b; b = b->next)
        if ((const char *)p >= b->p && (const char *)p < b->p + b->bytes) return b;
    return NULL;
}

void cuda_host_check_span(const void *p, size_t bytes, const char *what) {
    block *b = find(p);
    if (b && b->kind == BLOCK_DEVICE && (size_t)((const char *)p - b->p) + bytes > b->bytes)
        cuda_host_error("%s: %zu bytes at offset %zu of a %zu-byte device allocation run past its end", what, bytes,
                        (size_t)((const char *)p - b->p), b->bytes);
    for (block *q = quarantine; q; q = q->next)
        if ((const char *)p >= q->p && (const char *)p < q->p + q->bytes)
            cuda_host_error("%s: %zu bytes at %p are in device memory that was freed", what, bytes, p);
}

static cudaError_t add_block(void **ptr, size_t bytes, block_kind kind) {
    block *b = malloc(sizeof *b);
    char *p = malloc(bytes ? bytes : 1);
    if (!b || !p) {
        free(b);
        free(p);
        return ret(cudaErrorMemoryAllocation);
    }
    memset(p, POISON, bytes);
    *b = (block){p, bytes, kind, blocks};
    blocks = b;
    if (kind == BLOCK_DEVICE) in_use += bytes;
    *ptr = p;
    return cudaSuccess;
}

static block *unlink_block(const void *p, block_kind kind) {
    for (block **pb = &blocks; *pb; pb = &(*pb)->next)
        if ((*pb)->p == p && (*pb)->kind == kind) {
            block *b = *pb;
            *pb = b->next;
            return b;
        }
    return NULL;
}

/* Freed device memory stays allocated and poisoned for a while, so a late reader gets NaN. */
static void quarantine_block(block *b) {
    in_use -= b->bytes;
    memset(b->p, POISON, b->bytes);
    b->next = quarantine;
    quarantine = b;
    quarantined += b->bytes;
    while (quarantined > QUARANTINE_BYTES && quarantine->next) {
        block **last = &quarantine;
        while ((*last)->next) last = &(*last)->next;
        quarantined -= (*last)->bytes;
        free((*last)->p);
        free(*last);
        *last = NULL;
    }
}

cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total_bytes) {
    *total_bytes = TOTAL_BYTES;
    *free_bytes = TOTAL_BYTES - in_use;
    return cudaSuccess;
}

/* ---------------------------------------------------------------- streams and events */

typedef struct op {
    void (*fn)(void *args);
    uint64_t seq;
    struct op *next;
    _Alignas(16) unsigned char args[];
} op;

struct cuda_host_stream {
    op *head, *tail;
    uint64_t enqueued, done;
    int running, destroyed;
    struct cuda_host_stream *next;
};

struct cuda_host_event {
    cudaStream_t s;
    uint64_t seq;
    int timing;       /* created without cudaEventDisableTiming */
    uint64_t records; /* cudaEventRecord calls: a stamp from an earlier record is stale */
    uint64_t stamped; /* the record whose time `ns` holds (0: none yet) */
    double ns;
};

static struct cuda_host_stream *streams; /* never freed: waits captured on other streams may name them */

/* Runs stream s's work up to (and including) sequence number `upto`. */
static void flush(cudaStream_t s, uint64_t upto) {
    if (!s) return;
    while (s->done < upto) {
        if (s->running) {
            cuda_host_error("a stream waits for work queued after the wait itself (a cycle of stream waits)");
            return;
        }
        op *o = s->head;
        s->head = o->next;
        if (!s->head) s->tail = NULL;
        s->running = 1;
        o->fn(o->args);
        s->running = 0;
        s->done = o->seq;
        free(o);
    }
}

void cuda_host_stream_flush(cudaStream_t s) {
    if (s) flush(s, s->enqueued);
}

static void flush_all(void) {
    for (cudaStream_t s = streams; s; s = s->next) flush(s, s->enqueued);
}

cudaError_t cuda_host_enqueue(cudaStream_t s, void (*fn)(void *args), const void *args, size_t args_bytes) {
    if (s && s->destroyed) {
        cuda_host_error("work enqueued on a destroyed stream");
        return ret(cudaErrorInvalidValue);
    }
    if (!s) { /* the legacy stream: at once, on a copy of the arguments as a real launch would take */
        void *a = malloc(args_bytes ? args_bytes : 1);
        if (!a) return ret(cudaErrorMemoryAllocation);
        memcpy(a, args, args_bytes);
        fn(a);
        free(a);
        return cudaSuccess;
    }
    op *o = malloc(sizeof *o + args_bytes);
    if (!o) return ret(cudaErrorMemoryAllocation);
    o->fn = fn;
    o->seq = ++s->enqueued;
    o->next = NULL;
    memcpy(o->args, args, args_bytes);
    if (s->tail)
        s->tail->next = o;
    else
        s->head = o;
    s->tail = o;
    return cudaSuccess;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned int flags) {
    (void)flags;
    cudaStream_t n = calloc(1, sizeof *n);
    if (!n) return ret(cudaErrorMemoryAllocation);
    n->next = streams;
    streams = n;
    *s = n;
    return cudaSuccess;
}

cudaError_t cudaStreamCreate(cudaStream_t *s) { return cudaStreamCreateWithFlags(s, 0); }

cudaError_t cudaStreamDestroy(cudaStream_t s) {
    if (!s) return ret(cudaErrorInvalidValue);
    flush(s, s->enqueued); /* as CUDA: work already queued still completes */
    s->destroyed = 1;
    return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t s) {
    if (s) flush(s, s->enqueued);
    return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize(void) {
    flush_all();
    return cudaSuccess;
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *ev, unsigned int flags) {
    *ev = calloc(1, sizeof **ev);
    if (*ev) (*ev)->timing = !(flags & cudaEventDisableTiming);
    return *ev ? cudaSuccess : ret(cudaErrorMemoryAllocation);
}

cudaError_t cudaEventDestroy(cudaEvent_t ev) {
    if (ev && ev->timing) flush(ev->s, ev->seq); /* its pending stamp names it: run it first */
    free(ev);
    return cudaSuccess;
}

typedef struct stamp_args {
    cudaEvent_t ev;
    uint64_t record;
} stamp_args;

static void run_stamp(void *a) {
    stamp_args *sa = a;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    sa->ev->ns = (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
    sa->ev->stamped = sa->record;
}

cudaError_t cudaEventRecord(cudaEvent_t ev, cudaStream_t s) {
    if (!ev) return ret(cudaErrorInvalidValue);
    ev->records++;
    if (ev->timing) { /* the time when the stream gets here: a stamp in the stream's order */
        stamp_args sa = {ev, ev->records};
        cudaError_t e = cuda_host_enqueue(s, run_stamp, &sa, sizeof sa);
        if (e != cudaSuccess) return e;
    }
    ev->s = s;
    ev->seq = s ? s->enqueued : 0;
    return cudaSuccess;
}

cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end) {
    if (!ms || !start || !end) return ret(cudaErrorInvalidValue);
    if (!start->timing || !end->timing || !start->records || !end->records) return ret(cudaErrorInvalidResourceHandle);
    if (start->stamped != start->records || end->stamped != end->records) return ret(cudaErrorNotReady);
    *ms = (float)((end->ns - start->ns) / 1e6);
    return cudaSuccess;
}

cudaError_t cudaEventSynchronize(cudaEvent_t ev) {
    if (!ev) return ret(cudaErrorInvalidValue);
    flush(ev->s, ev->seq);
    return cudaSuccess;
}

typedef struct wait_args {
    cudaStream_t s;
    uint64_t seq;
} wait_args;

static void run_wait(void *a) {
    wait_args *w = a;
    flush(w->s, w->seq);
}

cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t ev, unsigned int flags) {
    (void)flags;
    if (!ev) return ret(cudaErrorInvalidValue);
    if (!ev->s || ev->s == s) return cudaSuccess; /* nothing to wait for, or already in order */
    wait_args w = {ev->s, ev->seq};               /* captured now: the event may be recorded again or destroyed */
    return cuda_host_enqueue(s, run_wait, &w, sizeof w);
}

/* ---------------------------------------------------------------- allocation */

cudaError_t cudaMalloc(void **ptr, size_t bytes) { return add_block(ptr, bytes, BLOCK_DEVICE); }

cudaError_t cudaMallocAsync(void **ptr, size_t bytes, cudaStream_t s) {
    (void)s; /* addresses are never reused (quarantine), so allocating now is as good as in stream order */
    return add_block(ptr, bytes, BLOCK_DEVICE);
}

static void run_free(void *a) {
    void *p = *(void **)a;
    block *b = unlink_block(p, BLOCK_DEVICE);
    if (!b)
        cuda_host_error("cudaFreeAsync(%p): not a device allocation (or freed twice)", p);
    else
        quarantine_block(b);
}

cudaError_t cudaFreeAsync(void *ptr, cudaStream_t s) {
    if (!ptr) return cudaSuccess;
    return cuda_host_enqueue(s, run_free, &ptr, sizeof ptr);
}

cudaError_t cudaFree(void *ptr) {
    if (!ptr) return cudaSuccess;
    flush_all(); /* cudaFree synchronizes the device */
    run_free(&ptr);
    return cudaSuccess;
}

cudaError_t cudaHostAlloc(void **ptr, size_t bytes, unsigned int flags) {
    (void)flags;
    return add_block(ptr, bytes, BLOCK_PINNED);
}

cudaError_t cudaFreeHost(void *ptr) {
    if (!ptr) return cudaSuccess;
    flush_all(); /* as cudaFree */
    block *b = unlink_block(ptr, BLOCK_PINNED);
    if (!b) {
        cuda_host_error("cudaFreeHost(%p): not a cudaHostAlloc'd pointer", ptr);
        return ret(cudaErrorInvalidValue);
    }
    free(b->p);
    free(b);
    return cudaSuccess;
}

cudaError_t cudaHostRegister(void *ptr, size_t bytes, unsigned int flags) {
    (void)flags;
    if (!ptr || !bytes) return ret(cudaErrorInvalidValue);
    if (find(ptr) || find((char *)ptr + bytes - 1)) return ret(cudaErrorHostMemoryAlreadyRegistered);
    block *b = malloc(sizeof *b);
    if (!b) return ret(cudaErrorMemoryAllocation);
    *b = (block){ptr, bytes, BLOCK_REGISTERED, blocks};
    blocks = b;
    return cudaSuccess;
}

cudaError_t cudaHostUnregister(void *ptr) {
    block *b = unlink_block(ptr, BLOCK_REGISTERED);
    if (!b) return ret(cudaErrorHostMemoryNotRegistered);
    free(b);
    return cudaSuccess;
}

cudaError_t cudaPointerGetAttributes(struct cudaPointerAttributes *attr, const void *ptr) {
    block *b = find(ptr);
    memset(attr, 0, sizeof *attr);
    attr->type = !b ? cudaMemoryTypeUnregistered : b->kind == BLOCK_DEVICE ? cudaMemoryTypeDevice : cudaMemoryTypeHost;
    attr->device = current_device;
    return cudaSuccess;
}

/* ---------------------------------------------------------------- memset and copies */

typedef struct memset_args {
    void *p;
    int value;
    size_t bytes;
} memset_args;

static void run_memset(void *a) {
    memset_args *m = a;
    memset(m->p, m->value, m->bytes);
}

cudaError_t cudaMemsetAsync(void *ptr, int value, size_t bytes, cudaStream_t s) {
    block *b = find(ptr);
    if (!b || b->kind != BLOCK_DEVICE) {
        cuda_host_error("cudaMemsetAsync(%p, %zu bytes): not device memory", ptr, bytes);
        return ret(cudaErrorInvalidValue);
    }
    cuda_host_check_span(ptr, bytes, "cudaMemsetAsync");
    memset_args m = {ptr, value, bytes};
    return cuda_host_enqueue(s, run_memset, &m, sizeof m);
}

cudaError_t cudaMemset(void *ptr, int value, size_t bytes) { return cudaMemsetAsync(ptr, value, bytes, NULL); }

typedef struct copy_args {
    void *dst;
    const void *src; /* NULL: the source bytes follow (taken at the call) */
    size_t bytes;
    _Alignas(16) unsigned char data[];
} copy_args;

static void run_copy(void *a) {
    copy_args *c = a;
    memcpy(c->dst, c->src ? c->src : (const void *)c->data, c->bytes);
}

typedef enum { MEM_PAGEABLE, MEM_PINNED, MEM_DEVICE } mem_class;

static mem_class classify(const void *p) {
    block *b = find(p);
    return !b ? MEM_PAGEABLE : b->kind == BLOCK_DEVICE ? MEM_DEVICE : MEM_PINNED;
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind, cudaStream_t s) {
    if (!bytes) return cudaSuccess;
    mem_class dc = classify(dst), sc = classify(src);
    int want_dst_dev = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
    int want_src_dev = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
    if (kind != cudaMemcpyDefault && ((dc == MEM_DEVICE) != want_dst_dev || (sc == MEM_DEVICE) != want_src_dev)) {
        cuda_host_error("cudaMemcpyAsync(%zu bytes): kind %d does not match the pointers (destination %s, source %s)",
                        bytes, (int)kind, dc == MEM_DEVICE ? "device" : "host", sc == MEM_DEVICE ? "device" : "host");
        return ret(cudaErrorInvalidValue);
    }
    cuda_host_check_span(dst, bytes, "cudaMemcpyAsync destination");
    cuda_host_check_span(src, bytes, "cudaMemcpyAsync source");
    if (sc == MEM_PAGEABLE && dc != MEM_PAGEABLE) {
        /* From pageable memory the call returns once the source is staged: take it now. */
        copy_args *c = malloc(sizeof *c + bytes);
        if (!c) return ret(cudaErrorMemoryAllocation);
        c->dst = dst;
        c->src = NULL;
        c->bytes = bytes;
        memcpy(c->data, src, bytes);
        cudaError_t e = cuda_host_enqueue(s, run_copy, c, sizeof *c + bytes);
        free(c);
        return e;
    }
    if (dc == MEM_PAGEABLE) {
        /* To pageable memory the call returns once the copy is done: the stream's earlier work first. */
        if (s) flush(s, s->enqueued);
        memcpy(dst, src, bytes);
        return cudaSuccess;
    }
    copy_args c = {dst, src, bytes};
    return cuda_host_enqueue(s, run_copy, &c, sizeof c);
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind) {
    flush_all();
    return cudaMemcpyAsync(dst, src, bytes, kind, NULL);
}
