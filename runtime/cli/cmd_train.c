#include <stdio.h>

#include "commands.h"

int zinc_cmd_train(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "zinc train: under construction in this commit\n");
    return 2;
}
