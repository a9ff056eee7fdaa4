# The library's outer shape (issue 16): libzinc.so exports only the public API, and the environment is
# read in one place.

# nm -D on the shared library: only the functions of include/zinc.h (listed in zinc.map) are exported.
find_program(ZINC_EXPORTS_PYTHON3 python3)
if(ZINC_EXPORTS_PYTHON3)
  add_test(NAME exports_public_only
           COMMAND ${ZINC_EXPORTS_PYTHON3} ${CMAKE_CURRENT_SOURCE_DIR}/check_exports.py ${CMAKE_NM}
                   $<TARGET_FILE:zinc> ${PROJECT_SOURCE_DIR}/include/zinc.h ${PROJECT_SOURCE_DIR}/zinc.map)
  set_tests_properties(exports_public_only PROPERTIES LABELS "unit" TIMEOUT 60)
else()
  message(STATUS "zinc: no python3 found; the test exports_public_only is not registered")
endif()

# No getenv outside base/core/env.c (library and CLI).
add_test(NAME env_getenv_one_place COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/check_getenv.sh ${PROJECT_SOURCE_DIR})
set_tests_properties(env_getenv_one_place PROPERTIES LABELS "unit" TIMEOUT 60)

# The table against docs/env.md, and the test hooks: read in this (test) build, and ignored by env.c as a
# production build compiles it (without ZINC_TEST_HOOKS; linked with the public libzinc.so, which keeps
# its own env.c local).
zinc_test(NAME env SOURCES test_env.c LABELS unit)
target_compile_definitions(test_env PRIVATE ZT_EXPECT_HOOKS=1)
add_executable(test_env_production test_env.c zt.c ${PROJECT_SOURCE_DIR}/base/core/env.c)
target_include_directories(test_env_production PRIVATE ${PROJECT_SOURCE_DIR} ${CMAKE_CURRENT_SOURCE_DIR})
target_compile_options(test_env_production PRIVATE ${ZINC_WARN})
target_compile_definitions(test_env_production PRIVATE _GNU_SOURCE ZT_EXPECT_HOOKS=0)
target_link_libraries(test_env_production PRIVATE zinc m)
add_test(NAME env_production COMMAND test_env_production)
set_tests_properties(env_production PROPERTIES LABELS "unit" TIMEOUT 60 ENVIRONMENT "${ZINC_TEST_ENV}"
                     WORKING_DIRECTORY ${PROJECT_BINARY_DIR})
# In the fast subset (label fast: scripts/test.sh without --full).
zinc_fast(exports_public_only env_getenv_one_place env)
