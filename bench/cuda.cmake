# GPU benchmarks, built only with the CUDA backend. Included from bench/CMakeLists.txt with
#   if(ZINC_HAVE_CUDA) include(cuda.cmake) endif()
# If the bench_*.c glob there already made the target, only the CUDA runtime is added to it.
if(ZINC_HAVE_CUDA)
  if(NOT TARGET bench_adam_cuda)
    add_executable(bench_adam_cuda ${CMAKE_CURRENT_LIST_DIR}/bench_adam_cuda.c)
    target_include_directories(bench_adam_cuda PRIVATE ${PROJECT_SOURCE_DIR})
    target_compile_options(bench_adam_cuda PRIVATE ${ZINC_WARN})
    target_compile_definitions(bench_adam_cuda PRIVATE _GNU_SOURCE)
    target_link_libraries(bench_adam_cuda PRIVATE zinc_internal m)
  endif()
  target_link_libraries(bench_adam_cuda PRIVATE CUDA::cudart)
endif()
