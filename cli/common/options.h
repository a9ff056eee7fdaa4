/* The zinc program's options: one table per command (name, type, range, help) that parses the arguments,
 * checks each value before anything uses it, and prints the command's --help. Every command parses
 * through zcli_parse, so the rules hold everywhere alike:
 *   - an option that takes a value and has none (the end of the arguments, or the next argument starts
 *     with "--": `--save --quiet`) is an error, never a path named "--quiet";
 *   - a number is range-checked before any arithmetic is done with it;
 *   - an unknown option, an empty value, or a second positional argument is an error (exit status 2).
 * A value is stored at its option's offset into the command's own options struct, whose fields the
 * command fills with their defaults first. */
#ifndef ZINC_CLI_OPTIONS_H
#define ZINC_CLI_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* The most --set PATH=VALUE options one command takes. */
#define ZCLI_MAX_SETS 256

typedef enum zcli_type {
    ZCLI_FLAG,   /* no value: sets a bool */
    ZCLI_INT,    /* an int64_t in lo..hi (a whole number; 1e6 is accepted) */
    ZCLI_TEXT,   /* a const char *: a non-empty value (a path, a name) */
    ZCLI_CHOICE, /* an int: the index of the value in `choices`, "a|b|c" */
    ZCLI_SIZE,   /* a uint64_t byte count: 80GB (1e9), 80GiB or 80G (2^30), K/M/G/T, plain bytes */
    ZCLI_LIST    /* a zcli_list: repeatable (--set) */
} zcli_type;

/* A repeatable option's values, in order, NULL-terminated. */
typedef struct zcli_list {
    const char *v[ZCLI_MAX_SETS + 1];
    int n;
} zcli_list;

typedef struct zcli_opt {
    const char *name; /* "--steps" */
    zcli_type type;
    size_t off;          /* offsetof(the command's struct, its field) */
    const char *arg;     /* the value's name in --help and messages: "N", "FILE" */
    int64_t lo, hi;      /* ZCLI_INT: the valid range */
    const char *choices; /* ZCLI_CHOICE: "cpu|cuda|auto" */
    const char *help;    /* lines separated by \n; printed after "  --name ARG", then the default and range */
} zcli_opt;

/* A default that the command's defaults do not hold because it is settled after parsing (from other
 * options, the config or the machine): --help prints `text` as the option's default. Numbers in it come
 * from the constants the code settles it with (ZCLI_STR), never retyped. */
typedef struct zcli_later {
    const char *name; /* "--device" */
    const char *text; /* "the config's zinc.device, else auto" */
} zcli_later;

/* One group of options, written into one struct. `opts` ends with an entry whose name is NULL. Each
 * option's default in --help comes from the table: the value the command's defaults put in its field (an
 * integer in the option's range, a choice, a text), or its `later` entry; an option with neither has no
 * default (off, or required). */
typedef struct zcli_table {
    const char *title; /* the heading in --help ("options:", "model:") */
    const zcli_opt *opts;
    const zcli_later *later; /* ends with an entry whose name is NULL; NULL: none */
} zcli_table;

/* A macro's value as a string literal, for a zcli_later text: ZCLI_STR(GPT2_VOCAB). */
#define ZCLI_STR_(x) #x
#define ZCLI_STR(x) ZCLI_STR_(x)

/* A command: its name in messages, its help around the tables, its positional argument (if any), and up
 * to four tables, each with the struct it fills. */
#define ZCLI_MAX_TABLES 4
typedef struct zcli_cmd {
    const char *name;       /* "zinc train": every message starts with it */
    const char *usage;      /* "usage: ..." lines */
    const char *about;      /* the paragraph after the usage, or NULL */
    const char *footer;     /* printed after the options, or NULL */
    const char *positional; /* "FILE" when the command takes one positional argument, else NULL */
    const zcli_table *tables[ZCLI_MAX_TABLES];
    void *dst[ZCLI_MAX_TABLES];
    const char **pos_dst; /* where the positional argument goes */
    /* Reads only its own options out of another command's arguments (zinc launch reading zinc train's): an
     * unknown option is skipped with its value (the next argument, unless it starts with "--"), and so are
     * other words and --help. */
    bool keep_unknown;
} zcli_cmd;

/* Parses argv[first..argc): 0 when the arguments are good, 1 when --help was printed (exit 0), 2 after
 * printing what is wrong (the exit status for a usage error). */
int zcli_parse(const zcli_cmd *c, int first, int argc, char **argv);
/* The command's help: usage, about, every table's options with their defaults (from c->dst, which the
 * command has filled with its defaults, and the tables' `later` entries) and ranges, footer. */
void zcli_help(const zcli_cmd *c, FILE *f);
/* "--x needs ...": an error about the arguments, prefixed with the command's name; returns 2. */
int zcli_usage_error(const zcli_cmd *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Whether the option `name` appears in argv[first..argc) with a value (the value, or NULL). For a choice
 * that selects the rest of the table (zinc train --model) before the full parse. */
const char *zcli_peek(int first, int argc, char **argv, const char *name);

/* A command's subcommands (as git's OPT_SUBCOMMAND): the word after the command picks one of `words`. */
typedef struct zcli_subs {
    const char *name;       /* "zinc trace": the message's prefix */
    const char *words;      /* "summary|plot" */
    const char *noun;       /* "subcommand": an unknown word is named (NULL: the usage alone) */
    bool list;              /* the message lists the words: `unknown subcommand "x" (summary or plot)` */
    void (*usage)(FILE *f); /* the command's help */
} zcli_subs;
/* The index of argv[1] in s->words; else -1 with *rc the exit status: --help or -h printed the usage on
 * stdout (0); no word, or an unknown one, printed the message and the usage on stderr (2). */
int zcli_subcommand(const zcli_subs *s, int argc, char **argv, int *rc);
/* The index of v in choices ("a|b|c"), or -1. */
int zcli_choice(const char *choices, const char *v);

#endif
