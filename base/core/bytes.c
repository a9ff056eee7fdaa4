#include "base/core/bytes.h"

#include <inttypes.h>
#include <stdio.h>

void zbytes_format(char *buf, size_t cap, uint64_t bytes) {
    double x = (double)bytes;
    if (bytes >= (1ull << 30))
        snprintf(buf, cap, "%.2f GiB", x / 1073741824.0);
    else if (bytes >= (1ull << 20))
        snprintf(buf, cap, "%.2f MiB", x / 1048576.0);
    else if (bytes >= 1024)
        snprintf(buf, cap, "%.1f KiB", x / 1024.0);
    else
        snprintf(buf, cap, "%" PRIu64 " B", bytes);
}
