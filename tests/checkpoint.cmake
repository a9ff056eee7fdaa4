# Checkpoint tests (docs/checkpoints.md).
#
# Resume matrix: checkpoint_save_npW saves every scenario whose source has W ranks (a fixture); checkpoint_resume_npW
# loads every scenario whose target has W ranks and compares with the uninterrupted run.
foreach(n 1 2 3 4)
  if(n EQUAL 1)
    zinc_test(NAME checkpoint_save_np${n} SOURCES test_checkpoint.c engine_util.c ARGS --phase save LABELS checkpoint)
    zinc_test(NAME checkpoint_resume_np${n} SOURCES test_checkpoint.c engine_util.c ARGS --phase resume
              LABELS checkpoint)
  else()
    zinc_test(NAME checkpoint_save_np${n} SOURCES test_checkpoint.c engine_util.c RANKS ${n} ARGS --phase save
              LABELS checkpoint)
    zinc_test(NAME checkpoint_resume_np${n} SOURCES test_checkpoint.c engine_util.c RANKS ${n} ARGS --phase resume
              LABELS checkpoint)
  endif()
  set_tests_properties(checkpoint_save_np${n} PROPERTIES FIXTURES_SETUP ckpt_saved_np${n})
endforeach()
foreach(n 1 2 3 4)
  set_tests_properties(checkpoint_resume_np${n} PROPERTIES
                       FIXTURES_REQUIRED "ckpt_saved_np1;ckpt_saved_np2;ckpt_saved_np3;ckpt_saved_np4")
endforeach()
# The same with the optimizer state on NVMe (exit 77 while the NVMe store is not available).
zinc_test(NAME checkpoint_nvme_save_np2 SOURCES test_checkpoint.c engine_util.c RANKS 2 ARGS --phase save --set nvme
          LABELS checkpoint)
zinc_test(NAME checkpoint_nvme_resume_np2 SOURCES test_checkpoint.c engine_util.c RANKS 2 ARGS --phase resume --set nvme
          LABELS checkpoint)
set_tests_properties(checkpoint_nvme_save_np2 PROPERTIES FIXTURES_SETUP ckpt_nvme_saved)
set_tests_properties(checkpoint_nvme_resume_np2 PROPERTIES FIXTURES_REQUIRED ckpt_nvme_saved)
# Saved from a discrete device (ZINC_CPU_DISCRETE=1: device-resident parameters, NVMe state behind the
# staged step), resumed on the plain cpu device: checkpoints do not depend on the device that wrote them.
zinc_test(NAME checkpoint_discrete_save_np2 SOURCES test_checkpoint.c engine_util.c RANKS 2
          ARGS --phase save --set nvme --tree ckpt_test_discrete LABELS checkpoint ENV ZINC_CPU_DISCRETE=1)
zinc_test(NAME checkpoint_discrete_resume_np2 SOURCES test_checkpoint.c engine_util.c RANKS 2
          ARGS --phase resume --set nvme --tree ckpt_test_discrete LABELS checkpoint)
set_tests_properties(checkpoint_discrete_save_np2 PROPERTIES FIXTURES_SETUP ckpt_discrete_saved)
set_tests_properties(checkpoint_discrete_resume_np2 PROPERTIES FIXTURES_REQUIRED ckpt_discrete_saved)
# An interrupted save (SIGKILL part-way, through ZINC_CKPT_TEST_KILL_AFTER_BYTES) leaves the previous
# checkpoint loadable. One process without MPI: it forks its engines.
zinc_test(NAME checkpoint_kill SOURCES test_checkpoint_kill.c engine_util.c LABELS checkpoint)
# checkpoint.writer.decoupled: bitwise equal to a synchronous save, resume, a failing writer (1 and 2 ranks);
# SIGKILLs of the writer thread mid-write leave the previous `latest` (one rank, forked engines).
zinc_test(NAME checkpoint_async_np1 SOURCES test_checkpoint_async.c engine_util.c LABELS checkpoint)
zinc_test(NAME checkpoint_async_np2 SOURCES test_checkpoint_async.c engine_util.c RANKS 2 LABELS checkpoint)
zinc_test(NAME checkpoint_async_kill SOURCES test_checkpoint_async.c engine_util.c ARGS --phase kill LABELS checkpoint)
# 20 SIGKILLs at random times of a 24-step run saving every 3 steps (the writer slowed, so most land while a
# save is written): each leaves a `latest` whose files verify and which loads its step's weights bitwise.
zinc_test(NAME checkpoint_async_kill20 SOURCES test_checkpoint_async.c engine_util.c ARGS --phase kill20 LABELS checkpoint)
# The writer's checksums taken as it copies equal the pass over the image (checkpoint_segs.c).
zinc_test(NAME checkpoint_segs FAST SOURCES test_checkpoint_segs.c LABELS checkpoint)
# Damaged files, another model, tag validation, node-local storage.
zinc_test(NAME checkpoint_errors_np1 SOURCES test_checkpoint_errors.c engine_util.c LABELS checkpoint)
zinc_test(NAME checkpoint_errors_np2 SOURCES test_checkpoint_errors.c engine_util.c RANKS 2 LABELS checkpoint)
# The CLI end to end (zinc train --save/--resume, zinc checkpoint inspect) with the standard-library
# python3, and the safetensors export read back by Python's safetensors package (ZINC_VENV_PYTHON,
# tests/CMakeLists.txt; exit 77 when it lacks safetensors or numpy).
set(zinc_st_python ${ZINC_VENV_PYTHON})
string(REPLACE ";" " " zinc_mpirun_str "${ZINC_MPIRUN}")
if(ZINC_PYTHON3_EXE)
  add_test(NAME checkpoint_cli COMMAND ${ZINC_PYTHON3_EXE} ${CMAKE_CURRENT_SOURCE_DIR}/test_safetensors.py --cli-only
           --zinc $<TARGET_FILE:zinc_cli_hooks> --workdir ${PROJECT_BINARY_DIR}/ckpt_test/cli --mpirun "${zinc_mpirun_str}")
  set_tests_properties(checkpoint_cli PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300 ENVIRONMENT "${ZINC_TEST_ENV}"
                       LABELS "checkpoint;mpi" WORKING_DIRECTORY ${PROJECT_BINARY_DIR})
endif()
if(zinc_st_python)
  add_test(NAME checkpoint_safetensors COMMAND ${zinc_st_python} ${CMAKE_CURRENT_SOURCE_DIR}/test_safetensors.py
           --zinc $<TARGET_FILE:zinc_cli_hooks> --workdir ${PROJECT_BINARY_DIR}/ckpt_test/safetensors
           --mpirun "${zinc_mpirun_str}")
  set_tests_properties(checkpoint_safetensors PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300 ENVIRONMENT "${ZINC_TEST_ENV}"
                       LABELS "checkpoint;mpi" WORKING_DIRECTORY ${PROJECT_BINARY_DIR})
else()
  message(STATUS "zinc: no python3 found; the checkpoint CLI and safetensors tests are not registered")
endif()
# Issue 18: every single-bit flip of a manifest refused, edited-and-resealed manifests refused field by
# field, FIFOs in place of checkpoint files refused without blocking.
zinc_test(NAME checkpoint_manifest SOURCES test_checkpoint_manifest.c engine_util.c LABELS checkpoint TIMEOUT 600)
# Issue 18: two savers (the directory lock), a portable re-save killed between its renames, planted links,
# directories of other users or open to all, export refusing what it must not replace.
zinc_test(NAME checkpoint_safety SOURCES test_checkpoint_safety.c engine_util.c LABELS checkpoint TIMEOUT 600)
# In the fast subset (label fast: scripts/test.sh without --full).
zinc_fast(checkpoint_save_np1 checkpoint_resume_np1 checkpoint_errors_np1 checkpoint_manifest checkpoint_safety)
