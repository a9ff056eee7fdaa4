# Collective backends: the same program tests the single-rank path (no launcher) and the MPI backend under
# mpirun with 1-4 ranks.
zinc_test(NAME comm_single SOURCES test_comm.c LABELS comm unit TIMEOUT 120)
foreach(n 1 2 3 4)
  zinc_test(NAME comm_np${n} SOURCES test_comm.c RANKS ${n} LABELS comm TIMEOUT 300)
endforeach()
# The staged backend (device buffers through host staging, as ranks sharing a GPU use) over a cpu device:
# 64 bytes of staging force many rounds; 4096 a few.
zinc_test(NAME comm_staged_single SOURCES test_comm.c ARGS --staged 64 LABELS comm unit TIMEOUT 120)
foreach(n 2 3 4)
  zinc_test(NAME comm_staged_np${n} SOURCES test_comm.c RANKS ${n} ARGS --staged 64 LABELS comm TIMEOUT 300)
endforeach()
zinc_test(NAME comm_staged_np3_4k SOURCES test_comm.c RANKS 3 ARGS --staged 4096 LABELS comm TIMEOUT 300)
# In the fast subset (label fast: scripts/test.sh without --full).
zinc_fast(comm_single comm_np2 comm_staged_single)
