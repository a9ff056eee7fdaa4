/* The zinc program's subcommands. Each takes the arguments after its name (argv[0] is the subcommand)
 * and returns the process exit status. */
#ifndef ZINC_CLI_COMMANDS_H
#define ZINC_CLI_COMMANDS_H

/* The most --set PATH=VALUE options one command takes. */
#define ZINC_MAX_SETS 256

int zinc_cmd_config(int argc, char **argv);     /* zinc config check FILE [--world-size N] [--set P=V] */
int zinc_cmd_train(int argc, char **argv);      /* zinc train --config FILE [--steps N] ... */
int zinc_cmd_mem(int argc, char **argv);        /* zinc mem estimate|measure MODEL [--config FILE] ... */
int zinc_cmd_checkpoint(int argc, char **argv); /* zinc checkpoint inspect|export DIR[/TAG] ... */

#endif
