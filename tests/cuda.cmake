# GPU tests: built only with the CUDA backend, labelled gpu; they exit 77 (skipped) without a GPU.
# Without the backend they are not built at all (and not auto-registered as unit tests).
file(GLOB ZINC_GPU_TEST_SOURCES CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/test_*_cuda.c
     ${CMAKE_CURRENT_SOURCE_DIR}/test_*_nccl.c)
if(ZINC_HAVE_CUDA)
  zinc_test(NAME kernels_cuda SOURCES test_kernels_cuda.c LABELS gpu LIBS CUDA::cudart_static TIMEOUT 600)
  zinc_test(NAME comm_nccl SOURCES test_comm_nccl.c LABELS gpu LIBS CUDA::cudart_static)
  # NCCL and cuBLAS loaded at first use (base/core/dynlib.h); runs without a GPU too.
  zinc_test(NAME cuda_dynlib SOURCES test_dynlib_cuda.c engine_util.c LABELS unit)
  zinc_test(NAME engine_mlp_cuda SOURCES test_engine_cuda.c engine_util.c LABELS gpu engine TIMEOUT 600)
  # Two ranks on one GPU: NCCL refuses that, so the engine reduces through MPI with pinned staging
  # (base/device/comm_staged.c); compared with the cpu engine at 2 ranks. On a machine with 2+ GPUs it runs NCCL.
  zinc_test(NAME engine_mlp_cuda_shared_np2 SOURCES test_engine_cuda.c engine_util.c RANKS 2 LABELS gpu engine
            TIMEOUT 600)
else()
  set(ZINC_REGISTERED_TEST_SOURCES "${ZINC_REGISTERED_TEST_SOURCES};${ZINC_GPU_TEST_SOURCES}" CACHE INTERNAL "")
endif()
# In the fast subset (label fast: scripts/test.sh without --full).
zinc_fast(kernels_cuda)
