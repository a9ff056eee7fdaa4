# DeepSpeed's tensorboard and csv_monitor (runtime/monitor, docs/monitors.md): the writer on its own (files
# byte for byte, every refusal, a disk that fills up), the engine feeding it at 1-2 ranks, and zinc train's
# files read back by the tensorboard package's reader against --report. That last test needs a Python with
# the tensorboard package (ZINC_VENV_PYTHON, tests/CMakeLists.txt); it exits 77 (skipped) only when that
# Python cannot import it.
zinc_test(NAME monitor_files SOURCES test_monitor.c LABELS monitor unit)
zinc_test(NAME monitor_engine_np1 SOURCES test_monitor_engine.c engine_util.c LABELS monitor)
zinc_test(NAME monitor_engine_np2 SOURCES test_monitor_engine.c engine_util.c RANKS 2 LABELS monitor)
find_program(ZINC_MONITOR_PYTHON3 python3)
set(zinc_tb_python ${ZINC_VENV_PYTHON})
if(zinc_tb_python)
  string(REPLACE ";" " " zinc_monitor_mpirun "${ZINC_MPIRUN}")
  add_test(NAME monitor_tensorboard COMMAND ${zinc_tb_python} ${CMAKE_CURRENT_SOURCE_DIR}/test_monitor_cli.py
           --zinc $<TARGET_FILE:zinc_cli_hooks> --workdir ${PROJECT_BINARY_DIR}/monitor_test
           --mpirun "${zinc_monitor_mpirun}")
  set_tests_properties(monitor_tensorboard PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600 ENVIRONMENT "${ZINC_TEST_ENV}"
                       LABELS "monitor;mpi" WORKING_DIRECTORY ${PROJECT_BINARY_DIR})
else()
  message(STATUS "zinc: no python3 found; the test monitor_tensorboard is not registered")
endif()
# Issue 43: wall_clock_breakdown (DeepSpeed's timer lines and its five Train/Samples/elapsed_time_ms_* scalars),
# grad_norm, samples/s, FLOP/s and eval_loss in the monitors, and --quiet quiet (tests/test_wallclock.py,
# standard library only).
if(ZINC_MONITOR_PYTHON3)
  string(REPLACE ";" " " zinc_wallclock_mpirun "${ZINC_MPIRUN}")
  add_test(NAME monitor_wallclock COMMAND ${ZINC_MONITOR_PYTHON3} ${CMAKE_CURRENT_SOURCE_DIR}/test_wallclock.py
           --zinc $<TARGET_FILE:zinc_cli_hooks> --workdir ${PROJECT_BINARY_DIR}/wallclock_test
           --mpirun "${zinc_wallclock_mpirun}")
  set_tests_properties(monitor_wallclock PROPERTIES TIMEOUT 300 ENVIRONMENT "${ZINC_TEST_ENV}"
                       LABELS "monitor;mpi" WORKING_DIRECTORY ${PROJECT_BINARY_DIR})
endif()
# In the fast subset (label fast: scripts/test.sh without --full).
zinc_fast(monitor_files monitor_engine_np1)
