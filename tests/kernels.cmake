# CPU kernels against their scalar references (kernels/): fused Adam and the casts on every SIMD path, LAMB,
# Lion, the kernels' silence (a bad ZINC_SIMD is logged by the engine, never printed), and the thread pool.
zinc_test(NAME kernels_cpu SOURCES test_kernels_cpu.c LABELS kernels unit)
zinc_test(NAME kernels_lamb SOURCES test_kernels_lamb.c LABELS kernels unit)
zinc_test(NAME kernels_lion SOURCES test_kernels_lion.c LABELS kernels unit)
zinc_test(NAME kernels_log SOURCES test_kernels_log.c LABELS kernels unit)
zinc_test(NAME kernels_thread_pool SOURCES test_thread_pool.c LABELS kernels unit)
# The CPU kernels leave no AVX upper state in use (issue 29): XINUSE read after every kernel entry point,
# on the caller and the pool's workers. Skips where the CPU cannot report XINUSE.
zinc_test(NAME kernels_avx_state SOURCES test_kernels_avx_state.c LABELS kernels unit)
# Adam/AdamW and LAMB against float64 and DeepSpeedCPUAdam's float formula, with the hparams the optimizer
# descriptors make (issue 29: as close to float64 as DeepSpeed's CPU optimizers).
zinc_test(NAME kernels_precision SOURCES test_kernels_precision.c LABELS kernels unit)
# zinc's own CUDA kernels (kernels/*.cu: Adam, Lion, LAMB, gradient statistics, finalize, casts) on the CPU
# under AddressSanitizer against their C references (tests/cuda_threads/run_lib.sh, about half a minute on 2
# quiet cores; skips without g++ or the sanitizer runtime), and the same harness with a constant changed in
# each optimizer family and a barrier left out (kernels_cuda_threads_broken passes only if each change is
# caught, by its own checks: tests/cuda_threads/plant.py).
add_test(NAME kernels_cuda_threads COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cuda_threads/run_lib.sh address
         ${PROJECT_BINARY_DIR}/cuda_threads-lib-address)
add_test(NAME kernels_cuda_threads_broken COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cuda_threads/run_lib.sh broken
         ${PROJECT_BINARY_DIR}/cuda_threads-lib-broken)
set_tests_properties(kernels_cuda_threads kernels_cuda_threads_broken PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600
                     LABELS "kernels;unit" RUN_SERIAL TRUE)
# ZeRO++ block quantization (issue 36): DeepSpeed's Symmetric math on worked values, the error per block
# against float64, the fast kernels (every SIMD path, threads) bitwise equal to the references.
zinc_test(NAME kernels_quant SOURCES test_kernels_quant.c LABELS kernels unit)
# In the fast subset (label fast: scripts/test.sh without --full).
zinc_fast(kernels_cpu kernels_lamb kernels_lion kernels_log kernels_thread_pool kernels_quant kernels_avx_state)
