/* Shared state of the ds_config loader (config_load.c) and resolver (config_resolve.c). */
#ifndef ZINC_RUNTIME_CONFIG_INTERNAL_H
#define ZINC_RUNTIME_CONFIG_INTERNAL_H

#include <stddef.h>

#include "config.h"

typedef struct zcfg_loader {
    const char *origin;  /* file name for messages */
    const zlog *log;
    zinc_config *c;
    char *err;           /* collected problems, one per line */
    size_t elen, ecap;
    int nerr;
    char autos[2048];    /* paths written as "auto", for the resolution log */
    char via[2048];      /* "canonical=spelling|" for settings given through another spelling */
    bool sched_type_bad; /* scheduler.type was refused: its parameters are not checked against it */
    bool sched_params_reported; /* parameters without a scheduler type: reported once */
} zcfg_loader;

/* Records one problem ("ORIGIN: PATH: message"). */
void zcfg_problem(zcfg_loader *L, const char *path, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
void zcfg_mark_given(zinc_config *c, const char *path);
void zcfg_mark_auto(zcfg_loader *L, const char *path);
bool zcfg_parse_dtype(const char *s, zinc_dtype *out);
/* The fewest significant digits (1..17) that print x so that it reads back exactly. */
int zcfg_shortest_digits(double x);

/* Derives the batch triad, dtypes and resolved defaults, and checks the rules that span keys. */
void zcfg_resolve(zcfg_loader *L);

#endif
