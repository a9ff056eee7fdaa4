# ds_config loader tests (issue 2): the table-driven unit tests, every ds_configs/*.json, the CLI, and the
# loader fuzz target.
# The loader, table-driven, by topic; config_test_keys.c holds the key table, config_test_util.c the helpers.
foreach(topic schema spellings rules input)
  zinc_test(NAME config_${topic} SOURCES test_config_${topic}.c config_test_util.c config_test_keys.c
            LABELS config unit)
endforeach()
zinc_test(NAME config_files SOURCES test_config_files.c LABELS config unit)
zinc_test(NAME config_auto SOURCES test_config_auto.c LABELS config unit)
zinc_test(NAME config_corpus SOURCES test_config_corpus.c LABELS config unit)
zinc_test(NAME config_cli SOURCES test_config_cli.c LABELS config cli)
add_dependencies(test_config_cli zinc_cli_hooks)

# ---------------------------------------------------------------- fuzzing the loader
# The loader's sources are built straight into the fuzz programs, so they can carry sanitizers without the
# shared library (and MPI) being instrumented.
set(ZINC_CONFIG_LOADER_SOURCES
    ${PROJECT_SOURCE_DIR}/base/config/config_load.c ${PROJECT_SOURCE_DIR}/base/config/config_resolve.c
    ${PROJECT_SOURCE_DIR}/base/config/config_auto.c ${PROJECT_SOURCE_DIR}/base/config/config_override.c
    ${PROJECT_SOURCE_DIR}/base/config/config_schema.c ${PROJECT_SOURCE_DIR}/base/config/config_dump.c
    ${PROJECT_SOURCE_DIR}/base/config/config_monitor.c
    ${PROJECT_SOURCE_DIR}/base/config/config_determinism.c ${PROJECT_SOURCE_DIR}/base/config/config_zeropp.c
    ${PROJECT_SOURCE_DIR}/base/core/error.c ${PROJECT_SOURCE_DIR}/base/core/log.c ${PROJECT_SOURCE_DIR}/base/core/dtype.c
    ${PROJECT_SOURCE_DIR}/base/core/env.c ${PROJECT_SOURCE_DIR}/base/core/signals.c)
set(ZINC_CONFIG_LOADER_HEADERS
    ${PROJECT_SOURCE_DIR}/include/zinc.h ${PROJECT_SOURCE_DIR}/base/config/config.h
    ${PROJECT_SOURCE_DIR}/base/config/config_schema.h ${PROJECT_SOURCE_DIR}/base/config/config_internal.h
    ${PROJECT_SOURCE_DIR}/base/core/error.h ${PROJECT_SOURCE_DIR}/base/core/log.h)
set(ZINC_FUZZ_SEEDS ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/corpus ${PROJECT_SOURCE_DIR}/ds_configs)

# The standalone driver (any C compiler): seeds, then a bounded deterministic mutation loop. With gcc or
# clang it runs under AddressSanitizer and UndefinedBehaviorSanitizer when they work here.
include(CheckCSourceRuns)
set(CMAKE_REQUIRED_FLAGS "-fsanitize=address,undefined")
set(CMAKE_REQUIRED_LINK_OPTIONS "-fsanitize=address,undefined")
check_c_source_runs("int main(void) { return 0; }" ZINC_HAVE_ASAN_UBSAN)
unset(CMAKE_REQUIRED_FLAGS)
unset(CMAKE_REQUIRED_LINK_OPTIONS)

add_executable(fuzz_config fuzz/fuzz_config.c ${ZINC_CONFIG_LOADER_SOURCES})
target_include_directories(fuzz_config PRIVATE ${PROJECT_SOURCE_DIR}/include ${PROJECT_SOURCE_DIR})
target_compile_definitions(fuzz_config PRIVATE _GNU_SOURCE)
target_compile_options(fuzz_config PRIVATE ${ZINC_WARN})
target_link_libraries(fuzz_config PRIVATE PkgConfig::JANSSON m)
if(ZINC_HAVE_ASAN_UBSAN)
  target_compile_options(fuzz_config PRIVATE -fsanitize=address,undefined -fno-sanitize-recover=all
                         -fno-omit-frame-pointer)
  target_link_options(fuzz_config PRIVATE -fsanitize=address,undefined)
endif()
add_test(NAME config_fuzz COMMAND fuzz_config --iterations 20000 --seed 1 --max-seconds 45 ${ZINC_FUZZ_SEEDS})
set_tests_properties(config_fuzz PROPERTIES LABELS "fuzz;config" TIMEOUT 120
                     ENVIRONMENT "ASAN_OPTIONS=detect_leaks=1:abort_on_error=1;UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1")

# A real libFuzzer binary when clang with -fsanitize=fuzzer is available (ZINC_FUZZ=ON requires it). Its test
# is a bounded run from the same seeds; new inputs go to a scratch directory.
find_program(ZINC_CLANG NAMES clang clang-19 clang-18 clang-17 clang-16 clang-15 clang-14)
if(ZINC_CLANG AND NOT DEFINED ZINC_LIBFUZZER_WORKS)
  set(probe ${CMAKE_CURRENT_BINARY_DIR}/libfuzzer_probe.c)
  file(WRITE ${probe} "#include <stddef.h>\n#include <stdint.h>\n"
       "int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { (void)d; (void)n; return 0; }\n")
  execute_process(COMMAND ${ZINC_CLANG} -fsanitize=fuzzer,address,undefined ${probe}
                          -o ${CMAKE_CURRENT_BINARY_DIR}/libfuzzer_probe
                  RESULT_VARIABLE probe_rc OUTPUT_QUIET ERROR_QUIET)
  if(probe_rc EQUAL 0)
    set(ZINC_LIBFUZZER_WORKS ON CACHE INTERNAL "clang links -fsanitize=fuzzer")
  else()
    set(ZINC_LIBFUZZER_WORKS OFF CACHE INTERNAL "clang links -fsanitize=fuzzer")
  endif()
endif()
if(ZINC_FUZZ AND NOT ZINC_LIBFUZZER_WORKS)
  message(FATAL_ERROR "ZINC_FUZZ=ON but no clang that links -fsanitize=fuzzer was found")
endif()
if(ZINC_LIBFUZZER_WORKS)
  set(fz ${CMAKE_CURRENT_BINARY_DIR}/fuzz_config_libfuzzer)
  set(fz_flags -g -O1 -std=c11 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
               -DZINC_LIBFUZZER -D_GNU_SOURCE -I${PROJECT_SOURCE_DIR}/include -I${PROJECT_SOURCE_DIR})
  foreach(d ${JANSSON_INCLUDE_DIRS})
    list(APPEND fz_flags -I${d})
  endforeach()
  add_custom_command(OUTPUT ${fz}
                     COMMAND ${ZINC_CLANG} ${fz_flags} ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/fuzz_config.c
                             ${ZINC_CONFIG_LOADER_SOURCES} ${JANSSON_LINK_LIBRARIES} -lm -o ${fz}
                     DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/fuzz_config.c ${ZINC_CONFIG_LOADER_SOURCES}
                             ${ZINC_CONFIG_LOADER_HEADERS}
                     COMMENT "Building the libFuzzer target fuzz_config_libfuzzer with ${ZINC_CLANG}"
                     COMMAND_EXPAND_LISTS VERBATIM)
  add_custom_target(fuzz_config_libfuzzer ALL DEPENDS ${fz})
  add_test(NAME config_libfuzzer
           COMMAND sh -c "d=$(mktemp -d) || exit 1; \"$0\" -runs=20000 -seed=1 -max_total_time=30 \"$d\" \"$@\"; rc=$?; rm -rf \"$d\"; exit $rc"
                   ${fz} ${ZINC_FUZZ_SEEDS})
  set_tests_properties(config_libfuzzer PROPERTIES LABELS "fuzz;config" TIMEOUT 120
                       ENVIRONMENT "UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1")
endif()

# A config problem under mpirun: one message per job, every problem of the file in it (issue 14).
add_test(NAME config_once_per_job
         COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/config_once_per_job.sh ${ZINC_MPIRUN} $<TARGET_FILE:zinc_cli_hooks>)
set_tests_properties(config_once_per_job PROPERTIES LABELS "config;cli;mpi" TIMEOUT 120 RESOURCE_LOCK mpirun
                     ENVIRONMENT "${ZINC_TEST_ENV}")

# Issue 23's limits (min_loss_scale 0, the static loss scale's range, train_batch_size, relative nvme_path).
zinc_test(NAME config_limits SOURCES test_config_limits.c LABELS config unit)

# ---------------------------------------------------------------- DeepSpeed 0.19.8 side by side (issue 34)
# Every key zinc resolves against DeepSpeedConfig built from the same dict, with the Python of build/dsenv
# (scripts/ds-venv.sh; ZINC_DS_PYTHON overrides). Skipped (77) where deepspeed cannot be imported.
set(ZINC_DS_PYTHON "$ENV{ZINC_DS_PYTHON}" CACHE FILEPATH "Python with deepspeed==0.19.8 (default: <build>/dsenv)")
if(NOT ZINC_DS_PYTHON)
  set(ZINC_DS_PYTHON ${PROJECT_BINARY_DIR}/dsenv/bin/python3)
endif()
add_test(NAME config_ds_parity
         COMMAND sh -c "[ -x \"$0\" ] || { echo 'SKIP: no DeepSpeed venv at '$0' (scripts/ds-venv.sh)'; exit 77; }; exec \"$0\" \"$@\""
                 ${ZINC_DS_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/test_ds_parity.py $<TARGET_FILE:zinc_cli>)
set_tests_properties(config_ds_parity PROPERTIES LABELS "config;deepspeed" SKIP_RETURN_CODE 77 TIMEOUT 300
                     ENVIRONMENT "DS_ACCELERATOR=cpu")

# Issue 42: zinc config check and zinc train --steps 0 agree on every input of a config fuzzer run (accept
# both, or refuse both with the same message): one validation (zengine_check_run) beyond the config's rules.
find_program(ZINC_CONFIG_AGREE_PYTHON3 python3)
if(ZINC_CONFIG_AGREE_PYTHON3)
  add_test(NAME config_check_agrees_with_train
           COMMAND ${ZINC_CONFIG_AGREE_PYTHON3} ${CMAKE_CURRENT_SOURCE_DIR}/test_config_agree.py
                   --zinc $<TARGET_FILE:zinc_cli> --configs ${PROJECT_SOURCE_DIR}/ds_configs
                   --workdir ${PROJECT_BINARY_DIR}/config_agree_test --count 600 --seed 1)
  set_tests_properties(config_check_agrees_with_train PROPERTIES LABELS "config;cli;fuzz" TIMEOUT 600
                       ENVIRONMENT "${ZINC_TEST_ENV}")
endif()
# In the fast subset (label fast: scripts/test.sh without --full).
zinc_fast(config_schema config_spellings config_rules config_input config_files config_auto config_corpus
          config_cli config_limits)
