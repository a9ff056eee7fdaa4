/* The dynamic loss scaler against DeepSpeed's DynamicLossScaler.update_scale (DeepSpeed
 * 0.19, deepspeed/runtime/fp16/loss_scaler.py): scripted overflow sequences checked step by step, then long random sequences compared with a
 * line-by-line transliteration of the Python. */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "amp/loss_scaler.h"
#include "zt.h"

/* ------------------------------------------------------------------ the Python, transliterated
 * class DynamicLossScaler:
 *   def update_scale(self, overflow):
 *     if overflow:
 *       if self.delayed_shift == 1 or self.cur_hysteresis == 1:
 *         if (self.cur_scale == self.min_scale) and self.raise_error_at_min_scale:
 *           raise Exception("Current loss scale already at minimum ...")
 *         else:
 *           next_scale = max(self.cur_scale / self.scale_factor, self.min_scale)
 *           self.cur_scale = next_scale
 *       else:
 *         self.cur_hysteresis -= 1
 *       self.last_overflow_iter = self.cur_iter
 *     else:
 *       if self.consecutive_hysteresis:
 *         self.cur_hysteresis = self.delayed_shift
 *       stable_interval = (self.cur_iter - self.last_overflow_iter) - 1     # DeepSpeed >= 0.17.1
 *       if (stable_interval > 0) and (stable_interval % self.scale_window == 0):
 *         if not self.consecutive_hysteresis:
 *           self.cur_hysteresis = self.delayed_shift
 *         self.cur_scale *= self.scale_factor
 *     self.cur_iter += 1
 */
typedef struct {
    double cur_scale, min_scale, scale_factor;
    int64_t scale_window;
    int delayed_shift, cur_hysteresis;
    bool consecutive_hysteresis;
    int64_t cur_iter, last_overflow_iter;
} py_scaler;

static int64_t py_mod(int64_t a, int64_t b) { /* Python's %, sign of the divisor */
    int64_t r = a % b;
    return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}

static void py_init(py_scaler *p, double init_scale, int64_t window, double min_scale, int delayed_shift,
                    bool consecutive) {
    p->cur_scale = init_scale;
    p->cur_iter = 0;
    p->last_overflow_iter = -1;
    p->scale_factor = 2.0;
    p->scale_window = window;
    p->min_scale = min_scale;
    p->delayed_shift = delayed_shift;
    p->cur_hysteresis = delayed_shift;
    p->consecutive_hysteresis = consecutive;
}

/* Returns the branch the Python took, as a zls_event; ZLS_AT_MINIMUM is the raise (state untouched, as an
 * exception leaves it). */
static zls_event py_update_scale(py_scaler *self, bool overflow) {
    zls_event branch = ZLS_NO_CHANGE;
    if (overflow) {
        if (self->delayed_shift == 1 || self->cur_hysteresis == 1) {
            if (self->cur_scale == self->min_scale) return ZLS_AT_MINIMUM; /* raise */
            double next_scale = fmax(self->cur_scale / self->scale_factor, self->min_scale);
            self->cur_scale = next_scale;
            branch = ZLS_REDUCED;
        } else {
            self->cur_hysteresis -= 1;
            branch = ZLS_HYSTERESIS;
        }
        self->last_overflow_iter = self->cur_iter;
    } else {
        if (self->consecutive_hysteresis) self->cur_hysteresis = self->delayed_shift;
        int64_t stable_interval = (self->cur_iter - self->last_overflow_iter) - 1;
        if (stable_interval > 0 && py_mod(stable_interval, self->scale_window) == 0) {
            if (!self->consecutive_hysteresis) self->cur_hysteresis = self->delayed_shift;
            self->cur_scale *= self->scale_factor;
            branch = ZLS_GREW;
        }
    }
    self->cur_iter += 1;
    return branch;
}

/* ------------------------------------------------------------------ helpers */
static int step(zloss_scaler *s, bool overflow, zls_event want_ev, double want_scale, int want_hyst,
                int64_t want_last, int line) {
    double prev = -1;
    double before = s->cur_scale;
    int64_t iter_before = s->cur_iter;
    zls_event ev = zls_update(s, overflow, &prev);
    int bad = 0;
    if (ev != want_ev) { zt_fail_at(__FILE__, line, "event %d, want %d (iter %lld)", ev, want_ev, (long long)iter_before); bad = 1; }
    else zt_passed++;
    ZT_CHECK(prev == before, "line %d: prev_scale %g, want %g", line, prev, before);
    if (s->cur_scale != want_scale) { zt_fail_at(__FILE__, line, "scale %g, want %g (iter %lld)", s->cur_scale, want_scale, (long long)iter_before); bad = 1; }
    else zt_passed++;
    if (s->cur_hysteresis != want_hyst) { zt_fail_at(__FILE__, line, "hysteresis %d, want %d (iter %lld)", s->cur_hysteresis, want_hyst, (long long)iter_before); bad = 1; }
    else zt_passed++;
    if (s->last_overflow_iter != want_last) { zt_fail_at(__FILE__, line, "last_overflow_iter %lld, want %lld (iter %lld)", (long long)s->last_overflow_iter, (long long)want_last, (long long)iter_before); bad = 1; }
    else zt_passed++;
    ZT_CHECK(s->cur_iter == iter_before + 1, "line %d: cur_iter %lld, want %lld", line, (long long)s->cur_iter,
             (long long)(iter_before + 1));
    return bad;
}
#define STEP(s, ov, ev, scale, hyst, last) step((s), (ov), (ev), (scale), (hyst), (last), __LINE__)

/* ------------------------------------------------------------------ scripted sequences */
static void test_init(void) {
    zloss_scaler s;
    zls_init_dynamic(&s, 16, 1000, 2, false, 1.0);
    ZT_CHECK(s.dynamic, "dynamic");
    ZT_CHECK(s.cur_scale == 65536.0, "init scale %g", s.cur_scale);
    ZT_CHECK(s.scale_factor == 2.0, "factor");
    ZT_CHECK(s.scale_window == 1000, "window");
    ZT_CHECK(s.delayed_shift == 2 && s.cur_hysteresis == 2, "hysteresis");
    ZT_CHECK(!s.consecutive_hysteresis, "consecutive");
    ZT_CHECK(s.min_scale == 1.0, "min");
    ZT_CHECK(s.cur_iter == 0 && s.last_overflow_iter == -1, "iters");
    zls_init_dynamic(&s, 32, 1000, 1, true, 1.0);
    ZT_CHECK(s.cur_scale == 4294967296.0, "2^32");
}

/* Window 4, no hysteresis: doubles once 4 clean calls have passed (DeepSpeed >= 0.17.1: on the 5th clean
 * call, cur_iter 4) and every 4 after. */
static void test_growth_window(void) {
    zloss_scaler s;
    zls_init_dynamic(&s, 4, 4, 1, false, 1.0);
    double sc = 16;
    for (int it = 0; it < 20; it++) {
        bool grow = it > 0 && it % 4 == 0;
        if (grow) sc *= 2;
        STEP(&s, false, grow ? ZLS_GREW : ZLS_NO_CHANGE, sc, 1, -1);
    }
    ZT_CHECK(s.cur_scale == 16.0 * 16, "after 20 clean steps: %g", s.cur_scale);

    /* Window 1 doubles on every clean call after the first. */
    zls_init_dynamic(&s, 0, 1, 1, false, 1.0);
    STEP(&s, false, ZLS_NO_CHANGE, 1, 1, -1);
    for (int it = 1; it < 6; it++) STEP(&s, false, ZLS_GREW, ldexp(1, it), 1, -1);

    /* Default window 1000: first growth at iteration 1000. */
    zls_init_dynamic(&s, 16, 1000, 2, false, 1.0);
    for (int it = 0; it < 1000; it++) {
        zls_event ev = zls_update(&s, false, NULL);
        if (ev != ZLS_NO_CHANGE) {
            ZT_CHECK(0, "grew early at %d", it);
            break;
        }
    }
    ZT_CHECK(s.cur_scale == 65536.0, "no growth before 1000");
    STEP(&s, false, ZLS_GREW, 131072.0, 2, -1);
}

/* After an overflow at iteration k, growth happens once `window` clean calls follow it (k + window + 1). */
static void test_growth_after_overflow(void) {
    zloss_scaler s;
    zls_init_dynamic(&s, 10, 3, 1, false, 1.0);
    STEP(&s, false, ZLS_NO_CHANGE, 1024, 1, -1);  /* it 0 */
    STEP(&s, true, ZLS_REDUCED, 512, 1, 1);       /* it 1 */
    STEP(&s, false, ZLS_NO_CHANGE, 512, 1, 1);    /* it 2: stable 0 */
    STEP(&s, false, ZLS_NO_CHANGE, 512, 1, 1);    /* it 3: 1 */
    STEP(&s, false, ZLS_NO_CHANGE, 512, 1, 1);    /* it 4: 2 (grew here before DeepSpeed 0.17.1) */
    STEP(&s, false, ZLS_GREW, 1024, 1, 1);        /* it 5: 3 */
    STEP(&s, false, ZLS_NO_CHANGE, 1024, 1, 1);   /* it 6 */
    STEP(&s, false, ZLS_NO_CHANGE, 1024, 1, 1);   /* it 7 */
    STEP(&s, false, ZLS_GREW, 2048, 1, 1);        /* it 8: 6 */
    STEP(&s, true, ZLS_REDUCED, 1024, 1, 9);      /* it 9 */
    STEP(&s, true, ZLS_REDUCED, 512, 1, 10);      /* it 10: consecutive overflows halve again */
    STEP(&s, false, ZLS_NO_CHANGE, 512, 1, 10);   /* it 11 */
    STEP(&s, false, ZLS_NO_CHANGE, 512, 1, 10);   /* it 12 */
    STEP(&s, false, ZLS_NO_CHANGE, 512, 1, 10);   /* it 13 */
    STEP(&s, false, ZLS_GREW, 1024, 1, 10);       /* it 14 */
}

/* Hysteresis 2: the first overflow is absorbed, the second halves; refilled only at growth. */
static void test_hysteresis(void) {
    zloss_scaler s;
    zls_init_dynamic(&s, 8, 4, 2, false, 1.0);
    STEP(&s, true, ZLS_HYSTERESIS, 256, 1, 0);    /* it 0: absorbed */
    STEP(&s, true, ZLS_REDUCED, 128, 1, 1);       /* it 1: halved */
    STEP(&s, true, ZLS_REDUCED, 64, 1, 2);        /* it 2: hysteresis stays 1 -> halves again */
    STEP(&s, false, ZLS_NO_CHANGE, 64, 1, 2);     /* it 3: not refilled on a clean step */
    STEP(&s, false, ZLS_NO_CHANGE, 64, 1, 2);     /* it 4 */
    STEP(&s, false, ZLS_NO_CHANGE, 64, 1, 2);     /* it 5 */
    STEP(&s, false, ZLS_NO_CHANGE, 64, 1, 2);     /* it 6 */
    STEP(&s, false, ZLS_GREW, 128, 2, 2);         /* it 7: growth refills */
    STEP(&s, true, ZLS_HYSTERESIS, 128, 1, 8);    /* it 8: absorbed again */
    STEP(&s, false, ZLS_NO_CHANGE, 128, 1, 8);    /* it 9 */
    STEP(&s, true, ZLS_REDUCED, 64, 1, 10);       /* it 10: not consecutive, but hysteresis was not refilled */

    /* Hysteresis 3 */
    zls_init_dynamic(&s, 8, 100, 3, false, 1.0);
    STEP(&s, true, ZLS_HYSTERESIS, 256, 2, 0);
    STEP(&s, true, ZLS_HYSTERESIS, 256, 1, 1);
    STEP(&s, true, ZLS_REDUCED, 128, 1, 2);
}

/* consecutive_hysteresis refills on every clean step; without it only at growth. */
static void test_consecutive_hysteresis(void) {
    zloss_scaler s;
    zls_init_dynamic(&s, 8, 4, 3, true, 1.0);
    STEP(&s, true, ZLS_HYSTERESIS, 256, 2, 0);    /* it 0 */
    STEP(&s, true, ZLS_HYSTERESIS, 256, 1, 1);    /* it 1 */
    STEP(&s, false, ZLS_NO_CHANGE, 256, 3, 1);    /* it 2: refilled */
    STEP(&s, true, ZLS_HYSTERESIS, 256, 2, 3);    /* it 3: absorbed again */
    STEP(&s, false, ZLS_NO_CHANGE, 256, 3, 3);    /* it 4 */
    STEP(&s, true, ZLS_HYSTERESIS, 256, 2, 5);    /* it 5 */
    STEP(&s, true, ZLS_HYSTERESIS, 256, 1, 6);    /* it 6 */
    STEP(&s, true, ZLS_REDUCED, 128, 1, 7);       /* it 7: three in a row */
    STEP(&s, false, ZLS_NO_CHANGE, 128, 3, 7);    /* it 8 */
    STEP(&s, false, ZLS_NO_CHANGE, 128, 3, 7);    /* it 9 */
    STEP(&s, false, ZLS_NO_CHANGE, 128, 3, 7);    /* it 10 */
    STEP(&s, false, ZLS_NO_CHANGE, 128, 3, 7);    /* it 11 */
    STEP(&s, false, ZLS_GREW, 256, 3, 7);         /* it 12 */

    /* The same sequence without consecutive_hysteresis never refills before growth. */
    zls_init_dynamic(&s, 8, 4, 3, false, 1.0);
    STEP(&s, true, ZLS_HYSTERESIS, 256, 2, 0);
    STEP(&s, true, ZLS_HYSTERESIS, 256, 1, 1);
    STEP(&s, false, ZLS_NO_CHANGE, 256, 1, 1);
    STEP(&s, true, ZLS_REDUCED, 128, 1, 3);
    STEP(&s, false, ZLS_NO_CHANGE, 128, 1, 3);
    STEP(&s, true, ZLS_REDUCED, 64, 1, 5);
}

/* An overflow absorbed by hysteresis still restarts the growth window. */
static void test_absorbed_overflow_resets_window(void) {
    zloss_scaler s;
    zls_init_dynamic(&s, 8, 4, 2, false, 1.0);
    STEP(&s, false, ZLS_NO_CHANGE, 256, 2, -1);   /* it 0 */
    STEP(&s, false, ZLS_NO_CHANGE, 256, 2, -1);   /* it 1 */
    STEP(&s, true, ZLS_HYSTERESIS, 256, 1, 2);    /* it 2: absorbed, window restarts */
    STEP(&s, false, ZLS_NO_CHANGE, 256, 1, 2);    /* it 3: would have grown without the overflow */
    STEP(&s, false, ZLS_NO_CHANGE, 256, 1, 2);    /* it 4 */
    STEP(&s, false, ZLS_NO_CHANGE, 256, 1, 2);    /* it 5 */
    STEP(&s, false, ZLS_NO_CHANGE, 256, 1, 2);    /* it 6 */
    STEP(&s, false, ZLS_GREW, 512, 2, 2);         /* it 7 = 2 + 4 + 1 */
}

/* min_scale clamps the halving; an overflow at the minimum (with no hysteresis left) is ZLS_AT_MINIMUM
 * and leaves everything but cur_iter unchanged. */
static void test_min_scale(void) {
    zloss_scaler s;
    zls_init_dynamic(&s, 3, 1000, 1, false, 3.0);
    STEP(&s, true, ZLS_REDUCED, 4, 1, 0);
    STEP(&s, true, ZLS_REDUCED, 3, 1, 1);         /* max(2, 3) */
    STEP(&s, true, ZLS_AT_MINIMUM, 3, 1, 1);      /* last_overflow_iter not updated */
    STEP(&s, true, ZLS_AT_MINIMUM, 3, 1, 1);
    ZT_CHECK(s.cur_iter == 4, "cur_iter counts the failed calls: %lld", (long long)s.cur_iter);
    /* a clean step afterwards: (4 - 1) % 1000 != 0 */
    STEP(&s, false, ZLS_NO_CHANGE, 3, 1, 1);

    /* min 1, scale 2^1: reduced to 1, then at the minimum */
    zls_init_dynamic(&s, 1, 2, 1, false, 1.0);
    STEP(&s, true, ZLS_REDUCED, 1, 1, 0);
    STEP(&s, true, ZLS_AT_MINIMUM, 1, 1, 0);
    STEP(&s, false, ZLS_NO_CHANGE, 1, 1, 0);      /* it 2: stable 1 */
    STEP(&s, false, ZLS_GREW, 2, 1, 0);           /* it 3: stable 2, 2 % 2 == 0 */

    /* Hysteresis still absorbs at the minimum; the error comes only when it would have to halve. */
    zls_init_dynamic(&s, 0, 1000, 2, false, 1.0);
    STEP(&s, true, ZLS_HYSTERESIS, 1, 1, 0);
    STEP(&s, true, ZLS_AT_MINIMUM, 1, 1, 0);

    /* A scale below the minimum (initial_scale_power below log2(min)) is not the minimum: it is "reduced"
     * to the minimum, i.e. raised, exactly as max(cur/2, min) does in DeepSpeed. */
    zls_init_dynamic(&s, 0, 1000, 1, false, 4.0);
    STEP(&s, true, ZLS_REDUCED, 4, 1, 0);
    STEP(&s, true, ZLS_AT_MINIMUM, 4, 1, 0);

    /* fractional minimum */
    zls_init_dynamic(&s, 0, 1000, 1, false, 0.25);
    STEP(&s, true, ZLS_REDUCED, 0.5, 1, 0);
    STEP(&s, true, ZLS_REDUCED, 0.25, 1, 1);
    STEP(&s, true, ZLS_AT_MINIMUM, 0.25, 1, 1);
}

static void test_static(void) {
    zloss_scaler s;
    zls_init_static(&s, 128.0);
    ZT_CHECK(!s.dynamic, "static");
    ZT_CHECK(s.cur_scale == 128.0, "scale");
    zloss_scaler before = s;
    for (int i = 0; i < 50; i++) {
        double prev = 0;
        zls_event ev = zls_update(&s, i % 3 == 0, &prev);
        ZT_CHECK(ev == ZLS_NO_CHANGE, "static update %d -> %d", i, ev);
        ZT_CHECK(prev == 128.0, "prev %g", prev);
        ZT_CHECK(s.cur_scale == 128.0, "static scale changed: %g", s.cur_scale);
    }
    ZT_CHECK(memcmp(&s, &before, sizeof s) == 0, "static update changed the state");
    zls_init_static(&s, 1.0);
    ZT_CHECK(zls_update(&s, true, NULL) == ZLS_NO_CHANGE && s.cur_scale == 1.0, "static 1");
}

static void test_prev_null(void) {
    zloss_scaler s;
    zls_init_dynamic(&s, 2, 1, 1, false, 1.0);
    ZT_CHECK(zls_update(&s, false, NULL) == ZLS_NO_CHANGE, "NULL prev, first clean call");
    ZT_CHECK(zls_update(&s, false, NULL) == ZLS_GREW, "NULL prev grows");
    ZT_CHECK(zls_update(&s, true, NULL) == ZLS_REDUCED, "NULL prev reduces");
    ZT_CHECK(s.cur_scale == 4.0, "scale %g", s.cur_scale);
}

/* ------------------------------------------------------------------ random sequences vs the Python */
static bool same(const zloss_scaler *s, const py_scaler *p) {
    return s->cur_scale == p->cur_scale && s->min_scale == p->min_scale && s->scale_factor == p->scale_factor &&
           s->scale_window == p->scale_window && s->delayed_shift == p->delayed_shift &&
           s->cur_hysteresis == p->cur_hysteresis && s->consecutive_hysteresis == p->consecutive_hysteresis &&
           s->cur_iter == p->cur_iter && s->last_overflow_iter == p->last_overflow_iter;
}

static void test_random_vs_python(void) {
    uint64_t seed = zt_seed();
    uint64_t rng = seed;
    const int64_t windows[] = {1, 2, 3, 4, 7, 16, 100, 1000};
    const int hysts[] = {1, 2, 3, 5};
    const double mins[] = {1.0, 0.25, 1024.0};
    const int powers[] = {0, 4, 16, 32};
    const double probs[] = {0.001, 0.02, 0.1, 0.3, 0.7};
    int configs = 0, mismatched_configs = 0;
    long raised = 0, grew = 0, reduced = 0, absorbed = 0;
    for (size_t wi = 0; wi < sizeof windows / sizeof *windows; wi++)
        for (size_t hi = 0; hi < sizeof hysts / sizeof *hysts; hi++)
            for (int cons = 0; cons < 2; cons++) {
                configs++;
                double min_scale = mins[zt_rand_u64(&rng) % 3];
                int power = powers[zt_rand_u64(&rng) % 4];
                double p_over = probs[zt_rand_u64(&rng) % 5];
                bool bursty = zt_rand_u64(&rng) & 1;
                zloss_scaler s;
                py_scaler p;
                zls_init_dynamic(&s, power, windows[wi], hysts[hi], cons, min_scale);
                py_init(&p, ldexp(1.0, power), windows[wi], min_scale, hysts[hi], cons);
                bool ok = same(&s, &p);
                bool prev_over = false;
                for (int it = 0; it < 10000 && ok; it++) {
                    double pr = p_over;
                    if (bursty) pr = prev_over ? 0.6 : p_over / 4; /* overflows come in runs */
                    bool ov = zt_rand_uniform(&rng) < pr;
                    prev_over = ov;
                    double before = p.cur_scale, prev = -1;
                    zls_event ev = zls_update(&s, ov, &prev);
                    zls_event want = py_update_scale(&p, ov);
                    if (want == ZLS_AT_MINIMUM) p.cur_iter += 1; /* zinc's contract: the failed call counts */
                    raised += want == ZLS_AT_MINIMUM;
                    grew += want == ZLS_GREW;
                    reduced += want == ZLS_REDUCED;
                    absorbed += want == ZLS_HYSTERESIS;
                    if (!same(&s, &p) || ev != want || prev != before) {
                        zt_fail_at(__FILE__, __LINE__,
                                   "seed %llu window %lld hyst %d cons %d min %g power %d p %g: step %d overflow %d: "
                                   "zinc scale %g hyst %d last %lld iter %lld ev %d; python scale %g hyst %d last "
                                   "%lld iter %lld ev %d",
                                   (unsigned long long)seed, (long long)windows[wi], hysts[hi], cons, min_scale, power,
                                   p_over, it, ov, s.cur_scale, s.cur_hysteresis, (long long)s.last_overflow_iter,
                                   (long long)s.cur_iter, ev, p.cur_scale, p.cur_hysteresis,
                                   (long long)p.last_overflow_iter, (long long)p.cur_iter, want);
                        ok = false;
                    }
                }
                if (ok) zt_passed++;
                else mismatched_configs++;
            }
    printf("random: %d configs x 10000 steps, %d mismatched; events: %ld grew, %ld reduced, %ld absorbed, %ld at "
           "minimum\n",
           configs, mismatched_configs, grew, reduced, absorbed, raised);
    ZT_CHECK(grew > 0 && reduced > 0 && absorbed > 0 && raised > 0, "the random sequences exercise every event");
}

int main(void) {
    zt_name = "loss_scaler";
    test_init();
    test_growth_window();
    test_growth_after_overflow();
    test_hysteresis();
    test_consecutive_hysteresis();
    test_absorbed_overflow_resets_window();
    test_min_scale();
    test_static();
    test_prev_null();
    test_random_vs_python();
    return zt_finish();
}
