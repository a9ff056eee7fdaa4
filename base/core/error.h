/* Internal error handling: a thread-local message with file:line, and TRY/FAIL macros for one `fail:`
 * cleanup label per function. Asserts are only for programmer bugs inside zinc. */
#ifndef ZINC_RUNTIME_ERROR_H
#define ZINC_RUNTIME_ERROR_H

#include "zinc.h"

/* zinc_error_at (zinc.h) records an error; the library calls it through ZERR, as the examples through
 * ZINC_ERROR. */
/* Appends a caller frame ("\n  from file:line") to the current message so the trace shows the path. */
void zinc__error_trace(const char *file, int line);
/* Clears the message (successful public calls need not clear it). */
void zinc__error_clear(void);

#define ZERR(code, ...) ZINC_ERROR((code), __VA_ARGS__)

/* Needs `zinc_status st` in scope and a `fail:` label. */
#define TRY(expr)                                                                                                      \
    do {                                                                                                               \
        st = (expr);                                                                                                   \
        if (st != ZINC_OK) {                                                                                           \
            zinc__error_trace(__FILE__, __LINE__);                                                                     \
            goto fail;                                                                                                 \
        }                                                                                                              \
    } while (0)

#define FAIL(code, ...)                                                                                                \
    do {                                                                                                               \
        st = ZERR((code), __VA_ARGS__);                                                                                \
        goto fail;                                                                                                     \
    } while (0)

/* Allocation helpers that record ZINC_ERR_NOMEM with the size and what it was for. */
#define TRY_ALLOC(ptr, n, what)                                                                                        \
    do {                                                                                                               \
        (ptr) = calloc(((size_t)(n) > 0) ? (size_t)(n) : 1, sizeof(*(ptr)));                                           \
        if (!(ptr))                                                                                                    \
            FAIL(ZINC_ERR_NOMEM, "out of memory allocating %zu bytes for %s", (size_t)(n) * sizeof(*(ptr)), (what));   \
    } while (0)

#endif
