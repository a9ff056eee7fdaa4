# bench_trace_overhead (issue 26): the example MLP's step with --trace off and on.
target_link_libraries(bench_trace_overhead PRIVATE zinc_mlp MPI::MPI_C)
