# GPT-2 example (examples/gpt2): layers against float64 references, whole-model gradient check, llm.c files.
zinc_test(NAME gpt2_layers SOURCES test_gpt2_layers.c LIBS zinc_gpt2 LABELS gpt2 unit ENV OMP_NUM_THREADS=2)
zinc_test(NAME gpt2_grad SOURCES test_gpt2_grad.c LIBS zinc_gpt2 LABELS gpt2 unit)
zinc_test(NAME gpt2_files SOURCES test_gpt2_files.c LIBS zinc_gpt2 LABELS gpt2 unit)
