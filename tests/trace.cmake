# Issue 26, item 1: the timeline (`zinc train --trace FILE`, zinc_options.trace_path; base/core/trace.c,
# runtime/engine/engine_trace.c). tests/test_trace.py parses the file with Python's json: one process per
# rank at 1, 2 and 4 ranks, spans nesting on every track, the step window, module names, collectives with
# bytes, NVMe and checkpoint spans, overlap_comm's reduce-scatters overlapping backward (and not without it),
# and the refusals (--trace-steps, an unwritable path, an existing file without --force).
find_program(ZINC_TRACE_PYTHON3 python3)
if(ZINC_TRACE_PYTHON3)
  string(REPLACE ";" " " zinc_trace_mpirun "${ZINC_MPIRUN}")
  foreach(part ranks stages clock overlap offload gpt2 errors)
    add_test(NAME trace_${part} COMMAND ${ZINC_TRACE_PYTHON3} ${CMAKE_CURRENT_SOURCE_DIR}/test_trace.py
             --part ${part} --zinc $<TARGET_FILE:zinc_cli_hooks> --workdir ${PROJECT_BINARY_DIR}/trace_test/${part}
             --mpirun "${zinc_trace_mpirun}")
    set(tmp ${PROJECT_BINARY_DIR}/test-tmp/trace_${part})
    file(MAKE_DIRECTORY ${tmp})
    set_tests_properties(trace_${part} PROPERTIES TIMEOUT 600 ENVIRONMENT "${ZINC_TEST_ENV};TMPDIR=${tmp}"
                         LABELS "trace;mpi" WORKING_DIRECTORY ${PROJECT_BINARY_DIR})
  endforeach()
endif()
# The recorder alone: spans from many threads, the cap (dropped spans counted, nothing grown), names escaped,
# the window, and the library's options (trace_path errors) through the public API.
zinc_test(NAME trace_recorder SOURCES test_trace_recorder.c engine_util.c LABELS trace)
# The GPU device's stream events (cudaEvent pairs resolved after the step) on the CUDA emulation: module
# spans on the compute stream, reduce-scatters on the comm stream (NCCL, 2 emulated GPUs), pinned copies on
# the copy stream (cpu offload).
zinc_emulated_test(NAME trace_cuda_emulated_np2 SOURCE test_trace_cuda.c RANKS 2 ENV ZINC_CUDA_HOST_DEVICES=2)
# The same on a real GPU (label gpu; 77 without one).
if(ZINC_HAVE_CUDA)
  zinc_test(NAME trace_cuda SOURCES test_trace_cuda.c engine_util.c LABELS gpu trace TIMEOUT 600)
endif()
# Issue 43: --trace-per-rank's files (distributedInfo, ProfilerStep markers) read by HolisticTraceAnalysis as
# 2 ranks with their collectives (tests/test_trace_hta.py). The Python with HolisticTraceAnalysis: ZINC_HTA_PYTHON
# (at test time), else ZINC_VENV_PYTHON (tests/CMakeLists.txt); exit 77 (skipped, the reason printed) after the
# file checks when it cannot import it.
find_program(ZINC_HTA_PYTHON3 python3)
set(zinc_hta_python ${ZINC_VENV_PYTHON})
if(ZINC_HTA_PYTHON3)
  string(REPLACE ";" " " zinc_hta_mpirun "${ZINC_MPIRUN}")
  add_test(NAME trace_hta COMMAND ${ZINC_HTA_PYTHON3} ${CMAKE_CURRENT_SOURCE_DIR}/test_trace_hta.py
           --zinc $<TARGET_FILE:zinc_cli_hooks> --workdir ${PROJECT_BINARY_DIR}/trace_hta_test
           --mpirun "${zinc_hta_mpirun}" --python ${zinc_hta_python})
  set_tests_properties(trace_hta PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600 ENVIRONMENT "${ZINC_TEST_ENV}"
                       LABELS "trace;mpi" WORKING_DIRECTORY ${PROJECT_BINARY_DIR})
endif()
# In the fast subset (label fast: scripts/test.sh without --full).
zinc_fast(trace_recorder trace_errors)
