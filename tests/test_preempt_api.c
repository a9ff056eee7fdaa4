/* zinc_options.preempt through the public API (issue 27): a SIGTERM, SIGINT or SIGUSR1 raised on one rank at a
 * random step is only recorded (the process lives on), and every rank learns it at the same zinc_step
 * (zinc_step_info.preempt_signal, zinc_preempt_requested), with no collective of the program's own. Without
 * the option (the default) nothing is recorded. Run on 1 and 2 ranks. */
#include <signal.h>

#include "engine_util.h"
#include "zt.h"

static zt_logcap quiet_log_cap = {.echo = ZINC_LOG_ERROR, .echo_all_ranks = 1};

static zinc_status create(int preempt, zinc_engine **e, mlp_model **m) {
    eu_run r = {.stage = 2, .dtype = ZINC_FP32};
    char cfg[8192];
    eu_config(&r, cfg, sizeof cfg);
    zinc_options o = zinc_default_options();
    o.config_json = cfg;
    o.device = ZINC_DEVICE_CPU;
    o.log_fn = zt_logcap_fn;
    o.log_userdata = &quiet_log_cap;
    o.cpu_threads = 1;
    o.preempt = preempt;
    zinc_status st = zinc_create(&o, e);
    if (st != ZINC_OK) return st;
    mlp_config mc = eu_model();
    st = mlp_create(*e, &mc, m);
    if (st != ZINC_OK) zinc_destroy(*e);
    return st;
}

/* Trains until the ranks agree on a signal raised on rank `who` before step `at`; returns the step whose
 * info first carried it (-1: never). */
static int64_t run_until_agreed(int sig, int who, int64_t at, int64_t steps) {
    zinc_engine *e = NULL;
    mlp_model *m = NULL;
    ZT_OK(create(1, &e, &m));
    if (!e) return -2;
    int64_t seen = -1;
    for (int64_t s = 0; s < steps && seen < 0; s++) {
        if (s == at && zinc_rank(e) == who) raise(sig);
        zinc_step_info info;
        ZT_OK(mlp_train_step(m, s, &info, NULL));
        ZT_CHECK(info.preempt_signal == zinc_preempt_requested(e), "the step info and the query agree");
        if (info.preempt_signal) {
            ZT_CHECK(info.preempt_signal == sig, "rank %d: signal %d agreed, %d raised", zinc_rank(e),
                     (int)info.preempt_signal, sig);
            seen = s;
        }
    }
    /* every rank stopped at the same step */
    double mine = (double)seen, sum = mine;
    ZT_OK(zinc_allreduce_sum(e, &sum, 1));
    ZT_CHECK(sum == mine * zinc_world_size(e), "rank %d saw the signal at step %lld; the ranks' sum is %g",
             zinc_rank(e), (long long)seen, sum);
    mlp_destroy(m);
    zinc_destroy(e);
    return seen;
}

int main(void) {
    zt_name = "preempt_api";
    uint64_t rng = zt_seed();
    zinc_engine *e = NULL;
    mlp_model *m = NULL;
    /* out of range */
    zinc_options bad = zinc_default_options();
    bad.config_json = "{\"train_batch_size\": 1}";
    bad.preempt = 2;
    ZT_ERR(zinc_create(&bad, &e), ZINC_ERR_INVALID_ARG, "options.preempt 2");
    ZT_CHECK(zinc_preempt_requested(NULL) == 0, "NULL engine: 0");

    /* One engine with the option: each signal is seen at the step it was raised before, on every rank. The
     * process-wide record is cleared between runs by a fresh process only, so one signal per process: the
     * signal and the rank are drawn from the seed. */
    static const int sigs[3] = {SIGTERM, SIGINT, SIGUSR1};
    ZT_OK(create(0, &e, &m));
    if (!e) return zt_finish();
    /* rank 0 draws (the ranks' seeds may differ), everyone takes its draw */
    double draw[3] = {0, 0, 0};
    if (zinc_rank(e) == 0) {
        draw[0] = (double)(zt_rand_u64(&rng) % 3);
        draw[1] = (double)(zt_rand_u64(&rng) % (uint64_t)zinc_world_size(e));
        draw[2] = (double)(1 + zt_rand_u64(&rng) % 5);
    }
    ZT_OK(zinc_allreduce_sum(e, draw, 3));
    int sig = sigs[(int)draw[0]], who = (int)draw[1];
    int64_t at = (int64_t)draw[2];
    {
        /* without preempt nothing is recorded or agreed (no signal is raised here: it would end the process) */
        zinc_step_info info;
        ZT_OK(mlp_train_step(m, 0, &info, NULL));
        ZT_CHECK(info.preempt_signal == 0 && zinc_preempt_requested(e) == 0, "off by default");
        mlp_destroy(m);
        zinc_destroy(e);
    }
    int64_t seen = run_until_agreed(sig, who, at, 12);
    ZT_CHECK(seen == at, "signal %d raised on rank %d before step %lld: agreed at step %lld", sig, who, (long long)at,
             (long long)seen);
    return zt_finish();
}
