/* Checkpoint agreement: every rank uses rank 0's tag under checkpoint.tag_validation, and one writer per
 * folder (node-local storage: one per node). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/checkpoint/checkpoint_internal.h"
#include "runtime/engine/engine_internal.h"
#include "base/core/error.h"

bool zckpt_is_dir_writer(const zinc_engine *e) {
    if (e->cfg.checkpoint.use_node_local_storage) return e->comm->local_rank == 0;
    return e->rank == 0;
}

zinc_status zckpt_agree_string(zinc_engine *e, const char *mine, char *out, size_t cap, const char *what) {
    zinc_status st = ZINC_OK;
    char *root = NULL;
    uint8_t *diff = NULL, me;
    if (strlen(mine) >= ZCKPT_PATH_MAX || strlen(mine) >= cap)
        return ZERR(ZINC_ERR_INVALID_ARG, "checkpoint %s \"%.64s...\" is too long", what, mine);
    if (e->world == 1) {
        snprintf(out, cap, "%s", mine);
        return ZINC_OK;
    }
    TRY_ALLOC(root, ZCKPT_PATH_MAX, "the checkpoint tag");
    TRY_ALLOC(diff, e->world, "the checkpoint tag");
    if (e->rank == 0) snprintf(root, ZCKPT_PATH_MAX, "%s", mine);
    TRY(zcomm_bcast(e->comm, root, ZCKPT_PATH_MAX, 0));
    me = strcmp(root, mine) != 0;
    TRY(zcomm_allgather_bytes(e->comm, &me, diff, 1));
    int first = -1, count = 0;
    for (int r = 0; r < e->world; r++)
        if (diff[r]) {
            if (first < 0) first = r;
            count++;
        }
    if (first >= 0) {
        zcfg_tag_validation v = e->cfg.checkpoint.tag_validation;
        if (v == ZTAG_FAIL)
            FAIL(ZINC_ERR_INVALID_ARG,
                 "checkpoint %s differs across ranks: rank 0 has \"%s\", %d rank%s differ%s "
                 "(first: rank %d%s%s%s); checkpoint.tag_validation is Fail. Give every rank the "
                 "same %s",
                 what, root, count, count == 1 ? "" : "s", count == 1 ? "s" : "", first, e->rank == first ? ", \"" : "",
                 e->rank == first ? mine : "", e->rank == first ? "\"" : "", what);
        if (v == ZTAG_WARN)
            ZLOG_WARN(&e->log,
                      "checkpoint %s differs across ranks (%d rank%s, first rank %d, differ from rank 0's "
                      "\"%s\"); every rank uses rank 0's (checkpoint.tag_validation is Warn)",
                      what, count, count == 1 ? "" : "s", first, root);
    }
    snprintf(out, cap, "%s", root);
fail:
    free(root);
    free(diff);
    return st;
}
