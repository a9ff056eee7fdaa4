# CPU kernels against their scalar references (kernels/): fused Adam and the casts on every SIMD path, LAMB,
# Lion, the kernels' silence (a bad ZINC_SIMD is logged by the engine, never printed), and the thread pool.
zinc_test(NAME kernels_cpu SOURCES test_kernels_cpu.c LABELS kernels unit)
zinc_test(NAME kernels_lamb SOURCES test_kernels_lamb.c LABELS kernels unit)
zinc_test(NAME kernels_lion SOURCES test_kernels_lion.c LABELS kernels unit)
zinc_test(NAME kernels_log SOURCES test_kernels_log.c LABELS kernels unit)
zinc_test(NAME kernels_thread_pool SOURCES test_thread_pool.c LABELS kernels unit)
