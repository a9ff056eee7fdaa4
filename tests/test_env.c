/* The environment table (base/core/env.c) against its documentation and its promises.
 *
 * - Every row has a name, values, a default, a reader and a description; names are unique.
 * - docs/env.md has exactly one table row per variable of the table, with the same values, default,
 *   reader and test-hook column ("yes" for test hooks, "no" otherwise); every row there read by the
 *   library or the zinc program is in the table (rows read only by the tests are theirs).
 * - zenv_get gives a setting's value and NULL when it is unset or empty.
 * - A test hook's value is given only in a build with ZINC_TEST_HOOKS. This program is built twice:
 *   against zinc_internal (the test build: ZT_EXPECT_HOOKS=1) and with env.c compiled without
 *   ZINC_TEST_HOOKS, as a production build compiles it (ZT_EXPECT_HOOKS=0). */
#include <stdlib.h>
#include <string.h>

#include "base/core/env.h"
#include "zt.h"

#ifndef ZT_EXPECT_HOOKS
#error "build with ZT_EXPECT_HOOKS=0 or 1 (tests/exports_env.cmake)"
#endif

#define MAX_ROWS 128
#define CELLS 6

typedef struct doc_row {
    char cell[CELLS][512]; /* variable, read by, values, default, test hook, what it does */
    int line;
} doc_row;

static char *trim(char *s) {
    while (*s == ' ' || *s == '\t') s++;
    size_t n = strlen(s);
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\n' || s[n - 1] == '\r')) s[--n] = 0;
    return s;
}

/* The rows of docs/env.md's table: lines that start with "| `". */
static int read_doc(doc_row *rows, int max) {
    char path[4096];
    snprintf(path, sizeof path, "%s/docs/env.md", zt_source_dir());
    FILE *f = fopen(path, "r");
    ZT_CHECK(f != NULL, "cannot open %s", path);
    if (!f) return 0;
    char line[4096];
    int n = 0, lineno = 0;
    while (fgets(line, sizeof line, f)) {
        lineno++;
        if (strncmp(line, "| `", 3) != 0) continue;
        ZT_CHECK(n < max, "docs/env.md: more than %d rows", max);
        if (n >= max) break;
        doc_row *r = &rows[n];
        memset(r, 0, sizeof *r);
        r->line = lineno;
        char *p = line + 1;
        int c = 0;
        for (char *bar; c < CELLS && (bar = strchr(p, '|')); c++, p = bar + 1) {
            *bar = 0;
            snprintf(r->cell[c], sizeof r->cell[c], "%s", trim(p));
        }
        ZT_CHECK(c == CELLS, "docs/env.md:%d: %d cells, want %d", lineno, c, CELLS);
        char *name = r->cell[0];
        size_t len = strlen(name);
        if (len >= 2 && name[0] == '`' && name[len - 1] == '`') {
            memmove(name, name + 1, len - 2);
            name[len - 2] = 0;
        }
        n++;
    }
    fclose(f);
    ZT_CHECK(n > 0, "docs/env.md has no table rows");
    return n;
}

static void check_table_and_doc(void) {
    static doc_row rows[MAX_ROWS];
    int nrows = read_doc(rows, MAX_ROWS);
    int hooks = 0;
    for (int id = 0; id < ZENV_COUNT; id++) {
        const zenv_var *v = zenv_info((zenv_id)id);
        ZT_CHECK(v && v->name && v->type && v->dflt && v->who && v->what, "row %d is incomplete", id);
        if (!(v && v->name && v->type && v->dflt && v->who && v->what)) continue;
        hooks += v->kind == ZENV_TEST_HOOK;
        for (int j = 0; j < id; j++)
            ZT_CHECK(strcmp(zenv_info((zenv_id)j)->name, v->name) != 0, "%s is in the table twice", v->name);
        int found = 0;
        for (int k = 0; k < nrows; k++) {
            const doc_row *r = &rows[k];
            if (strcmp(r->cell[0], v->name) != 0) continue;
            found++;
            ZT_CHECK(!strcmp(r->cell[1], v->who), "docs/env.md:%d: %s read by \"%s\", env.c says \"%s\"", r->line,
                     v->name, r->cell[1], v->who);
            ZT_CHECK(!strcmp(r->cell[2], v->type), "docs/env.md:%d: %s values \"%s\", env.c says \"%s\"", r->line,
                     v->name, r->cell[2], v->type);
            ZT_CHECK(!strcmp(r->cell[3], v->dflt), "docs/env.md:%d: %s default \"%s\", env.c says \"%s\"", r->line,
                     v->name, r->cell[3], v->dflt);
            const char *hook = v->kind == ZENV_TEST_HOOK ? "yes" : "no";
            ZT_CHECK(!strcmp(r->cell[4], hook), "docs/env.md:%d: %s test hook \"%s\", env.c says \"%s\"", r->line,
                     v->name, r->cell[4], hook);
            ZT_CHECK(strlen(r->cell[5]) > 10, "docs/env.md:%d: %s: say what it does", r->line, v->name);
        }
        ZT_CHECK(found == 1, "%s: %d rows in docs/env.md, want 1", v->name, found);
    }
    ZT_CHECK(hooks >= 10, "%d test hooks in the table", hooks);
    for (int k = 0; k < nrows; k++) {
        const doc_row *r = &rows[k];
        /* rows read by the tests or by the example models (which use only the public API) are theirs */
        if (!strcmp(r->cell[1], "tests") || !strncmp(r->cell[1], "examples/", 9)) continue;
        int known = 0;
        for (int id = 0; id < ZENV_COUNT; id++) known += !strcmp(zenv_info((zenv_id)id)->name, r->cell[0]);
        ZT_CHECK(known == 1, "docs/env.md:%d: %s is read by \"%s\" but is not in base/core/env.c's table",
                 r->line, r->cell[0], r->cell[1]);
    }
    ZT_CHECK(zenv_info(ZENV_COUNT) == NULL && zenv_info((zenv_id)-1) == NULL, "ids out of range have no row");
    ZT_CHECK(zenv_get(ZENV_COUNT) == NULL, "zenv_get of an id out of range is NULL");
}

static void check_reads(void) {
    const char *name = zenv_info(ZENV_STAGING_BYTES)->name;
    unsetenv(name);
    ZT_CHECK(zenv_get(ZENV_STAGING_BYTES) == NULL, "unset gives NULL");
    setenv(name, "", 1);
    ZT_CHECK(zenv_get(ZENV_STAGING_BYTES) == NULL, "empty gives NULL");
    setenv(name, "8192", 1);
    const char *v = zenv_get(ZENV_STAGING_BYTES);
    ZT_CHECK(v && !strcmp(v, "8192"), "a setting is read at each call: got %s", v ? v : "NULL");
    unsetenv(name);

    ZT_CHECK(zenv_test_hooks_enabled() == ZT_EXPECT_HOOKS, "test hooks enabled: %d, want %d",
             zenv_test_hooks_enabled(), ZT_EXPECT_HOOKS);
    for (int id = 0; id < ZENV_COUNT; id++) {
        const zenv_var *h = zenv_info((zenv_id)id);
        if (h->kind != ZENV_TEST_HOOK) continue;
        char *saved = getenv(h->name) ? strdup(getenv(h->name)) : NULL;
        setenv(h->name, "12345", 1);
        const char *got = zenv_get((zenv_id)id);
        if (ZT_EXPECT_HOOKS)
            ZT_CHECK(got && !strcmp(got, "12345"), "test build: hook %s reads %s", h->name, got ? got : "NULL");
        else
            ZT_CHECK(got == NULL, "production build: hook %s must read as unset, got %s", h->name, got);
        if (saved) setenv(h->name, saved, 1);
        else unsetenv(h->name);
        free(saved);
    }
}

int main(void) {
    zt_name = ZT_EXPECT_HOOKS ? "env" : "env_production";
    check_table_and_doc();
    check_reads();
    return zt_finish();
}
