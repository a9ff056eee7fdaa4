/* Loading a library's functions at first use (see dynlib.h). */
#include "base/core/dynlib.h"
#include "base/core/env.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/core/error.h"

static size_t count(const char *const *list) {
    size_t n = 0;
    while (list && list[n]) n++;
    return n;
}

/* 1 when every symbol is already defined in the process (into got[]). */
static int from_process(const zdynlib *lib, void **got, size_t n) {
    for (size_t i = 0; i < n; i++) {
        got[i] = dlsym(RTLD_DEFAULT, lib->symbols[i]);
        if (!got[i]) return 0;
    }
    return 1;
}

/* Appends s to buf (size cap), after sep when buf is not empty; truncates. */
static void append(char *buf, size_t cap, const char *sep, const char *s) {
    size_t len = strlen(buf);
    if (len + 1 >= cap) return;
    snprintf(buf + len, cap - len, "%s%s", len ? sep : "", s);
}

zinc_status zdynlib_load(const zdynlib *lib, void **fns, const zlog *log) {
    zinc_status st = ZINC_OK;
    size_t n = count(lib->symbols);
    void **got = NULL;
    void *h = NULL;
    char tried[1024] = "", names[256] = "";
    const char *override = zenv_get_named(lib->env);
    const char *one[2] = {override, NULL};
    const char *const *files = override && *override ? one : lib->names;
    TRY_ALLOC(got, n, "a library's function table");
    if (files == lib->names && from_process(lib, got, n)) {
        ZLOG_DEBUG(log, "%s: using the %zu functions the process already has (%s, ...)", lib->what, n, lib->symbols[0]);
        goto done;
    }
    for (size_t f = 0; files[f] && !h; f++) {
        append(names, sizeof names, " or ", files[f]);
        h = dlopen(files[f], RTLD_NOW | RTLD_LOCAL);
        if (!h) {
            const char *why = dlerror();
            append(tried, sizeof tried, "; ", why ? why : files[f]);
            continue;
        }
        for (size_t i = 0; i < n; i++) {
            got[i] = dlsym(h, lib->symbols[i]);
            if (!got[i]) {
                dlclose(h);
                FAIL(ZINC_ERR_DEVICE, "%s: %s was loaded but has no function %s (an older or different library?); %s",
                     lib->what, files[f], lib->symbols[i], lib->fix);
            }
        }
        ZLOG_DEBUG(log, "%s: loaded %s", lib->what, files[f]);
    }
    if (!h)
        FAIL(ZINC_ERR_DEVICE, "%s: cannot load %s%s%s (dlopen: %s); %s", lib->what, files == lib->names ? "" : lib->env,
             files == lib->names ? "" : "=", names, tried, lib->fix);
done:
    memcpy(fns, got, n * sizeof *got);
fail:
    free(got);
    return st;
}
