# The sizing plan (runtime/mem/plan.h) against what zinc_build allocates, category by category, after the
# build and at the steps' peak: stages 0-3 x offload none/cpu/nvme x fp32/bf16/fp16 on 1-2 ranks, on the
# cpu device and on the cpu presented as a discrete device (ZINC_CPU_DISCRETE=1).
foreach(n 1 2)
  zinc_test(NAME mem_plan_np${n} SOURCES test_mem_plan.c RANKS ${n} LABELS mem TIMEOUT 300)
  zinc_test(NAME mem_plan_discrete_np${n} SOURCES test_mem_plan.c RANKS ${n} LABELS mem TIMEOUT 300
            ENV ZINC_CPU_DISCRETE=1)
endforeach()
# What a model declares before zinc_build (zinc_memory_declare, zinc_module_reentered) in the plan, the
# estimate, zinc_memory_get and the pre-flight; zinc_master_foreach against zinc_gather_master.
foreach(n 1 2)
  zinc_test(NAME mem_declare_np${n} SOURCES test_mem_declare.c RANKS ${n} LABELS mem TIMEOUT 300)
endforeach()
# In the fast subset (label fast: scripts/test.sh without --full).
zinc_fast(mem_plan_np1 mem_declare_np1)
