/* Error checks for the example models' GPU code (examples/mlp/mlp_cuda.c, examples/gpt2/gpt2_cuda.c), in
 * functions that return zinc_status: a failed CUDA or cuBLAS call is logged through the engine e as
 * "<who>: <the call> failed: <reason> (file:line)" and the function returns ZINC_ERR_DEVICE; a failed
 * zinc_status is returned as it is. Each file defines its short forms, e.g.
 *   #define CU(expr) EXAMPLE_CU(m->e, "gpt2 (cuda)", expr) */
#ifndef ZINC_EXAMPLES_COMMON_GPU_CHECK_H
#define ZINC_EXAMPLES_COMMON_GPU_CHECK_H

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "zinc.h"

#define EXAMPLE_CU(e, who, expr)                                                                           \
    do {                                                                                                   \
        cudaError_t ce_ = (expr);                                                                          \
        if (ce_ != cudaSuccess) {                                                                          \
            zinc_log((e), ZINC_LOG_ERROR, "%s: %s failed: %s (%s:%d)", (who), #expr, cudaGetErrorString(ce_), \
                     __FILE__, __LINE__);                                                                  \
            return ZINC_ERR_DEVICE;                                                                        \
        }                                                                                                  \
    } while (0)
#define EXAMPLE_BLAS(e, who, expr)                                                                         \
    do {                                                                                                   \
        cublasStatus_t bs_ = (expr);                                                                       \
        if (bs_ != CUBLAS_STATUS_SUCCESS) {                                                                \
            zinc_log((e), ZINC_LOG_ERROR, "%s: %s failed: cuBLAS status %d (%s:%d)", (who), #expr, (int)bs_, \
                     __FILE__, __LINE__);                                                                  \
            return ZINC_ERR_DEVICE;                                                                        \
        }                                                                                                  \
    } while (0)
#define EXAMPLE_CHECK(expr)                                                                                \
    do {                                                                                                   \
        zinc_status st_ = (expr);                                                                          \
        if (st_ != ZINC_OK) return st_;                                                                    \
    } while (0)

#endif
