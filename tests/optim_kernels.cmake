# The CPU kernels leave no AVX upper state in use (issue 29): XINUSE read after every kernel entry point,
# on the caller and the pool's workers. Skips where the CPU cannot report XINUSE.
zinc_test(NAME kernels_avx_state SOURCES test_kernels_avx_state.c LABELS kernels)
