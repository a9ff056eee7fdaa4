# The source layout's rules (HACKING.md, "Layers"): every include names its folder, no folder includes one
# above its layer, and the folder graph has no cycle.
find_package(Python3 REQUIRED COMPONENTS Interpreter)
add_test(NAME layers COMMAND Python3::Interpreter ${PROJECT_SOURCE_DIR}/scripts/check_layers.py ${PROJECT_SOURCE_DIR})
set_tests_properties(layers PROPERTIES LABELS "unit" TIMEOUT 60)
# The check itself: an example that includes runtime/ (planted in a copy of the sources) must fail it.
add_test(NAME layers_self_test COMMAND Python3::Interpreter ${PROJECT_SOURCE_DIR}/scripts/check_layers.py --self-test)
set_tests_properties(layers_self_test PROPERTIES LABELS "unit" TIMEOUT 60)
# The library's C files follow .clang-format (clang-format 14; skipped where that version is not installed,
# since other versions format a few constructs differently).
add_test(NAME format
         COMMAND sh -c "clang-format --version 2>/dev/null | grep -q 'version 14\\.' || exit 77; exec \"$0\" --check"
                 ${PROJECT_SOURCE_DIR}/scripts/format.sh)
set_tests_properties(format PROPERTIES LABELS "unit" TIMEOUT 120 SKIP_RETURN_CODE 77)
