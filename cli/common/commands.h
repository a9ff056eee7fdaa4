/* The zinc program's subcommands. Each takes the arguments after its name (argv[0] is the subcommand)
 * and returns the process exit status. Each parses its arguments through its option table (options.h). */
#ifndef ZINC_CLI_COMMANDS_H
#define ZINC_CLI_COMMANDS_H

/* The collective watchdog's seconds that the zinc program asks for unless ZINC_COLLECTIVE_TIMEOUT_S is set
 * (main.c; zinc train's --help names it). */
#define ZCLI_COLLECTIVE_TIMEOUT_S "1800"

int zcli_cmd_config(int argc, char **argv);     /* zinc config check FILE [--world-size N] [--set P=V] */
int zcli_cmd_train(int argc, char **argv);      /* zinc train --config FILE [--steps N] ... (train.h) */
int zcli_cmd_mem(int argc, char **argv);        /* zinc mem estimate|measure|plan MODEL [--config FILE] ... */
int zcli_cmd_checkpoint(int argc, char **argv); /* zinc checkpoint inspect|export DIR[/TAG] ... */
int zcli_cmd_launch(int argc, char **argv);     /* zinc launch -n N [--max-restarts K] -- zinc train ... */
int zcli_cmd_trace(int argc, char **argv);      /* zinc trace summary|plot TRACE.json (a zinc train --trace file) */

#endif
