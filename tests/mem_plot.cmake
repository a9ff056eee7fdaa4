# The plots as drawn (gnuplot installed; skipped otherwise): the GPU capacity line and its label, the title's
# second line (the model) present, and a file name with a space, a quote and a double quote drawn where asked.
find_program(ZINC_GNUPLOT gnuplot)
set(ZINC_PLOT_OUT "${PROJECT_BINARY_DIR}/mem plot's \"q\".svg")
add_test(NAME mem_plot_drawn
         COMMAND sh -c "command -v gnuplot >/dev/null || exit 77; rm -f \"$1\"; \"$0\" mem estimate --gpt2 small --gpu-mem 16GiB --plot \"$1\" >/dev/null && grep -q 'GPU capacity 16 GiB' \"$1\" && grep -q 'GPT-2 small' \"$1\" && grep -q 'against rank count' \"$1\""
                 $<TARGET_FILE:zinc_cli_hooks> ${ZINC_PLOT_OUT})
set_tests_properties(mem_plot_drawn PROPERTIES LABELS "mem;cli" ENVIRONMENT "${ZINC_TEST_ENV}" SKIP_RETURN_CODE 77)
