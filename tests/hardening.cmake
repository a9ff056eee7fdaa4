# Issue 18 (hardening): mismatched ranks end with one error on every rank, a rank that stops or dies ends
# the job through the collective watchdog (ZINC_COLLECTIVE_TIMEOUT_S), never a hang.
find_program(ZINC_PYTHON3_FOR_MISMATCH python3)
if(ZINC_PYTHON3_FOR_MISMATCH)
  string(REPLACE ";" " " zinc_mm_mpirun "${ZINC_MPIRUN}")
  add_test(NAME comm_mismatch_ranks COMMAND ${ZINC_PYTHON3_FOR_MISMATCH} ${CMAKE_CURRENT_SOURCE_DIR}/test_mismatch.py
           --zinc $<TARGET_FILE:zinc_cli_hooks> --mpirun "${zinc_mm_mpirun}" --workdir ${PROJECT_BINARY_DIR}/mismatch_test
           --configs ${PROJECT_SOURCE_DIR}/ds_configs)
  set_tests_properties(comm_mismatch_ranks PROPERTIES TIMEOUT 600 ENVIRONMENT "${ZINC_TEST_ENV}" LABELS "mpi;hardening"
                       WORKING_DIRECTORY ${PROJECT_BINARY_DIR})
endif()

# ---------------------------------------------------------------- fuzzing the checkpoint manifest reader
# As tests/config.cmake does for the config loader: the reader's sources built straight into the fuzz
# programs (with sanitizers where they work), a standalone driver with a bounded deterministic mutation
# loop, and a libFuzzer binary when clang links -fsanitize=fuzzer. Seeds: tests/fuzz/manifest_corpus (real
# manifests of stages 0-3, fp32/fp16/bf16, 1-4 ranks).
set(ZINC_MANIFEST_READER_SOURCES
    ${PROJECT_SOURCE_DIR}/runtime/checkpoint/checkpoint_manifest.c ${PROJECT_SOURCE_DIR}/runtime/checkpoint/checkpoint_validate.c
    ${PROJECT_SOURCE_DIR}/runtime/checkpoint/checkpoint_io.c ${PROJECT_SOURCE_DIR}/runtime/checkpoint/checkpoint_safe.c
    ${PROJECT_SOURCE_DIR}/runtime/checkpoint/checkpoint_meta.c ${PROJECT_SOURCE_DIR}/base/core/safe_file.c
    ${PROJECT_SOURCE_DIR}/base/core/crc32c.c ${PROJECT_SOURCE_DIR}/zero/partition.c
    ${PROJECT_SOURCE_DIR}/runtime/engine/lr_schedule.c ${ZINC_CONFIG_LOADER_SOURCES})
set(ZINC_MANIFEST_SEEDS ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/manifest_corpus)
add_executable(fuzz_manifest fuzz/fuzz_manifest.c ${ZINC_MANIFEST_READER_SOURCES})
target_include_directories(fuzz_manifest PRIVATE ${PROJECT_SOURCE_DIR} ${PROJECT_SOURCE_DIR}/include)
target_compile_definitions(fuzz_manifest PRIVATE _GNU_SOURCE ZINC_VERSION="${PROJECT_VERSION}")
target_compile_options(fuzz_manifest PRIVATE ${ZINC_WARN})
target_link_libraries(fuzz_manifest PRIVATE PkgConfig::JANSSON m)
if(ZINC_HAVE_ASAN_UBSAN)
  target_compile_options(fuzz_manifest PRIVATE -fsanitize=address,undefined -fno-sanitize-recover=all
                         -fno-omit-frame-pointer)
  target_link_options(fuzz_manifest PRIVATE -fsanitize=address,undefined)
endif()
add_test(NAME checkpoint_manifest_fuzz COMMAND fuzz_manifest --iterations 20000 --seed 1 --max-seconds 45 ${ZINC_MANIFEST_SEEDS})
set_tests_properties(checkpoint_manifest_fuzz PROPERTIES LABELS "fuzz;checkpoint" TIMEOUT 120
                     ENVIRONMENT "ASAN_OPTIONS=detect_leaks=1:abort_on_error=1;UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1")
if(ZINC_LIBFUZZER_WORKS)
  set(fzm ${CMAKE_CURRENT_BINARY_DIR}/fuzz_manifest_libfuzzer)
  set(fzm_flags -g -O1 -std=c11 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
                -DZINC_LIBFUZZER -D_GNU_SOURCE -DZINC_VERSION="${PROJECT_VERSION}" -I${PROJECT_SOURCE_DIR}
                -I${PROJECT_SOURCE_DIR}/include -I${PROJECT_SOURCE_DIR})
  foreach(d ${JANSSON_INCLUDE_DIRS})
    list(APPEND fzm_flags -I${d})
  endforeach()
  add_custom_command(OUTPUT ${fzm}
                     COMMAND ${ZINC_CLANG} ${fzm_flags} ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/fuzz_manifest.c
                             ${ZINC_MANIFEST_READER_SOURCES} ${JANSSON_LINK_LIBRARIES} -lm -o ${fzm}
                     DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/fuzz_manifest.c ${ZINC_MANIFEST_READER_SOURCES}
                             ${PROJECT_SOURCE_DIR}/runtime/checkpoint/checkpoint_internal.h ${ZINC_CONFIG_LOADER_HEADERS}
                     COMMENT "Building the libFuzzer target fuzz_manifest_libfuzzer with ${ZINC_CLANG}"
                     COMMAND_EXPAND_LISTS VERBATIM)
  add_custom_target(fuzz_manifest_libfuzzer ALL DEPENDS ${fzm})
  add_test(NAME checkpoint_manifest_libfuzzer
           COMMAND sh -c "d=$(mktemp -d) || exit 1; \"$0\" -runs=20000 -seed=1 -max_total_time=30 \"$d\" \"$@\"; rc=$?; rm -rf \"$d\"; exit $rc"
                   ${fzm} ${ZINC_MANIFEST_SEEDS})
  set_tests_properties(checkpoint_manifest_libfuzzer PROPERTIES LABELS "fuzz;checkpoint" TIMEOUT 120
                       ENVIRONMENT "UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1")
endif()

# The command line under misuse: options without values, numbers out of range, unusable output paths before
# training, bit flips through inspect --verify and export, FIFOs, export targets it must not replace.
if(ZINC_PYTHON3_FOR_MISMATCH)
  add_test(NAME cli_hardening COMMAND ${ZINC_PYTHON3_FOR_MISMATCH} ${CMAKE_CURRENT_SOURCE_DIR}/test_cli_hardening.py
           --zinc $<TARGET_FILE:zinc_cli_hooks> --configs ${PROJECT_SOURCE_DIR}/ds_configs
           --workdir ${PROJECT_BINARY_DIR}/cli_hardening_test)
  set_tests_properties(cli_hardening PROPERTIES TIMEOUT 600 ENVIRONMENT "${ZINC_TEST_ENV}" LABELS "cli;hardening"
                       WORKING_DIRECTORY ${PROJECT_BINARY_DIR})
endif()

# Issue 23 (hardening, round 2) at the public API: overflow at registration, calls in the wrong state,
# reserved tags, sealed model metadata, fp16 runs whose parameters go non-finite, the safe writer.
zinc_test(NAME engine_hardening_api SOURCES test_hardening2.c engine_util.c LABELS hardening)
# Issue 42 at the public API: declarations that would wrap, NaN weights, a broken engine's weights, and the
# rule that keeps --report/--trace out of the checkpoint directories.
zinc_test(NAME engine_hardening3_api SOURCES test_hardening3.c engine_util.c LABELS hardening)

# Issue 23 through the zinc program: safe outputs (export llmc, reports), special inputs, the sealed GPT-2
# shape, messages, refusals, NVMe swap directories removed on SIGTERM/SIGINT and after dead runs.
if(ZINC_PYTHON3_FOR_MISMATCH)
  add_test(NAME cli_hardening2 COMMAND ${ZINC_PYTHON3_FOR_MISMATCH} ${CMAKE_CURRENT_SOURCE_DIR}/test_cli_hardening2.py
           --zinc $<TARGET_FILE:zinc_cli> --configs ${PROJECT_SOURCE_DIR}/ds_configs
           --workdir ${PROJECT_BINARY_DIR}/cli_hardening2_test)
  set_tests_properties(cli_hardening2 PROPERTIES TIMEOUT 900 ENVIRONMENT "${ZINC_TEST_ENV}" LABELS "cli;hardening"
                       WORKING_DIRECTORY ${PROJECT_BINARY_DIR})
endif()

# ---------------------------------------------------------------- fuzzing the llm.c readers and --set
# examples/gpt2/gpt2_files.c (model, token and text files, read through the safe reader) and the config
# loader's --set overrides, built straight into the fuzz programs like the manifest fuzzer above.
set(ZINC_LLMC_READER_SOURCES ${PROJECT_SOURCE_DIR}/examples/gpt2/gpt2_files.c
    ${PROJECT_SOURCE_DIR}/base/core/safe_file.c ${PROJECT_SOURCE_DIR}/runtime/checkpoint/safetensors_read.c
    ${PROJECT_SOURCE_DIR}/runtime/checkpoint/safetensors_index.c
    ${ZINC_CONFIG_LOADER_SOURCES})
add_executable(fuzz_llmc fuzz/fuzz_llmc.c ${ZINC_LLMC_READER_SOURCES})
target_include_directories(fuzz_llmc PRIVATE ${PROJECT_SOURCE_DIR} ${PROJECT_SOURCE_DIR}/include
                           ${PROJECT_SOURCE_DIR}/examples/gpt2)
target_compile_definitions(fuzz_llmc PRIVATE _GNU_SOURCE ZINC_VERSION="${PROJECT_VERSION}")
target_compile_options(fuzz_llmc PRIVATE ${ZINC_WARN})
target_link_libraries(fuzz_llmc PRIVATE PkgConfig::JANSSON m)
if(ZINC_HAVE_ASAN_UBSAN)
  target_compile_options(fuzz_llmc PRIVATE -fsanitize=address,undefined -fno-sanitize-recover=all
                         -fno-omit-frame-pointer)
  target_link_options(fuzz_llmc PRIVATE -fsanitize=address,undefined)
endif()
add_test(NAME gpt2_llmc_fuzz COMMAND fuzz_llmc --iterations 20000 --seed 1 --max-seconds 45)
set_tests_properties(gpt2_llmc_fuzz PROPERTIES LABELS "fuzz;gpt2" TIMEOUT 120
                     ENVIRONMENT "ASAN_OPTIONS=detect_leaks=1:abort_on_error=1;UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1")
if(ZINC_LIBFUZZER_WORKS)
  set(fzl ${CMAKE_CURRENT_BINARY_DIR}/fuzz_llmc_libfuzzer)
  set(fzl_flags -g -O1 -std=c11 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
                -DZINC_LIBFUZZER -D_GNU_SOURCE -DZINC_VERSION="${PROJECT_VERSION}" -I${PROJECT_SOURCE_DIR}
                -I${PROJECT_SOURCE_DIR}/include -I${PROJECT_SOURCE_DIR}/examples/gpt2)
  foreach(d ${JANSSON_INCLUDE_DIRS})
    list(APPEND fzl_flags -I${d})
  endforeach()
  add_custom_command(OUTPUT ${fzl}
                     COMMAND ${ZINC_CLANG} ${fzl_flags} ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/fuzz_llmc.c
                             ${ZINC_LLMC_READER_SOURCES} ${JANSSON_LINK_LIBRARIES} -lm -o ${fzl}
                     DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/fuzz_llmc.c ${ZINC_LLMC_READER_SOURCES}
                             ${PROJECT_SOURCE_DIR}/examples/gpt2/gpt2_files.h ${ZINC_CONFIG_LOADER_HEADERS}
                     COMMENT "Building the libFuzzer target fuzz_llmc_libfuzzer with ${ZINC_CLANG}"
                     COMMAND_EXPAND_LISTS VERBATIM)
  add_custom_target(fuzz_llmc_libfuzzer ALL DEPENDS ${fzl})
  add_test(NAME gpt2_llmc_libfuzzer
           COMMAND sh -c "d=$(mktemp -d) || exit 1; \"$0\" -runs=20000 -seed=1 -max_total_time=30 \"$d\"; rc=$?; rm -rf \"$d\"; exit $rc"
                   ${fzl})
  set_tests_properties(gpt2_llmc_libfuzzer PROPERTIES LABELS "fuzz;gpt2" TIMEOUT 120
                       ENVIRONMENT "UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1")
endif()

# ---------------------------------------------------------------- issue 42 (hardening, round 3)
# The zinc program: --report/--trace never among the checkpoint's files, a trace on a full disk costs only
# the trace, --keep-last's strict tags and the sweep at start, signals from the first instant and a FIFO
# --config (tests/test_cli_hardening3.py).
if(ZINC_PYTHON3_FOR_MISMATCH)
  foreach(part clobber links numbers tracefull keep signals)
    add_test(NAME cli_hardening3_${part}
             COMMAND ${ZINC_PYTHON3_FOR_MISMATCH} ${CMAKE_CURRENT_SOURCE_DIR}/test_cli_hardening3.py --part ${part}
                     --zinc $<TARGET_FILE:zinc_cli> --workdir ${PROJECT_BINARY_DIR}/cli_hardening3_test)
    set_tests_properties(cli_hardening3_${part} PROPERTIES TIMEOUT 600 ENVIRONMENT "${ZINC_TEST_ENV}"
                         LABELS "cli;hardening" WORKING_DIRECTORY ${PROJECT_BINARY_DIR})
  endforeach()
endif()

# The trace reader (cli/trace_load.c) and its readers (summary, the plot's files) as untrusted input, built
# straight into the fuzz programs like fuzz_llmc: 0 sanitizer reports, every input within 1 s. The libFuzzer run
# starts from the fixture traces (tests/trace_fixtures): from nothing it would not reach a valid JSON trace.
set(ZINC_TRACE_READER_SOURCES ${PROJECT_SOURCE_DIR}/cli/trace/trace_load.c ${PROJECT_SOURCE_DIR}/cli/trace/trace_summary.c
    ${PROJECT_SOURCE_DIR}/cli/trace/trace_plot.c ${PROJECT_SOURCE_DIR}/cli/common/plot.c
    ${PROJECT_SOURCE_DIR}/base/core/safe_file.c ${PROJECT_SOURCE_DIR}/base/core/error.c
    ${PROJECT_SOURCE_DIR}/base/core/trace.c)
add_executable(fuzz_trace fuzz/fuzz_trace.c ${ZINC_TRACE_READER_SOURCES})
target_include_directories(fuzz_trace PRIVATE ${PROJECT_SOURCE_DIR} ${PROJECT_SOURCE_DIR}/include)
target_compile_definitions(fuzz_trace PRIVATE _GNU_SOURCE)
target_compile_options(fuzz_trace PRIVATE ${ZINC_WARN})
target_link_libraries(fuzz_trace PRIVATE PkgConfig::JANSSON m)
if(ZINC_HAVE_ASAN_UBSAN)
  target_compile_options(fuzz_trace PRIVATE -fsanitize=address,undefined -fno-sanitize-recover=all
                         -fno-omit-frame-pointer)
  target_link_options(fuzz_trace PRIVATE -fsanitize=address,undefined)
endif()
add_test(NAME trace_reader_fuzz COMMAND fuzz_trace --iterations 20000 --seed 1 --max-seconds 60)
set_tests_properties(trace_reader_fuzz PROPERTIES LABELS "fuzz;tracetools" TIMEOUT 180
                     ENVIRONMENT "ASAN_OPTIONS=detect_leaks=1:abort_on_error=1;UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1")
if(ZINC_LIBFUZZER_WORKS)
  set(fzt ${CMAKE_CURRENT_BINARY_DIR}/fuzz_trace_libfuzzer)
  set(fzt_flags -g -O1 -std=c11 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
                -DZINC_LIBFUZZER -D_GNU_SOURCE -I${PROJECT_SOURCE_DIR} -I${PROJECT_SOURCE_DIR}/include)
  foreach(d ${JANSSON_INCLUDE_DIRS})
    list(APPEND fzt_flags -I${d})
  endforeach()
  add_custom_command(OUTPUT ${fzt}
                     COMMAND ${ZINC_CLANG} ${fzt_flags} ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/fuzz_trace.c
                             ${ZINC_TRACE_READER_SOURCES} ${JANSSON_LINK_LIBRARIES} -lm -o ${fzt}
                     DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/fuzz_trace.c ${ZINC_TRACE_READER_SOURCES}
                             ${PROJECT_SOURCE_DIR}/cli/trace/trace_load.h ${PROJECT_SOURCE_DIR}/cli/trace/trace_summary.h
                             ${PROJECT_SOURCE_DIR}/cli/trace/trace_plot.h ${PROJECT_SOURCE_DIR}/cli/common/plot.h
                     COMMENT "Building the libFuzzer target fuzz_trace_libfuzzer with ${ZINC_CLANG}"
                     COMMAND_EXPAND_LISTS VERBATIM)
  add_custom_target(fuzz_trace_libfuzzer ALL DEPENDS ${fzt})
  add_test(NAME trace_reader_libfuzzer
           COMMAND sh -c "d=$(mktemp -d) || exit 1; \"$0\" -runs=20000 -seed=1 -max_total_time=30 -timeout=1 \"$d\" \"$1\"; rc=$?; rm -rf \"$d\"; exit $rc"
                   ${fzt} ${CMAKE_CURRENT_SOURCE_DIR}/trace_fixtures)
  set_tests_properties(trace_reader_libfuzzer PROPERTIES LABELS "fuzz;tracetools" TIMEOUT 120
                       ENVIRONMENT "UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1")
endif()
# In the fast subset (label fast: scripts/test.sh without --full).
zinc_fast(engine_hardening_api)
