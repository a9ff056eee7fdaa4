# The source layout's rules (HACKING.md, "Layers"): every include names its folder, no folder includes one
# above its layer, and the folder graph has no cycle.
find_package(Python3 REQUIRED COMPONENTS Interpreter)
add_test(NAME layers COMMAND Python3::Interpreter ${PROJECT_SOURCE_DIR}/scripts/check_layers.py ${PROJECT_SOURCE_DIR})
set_tests_properties(layers PROPERTIES LABELS "unit" TIMEOUT 60)
