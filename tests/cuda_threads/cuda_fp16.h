/* CUDA on CPU threads (see run.sh): __half as _Float16, whose conversions round to nearest even. */
#pragma once
#include <stdint.h>
#include <string.h>
struct __half { _Float16 v; };
inline float __half2float(__half h) { return (float)h.v; }
inline __half __float2half_rn(float f) { __half h; h.v = (_Float16)f; return h; }
