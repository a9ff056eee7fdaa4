# Memory estimator and `zinc mem` (docs/mem.md): the estimate against the engine's accounting on 1-4 ranks,
# and the CLI's estimate and measure commands end to end.
foreach(n 1 2 3 4)
  zinc_test(NAME mem_estimate_np${n} SOURCES test_mem_estimate.c RANKS ${n} LABELS mem TIMEOUT 300)
endforeach()
# The estimate for device cuda against the engine on a discrete device (ZINC_CPU_DISCRETE=1): device,
# pinned and host bytes per category, exactly.
foreach(n 1 3)
  zinc_test(NAME mem_estimate_discrete_np${n} SOURCES test_mem_estimate.c RANKS ${n} LABELS mem TIMEOUT 300
            ENV ZINC_CPU_DISCRETE=1)
endforeach()

set(ZINC_MEM_CLI $<TARGET_FILE:zinc_cli_hooks> mem)
set(ZINC_MEM_TINY --layers 2 --width 32 --vocab 500 --context 32)
add_test(NAME mem_cli_estimate
         COMMAND ${ZINC_MEM_CLI} estimate --gpt2 small --config ${PROJECT_SOURCE_DIR}/ds_configs/zero3_fp16.json
                 --nodes 2 --gpus-per-node 8)
set_tests_properties(mem_cli_estimate PROPERTIES LABELS "mem;cli" ENVIRONMENT "${ZINC_TEST_ENV}"
                     PASS_REGULAR_EXPRESSION "Why DeepSpeed's estimate differs.*Buckets")
add_test(NAME mem_cli_estimate_json
         COMMAND ${ZINC_MEM_CLI} estimate --shapes ${PROJECT_SOURCE_DIR}/bench/mem/gpt2_tiny.shapes --json
                 --config ${PROJECT_SOURCE_DIR}/ds_configs/zero2_cpu_offload.json --gpus-per-node 4)
set_tests_properties(mem_cli_estimate_json PROPERTIES LABELS "mem;cli" ENVIRONMENT "${ZINC_TEST_ENV}"
                     PASS_REGULAR_EXPRESSION "\"variants\"")
# The plot: drawn with gnuplot where installed, skipped with a message otherwise (both pass).
add_test(NAME mem_cli_plot
         COMMAND ${ZINC_MEM_CLI} estimate --params 100000000 --largest-layer 5000000 --device cpu
                 --plot ${PROJECT_BINARY_DIR}/mem_plot.svg)
set_tests_properties(mem_cli_plot PROPERTIES LABELS "mem;cli" ENVIRONMENT "${ZINC_TEST_ENV}"
                     PASS_REGULAR_EXPRESSION "wrote .*mem_plot.svg|gnuplot is not installed")
# measure --check exits 1 when any row differs from the estimate.
foreach(n 1 2 3 4)
  add_test(NAME mem_cli_measure_np${n}
           COMMAND ${ZINC_MPIRUN} -np ${n} $<TARGET_FILE:zinc_cli_hooks> mem measure ${ZINC_MEM_TINY} --check
                   --config ${PROJECT_SOURCE_DIR}/ds_configs/zero3_fp16.json)
  set_tests_properties(mem_cli_measure_np${n} PROPERTIES LABELS "mem;cli;mpi" ENVIRONMENT "${ZINC_TEST_ENV}"
                       TIMEOUT 120 PASS_REGULAR_EXPRESSION "every row matches the estimate")
endforeach()
add_test(NAME mem_cli_measure_offload
         COMMAND ${ZINC_MPIRUN} -np 2 $<TARGET_FILE:zinc_cli_hooks> mem measure --check --csv
                 --shapes ${PROJECT_SOURCE_DIR}/bench/mem/gpt2_tiny.shapes
                 --config ${PROJECT_SOURCE_DIR}/ds_configs/zero2_cpu_offload.json)
set_tests_properties(mem_cli_measure_offload PROPERTIES LABELS "mem;cli;mpi" ENVIRONMENT "${ZINC_TEST_ENV}"
                     TIMEOUT 120)
add_test(NAME mem_cli_measure_discrete
         COMMAND ${ZINC_MPIRUN} -np 2 $<TARGET_FILE:zinc_cli_hooks> mem measure --check
                 --shapes ${PROJECT_SOURCE_DIR}/bench/mem/gpt2_tiny.shapes
                 --config ${PROJECT_SOURCE_DIR}/ds_configs/zero2_cpu_offload.json)
set_tests_properties(mem_cli_measure_discrete PROPERTIES LABELS "mem;cli;mpi"
                     ENVIRONMENT "${ZINC_TEST_ENV};ZINC_CPU_DISCRETE=1" TIMEOUT 120
                     PASS_REGULAR_EXPRESSION "pinned +staging.*every row matches the estimate")
# In the fast subset (label fast: scripts/test.sh without --full).
zinc_fast(mem_estimate_np1 mem_cli_estimate)
