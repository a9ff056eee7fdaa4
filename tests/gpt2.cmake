# GPT-2 example (examples/gpt2): layers against float64 references, whole-model gradient check, llm.c files.
zinc_test(NAME gpt2_layers SOURCES test_gpt2_layers.c LIBS zinc_gpt2 LABELS gpt2 unit)
zinc_test(NAME gpt2_grad SOURCES test_gpt2_grad.c LIBS zinc_gpt2 LABELS gpt2 unit)
# The fast CPU paths (blocked attention, GELU keeping its tanh, SLEEF's instances) against float64, and every
# layer bit for bit the same on 1, 2 and 3 threads.
zinc_test(NAME gpt2_blocked SOURCES test_gpt2_blocked.c LIBS zinc_gpt2 LABELS gpt2 unit)
zinc_test(NAME gpt2_files SOURCES test_gpt2_files.c LIBS zinc_gpt2 LABELS gpt2 unit)
# zinc_parallel_for, the engine API the model's loops run on (runtime/engine/engine_parallel.c).
zinc_test(NAME engine_parallel_for SOURCES test_parallel_for.c LABELS gpt2 unit)
# The tied embedding: one reduce-scatter per micro-step at stages 2-3, losses as at stage 0.
zinc_test(NAME gpt2_tied SOURCES test_gpt2_tied.c LIBS zinc_gpt2 LABELS gpt2 unit)
# The CLI end to end (tests/test_gpt2_cli.py, standard-library python3): error messages and llm.c file round
# trips; the stage x ranks x dtype matrix against the 1-rank stage-0 run; loss falling on a licence text
# that Debian's base-files installs.
find_program(ZINC_GPT2_PYTHON3 python3)
if(ZINC_GPT2_PYTHON3)
  string(REPLACE ";" " " zinc_gpt2_mpirun "${ZINC_MPIRUN}")
  foreach(part files matrix text)
    set(extra "")
    set(labels "gpt2")
    if(part STREQUAL "matrix")
      set(extra --matrix --mpirun "${zinc_gpt2_mpirun}")
      set(labels "gpt2;mpi")
    elseif(part STREQUAL "text")
      set(extra --text /usr/share/common-licenses/MPL-2.0)
    endif()
    add_test(NAME gpt2_cli_${part} COMMAND ${ZINC_GPT2_PYTHON3} ${CMAKE_CURRENT_SOURCE_DIR}/test_gpt2_cli.py
             --zinc $<TARGET_FILE:zinc_cli_hooks> --workdir ${PROJECT_BINARY_DIR}/gpt2_test/${part} ${extra})
    set(tmp ${PROJECT_BINARY_DIR}/test-tmp/gpt2_cli_${part})
    file(MAKE_DIRECTORY ${tmp})
    set_tests_properties(gpt2_cli_${part} PROPERTIES TIMEOUT 900 ENVIRONMENT "${ZINC_TEST_ENV};TMPDIR=${tmp}"
                         LABELS "${labels}" WORKING_DIRECTORY ${PROJECT_BINARY_DIR})
  endforeach()
endif()
# Hugging Face GPT-2 both ways (zinc train --init FILE.safetensors|DIR, zinc checkpoint export --format hf): byte for
# byte round trips at 1 rank and at 2 ranks ZeRO stage 3, F32 and BF16, and the error paths (tests/test_gpt2_hf.py,
# standard library); zinc's losses against transformers' GPT2LMHeadModel both ways with the DeepSpeed venv's
# Python (test_gpt2_hf_transformers.py, ZINC_DS_PYTHON: config.cmake; exit 77 without torch and transformers).
if(ZINC_GPT2_PYTHON3)
  add_test(NAME gpt2_hf COMMAND ${ZINC_GPT2_PYTHON3} ${CMAKE_CURRENT_SOURCE_DIR}/test_gpt2_hf.py
           --zinc $<TARGET_FILE:zinc_cli_hooks> --workdir ${PROJECT_BINARY_DIR}/gpt2_test/hf --mpirun "${zinc_gpt2_mpirun}")
  set_tests_properties(gpt2_hf PROPERTIES TIMEOUT 600 ENVIRONMENT "${ZINC_TEST_ENV}" LABELS "gpt2;mpi"
                       WORKING_DIRECTORY ${PROJECT_BINARY_DIR})
  set(zinc_hf_python "$ENV{ZINC_DS_PYTHON}")
  if(NOT zinc_hf_python)
    set(zinc_hf_python ${PROJECT_BINARY_DIR}/dsenv/bin/python3)
  endif()
  add_test(NAME gpt2_hf_transformers
           COMMAND sh -c "[ -x \"$0\" ] || { echo 'SKIP: no DeepSpeed venv at '$0' (scripts/ds-venv.sh)'; exit 77; }; exec \"$0\" \"$@\""
                   ${zinc_hf_python} ${CMAKE_CURRENT_SOURCE_DIR}/test_gpt2_hf_transformers.py
                   --zinc $<TARGET_FILE:zinc_cli_hooks> --workdir ${PROJECT_BINARY_DIR}/gpt2_test/hf_transformers
                   --mpirun "${zinc_gpt2_mpirun}")
  set_tests_properties(gpt2_hf_transformers PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600
                       ENVIRONMENT "${ZINC_TEST_ENV}" LABELS "gpt2;mpi;deepspeed" WORKING_DIRECTORY ${PROJECT_BINARY_DIR})
endif()
# GPT-2's own CUDA kernels (examples/gpt2/gpt2_kernels.cu) against gpt2_layers.c on a GPU (label gpu). Without
# one it checks the launchers' argument contract, then exits 77.
if(ZINC_HAVE_CUDA)
  zinc_test(NAME gpt2_kernels_cuda SOURCES test_gpt2_kernels_cuda.c LIBS zinc_gpt2 CUDA::cudart_static
            LABELS gpt2 gpu TIMEOUT 600)
endif()
# The same kernels' device code run on CPU threads under AddressSanitizer (tests/cuda_threads/run.sh: the
# .cu rewritten into host C++ with stand-ins for CUDA's headers; no CUDA toolkit needed), at small shapes,
# against gpt2_layers.c: index arithmetic, bounds and shared-memory sizes checked in CI. Skips without g++.
add_test(NAME gpt2_kernels_threads COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cuda_threads/run.sh address small
         ${PROJECT_BINARY_DIR}/cuda_threads-address)
set_tests_properties(gpt2_kernels_threads PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600 LABELS "gpt2;unit")
# The host's matrix product on OpenBLAS and oneDNN (examples/gpt2/gpt2_gemm.h) against float64, and oneDNN
# kept to the calling thread (OMP_NUM_THREADS=4 would give it a team of 4 otherwise).
zinc_test(NAME gpt2_gemm SOURCES test_gpt2_gemm.c LIBS zinc_gpt2 LABELS gpt2 unit ENV OMP_NUM_THREADS=4)
# Issue 43: a 5,000-step GPT-2 run's peak RSS within 10% of the 100-step run's (validation, samples, fp16 and
# CSV monitors on; small shape so it stays cheap: tests/test_long_run_memory.py).
if(ZINC_GPT2_PYTHON3)
  add_test(NAME gpt2_long_run_memory COMMAND ${ZINC_GPT2_PYTHON3} ${CMAKE_CURRENT_SOURCE_DIR}/test_long_run_memory.py
           --zinc $<TARGET_FILE:zinc_cli_hooks> --workdir ${PROJECT_BINARY_DIR}/gpt2_test/long_run_memory)
  set_tests_properties(gpt2_long_run_memory PROPERTIES TIMEOUT 600 ENVIRONMENT "${ZINC_TEST_ENV}" LABELS gpt2
                       WORKING_DIRECTORY ${PROJECT_BINARY_DIR})
endif()
# In the fast subset (label fast: scripts/test.sh without --full).
zinc_fast(engine_parallel_for gpt2_layers gpt2_grad gpt2_files gpt2_tied)
