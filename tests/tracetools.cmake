# The trace tools and FLOPs (cli/cmd_trace.c, cli/trace_*.c, cli/train_flops.c, runtime/engine/engine_flops.c):
# tests/test_tracetools.py against the hand-written fixture traces in tests/trace_fixtures/ (summary, plot)
# and zinc train's FLOP/s and MFU (flops), real traces of zinc train --trace (real: GPT-2 at 2 ranks with and
# without overlap_comm, the MLP), and the public FLOPs API (test_flops_api.c).
zinc_test(NAME tracetools_flops_api SOURCES test_flops_api.c LABELS tracetools unit)
find_program(ZINC_TRACETOOLS_PYTHON3 python3)
if(ZINC_TRACETOOLS_PYTHON3)
  string(REPLACE ";" " " zinc_tracetools_mpirun "${ZINC_MPIRUN}")
  foreach(part summary plot flops real)
    set(extra "")
    set(labels "tracetools;cli")
    if(part STREQUAL "flops" OR part STREQUAL "real")
      set(extra --mpirun "${zinc_tracetools_mpirun}")
      set(labels "tracetools;cli;mpi")
    endif()
    add_test(NAME tracetools_${part}
             COMMAND ${ZINC_TRACETOOLS_PYTHON3} ${CMAKE_CURRENT_SOURCE_DIR}/test_tracetools.py --part ${part}
                     --zinc $<TARGET_FILE:zinc_cli_hooks> --fixtures ${CMAKE_CURRENT_SOURCE_DIR}/trace_fixtures
                     --workdir ${PROJECT_BINARY_DIR}/tracetools_test/${part} ${extra})
    set_tests_properties(tracetools_${part} PROPERTIES TIMEOUT 600 ENVIRONMENT "${ZINC_TEST_ENV}"
                         LABELS "${labels}" SKIP_RETURN_CODE 77)
  endforeach()
endif()
# In the fast subset (label fast: scripts/test.sh without --full).
zinc_fast(tracetools_flops_api tracetools_summary)
