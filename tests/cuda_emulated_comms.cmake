# comms_logger on the CUDA emulation (tests/comms.cmake has the rest): the engine API over NCCL, whose
# non-blocking collectives complete through the compute stream's wait that the logger times, and over MPI
# through pinned staging (ranks sharing the emulated GPU). After cuda_emulated.cmake, which defines
# zinc_emulated_test.
if(COMMAND zinc_emulated_test)
  zinc_emulated_test(NAME comms_engine_cuda_emulated_nccl_np2 SOURCE test_comms_engine.c RANKS 2
                     ENV ZINC_TEST_DEVICE=cuda ZINC_CUDA_HOST_DEVICES=2)
  zinc_emulated_test(NAME comms_engine_cuda_emulated_staged_np2 SOURCE test_comms_engine.c RANKS 2
                     ENV ZINC_TEST_DEVICE=cuda ZINC_STAGING_BYTES=4096)
endif()
