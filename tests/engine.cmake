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
