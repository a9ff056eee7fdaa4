# issue 15: the estimate against each rank's real peak (VmHWM less the resident bytes before zinc_build)
# on the CPU, stages 0-3 x offload none/cpu/nvme, one test per rank count and dtype (tests/mem_real_peak.sh
# says what it runs and the tolerance).
foreach(n 1 2)
  foreach(cfg zero0_fp32 zero1_bf16 zero2_fp16)
    set(name mem_real_peak_np${n}_${cfg})
    set(tmp ${PROJECT_BINARY_DIR}/test-tmp/${name})
    file(MAKE_DIRECTORY ${tmp})
    add_test(NAME ${name}
             COMMAND ${PROJECT_SOURCE_DIR}/tests/mem_real_peak.sh $<TARGET_FILE:zinc_cli_hooks> ${n} ${cfg} ${ZINC_MPIRUN})
    set_tests_properties(${name} PROPERTIES LABELS "mem;cli;mpi" TIMEOUT 600
                         ENVIRONMENT "${ZINC_TEST_ENV};TMPDIR=${tmp}"
                         PASS_REGULAR_EXPRESSION "10 of 10 runs within")
  endforeach()
endforeach()
# The pre-flight against RLIMIT_AS (set by the test on itself), a memory cgroup (skipped with the reason
# where none can be created), and each limit's message and fixes.
foreach(mode rlimit cgroup advice)
  zinc_test(NAME mem_limits_${mode} SOURCES test_mem_limits.c ARGS ${mode} LABELS mem TIMEOUT 120)
endforeach()
# zinc mem plan: --paper against the ZeRO paper's Table 1 (cells from the paper's formulas, GB and GiB);
# zinc's own plan with the plot (a file name with a space and a quote; skipped with a message where
# gnuplot is not installed).
find_program(ZINC_PLAN_PYTHON python3)
if(ZINC_PLAN_PYTHON)
  add_test(NAME mem_plan_paper COMMAND ${ZINC_PLAN_PYTHON} ${PROJECT_SOURCE_DIR}/tests/mem_plan_paper.py
                                       $<TARGET_FILE:zinc_cli_hooks>)
  set_tests_properties(mem_plan_paper PROPERTIES LABELS "mem;cli" ENVIRONMENT "${ZINC_TEST_ENV}")
endif()
add_test(NAME mem_plan_cli
         COMMAND $<TARGET_FILE:zinc_cli_hooks> mem plan --gpt2 xl --config ${PROJECT_SOURCE_DIR}/ds_configs/zero3_fp16.json
                 --gpu-mem 16GiB --host-mem 256GiB --activation-bytes-per-sample 1GiB
                 --plot "${PROJECT_BINARY_DIR}/mem plan's.svg")
set_tests_properties(mem_plan_cli PROPERTIES LABELS "mem;cli" ENVIRONMENT "${ZINC_TEST_ENV}"
                     PASS_REGULAR_EXPRESSION "zinc mem plan: (wrote|gnuplot is not installed)")
# zinc mem plan --host-mem without --gpu-mem (a CPU machine): GPT-2 small where the answer is known (fits with
# no offload, only with parameters and optimizer state on NVMe, nowhere with the GiB missing and the nodes that
# would do), each row against `zinc mem estimate`, JSON field by field, CSV, the headroom rule, the error paths.
if(ZINC_PLAN_PYTHON)
  add_test(NAME mem_plan_host COMMAND ${ZINC_PLAN_PYTHON} ${PROJECT_SOURCE_DIR}/tests/mem_plan_host.py
                                      $<TARGET_FILE:zinc_cli_hooks> ${PROJECT_BINARY_DIR}/test-tmp/mem_plan_host)
  set_tests_properties(mem_plan_host PROPERTIES LABELS "mem;cli" ENVIRONMENT "${ZINC_TEST_ENV}" TIMEOUT 120)
endif()
# The DeepSpeed comparison's reasons in JSON and CSV too (stage 1 with CPU offload, fp32 configs).
add_test(NAME mem_cli_why_json
         COMMAND $<TARGET_FILE:zinc_cli_hooks> mem estimate --gpt2 small --config ${PROJECT_SOURCE_DIR}/ds_configs/zero0_fp32.json
                 --stage 1 --offload cpu --json)
set_tests_properties(mem_cli_why_json PROPERTIES LABELS "mem;cli" ENVIRONMENT "${ZINC_TEST_ENV}"
                     PASS_REGULAR_EXPRESSION "\"topic\": \"stage1_offload_grads\"")
add_test(NAME mem_cli_why_csv
         COMMAND $<TARGET_FILE:zinc_cli_hooks> mem estimate --gpt2 small --config ${PROJECT_SOURCE_DIR}/ds_configs/zero0_fp32.json
                 --csv)
set_tests_properties(mem_cli_why_csv PROPERTIES LABELS "mem;cli" ENVIRONMENT "${ZINC_TEST_ENV}"
                     PASS_REGULAR_EXPRESSION "why,1,cpu,deepspeed,stage1_offload_grads,\"Stage 1 with offload")
# zinc_build_ranged against zinc_build, bit for bit (stages 0-3, fp32/bf16/fp16, tensors across pieces).
foreach(n 1 2)
  zinc_test(NAME engine_init_ranged_np${n} SOURCES test_init_ranged.c RANKS ${n} LABELS engine TIMEOUT 300)
endforeach()
# A bad ZINC_MPI_PIECE_ELEMENTS is refused with the valid range.
add_test(NAME mem_mpi_piece_env COMMAND ${ZINC_MPIRUN} -np 2 $<TARGET_FILE:zinc_cli_hooks> mem measure --params 10000)
set_tests_properties(mem_mpi_piece_env PROPERTIES LABELS "mem;cli;mpi"
                     ENVIRONMENT "${ZINC_TEST_ENV};ZINC_MPI_PIECE_ELEMENTS=12"
                     PASS_REGULAR_EXPRESSION "ZINC_MPI_PIECE_ELEMENTS=\"12\": expected a whole number of elements from 64")
# The pre-flight offers a higher stage where it costs less at this rank count (stage 0 at 2 ranks).
add_test(NAME mem_preflight_stage_advice
         COMMAND ${ZINC_MPIRUN} -np 2 $<TARGET_FILE:zinc_cli_hooks> mem measure --params 4000000 --stage 0)
set_tests_properties(mem_preflight_stage_advice PROPERTIES LABELS "mem;cli;mpi"
                     ENVIRONMENT "${ZINC_TEST_ENV};ZINC_FAKE_MEM_AVAILABLE=100000000"
                     PASS_REGULAR_EXPRESSION "raise zero_optimization.stage to [123] \\(now 0\\): [0-9.]+ MiB per rank at this rank count")
# The whole training process (tests/test_mem_whole.py): `zinc mem estimate --model gpt2` against the trainer's
# own VmHWM (stages 0-3 x 1-2 ranks x fp32/bf16/fp16, offload, activation checkpointing, --init) within 5%;
# activation checkpointing bitwise; the trainers under RLIMIT_AS and a memory cgroup (skips without one):
# refused by the pre-flight or completed, never killed or hung.
find_program(ZINC_MEM_PYTHON3 python3)
if(ZINC_MEM_PYTHON3)
  string(REPLACE ";" " " zinc_mem_mpirun "${ZINC_MPIRUN}")
  foreach(mode matrix ckpt rlimit cgroup)
    add_test(NAME mem_whole_${mode}
             COMMAND ${ZINC_MEM_PYTHON3} ${CMAKE_CURRENT_SOURCE_DIR}/test_mem_whole.py --zinc $<TARGET_FILE:zinc_cli>
                     --mpirun "${zinc_mem_mpirun}" --workdir ${PROJECT_BINARY_DIR}/mem_whole_test/${mode} ${mode})
    set_tests_properties(mem_whole_${mode} PROPERTIES TIMEOUT 900 SKIP_RETURN_CODE 77 LABELS "mem;mpi"
                         ENVIRONMENT "${ZINC_TEST_ENV}" WORKING_DIRECTORY ${PROJECT_BINARY_DIR})
  endforeach()
endif()
# In the fast subset (label fast: scripts/test.sh without --full).
zinc_fast(engine_init_ranged_np1 mem_limits_advice mem_plan_cli)
# Issue 41, item 5: after a model freed a large block (glibc's raised mmap threshold), one more engine's build
# leaves the RSS grown by what zinc_memory_get counts within 1 MiB (the init scratch returned), its peak RSS
# growth within 1 MiB of zinc_memory_get's peak and of the estimate's build peak (the init scratch counted as
# host staging by both), and zinc_set_master holds no transient (bench/bench_mem_resident.c, measured after a
# first engine brought up MPI).
add_test(NAME mem_resident_counted_np1 COMMAND $<TARGET_FILE:bench_mem_resident> --max-uncounted 1)
add_test(NAME mem_resident_counted_np2 COMMAND ${ZINC_MPIRUN} -np 2 $<TARGET_FILE:bench_mem_resident> --max-uncounted 1)
set_tests_properties(mem_resident_counted_np1 mem_resident_counted_np2 PROPERTIES LABELS "mem" TIMEOUT 120
                     ENVIRONMENT "${ZINC_TEST_ENV}")
set_tests_properties(mem_resident_counted_np2 PROPERTIES LABELS "mem;mpi")
