/* What both `zinc train` models (the MLP and GPT-2) check before training is spent: output paths that can be
 * written, and one run at a time per --save directory. */
#ifndef ZINC_CLI_TRAIN_GUARD_H
#define ZINC_CLI_TRAIN_GUARD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "zinc.h"

/* Checks that `path` (a directory to create when is_dir, else a file) can be written, by creating and removing
 * a probe file of this process's own; on failure writes why (naming flag and path) to `why`, else "". */
void zcli_check_out_path(const char *flag, const char *path, int is_dir, char *why, size_t cap);
/* Refuses an output (`flag` `path`: --report, --trace) that would land among the run's own checkpoint files:
 * inside the --save directory or the --resume directory (either may be NULL), links resolved, whatever
 * --force says (the report and the trace are written after the final save, so they would replace `latest`,
 * a manifest or a shard, and the checkpoint would no longer load). Writes why to `why`, else "". */
void zcli_check_outside_run_dirs(const char *flag, const char *path, const char *save_dir, const char *resume,
                                 char *why, size_t cap);
/* Whether paths a and b (either may not exist yet) name the same file: the same name in the same directory
 * (by device and inode, links resolved). */
bool zcli_same_file(const char *a, const char *b);
/* Rank 0 of a run with --save DIR: checks DIR (owner, mode) and holds DIR/.zinc.run.lock for the whole run.
 * Returns the lock's descriptor (close it at the end), or -1 with why set. */
int zcli_run_lock(const char *save_dir, char *why, size_t cap);
/* What every run of zinc train must have been given alike, whatever the model. */
typedef struct zcli_run {
    int64_t steps, seed, save_every;
    int64_t given;               /* model-specific bits: which of --save/--resume/--report/... were given */
    const char *save_dir;        /* or NULL */
    const char *resume;          /* or NULL */
    char *save_why, *report_why; /* from zcli_check_out_path; rank 0 adds the run lock's refusal */
    size_t why_cap;
} zcli_run;
/* After zinc_create, before the model's zinc_build: rank 0 takes the --save directory's run lock (*run_lock,
 * -1 if none), and every rank adds the run's items to the engine's agreement. 0, or -1 after printing why. */
int zcli_agree_run(zinc_engine *e, const zcli_run *r, int *run_lock);
/* After the build (the ranks agreed): 0, or -1 after printing why no output can be written. */
int zcli_outputs_refused(const zcli_run *r);

#endif
