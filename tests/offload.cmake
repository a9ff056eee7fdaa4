# Optimizer-state offload tests. test_aio: the NVMe IO layer and store (CRC32C, O_DIRECT alignment,
# partial IO, injected errors, corruption, consistency after failures, buffer_count, O_DIRECT refusal and
# buffered fallback). test_offload_equiv: cpu and nvme offload bitwise equal to no offload, stages 1-3,
# fp32/bf16/fp16, 1-4 ranks. Both write under the build directory and skip (77) where O_DIRECT is refused.
zinc_test(NAME offload_nvme_aio SOURCES test_aio.c zt_aio.c engine_util.c LABELS offload unit)
zinc_test(NAME offload_equiv_np1 SOURCES test_offload_equiv.c zt_aio.c engine_util.c LABELS offload)
foreach(n 2 3 4)
  zinc_test(NAME offload_equiv_np${n} SOURCES test_offload_equiv.c zt_aio.c engine_util.c RANKS ${n} LABELS offload
            TIMEOUT 600)
endforeach()

# The example config (ds_configs/zero3_nvme_offload.json: nvme_path /tmp/zinc_nvme, buffered IO allowed)
# trains through the CLI on 1 and 2 ranks.
set(ZINC_NVME_EXAMPLE ${PROJECT_SOURCE_DIR}/ds_configs/zero3_nvme_offload.json)
add_test(NAME offload_cli_nvme COMMAND $<TARGET_FILE:zinc_cli_hooks> train --config ${ZINC_NVME_EXAMPLE} --steps 50)
add_test(NAME offload_cli_nvme_np2
         COMMAND ${ZINC_MPIRUN} -np 2 $<TARGET_FILE:zinc_cli_hooks> train --config ${ZINC_NVME_EXAMPLE} --steps 50)
set_tests_properties(offload_cli_nvme offload_cli_nvme_np2 PROPERTIES ENVIRONMENT "${ZINC_TEST_ENV}"
                     LABELS "offload;cli" TIMEOUT 300 WORKING_DIRECTORY ${PROJECT_BINARY_DIR}
                     PASS_REGULAR_EXPRESSION "50 steps \\(50 taken")
set_tests_properties(offload_cli_nvme_np2 PROPERTIES LABELS "offload;cli;mpi")

# Offload from a discrete device (ZINC_CPU_DISCRETE=1): the pipelined, pinned-staging step a GPU run takes.
zinc_test(NAME offload_equiv_discrete_np2 SOURCES test_offload_equiv.c zt_aio.c engine_util.c RANKS 2 LABELS offload
          TIMEOUT 600 ENV ZINC_CPU_DISCRETE=1)

# The NVMe and memory optimizer-state stores from a hand-made context (cpu device, single-rank comm, a
# temp nvme_path): no engine, no model. Round trips byte for byte, polled passes, files changed behind the
# store's back, configuration and ordering errors with their messages.
zinc_test(NAME offload_store_nvme SOURCES test_store_nvme.c zt_aio.c LABELS offload unit)
zinc_test(NAME offload_store_nvme_np2 SOURCES test_store_nvme.c zt_aio.c RANKS 2 LABELS offload)
# In the fast subset (label fast: scripts/test.sh without --full).
zinc_fast(offload_nvme_aio offload_equiv_np1 offload_store_nvme)

# Parameter offload to NVMe (offload_param.device "nvme", stage 3): bitwise equal to the shard in memory
# (fp32/bf16/fp16, accumulation, clipping, state on NVMe too, fp16 skips, checkpoint resume, short reads) on
# 1 and 2 ranks; EIO, ENOSPC and a damaged block end the run naming the file.
zinc_test(NAME offload_param_nvme SOURCES test_param_nvme.c zt_aio.c engine_util.c LABELS offload)
zinc_test(NAME offload_param_nvme_np2 SOURCES test_param_nvme.c zt_aio.c engine_util.c RANKS 2 LABELS offload TIMEOUT 120)
# GPT-2 through the CLI with the offload_param nvme block: the same param_checksum as in memory, 1 and 2 ranks.
add_test(NAME offload_param_nvme_gpt2 COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/gpt2_param_nvme.sh
         $<TARGET_FILE:zinc_cli_hooks> ${PROJECT_BINARY_DIR}/offload_param_nvme_gpt2 ${ZINC_MPIRUN})
set_tests_properties(offload_param_nvme_gpt2 PROPERTIES ENVIRONMENT "${ZINC_TEST_ENV}" LABELS "offload;cli;mpi;gpt2"
                     TIMEOUT 120 WORKING_DIRECTORY ${PROJECT_BINARY_DIR} PASS_REGULAR_EXPRESSION "bitwise equal")
# The same under a memory cgroup (v2, else v1) at 256 MiB: no OOM kill, the in-memory checksum; skips (77)
# with the reason where no cgroup can be made.
add_test(NAME offload_param_nvme_cgroup COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cgroup_param_nvme.sh
         $<TARGET_FILE:zinc_cli_hooks> ${PROJECT_BINARY_DIR}/offload_param_nvme_cgroup)
set_tests_properties(offload_param_nvme_cgroup PROPERTIES ENVIRONMENT "${ZINC_TEST_ENV}" LABELS "offload;cli;gpt2"
                     TIMEOUT 120 SKIP_RETURN_CODE 77 WORKING_DIRECTORY ${PROJECT_BINARY_DIR})
# Muon through the CLI (issue 39): GPT-2, 200 steps, the optimizer state offloaded to CPU and NVMe: every step's
# loss within 1e-6 of the in-memory run's (bitwise in practice), the same param_checksum.
find_program(ZINC_MUON_PYTHON3 python3)
if(ZINC_MUON_PYTHON3)
  add_test(NAME offload_muon_gpt2 COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/gpt2_muon_offload.sh
           $<TARGET_FILE:zinc_cli_hooks> ${PROJECT_BINARY_DIR}/offload_muon_gpt2 ${ZINC_MUON_PYTHON3})
  set_tests_properties(offload_muon_gpt2 PROPERTIES ENVIRONMENT "${ZINC_TEST_ENV}" LABELS "offload;cli;gpt2"
                       TIMEOUT 120 WORKING_DIRECTORY ${PROJECT_BINARY_DIR}
                       PASS_REGULAR_EXPRESSION "within 1e-6 over 200 steps")
endif()
