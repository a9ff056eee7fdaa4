# The example programs under examples/ that stand alone (built on the shared library and include/zinc.h
# only): each trains on generated data and fails below its stated accuracy.
# examples/convnet: a darknet-style CNN with SGD + momentum, weights handed over tensor by tensor, at 1 and
# 2 ranks and ZeRO stages 0 and 3 (4 classes: chance is 0.25; it reaches about 1.0 in 150 steps).
add_test(NAME examples_convnet_np1 COMMAND $<TARGET_FILE:zinc_example_convnet> --stage 0 --steps 150
         --min-accuracy 0.9)
add_test(NAME examples_convnet_stage3_np2 COMMAND ${ZINC_MPIRUN} -np 2 $<TARGET_FILE:zinc_example_convnet> --stage 3
         --steps 150 --min-accuracy 0.9)
set_tests_properties(examples_convnet_np1 examples_convnet_stage3_np2 PROPERTIES LABELS "examples" TIMEOUT 300)
set_tests_properties(examples_convnet_stage3_np2 PROPERTIES LABELS "examples;mpi")
# In the fast subset (label fast: scripts/test.sh without --full).
zinc_fast(examples_convnet_np1)
# The convnet example's glue (issue 41: a darknet wrap in at most 50 lines without comments and blank lines).
add_test(NAME examples_convnet_glue COMMAND bash ${PROJECT_SOURCE_DIR}/scripts/count_glue.sh
         ${PROJECT_SOURCE_DIR}/examples/convnet/convnet.c 50)
set_tests_properties(examples_convnet_glue PROPERTIES LABELS "examples")
zinc_fast(examples_convnet_glue)
