# Engine tests. The equivalence reference (1 rank, stage 0) is a fixture the multi-rank runs compare with.
zinc_test(NAME engine_equiv_ref SOURCES test_engine_equiv.c engine_util.c ARGS --write-ref LABELS engine)
set_tests_properties(engine_equiv_ref PROPERTIES FIXTURES_SETUP equiv_ref)
zinc_test(NAME engine_equiv_np1 SOURCES test_engine_equiv.c engine_util.c LABELS engine)
set_tests_properties(engine_equiv_np1 PROPERTIES FIXTURES_REQUIRED equiv_ref)
foreach(n 2 3 4)
  zinc_test(NAME engine_equiv_np${n} SOURCES test_engine_equiv.c engine_util.c RANKS ${n} LABELS engine
            TIMEOUT 600)
  set_tests_properties(engine_equiv_np${n} PROPERTIES FIXTURES_REQUIRED equiv_ref)
endforeach()
# The same matrix with device buffers reduced and gathered through host staging (what ranks sharing a GPU
# use), 4 KiB of staging so every collective takes several rounds.
foreach(n 2 3)
  zinc_test(NAME engine_equiv_staged_np${n} SOURCES test_engine_equiv.c engine_util.c RANKS ${n} LABELS engine
            TIMEOUT 600 ENV ZINC_DEVICE_COMM=staged ZINC_STAGING_BYTES=4096)
  set_tests_properties(engine_equiv_staged_np${n} PROPERTIES FIXTURES_REQUIRED equiv_ref)
endforeach()
foreach(n 1 2 3)
  zinc_test(NAME engine_overflow_np${n} SOURCES test_engine_overflow.c engine_util.c RANKS ${n} LABELS engine)
  zinc_test(NAME engine_memory_np${n} SOURCES test_engine_memory.c engine_util.c RANKS ${n} LABELS engine)
endforeach()
zinc_test(NAME engine_memory_np4 SOURCES test_engine_memory.c engine_util.c RANKS 4 LABELS engine)
zinc_test(NAME engine_api SOURCES test_engine_api.c engine_util.c LABELS engine unit)

# The engine's GPU code paths on the CPU: ZINC_CPU_DISCRETE=1 presents the cpu device as a discrete one
# (buffers reached only through copies, device and pinned memory kinds, staged offload steps), the way
# device cuda drives the engine. Same reference and tolerances as above; with staged collectives too, as
# several ranks sharing one GPU run.
foreach(n 1 2 3)
  zinc_test(NAME engine_equiv_discrete_np${n} SOURCES test_engine_equiv.c engine_util.c RANKS ${n} LABELS engine
            TIMEOUT 600 ENV ZINC_CPU_DISCRETE=1)
  set_tests_properties(engine_equiv_discrete_np${n} PROPERTIES FIXTURES_REQUIRED equiv_ref)
endforeach()
zinc_test(NAME engine_equiv_discrete_staged_np2 SOURCES test_engine_equiv.c engine_util.c RANKS 2 LABELS engine
          TIMEOUT 600 ENV ZINC_CPU_DISCRETE=1 ZINC_DEVICE_COMM=staged ZINC_STAGING_BYTES=4096)
set_tests_properties(engine_equiv_discrete_staged_np2 PROPERTIES FIXTURES_REQUIRED equiv_ref)
zinc_test(NAME engine_memory_discrete_np2 SOURCES test_engine_memory.c engine_util.c RANKS 2 LABELS engine
          ENV ZINC_CPU_DISCRETE=1)
# Nested and re-entered modules, forward-only passes and refused call orders against a float64 reference
# (tests/test_engine_nesting.c), at 1-4 ranks.
foreach(n 1 2 3 4)
  zinc_test(NAME engine_nesting_np${n} SOURCES test_engine_nesting.c RANKS ${n} LABELS engine TIMEOUT 900)
endforeach()
foreach(n 1 2)
  zinc_test(NAME engine_nesting_discrete_np${n} SOURCES test_engine_nesting.c RANKS ${n} LABELS engine
            TIMEOUT 900 ENV ZINC_CPU_DISCRETE=1)
endforeach()
# The public header's conventions, the engine's idle kernel threads, per-engine thread counts, LR schedules.
zinc_test(NAME engine_api_conventions SOURCES test_api_conventions.c LABELS engine unit)
zinc_test(NAME engine_idle SOURCES test_engine_idle.c LABELS engine unit)
zinc_test(NAME engine_threads SOURCES test_engine_threads.c LABELS engine unit)
zinc_test(NAME engine_lr_schedule SOURCES test_lr_schedule.c LABELS engine unit)
# zinc_set_master and the unpadded module views (tests/test_engine_master.c): the 1-rank run writes the
# reference the 2-rank run compares with.
zinc_test(NAME engine_set_master_np1 SOURCES test_engine_master.c ARGS --write-ref LABELS engine)
set_tests_properties(engine_set_master_np1 PROPERTIES FIXTURES_SETUP set_master_ref)
zinc_test(NAME engine_set_master_np2 SOURCES test_engine_master.c RANKS 2 LABELS engine)
set_tests_properties(engine_set_master_np2 PROPERTIES FIXTURES_REQUIRED set_master_ref)
# zinc_build without an init function, per-tensor master weights in and out, and the scaled gradient adds
# (issue 41), at stages 0-3, fp32/bf16, memory/CPU/NVMe state, 1 and 2 ranks.
zinc_test(NAME engine_param_master_np1 SOURCES test_param_master.c engine_util.c LABELS engine)
zinc_test(NAME engine_param_master_np2 SOURCES test_param_master.c engine_util.c RANKS 2 LABELS engine)

# Issue 43: every LR schedule's lrs step for step against a real DeepSpeed 0.19.8 engine on the CPU
# (tests/test_lr_deepspeed.py, tests/ds_lr_reference.py): fp32, skipped steps, resumed runs. The Python with
# deepspeed and torch: ZINC_DS_PYTHON (config.cmake: build/dsenv from scripts/ds-venv.sh; the environment variable
# at test time overrides it); exit 77 (skipped, the reason printed) when it cannot import them.
find_program(ZINC_LR_PYTHON3 python3)
set(zinc_ds_python ${ZINC_DS_PYTHON})
if(ZINC_LR_PYTHON3)
  add_test(NAME engine_lr_deepspeed COMMAND ${ZINC_LR_PYTHON3} ${CMAKE_CURRENT_SOURCE_DIR}/test_lr_deepspeed.py
           --zinc $<TARGET_FILE:zinc_cli_hooks> --python ${zinc_ds_python} --workdir ${PROJECT_BINARY_DIR}/lr_deepspeed_test)
  set_tests_properties(engine_lr_deepspeed PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 900 ENVIRONMENT "${ZINC_TEST_ENV}"
                       LABELS engine WORKING_DIRECTORY ${PROJECT_BINARY_DIR})
endif()
# In the fast subset (label fast: scripts/test.sh without --full).
zinc_fast(engine_equiv_ref engine_equiv_np2 engine_overflow_np1 engine_memory_np1 engine_api engine_api_conventions
          engine_nesting_np1 engine_lr_schedule engine_threads engine_set_master_np1 engine_param_master_np1)
