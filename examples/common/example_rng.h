/* The deterministic random numbers the example models initialise their parameters with (splitmix64 and
 * Box-Muller): a parameter's values depend only on its seed, so every rank and rank count agrees. */
#ifndef ZINC_EXAMPLES_COMMON_EXAMPLE_RNG_H
#define ZINC_EXAMPLES_COMMON_EXAMPLE_RNG_H

#include <math.h>
#include <stdint.h>

static inline uint64_t example_mix(uint64_t z) {
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
/* [0, 1), advancing the state by one. */
static inline double example_uniform(uint64_t *s) { return (double)(example_mix((*s)++) >> 11) * 0x1.0p-53; }
/* Standard normal, advancing the state by two. */
static inline double example_normal(uint64_t *s) {
    double u1 = example_uniform(s), u2 = example_uniform(s);
    if (u1 < 1e-300) u1 = 1e-300;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

#endif
