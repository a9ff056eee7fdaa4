/* Inside the monitors (monitor.h): the job directory, the append-only files, the two writers. */
#ifndef ZINC_RUNTIME_MONITOR_INTERNAL_H
#define ZINC_RUNTIME_MONITOR_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/core/log.h"
#include "base/core/safe_file.h"
#include "runtime/monitor/monitor.h"

#define ZMON_MAX_TAGS 16 /* CSV files of one run (DeepSpeed's engine writes at most 8 tags) */

/* One file being appended to. After a failed write it is `failed` and takes no more bytes. */
typedef struct zmon_file {
    int fd; /* -1: none */
    bool failed;
    bool created;                    /* by this run (zmon_file_create), not appended to */
    int err;                         /* errno of the failed write */
    off_t size;                      /* bytes in the file after the last whole write */
    char path[ZFILE_PATH_MAX + 512]; /* for messages */
} zmon_file;

/* The directory of one block ("tensorboard", "csv_monitor"): output_path/job_name, held open. */
typedef struct zmon_dir {
    const char *block;
    int fd;
    char path[ZFILE_PATH_MAX];
} zmon_dir;

/* Creates or checks output_path/job_name of block `d->block` (monitor_dir.c) and opens it. */
zinc_status zmon_dir_open(zmon_dir *d, const zcfg_monitor *m);
void zmon_dir_close(zmon_dir *d);
/* Creates `name` in the directory: O_EXCL | O_NOFOLLOW, 0666 less the umask, locked (flock). On failure
 * f->err holds errno (EEXIST: the name is taken). */
zinc_status zmon_file_create(const zmon_dir *d, const char *name, zmon_file *f);
/* Appends n bytes; a failure marks the file failed (errno in err), cuts off what part of the n bytes got
 * written (a reader sees whole records only), logs one warning unless log is NULL and returns false. */
bool zmon_file_write(zmon_file *f, const void *data, size_t n, const zlog *log, const char *block);
/* Removes the file when this run created it (an open that failed part-way leaves nothing behind). */
void zmon_file_discard(const zmon_dir *d, zmon_file *f);
/* fsync and close (a failure is a warning). */
void zmon_file_close(zmon_file *f, const zlog *log, const char *block);

/* TensorBoard (monitor_tb.c): a new event file, its records. */
typedef struct zmon_tb {
    zmon_dir dir;
    zmon_file file;
} zmon_tb;
zinc_status zmon_tb_open(zmon_tb *t, const zcfg_monitor *m, const zlog *log);
void zmon_tb_scalar(zmon_tb *t, const char *tag, double value, int64_t samples, const zlog *log);
/* One TFRecord frame around `data` (length, masked CRC-32C of the length, data, masked CRC-32C of the data)
 * into out, which holds n + 16 bytes. */
void zmon_tfrecord_frame(const void *data, size_t n, unsigned char *out);

/* CSV (monitor_csv.c): one file per tag; `tags` (NULL-terminated, may be NULL) are opened at once, any
 * other at its first scalar. */
typedef struct zmon_csv {
    zmon_dir dir;
    int ntags;
    struct zmon_csv_tag {
        char tag[128];
        zmon_file file;
    } tags[ZMON_MAX_TAGS];
} zmon_csv;
zinc_status zmon_csv_open(zmon_csv *c, const zcfg_monitor *m, const char *const *tags);
void zmon_csv_scalar(zmon_csv *c, const char *tag, double value, int64_t samples, const zlog *log);
void zmon_csv_close(zmon_csv *c, const zlog *log);
/* The file name DeepSpeed gives a tag's CSV file ('/' and ' ' as '_', ".csv") and its header's column. */
void zmon_csv_name(const char *tag, char *name, size_t cap);
const char *zmon_csv_column(const char *tag);

#endif
