/* The timeline recorder (trace.h): per-thread blocks of spans, a process-wide cap, and the JSON text of
 * one process's spans. */
#include "base/core/trace.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/core/error.h"

_Atomic bool ztrace_recording = false;
_Atomic bool ztrace_enabled = false;

#define BLOCK_EVENTS 1024
#define MAX_TRACKS 512
#define TRACK_NAME_MAX 48

typedef struct span {
    int64_t t0, t1;
    const char *name;
    const char *k1, *k2;
    int64_t v1, v2;
    int64_t step;
    int64_t flow;  /* a flow's id (ztrace_flow_id), 0: none */
    int32_t track; /* the table's id: the recording thread's or a named track's */
    uint8_t cat;
    uint8_t kind;      /* cat gpu: the device work's own category */
    uint8_t flow_dir;  /* ztrace_flow_dir */
    uint8_t flow_only; /* ztrace_flow_at: no span, only the flow's end at t0 on this track */
} span;

typedef struct block {
    struct block *next;
    _Atomic int n; /* spans written (the owner stores, the serializer loads after recording stopped) */
    span ev[BLOCK_EVENTS];
} block;

typedef struct thread_buf {
    int track;
    block *head, *tail;
    _Atomic int64_t recorded; /* stored by the owner only: no shared counter on the hot path */
} thread_buf;

static const char *const cat_names[ZTRACE_CAT_COUNT] = {"step", "forward",   "backward", "recompute", "comm",
                                                        "wait", "optimizer", "nvme",     "copy",      "checkpoint",
                                                        "data", "gpu",       "engine",   "pool"};

const char *ztrace_cat_name(ztrace_cat c) { return (unsigned)c < ZTRACE_CAT_COUNT ? cat_names[c] : "other"; }

int ztrace_cat_find(const char *name) {
    for (int c = 0; name && c < ZTRACE_CAT_COUNT; c++)
        if (!strcmp(cat_names[c], name)) return c;
    return -1;
}

/* The recorder's state. Registration (threads, named tracks) takes the lock; recording does not. */
static struct {
    pthread_mutex_t lock;
    _Atomic unsigned gen; /* bumped by ztrace_reset: a thread's cached buffer of an older generation is stale */
    char names[MAX_TRACKS][TRACK_NAME_MAX];
    bool is_thread[MAX_TRACKS];
    int ntracks; /* ids 1..ntracks */
    thread_buf *threads[MAX_TRACKS];
    int nthreads;
    int64_t max_blocks;
    _Atomic int64_t blocks, dropped, flows;
    ztrace_window win;
    _Atomic int64_t step;
    int64_t step_t0;
    pthread_t main_thread;
} R = {.lock = PTHREAD_MUTEX_INITIALIZER};

static _Thread_local thread_buf *tls_buf;
static _Thread_local unsigned tls_gen;
static _Thread_local char tls_name[TRACK_NAME_MAX];

int64_t ztrace_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* A track id for `name` (lock held); 0 when the table is full. */
static int add_track(const char *name, bool thread) {
    if (!thread)
        for (int i = 1; i <= R.ntracks; i++)
            if (!R.is_thread[i] && !strcmp(R.names[i], name)) return i;
    if (R.ntracks + 1 >= MAX_TRACKS) return 0;
    int id = ++R.ntracks;
    snprintf(R.names[id], TRACK_NAME_MAX, "%s", name);
    R.is_thread[id] = thread;
    return id;
}

/* This thread's buffer, registered at its first span (the one lock a thread ever takes here). */
static thread_buf *my_buf(void) {
    unsigned gen = atomic_load_explicit(&R.gen, memory_order_acquire);
    if (tls_buf && tls_gen == gen) return tls_buf;
    tls_buf = NULL;
    pthread_mutex_lock(&R.lock);
    thread_buf *b = NULL;
    if (R.nthreads < MAX_TRACKS && (b = calloc(1, sizeof *b))) {
        char name[TRACK_NAME_MAX];
        if (tls_name[0])
            snprintf(name, sizeof name, "%s", tls_name);
        else if (pthread_equal(pthread_self(), R.main_thread))
            snprintf(name, sizeof name, "main");
        else
            snprintf(name, sizeof name, "thread %d", R.nthreads + 1);
        b->track = add_track(name, true);
        if (b->track) {
            R.threads[R.nthreads++] = b;
        } else {
            free(b);
            b = NULL;
        }
    }
    pthread_mutex_unlock(&R.lock);
    tls_buf = b;
    tls_gen = gen;
    return b;
}

void ztrace_thread_name(const char *name) {
    snprintf(tls_name, sizeof tls_name, "%s", name);
    /* a thread that recorded before it was named keeps its track; rename it */
    unsigned gen = atomic_load_explicit(&R.gen, memory_order_acquire);
    if (tls_buf && tls_gen == gen) {
        pthread_mutex_lock(&R.lock);
        snprintf(R.names[tls_buf->track], TRACK_NAME_MAX, "%s", name);
        pthread_mutex_unlock(&R.lock);
    }
}

int ztrace_track(const char *name) {
    if (!atomic_load_explicit(&ztrace_enabled, memory_order_relaxed)) return 0;
    pthread_mutex_lock(&R.lock);
    int id = add_track(name, false);
    pthread_mutex_unlock(&R.lock);
    return id;
}

static span *next_slot(thread_buf *b) {
    block *k = b->tail;
    if (k && atomic_load_explicit(&k->n, memory_order_relaxed) < BLOCK_EVENTS) return &k->ev[k->n];
    if (atomic_fetch_add(&R.blocks, 1) >= R.max_blocks) {
        atomic_fetch_sub(&R.blocks, 1);
        return NULL;
    }
    block *nk = malloc(sizeof *nk);
    if (!nk) {
        atomic_fetch_sub(&R.blocks, 1);
        return NULL;
    }
    nk->next = NULL;
    atomic_init(&nk->n, 0);
    if (k)
        k->next = nk;
    else
        b->head = nk;
    b->tail = nk;
    return &nk->ev[0];
}

/* only this thread writes its counts: plain stores (no locked instruction), the span published first */
static void publish(thread_buf *b) {
    block *k = b->tail;
    atomic_store_explicit(&k->n, atomic_load_explicit(&k->n, memory_order_relaxed) + 1, memory_order_release);
    atomic_store_explicit(&b->recorded, atomic_load_explicit(&b->recorded, memory_order_relaxed) + 1,
                          memory_order_relaxed);
}

static void record_flow(int64_t t0, int64_t t1, ztrace_cat cat, ztrace_cat kind, const char *name, int track,
                        const char *k1, int64_t v1, const char *k2, int64_t v2, int64_t flow, int flow_dir) {
    if (!t0 || !atomic_load_explicit(&ztrace_enabled, memory_order_relaxed)) return;
    thread_buf *b = my_buf();
    span *s = b ? next_slot(b) : NULL;
    if (!s) {
        atomic_fetch_add_explicit(&R.dropped, 1, memory_order_relaxed);
        return;
    }
    *s = (span){.t0 = t0,
                .t1 = t1 < t0 ? t0 : t1,
                .name = name,
                .k1 = k1,
                .k2 = k2,
                .v1 = v1,
                .v2 = v2,
                .step = atomic_load_explicit(&R.step, memory_order_relaxed),
                .track = track > 0 ? track : b->track,
                .cat = (uint8_t)cat,
                .kind = (uint8_t)kind,
                .flow = flow,
                .flow_dir = (uint8_t)(flow ? flow_dir : 0)};
    publish(b);
}

static void record(int64_t t0, int64_t t1, ztrace_cat cat, ztrace_cat kind, const char *name, int track, const char *k1,
                   int64_t v1, const char *k2, int64_t v2) {
    record_flow(t0, t1, cat, kind, name, track, k1, v1, k2, v2, 0, 0);
}

int64_t ztrace_flow_id(void) {
    if (!atomic_load_explicit(&ztrace_enabled, memory_order_relaxed)) return 0;
    return atomic_fetch_add_explicit(&R.flows, 1, memory_order_relaxed) + 1;
}

void ztrace_span_flow(int64_t t0, ztrace_cat cat, const char *name, int track, const char *k1, int64_t v1,
                      const char *k2, int64_t v2, int64_t flow, ztrace_flow_dir dir) {
    if (!t0) return;
    record_flow(t0, ztrace_now_ns(), cat, cat, name, track, k1, v1, k2, v2, flow, dir);
}

void ztrace_flow_at(int64_t t0, int track, int64_t flow, ztrace_flow_dir dir) {
    if (!t0 || !flow || !atomic_load_explicit(&ztrace_enabled, memory_order_relaxed)) return;
    thread_buf *b = my_buf();
    span *s = b ? next_slot(b) : NULL;
    if (!s) {
        atomic_fetch_add_explicit(&R.dropped, 1, memory_order_relaxed);
        return;
    }
    *s = (span){.t0 = t0,
                .t1 = t0,
                .track = track > 0 ? track : b->track,
                .flow = flow,
                .flow_dir = (uint8_t)dir,
                .flow_only = 1};
    publish(b);
}

void ztrace_span_at(int64_t t0, int64_t t1, ztrace_cat cat, const char *name, int track, const char *k1, int64_t v1,
                    const char *k2, int64_t v2) {
    record(t0, t1, cat, cat, name, track, k1, v1, k2, v2);
}

void ztrace_gpu_span_at(int64_t t0, int64_t t1, ztrace_cat kind, const char *name, int track, const char *k1,
                        int64_t v1) {
    record(t0, t1, ZTRACE_GPU, kind, name, track, k1, v1, NULL, 0);
}

void ztrace_span(int64_t t0, ztrace_cat cat, const char *name, int track, const char *k1, int64_t v1, const char *k2,
                 int64_t v2) {
    if (!t0) return;
    ztrace_span_at(t0, ztrace_now_ns(), cat, name, track, k1, v1, k2, v2);
}

static void update_recording(void) {
    int64_t s = atomic_load(&R.step);
    bool on = atomic_load(&ztrace_enabled) && s >= R.win.first && s <= R.win.last;
    atomic_store(&ztrace_recording, on);
}

zinc_status ztrace_start(ztrace_window w, int64_t max_events) {
    if (atomic_load(&ztrace_enabled))
        return ZERR(ZINC_ERR_STATE, "tracing is already on in this process (one traced engine at a time): destroy "
                                    "the traced engine first, or leave trace_path NULL");
    if (w.first < 1 || w.last < w.first)
        return ZERR(ZINC_ERR_INVALID_ARG, "the trace step window %lld:%lld is empty: want 1 <= first <= last",
                    (long long)w.first, (long long)w.last);
    ztrace_reset();
    if (max_events <= 0) max_events = ZTRACE_DEFAULT_MAX_EVENTS;
    R.max_blocks = (max_events + BLOCK_EVENTS - 1) / BLOCK_EVENTS;
    R.win = w;
    R.main_thread = pthread_self();
    atomic_store(&R.step, 1);
    R.step_t0 = 0;
    atomic_store(&ztrace_enabled, true);
    update_recording();
    (void)my_buf(); /* the calling thread's track first: "main" */
    return ZINC_OK;
}

void ztrace_set_step(int64_t step) {
    atomic_store(&R.step, step);
    update_recording();
}

int64_t ztrace_step(void) { return atomic_load(&R.step); }

void ztrace_step_begin(void) {
    if (!R.step_t0 && ztrace_active()) R.step_t0 = ztrace_now_ns();
}

void ztrace_step_begin_at(int64_t t0) {
    if (!R.step_t0 && t0 && ztrace_active()) R.step_t0 = t0;
}

void ztrace_step_end(int64_t samples) {
    if (R.step_t0 && ztrace_active())
        ztrace_span(R.step_t0, ZTRACE_STEP, "step", 0, "step", atomic_load(&R.step), "samples", samples);
    R.step_t0 = 0;
}

void ztrace_stop(void) {
    atomic_store(&ztrace_recording, false);
    atomic_store(&ztrace_enabled, false);
}

void ztrace_reset(void) {
    ztrace_stop();
    pthread_mutex_lock(&R.lock);
    for (int i = 0; i < R.nthreads; i++) {
        for (block *k = R.threads[i]->head, *next; k; k = next) {
            next = k->next;
            free(k);
        }
        free(R.threads[i]);
        R.threads[i] = NULL;
    }
    R.nthreads = 0;
    R.ntracks = 0;
    atomic_store(&R.blocks, 0);
    atomic_store(&R.dropped, 0);
    atomic_store(&R.flows, 0);
    atomic_fetch_add(&R.gen, 1);
    pthread_mutex_unlock(&R.lock);
}

void ztrace_count_dropped(int64_t n) { atomic_fetch_add_explicit(&R.dropped, n, memory_order_relaxed); }
int64_t ztrace_dropped(void) { return atomic_load(&R.dropped); }
int64_t ztrace_recorded(void) {
    int64_t n = 0;
    pthread_mutex_lock(&R.lock);
    for (int i = 0; i < R.nthreads; i++) n += atomic_load_explicit(&R.threads[i]->recorded, memory_order_relaxed);
    pthread_mutex_unlock(&R.lock);
    return n;
}

/* ---------------------------------------------------------------- JSON text */

typedef struct sbuf {
    char *p;
    size_t n, cap;
    bool oom;
} sbuf;

static void sb_reserve(sbuf *b, size_t more) {
    if (b->oom || b->n + more + 1 <= b->cap) return;
    size_t cap = b->cap ? b->cap : 1 << 16;
    while (cap < b->n + more + 1) cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p) {
        b->oom = true;
        return;
    }
    b->p = p;
    b->cap = cap;
}

static void sb_printf(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(sbuf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (k < 0) return;
    sb_reserve(b, (size_t)k);
    if (b->oom) return;
    va_start(ap, fmt);
    vsnprintf(b->p + b->n, b->cap - b->n, fmt, ap);
    va_end(ap);
    b->n += (size_t)k;
}

/* A JSON string: quotes, backslashes and control characters escaped (names are the model's own). */
static void sb_str(sbuf *b, const char *s) {
    sb_reserve(b, 2 + 6 * strlen(s));
    if (b->oom) return;
    char *o = b->p + b->n;
    *o++ = '"';
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        if (*c == '"' || *c == '\\') {
            *o++ = '\\';
            *o++ = (char)*c;
        } else if (*c < 0x20) {
            o += sprintf(o, "\\u%04x", *c);
        } else {
            *o++ = (char)*c;
        }
    }
    *o++ = '"';
    *o = 0;
    b->n = (size_t)(o - b->p);
}

static void sb_sep(sbuf *b) {
    if (b->n) sb_printf(b, ",\n");
}

static void sb_meta(sbuf *b, int pid, int tid, const char *what, const char *key, const char *sval, int64_t ival) {
    sb_sep(b);
    sb_printf(b, "{\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"name\":\"%s\",\"args\":{\"%s\":", pid, tid, what, key);
    if (sval)
        sb_str(b, sval);
    else
        sb_printf(b, "%lld", (long long)ival);
    sb_printf(b, "}}");
}

static zinc_status serialize(int pid, int64_t origin_ns, bool profiler_steps, char **out, size_t *len);

zinc_status ztrace_serialize(int pid, int64_t origin_ns, char **out, size_t *len) {
    return serialize(pid, origin_ns, false, out, len);
}

zinc_status ztrace_serialize_profiler(int pid, int64_t origin_ns, char **out, size_t *len) {
    return serialize(pid, origin_ns, true, out, len);
}

/* One recorded span as JSON events: the slice (none for a flow's end alone), its flow end, and in per-rank
 * profiler files the step's ProfilerStep slice. */
static void write_span(sbuf *b, int pid, int64_t origin_ns, bool profiler_steps, const span *s) {
    if (!s->flow_only) {
        sb_sep(b);
        sb_printf(b, "{\"ph\":\"X\",\"pid\":%d,\"tid\":%d,\"ts\":%.3f,\"dur\":%.3f,\"cat\":\"%s\",\"name\":", pid,
                  s->track, (double)(s->t0 - origin_ns) / 1e3, (double)(s->t1 - s->t0) / 1e3,
                  ztrace_cat_name((ztrace_cat)s->cat));
        bool module = s->cat == ZTRACE_FORWARD || s->cat == ZTRACE_BACKWARD || s->cat == ZTRACE_RECOMPUTE;
        if (module && profiler_steps) { /* per-rank files: "block0 forward", "block0 backward" */
            char nm[160];
            snprintf(nm, sizeof nm, "%s %s", s->name ? s->name : "?", ztrace_cat_name((ztrace_cat)s->cat));
            sb_str(b, nm);
        } else {
            sb_str(b, s->name ? s->name : "?");
        }
        /* the trace viewer colours by name, so a module's forward and backward share a colour: set
         * one per phase from its reserved colour names */
        if (module)
            sb_printf(b, ",\"cname\":\"%s\"",
                      s->cat == ZTRACE_FORWARD    ? "good"
                      : s->cat == ZTRACE_BACKWARD ? "rail_animation"
                                                  : "yellow");
        sb_printf(b, ",\"args\":{\"step\":%lld", (long long)s->step);
        if (module) {
            sb_printf(b, ",\"module\":");
            sb_str(b, s->name ? s->name : "?");
        }
        if (s->cat == ZTRACE_GPU) sb_printf(b, ",\"kind\":\"%s\"", ztrace_cat_name((ztrace_cat)s->kind));
        if (s->k1 && strcmp(s->k1, "step")) sb_printf(b, ",\"%s\":%lld", s->k1, (long long)s->v1);
        if (s->k2) sb_printf(b, ",\"%s\":%lld", s->k2, (long long)s->v2);
        sb_printf(b, "}}");
    }
    /* bound to the slice that starts at t0 on the same track (the one just written, or for a flow's end
     * alone one recorded earlier); ids per rank in the high bits, so that two ranks' flows never join */
    if (s->flow_dir) {
        sb_sep(b);
        sb_printf(b,
                  "{\"ph\":\"%s\",%s\"id\":%lld,\"pid\":%d,\"tid\":%d,\"ts\":%.3f,\"cat\":\"flow\","
                  "\"name\":\"flow\"}",
                  s->flow_dir == ZTRACE_FLOW_OUT ? "s" : "f", s->flow_dir == ZTRACE_FLOW_OUT ? "" : "\"bp\":\"e\",",
                  (long long)(((int64_t)pid << 32) + s->flow), pid, s->track, (double)(s->t0 - origin_ns) / 1e3);
    }
    if (profiler_steps && !s->flow_only && s->cat == ZTRACE_STEP) {
        sb_sep(b);
        sb_printf(b,
                  "{\"ph\":\"X\",\"pid\":%d,\"tid\":%d,\"ts\":%.3f,\"dur\":%.3f,\"cat\":\"user_"
                  "annotation\","
                  "\"name\":\"ProfilerStep#%lld\",\"args\":{\"step\":%lld}}",
                  pid, s->track, (double)(s->t0 - origin_ns) / 1e3, (double)(s->t1 - s->t0) / 1e3, (long long)s->step,
                  (long long)s->step);
    }
}

static zinc_status serialize(int pid, int64_t origin_ns, bool profiler_steps, char **out, size_t *len) {
    sbuf b = {0};
    char pname[32];
    snprintf(pname, sizeof pname, "rank %d", pid);
    pthread_mutex_lock(&R.lock);
    sb_meta(&b, pid, 0, "process_name", "name", pname, 0);
    sb_meta(&b, pid, 0, "process_sort_index", "sort_index", NULL, pid);
    for (int t = 1; t <= R.ntracks; t++) {
        sb_meta(&b, pid, t, "thread_name", "name", R.names[t], 0);
        sb_meta(&b, pid, t, "thread_sort_index", "sort_index", NULL, t);
    }
    for (int i = 0; i < R.nthreads; i++)
        for (const block *k = R.threads[i]->head; k; k = k->next) {
            int n = atomic_load_explicit(&k->n, memory_order_acquire);
            for (int j = 0; j < n; j++) write_span(&b, pid, origin_ns, profiler_steps, &k->ev[j]);
        }
    pthread_mutex_unlock(&R.lock);
    if (b.oom) {
        free(b.p);
        return ZERR(ZINC_ERR_NOMEM, "out of memory writing the trace's JSON text (%lld spans)",
                    (long long)ztrace_recorded());
    }
    if (!b.p) sb_reserve(&b, 1);
    if (!b.p) return ZERR(ZINC_ERR_NOMEM, "out of memory writing the trace's JSON text");
    b.p[b.n] = 0;
    *out = b.p;
    *len = b.n;
    return ZINC_OK;
}
