/* zinc launch: the rank count a restart runs on. A count is usable when the training command's config loads
 * there (by DeepSpeed's batch rules) with the starting count's train_batch_size and micro batch, so the
 * restarted job trains on the same global batch with gradient_accumulation_steps derived again, and the LR
 * schedule, which counts optimizer steps, goes on where the checkpoint left it. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/launch/launch.h"
#include "cli/train/train.h"
#include "base/config/config.h"
#include "zinc.h"

int zcli_launch_batch_read(char **cmd, int ncmd, int64_t ranks, zcli_launch_batch *b, char *err, size_t cap) {
    memset(b, 0, sizeof *b);
    /* zinc train's own table and defaults: --steps fills an "auto" total_num_steps as the job will */
    zcli_train_opts *t = malloc(sizeof *t);
    if (!t || zcli_train_read(1, ncmd, cmd, t)) {
        snprintf(err, cap, t ? "the training command's options are not valid (zinc train --help)" : "out of memory");
        free(t);
        return 1;
    }
    b->config = t->config;
    b->steps = t->steps;
    for (int i = 0; i < t->sets.n; i++) b->sets[i] = t->sets.v[i];
    free(t);
    if (!b->config) {
        snprintf(err, cap, "the training command has no --config FILE");
        return 1;
    }
    if (b->steps < 1) b->steps = 1;
    zinc_config *c = malloc(sizeof *c);
    if (!c) {
        snprintf(err, cap, "out of memory");
        return 1;
    }
    zcfg_load_opts lo = {.sets = b->sets, .run_steps = b->steps};
    int rc = 0;
    if (zcfg_load_file_ex(b->config, (int)ranks, &lo, NULL, c) != ZINC_OK) {
        snprintf(err, cap, "%s", zinc_last_error());
        rc = 1;
    } else {
        b->tb = c->train_batch_size;
        b->mb = c->train_micro_batch_size_per_gpu;
        b->start = ranks;
    }
    free(c);
    return rc;
}

static bool keeps_batch(const zcli_launch_batch *b, int64_t w) {
    if (w == b->start) return true;
    if (w > INT32_MAX) return false;
    zinc_config *c = malloc(sizeof *c);
    if (!c) return false;
    zcfg_load_opts lo = {.sets = b->sets, .run_steps = b->steps};
    bool ok = zcfg_load_file_ex(b->config, (int)w, &lo, NULL, c) == ZINC_OK && c->train_batch_size == b->tb &&
              c->train_micro_batch_size_per_gpu == b->mb;
    free(c);
    return ok;
}

/* "1, 2, 4, 8": the counts up to limit that keep the batch. */
static void usable_list(const zcli_launch_batch *b, int64_t limit, char *buf, size_t cap) {
    size_t n = 0;
    int shown = 0;
    buf[0] = 0;
    for (int64_t w = 1; w <= limit && n < cap; w++) {
        if (b->tb % w || !keeps_batch(b, w)) continue;
        int k = snprintf(buf + n, cap - n, "%s%" PRId64, shown ? ", " : "", w);
        if (k < 0) break;
        n += (size_t)k;
        if (++shown == 16) {
            if (n + 6 < cap) snprintf(buf + n, cap - n, ", ...");
            break;
        }
    }
    if (!shown) snprintf(buf, cap, "none");
}

int64_t zcli_launch_pick_world(const zcli_launch_batch *b, int64_t lo, int64_t hi, char *why, size_t cap) {
    char list[256];
    int64_t limit = hi > b->start ? hi : b->start;
    usable_list(b, limit, list, sizeof list);
    if (hi < lo) {
        snprintf(why, cap,
                 "only %" PRId64 " rank%s can run on the hosts left, fewer than --min-ranks %" PRId64
                 " (counts up to %" PRId64 " that keep train_batch_size %" PRId64 " with micro batch %" PRId64 ": %s)",
                 hi, hi == 1 ? "" : "s", lo, limit, b->tb, b->mb, list);
        return 0;
    }
    for (int64_t w = hi; w >= lo; w--) {
        if (b->tb % w || !keeps_batch(b, w)) continue;
        snprintf(why, cap,
                 "%" PRId64 " rank%s: the largest count from --min-ranks %" PRId64 " to %" PRId64
                 " (what the hosts left hold, at most -n) that keeps train_batch_size %" PRId64
                 " with micro batch %" PRId64 " (gradient_accumulation_steps %" PRId64 "; counts up to %" PRId64
                 " that keep it: %s)",
                 w, w == 1 ? "" : "s", lo, hi, b->tb, b->mb, b->tb / (b->mb * w), limit, list);
        return w;
    }
    snprintf(why, cap,
             "no rank count from --min-ranks %" PRId64 " to %" PRId64 " keeps train_batch_size %" PRId64
             " with micro batch %" PRId64 " (counts up to %" PRId64
             " that keep it: %s; give train_batch_size and the micro batch and leave "
             "gradient_accumulation_steps out so it is derived, or lower --min-ranks)",
             lo, hi, b->tb, b->mb, limit, list);
    return 0;
}
