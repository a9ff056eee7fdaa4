/* zinc mem measure's output (mem_measure.h): the rows and the process figures as JSON, CSV or tables. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/mem/mem_measure.h"

static const char note_rss[] =
    "real peak: VmHWM from /proc/self/status after the steps, less VmRSS before zinc_build (where VmHWM "
    "was reset there through /proc/self/clear_refs); the estimate of it is the host-memory bytes at the "
    "larger of the build (with the initialisation scratch) and the steps (with MPI's temporaries)";
static const char note_grads[] = "gradients are random (normal, 1e-3 x the loss scale), not a model's: the bytes "
                                 "depend only on the shapes and the config";

static const char *note_device(const meas_run *r) {
    if (zinc_device(r->e) == ZINC_DEVICE_CUDA)
        return "measured on the GPU: the engine's own counts; the device's count (cudaMemGetInfo) follows the table";
    if (!zinc_device_host_addressable(r->e))
        return "measured on the CPU presented as a discrete device (ZINC_CPU_DISCRETE=1): the GPU rows are what "
               "the engine would allocate on a GPU, without the CUDA context and runtime scratch";
    return "measured on the CPU (host memory); `zinc mem estimate --device cuda` predicts a GPU run, and "
           "`zinc mem measure --device cuda` measures one where a GPU is usable";
}

static json_int_t jint(json_t *o, const char *k) { return json_integer_value(json_object_get(o, k)); }
static int jtrue(json_t *o, const char *k) { return json_is_true(json_object_get(o, k)); }
static const char *jstr(json_t *o, const char *k) { return json_string_value(json_object_get(o, k)); }

static void print_json(const meas_run *r) {
    const mopts *o = r->o;
    const zest_estimate *est = &r->est;
    json_t *j =
        json_pack("{s:s, s:s, s:s, s:I, s:i, s:i, s:I, s:O, s:b, s:i, s:s, s:s}", "command", "measure", "model",
                  r->m->desc, "config", r->origin, "parameters", (json_int_t)mc_model_total(r->m), "ranks", r->world,
                  "stage", est->stage, "steps", (json_int_t)o->steps, "rows", r->rows, "ranks_differ", r->ranks_differ,
                  "mismatches", r->bad, "note_gradients", note_grads, "note_device", note_device(r));
    json_object_set_new(j, "process",
                        json_pack("{s:I, s:I, s:I, s:s, s:I, s:i, s:I, s:I, s:i, s:i, s:O, s:i, s:i, s:s}", "estimate",
                                  (json_int_t)r->rss_est, "init_scratch", (json_int_t)est->init_scratch,
                                  "init_scratch_whole", (json_int_t)est->init_scratch_whole, "init",
                                  o->init_whole ? "whole" : "ranged", "comm_temp", (json_int_t)est->comm_temp,
                                  "comm_pending", est->comm_pending, "comm_piece", (json_int_t)est->comm_piece,
                                  "allowed_diff", (json_int_t)r->rss_allow, "tolerance_pct", (int)o->rss_tol_pct,
                                  "slack_mib", (int)o->rss_slack_mib, "ranks", r->prow, "outside_tolerance", r->rss_bad,
                                  "unknown", r->rss_unknown, "note", note_rss));
    char *s = json_dumps(j, JSON_INDENT(2));
    if (s) printf("%s\n", s);
    free(s);
    json_decref(j);
}

static void print_csv(const meas_run *r) {
    size_t i;
    json_t *x;
    printf("kind,category,model_state,estimate,measured,diff,match\n");
    json_array_foreach(r->rows, i, x) {
        printf("%s,%s,%d,%" JSON_INTEGER_FORMAT ",%" JSON_INTEGER_FORMAT ",%" JSON_INTEGER_FORMAT ",%d\n",
               jstr(x, "kind"), jstr(x, "category"), jtrue(x, "model_state"), jint(x, "estimate"), jint(x, "measured"),
               jint(x, "diff"), jtrue(x, "match"));
    }
    json_array_foreach(r->prow, i, x) {
        int rk = (int)jint(x, "rank");
        printf("process,rank%d_baseline,0,,%" JSON_INTEGER_FORMAT ",,%d\n", rk, jint(x, "baseline"), jtrue(x, "known"));
        printf("process,rank%d_vmhwm_less_baseline,0,%" JSON_INTEGER_FORMAT ",%" JSON_INTEGER_FORMAT
               ",%" JSON_INTEGER_FORMAT ",%d\n",
               rk, jint(x, "estimate"), jint(x, "growth"), jint(x, "diff"), jtrue(x, "within"));
    }
}

static void print_head(const meas_run *r) {
    const zest_estimate *est = &r->est;
    int64_t steps = r->o->steps, micro = zinc_grad_accum_steps(r->e);
    char n1[32];
    printf("model:  %s: %s parameters in %d tensors, %d modules\n", r->m->desc,
           mc_commas(mc_model_total(r->m), n1, sizeof n1), r->m->n, r->m->nmodules);
    printf("config: %s: ZeRO stage %d, %s, offload_optimizer %s; %d rank%s, %" PRId64 " step%s of %" PRId64
           " micro-step%s (%" PRId64 " taken)\n",
           r->origin, est->stage, zinc_dtype_name(est->compute_dtype), mc_offload_name(est->offload), r->world,
           r->world == 1 ? "" : "s", steps, steps == 1 ? "" : "s", micro, micro == 1 ? "" : "s", r->info.steps_taken);
    printf("note:   %s\nnote:   %s\n\n", note_grads, note_device(r));
    printf("Per rank, peak bytes (measured: the largest over the %d rank%s):\n", r->world, r->world == 1 ? "" : "s");
    printf("%-7s %-32s %14s %14s %14s  %s\n", "kind", "category", "estimate", "measured", "diff", "");
}

/* The kind and category indices of a row. */
static void row_index(json_t *x, int *k, int *c) {
    for (*k = 0; *k < ZINC_MEMKIND_COUNT; ++*k)
        if (!strcmp(zinc_mem_kind_name((zinc_mem_kind)*k), jstr(x, "kind"))) break;
    for (*c = 0; *c < ZINC_MEM_CATEGORY_COUNT; ++*c)
        if (!strcmp(zinc_mem_category_name((zinc_mem_category)*c), jstr(x, "category"))) break;
}

static void print_rows(const meas_run *r) {
    bool exact = r->o->exact;
    uint64_t te[ZINC_MEMKIND_COUNT] = {0}, tm[ZINC_MEMKIND_COUNT] = {0};
    size_t i;
    json_t *x;
    json_array_foreach(r->rows, i, x) {
        char a[32], b[32], d[48], lab[64];
        int k, c;
        row_index(x, &k, &c);
        mc_cat_label(&r->est, c, lab, sizeof lab);
        mc_human(a, sizeof a, (uint64_t)jint(x, "estimate"), exact);
        mc_human(b, sizeof b, (uint64_t)jint(x, "measured"), exact);
        mc_shuman(d, sizeof d, jint(x, "diff"), exact);
        printf("%-7s %-32s %14s %14s %14s  %s\n", mc_kind_title(k), lab, a, b, d,
               jtrue(x, "match") ? (jint(x, "diff") ? "ok (bound)" : "exact") : "DIFFERS");
        te[k] += (uint64_t)jint(x, "estimate");
        tm[k] += (uint64_t)jint(x, "measured");
    }
    for (int k = 0; k < ZINC_MEMKIND_COUNT; k++) {
        if (!te[k] && !tm[k]) continue;
        char a[32], b[32], d[48];
        uint64_t pk = 0;
        for (int q = 0; q < r->world; q++)
            if (r->all[q].peak_total[k] > pk) pk = r->all[q].peak_total[k];
        mc_human(a, sizeof a, r->est.total[k], exact);
        mc_human(b, sizeof b, pk, exact);
        mc_shuman(d, sizeof d, (int64_t)pk - (int64_t)r->est.total[k], exact);
        printf("%-7s %-32s %14s %14s %14s\n", mc_kind_title(k), "total", a, b, d);
    }
}

/* cudaMemGetInfo counts the whole GPU (other processes too) and the allocator's pools. */
static void print_device(const meas_run *r) {
    const zinc_memory_report *before = &r->before, *after = &r->after;
    if (!after->device_total_bytes) return;
    char a[32], b[32], d[48];
    bool exact = r->o->exact;
    uint64_t grew =
        after->device_used_bytes > before->device_used_bytes ? after->device_used_bytes - before->device_used_bytes : 0;
    mc_human(a, sizeof a, grew, exact);
    mc_human(b, sizeof b, after->current_total[ZINC_MEMKIND_DEVICE], exact);
    mc_shuman(d, sizeof d, (int64_t)grew - (int64_t)after->current_total[ZINC_MEMKIND_DEVICE], exact);
    printf("%-7s %-32s %14s %14s %14s  (rank 0: the device's own count of the growth since before build, "
           "against the engine's current device bytes)\n",
           "GPU", "cudaMemGetInfo", b, a, d);
}

static void print_process(const meas_run *r) {
    const zest_estimate *est = &r->est;
    bool exact = r->o->exact;
    char ea[32], eb[32], ec[32];
    mc_human(ea, sizeof ea, r->rss_est, exact);
    mc_human(eb, sizeof eb, est->init_scratch, exact);
    mc_human(ec, sizeof ec, est->comm_temp, exact);
    printf("\nProcess resident memory (rank by rank): estimate %s = host bytes above at their peak, with "
           "%s of %s initialisation scratch at build and %s of MPI temporaries (%d piece%s of %" PRId64
           " elements in flight) in the steps\n",
           ea, eb, r->o->init_whole ? "whole-tensor" : "ranged", ec, est->comm_pending,
           est->comm_pending == 1 ? "" : "s", est->comm_piece);
    printf("%-5s %14s %14s %14s %14s %14s %8s\n", "rank", "baseline", "VmHWM", "real growth", "estimate", "diff",
           "diff %");
    size_t i;
    json_t *x;
    json_array_foreach(r->prow, i, x) {
        char a[32], b[32], c[32], d[48];
        mc_human(a, sizeof a, (uint64_t)jint(x, "baseline"), exact);
        mc_human(b, sizeof b, (uint64_t)jint(x, "vmhwm"), exact);
        mc_human(c, sizeof c, (uint64_t)jint(x, "growth"), exact);
        mc_shuman(d, sizeof d, jint(x, "diff"), exact);
        if (!jtrue(x, "known"))
            printf("%-5d %14s  (/proc/self/status not readable)\n", (int)jint(x, "rank"), "?");
        else
            printf("%-5d %14s %14s %14s %14s %14s %7.1f%%%s\n", (int)jint(x, "rank"), a, b, c, ea, d,
                   json_real_value(json_object_get(x, "diff_pct")),
                   jtrue(x, "peak_reset") ? "" : "  (VmHWM not reset: includes earlier peaks)");
    }
    printf("note:   %s\n", note_rss);
}

void mc_measure_print(const meas_run *r) {
    if (r->o->json || r->o->csv) {
        if (r->o->json)
            print_json(r);
        else
            print_csv(r);
        return;
    }
    print_head(r);
    print_rows(r);
    print_device(r);
    print_process(r);
    printf("\n%s; every rank %s; real peaks %s (tolerance %d%% + %d MiB).\n",
           r->bad ? "SOME ROWS DIFFER from the estimate" : "every row matches the estimate",
           r->ranks_differ ? "did NOT measure the same bytes" : "measured the same bytes",
           r->rss_unknown ? "UNKNOWN on some ranks"
           : r->rss_bad   ? "OUTSIDE the tolerance on some ranks"
                          : "within tolerance",
           (int)r->o->rss_tol_pct, (int)r->o->rss_slack_mib);
}
