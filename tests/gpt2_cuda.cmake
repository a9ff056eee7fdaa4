# GPT-2's GPU path against its host path (test_gpt2_cuda.c) on the CUDA emulation (cuda_emulated.cmake
# builds zinc_gpt2_cuda_emulated): one rank over the emulated NCCL; two ranks sharing the emulated GPU
# (collectives through MPI with pinned staging); two emulated GPUs (NCCL emulated over MPI). The build
# without the GPU path refuses a cuda engine clearly (test_gpt2_cuda_refused.c). On a real GPU (label gpu)
# the same program runs once the path is built (ZINC_GPT2_GPU_PATH: the CUDA backend and gpt2_kernels.cu).
zinc_emulated_test(NAME gpt2_cuda_emulated SOURCE test_gpt2_cuda.c LIBS zinc_gpt2_cuda_emulated)
zinc_emulated_test(NAME gpt2_cuda_emulated_shared_np2 SOURCE test_gpt2_cuda.c RANKS 2 LIBS zinc_gpt2_cuda_emulated
                   ENV ZINC_STAGING_BYTES=4096)
zinc_emulated_test(NAME gpt2_cuda_emulated_nccl_np2 SOURCE test_gpt2_cuda.c RANKS 2 LIBS zinc_gpt2_cuda_emulated
                   ENV ZINC_CUDA_HOST_DEVICES=2)
zinc_emulated_test(NAME gpt2_cuda_refused_emulated SOURCE test_gpt2_cuda_refused.c LIBS zinc_gpt2_nogpu_emulated)
if(ZINC_GPT2_GPU_PATH)
  zinc_test(NAME gpt2_cuda SOURCES test_gpt2_cuda.c LIBS zinc_gpt2 LABELS gpu gpt2 TIMEOUT 600)
else()
  set(ZINC_REGISTERED_TEST_SOURCES
      "${ZINC_REGISTERED_TEST_SOURCES};${CMAKE_CURRENT_SOURCE_DIR}/test_gpt2_cuda.c" CACHE INTERNAL "")
endif()
set(ZINC_REGISTERED_TEST_SOURCES
    "${ZINC_REGISTERED_TEST_SOURCES};${CMAKE_CURRENT_SOURCE_DIR}/test_gpt2_cuda_refused.c" CACHE INTERNAL "")
# The emulated cuBLAS SGEMM itself (both models' GPU paths run on it) against a float64 reference.
zinc_emulated_test(NAME cuda_host_blas_emulated SOURCE test_cuda_host_blas.c)
set(ZINC_REGISTERED_TEST_SOURCES
    "${ZINC_REGISTERED_TEST_SOURCES};${CMAKE_CURRENT_SOURCE_DIR}/test_cuda_host_blas.c" CACHE INTERNAL "")
