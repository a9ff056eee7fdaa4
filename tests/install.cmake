# `cmake --install` into a scratch prefix, and a program built against it through pkg-config.
add_test(NAME install_pkgconfig COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/install_check.sh ${PROJECT_BINARY_DIR})
set_tests_properties(install_pkgconfig PROPERTIES LABELS "unit" ENVIRONMENT "${ZINC_TEST_ENV}" TIMEOUT 120)
# The installed library and program are built without the test hooks (CMakeLists.txt, "Test hooks"): with
# hooks set they behave as without, while the tests' copy of zinc reads them.
add_test(NAME install_no_test_hooks
         COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/install_no_hooks.sh ${PROJECT_BINARY_DIR} $<TARGET_FILE:zinc_cli_hooks>)
set_tests_properties(install_no_test_hooks PROPERTIES LABELS "unit" ENVIRONMENT "${ZINC_TEST_ENV}" TIMEOUT 120)
# A plain configure, and zinc as a subproject of a project with BUILD_TESTING on, build no tests.
add_test(NAME install_production_configure
         COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/production_configure.sh ${PROJECT_SOURCE_DIR} ${PROJECT_BINARY_DIR})
set_tests_properties(install_production_configure PROPERTIES LABELS "unit" TIMEOUT 300)
