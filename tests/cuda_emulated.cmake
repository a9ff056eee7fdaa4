# The CUDA device backend on a host emulation of CUDA (tests/cuda_host/: the runtime with lazy streams,
# cuBLAS SGEMM, one-rank NCCL, and the kernel launchers on the CPU kernels), so the engine's CUDA host
# code (base/device/device_cuda.c, base/comm/comm_nccl.c, the staged collectives on a cuda device) and the
# example MLP's GPU path run in CI without a GPU. A second build of the library: the same sources with
# ZINC_HAVE_CUDA, against the emulation's headers instead of CUDA's, with the test hooks (docs/env.md) and
# every symbol exported (the tests reach inside).
file(GLOB ZINC_CUDA_HOST_SOURCES CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/cuda_host/cuda_host_*.c)
# The SIMD and -O3 flags of kernels/*.c are source properties of the top directory: repeat them here.
set_source_files_properties(${ZINC_AVX2_SOURCES} PROPERTIES COMPILE_OPTIONS "-mavx2;-mfma;-mf16c")
set_source_files_properties(${ZINC_AVX512_SOURCES} PROPERTIES
                            COMPILE_OPTIONS "-mavx512f;-mavx512bw;-mavx512vl;-mavx512dq;-mfma;-mf16c")
set_property(SOURCE ${ZINC_KERNEL_C_SOURCES} APPEND PROPERTY COMPILE_OPTIONS "-fno-math-errno;-O3")

add_library(zinc_cuda_emulated SHARED ${ZINC_C_SOURCES} ${ZINC_ENV_SOURCE} ${PROJECT_SOURCE_DIR}/base/device/device_cuda.c
            ${PROJECT_SOURCE_DIR}/base/comm/comm_nccl.c
            ${ZINC_CUDA_HOST_SOURCES})
target_include_directories(zinc_cuda_emulated BEFORE PUBLIC ${CMAKE_CURRENT_SOURCE_DIR}/cuda_host
                           ${PROJECT_SOURCE_DIR}/include)
target_include_directories(zinc_cuda_emulated PRIVATE ${PROJECT_SOURCE_DIR})
target_compile_definitions(zinc_cuda_emulated PUBLIC ZINC_HAVE_CUDA=1
                           PRIVATE _GNU_SOURCE ZINC_VERSION="${PROJECT_VERSION}" ZINC_TEST_HOOKS=1)
target_compile_options(zinc_cuda_emulated PRIVATE ${ZINC_WARN})
# NCCL and cuBLAS are found by the loaders of comm_nccl.c and examples/common/cublas_loader.c in the process (the emulation's
# definitions, exported by this library), as a real build finds a NCCL or cuBLAS already loaded.
target_link_libraries(zinc_cuda_emulated PRIVATE PkgConfig::JANSSON PkgConfig::URING MPI::MPI_C Threads::Threads m
                      ${CMAKE_DL_LIBS} zinc_monitor_proto)

add_library(zinc_cublas_loader_emulated STATIC ${PROJECT_SOURCE_DIR}/examples/common/cublas_loader.c)
target_compile_options(zinc_cublas_loader_emulated PRIVATE ${ZINC_WARN})
target_link_libraries(zinc_cublas_loader_emulated PUBLIC zinc_cuda_emulated ${CMAKE_DL_LIBS} Threads::Threads)

add_library(zinc_mlp_cuda_emulated STATIC ${PROJECT_SOURCE_DIR}/examples/mlp/mlp.c
            ${PROJECT_SOURCE_DIR}/examples/mlp/mlp_cuda.c ${CMAKE_CURRENT_SOURCE_DIR}/cuda_host/mlp_kernels_host.c)
target_include_directories(zinc_mlp_cuda_emulated PUBLIC ${PROJECT_SOURCE_DIR}/examples/mlp PRIVATE ${PROJECT_SOURCE_DIR})
target_compile_definitions(zinc_mlp_cuda_emulated PRIVATE ZINC_MLP_CUDA=1)
target_compile_options(zinc_mlp_cuda_emulated PRIVATE ${ZINC_WARN})
target_link_libraries(zinc_mlp_cuda_emulated PUBLIC zinc_cuda_emulated PRIVATE zinc_cublas_loader_emulated m
                      Threads::Threads ${CMAKE_DL_LIBS})

# zinc_emulated_test(NAME n SOURCE test_x.c [RANKS r] [ARGS ...] [ENV ...] [LIBS ...]): the test program built
# against the emulation (target <source>_emulated, linked with LIBS too), labelled cuda-emulated.
function(zinc_emulated_test)
  cmake_parse_arguments(T "" "NAME;SOURCE;RANKS" "ARGS;ENV;EXTRA;LIBS" ${ARGN})
  get_filename_component(base ${T_SOURCE} NAME_WE)
  set(exe ${base}_emulated)
  if(NOT TARGET ${exe})
    add_executable(${exe} ${T_SOURCE} ${T_EXTRA} engine_util.c zt.c)
    target_include_directories(${exe} PRIVATE ${PROJECT_SOURCE_DIR}
                               ${CMAKE_CURRENT_SOURCE_DIR})
    target_compile_options(${exe} PRIVATE ${ZINC_WARN})
    target_compile_definitions(${exe} PRIVATE _GNU_SOURCE)
    target_link_libraries(${exe} PRIVATE ${T_LIBS} zinc_mlp_cuda_emulated zinc_cuda_emulated MPI::MPI_C
                          PkgConfig::JANSSON m)
  endif()
  set(cmd $<TARGET_FILE:${exe}> ${T_ARGS})
  if(T_RANKS)
    set(cmd ${ZINC_MPIRUN} -np ${T_RANKS} ${cmd})
  endif()
  add_test(NAME ${T_NAME} COMMAND ${cmd})
  set(tmp ${PROJECT_BINARY_DIR}/test-tmp/${T_NAME})
  file(MAKE_DIRECTORY ${tmp})
  set(labels cuda-emulated engine)
  if(T_RANKS)
    list(APPEND labels mpi)
  endif()
  set_tests_properties(${T_NAME} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600 LABELS "${labels}"
                       ENVIRONMENT "${ZINC_TEST_ENV};TMPDIR=${tmp};ZINC_CUDA_EMULATED=1;${T_ENV}"
                       WORKING_DIRECTORY ${PROJECT_BINARY_DIR})
endfunction()

# The GPU equivalence matrix (test_engine_cuda.c) on the emulation: 1 rank over the emulated NCCL; 2 ranks
# sharing the emulated GPU, collectives through MPI with pinned staging (small staging: several rounds).
zinc_emulated_test(NAME engine_mlp_cuda_emulated SOURCE test_engine_cuda.c)
zinc_emulated_test(NAME engine_mlp_cuda_emulated_shared_np2 SOURCE test_engine_cuda.c RANKS 2
                   ENV ZINC_STAGING_BYTES=4096)
# One emulated GPU per rank: the engine picks NCCL (emulated over MPI) with its comm stream.
zinc_emulated_test(NAME engine_mlp_cuda_emulated_nccl_np2 SOURCE test_engine_cuda.c RANKS 2
                   ENV ZINC_CUDA_HOST_DEVICES=2)
# The memory estimate for device cuda against the engine on the (emulated) CUDA device, per category.
zinc_emulated_test(NAME mem_estimate_cuda_emulated SOURCE test_mem_estimate.c)
zinc_emulated_test(NAME mem_estimate_cuda_emulated_np3 SOURCE test_mem_estimate.c RANKS 3)
# The NCCL backend's collectives (comm_nccl.c) on the emulated NCCL.
zinc_emulated_test(NAME comm_nccl_emulated SOURCE test_comm_nccl.c)
# NCCL and cuBLAS found by their loaders (the emulation's, in the process), and their error paths.
zinc_emulated_test(NAME cuda_dynlib_emulated SOURCE test_dynlib_cuda.c)

# The CPU engine tests on the emulated cuda device (ZINC_TEST_DEVICE=cuda, engine_util.c's eu_device): the
# full equivalence matrix against the CPU reference, overflow handling, memory accounting, CPU/NVMe offload
# equivalence, and a checkpoint saved on the emulated GPU and resumed on the plain CPU build (bitwise equal
# to the uninterrupted CPU run: the MLP computes on the host there, as cuBLAS sums in another order).
zinc_emulated_test(NAME engine_equiv_cuda_emulated_np1 SOURCE test_engine_equiv.c ENV ZINC_TEST_DEVICE=cuda)
zinc_emulated_test(NAME engine_equiv_cuda_emulated_nccl_np3 SOURCE test_engine_equiv.c RANKS 3
                   ENV ZINC_TEST_DEVICE=cuda ZINC_CUDA_HOST_DEVICES=3)
set_tests_properties(engine_equiv_cuda_emulated_np1 engine_equiv_cuda_emulated_nccl_np3 PROPERTIES
                     FIXTURES_REQUIRED equiv_ref)
zinc_emulated_test(NAME engine_overflow_cuda_emulated_nccl_np2 SOURCE test_engine_overflow.c RANKS 2
                   ENV ZINC_TEST_DEVICE=cuda ZINC_CUDA_HOST_DEVICES=2)
zinc_emulated_test(NAME engine_memory_cuda_emulated_np2 SOURCE test_engine_memory.c RANKS 2
                   ENV ZINC_TEST_DEVICE=cuda ZINC_CUDA_HOST_DEVICES=2)
zinc_emulated_test(NAME offload_equiv_cuda_emulated_np2 SOURCE test_offload_equiv.c EXTRA zt_aio.c RANKS 2
                   ENV ZINC_TEST_DEVICE=cuda ZINC_CUDA_HOST_DEVICES=2)
zinc_emulated_test(NAME checkpoint_cuda_emulated_save_np2 SOURCE test_checkpoint.c RANKS 2
                   ARGS --phase save --set nvme --tree ckpt_test_cuda_emulated
                   ENV ZINC_TEST_DEVICE=cuda ZINC_CUDA_HOST_DEVICES=2 ZINC_TEST_MLP=host)
zinc_test(NAME checkpoint_cuda_emulated_resume_np2 SOURCES test_checkpoint.c engine_util.c RANKS 2
          ARGS --phase resume --set nvme --tree ckpt_test_cuda_emulated LABELS checkpoint)
set_tests_properties(checkpoint_cuda_emulated_save_np2 PROPERTIES FIXTURES_SETUP ckpt_cuda_emulated_saved)
set_tests_properties(checkpoint_cuda_emulated_resume_np2 PROPERTIES FIXTURES_REQUIRED ckpt_cuda_emulated_saved)

# GPT-2's GPU path (examples/gpt2/gpt2_cuda.c) on the emulation: its launchers run gpt2_layers.c
# (cuda_host/gpt2_kernels_host.c), cuBLAS is the emulated SGEMM. A second build without the GPU path checks
# the refusal a cuda engine gets there. Tests: tests/gpt2_cuda.cmake.
file(GLOB ZINC_GPT2_HOST_SOURCES CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/examples/gpt2/*.c)
list(FILTER ZINC_GPT2_HOST_SOURCES EXCLUDE REGEX "_cuda\\.c$")
list(FILTER ZINC_GPT2_HOST_SOURCES EXCLUDE REGEX "_avx(2|512)\\.c$") # zinc_gpt2_vecmath's
foreach(variant cuda_emulated nogpu_emulated)
  add_library(zinc_gpt2_${variant} STATIC ${ZINC_GPT2_HOST_SOURCES})
  target_include_directories(zinc_gpt2_${variant} PUBLIC ${PROJECT_SOURCE_DIR}/examples/gpt2 PRIVATE ${PROJECT_SOURCE_DIR})
  target_compile_options(zinc_gpt2_${variant} PRIVATE ${ZINC_WARN} -O2 -fno-math-errno)
  target_compile_definitions(zinc_gpt2_${variant} PRIVATE _GNU_SOURCE)
  target_link_libraries(zinc_gpt2_${variant} PUBLIC zinc_cuda_emulated PRIVATE ${ZINC_BLAS} zinc_gpt2_vecmath m)
endforeach()
target_sources(zinc_gpt2_cuda_emulated PRIVATE ${PROJECT_SOURCE_DIR}/examples/gpt2/gpt2_cuda.c
               ${CMAKE_CURRENT_SOURCE_DIR}/cuda_host/gpt2_kernels_host.c)
target_compile_definitions(zinc_gpt2_cuda_emulated PRIVATE ZINC_GPT2_CUDA=1)
target_link_libraries(zinc_gpt2_cuda_emulated PRIVATE zinc_cublas_loader_emulated)
# In the fast subset (label fast: scripts/test.sh without --full).
zinc_fast(cuda_host_blas_emulated kernels_lamb_cuda_emulated gpt2_cuda_refused_emulated
          engine_equiv_cuda_emulated_np1)
