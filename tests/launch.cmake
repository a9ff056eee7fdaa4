# Issue 27: zinc launch, the elastic agent (tests/test_launch.py). launch_single: one machine, plain mpirun (a
# rank killed and restarted, reported, bitwise; SIGTERM to the launcher saves the job, 114; usage errors).
# launch_netns: two "nodes" in network namespaces joined by a veth pair (scripts/netns-cluster.sh; root only,
# skipped otherwise): 2 nodes bitwise equal to 1 at stages 1-3, a node lost and the job restarted on the other
# with fewer ranks, SIGTERM across nodes. ZINC_TEST_SEED=N repeats the kill times.
find_program(ZINC_LAUNCH_PYTHON3 python3)
if(ZINC_LAUNCH_PYTHON3)
  string(REPLACE ";" " " zinc_launch_mpirun "${ZINC_MPIRUN}")
  foreach(part single netns)
    add_test(NAME launch_${part} COMMAND ${ZINC_LAUNCH_PYTHON3} ${CMAKE_CURRENT_SOURCE_DIR}/test_launch.py
             --part ${part} --zinc $<TARGET_FILE:zinc_cli_hooks> --workdir ${PROJECT_BINARY_DIR}/launch_test/${part}
             --source ${PROJECT_SOURCE_DIR} --mpirun "${zinc_launch_mpirun}")
    set(tmp ${PROJECT_BINARY_DIR}/test-tmp/launch_${part})
    file(MAKE_DIRECTORY ${tmp})
    set_tests_properties(launch_${part} PROPERTIES TIMEOUT 900 ENVIRONMENT "${ZINC_TEST_ENV};TMPDIR=${tmp}"
                         LABELS "cli;mpi" SKIP_RETURN_CODE 77 WORKING_DIRECTORY ${PROJECT_BINARY_DIR})
  endforeach()
endif()
