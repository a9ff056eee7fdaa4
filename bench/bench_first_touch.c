/* What the first write to fresh anonymous memory costs on this machine, right after the same amount was freed
 * and again after the memory has sat free for a while. On a VM whose balloon reports free pages to the host
 * (virtio_balloon with VIRTIO_BALLOON_F_REPORTING, feature bit 5), pages freed and left idle go back to the
 * host, and the next process to touch them pays the host's faults too: the first step of a run that maps a
 * large buffer (the decoupled writer's snapshot image, the in-memory shards) is slower than later ones, and a
 * run started after an idle pause is slower than one started right after another. bench/RESULTS.md.
 *
 *   bench_first_touch [--mib N] [--idle S] [--reps K]
 *
 * Each rep maps N MiB, faults it in (MADV_POPULATE_WRITE, else a write per page), unmaps it, at once a second
 * time ("warm"), then sleeps S seconds and does it a third time ("after idle"). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "bench/bench_util.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

/* Seconds to map and fault in `bytes`; negative when the mapping fails. */
static double touch_once(size_t bytes) {
    double t0 = bench_now_s();
    char *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return -1;
    if (madvise(p, bytes, MADV_POPULATE_WRITE) != 0) {
        long page = sysconf(_SC_PAGESIZE);
        for (size_t i = 0; i < bytes; i += (size_t)page) p[i] = 1;
    }
    double t = bench_now_s() - t0;
    munmap(p, bytes);
    return t;
}

static void balloon_reporting(void) {
    FILE *f = fopen("/sys/bus/virtio/drivers/virtio_balloon/virtio0/features", "r");
    char bits[160] = "";
    if (f) {
        if (!fgets(bits, sizeof bits, f)) bits[0] = 0;
        fclose(f);
    }
    if (!bits[0])
        printf("virtio_balloon: none found (no VM balloon, or another device name)\n");
    else
        printf("virtio_balloon: free page reporting (feature bit 5) %s\n",
               strlen(bits) > 5 && bits[5] == '1' ? "on" : "off");
}

int main(int argc, char **argv) {
    double mib = 2048, idle = 20;
    int reps = 2;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--mib") && i + 1 < argc)
            mib = atof(argv[++i]);
        else if (!strcmp(argv[i], "--idle") && i + 1 < argc)
            idle = atof(argv[++i]);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc)
            reps = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: bench_first_touch [--mib N] [--idle SECONDS] [--reps K]\n");
            return 2;
        }
    }
    if (!(mib >= 1 && mib <= 1 << 20) || !(idle >= 0 && idle <= 3600) || reps < 1 || reps > 100) {
        fprintf(stderr, "bench_first_touch: --mib 1..1048576, --idle 0..3600, --reps 1..100\n");
        return 2;
    }
    size_t bytes = (size_t)(mib * 1048576.0);
    balloon_reporting();
    printf("| rep | MiB | first, GiB/s | warm (at once), GiB/s | after %g s idle, GiB/s |\n|---|---|---|---|---|\n",
           idle);
    for (int r = 0; r < reps; r++) {
        double t[3];
        for (int k = 0; k < 3; k++) {
            if (k == 2) usleep((useconds_t)(idle * 1e6));
            t[k] = touch_once(bytes);
            if (t[k] < 0) {
                fprintf(stderr, "bench_first_touch: mmap of %zu bytes: %s\n", bytes, strerror(errno));
                return 1;
            }
        }
        double gib = (double)bytes / 1073741824.0;
        printf("| %d | %.0f | %.2f | %.2f | %.2f |\n", r + 1, mib, gib / t[0], gib / t[1], gib / t[2]);
    }
    return 0;
}
