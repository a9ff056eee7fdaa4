# ZeRO's own pieces (zero/) without an engine: the partition math.
zinc_test(NAME zero_partition SOURCES test_partition.c LABELS zero unit)
# Gradient placement and reduction, and stage-3 gathering, from hand-made contexts (cpu device, a module
# table, the plan's sizes): no engine. At 1 rank and under mpirun at 2.
zinc_test(NAME zero_grads SOURCES test_zero_grads.c zero_fixture.c LABELS zero unit)
zinc_test(NAME zero_grads_np2 SOURCES test_zero_grads.c zero_fixture.c RANKS 2 LABELS zero)
zinc_test(NAME zero_gather SOURCES test_zero_gather.c zero_fixture.c LABELS zero unit)
zinc_test(NAME zero_gather_np2 SOURCES test_zero_gather.c zero_fixture.c RANKS 2 LABELS zero)
