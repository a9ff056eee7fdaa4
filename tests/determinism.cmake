# zinc.deterministic_reduction (zero/grads_determ.c, runtime/engine/engine_determ.c): `zinc train` with the
# same global batch split as 1 rank x 4 micro-steps, 2 x 2 and 4 x 1 at ZeRO stages 0-3 ends bitwise equal
# with the key and differs without it; its refusals (tests/test_determinism.py).
find_program(ZINC_DETERMINISM_PYTHON3 python3)
if(ZINC_DETERMINISM_PYTHON3)
  string(REPLACE ";" " " zinc_determinism_mpirun "${ZINC_MPIRUN}")
  foreach(part mlp gpt2 errors)
    set(name determinism_${part})
    if(NOT part STREQUAL "errors")
      set(name determinism_${part}_np4)
    endif()
    add_test(NAME ${name} COMMAND ${ZINC_DETERMINISM_PYTHON3} ${CMAKE_CURRENT_SOURCE_DIR}/test_determinism.py
             --zinc $<TARGET_FILE:zinc_cli_hooks> --mpirun "${zinc_determinism_mpirun}"
             --workdir ${PROJECT_BINARY_DIR}/determinism_test/${part} --part ${part})
    set(tmp ${PROJECT_BINARY_DIR}/test-tmp/${name})
    file(MAKE_DIRECTORY ${tmp})
    set_tests_properties(${name} PROPERTIES TIMEOUT 600 ENVIRONMENT "${ZINC_TEST_ENV};TMPDIR=${tmp}"
                         LABELS "determinism;mpi" WORKING_DIRECTORY ${PROJECT_BINARY_DIR})
  endforeach()
endif()
# The sum itself without an engine: bit for bit the explicit pairwise tree over 8 leaves at 1, 2 and 4 ranks,
# stages 0-3, small and large buckets (tests/test_grads_determ.c).
zinc_test(NAME determinism_grads SOURCES test_grads_determ.c zero_fixture.c LABELS determinism unit)
zinc_test(NAME determinism_grads_np2 SOURCES test_grads_determ.c zero_fixture.c RANKS 2 LABELS determinism)
zinc_test(NAME determinism_grads_np4 SOURCES test_grads_determ.c zero_fixture.c RANKS 4 LABELS determinism)
# In the fast subset (label fast: scripts/test.sh without --full).
zinc_fast(determinism_errors)
