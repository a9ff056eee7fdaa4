# Collective backends: the same program tests the single-rank path (no launcher) and the MPI backend under
# mpirun with 1-4 ranks.
zinc_test(NAME comm_single SOURCES test_comm.c LABELS comm unit TIMEOUT 120)
foreach(n 1 2 3 4)
  zinc_test(NAME comm_np${n} SOURCES test_comm.c RANKS ${n} LABELS comm TIMEOUT 300)
endforeach()
