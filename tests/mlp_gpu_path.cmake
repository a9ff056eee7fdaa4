# The example MLP's GPU path (examples/mlp/mlp_cuda.c) built against tests/cuda_host/, a host emulation
# of the CUDA runtime and cuBLAS calls it makes, plus plain-C versions of its kernels: its logic runs in
# CI without a GPU. Its own copy of the MLP library, so the test links no real CUDA.
add_library(zinc_mlp_host_emulation STATIC ${PROJECT_SOURCE_DIR}/examples/mlp/mlp.c
            ${PROJECT_SOURCE_DIR}/examples/mlp/mlp_cuda.c ${CMAKE_CURRENT_SOURCE_DIR}/cuda_host/cuda_host.c
            ${CMAKE_CURRENT_SOURCE_DIR}/cuda_host/mlp_kernels_host.c)
# cuda_host/ first: <cuda_runtime.h> and <cublas_v2.h> resolve to the emulation.
target_include_directories(zinc_mlp_host_emulation BEFORE PUBLIC ${CMAKE_CURRENT_SOURCE_DIR}/cuda_host
                           ${PROJECT_SOURCE_DIR}/examples/mlp)
target_compile_definitions(zinc_mlp_host_emulation PRIVATE ZINC_MLP_CUDA=1 ZINC_MLP_CUDA_HOST_EMULATION=1)
target_compile_options(zinc_mlp_host_emulation PRIVATE ${ZINC_WARN})
target_link_libraries(zinc_mlp_host_emulation PUBLIC zinc PRIVATE m)

foreach(n 1 2)
  if(NOT TARGET test_mlp_gpu_path)
    add_executable(test_mlp_gpu_path test_mlp_gpu_path.c engine_util.c zt.c)
    target_include_directories(test_mlp_gpu_path PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
    target_compile_options(test_mlp_gpu_path PRIVATE ${ZINC_WARN})
    target_compile_definitions(test_mlp_gpu_path PRIVATE _GNU_SOURCE)
    target_link_libraries(test_mlp_gpu_path PRIVATE zinc_mlp_host_emulation zinc m)
  endif()
  zinc_test(NAME mlp_gpu_path_np${n} SOURCES test_mlp_gpu_path.c engine_util.c RANKS ${n} LABELS engine
            TIMEOUT 600)
endforeach()
