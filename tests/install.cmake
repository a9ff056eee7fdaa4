# `cmake --install` into a scratch prefix, and a program built against it through pkg-config.
add_test(NAME install_pkgconfig COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/install_check.sh ${PROJECT_BINARY_DIR})
set_tests_properties(install_pkgconfig PROPERTIES LABELS "unit" ENVIRONMENT "${ZINC_TEST_ENV}" TIMEOUT 120)
