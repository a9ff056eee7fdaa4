# The CPU kernels leave no AVX upper state in use (issue 29): XINUSE read after every kernel entry point,
# on the caller and the pool's workers. Skips where the CPU cannot report XINUSE.
zinc_test(NAME kernels_avx_state SOURCES test_kernels_avx_state.c LABELS kernels)
# Adam/AdamW and LAMB against float64 and DeepSpeedCPUAdam's float formula, with the hparams the optimizer
# descriptors make (issue 29: as close to float64 as DeepSpeed's CPU optimizers).
zinc_test(NAME optim_precision SOURCES test_optim_precision.c LABELS kernels)
