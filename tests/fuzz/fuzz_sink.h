/* The fuzzers' log sink (they build without tests/zt.c, for libFuzzer): every line's level must be a real
 * one (abort otherwise, so the fuzzer reports it); the message bytes are added to *(size_t *)ud when ud is
 * given, so each line is formatted and read whole. */
#ifndef ZINC_TESTS_FUZZ_SINK_H
#define ZINC_TESTS_FUZZ_SINK_H

#include <stdlib.h>
#include <string.h>

#include "zinc.h"

static inline void fuzz_sink(void *ud, zinc_log_level lv, int rank, const char *msg) {
    (void)rank;
    if (lv < ZINC_LOG_DEBUG || lv > ZINC_LOG_ERROR) abort();
    size_t n = strlen(msg) + 1;
    if (ud) *(size_t *)ud += n;
}

#endif
