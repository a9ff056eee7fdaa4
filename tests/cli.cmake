# The zinc program's shape (issue 24): one option table per command that parses, checks and prints --help
# alike everywhere; no function in cli/ longer than HACKING.md's limit; the public prefix zinc_ only on
# the public API.
find_program(ZINC_CLI_PYTHON3 python3)
if(ZINC_CLI_PYTHON3)
  add_test(NAME cli_options
           COMMAND ${ZINC_CLI_PYTHON3} ${CMAKE_CURRENT_SOURCE_DIR}/test_cli_options.py --zinc $<TARGET_FILE:zinc_cli_hooks>
                   --configs ${PROJECT_SOURCE_DIR}/ds_configs --workdir ${PROJECT_BINARY_DIR}/cli_options_test)
  set_tests_properties(cli_options PROPERTIES LABELS "unit;cli" TIMEOUT 120 ENVIRONMENT "${ZINC_TEST_ENV}")
  add_test(NAME cli_function_length
           COMMAND ${ZINC_CLI_PYTHON3} ${PROJECT_SOURCE_DIR}/scripts/function_lengths.py --max 80
                   ${PROJECT_SOURCE_DIR}/cli)
  set_tests_properties(cli_function_length PROPERTIES LABELS "unit;cli" TIMEOUT 60)
  # One source per default and shape rule in cli/ (issue 35): --help prints defaults from the tables, 50257
  # once, no strcmp subcommand dispatch, no thread-count formula of the CLI's own.
  add_test(NAME cli_one_source COMMAND ${ZINC_CLI_PYTHON3} ${CMAKE_CURRENT_SOURCE_DIR}/check_cli_defaults.py
                                       ${PROJECT_SOURCE_DIR})
  set_tests_properties(cli_one_source PROPERTIES LABELS "unit;cli" TIMEOUT 60)
  add_test(NAME prefix_public_only
           COMMAND ${ZINC_CLI_PYTHON3} ${CMAKE_CURRENT_SOURCE_DIR}/check_prefixes.py ${PROJECT_SOURCE_DIR} ${CMAKE_NM}
                   --library $<TARGET_FILE:zinc_internal> $<TARGET_FILE:zinc_cli> $<TARGET_FILE:zinc_mlp> $<TARGET_FILE:zinc_gpt2>)
  set_tests_properties(prefix_public_only PROPERTIES LABELS "unit;cli" TIMEOUT 60)
else()
  message(STATUS "zinc: no python3 found; the tests cli_options, cli_function_length, cli_one_source, prefix_public_only are not "
                 "registered")
endif()
# In the fast subset (label fast: scripts/test.sh without --full).
zinc_fast(cli_options cli_function_length cli_one_source prefix_public_only)
