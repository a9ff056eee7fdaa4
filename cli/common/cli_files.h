/* The zinc program's outputs and inputs through the safe writer and reader (base/core/safe_file.h):
 * reports, and the checks every `zinc train` makes of its paths before training. */
#ifndef ZINC_CLI_CLI_FILES_H
#define ZINC_CLI_CLI_FILES_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

/* jansson cannot hold NaN or infinity: a report's number that may be non-finite is passed through zcli_real,
 * which maps it to a marker that zcli_write_json writes as null. */
double zcli_real(double v);
/* Writes `j` (non-finite numbers become null: a run that went bad still gets its report) to `path` through
 * the safe writer: an existing file only with force, never one of `inputs` (NULL-terminated). 0, or -1
 * after printing "<who>: <why>". */
int zcli_write_json(const char *who, const char *flag, const char *path, json_t *j, size_t dump_flags, int force,
                    const char *const *inputs);
/* Before training: what zcli_write_json will refuse (the path exists without --force, is not a regular file,
 * or is one of the inputs), into why (empty when fine). */
void zcli_check_target(const char *flag, const char *path, int force, const char *const *inputs, char *why, size_t cap);
/* After the training loop: -1 after printing why when every one of the `ran` steps of this run was skipped
 * (`taken` 0): the model did not train, which is not a success. */
int zcli_all_steps_skipped(const char *who, int64_t ran, int64_t taken, const char *hint);

#endif
