/* See cli_files.h. */
#include "cli/common/cli_files.h"

#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/core/safe_file.h"
#include "zinc.h"

#define NONFINITE_MARK (-DBL_MAX) /* no report number is -DBL_MAX */

double zcli_real(double v) { return isfinite(v) ? v : NONFINITE_MARK; }

static bool is_mark(const json_t *v) { return json_is_real(v) && json_real_value(v) == NONFINITE_MARK; }

/* The marked numbers become null. */
static void finite_only(json_t *j) {
    if (json_is_object(j)) {
        const char *k;
        json_t *v;
        json_object_foreach(j, k, v) {
            if (is_mark(v))
                json_object_set_new(j, k, json_null());
            else
                finite_only(v);
        }
    } else if (json_is_array(j)) {
        for (size_t i = 0; i < json_array_size(j); i++) {
            json_t *v = json_array_get(j, i);
            if (is_mark(v))
                json_array_set_new(j, i, json_null());
            else
                finite_only(v);
        }
    }
}

int zcli_write_json(const char *who, const char *flag, const char *path, json_t *j, size_t dump_flags, int force,
                    const char *const *inputs) {
    if (!j) {
        fprintf(stderr, "%s: %s %s: out of memory building it\n", who, flag, path);
        return -1;
    }
    finite_only(j);
    char *text = json_dumps(j, dump_flags);
    if (!text) {
        fprintf(stderr, "%s: %s %s: out of memory formatting it\n", who, flag, path);
        return -1;
    }
    size_t n = strlen(text);
    text[n] = '\n'; /* json_dumps leaves no newline; the NUL is not written */
    zinc_status st = zfile_write(flag, path, text, n + 1, force ? ZFILE_REPLACE : 0, inputs);
    free(text);
    if (st != ZINC_OK) {
        fprintf(stderr, "%s: cannot write the report: %s\n", who, zinc_last_error());
        return -1;
    }
    return 0;
}

void zcli_check_target(const char *flag, const char *path, int force, const char *const *inputs, char *why,
                       size_t cap) {
    why[0] = 0;
    if (zfile_check_target(flag, path, force ? ZFILE_REPLACE : 0, inputs) != ZINC_OK)
        snprintf(why, cap, "%s", zinc_last_error());
}

int zcli_all_steps_skipped(const char *who, int64_t ran, int64_t taken, const char *hint) {
    if (ran < 1 || taken > 0) return 0;
    fprintf(stderr,
            "%s: all %lld steps of this run were skipped (non-finite gradients or loss scale overflow): the model did "
            "not train. %s\n",
            who, (long long)ran, hint);
    return -1;
}
