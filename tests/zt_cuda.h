/* For the tests that run on a real GPU (they exit 77 without one): CU(call) fails the test at file:line
 * with CUDA's reason and ends it (zt_finish's status) when a CUDA runtime call does not succeed. */
#ifndef ZINC_TESTS_ZT_CUDA_H
#define ZINC_TESTS_ZT_CUDA_H

#include <cuda_runtime.h>
#include <stdlib.h>

#include "zt.h"

#define CU(call)                                                                                           \
    do {                                                                                                   \
        cudaError_t e_ = (call);                                                                           \
        if (e_ != cudaSuccess) {                                                                           \
            zt_fail_at(__FILE__, __LINE__, "%s: %s", #call, cudaGetErrorString(e_));                       \
            exit(zt_finish());                                                                             \
        }                                                                                                  \
    } while (0)

#endif
