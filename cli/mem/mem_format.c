/* zinc mem: byte counts and labels for the tables. */
#include <ctype.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/mem/mem_cli.h"
#include "base/core/bytes.h"

/* ---------------------------------------------------------------- formatting */

void mc_human(char *buf, size_t cap, uint64_t b, bool exact) {
    if (exact)
        snprintf(buf, cap, "%" PRIu64, b);
    else if (b == 0)
        snprintf(buf, cap, "-");
    else
        zbytes_format(buf, cap, b);
}

/* For sentences: never "-". */
void mc_prose(char *buf, size_t cap, uint64_t b, bool exact) {
    if (b == 0)
        snprintf(buf, cap, "0 B");
    else
        mc_human(buf, cap, b, exact);
}

/* 1557611200 -> "1,557,611,200" */
const char *mc_commas(int64_t v, char *buf, size_t cap) {
    char t[32];
    int n = snprintf(t, sizeof t, "%" PRId64, v < 0 ? -v : v), o = 0;
    if (v < 0 && o + 1 < (int)cap) buf[o++] = '-';
    for (int i = 0; i < n && o + 2 < (int)cap; i++) {
        buf[o++] = t[i];
        if ((n - i - 1) % 3 == 0 && i < n - 1) buf[o++] = ',';
    }
    buf[o] = 0;
    return buf;
}

void mc_shuman(char *buf, size_t cap, int64_t d, bool exact) {
    char t[32];
    mc_human(t, sizeof t, (uint64_t)(d < 0 ? -d : d), exact);
    snprintf(buf, cap, "%s%s", d == 0 ? "" : d < 0 ? "-" : "+", d == 0 ? "0" : t);
}

const char *mc_offload_name(zcfg_offload_device d) {
    return d == ZOFFLOAD_CPU ? "cpu" : d == ZOFFLOAD_NVME ? "nvme" : "none";
}

void mc_cat_label(const zest_estimate *e, int c, char *buf, size_t cap) {
    switch (c) {
    case ZINC_MEM_PARAMS:
        snprintf(buf, cap, "params (%s%s)", zinc_dtype_name(e->compute_dtype),
                 e->stage == 3 ? (e->npersistent ? " shard+persistent" : " shard") : "");
        break;
    case ZINC_MEM_GRADS:
        snprintf(buf, cap, "grads (%s)",
                 e->stage == 0   ? zinc_dtype_name(e->grad_dtype)
                 : e->stage == 1 ? "full + fp32 shard"
                                 : "fp32 shard");
        break;
    case ZINC_MEM_MASTER: snprintf(buf, cap, "master (fp32)"); break;
    case ZINC_MEM_EXP_AVG: snprintf(buf, cap, "exp_avg (m)"); break;
    case ZINC_MEM_EXP_AVG_SQ: snprintf(buf, cap, "exp_avg_sq (v)"); break;
    case ZINC_MEM_BUCKETS: snprintf(buf, cap, "reduce buckets"); break;
    case ZINC_MEM_GATHER: snprintf(buf, cap, "gather+prefetch"); break;
    case ZINC_MEM_STAGING: snprintf(buf, cap, "staging"); break;
    default: snprintf(buf, cap, "other (decay mask)"); break;
    }
}

const char *mc_kind_title(int k) {
    static const char *t[] = {"GPU", "host", "pinned", "NVMe"};
    return t[k];
}
