/* DeepSpeed's monitors: the `tensorboard` and `csv_monitor` blocks of the ds_config (docs/monitors.md).
 * The engine hands over scalars (a tag such as "Train/Samples/lr", a value, the x axis: global samples, as
 * DeepSpeed's engine writes them) and this writes them where DeepSpeed writes them, on rank 0 only:
 *
 *   output_path/job_name/events.out.tfevents.<time>.<host>.<pid>.<n>   TensorBoard: a TFRecord file of Event
 *       records (tb_event.proto), the first the file version, then one Summary with one simple_value each;
 *   output_path/job_name/<tag with / and spaces as _>.csv               one file per tag: "step,<last part
 *       of the tag>" then "samples,value" lines (CRLF, as Python's csv module writes them).
 *
 * Files, never replaced (docs/hardening.md, "Writes"): output_path is created like DeepSpeed's makedirs and
 * checked as zfile_check_dir checks a directory zinc writes into; the job directory is created or must be a
 * directory of this user (a link there is refused, never followed); files are created inside it through
 * its descriptor with O_EXCL | O_NOFOLLOW, locked (flock) while written, and fsynced at close. An event file
 * is always new (a run adds its own, as torch's SummaryWriter does). A CSV file that exists is appended to,
 * as DeepSpeed does (a resumed run goes on where it stopped), only when it is a regular file of this user
 * with one link, that starts with the same header and that no other process holds locked.
 *
 * Errors at open are errors (the run has not started: the message names the key, the path and the fix).
 * A write that fails later (disk full) logs one warning naming the file and stops that monitor: training
 * goes on. Nothing here prints except through the log. */
#ifndef ZINC_RUNTIME_MONITOR_H
#define ZINC_RUNTIME_MONITOR_H

#include <stdint.h>

#include "base/config/config.h"
#include "base/core/log.h"
#include "zinc.h"

typedef struct zmon zmon;

/* What zmon_open would refuse about the enabled blocks' directories, checked without making anything that
 * stays (zinc_create runs it first, zinc config check runs it too, so both refuse alike). */
zinc_status zmon_check(const zcfg_monitor *tb, const zcfg_monitor *csv);
/* Opens the monitors that `tb` and `csv` enable (either may be NULL or disabled): the directories, the
 * event file and the CSV files of `tags` (NULL-terminated: the tags the caller will write) now, so that a
 * path that cannot work fails before any training; a CSV file of another tag at its first scalar. *out is
 * NULL when neither is enabled. `log` must outlive the monitor. */
zinc_status zmon_open(const zcfg_monitor *tb, const zcfg_monitor *csv, const char *const *tags, const zlog *log,
                      zmon **out);

/* One scalar: `tag` at x = `samples`. NULL m does nothing. */
void zmon_scalar(zmon *m, const char *tag, double value, int64_t samples);

/* The directory the monitor of the block named ("tensorboard", "csv_monitor") writes into; NULL when off. */
const char *zmon_output_dir(const zmon *m, const char *block);

/* fsync and close every file; a failure logs a warning (nothing can be done about it by then). NULL does
 * nothing. */
void zmon_close(zmon *m);

#endif
