/* Issue 42 at the public API and the safe writer: zinc_memory_declare's sums cannot wrap (2^64 - 1 bytes, and
 * declarations whose total passes 2^64, refused before the pre-flight sees a small number), zinc_set_master
 * refuses NaN and infinite weights naming the index (the weights untouched), zinc_master_foreach refuses a
 * broken engine, zfile_inside (the rule behind --report/--trace outside the checkpoint directories) answers
 * through links and for paths not made yet, and zfile_check_links refuses a link in a directory others can
 * write on the way to an output, and the example MLP's memory sizes do not wrap. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine_util.h"
#include "base/core/safe_file.h"
#include "runtime/engine/engine_internal.h"
#include "zt.h"

static zinc_engine *bare(void) {
    zinc_options o = zinc_default_options();
    o.config_json = "{\"train_batch_size\": 4}";
    o.log_level = ZINC_LOG_OFF;
    zinc_engine *e = NULL;
    ZT_OK(zinc_create(&o, &e));
    return e;
}

static void declare_sums(void) {
    zinc_engine *e = bare();
    if (!e) return;
    ZT_ERR(zinc_memory_declare(e, ZINC_MEM_ACTIVATIONS, ZINC_MEMKIND_HOST, UINT64_MAX, "all of it"),
           ZINC_ERR_INVALID_ARG, "2^60");
    /* two halves whose sum wraps to a small number in uint64_t */
    ZT_OK(zinc_memory_declare(e, ZINC_MEM_ACTIVATIONS, ZINC_MEMKIND_HOST, 1ull << 59, "half"));
    ZT_ERR(zinc_memory_declare(e, ZINC_MEM_SCRATCH, ZINC_MEMKIND_HOST, (1ull << 63) + 1, "wraps"), ZINC_ERR_INVALID_ARG,
           "wraps");
    ZT_ERR(zinc_memory_declare(e, ZINC_MEM_SCRATCH, ZINC_MEMKIND_DEVICE, (1ull << 59) + 1, "just past"),
           ZINC_ERR_INVALID_ARG, "2^60");
    ZT_OK(zinc_memory_declare(e, ZINC_MEM_SCRATCH, ZINC_MEMKIND_HOST, 1ull << 20, "small"));
    zinc_destroy(e);
}

static zinc_status visit(void *u, int param_index, int64_t offset, const float *values, int64_t count) {
    (void)param_index, (void)offset, (void)values, (void)count;
    ++*(int *)u;
    return ZINC_OK;
}

static void master_checks(void) {
    eu_run r = {.stage = 1, .dtype = ZINC_FP32};
    zinc_engine *e = NULL;
    mlp_model *m = NULL;
    ZT_OK(eu_create(&r, &e, &m));
    if (!e) return;
    int64_t n = zinc_numel_total(e);
    float *w = malloc((size_t)n * sizeof *w), *back = malloc((size_t)n * sizeof *back);
    ZT_OK(zinc_gather_master(e, w, (size_t)n));
    const float bad[] = {NAN, INFINITY, -INFINITY};
    for (int k = 0; k < 3; k++) {
        float keep = w[n / 2];
        w[n / 2] = bad[k];
        char want[64];
        snprintf(want, sizeof want, "weight %lld of", (long long)(n / 2));
        ZT_ERR(zinc_set_master(e, w, (size_t)n), ZINC_ERR_INVALID_ARG, want);
        w[n / 2] = keep;
    }
    ZT_OK(zinc_gather_master(e, back, (size_t)n));
    ZT_CHECK(!memcmp(w, back, (size_t)n * sizeof *w), "a refused zinc_set_master changed the weights");
    ZT_CHECK(!e->broken[0], "a refused zinc_set_master broke the engine: %s", e->broken);
    ZT_OK(zinc_set_master(e, w, (size_t)n)); /* finite weights still go in */
    int calls = 0;
    ZT_OK(zinc_master_foreach(e, visit, &calls));
    ZT_CHECK(calls > 0, "zinc_master_foreach visited nothing");
    zengine_mark_broken(e, "test: marked broken");
    calls = 0;
    ZT_ERR(zinc_master_foreach(e, visit, &calls), ZINC_ERR_STATE, "refuses to go on");
    ZT_CHECK(calls == 0, "a broken engine's weights were handed out %d times", calls);
    free(w);
    free(back);
    mlp_destroy(m);
    zinc_destroy(e);
}

static void inside(void) {
    char root[1100], ck[1200], link[1200], p[1300], other[1200], cmd[4000], *abs = realpath(zt_build_dir(), NULL);
    snprintf(root, sizeof root, "%.1000s/hardening3_test", abs ? abs : zt_build_dir());
    free(abs);
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s/ck/step2' '%s/other'", root, root, root);
    if (system(cmd) != 0) {
        ZT_CHECK(0, "cannot make %s", root);
        return;
    }
    snprintf(ck, sizeof ck, "%s/ck", root);
    snprintf(other, sizeof other, "%s/other", root);
    snprintf(link, sizeof link, "%s/other/to_ck", root);
    ZT_CHECK(symlink(ck, link) == 0, "symlink");
    const struct {
        const char *rel;
        bool want;
    } cases[] = {{"ck/latest", true},          {"ck/step2/manifest.json", true}, {"ck/step9/not/made/yet", true},
                 {"other/to_ck/latest", true}, {"other/x.json", false},          {"ck", false},
                 {"ck2/latest", false}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        snprintf(p, sizeof p, "%s/%s", root, cases[i].rel);
        ZT_CHECK(zfile_inside(p, ck) == cases[i].want, "zfile_inside(%s, ck) is not %d", cases[i].rel, cases[i].want);
    }
    snprintf(p, sizeof p, "%s/ck/latest", root);
    ZT_CHECK(!zfile_inside(p, other), "ck/latest inside other/");
    ZT_CHECK(!zfile_inside(p, "/no/such/dir"), "inside a directory that does not exist");
    ZT_CHECK(zfile_inside(p, "/"), "not inside /");
}

/* Links on the way to an output directory: in a directory others can write (not sticky), refused naming the
 * link, also as the second hop of a chain and before a missing part; in a private or a sticky directory
 * (link ours), followed. */
static void links(void) {
    char root[1100], cmd[16000], p[1300], want[1300], *abs = realpath(zt_build_dir(), NULL);
    snprintf(root, sizeof root, "%.1000s/hardening3_links", abs ? abs : zt_build_dir());
    free(abs);
    snprintf(cmd, sizeof cmd,
             "rm -rf '%s' && mkdir -p '%s/target' '%s/shared' '%s/sticky' '%s/private' && chmod 0775 '%s/shared' && "
             "chmod 1777 '%s/sticky' && chmod 0755 '%s/private' && ln -s ../target '%s/shared/run' && "
             "ln -s ../target '%s/sticky/run' && ln -s ../target '%s/private/run' && "
             "ln -s ../shared/run '%s/private/chain'",
             root, root, root, root, root, root, root, root, root, root, root, root);
    if (system(cmd) != 0) {
        ZT_CHECK(0, "cannot make %s", root);
        return;
    }
    const struct {
        const char *rel;
        bool ok;
    } cases[] = {{"target", true},
                 {"private/run", true},
                 {"sticky/run", true},
                 {"shared/run", false},
                 {"private/chain", false},
                 {"shared/run/not/made", false},
                 {"shared/../private/run", true}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        snprintf(p, sizeof p, "%s/%s", root, cases[i].rel);
        zinc_status st = zfile_check_links(p, "--trace");
        ZT_CHECK((st == ZINC_OK) == cases[i].ok, "zfile_check_links(%s): %s (want %s)", cases[i].rel,
                 st == ZINC_OK ? "followed" : zinc_last_error(), cases[i].ok ? "followed" : "refused");
        if (!cases[i].ok) {
            snprintf(want, sizeof want, "%s/shared/run", root);
            ZT_CHECK(st != ZINC_OK && strstr(zinc_last_error(), want) && strstr(zinc_last_error(), "symbolic link"),
                     "the refusal names the link: %s", zinc_last_error());
        }
    }
    snprintf(p, sizeof p, "%s/shared/run", root);
    ZT_ERR(zfile_check_dir(p, "--save"), ZINC_ERR_IO, "symbolic link");
    snprintf(p, sizeof p, "%s/shared/run/t.json", root);
    ZT_ERR(zfile_write("--trace", p, "x", 1, 0, NULL), ZINC_ERR_IO, "symbolic link");
    snprintf(p, sizeof p, "%s/target/t.json", root);
    ZT_CHECK(access(p, F_OK) != 0, "a file was written through the untrusted link");
    snprintf(p, sizeof p, "%s/private/run/t.json", root);
    ZT_OK(zfile_write("--trace", p, "x", 1, 0, NULL));
}

/* The example MLP's sizes in 64 bits: hidden 2^20 into classes 2^20 is 2^40 weights (an int product wraps to 0),
 * and mlp_memory takes only what mlp_create takes. */
static void mlp_sizes(void) {
    mlp_config c = mlp_default_config();
    c.in_dim = 512, c.hidden = 1 << 20, c.depth = 1, c.classes = 1 << 20;
    uint64_t act = 0, scr = 0;
    ZT_OK(mlp_memory(&c, 1, &act, &scr));
    uint64_t weights = (512ull << 20) + (1ull << 20) + (1ull << 40) + (1ull << 20); /* fc1 (w, b), fc2 (w, b) */
    ZT_CHECK(scr >= weights * 4, "mlp_memory scratch %llu bytes < the weights' %llu bytes", (unsigned long long)scr,
             (unsigned long long)(weights * 4));
    c.in_dim = 100000;
    ZT_ERR(mlp_memory(&c, 1, &act, &scr), ZINC_ERR_INVALID_ARG, "in_dim 1..512");
    c.in_dim = 32;
    ZT_ERR(mlp_memory(&c, (int64_t)1 << 40, &act, &scr), ZINC_ERR_INVALID_ARG, "2^38");
}

int main(void) {
    zt_name = "hardening3";
    declare_sums();
    master_checks();
    inside();
    links();
    mlp_sizes();
    return zt_finish();
}
