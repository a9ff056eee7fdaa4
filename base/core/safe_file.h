/* Every file zinc writes and every input it reads, through one place, so that a planted link, a FIFO, a
 * device node, another user's directory or a command's own input given as its output never turns a run
 * into damage or a hang (docs/hardening.md, "Writes").
 *
 * Writing: the target's directory is checked (owned by this user or root, not writable by every user
 * unless sticky); the target itself must be nothing or a regular file (lstat: a link, FIFO, device or
 * directory is refused), an existing file is replaced only with ZFILE_REPLACE, and never when it is one of
 * the caller's inputs. The data goes to a fresh temporary file in the same directory (a random name
 * ending in .tmp, created with O_EXCL | O_NOFOLLOW), is fsynced, renamed over the target (which replaces
 * a link itself, never what it points to) and the directory is fsynced.
 *
 * Reading: an input is opened with O_NONBLOCK (a FIFO never blocks) and its type checked with fstat before
 * a byte is read. */
#ifndef ZINC_RUNTIME_CORE_SAFE_FILE_H
#define ZINC_RUNTIME_CORE_SAFE_FILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/types.h>

#include "zinc.h"

#define ZFILE_PATH_MAX 4096
#define ZFILE_REPLACE 1u   /* an existing regular file may be replaced (the --force of a command) */
#define ZFILE_MAX_INPUTS 8 /* inputs beyond these are not checked */

/* A directory zinc writes into: reached through no untrusted link (zfile_check_links), exists, owned by this
 * user or root, not writable by every user unless sticky, writable by us. `what` names it in the message. */
zinc_status zfile_check_dir(const char *path, const char *what);
/* Every symbolic link on the way to `path` (each component, and the links' own targets, resolved one by one)
 * lies in a directory owned by this user or root that no one else can write, or in a sticky one with the
 * link owned by this user or root; otherwise refused naming the link and its directory. Components that do
 * not exist yet end the walk (zinc makes them, as directories). */
zinc_status zfile_check_links(const char *path, const char *what);

/* Whether `path` may be written with `flags`: see above. `inputs` (NULL-terminated, may be NULL) are the
 * command's inputs: a file given there is never replaced, and a directory given there means every file
 * directly inside it (a checkpoint directory). `what` names the path in messages ("--out"). */
zinc_status zfile_check_target(const char *what, const char *path, unsigned flags, const char *const *inputs);

/* Whether `path` (which need not exist) lies inside the directory `dir` or below it, links resolved: the
 * nearest ancestor of `path` that exists is `dir` or one of its subdirectories (compared by device and inode,
 * walking up through ".."). False when `dir` does not exist. For the outputs that must never land among a
 * run's own files (a checkpoint directory). */
bool zfile_inside(const char *path, const char *dir);

/* A file being written: open, write, then commit (or abort, which removes the temporary file). */
typedef struct zfile_out {
    int fd; /* the temporary file; -1 when closed */
    char path[ZFILE_PATH_MAX];
    char tmp[ZFILE_PATH_MAX + 64];
    char dir[ZFILE_PATH_MAX];
    const char *what;
    unsigned flags;
    /* the inputs as they were at open (the caller's array need not outlive the open) */
    struct zfile_input {
        dev_t dev;
        ino_t ino;
        bool dir;
        char name[256];
    } in[ZFILE_MAX_INPUTS];
    int nin;
} zfile_out;
zinc_status zfile_out_open(zfile_out *o, const char *what, const char *path, unsigned flags, const char *const *inputs);
/* Appends n bytes (retries short writes). */
zinc_status zfile_out_write(zfile_out *o, const void *data, size_t n);
/* A stdio stream on the temporary file for callers that print (fdopen; fclose it before commit). */
FILE *zfile_out_stream(zfile_out *o);
/* fsync, the target checked again, rename over it, fsync of the directory. On failure the temporary
 * file is removed. */
zinc_status zfile_out_commit(zfile_out *o);
void zfile_out_abort(zfile_out *o);
/* The whole file at once. */
zinc_status zfile_write(const char *what, const char *path, const void *data, size_t n, unsigned flags,
                        const char *const *inputs);

/* Opens an input for reading without blocking and refuses what is not a regular file ("is a directory",
 * "is a FIFO", ...); the descriptor is returned blocking again. `what` names it ("--data"). */
zinc_status zfile_open_input(const char *what, const char *path, int *fd);
/* The same as a stdio stream ("rb"). */
zinc_status zfile_fopen_input(const char *what, const char *path, FILE **f);

/* Removes a directory tree without following links; a missing path is not an error. */
zinc_status zfile_rmtree(const char *path);

#endif
