# The CPU kernels leave no AVX upper state in use (issue 29): XINUSE read after every kernel entry point,
# on the caller and the pool's workers. Skips where the CPU cannot report XINUSE.
zinc_test(NAME kernels_avx_state SOURCES test_kernels_avx_state.c LABELS kernels)
# Adam/AdamW and LAMB against float64 and DeepSpeedCPUAdam's float formula, with the hparams the optimizer
# descriptors make (issue 29: as close to float64 as DeepSpeed's CPU optimizers).
zinc_test(NAME optim_precision SOURCES test_optim_precision.c LABELS kernels)
# Adagrad (DeepSpeedCPUAdagrad's formula), added through the optimizer recipe: the kernel against
# DeepSpeed's formula and float64, the engine at stages 0-3 against float64, its config and checkpoints;
# on the CUDA emulation offloaded (and refused with the state on the GPU).
zinc_test(NAME optim_adagrad SOURCES test_optim_adagrad.c optim_engine.c engine_util.c LABELS engine)
if(COMMAND zinc_emulated_test)
  zinc_emulated_test(NAME optim_adagrad_cuda_emulated SOURCE test_optim_adagrad.c EXTRA optim_engine.c
                     ENV ZINC_TEST_DEVICE=cuda)
endif()
# zinc's own CUDA kernels (kernels/*.cu: Adam, Lion, LAMB, gradient statistics, finalize, casts) on CPU
# threads under AddressSanitizer against their C references (tests/cuda_threads/run_lib.sh, a few minutes on
# 2 cores; skips without g++ or the sanitizer runtime), and the same harness with a constant changed in each
# kernel family, which must fail (lib_kernels_threads_broken passes only if every broken kernel is caught).
add_test(NAME lib_kernels_threads COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cuda_threads/run_lib.sh address
         ${PROJECT_BINARY_DIR}/cuda_threads-lib-address)
add_test(NAME lib_kernels_threads_broken COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cuda_threads/run_lib.sh broken
         ${PROJECT_BINARY_DIR}/cuda_threads-lib-broken)
set_tests_properties(lib_kernels_threads lib_kernels_threads_broken PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 1200
                     LABELS "kernels;unit" RUN_SERIAL TRUE)
