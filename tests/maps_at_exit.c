/* Preloaded (LD_PRELOAD) into a program under test: as the program exits, copies its /proc/self/maps to
 * the file named by ZINC_MAPS_OUT, so a test sees every file the run mapped, those loaded with dlopen on
 * the way included (nothing is unmapped at exit). Used by tests/cuda_libs_lazy.sh. The zinc program ends
 * through _exit (cli/main.c: no library exit handlers), which runs no destructor, so _exit is interposed too. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

static void capture(void) {
    static int done;
    const char *out = getenv("ZINC_MAPS_OUT");
    if (done || !out || !*out) return;
    done = 1;
    FILE *in = fopen("/proc/self/maps", "r");
    FILE *to = fopen(out, "w");
    char buf[65536];
    size_t n;
    while (in && to && (n = fread(buf, 1, sizeof buf, in)) > 0) fwrite(buf, 1, n, to);
    if (in) fclose(in);
    if (to) fclose(to);
}

__attribute__((destructor)) static void maps_at_exit(void) { capture(); }

void _exit(int status) {
    capture();
    syscall(SYS_exit_group, status);
    for (;;) {
    }
}
