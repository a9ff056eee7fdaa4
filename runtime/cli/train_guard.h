/* What both `zinc train` models (the MLP and GPT-2) check before training is spent: output paths that can be
 * written, and one run at a time per --save directory. */
#ifndef ZINC_CLI_TRAIN_GUARD_H
#define ZINC_CLI_TRAIN_GUARD_H

#include <stddef.h>

/* Checks that `path` (a directory to create when is_dir, else a file) can be written, by creating and removing
 * a probe file of this process's own; on failure writes why (naming flag and path) to `why`, else "". */
void zcli_check_out_path(const char *flag, const char *path, int is_dir, char *why, size_t cap);
/* Rank 0 of a run with --save DIR: checks DIR (owner, mode) and holds DIR/.zinc.run.lock for the whole run.
 * Returns the lock's descriptor (close it at the end), or -1 with why set. */
int zcli_run_lock(const char *save_dir, char *why, size_t cap);
/* An option's value, or NULL when there is none: the end of the arguments or the next option
 * (`--save --quiet` lacks its value rather than saving into "--quiet"). */
const char *zcli_value(int argc, char **argv, int i);

#endif
