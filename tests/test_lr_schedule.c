/* The lr schedules against DeepSpeed's formulas (DeepSpeed 0.19.8, deepspeed/runtime/lr_schedules.py),
 * recomputed here in double from the formulas as written, at many iterations including the boundaries (0,
 * N-1, N, T-1, T, past T) (zlr_lr_at_iteration: DeepSpeed's last_batch_iteration); and, step by step, against
 * the lr and beta1 a real DeepSpeed 0.19.8 engine used (test_deepspeed_engine_values: the step after
 * steps_taken taken steps runs at iteration steps_taken - 1, the first at -1, the constructor's value). */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "runtime/engine/lr_schedule.h"
#include "zt.h"

#define PI 3.141592653589793
#define RTOL 1e-13

/* ------------------------------------------------------------------ expected values */
/* WarmupLR / WarmupDecayLR gamma. */
static double exp_warmup_gamma(int64_t it, int64_t n_cfg, bool linear, bool decay, int64_t total) {
    int64_t n = n_cfg > 2 ? n_cfg : 2;
    if (it < n) return linear ? (double)it / (double)n : log((double)it + 1.0) / log((double)n);
    if (!decay) return 1.0;
    double den = (double)(total - n) > 1.0 ? (double)(total - n) : 1.0;
    return fmax(0.0, (double)(total - it) / den);
}

static double exp_cosine_ratio(int64_t it, int64_t n_cfg, int64_t total, double wmin, double cmin, bool linear) {
    int64_t n = n_cfg > 2 ? n_cfg : 2;
    if (it < n) {
        double f = linear ? (double)it / (double)n : log((double)it + 1.0) / log((double)n);
        return wmin + (1.0 - wmin) * f;
    }
    double progress = (double)(it - n + 1) / (double)(total - n > 1 ? total - n : 1);
    if (progress > 1.0) progress = 1.0; /* zinc clamps past T (later DeepSpeed does too) */
    return fmax(0.0, cmin + (1.0 - cmin) * (1.0 + cos(PI * progress)) / 2.0);
}

/* OneCycle's scale factor at last_batch_iteration `it`, from the cycle geometry: batch b = it + 1 climbs
 * b/first over the first half and falls (total-b)/second over the second. */
static double exp_cycle_scale(int64_t it, int64_t first, int64_t second, int64_t stairs1, int64_t stairs2) {
    int64_t total = first + second;
    int64_t b = (it + 1) % total;
    if (b <= first) {
        if (stairs1 > 0) return floor((double)b * (double)stairs1 / (double)first) / (double)stairs1;
        return (double)b / (double)first;
    }
    if (stairs2 > 0) return floor((double)(total - b) * (double)stairs2 / (double)second) / (double)stairs2;
    return (double)(total - b) / (double)second;
}

static zcfg_scheduler sched(zcfg_scheduler_type type) {
    zcfg_scheduler s;
    memset(&s, 0, sizeof s);
    s.type = type;
    s.warmup_min_lr = 0;
    s.warmup_max_lr = 1e-3;
    s.warmup_num_steps = 1000;
    s.warmup_type = ZWARMUP_LOG;
    s.cos_min_ratio = 1e-4;
    s.cycle_first_step_size = 2000;
    s.cycle_second_step_size = -1;
    s.cycle_momentum = true;
    s.cycle_min_mom = 0.8;
    s.cycle_max_mom = 0.9;
    return s;
}

/* Iterations worth checking around the boundaries n and t, plus a spread. */
static int iters_for(int64_t n, int64_t t, int64_t *out) {
    int k = 0;
    const int64_t fixed[] = {0, 1, 2, 3, 5, 10, 1000000};
    for (size_t i = 0; i < sizeof fixed / sizeof *fixed; i++) out[k++] = fixed[i];
    const int64_t marks[] = {n, t};
    for (int m = 0; m < 2; m++)
        for (int64_t d = -2; d <= 2; d++)
            if (marks[m] + d >= 0) out[k++] = marks[m] + d;
    for (int64_t i = 0; i <= 40; i++) out[k++] = (t + n) * i / 20; /* 0 .. 2(t+n) */
    return k;
}

/* ------------------------------------------------------------------ tests */
static void test_none(void) {
    zcfg_scheduler s = sched(ZSCHED_NONE);
    for (int64_t it = 0; it < 5000; it += 499) {
        ZT_CHECK(zlr_lr_at_iteration(&s, 3e-4, it) == 3e-4, "none lr at %lld", (long long)it);
        ZT_CHECK(zlr_beta1_at_iteration(&s, 0.9, it) == 0.9, "none beta1 at %lld", (long long)it);
    }
}

static void test_warmup_lr(void) {
    const int64_t ns[] = {1, 2, 3, 10, 100, 1000};
    int64_t its[128];
    for (int linear = 0; linear < 2; linear++)
        for (size_t ni = 0; ni < sizeof ns / sizeof *ns; ni++) {
            zcfg_scheduler s = sched(ZSCHED_WARMUP_LR);
            s.warmup_min_lr = 1e-5;
            s.warmup_max_lr = 2e-3;
            s.warmup_num_steps = ns[ni];
            s.warmup_type = linear ? ZWARMUP_LINEAR : ZWARMUP_LOG;
            int k = iters_for(ns[ni], 3 * ns[ni], its);
            for (int i = 0; i < k; i++) {
                double want = 1e-5 + (2e-3 - 1e-5) * exp_warmup_gamma(its[i], ns[ni], linear, false, 0);
                ZT_NEAR(zlr_lr_at_iteration(&s, 0.5, its[i]), want, 0, RTOL,
                        "WarmupLR %s N=%lld it=%lld: %.17g vs %.17g", linear ? "linear" : "log", (long long)ns[ni],
                        (long long)its[i], zlr_lr_at_iteration(&s, 0.5, its[i]), want);
                ZT_CHECK(zlr_beta1_at_iteration(&s, 0.95, its[i]) == 0.95, "WarmupLR leaves beta1");
            }
            /* first step is exactly the minimum; warmup ends at N (clamped to >= 2) */
            ZT_CHECK(zlr_lr_at_iteration(&s, 0.5, 0) == 1e-5, "WarmupLR starts at warmup_min_lr: %.17g",
                     zlr_lr_at_iteration(&s, 0.5, 0));
            int64_t n = ns[ni] < 2 ? 2 : ns[ni];
            ZT_NEAR(zlr_lr_at_iteration(&s, 0.5, n), 2e-3, 0, 1e-15, "WarmupLR reaches max at N");
            if (linear)
                ZT_CHECK(zlr_lr_at_iteration(&s, 0.5, n - 1) < zlr_lr_at_iteration(&s, 0.5, n),
                         "linear WarmupLR still warming at N-1");
            else
                ZT_NEAR(zlr_lr_at_iteration(&s, 0.5, n - 1), 2e-3, 0, 1e-15, "log WarmupLR: ln(N)/ln(N) at it = N-1");
        }

    /* Spot values worked by hand. */
    zcfg_scheduler s = sched(ZSCHED_WARMUP_LR);
    s.warmup_min_lr = 0;
    s.warmup_max_lr = 1.0;
    s.warmup_num_steps = 10;
    s.warmup_type = ZWARMUP_LINEAR;
    ZT_NEAR(zlr_lr_at_iteration(&s, 0, 5), 0.5, 0, 1e-15, "linear 5/10");
    ZT_NEAR(zlr_lr_at_iteration(&s, 0, 9), 0.9, 0, 1e-15, "linear 9/10");
    ZT_CHECK(zlr_lr_at_iteration(&s, 0, 10) == 1.0, "linear done at 10");
    s.warmup_type = ZWARMUP_LOG;
    ZT_NEAR(zlr_lr_at_iteration(&s, 0, 9), 1.0, 0, 1e-15, "log: ln(10)/ln(10) at it=9");
    ZT_NEAR(zlr_lr_at_iteration(&s, 0, 3), log(4) / log(10), 0, 1e-15, "log: ln(4)/ln(10)");
    /* N = 1 is clamped to 2: log warmup is min at 0 and max from 1; linear is half-way at 1 */
    s.warmup_num_steps = 1;
    ZT_CHECK(zlr_lr_at_iteration(&s, 0, 0) == 0.0, "N=1 log it=0");
    ZT_NEAR(zlr_lr_at_iteration(&s, 0, 1), 1.0, 0, 1e-15, "N=1 log it=1 = ln2/ln2");
    s.warmup_type = ZWARMUP_LINEAR;
    ZT_NEAR(zlr_lr_at_iteration(&s, 0, 1), 0.5, 0, 1e-15, "N=1 clamped to 2: linear it=1 is 1/2, not 1/1");
    ZT_CHECK(zlr_lr_at_iteration(&s, 0, 2) == 1.0, "N=1 linear it=2");
    s.warmup_num_steps = 0;
    ZT_NEAR(zlr_lr_at_iteration(&s, 0, 1), 0.5, 0, 1e-15, "N=0 clamped to 2");
}

static void test_warmup_decay_lr(void) {
    struct {
        int64_t n, t;
    } cases[] = {{100, 1000}, {1, 50}, {10, 11}, {10, 10}, {100, 50}, {1000, 100000}};
    int64_t its[128];
    for (int linear = 0; linear < 2; linear++)
        for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
            zcfg_scheduler s = sched(ZSCHED_WARMUP_DECAY_LR);
            s.warmup_min_lr = 3e-6;
            s.warmup_max_lr = 6e-4;
            s.warmup_num_steps = cases[c].n;
            s.total_num_steps = cases[c].t;
            s.warmup_type = linear ? ZWARMUP_LINEAR : ZWARMUP_LOG;
            int k = iters_for(cases[c].n, cases[c].t, its);
            for (int i = 0; i < k; i++) {
                double want = 3e-6 + (6e-4 - 3e-6) * exp_warmup_gamma(its[i], cases[c].n, linear, true, cases[c].t);
                ZT_NEAR(zlr_lr_at_iteration(&s, 1.0, its[i]), want, 0, RTOL,
                        "WarmupDecayLR %s N=%lld T=%lld it=%lld: %.17g vs %.17g", linear ? "linear" : "log",
                        (long long)cases[c].n, (long long)cases[c].t, (long long)its[i],
                        zlr_lr_at_iteration(&s, 1.0, its[i]), want);
            }
        }
    /* by hand: N=100, T=1000: max at N, half-way at 550, min at T and after */
    zcfg_scheduler s = sched(ZSCHED_WARMUP_DECAY_LR);
    s.warmup_min_lr = 0;
    s.warmup_max_lr = 1.0;
    s.warmup_num_steps = 100;
    s.total_num_steps = 1000;
    ZT_CHECK(zlr_lr_at_iteration(&s, 0, 100) == 1.0, "decay starts at max");
    ZT_NEAR(zlr_lr_at_iteration(&s, 0, 550), 0.5, 0, 1e-15, "decay half-way");
    ZT_NEAR(zlr_lr_at_iteration(&s, 0, 999), 1.0 / 900, 0, 1e-15, "decay one step before T");
    ZT_CHECK(zlr_lr_at_iteration(&s, 0, 1000) == 0.0, "decay reaches min at T");
    ZT_CHECK(zlr_lr_at_iteration(&s, 0, 5000) == 0.0, "decay clamps at min past T");
    /* T < N: after warmup the lr is the minimum at once (max(1, T-N) = 1, T-it < 0) */
    s.total_num_steps = 50;
    ZT_CHECK(zlr_lr_at_iteration(&s, 0, 100) == 0.0, "T < N");
}

static void test_warmup_cosine_lr(void) {
    struct {
        int64_t n, t;
        double wmin, cmin;
    } cases[] = {{100, 1000, 0.0, 1e-4}, {100, 1000, 0.1, 1e-4},    {1, 20, 0.25, 0.0},
                 {10, 11, 0.5, 0.1},     {1000, 100000, 0.0, 0.05}, {2, 3, 0.0, 1e-4}};
    int64_t its[128];
    const double base = 2e-3;
    for (int linear = 0; linear < 2; linear++)
        for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
            zcfg_scheduler s = sched(ZSCHED_WARMUP_COSINE_LR);
            s.warmup_num_steps = cases[c].n;
            s.total_num_steps = cases[c].t;
            s.warmup_min_ratio = cases[c].wmin;
            s.cos_min_ratio = cases[c].cmin;
            s.warmup_type = linear ? ZWARMUP_LINEAR : ZWARMUP_LOG;
            int k = iters_for(cases[c].n, cases[c].t, its);
            for (int i = 0; i < k; i++) {
                double want =
                    base * exp_cosine_ratio(its[i], cases[c].n, cases[c].t, cases[c].wmin, cases[c].cmin, linear);
                ZT_NEAR(zlr_lr_at_iteration(&s, base, its[i]), want, 1e-300, RTOL,
                        "WarmupCosineLR %s N=%lld T=%lld wmin=%g cmin=%g it=%lld: %.17g vs %.17g",
                        linear ? "linear" : "log", (long long)cases[c].n, (long long)cases[c].t, cases[c].wmin,
                        cases[c].cmin, (long long)its[i], zlr_lr_at_iteration(&s, base, its[i]), want);
            }
            /* the first step uses warmup_min_ratio * lr */
            ZT_NEAR(zlr_lr_at_iteration(&s, base, 0), base * cases[c].wmin, 0, 1e-15,
                    "cosine starts at warmup_min_ratio");
        }
    /* by hand: N=100, T=1000, cmin=0 */
    zcfg_scheduler s = sched(ZSCHED_WARMUP_COSINE_LR);
    s.warmup_num_steps = 100;
    s.total_num_steps = 1000;
    s.warmup_min_ratio = 0.2;
    s.cos_min_ratio = 0.0;
    s.warmup_type = ZWARMUP_LINEAR;
    ZT_NEAR(zlr_lr_at_iteration(&s, 1.0, 50), 0.2 + 0.8 * 0.5, 0, 1e-15, "cosine linear warmup midpoint");
    ZT_NEAR(zlr_lr_at_iteration(&s, 1.0, 100), (1 + cos(PI / 900)) / 2, 0, 1e-15,
            "cosine first decay step is 1 step in");
    ZT_NEAR(zlr_lr_at_iteration(&s, 1.0, 549), 0.5, 1e-15, 1e-12, "cosine half-way at it = N - 1 + (T-N)/2");
    ZT_NEAR(zlr_lr_at_iteration(&s, 1.0, 999), 0.0, 1e-15, 0, "cosine floor at it = T - 1");
    ZT_NEAR(zlr_lr_at_iteration(&s, 1.0, 1000), 0.0, 1e-15, 0, "cosine stays at the floor at T");
    ZT_NEAR(zlr_lr_at_iteration(&s, 1.0, 1800), 0.0, 1e-15, 0, "cosine does not climb back past T");
    s.cos_min_ratio = 0.1;
    ZT_NEAR(zlr_lr_at_iteration(&s, 3.0, 999), 0.3, 0, 1e-14, "cosine floor = base * cos_min_ratio");
    ZT_NEAR(zlr_lr_at_iteration(&s, 3.0, 123456), 0.3, 0, 1e-14, "cosine floor past T");
    /* T == N has no decay window: the floor right after warmup, no division by zero */
    s.total_num_steps = 100;
    ZT_NEAR(zlr_lr_at_iteration(&s, 1.0, 100), 0.1, 0, 1e-14, "T == N");
    ZT_CHECK(zlr_beta1_at_iteration(&s, 0.9, 100) == 0.9, "cosine leaves beta1");
}

static void check_one_cycle(const zcfg_scheduler *s, int64_t it, int64_t first, int64_t second, int64_t st1,
                            int64_t st2, int line) {
    int64_t total = first + second;
    double want_lr, want_mom;
    if (it < total) {
        double sf = exp_cycle_scale(it, first, second, st1, st2);
        want_lr = s->cycle_min_lr + (s->cycle_max_lr - s->cycle_min_lr) * sf;
        want_mom = s->cycle_max_mom - (s->cycle_max_mom - s->cycle_min_mom) * sf;
    } else if (s->decay_step_size == 0) {
        want_lr = s->cycle_min_lr;
        want_mom = s->cycle_max_mom;
    } else {
        double interval = (double)(it - total + 1) / (double)s->decay_step_size;
        want_lr = s->cycle_min_lr / (1.0 + s->decay_lr_rate * interval);
        want_mom = s->cycle_max_mom * (1.0 + s->decay_mom_rate * interval);
    }
    double lr = zlr_lr_at_iteration(s, 7.0, it), mom = zlr_beta1_at_iteration(s, 0.95, it);
    if (zt_near(lr, want_lr, 1e-18, RTOL))
        zt_passed++;
    else
        zt_fail_at(__FILE__, line, "OneCycle %lld/%lld stairs %lld/%lld it=%lld: lr %.17g, want %.17g",
                   (long long)first, (long long)second, (long long)st1, (long long)st2, (long long)it, lr, want_lr);
    double want_b1 = s->cycle_momentum ? want_mom : 0.95;
    if (zt_near(mom, want_b1, 1e-15, RTOL))
        zt_passed++;
    else
        zt_fail_at(__FILE__, line, "OneCycle %lld/%lld it=%lld: beta1 %.17g, want %.17g", (long long)first,
                   (long long)second, (long long)it, mom, want_b1);
}

static void test_one_cycle(void) {
    struct {
        int64_t first, second;
    } shapes[] = {{10, -1}, {6, 14}, {3, 7}, {1, 1}, {2000, -1}, {7, 3}};
    struct {
        int64_t step;
        double lr_rate, mom_rate;
    } decays[] = {{0, 0, 0}, {5, 0.5, 0.1}, {5, 0, 0}, {1, 2.0, 0}, {3, 0, 0.05}};
    for (size_t sh = 0; sh < sizeof shapes / sizeof *shapes; sh++)
        for (size_t d = 0; d < sizeof decays / sizeof *decays; d++)
            for (int momentum = 0; momentum < 2; momentum++) {
                zcfg_scheduler s = sched(ZSCHED_ONE_CYCLE);
                s.cycle_min_lr = 1e-4;
                s.cycle_max_lr = 1e-3;
                s.cycle_first_step_size = shapes[sh].first;
                s.cycle_second_step_size = shapes[sh].second;
                s.decay_step_size = decays[d].step;
                s.decay_lr_rate = decays[d].lr_rate;
                s.decay_mom_rate = decays[d].mom_rate;
                s.cycle_momentum = momentum;
                s.cycle_min_mom = 0.85;
                s.cycle_max_mom = 0.95;
                int64_t first = shapes[sh].first, second = shapes[sh].second < 0 ? first : shapes[sh].second;
                int64_t total = first + second;
                for (int64_t it = 0; it < 3 * total + 10; it++) check_one_cycle(&s, it, first, second, 0, 0, __LINE__);
                check_one_cycle(&s, 1000000, first, second, 0, 0, __LINE__);
            }

    /* by hand: 10/10 cycle. Iteration it uses batch it+1: 0.1 of the way up at it = 0, the peak at it = 9,
     * back at the minimum at it = 19 (the last cycle iteration), then the decay phase. */
    zcfg_scheduler s = sched(ZSCHED_ONE_CYCLE);
    s.cycle_min_lr = 0.0;
    s.cycle_max_lr = 1.0;
    s.cycle_first_step_size = 10;
    s.cycle_second_step_size = -1;
    s.cycle_min_mom = 0.8;
    s.cycle_max_mom = 0.9;
    ZT_NEAR(zlr_lr_at_iteration(&s, 0, 0), 0.1, 0, 1e-15, "OneCycle it=0");
    ZT_NEAR(zlr_beta1_at_iteration(&s, 0, 0), 0.89, 0, 1e-15, "OneCycle mom it=0");
    ZT_NEAR(zlr_lr_at_iteration(&s, 0, 9), 1.0, 0, 1e-15, "OneCycle peak at it = first-1");
    ZT_NEAR(zlr_beta1_at_iteration(&s, 0, 9), 0.8, 0, 1e-15, "OneCycle mom trough at the peak");
    ZT_NEAR(zlr_lr_at_iteration(&s, 0, 14), 0.5, 0, 1e-15, "OneCycle second half");
    ZT_NEAR(zlr_beta1_at_iteration(&s, 0, 14), 0.85, 0, 1e-15, "OneCycle mom second half");
    ZT_NEAR(zlr_lr_at_iteration(&s, 0, 18), 0.1, 1e-15, 1e-15, "OneCycle it=18");
    ZT_NEAR(zlr_lr_at_iteration(&s, 0, 19), 0.0, 1e-15, 0, "OneCycle back at min at it = total-1");
    ZT_CHECK(zlr_lr_at_iteration(&s, 0, 20) == 0.0, "OneCycle no decay: min");
    ZT_CHECK(zlr_beta1_at_iteration(&s, 0, 20) == 0.9, "OneCycle no decay: max momentum");
    s.cycle_min_lr = 0.5;
    s.decay_step_size = 4;
    s.decay_lr_rate = 1.0;
    s.decay_mom_rate = 0.1;
    ZT_NEAR(zlr_lr_at_iteration(&s, 0, 20), 0.5 / 1.25, 0, 1e-15, "OneCycle decay it = total: interval 1/4");
    ZT_NEAR(zlr_lr_at_iteration(&s, 0, 23), 0.5 / 2.0, 0, 1e-15, "OneCycle decay interval 1");
    ZT_NEAR(zlr_beta1_at_iteration(&s, 0, 23), 0.9 * 1.1, 0, 1e-15,
            "OneCycle momentum decay multiplies (as DeepSpeed)");
    s.cycle_momentum = false;
    ZT_CHECK(zlr_beta1_at_iteration(&s, 0.93, 5) == 0.93 && zlr_beta1_at_iteration(&s, 0.93, 50) == 0.93,
             "cycle_momentum off");

    /* stair counts: the lr holds flat across each stair */
    struct {
        int64_t first, second, st1, st2, st2_eff;
    } stairs[] = {{10, -1, 5, -1, 5}, {10, -1, 5, 0, 0}, {10, 10, 2, 5, 5},
                  {3, 7, 3, -1, 3},   {6, 14, 4, 7, 7},  {2000, -1, 10, -1, 10}};
    for (size_t i = 0; i < sizeof stairs / sizeof *stairs; i++) {
        zcfg_scheduler t = sched(ZSCHED_ONE_CYCLE);
        t.cycle_min_lr = 1e-4;
        t.cycle_max_lr = 1e-3;
        t.cycle_first_step_size = stairs[i].first;
        t.cycle_second_step_size = stairs[i].second;
        t.cycle_first_stair_count = stairs[i].st1;
        t.cycle_second_stair_count = stairs[i].st2;
        int64_t first = stairs[i].first, second = stairs[i].second < 0 ? first : stairs[i].second;
        for (int64_t it = 0; it < first + second + 5; it++)
            check_one_cycle(&t, it, first, second, stairs[i].st1, stairs[i].st2_eff, __LINE__);
        /* the peak is reached exactly, stairs or not */
        ZT_NEAR(zlr_lr_at_iteration(&t, 0, first - 1), 1e-3, 0, 1e-15, "stairs %zu: peak", i);
    }
    s = sched(ZSCHED_ONE_CYCLE);
    s.cycle_min_lr = 0;
    s.cycle_max_lr = 1;
    s.cycle_first_step_size = 10;
    s.cycle_second_step_size = -1;
    s.cycle_first_stair_count = 5;
    s.cycle_second_stair_count = -1;
    ZT_CHECK(zlr_lr_at_iteration(&s, 0, 0) == 0.0, "stairs: first stair flat at 0");
    ZT_NEAR(zlr_lr_at_iteration(&s, 0, 1), 0.2, 0, 1e-15, "stairs: 2nd batch");
    ZT_NEAR(zlr_lr_at_iteration(&s, 0, 2), 0.2, 0, 1e-15, "stairs: 3rd batch same stair");
    ZT_NEAR(zlr_lr_at_iteration(&s, 0, 10), 0.8, 0, 1e-15, "stairs: second half (20-11)*5/10 = 4.5 -> 0.8");
}

/* ------------------------------------------------------------------ a DeepSpeed 0.19.8 engine's values */
/* optimizer.param_groups[0]["lr"] (and betas[0]) before each of 14 optimizer steps of a real DeepSpeed 0.19.8
 * engine: tests/ds_lr_reference.py, deepspeed.initialize of a 4-8-2 torch MLP on the CPU (DS_ACCELERATOR=cpu,
 * torch 2.15.0, one process, fp32, no skipped step), with the ds_config of tests/test_lr_deepspeed.py's
 * SCHEDULES row of the same name: {"train_batch_size": 2, "optimizer": {"type": "Adam", "params": {"lr":
 * 2e-3}}} plus the scheduler block given with each setup below. Printed with Python's repr (shortest round
 * trip), generated 2026-12-02. test_lr_deepspeed.py reruns DeepSpeed beside zinc train in CI. */
static const double ds_WarmupLR_log[] = {1e-05,
                                         1e-05,
                                         0.0008670463505660522,
                                         0.001368386327027111,
                                         0.0017240927011321044,
                                         0.002,
                                         0.002,
                                         0.002,
                                         0.002,
                                         0.002,
                                         0.002,
                                         0.002,
                                         0.002,
                                         0.002};
static const double ds_WarmupLR_linear_no_max[] = {0.0,   0.0,   0.0005, 0.001, 0.0015, 0.002, 0.002,
                                                   0.002, 0.002, 0.002,  0.002, 0.002,  0.002, 0.002};
static const double ds_WarmupLR_defaults[] = {0.0,
                                              0.0,
                                              0.00020068666377598746,
                                              0.000318080836479775,
                                              0.0004013733275519749,
                                              0.0004659800028906792,
                                              0.0005187675002557624,
                                              0.0005633986933428379,
                                              0.0006020599913279624,
                                              0.00063616167295955,
                                              0.0006666666666666668,
                                              0.0006942617901054834,
                                              0.0007194541640317499,
                                              0.0007426289015378912};
static const double ds_WarmupDecayLR_issue43[] = {0.0,
                                                  0.0,
                                                  0.0008613531161467861,
                                                  0.0013652123889719707,
                                                  0.0017227062322935722,
                                                  0.002,
                                                  0.002,
                                                  0.0019428571428571429,
                                                  0.0018857142857142857,
                                                  0.0018285714285714285,
                                                  0.0017714285714285714,
                                                  0.0017142857142857142,
                                                  0.0016571428571428572,
                                                  0.0016};
static const double ds_WarmupDecayLR_short[] = {0.0001,  0.0001,  0.00039999999999999996,
                                                0.0007,  0.001,   0.0008500000000000001,
                                                0.0007,  0.00055, 0.00039999999999999996,
                                                0.00025, 0.0001,  0.0001,
                                                0.0001,  0.0001};
static const double ds_WarmupCosineLR[] = {0.0,
                                           0.0002,
                                           0.0013356735564286231,
                                           0.002,
                                           0.001905920424507298,
                                           0.0016423153117657969,
                                           0.0012613948872584985,
                                           0.0008386051127415013,
                                           0.00045768468823420317,
                                           0.0001940795754927019,
                                           0.0001,
                                           0.0001,
                                           0.0001,
                                           0.0001};
static const double ds_OneCycle[] = {0.0001,
                                     0.00039999999999999986,
                                     0.0006999999999999998,
                                     0.001,
                                     0.0007750000000000001,
                                     0.0005499999999999998,
                                     0.0003249999999999999,
                                     0.0001,
                                     8e-05,
                                     6.666666666666667e-05,
                                     5.714285714285715e-05,
                                     5e-05,
                                     4.4444444444444447e-05,
                                     4e-05};
static const double ds_OneCycle_beta1[] = {0.85,
                                           0.9166666666666666,
                                           0.8833333333333333,
                                           0.85,
                                           0.875,
                                           0.9,
                                           0.9249999999999999,
                                           0.95,
                                           0.9594999999999999,
                                           0.969,
                                           0.9784999999999999,
                                           0.988,
                                           0.9974999999999999,
                                           1.007};
static const double ds_OneCycle_stairs[] = {0.0001, 0.0001, 0.00055, 0.00055, 0.001,  0.00055, 0.00055,
                                            0.0001, 0.0001, 0.0001,  0.0001,  0.0001, 0.0001,  0.0001};
static const double ds_OneCycle_stairs_beta1[] = {0.8,
                                                  0.9,
                                                  0.8500000000000001,
                                                  0.8500000000000001,
                                                  0.8,
                                                  0.8500000000000001,
                                                  0.8500000000000001,
                                                  0.9,
                                                  0.9,
                                                  0.9,
                                                  0.9,
                                                  0.9,
                                                  0.9,
                                                  0.9};
static const double ds_OneCycle_Adagrad[] = {0.0001,
                                             0.00040000000000000013,
                                             0.0006999999999999999,
                                             0.001,
                                             0.0007000000000000003,
                                             0.0003999999999999997,
                                             0.0001,
                                             0.0001,
                                             0.0001,
                                             0.0001,
                                             0.0001,
                                             0.0001,
                                             0.0001,
                                             0.0001};
static const double ds_LRRangeTest[] = {0.0001,
                                        0.00016666666666666666,
                                        0.0002333333333333333,
                                        0.00030000000000000003,
                                        0.00036666666666666667,
                                        0.0004333333333333334,
                                        0.0005,
                                        0.0005666666666666667,
                                        0.0006333333333333333,
                                        0.0007,
                                        0.0007666666666666667,
                                        0.0008333333333333333,
                                        0.0009000000000000001,
                                        0.0009666666666666667};
static const double ds_LRRangeTest_staircase[] = {0.0001,
                                                  0.0001,
                                                  0.0001,
                                                  0.00030000000000000003,
                                                  0.00030000000000000003,
                                                  0.00030000000000000003,
                                                  0.0005,
                                                  0.0005,
                                                  0.0005,
                                                  0.0007,
                                                  0.0007,
                                                  0.0007,
                                                  0.0009000000000000001,
                                                  0.0009000000000000001};

typedef struct ds_case {
    const char *name;
    zcfg_scheduler s;
    const double *lrs, *beta1; /* beta1: OneCycle's; NULL elsewhere (the base beta1 0.9) */
} ds_case;

static void test_deepspeed_engine_values(void) {
    zcfg_scheduler wlr_log =
        sched(ZSCHED_WARMUP_LR); /* {"warmup_min_lr": 1e-5, "warmup_max_lr": 2e-3, "warmup_num_steps": 5} */
    wlr_log.warmup_min_lr = 1e-5, wlr_log.warmup_max_lr = 2e-3, wlr_log.warmup_num_steps = 5;
    zcfg_scheduler wlr_lin = sched(ZSCHED_WARMUP_LR); /* {"warmup_num_steps": 4, "warmup_type": "linear"} */
    wlr_lin.warmup_max_lr = 2e-3, wlr_lin.warmup_num_steps = 4, wlr_lin.warmup_type = ZWARMUP_LINEAR;
    zcfg_scheduler wlr_def = sched(ZSCHED_WARMUP_LR); /* {}: warmup_max_lr is the optimizer's lr */
    wlr_def.warmup_max_lr = 2e-3;
    zcfg_scheduler wdl = sched(ZSCHED_WARMUP_DECAY_LR); /* {0, 2e-3, 5, total 40}: issue 43's example */
    wdl.warmup_min_lr = 0, wdl.warmup_max_lr = 2e-3, wdl.warmup_num_steps = 5, wdl.total_num_steps = 40;
    zcfg_scheduler wdl_s = sched(ZSCHED_WARMUP_DECAY_LR); /* {1e-4, 1e-3, 3, total 9, linear} */
    wdl_s.warmup_min_lr = 1e-4, wdl_s.warmup_max_lr = 1e-3, wdl_s.warmup_num_steps = 3, wdl_s.total_num_steps = 9;
    wdl_s.warmup_type = ZWARMUP_LINEAR;
    zcfg_scheduler wcl = sched(ZSCHED_WARMUP_COSINE_LR); /* {total 10, warmup 3, min_ratio 0.1, cos_min 0.05} */
    wcl.total_num_steps = 10, wcl.warmup_num_steps = 3, wcl.warmup_min_ratio = 0.1, wcl.cos_min_ratio = 0.05;
    zcfg_scheduler oc = sched(ZSCHED_ONE_CYCLE); /* {1e-4, 1e-3, 3/4, decay every 2 at 0.5, mom 0.85-0.95 +0.02} */
    oc.cycle_min_lr = 1e-4, oc.cycle_max_lr = 1e-3, oc.cycle_first_step_size = 3, oc.cycle_second_step_size = 4;
    oc.decay_step_size = 2, oc.decay_lr_rate = 0.5, oc.cycle_min_mom = 0.85, oc.cycle_max_mom = 0.95;
    oc.decay_mom_rate = 0.02;
    zcfg_scheduler oc_st = sched(ZSCHED_ONE_CYCLE); /* {1e-4, 1e-3, first 4, first_stair_count 2} */
    oc_st.cycle_min_lr = 1e-4, oc_st.cycle_max_lr = 1e-3, oc_st.cycle_first_step_size = 4;
    oc_st.cycle_first_stair_count = oc_st.cycle_second_stair_count = 2;
    zcfg_scheduler oc_ada = sched(ZSCHED_ONE_CYCLE); /* {1e-4, 1e-3, first 3} with Adagrad: no betas to cycle */
    oc_ada.cycle_min_lr = 1e-4, oc_ada.cycle_max_lr = 1e-3, oc_ada.cycle_first_step_size = 3;
    oc_ada.cycle_momentum = false;                    /* what the config loader makes of it (test_config_rules) */
    zcfg_scheduler lrt = sched(ZSCHED_LR_RANGE_TEST); /* {min 1e-4, step_size 3, step_rate 2} */
    lrt.lr_range_test_min_lr = 1e-4, lrt.lr_range_test_step_size = 3, lrt.lr_range_test_step_rate = 2.0;
    zcfg_scheduler lrt_st = lrt; /* the same, staircase */
    lrt_st.lr_range_test_staircase = true;
    const ds_case cases[] = {
        {"WarmupLR-log", wlr_log, ds_WarmupLR_log, NULL},
        {"WarmupLR-linear-no-max", wlr_lin, ds_WarmupLR_linear_no_max, NULL},
        {"WarmupLR-defaults", wlr_def, ds_WarmupLR_defaults, NULL},
        {"WarmupDecayLR-issue43", wdl, ds_WarmupDecayLR_issue43, NULL},
        {"WarmupDecayLR-short", wdl_s, ds_WarmupDecayLR_short, NULL},
        {"WarmupCosineLR", wcl, ds_WarmupCosineLR, NULL},
        {"OneCycle", oc, ds_OneCycle, ds_OneCycle_beta1},
        {"OneCycle-stairs", oc_st, ds_OneCycle_stairs, ds_OneCycle_stairs_beta1},
        {"OneCycle-Adagrad", oc_ada, ds_OneCycle_Adagrad, NULL},
        {"LRRangeTest", lrt, ds_LRRangeTest, NULL},
        {"LRRangeTest-staircase", lrt_st, ds_LRRangeTest_staircase, NULL},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++)
        for (int64_t k = 0; k < 14; k++) { /* step k + 1, after k taken steps */
            const ds_case *d = &cases[c];
            double lr = zlr_at(&d->s, 2e-3, k);
            ZT_CHECK(lr == d->lrs[k], "%s step %lld: lr %.17g, DeepSpeed 0.19.8 %.17g", d->name, (long long)k + 1, lr,
                     d->lrs[k]);
            double b1 = zlr_beta1_at(&d->s, 0.9, k), want_b1 = d->beta1 ? d->beta1[k] : 0.9;
            ZT_CHECK(b1 == want_b1, "%s step %lld: beta1 %.17g, DeepSpeed 0.19.8 %.17g", d->name, (long long)k + 1, b1,
                     want_b1);
            double b2 = zlr_beta2(&d->s, 0.999), want_b2 = d->beta1 ? 0.99 : 0.999; /* OneCycle: (mom, 0.99) */
            ZT_CHECK(b2 == want_b2, "%s: beta2 %.17g, DeepSpeed %.17g", d->name, b2, want_b2);
        }
    /* the iteration of a step, and iteration -1: what each constructor writes */
    ZT_CHECK(zlr_iteration(0) == -1 && zlr_iteration(1) == 0 && zlr_iteration(10) == 9, "zlr_iteration");
    ZT_CHECK(zlr_lr_at_iteration(&wlr_log, 2e-3, -1) == 1e-5, "WarmupLR at -1: warmup_min_lr");
    ZT_CHECK(zlr_lr_at_iteration(&wcl, 2e-3, -1) == 0.0, "WarmupCosineLR at -1: 0");
    ZT_CHECK(zlr_lr_at_iteration(&oc, 2e-3, -1) == 1e-4 && zlr_beta1_at_iteration(&oc, 0.9, -1) == 0.85,
             "OneCycle at -1: cycle_min_lr, cycle_min_mom");
    ZT_CHECK(zlr_lr_at_iteration(&lrt, 2e-3, -1) == 1e-4, "LRRangeTest at -1: its min_lr");
    zcfg_scheduler none = sched(ZSCHED_NONE);
    ZT_CHECK(zlr_at(&none, 2e-3, 0) == 2e-3 && zlr_beta2(&none, 0.999) == 0.999, "no schedule");
    oc.cycle_momentum = false; /* Adagrad's OneCycle: no betas cycled, none forced */
    ZT_CHECK(zlr_beta1_at(&oc, 0.9, 3) == 0.9 && zlr_beta2(&oc, 0.999) == 0.999, "cycle_momentum off");
}

int main(void) {
    zt_name = "lr_schedule";
    test_none();
    test_warmup_lr();
    test_warmup_decay_lr();
    test_warmup_cosine_lr();
    test_one_cycle();
    test_deepspeed_engine_values();
    return zt_finish();
}
