# comms_logger (base/comm/comm_log.c, docs/comms.md): the logger under the collectives, without a launcher
# and at 2-4 ranks; then zinc train end to end: the bytes per step equal each ZeRO stage's volume computed from
# the model's shapes (tests/test_comms_volume.py), the MLP and GPT-2 at stages 0-3, 2, 3 and 4 ranks.
zinc_test(NAME comms_log SOURCES test_comms_log.c LABELS comms comm unit TIMEOUT 120)
foreach(n 2 3 4)
  zinc_test(NAME comms_log_np${n} SOURCES test_comms_log.c RANKS ${n} LABELS comms comm TIMEOUT 300)
endforeach()
find_program(ZINC_COMMS_PYTHON3 python3)
if(ZINC_COMMS_PYTHON3)
  string(REPLACE ";" " " zinc_comms_mpirun "${ZINC_MPIRUN}")
  foreach(n 2 3 4)
    add_test(NAME comms_volume_np${n} COMMAND ${ZINC_COMMS_PYTHON3} ${CMAKE_CURRENT_SOURCE_DIR}/test_comms_volume.py
             --zinc $<TARGET_FILE:zinc_cli_hooks> --mpirun "${zinc_comms_mpirun}" --np ${n}
             --workdir ${PROJECT_BINARY_DIR}/comms_test/np${n})
    set(tmp ${PROJECT_BINARY_DIR}/test-tmp/comms_volume_np${n})
    file(MAKE_DIRECTORY ${tmp})
    set_tests_properties(comms_volume_np${n} PROPERTIES TIMEOUT 900 ENVIRONMENT "${ZINC_TEST_ENV};TMPDIR=${tmp}"
                         LABELS "comms;cli;mpi" WORKING_DIRECTORY ${PROJECT_BINARY_DIR})
  endforeach()
endif()
# The engine API (zinc_comms_summary) at each stage, on cpu over MPI and on the CUDA emulation over NCCL (its
# non-blocking collectives completed by the stream wait the logger times) and over MPI through pinned staging.
zinc_test(NAME comms_engine_np2 SOURCES test_comms_engine.c engine_util.c RANKS 2 LABELS comms engine TIMEOUT 300)
zinc_test(NAME comms_engine_np3 SOURCES test_comms_engine.c engine_util.c RANKS 3 LABELS comms engine TIMEOUT 300)
# (Its CUDA emulation variants are in cuda_emulated_comms.cmake, read after cuda_emulated.cmake defines them.)
# In the fast subset (label fast: scripts/test.sh without --full).
zinc_fast(comms_log comms_engine_np2)
