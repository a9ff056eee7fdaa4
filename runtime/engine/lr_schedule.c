/* DeepSpeed's learning-rate schedules (deepspeed/runtime/lr_schedules.py, DeepSpeed 0.19.8), as pure
 * functions of the iteration. `it` below is DeepSpeed's last_batch_iteration; the step that follows
 * steps_taken taken steps runs at it = steps_taken - 1 (lr_schedule.h), and it = -1 is the value each
 * constructor writes into the optimizer: warmup_min_lr (WarmupLR, WarmupDecayLR), 0 (WarmupCosineLR),
 * cycle_min_lr and cycle_min_mom (OneCycle), lr_range_test_min_lr (LRRangeTest).
 *
 * Every expression keeps Python's operand order so the doubles come out bit-identical to DeepSpeed's
 * (e.g. inverse_log_warm_up * log(it + 1), min + delta * gamma, math.pi * cosine_progress).
 *
 * Notes on DeepSpeed 0.19.8's code, which zinc follows:
 * - WarmupCosineLR after warmup: the cosine progress (it - N + 1) / max(1, T - N) is clamped to 1.
 * - OneCycle stair counts: quantised from the integer offset within the cycle, floor(position * stairs /
 *   half) / stairs. cycle_second_stair_count < 0 means "same as the first" (DeepSpeed's None, the key left
 *   out); the loader turns a -1 written in the file into 0 (no stairs).
 * - OneCycle with cycle_momentum: betas = (mom, 0.99), so beta2 is 0.99 whatever the optimizer's
 *   (zlr_beta2); the config loader turns cycle_momentum off for Adagrad, which has no betas.
 * - OneCycle with decay_step_size == 0 or a zero decay rate: no decay (lr stays cycle_min_lr, momentum
 *   cycle_max_mom), which is DeepSpeed's skip_lr_decay / skip_mom_decay. The momentum decay multiplies
 *   (max_mom * (1 + rate * interval)), exactly as DeepSpeed does, even though that makes it grow. */
#include "runtime/engine/lr_schedule.h"

#include <math.h>

static const double zlr_pi = 3.14159265358979323846; /* Python's math.pi */

static int64_t warmup_steps(const zcfg_scheduler *s) {
    return s->warmup_num_steps < 2 ? 2 : s->warmup_num_steps; /* max(2, warmup_num_steps) */
}

/* The warmup fraction in [0, 1) for it < N (WarmupLR._get_gamma's first branch; the raw ratio of
 * WarmupCosineLR.get_lr_ratio). */
static double warmup_fraction(const zcfg_scheduler *s, int64_t it, int64_t n) {
    if (s->warmup_type == ZWARMUP_LINEAR) return (double)it / (double)n;
    double inverse_log_warm_up = 1.0 / log((double)n);
    return inverse_log_warm_up * log((double)(it + 1));
}

static double warmup_lr(const zcfg_scheduler *s, int64_t it, bool decay) {
    int64_t n = warmup_steps(s);
    double gamma;
    if (it < n) {
        gamma = warmup_fraction(s, it, n);
    } else if (!decay) {
        gamma = 1.0;
    } else {
        double den = (double)(s->total_num_steps - n);
        if (den < 1.0) den = 1.0;
        gamma = (double)(s->total_num_steps - it) / den;
        if (gamma < 0.0) gamma = 0.0;
    }
    double delta = s->warmup_max_lr - s->warmup_min_lr;
    return s->warmup_min_lr + delta * gamma;
}

static double cosine_ratio(const zcfg_scheduler *s, int64_t it) {
    int64_t n = warmup_steps(s);
    if (it < n) {
        double ratio = warmup_fraction(s, it, n);
        double ratio_delta = 1. - s->warmup_min_ratio;
        return s->warmup_min_ratio + ratio * ratio_delta;
    }
    int64_t real_last_step = it - n + 1;
    int64_t real_total_steps = s->total_num_steps - n < 1 ? 1 : s->total_num_steps - n; /* max(1, T - N) */
    double cosine_progress = (double)real_last_step / (double)real_total_steps;
    if (cosine_progress > 1.0) cosine_progress = 1.0; /* min(1.0, ...) */
    double ratio_delta = 1. - s->cos_min_ratio;
    double ratio = (1 + cos(zlr_pi * cosine_progress)) / 2;
    ratio = s->cos_min_ratio + ratio_delta * ratio;
    return ratio > 0.0 ? ratio : 0.0;
}

typedef struct {
    double first, second, total, step_ratio;
} one_cycle_shape;

static one_cycle_shape cycle_shape(const zcfg_scheduler *s) {
    one_cycle_shape c;
    c.first = (double)s->cycle_first_step_size;
    c.second = s->cycle_second_step_size < 0 ? c.first : (double)s->cycle_second_step_size;
    c.total = c.first + c.second;
    c.step_ratio = c.total > 0 ? c.first / c.total : 0.0;
    return c;
}

/* OneCycle._get_scale_factor: evaluated at batch_iteration = it + 1. */
static double cycle_scale_factor(const zcfg_scheduler *s, const one_cycle_shape *c, int64_t it) {
    double batch_iteration = (double)(it + 1);
    double cycle = floor(1 + batch_iteration / c->total);
    double x = 1. + batch_iteration / c->total - cycle;
    double scale_factor;
    int64_t stair_count;
    if (x <= c->step_ratio) {
        scale_factor = x / c->step_ratio;
        stair_count = s->cycle_first_stair_count;
    } else {
        scale_factor = (x - 1) / (c->step_ratio - 1);
        stair_count = s->cycle_second_stair_count < 0 ? s->cycle_first_stair_count : s->cycle_second_stair_count;
    }
    if (stair_count > 0) {
        double stairs = (double)stair_count;
        double cycle_iteration = fmod(batch_iteration, c->total);
        double stair_position = cycle_iteration <= c->first ? cycle_iteration * stairs / c->first
                                                            : (c->total - cycle_iteration) * stairs / c->second;
        scale_factor = floor(stair_position) / stairs;
    }
    return scale_factor;
}

/* In the cycle: sets *scale_factor and returns true. After it: sets *decay_interval (NAN when decay is
 * skipped for lack of a decay_step_size) and returns false. */
static bool one_cycle_phase(const zcfg_scheduler *s, int64_t it, double *scale_factor, double *decay_interval) {
    one_cycle_shape c = cycle_shape(s);
    if (c.total > 0 && (double)it < c.total) {
        *scale_factor = cycle_scale_factor(s, &c, it);
        return true;
    }
    double decay_batch_iteration = (double)it - c.total + 1;
    *decay_interval = s->decay_step_size == 0 ? (double)NAN : decay_batch_iteration / (double)s->decay_step_size;
    return false;
}

static double one_cycle_lr(const zcfg_scheduler *s, int64_t it) {
    double sf = 0, interval = 0;
    if (one_cycle_phase(s, it, &sf, &interval)) {
        double base_height = (s->cycle_max_lr - s->cycle_min_lr) * sf;
        return s->cycle_min_lr + base_height;
    }
    if (isnan(interval) || s->decay_lr_rate == 0.0) return s->cycle_min_lr; /* skip_lr_decay */
    double lr_decay_factor = (1 + s->decay_lr_rate * interval);
    return s->cycle_min_lr / lr_decay_factor;
}

static double one_cycle_mom(const zcfg_scheduler *s, int64_t it) {
    double sf = 0, interval = 0;
    if (one_cycle_phase(s, it, &sf, &interval)) {
        double base_height = (s->cycle_max_mom - s->cycle_min_mom) * sf;
        return s->cycle_max_mom - base_height;
    }
    if (isnan(interval) || s->decay_mom_rate == 0.0) return s->cycle_max_mom; /* skip_mom_decay */
    double mom_decay_factor = (1 + s->decay_mom_rate * interval);
    return s->cycle_max_mom * mom_decay_factor;
}

/* LRRangeTest._get_increase: 1 + step_rate * interval, interval = (it + 1) / step_size, floored with
 * staircase (math.floor(float(it + 1) / step_size)). */
static double range_test_lr(const zcfg_scheduler *s, int64_t it) {
    double interval = (double)(it + 1) / (double)s->lr_range_test_step_size;
    if (s->lr_range_test_staircase) interval = floor(interval);
    double lr_increase = (1 + s->lr_range_test_step_rate * interval);
    return s->lr_range_test_min_lr * lr_increase;
}

int64_t zlr_iteration(int64_t steps_taken) { return steps_taken < 0 ? -1 : steps_taken - 1; }

double zlr_lr_at_iteration(const zcfg_scheduler *s, double base_lr, int64_t it) {
    if (it < 0) { /* what the constructor writes (last_batch_iteration == -1) */
        switch (s->type) {
        case ZSCHED_WARMUP_LR:
        case ZSCHED_WARMUP_DECAY_LR: return s->warmup_min_lr; /* get_lr: min_lrs before it has started */
        case ZSCHED_WARMUP_COSINE_LR: return 0.0;             /* get_lr: 0.0 before it has started */
        case ZSCHED_ONE_CYCLE: return s->cycle_min_lr;        /* _initialize_lr */
        case ZSCHED_LR_RANGE_TEST: return s->lr_range_test_min_lr;
        case ZSCHED_NONE:
        default: return base_lr;
        }
    }
    switch (s->type) {
    case ZSCHED_WARMUP_LR: return warmup_lr(s, it, false);
    case ZSCHED_WARMUP_DECAY_LR: return warmup_lr(s, it, true);
    case ZSCHED_WARMUP_COSINE_LR: return base_lr * cosine_ratio(s, it);
    case ZSCHED_ONE_CYCLE: return one_cycle_lr(s, it);
    case ZSCHED_LR_RANGE_TEST: return range_test_lr(s, it);
    case ZSCHED_NONE:
    default: return base_lr;
    }
}

double zlr_beta1_at_iteration(const zcfg_scheduler *s, double base_beta1, int64_t it) {
    if (s->type != ZSCHED_ONE_CYCLE || !s->cycle_momentum) return base_beta1;
    if (it < 0) return s->cycle_min_mom; /* _initialize_momentum writes min_moms */
    return one_cycle_mom(s, it);
}

double zlr_beta2(const zcfg_scheduler *s, double base_beta2) {
    return s->type == ZSCHED_ONE_CYCLE && s->cycle_momentum ? 0.99 : base_beta2;
}

double zlr_at(const zcfg_scheduler *s, double base_lr, int64_t steps_taken) {
    return zlr_lr_at_iteration(s, base_lr, zlr_iteration(steps_taken));
}

double zlr_beta1_at(const zcfg_scheduler *s, double base_beta1, int64_t steps_taken) {
    return zlr_beta1_at_iteration(s, base_beta1, zlr_iteration(steps_taken));
}
