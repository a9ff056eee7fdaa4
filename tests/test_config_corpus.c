/* The corpus of public DeepSpeed configs (tests/ds_corpus, sources in its README.md): each file loads with the
 * outcome written in expected.tsv, accepted (with the --set overrides given there) or refused for the reason
 * given, and every .json file in the folder has a row. Refusals must carry no internal file:line trail;
 * accepted configs must have their batch sizes and every "auto" resolved. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/config/config.h"
#include "zt.h"

#define MAX_FILES 512
#define MAX_SETS 16

static zt_logcap quiet_log = {.echo = ZINC_LOG_OFF}; /* the warnings of accepted configs, counted */

static int check_row(const char *dir, char *line) {
    char *file = strtok(line, "\t"), *world_s = strtok(NULL, "\t"), *outcome = strtok(NULL, "\t"),
         *detail = strtok(NULL, "\n");
    if (!file || !world_s || !outcome) {
        ZT_CHECK(0, "malformed expected.tsv row: %s", line);
        return 0;
    }
    char path[8400];
    snprintf(path, sizeof path, "%.4199s/%.4199s", dir, file);
    const char *sets[MAX_SETS + 1] = {0};
    int nsets = 0;
    bool accept = !strcmp(outcome, "accept");
    ZT_CHECK(accept || !strcmp(outcome, "refuse"), "%s: outcome \"%s\"", file, outcome);
    if (accept && detail)
        for (char *tok = strtok(detail, " "); tok && nsets < MAX_SETS; tok = strtok(NULL, " ")) sets[nsets++] = tok;
    zcfg_load_opts o = {.sets = nsets ? sets : NULL, .run_steps = 100};
    zlog log = {zt_logcap_fn, &quiet_log, ZINC_LOG_DEBUG, 0};
    zinc_config *c = malloc(sizeof *c);
    if (!c) return 0;
    zinc_status st = zcfg_load_file_ex(path, atoi(world_s), &o, &log, c);
    if (accept) {
        ZT_CHECK(st == ZINC_OK, "%s: expected accepted, got: %s", file, zinc_last_error());
        if (st == ZINC_OK)
            ZT_CHECK(c->train_batch_size > 0 && c->train_micro_batch_size_per_gpu > 0 &&
                         c->gradient_accumulation_steps > 0,
                     "%s: batch sizes not resolved", file);
    } else {
        ZT_CHECK(st == ZINC_ERR_CONFIG && detail && strstr(zinc_last_error(), detail),
                 "%s: expected refused with \"%s\", got %s: %s", file, detail ? detail : "", zinc_status_name(st),
                 zinc_last_error());
        ZT_CHECK(!strstr(zinc_last_error(), ".c:"), "%s: internal trail in the message: %s", file, zinc_last_error());
    }
    free(c);
    printf("%-90s %s\n", file, accept ? (nsets ? "accepted with --set" : "accepted") : "refused");
    return accept ? 1 : 2;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

int main(void) {
    zt_name = "test_config_corpus";
    char dir[4200], tsv[4300];
    snprintf(dir, sizeof dir, "%s/tests/ds_corpus", zt_source_dir());
    snprintf(tsv, sizeof tsv, "%s/expected.tsv", dir);
    FILE *f = fopen(tsv, "r");
    ZT_CHECK(f != NULL, "cannot open %s (set ZINC_SOURCE_DIR)", tsv);
    if (!f) return zt_finish();
    char line[8192];
    char *listed[MAX_FILES];
    int nlisted = 0, accepted = 0, refused = 0;
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#' || line[0] == '\n') continue;
        char name[1024];
        snprintf(name, sizeof name, "%.*s", (int)strcspn(line, "\t"), line);
        if (nlisted < MAX_FILES) listed[nlisted++] = strdup(name);
        int r = check_row(dir, line);
        accepted += r == 1;
        refused += r == 2;
    }
    fclose(f);
    /* every corpus file has an expectation */
    DIR *d = opendir(dir);
    int njson = 0;
    for (struct dirent *e; d && (e = readdir(d));) {
        size_t len = strlen(e->d_name);
        if (len < 6 || strcmp(e->d_name + len - 5, ".json")) continue;
        njson++;
        int found = 0;
        for (int i = 0; i < nlisted; i++) found |= !strcmp(listed[i], e->d_name);
        ZT_CHECK(found, "%s has no row in expected.tsv", e->d_name);
    }
    if (d) closedir(d);
    qsort(listed, (size_t)nlisted, sizeof listed[0], cmp_str);
    for (int i = 0; i + 1 < nlisted; i++) ZT_CHECK(strcmp(listed[i], listed[i + 1]), "%s listed twice", listed[i]);
    for (int i = 0; i < nlisted; i++) free(listed[i]);
    ZT_CHECK(njson >= 60, "the corpus has %d files; at least 60 wanted", njson);
    printf("corpus: %d files, %d accepted (some with --set), %d refused for their stated reason, %d warnings\n", njson,
           accepted, refused, quiet_log.count[ZINC_LOG_WARN]);
    return zt_finish();
}
