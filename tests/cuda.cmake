# GPU tests: built only with the CUDA backend, labelled gpu; they exit 77 (skipped) without a GPU.
if(ZINC_HAVE_CUDA)
  zinc_test(NAME kernels_cuda SOURCES test_kernels_cuda.c LABELS gpu LIBS CUDA::cudart TIMEOUT 600)
  zinc_test(NAME comm_nccl SOURCES test_comm_nccl.c LABELS gpu LIBS CUDA::cudart)
endif()
