/* cuBLAS for the example models' GPU paths (examples/mlp/mlp_cuda.c, examples/gpt2/gpt2_cuda.c), loaded
 * when the first model is made on a GPU, not linked: a CPU run of a CUDA build never maps it (about 600 MB
 * of files with cuBLASLt) and the program starts where it is not installed. The process's own definitions
 * come first (a cuBLAS already loaded with global scope, or the emulation the CI tests link), else the
 * library of the headers this was built with; ZINC_CUBLAS_LIBRARY names another file. One copy per
 * process, shared by both models; never unloaded (handles made by it may outlive any one model). Built
 * with the CUDA backend only. */
#ifndef ZINC_EXAMPLES_COMMON_CUBLAS_LOADER_H
#define ZINC_EXAMPLES_COMMON_CUBLAS_LOADER_H

#include <cublas_v2.h>

#include "zinc.h"

/* The functions the models call, with cublas_v2.h's types (and its _v2 names in the library). */
typedef struct example_cublas {
    __typeof__(&cublasCreate) Create;
    __typeof__(&cublasDestroy) Destroy;
    __typeof__(&cublasSetStream) SetStream;
    __typeof__(&cublasSgemm) Sgemm;
} example_cublas;

/* Loads cuBLAS once (thread-safe) and sets *out to its functions. On failure logs through e "<who> needs
 * cuBLAS: ..." with the file, dlopen's reason and what to do (install it, ZINC_CUBLAS_LIBRARY, or
 * `instead`, the model's own way around it) and returns ZINC_ERR_DEVICE; a later call tries again. */
zinc_status example_cublas_load(zinc_engine *e, const char *who, const char *instead, const example_cublas **out);

#endif
