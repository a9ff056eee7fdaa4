/* Loading a library's functions at first use (dlopen), so that a build with the CUDA backend neither
 * needs nor maps NCCL unless a device path calls it (a CPU run of that build costs what a CPU-only
 * build costs, and the same binary starts where the library is not installed), and so that Muon's
 * Newton-Schulz finds a CBLAS (kernels/muon_cpu.c) without libzinc linking one. Built in every build. */
#ifndef ZINC_RUNTIME_CORE_DYNLIB_H
#define ZINC_RUNTIME_CORE_DYNLIB_H

#include "base/core/log.h"
#include "zinc.h"

typedef struct zdynlib {
    const char *what;           /* who needs which library, first words of every message: "device cuda needs NCCL" */
    const char *env;            /* a variable of base/core/env.c's table naming the file to load instead, or NULL */
    const char *const *names;   /* file names for dlopen, tried in order; NULL-terminated */
    const char *const *symbols; /* the functions wanted; NULL-terminated */
    const char *fix;            /* how to fix a failure; ends the message */
} zdynlib;

/* Sets fns[i] to the address of symbols[i], for every symbol.
 * - With lib->env set (non-empty) in the environment: that file, and nothing else.
 * - Otherwise, when the process already defines every symbol (the library is loaded with global scope,
 *   or the program links an emulation of it), those definitions: one copy per process, nothing loaded.
 * - Otherwise the first of lib->names that dlopen loads (RTLD_NOW | RTLD_LOCAL). Never unloaded.
 * Errors (ZINC_ERR_DEVICE): no file loads (each name with dlerror's reason), or the file lacks one of the
 * symbols (named); the message starts with lib->what and ends with lib->fix. fns is left unchanged then. */
zinc_status zdynlib_load(const zdynlib *lib, void **fns, const zlog *log);

#endif
