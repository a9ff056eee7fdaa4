/* zinc mem estimate: why zinc's bytes differ from DeepSpeed's estimators', a topic and a sentence each, for
 * the tables, the JSON and the CSV alike (docs/mem.md). */
#include <inttypes.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/mem/mem_cli.h"

/* One difference from DeepSpeed's estimate: a topic and a sentence. */
static void why_add(json_t *arr, const char *topic, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void why_add(json_t *arr, const char *topic, const char *fmt, ...) {
    char text[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    json_array_append_new(arr, json_pack("{s:s, s:s}", "topic", topic, "text", text));
}

/* The differences in where the state lives: offload, the mask and scratch, the host, the padding. */
static void why_placement(json_t *w, const variant *v, const mopts *o, int gpn, bool off_param) {
    const zest_estimate *e = &v->est;
    char a[32], b[32];
    zinc_mem_kind ck = e->device == ZINC_DEVICE_CUDA ? ZINC_MEMKIND_DEVICE : ZINC_MEMKIND_HOST;
    if (e->offload != ZOFFLOAD_NONE)
        why_add(w, "offload",
                "Offload: DeepSpeed's GPU figure keeps fp16 parameters (2 bytes per parameter%s) on the GPU; zinc "
                "also keeps its gradient shard and buckets there and puts only master, m and v in host "
                "memory.",
                e->stage == 3 ? " per rank" : "");
    if (off_param)
        why_add(w, "offload_param",
                e->stage == 3
                    ? "offload_param: DeepSpeed's ZeRO-3 estimator moves the parameters to the CPU; zinc offloads "
                      "parameter shards only to NVMe and only on the cpu device (offload_param.device \"nvme\"), so "
                      "its GPU figure does not shrink."
                    : "offload_param has no effect below stage 3 (DeepSpeed applies it only to ZeRO-3; zinc drops it), "
                      "so neither figure changes.");
    mc_prose(a, sizeof a, e->bytes[ck][ZINC_MEM_OTHER], o->exact);
    mc_prose(b, sizeof b, e->bytes[ck][ZINC_MEM_STAGING], o->exact);
    why_add(w, "mask_scratch",
            "Mask and scratch: zinc counts its weight-decay mask (%s, one byte per 8 own elements)%s%s; DeepSpeed "
            "counts "
            "neither.",
            a, e->bytes[ck][ZINC_MEM_STAGING] ? " and its device scratch and staging " : "",
            e->bytes[ck][ZINC_MEM_STAGING] ? b : "");
    mc_prose(a, sizeof a, v->ds.cpu_bytes, o->exact);
    uint64_t host = e->total[ZINC_MEMKIND_HOST] + e->total[ZINC_MEMKIND_PINNED];
    mc_prose(b, sizeof b, host * (uint64_t)gpn, o->exact);
    why_add(w, "host",
            "Host: DeepSpeed's CPU figure (%s per node%s) is mostly the model each rank loads before partitioning, "
            "times additional_buffer_factor 1.5%s; zinc builds the parameters in place and counts what stays: "
            "%s per node of %d rank%s%s.",
            a, e->stage == 3 ? ", with zero_init" : "",
            e->offload != ZOFFLOAD_NONE ? ", plus the offloaded optimizer state" : "", b, gpn, gpn == 1 ? "" : "s",
            e->offload == ZOFFLOAD_CPU    ? " (master, m and v in host memory)"
            : e->offload == ZOFFLOAD_NVME ? " (the NVMe swap buffers)"
                                          : "");
    why_add(w, "padding",
            "Padding: zinc aligns every tensor to 8 elements and every shard to 64; DeepSpeed divides P by G "
            "exactly. Neither estimator counts activations.");
}

/* Why zinc's numbers differ from DeepSpeed's for one variant, as a list every output format carries. */
json_t *mc_why_list(const variant *v, const mopts *o, int64_t P, int64_t L, int G, int gpn, bool off_param) {
    json_t *w = json_array();
    const zest_estimate *e = &v->est;
    char a[32], b[32], c[32], n1[32], n2[32];
    if (!v->valid) return w;
    if (!v->ds.available) {
        why_add(w, "no_estimator", "DeepSpeed has no estimator for %s; zinc's numbers are the only ones.",
                e->stage == 0 ? "stage 0" : "NVMe offload");
        return w;
    }
    zinc_mem_kind ck = e->device == ZINC_DEVICE_CUDA ? ZINC_MEMKIND_DEVICE : ZINC_MEMKIND_HOST;
    mc_prose(a, sizeof a, v->ds.gpu_bytes, o->exact);
    mc_prose(b, sizeof b, e->total[ck], o->exact);
    why_add(w, "totals", "DeepSpeed says %s per GPU (%s), zinc %s per rank on the %s, for P = %s, L = %s, G = %d.", a,
            v->ds.function, b, ck == ZINC_MEMKIND_DEVICE ? "GPU" : "host (--device cpu)", mc_commas(P, n1, sizeof n1),
            mc_commas(L, n2, sizeof n2), G);
    mc_prose(a, sizeof a, e->bytes[ck][ZINC_MEM_BUCKETS], o->exact);
    why_add(w, "buckets",
            "Buckets: DeepSpeed leaves out its reduce/ipg buckets; zinc counts its %d x %s-element bucket%s: %s.",
            e->nbuckets, mc_commas(e->bucket_cap, n1, sizeof n1), e->nbuckets == 1 ? "" : "s", a);
    if (e->compute_dtype == ZINC_FP32 || e->grad_dtype == ZINC_FP32)
        why_add(w, "dtype",
                "Dtypes: DeepSpeed's formulas count 2 bytes per parameter and gradient (fp16) whatever the config; "
                "this config keeps %s parameters and %s gradients (%zu and %zu bytes).",
                zinc_dtype_name(e->compute_dtype), zinc_dtype_name(e->grad_dtype), zinc_dtype_size(e->compute_dtype),
                zinc_dtype_size(e->grad_dtype));
    if (e->stage <= 2 && e->offload == ZOFFLOAD_NONE)
        why_add(w, "gradients",
                "Gradients: DeepSpeed's 18 bytes per partitioned parameter are 2 (fp16 grads) + 4 (fp32 grads) + 4 "
                "(fp32 params) + 8 (m, v); zinc keeps %s gradients and %d bytes of optimizer state per own "
                "element%s.",
                e->stage == 2 ? "only the 4-byte fp32 shard of the"
                              : "the full compute-dtype buffer and the fp32 shard of the",
                4 * e->state_tensors, e->state_tensors > 2 ? "" : " (Lion: master and m, no v)");
    if (e->stage == 1 && e->offload != ZOFFLOAD_NONE) {
        mc_prose(a, sizeof a, e->bytes[ck][ZINC_MEM_GRADS], o->exact);
        why_add(w, "stage1_offload_grads",
                "Stage 1 with offload: DeepSpeed's ZeRO-2 formula partitions the gradients; "
                "zinc's stage 1 keeps the whole %s gradient buffer and the fp32 shard on the "
                "GPU (%s), since only stage 2 shards gradients.",
                zinc_dtype_name(e->grad_dtype), a);
    }
    if (e->stage == 3) {
        mc_prose(a, sizeof a, (uint64_t)(4 * L), o->exact);
        mc_prose(b, sizeof b, e->bytes[ck][ZINC_MEM_GATHER], o->exact);
        mc_prose(c, sizeof c, (uint64_t)e->persistent_numel * zinc_dtype_size(e->compute_dtype), o->exact);
        why_add(w, "gather",
                "Gathered parameters: DeepSpeed allows 4L = %s (the largest layer's fp16 parameters and gradients); "
                "zinc's gather "
                "schedule peaks at %s, plus %s of persistent modules, because modules reused within "
                "stage3_max_reuse_distance stay gathered and prefetch runs ahead.",
                a, b, c);
    }
    why_placement(w, v, o, gpn, off_param);
    return w;
}

void mc_print_why(const variant *v, const mopts *o, int64_t P, int64_t L, int G, int gpn, bool off_param) {
    printf("\nWhy DeepSpeed's estimate differs (its estimate_zero2/3_model_states_mem_needs, DeepSpeed 0.19; "
           "docs/mem.md):\n");
    json_t *w = mc_why_list(v, o, P, L, G, gpn, off_param);
    size_t i;
    json_t *x;
    json_array_foreach(w, i, x) printf("  - %s\n", json_string_value(json_object_get(x, "text")));
    json_decref(w);
}
