/* zt.h's O_DIRECT probe, apart from zt.c: only the NVMe tests link it (with the library it calls). */
#include <stdio.h>
#include <unistd.h>

#include "offload/aio.h"
#include "zt.h"

int zt_direct_io_supported(const char *dir) {
    zaio_params p = {.block_size = 1 << 20, .queue_depth = 4, .intra_op_parallelism = 1, .overlap_events = true};
    zaio *a = NULL;
    if (zaio_create(&p, &a) != ZINC_OK) return 0;
    char path[4200];
    snprintf(path, sizeof path, "%s/probe_%ld.bin", dir, (long)getpid());
    int f = -1, ok = 0;
    if (zaio_open(a, path, false, &f) == ZINC_OK) ok = zaio_file_info(a, f)->direct;
    zaio_destroy(a);
    unlink(path);
    return ok;
}
