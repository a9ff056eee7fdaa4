/* Status agreement: every rank learns whether any rank failed, so no rank goes on into a collective that a
 * failed rank never reaches. Collective (allgather of one record per rank). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/comm/comm.h"
#include "base/core/error.h"

#define AGREE_MSG 1536

typedef struct agree_rec {
    int32_t status;
    char msg[AGREE_MSG];
} agree_rec;

zinc_status zcomm_agree_status(zcomm *c, zinc_status mine) {
    zinc_status st = ZINC_OK;
    agree_rec *all = NULL, rec;
    if (c->size == 1) return mine;
    memset(&rec, 0, sizeof rec);
    rec.status = (int32_t)mine;
    if (mine != ZINC_OK) snprintf(rec.msg, sizeof rec.msg, "%s", zinc_last_error());
    all = malloc((size_t)c->size * sizeof *all);
    if (!all) FAIL(ZINC_ERR_NOMEM, "out of memory combining a status across ranks");
    TRY(zcomm_allgather_bytes(c, &rec, all, sizeof rec));
    for (int r = 0; r < c->size; r++) {
        if (all[r].status == ZINC_OK) continue;
        if (mine != ZINC_OK) {
            st = mine; /* this rank's own message is still the current one */
        } else {
            all[r].msg[AGREE_MSG - 1] = 0;
            st = ZERR((zinc_status)all[r].status, "rank %d: %s", r, all[r].msg);
        }
        break;
    }
fail:
    free(all);
    return st;
}
