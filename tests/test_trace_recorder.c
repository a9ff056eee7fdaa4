/* The timeline recorder (base/core/trace.h) and zinc_options.trace_path through the public API: spans
 * from several threads land on their own tracks; the process-wide cap drops spans (counted) and never
 * grows; names are escaped into valid JSON; the step window gates recording; a second start is refused;
 * flows from a collective's issue to its wait; the options' errors; a traced MLP run writes a parseable file;
 * tracing off records nothing. */
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/core/trace.h"
#include "engine_util.h"
#include "zt.h"

#define THREADS 4
#define PER_THREAD 1000

static void *record_many(void *arg) {
    char name[16];
    snprintf(name, sizeof name, "worker %d", (int)(intptr_t)arg);
    ztrace_thread_name(name);
    for (int i = 0; i < PER_THREAD; i++) {
        int64_t t0 = ztrace_begin();
        ztrace_span(t0, ZTRACE_ENGINE, "work", 0, "i", i, NULL, 0);
    }
    return NULL;
}

static json_t *parse_events(int pid) {
    char *text = NULL;
    size_t n = 0;
    ZT_OK(ztrace_serialize(pid, 0, &text, &n));
    if (!text) return NULL;
    size_t cap = n + 32;
    char *doc = malloc(cap);
    snprintf(doc, cap, "[%s]", text);
    json_error_t err;
    json_t *j = json_loads(doc, 0, &err);
    ZT_CHECK(j != NULL, "the recorder's JSON does not parse: %s at %d", err.text, err.position);
    free(doc);
    free(text);
    return j;
}

static void test_threads_and_cap(void) {
    /* 3 blocks of 1024 spans for the process: 3 of the 4 threads get one each, the 4th none */
    ZT_OK(ztrace_start((ztrace_window){1, 2}, 3 * 1024));
    ZT_ERR(ztrace_start((ztrace_window){1, 2}, 0), ZINC_ERR_STATE, "already on");
    pthread_t th[THREADS];
    for (int i = 0; i < THREADS; i++) pthread_create(&th[i], NULL, record_many, (void *)(intptr_t)i);
    for (int i = 0; i < THREADS; i++) pthread_join(th[i], NULL);
    ZT_CHECK(ztrace_recorded() == 3 * PER_THREAD, "recorded %lld, want %d", (long long)ztrace_recorded(),
             3 * PER_THREAD);
    ZT_CHECK(ztrace_dropped() == PER_THREAD, "dropped %lld, want %d", (long long)ztrace_dropped(), PER_THREAD);
    json_t *ev = parse_events(3);
    int spans = 0, tracks = 0;
    size_t i;
    json_t *e;
    json_array_foreach(ev, i, e) {
        const char *ph = json_string_value(json_object_get(e, "ph"));
        if (ph && !strcmp(ph, "X")) spans++;
        if (ph && !strcmp(ph, "M") && !strcmp(json_string_value(json_object_get(e, "name")), "thread_name") &&
            !strncmp(json_string_value(json_object_get(json_object_get(e, "args"), "name")), "worker ", 7))
            tracks++;
        ZT_CHECK(json_integer_value(json_object_get(e, "pid")) == 3, "pid");
    }
    ZT_CHECK(spans == 3 * PER_THREAD, "%d spans in the JSON", spans);
    ZT_CHECK(tracks == THREADS, "%d worker tracks named", tracks);
    json_decref(ev);
    ztrace_reset();
}

static void test_escaping_and_window(void) {
    static const char weird[] = "a \"quoted\" \\ name\nwith\ta \x01 control";
    ZT_OK(ztrace_start((ztrace_window){2, 3}, 0));
    ZT_CHECK(!ztrace_active(), "recording at step 1 outside the window 2:3");
    ztrace_span(ztrace_begin(), ZTRACE_ENGINE, "before", 0, NULL, 0, NULL, 0);
    ztrace_set_step(2);
    ZT_CHECK(ztrace_active(), "not recording at step 2");
    int64_t t0 = ztrace_begin();
    ztrace_set_step(4); /* a span begun inside the window and ended after it is kept */
    ztrace_span(t0, ZTRACE_FORWARD, weird, 0, "bytes", 7, NULL, 0);
    ZT_CHECK(ztrace_begin() == 0, "a span begins after the window");
    ztrace_span(ztrace_begin_always(), ZTRACE_CHECKPOINT, "save", 0, NULL, 0, NULL, 0);
    ZT_CHECK(ztrace_recorded() == 2, "recorded %lld spans, want 2", (long long)ztrace_recorded());
    json_t *ev = parse_events(0);
    size_t i;
    json_t *e;
    int found = 0;
    json_array_foreach(ev, i, e) {
        const char *name = json_string_value(json_object_get(e, "name"));
        if (name && !strcmp(name, weird)) {
            found++;
            json_t *args = json_object_get(e, "args");
            ZT_CHECK(json_integer_value(json_object_get(args, "bytes")) == 7, "args.bytes");
            ZT_CHECK(!strcmp(json_string_value(json_object_get(args, "module")), weird), "args.module");
            ZT_CHECK(!strcmp(json_string_value(json_object_get(e, "cat")), "forward"), "cat");
        }
        ZT_CHECK(!name || strcmp(name, "before"), "a span outside the window was kept");
    }
    ZT_CHECK(found == 1, "the escaped name came back %d times", found);
    json_decref(ev);
    ztrace_reset();
    ZT_CHECK(!ztrace_active() && ztrace_recorded() == 0, "reset");
}

/* Flows: a collective's span on its own track (the issue) and the wait for it on the caller's, one id; the
 * flow start bound to the first (its track, its start), the end ("bp":"e") to the second; ids of two ranks
 * never equal; no flow without an id. */
static void test_flows(void) {
    ZT_CHECK(ztrace_flow_id() == 0, "a flow id with tracing off");
    ZT_OK(ztrace_start((ztrace_window){1, 2}, 0));
    int track = ztrace_track("comm test");
    int64_t issue = ztrace_begin(), flow = ztrace_flow_id();
    ZT_CHECK(flow > 0 && ztrace_flow_id() != flow, "flow ids %lld: want distinct, > 0", (long long)flow);
    int64_t w0 = ztrace_begin();
    ztrace_span_flow(w0, ZTRACE_WAIT, "reduce_scatter", 0, "bytes", 8, NULL, 0, flow, ZTRACE_FLOW_IN);
    ztrace_span_flow(issue, ZTRACE_COMM, "reduce_scatter", track, "bytes", 8, NULL, 0, flow, ZTRACE_FLOW_OUT);
    ztrace_span_flow(ztrace_begin(), ZTRACE_WAIT, "no flow", 0, NULL, 0, NULL, 0, 0, ZTRACE_FLOW_IN);
    for (int pid = 0; pid < 2; pid++) {
        json_t *ev = parse_events(pid);
        size_t i;
        json_t *e;
        double wait_ts = -1, comm_ts = -1, s_ts = -2, f_ts = -2;
        int64_t s_id = -1, f_id = -2, comm_tid = -1, wait_tid = -1, s_tid = -3, f_tid = -4, nflow = 0;
        json_array_foreach(ev, i, e) {
            const char *ph = json_string_value(json_object_get(e, "ph")), *cat = json_string_value(json_object_get(e, "cat"));
            double ts = json_number_value(json_object_get(e, "ts"));
            int64_t tid = json_integer_value(json_object_get(e, "tid")), id = json_integer_value(json_object_get(e, "id"));
            if (!strcmp(ph, "X") && !strcmp(cat, "wait") && !strcmp(json_string_value(json_object_get(e, "name")), "reduce_scatter"))
                wait_ts = ts, wait_tid = tid;
            if (!strcmp(ph, "X") && !strcmp(cat, "comm")) comm_ts = ts, comm_tid = tid;
            if (!strcmp(ph, "s")) s_ts = ts, s_id = id, s_tid = tid, nflow++;
            if (!strcmp(ph, "f")) {
                f_ts = ts, f_id = id, f_tid = tid, nflow++;
                const char *bp = json_string_value(json_object_get(e, "bp"));
                ZT_CHECK(bp && !strcmp(bp, "e"), "the flow's end binds to its enclosing span (\"bp\":\"e\")");
            }
            if (ph[0] == 's' || ph[0] == 'f') ZT_CHECK(cat && !strcmp(cat, "flow"), "a flow event's cat");
        }
        ZT_CHECK(nflow == 2, "%lld flow events, want 2 (one start, one end)", (long long)nflow);
        ZT_CHECK(s_id == f_id && s_id == ((int64_t)pid << 32) + flow, "flow ids %lld, %lld (rank %d)", (long long)s_id,
                 (long long)f_id, pid);
        ZT_CHECK(s_ts == comm_ts && s_tid == comm_tid && s_tid == track, "the flow starts at the issue's span");
        ZT_CHECK(f_ts == wait_ts && f_tid == wait_tid && f_tid != track, "the flow ends at the wait's span");
        json_decref(ev);
    }
    ztrace_reset();
}

static zt_logcap quiet_log_cap = {.echo = ZINC_LOG_ERROR, .echo_all_ranks = 1};

static zinc_status create(const char *path, int64_t first, int64_t last, int replace, zinc_engine **e) {
    static char cfg[8192];
    eu_run r = {.stage = 2, .dtype = ZINC_FP32};
    eu_config(&r, cfg, sizeof cfg);
    zinc_options o = zinc_default_options();
    o.config_json = cfg;
    o.device = ZINC_DEVICE_CPU;
    o.log_fn = zt_logcap_fn;
    o.log_userdata = &quiet_log_cap;
    o.cpu_threads = 2;
    o.trace_path = path;
    o.trace_first_step = first;
    o.trace_last_step = last;
    o.trace_replace = replace;
    return zinc_create(&o, e);
}

static void test_options(void) {
    char path[4096], dir[4200];
    snprintf(path, sizeof path, "%s/trace_recorder.json", zt_build_dir());
    unlink(path);
    zinc_engine *e = NULL;
    zinc_options o = zinc_default_options();
    ZT_CHECK(o.trace_path == NULL && o.trace_first_step == 1 && o.trace_last_step == 5 && o.trace_replace == 0,
             "zinc_default_options' trace fields");
    ZT_ERR(create("", 1, 5, 0, &e), ZINC_ERR_INVALID_ARG, "trace_path is empty");
    ZT_ERR(create(path, 0, 5, 0, &e), ZINC_ERR_INVALID_ARG, "1 <= first <= last");
    ZT_ERR(create(path, 3, 2, 0, &e), ZINC_ERR_INVALID_ARG, "3:2");
    ZT_ERR(create(path, 1, 5, 2, &e), ZINC_ERR_INVALID_ARG, "trace_replace 2");
    snprintf(dir, sizeof dir, "%s/no/such/dir/t.json", zt_build_dir());
    ZT_ERR(create(dir, 1, 5, 0, &e), ZINC_ERR_IO, "no/such/dir");
    ZT_CHECK(!ztrace_active() && !atomic_load(&ztrace_enabled), "a refused engine left tracing on");

    /* a traced run: steps 2..3 of 4, written when step 3 ends */
    ZT_OK(create(path, 2, 3, 0, &e));
    zinc_engine *second = NULL;
    ZT_OK(create(NULL, 1, 5, 0, &second));
    zinc_destroy(second); /* an untraced engine next to a traced one is fine ... */
    second = NULL;
    char other[4200];
    snprintf(other, sizeof other, "%s/trace_recorder2.json", zt_build_dir());
    ZT_ERR(create(other, 1, 5, 0, &second), ZINC_ERR_STATE, "already on"); /* ... a second traced one is not */
    mlp_config mc = eu_model();
    mlp_model *m = NULL;
    ZT_OK(mlp_create(e, &mc, &m));
    ZT_ERR(zinc_trace_end(e, 1, "bogus", "x"), ZINC_ERR_INVALID_ARG, "bogus");
    for (int s = 0; s < 4; s++) {
        ZT_OK(mlp_train_step(m, s, NULL, NULL));
        ZT_CHECK((access(path, F_OK) == 0) == (s >= 2), "after step %d the file %s", s + 1,
                 s >= 2 ? "is missing" : "exists already");
    }
    mlp_destroy(m);
    zinc_destroy(e);
    json_error_t err;
    json_t *j = json_load_file(path, 0, &err);
    ZT_CHECK(j != NULL, "%s does not parse: %s (line %d)", path, err.text, err.line);
    json_t *ev = json_object_get(j, "traceEvents");
    size_t i;
    json_t *x;
    int steps = 0, fwd = 0;
    json_array_foreach(ev, i, x) {
        const char *cat = json_string_value(json_object_get(x, "cat"));
        if (cat && !strcmp(cat, "step")) steps++;
        if (cat && !strcmp(cat, "forward")) fwd++;
    }
    ZT_CHECK(steps == 2, "%d step spans, want 2 (steps 2..3)", steps);
    ZT_CHECK(fwd > 0, "no forward spans");
    json_decref(j);
    ZT_ERR(create(path, 1, 5, 0, &e), ZINC_ERR_IO, "already exists");
    ZT_OK(create(path, 1, 5, 1, &e)); /* trace_replace */
    zinc_destroy(e);                  /* nothing recorded: a file with no spans, still valid */
    j = json_load_file(path, 0, &err);
    ZT_CHECK(j != NULL, "an empty run's trace does not parse: %s", err.text);
    json_decref(j);

    /* tracing off: nothing is recorded at all */
    ZT_OK(create(NULL, 1, 5, 0, &e));
    ZT_OK(mlp_create(e, &mc, &m));
    ZT_OK(mlp_train_step(m, 0, NULL, NULL));
    ZT_CHECK(ztrace_recorded() == 0 && !ztrace_active(), "spans recorded with tracing off");
    ZT_CHECK(zinc_trace_begin(e) == 0, "zinc_trace_begin without a trace");
    mlp_destroy(m);
    zinc_destroy(e);
}

int main(void) {
    zt_name = "trace_recorder";
    test_threads_and_cap();
    test_escaping_and_window();
    test_flows();
    test_options();
    return zt_finish();
}
