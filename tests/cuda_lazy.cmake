# issue 15: a build with the CUDA backend loads GPU libraries only when a GPU device is used
# (tests/cuda_libs_lazy.sh says what each test checks). Registered in every build: without the CUDA
# backend both hold trivially (there is no CUDA code to load anything).
add_library(zinc_maps_at_exit MODULE ${CMAKE_CURRENT_SOURCE_DIR}/maps_at_exit.c)
add_executable(zinc_mpi_init_only ${CMAKE_CURRENT_SOURCE_DIR}/mpi_init_only.c)
target_link_libraries(zinc_mpi_init_only PRIVATE MPI::MPI_C)
add_test(NAME cuda_libs_not_needed
         COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/cuda_libs_lazy.sh needed $<TARGET_FILE:zinc> $<TARGET_FILE:zinc_cli>)
# With the toolkit's stub driver made loadable as libcuda.so.1, a CUDA runtime call in a CPU run maps it.
set(zinc_libcuda_stub "")
if(ZINC_HAVE_CUDA AND EXISTS ${CUDAToolkit_LIBRARY_DIR}/stubs/libcuda.so)
  set(zinc_libcuda_stub ${CUDAToolkit_LIBRARY_DIR}/stubs/libcuda.so)
endif()
add_test(NAME cuda_libs_not_mapped
         COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/cuda_libs_lazy.sh maps $<TARGET_FILE:zinc_cli>
                 $<TARGET_FILE:zinc_maps_at_exit> $<TARGET_FILE:zinc_mpi_init_only> ${PROJECT_SOURCE_DIR}
                 ${zinc_libcuda_stub})
foreach(t cuda_libs_not_needed cuda_libs_not_mapped)
  file(MAKE_DIRECTORY ${PROJECT_BINARY_DIR}/test-tmp/${t})
  set_tests_properties(${t} PROPERTIES LABELS "cli;unit" TIMEOUT 300 WORKING_DIRECTORY ${PROJECT_BINARY_DIR}
                       ENVIRONMENT "${ZINC_TEST_ENV};TMPDIR=${PROJECT_BINARY_DIR}/test-tmp/${t}")
endforeach()
# In the fast subset (label fast: scripts/test.sh without --full).
zinc_fast(cuda_libs_not_needed)
