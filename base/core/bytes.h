/* Byte counts for people: one format for the library's messages (the pre-flight's advice, the estimator's
 * notes) and the zinc program's tables, so the same figure reads the same everywhere. */
#ifndef ZINC_RUNTIME_CORE_BYTES_H
#define ZINC_RUNTIME_CORE_BYTES_H

#include <stddef.h>
#include <stdint.h>

/* "1.50 GiB", "12.25 MiB", "3.5 KiB", "512 B" (binary units; two decimals from MiB up). */
void zbytes_format(char *buf, size_t cap, uint64_t bytes);

#endif
