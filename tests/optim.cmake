# Optimizers other than Adam (issue 14): Lion trained end to end against a float64 Lion at stages 0-3,
# on 1 and 2 ranks, with a checkpoint round trip; and the same on the CUDA emulation.
zinc_test(NAME engine_lion_np1 SOURCES test_engine_lion.c optim_engine.c engine_util.c LABELS engine)
zinc_test(NAME engine_lion_np2 SOURCES test_engine_lion.c optim_engine.c engine_util.c RANKS 2 LABELS engine)
if(COMMAND zinc_emulated_test)
  zinc_emulated_test(NAME engine_lion_cuda_emulated_np1 SOURCE test_engine_lion.c EXTRA optim_engine.c ENV ZINC_TEST_DEVICE=cuda)
endif()
# LAMB: the same against a float64 LAMB; on the CUDA emulation the step is refused (CPU kernels only).
zinc_test(NAME engine_lamb_np1 SOURCES test_engine_lamb.c optim_engine.c engine_util.c LABELS engine)
zinc_test(NAME engine_lamb_np2 SOURCES test_engine_lamb.c optim_engine.c engine_util.c RANKS 2 LABELS engine)
if(COMMAND zinc_emulated_test)
  zinc_emulated_test(NAME engine_lamb_cuda_emulated_np1 SOURCE test_engine_lamb.c EXTRA optim_engine.c ENV ZINC_TEST_DEVICE=cuda)
endif()
# The CUDA LAMB kernels (kernels/lamb.cu) against their CPU references: on a GPU (label gpu, skipped without
# one), and on the host emulation, where it tests the launchers' contract (the math there is the reference).
if(ZINC_HAVE_CUDA)
  zinc_test(NAME kernels_lamb_cuda SOURCES test_kernels_lamb_cuda.c LABELS gpu LIBS CUDA::cudart TIMEOUT 600)
endif()
if(COMMAND zinc_emulated_test)
  zinc_emulated_test(NAME kernels_lamb_cuda_emulated SOURCE test_kernels_lamb_cuda.c)
endif()
