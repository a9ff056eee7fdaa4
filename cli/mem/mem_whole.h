/* zinc mem estimate --model gpt2|mlp: the whole training process's peak per rank, as `zinc train --model`
 * would run it (docs/mem.md, "The whole process"). */
#ifndef ZINC_CLI_MEM_WHOLE_H
#define ZINC_CLI_MEM_WHOLE_H

#include <stdbool.h>

/* Whether argv asks for the whole-process estimate (has --model). */
bool zcli_mem_whole_wanted(int argc, char **argv);
/* argv as given to `zinc mem` (argv[0] is "estimate"); returns the exit code. */
int zcli_mem_whole(int argc, char **argv);

#endif
