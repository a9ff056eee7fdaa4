/* Checks that training would not be spent on outputs it cannot write (train_guard.h). */
#include "cli/train/train_guard.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/checkpoint/checkpoint_internal.h"
#include "base/core/safe_file.h"
#include "zinc.h"

void zcli_check_out_path(const char *flag, const char *path, int is_dir, char *why, size_t cap) {
    char p[4200];
    struct stat sb;
    why[0] = 0;
    if (strlen(path) >= 4000) {
        snprintf(why, cap, "%s %.64s...: the path is too long", flag, path);
        return;
    }
    if (zfile_check_links(path, flag) != ZINC_OK) { /* before a directory is made through a planted link */
        snprintf(why, cap, "%s", zinc_last_error());
        return;
    }
    if (is_dir) {
        snprintf(p, sizeof p, "%s", path);
        for (char *c = p + 1;; c++) {
            if (*c == '/' || !*c) {
                char keep = *c;
                *c = 0;
                if (mkdir(p, 0755) != 0 && errno != EEXIST) {
                    snprintf(why, cap, "%s %s: cannot create directory %s: %s", flag, path, p, strerror(errno));
                    return;
                }
                *c = keep;
                if (!keep) break;
            }
        }
        if (stat(path, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
            snprintf(why, cap, "%s %s exists and is not a directory", flag, path);
            return;
        }
        snprintf(p, sizeof p, "%s/.zinc-probe-%ld", path, (long)getpid());
    } else {
        if (lstat(path, &sb) == 0) {
            if (!S_ISREG(sb.st_mode))
                snprintf(why, cap, "%s %s exists and is not a regular file", flag, path);
            else {
                int fd = open(path, O_WRONLY | O_NOFOLLOW | O_CLOEXEC);
                if (fd < 0)
                    snprintf(why, cap, "%s %s cannot be written: %s", flag, path, strerror(errno));
                else
                    close(fd);
            }
            return;
        }
        /* A probe of this process's own beside the file: every rank checks at once, and probing with the
         * path itself would let one rank's probe make another's O_EXCL fail. */
        const char *slash = strrchr(path, '/');
        if (slash)
            snprintf(p, sizeof p, "%.*s/.zinc-probe-%ld", (int)(slash - path), path, (long)getpid());
        else
            snprintf(p, sizeof p, ".zinc-probe-%ld", (long)getpid());
        if (slash == path) snprintf(p, sizeof p, "/.zinc-probe-%ld", (long)getpid());
    }
    int fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0) {
        snprintf(why, cap, "%s %s cannot be written: creating %s failed: %s", flag, path, p, strerror(errno));
        return;
    }
    close(fd);
    unlink(p);
}

void zcli_check_outside_run_dirs(const char *flag, const char *path, const char *save_dir, const char *resume,
                                 char *why, size_t cap) {
    why[0] = 0;
    const char *dirs[] = {save_dir, resume}, *names[] = {"--save", "--resume"};
    for (int i = 0; i < 2; i++)
        if (dirs[i] && zfile_inside(path, dirs[i])) {
            snprintf(why, cap,
                     "%s %s is inside the %s directory %s: refused, even with --force (it is written after the "
                     "final save and could replace the checkpoint's own files, latest, a manifest or a shard); "
                     "write it outside the checkpoint directories",
                     flag, path, names[i], dirs[i]);
            return;
        }
}

bool zcli_same_file(const char *a, const char *b) {
    struct stat x, y;
    if (stat(a, &x) == 0 && stat(b, &y) == 0) return x.st_dev == y.st_dev && x.st_ino == y.st_ino;
    const char *na = strrchr(a, '/'), *nb = strrchr(b, '/');
    char da[4200], db[4200];
    snprintf(da, sizeof da, "%.*s", na ? (int)(na - a) + (na == a) : 1, na ? a : ".");
    snprintf(db, sizeof db, "%.*s", nb ? (int)(nb - b) + (nb == b) : 1, nb ? b : ".");
    return !strcmp(na ? na + 1 : a, nb ? nb + 1 : b) && stat(da, &x) == 0 && stat(db, &y) == 0 &&
           x.st_dev == y.st_dev && x.st_ino == y.st_ino;
}

int zcli_run_lock(const char *save_dir, char *why, size_t cap) {
    char lp[4200];
    why[0] = 0;
    snprintf(lp, sizeof lp, "%s/.zinc.run.lock", save_dir);
    if (zckpt_check_dir(save_dir, "--save directory") != ZINC_OK) {
        snprintf(why, cap, "%s", zinc_last_error());
        return -1;
    }
    int fd = open(lp, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, 0644);
    if (fd < 0 || flock(fd, LOCK_EX | LOCK_NB) != 0) {
        char owner[64] = "";
        ssize_t k = fd >= 0 ? pread(fd, owner, sizeof owner - 1, 0) : -1;
        owner[k > 0 ? k : 0] = 0;
        owner[strcspn(owner, "\n")] = 0;
        snprintf(why, cap,
                 "--save %s: another zinc train (%s) saves into this directory; use another directory or "
                 "wait for it to finish",
                 save_dir, owner[0] ? owner : "unknown pid");
        if (fd >= 0) close(fd);
        return -1;
    }
    /* What a killed run left (.TAG.partial of a save, .stepN.removing of --keep-last, *.tmp): swept now, under
     * the checkpoint lock, as the NVMe swap directories are, rather than at this run's first save. */
    int ck_lock = -1;
    if (zckpt_lock_dir(save_dir, &ck_lock) != ZINC_OK || zckpt_clean_stale(save_dir) != ZINC_OK) {
        snprintf(why, cap, "--save %s: %s", save_dir, zinc_last_error());
        zckpt_unlock_dir(ck_lock);
        close(fd);
        return -1;
    }
    zckpt_unlock_dir(ck_lock);
    char me[64];
    int n = snprintf(me, sizeof me, "pid %ld\n", (long)getpid());
    if (ftruncate(fd, 0) == 0 && pwrite(fd, me, (size_t)n, 0) < 0) { /* the pid is only for messages */
    }
    return fd;
}

int zcli_agree_run(zinc_engine *e, const zcli_run *r, int *run_lock) {
    *run_lock = -1;
    if (r->save_dir && !r->save_why[0] && zinc_rank(e) == 0) {
        *run_lock = zcli_run_lock(r->save_dir, r->save_why, r->why_cap);
        if (r->save_why[0] && zinc_world_size(e) > 1) fprintf(stderr, "zinc train: %s\n", r->save_why);
    }
    int64_t paths_ok = !r->save_why[0] && !r->report_why[0];
    if (zinc_agree_add(e, "--steps", &r->steps, sizeof r->steps) != ZINC_OK ||
        zinc_agree_add(e, "--seed", &r->seed, sizeof r->seed) != ZINC_OK ||
        zinc_agree_add(e, "which of --save/--resume/--report were given", &r->given, sizeof r->given) != ZINC_OK ||
        zinc_agree_add(e, "--save-every", &r->save_every, sizeof r->save_every) != ZINC_OK ||
        zinc_agree_add(e, "--resume", r->resume ? r->resume : "", r->resume ? strlen(r->resume) : 0) != ZINC_OK ||
        zinc_agree_add(e, "--save and --report paths writable", &paths_ok, sizeof paths_ok) != ZINC_OK) {
        fprintf(stderr, "zinc train: %s\n", zinc_last_error());
        return -1;
    }
    return 0;
}

int zcli_outputs_refused(const zcli_run *r) {
    if (!r->save_why[0] && !r->report_why[0]) return 0;
    fprintf(stderr, "zinc train: %s (checked before training; nothing was trained)\n",
            r->save_why[0] ? r->save_why : r->report_why);
    return -1;
}
