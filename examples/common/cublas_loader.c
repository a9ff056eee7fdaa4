/* See cublas_loader.h. */
#include "cublas_loader.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define CUBLAS_STR_(x) #x
#define CUBLAS_STR(x) CUBLAS_STR_(x)
#ifdef CUBLAS_VER_MAJOR
#define CUBLAS_FILE "libcublas.so." CUBLAS_STR(CUBLAS_VER_MAJOR)
#else
#define CUBLAS_FILE "libcublas.so"
#endif

/* In example_cublas's order: cublas_v2.h maps each name to the library's (_v2) symbol. */
static const char *const symbols[] = {CUBLAS_STR(cublasCreate), CUBLAS_STR(cublasDestroy),
                                      CUBLAS_STR(cublasSetStream), CUBLAS_STR(cublasSgemm)};
enum { NFUNCS = sizeof symbols / sizeof symbols[0] };

static example_cublas api;

/* dlopen's the file (named: by ZINC_CUBLAS_LIBRARY) and finds every function in it. */
static zinc_status open_cublas(zinc_engine *e, const char *who, const char *instead, const char *file, int named,
                               void **fns) {
    void *h = dlopen(file, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *why = dlerror();
        zinc_log(e, ZINC_LOG_ERROR, "%s needs cuBLAS: cannot load %s%s (dlopen: %s); install cuBLAS (the CUDA "
                 "toolkit's %s) and put its folder on LD_LIBRARY_PATH, name the file in ZINC_CUBLAS_LIBRARY, or %s",
                 who, named ? "ZINC_CUBLAS_LIBRARY=" : "", file, why ? why : "unknown error", CUBLAS_FILE, instead);
        return ZINC_ERR_DEVICE;
    }
    for (int i = 0; i < NFUNCS; i++)
        if (!(fns[i] = dlsym(h, symbols[i]))) {
            zinc_log(e, ZINC_LOG_ERROR, "%s needs cuBLAS: %s has no function %s (an older or different library?); "
                     "install cuBLAS %s or name it in ZINC_CUBLAS_LIBRARY", who, file, symbols[i], CUBLAS_FILE);
            dlclose(h);
            return ZINC_ERR_DEVICE;
        }
    return ZINC_OK;
}

zinc_status example_cublas_load(zinc_engine *e, const char *who, const char *instead, const example_cublas **out) {
    static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    static int loaded;
    void *fns[NFUNCS];
    _Static_assert(sizeof fns == sizeof api, "one pointer per cuBLAS function");
    zinc_status st = ZINC_OK;
    pthread_mutex_lock(&lock);
    if (!loaded) {
        const char *file = getenv("ZINC_CUBLAS_LIBRARY");
        int named = file && *file, found = !named;
        for (int i = 0; i < NFUNCS && found; i++) found = (fns[i] = dlsym(RTLD_DEFAULT, symbols[i])) != NULL;
        if (!found) st = open_cublas(e, who, instead, named ? file : CUBLAS_FILE, named, fns);
        if (st == ZINC_OK) {
            memcpy(&api, fns, sizeof api); /* POSIX: a function's address from dlsym converts through void * */
            loaded = 1;
        }
    }
    pthread_mutex_unlock(&lock);
    *out = st == ZINC_OK ? &api : NULL;
    return st;
}
