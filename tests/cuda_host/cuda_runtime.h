/* See cuda_runtime_api.h: the emulation has no kernel-launch syntax, so this adds nothing to it. */
#ifndef ZINC_TESTS_CUDA_HOST_RUNTIME_H
#define ZINC_TESTS_CUDA_HOST_RUNTIME_H
#include "cuda_runtime_api.h"
#endif
