# Issue 27: jobs that survive. zinc train stopped by SIGTERM/SIGINT/SIGUSR1 at random points of its steps and
# saves, on one rank or all, 1 and 2 ranks (tests/test_preempt.py): exit 114 "saved at step k, resumable",
# NVMe swap files removed, the resumed run bitwise equal to an uninterrupted one (--report checksums); a
# second signal during the save leaves the previous `latest` loadable. ZINC_TEST_SEED=N repeats the timings.
find_program(ZINC_PREEMPT_PYTHON3 python3)
if(ZINC_PREEMPT_PYTHON3)
  string(REPLACE ";" " " zinc_preempt_mpirun "${ZINC_MPIRUN}")
  foreach(part mlp gpt2 twice keep world launch)
    add_test(NAME preempt_${part} COMMAND ${ZINC_PREEMPT_PYTHON3} ${CMAKE_CURRENT_SOURCE_DIR}/test_preempt.py
             --part ${part} --zinc $<TARGET_FILE:zinc_cli_hooks> --workdir ${PROJECT_BINARY_DIR}/preempt_test/${part}
             --mpirun "${zinc_preempt_mpirun}")
    set(tmp ${PROJECT_BINARY_DIR}/test-tmp/preempt_${part})
    file(MAKE_DIRECTORY ${tmp})
    set_tests_properties(preempt_${part} PROPERTIES TIMEOUT 900 ENVIRONMENT "${ZINC_TEST_ENV};TMPDIR=${tmp}"
                         LABELS "checkpoint;mpi" WORKING_DIRECTORY ${PROJECT_BINARY_DIR})
  endforeach()
endif()
# The library side: zinc_options.preempt, zinc_step_info.preempt_signal and zinc_preempt_requested, a signal
# raised on one rank at a random step agreed on by every rank at that step.
zinc_test(NAME preempt_api_np1 SOURCES test_preempt_api.c engine_util.c LABELS engine)
zinc_test(NAME preempt_api_np2 SOURCES test_preempt_api.c engine_util.c RANKS 2 LABELS engine)
# In the fast subset (label fast: scripts/test.sh without --full).
zinc_fast(preempt_api_np1)
