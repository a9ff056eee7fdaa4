# ZeRO's own pieces (zero/) without an engine: the partition math.
zinc_test(NAME zero_partition SOURCES test_partition.c LABELS zero unit)
