# Issue 27, item 4b: zinc under a real one-node Slurm (munged, slurmctld, slurmd from Debian's packages, started
# by the test in a temporary directory, as root). `srun -n 2 zinc train` bitwise equal to mpirun's job,
# `scancel --signal=USR1` saving and resuming bitwise, `zinc launch` inside `salloc` starting ranks with srun
# and restarting a killed rank from the checkpoint, a preempted job not restarted (tests/test_slurm.py).
# Skips (77) with the reason without root, without the packages (scripts/install-deps.sh) or when a daemon
# does not start.
find_program(ZINC_SLURM_PYTHON3 python3)
if(ZINC_SLURM_PYTHON3)
  string(REPLACE ";" " " zinc_slurm_mpirun "${ZINC_MPIRUN}")
  add_test(NAME slurm_one_node COMMAND ${ZINC_SLURM_PYTHON3} ${CMAKE_CURRENT_SOURCE_DIR}/test_slurm.py
           --zinc $<TARGET_FILE:zinc_cli_hooks> --workdir ${PROJECT_BINARY_DIR}/slurm_test --mpirun "${zinc_slurm_mpirun}")
  set(tmp ${PROJECT_BINARY_DIR}/test-tmp/slurm_one_node)
  file(MAKE_DIRECTORY ${tmp})
  set_tests_properties(slurm_one_node PROPERTIES TIMEOUT 600 SKIP_RETURN_CODE 77 LABELS "slurm;mpi"
                       ENVIRONMENT "${ZINC_TEST_ENV};TMPDIR=${tmp}" WORKING_DIRECTORY ${PROJECT_BINARY_DIR})
endif()
