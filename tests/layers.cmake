# The source layout's rules (HACKING.md, "Layers"): every include names its folder, no folder includes one
# above its layer, and the folder graph has no cycle.
find_package(Python3 REQUIRED COMPONENTS Interpreter)
add_test(NAME layers COMMAND Python3::Interpreter ${PROJECT_SOURCE_DIR}/scripts/check_layers.py ${PROJECT_SOURCE_DIR})
set_tests_properties(layers PROPERTIES LABELS "unit;fast" TIMEOUT 60)
# The check itself: an example that includes runtime/ (planted in a copy of the sources) must fail it.
add_test(NAME layers_self_test COMMAND Python3::Interpreter ${PROJECT_SOURCE_DIR}/scripts/check_layers.py --self-test)
set_tests_properties(layers_self_test PROPERTIES LABELS "unit;fast" TIMEOUT 60)
# The engine's files call down only (runtime/engine: no file cycle; zinc_step names no observer; no
# optimizer's name outside comments in runtime/engine and runtime/mem), and the check itself: a planted
# back-call and a planted name (in a copy of the sources) must fail it.
add_test(NAME engine_graph COMMAND Python3::Interpreter ${PROJECT_SOURCE_DIR}/scripts/check_engine_graph.py
                                   ${PROJECT_SOURCE_DIR})
set_tests_properties(engine_graph PROPERTIES LABELS "unit;fast" TIMEOUT 60)
add_test(NAME engine_graph_self_test
         COMMAND Python3::Interpreter ${PROJECT_SOURCE_DIR}/scripts/check_engine_graph.py --self-test)
set_tests_properties(engine_graph_self_test PROPERTIES LABELS "unit;fast" TIMEOUT 60)
# The library's C files follow .clang-format (clang-format 14; skipped where that version is not installed,
# since other versions format a few constructs differently).
add_test(NAME format
         COMMAND sh -c "clang-format --version 2>/dev/null | grep -q 'version 14\\.' || exit 77; exec \"$0\" --check"
                 ${PROJECT_SOURCE_DIR}/scripts/format.sh)
set_tests_properties(format PROPERTIES LABELS "unit;fast" TIMEOUT 120 SKIP_RETURN_CODE 77)
# HACKING.md's length limit for the library (100 lines a function): the folders of the library's sources,
# and the allow-list of functions still over it, which can only shrink (scripts/function_lengths.py).
set(zinc_lib_dirs "")
foreach(s ${ZINC_C_SOURCES} ${ZINC_CUDA_HOST_SOURCES} ${ZINC_CU_SOURCES})
  get_filename_component(d ${s} DIRECTORY)
  list(APPEND zinc_lib_dirs ${d})
endforeach()
list(REMOVE_DUPLICATES zinc_lib_dirs)
add_test(NAME library_function_length
         COMMAND Python3::Interpreter ${PROJECT_SOURCE_DIR}/scripts/function_lengths.py --max 100 --top 0
                 --allow ${CMAKE_CURRENT_SOURCE_DIR}/function_length_allow.txt ${zinc_lib_dirs})
set_tests_properties(library_function_length PROPERTIES LABELS "unit;fast" TIMEOUT 60)
# The count of tests under mpirun written in tests/README.md: more of them fails until the number there is
# raised on purpose (the full suite's time grows with each; scripts/test.sh --full).
add_test(NAME tests_mpirun_count
         COMMAND Python3::Interpreter ${CMAKE_CURRENT_SOURCE_DIR}/check_mpirun_count.py ${CMAKE_CTEST_COMMAND}
                 ${PROJECT_BINARY_DIR} ${CMAKE_CURRENT_SOURCE_DIR}/README.md)
set_tests_properties(tests_mpirun_count PROPERTIES LABELS "unit;fast" TIMEOUT 60)
