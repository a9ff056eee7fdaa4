# ZeRO's own pieces (zero/) without an engine: the partition math.
zinc_test(NAME zero_partition SOURCES test_partition.c LABELS zero unit)
# Gradient placement and reduction, and stage-3 gathering, from hand-made contexts (cpu device, a module
# table, the plan's sizes): no engine. At 1 rank and under mpirun at 2.
zinc_test(NAME zero_grads SOURCES test_zero_grads.c zero_fixture.c LABELS zero unit)
zinc_test(NAME zero_grads_np2 SOURCES test_zero_grads.c zero_fixture.c RANKS 2 LABELS zero)
zinc_test(NAME zero_gather SOURCES test_zero_gather.c zero_fixture.c LABELS zero unit)
zinc_test(NAME zero_gather_np2 SOURCES test_zero_gather.c zero_fixture.c RANKS 2 LABELS zero)
# ZeRO++ through the engine (issue 36): hpZ bitwise equal to plain stage 3, qwZ's wire bytes and loss goals,
# the refusals, on the example MLP at 1, 2 and 4 ranks.
zinc_test(NAME zero_zeropp SOURCES test_engine_zeropp.c engine_util.c LABELS zero engine TIMEOUT 300)
foreach(n 2 4)
  zinc_test(NAME zero_zeropp_np${n} SOURCES test_engine_zeropp.c engine_util.c RANKS ${n} LABELS zero engine
            TIMEOUT 600)
endforeach()
# ZeRO++ on two "nodes" of two ranks in network namespaces (scripts/netns-cluster.sh; root only, skipped with
# the reason elsewhere): hpZ bitwise equal to plain stage 3, fewer bytes across the link (veth counters) for
# each feature, the loss goals, hpZ over both nodes refused.
add_test(NAME zero_zeropp_netns COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/zeropp_netns.sh $<TARGET_FILE:zinc_cli_hooks>
                                        ${PROJECT_SOURCE_DIR} ${PROJECT_BINARY_DIR}/zeropp_netns)
set_tests_properties(zero_zeropp_netns PROPERTIES LABELS "zero;cli;mpi" TIMEOUT 600 SKIP_RETURN_CODE 77
                     RUN_SERIAL TRUE ENVIRONMENT "${ZINC_TEST_ENV}")
# qgZ's two-stage INT4 reduction on its own against the float64 sum, within its bound (nodes of 2 ranks at 4
# ranks, of 1 at 2), bitwise repeatable, its bytes as the wire layout says.
foreach(n 2 4)
  zinc_test(NAME zero_grads_qgz_np${n} SOURCES test_grads_qgz.c zero_fixture.c RANKS ${n} LABELS zero)
endforeach()
# In the fast subset (label fast: scripts/test.sh without --full).
zinc_fast(zero_partition zero_grads zero_gather zero_zeropp zero_grads_np2)
