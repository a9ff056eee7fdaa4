/* KANN's GRU (attractivechaos/kann, a C library nobody here wrote) trained by zinc through the installed header
 * alone, as a KANN user would wrap it (issue 41: "KANN's in at most 45 lines of glue"). The task is KANN's own
 * rnn-bit example's, written here afresh: add two 20-bit numbers bit by bit, least significant first, one GRU
 * step per bit. KANN keeps every trainable variable in one flat array (kann_t.x) and its gradient in another
 * (kann_t.g, the mean cost's, zeroed by each kann_cost), so the glue binds the two arrays as one zinc tensor:
 * per step zinc_bound_to_f32 before KANN's forward and backward (kann_cost) and zinc_bound_grad_add_f32 after.
 * The glue is what lies between the "zinc glue" markers plus the zinc calls in main (scripts/count_glue.sh).
 * Not built by the project (KANN is not a dependency): bench/peers/kann.sh KANN_DIR builds it beside a KANN
 * checkout and runs it at 1 and 2 ranks.
 *   kann_gru [--stage N] [--steps N]        (under mpirun for more ranks) */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kann.h"
#include "zinc.h"

enum { BITS = 20, ULEN = BITS + 1, BATCH = 64, HIDDEN = 32, NEVAL = 256 };

static uint64_t kg_rng(uint64_t *s) { /* splitmix64 */
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Sample `id` of the task into row b of the unrolled network's inputs and truths. */
static void kg_sample(uint64_t id, int b, float **x, float **y) {
    uint64_t s = id, mask = (1ull << BITS) - 1, u = kg_rng(&s) & mask, v = kg_rng(&s) & mask, sum = u + v;
    for (int k = 0; k < ULEN; k++) {
        x[k][b * 2] = (float)(u >> k & 1), x[k][b * 2 + 1] = (float)(v >> k & 1);
        y[k][b * 2] = y[k][b * 2 + 1] = 0.0f;
        y[k][b * 2 + (sum >> k & 1)] = 1.0f;
    }
}

/* ---------------------------------------------------------------- zinc glue */
static void kg_check(zinc_status st, const char *what) {
    if (st == ZINC_OK) return;
    fprintf(stderr, "kann_gru: %s: %s\n", what, zinc_last_error());
    exit(1);
}
#define CK(x) kg_check((x), #x)

/* The engine, KANN's variables as one tensor bound to its own arrays, and their initial values from KANN. */
static zinc_engine *kg_zinc_create(int stage, kann_t *ua) {
    char cfg[256];
    snprintf(cfg, sizeof cfg,
             "{\"train_batch_size\": %d, \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 0.01, "
             "\"weight_decay\": 0}}, \"zero_optimization\": {\"stage\": %d}}",
             BATCH, stage);
    zinc_options o = zinc_default_options();
    o.config_json = cfg;
    zinc_engine *e = NULL;
    CK(zinc_create(&o, &e));
    int m = zinc_module_add(e, "gru");
    zinc_param *p = zinc_param_add(e, m, "kann.vars", 1, (int64_t[]){kann_size_var(ua)}, 0);
    CK(p ? ZINC_OK : ZINC_ERR_INVALID_ARG);
    CK(zinc_param_bind_f32(p, ua->x, ua->g, 1.0f));
    CK(zinc_build(e, NULL, NULL));
    CK(zinc_bound_set_master(e));
    return e;
}

/* One step: zinc's weights into KANN, KANN's forward and backward, its gradient to zinc, the optimizer. */
static float kg_zinc_step(zinc_engine *e, kann_t *ua) {
    CK(zinc_bound_to_f32(e));
    float cost = kann_cost(ua, 0, 1);
    CK(zinc_bound_grad_add_f32(e));
    CK(zinc_step(e, NULL));
    return cost;
}
/* ---------------------------------------------------------------- end of zinc glue */

int main(int argc, char **argv) {
    int stage = 0, steps = 300;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--stage"))
            stage = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--steps"))
            steps = atoi(argv[i + 1]);
    }
    kann_srand(11);
    kad_node_t *t = kann_layer_input(2);
    t = kann_layer_gru(t, HIDDEN, KANN_RNN_VAR_H0 | KANN_RNN_NORM);
    kann_t *ann = kann_new(kann_layer_cost(t, 2, KANN_C_CEM), 0);
    kann_t *ua = kann_unroll(ann, ULEN); /* shares ann's variable and gradient arrays */
    float *x[ULEN], *y[ULEN];
    for (int k = 0; k < ULEN; k++) x[k] = calloc(NEVAL * 2, sizeof(float)), y[k] = calloc(NEVAL * 2, sizeof(float));
    kann_feed_bind(ua, KANN_F_IN, 0, x);
    kann_feed_bind(ua, KANN_F_TRUTH, 0, y);
    zinc_engine *e = kg_zinc_create(stage, ua);
    int rank = zinc_rank(e), world = zinc_world_size(e), mb = BATCH / world;
    kann_set_batch_size(ua, mb);
    kann_switch(ua, 1);
    double window = 0;
    for (int s = 0; s < steps; s++) {
        for (int b = 0; b < mb; b++) kg_sample((uint64_t)s * BATCH + (uint64_t)(rank * mb + b), b, x, y);
        window += kg_zinc_step(e, ua);
        if ((s + 1) % 50 == 0) {
            if (rank == 0) printf("step %d: cost %.4f (rank 0's micro-batches)\n", s + 1, window / 50);
            window = 0;
        }
    }
    CK(zinc_bound_to_f32(e)); /* the trained weights in KANN's array, on every rank */
    kann_set_batch_size(ua, NEVAL);
    kann_switch(ua, 0);
    for (int b = 0; b < NEVAL; b++) kg_sample(1000000 + (uint64_t)b, b, x, y);
    kann_cost(ua, 0, 0);
    int base = 0, err = kann_class_error(ua, &base);
    if (rank == 0) printf("held-out: bit error %.4f (%d ranks, stage %d)\n", (double)err / base, world, stage);
    zinc_destroy(e);
    kann_delete_unrolled(ua);
    kann_delete(ann);
    for (int k = 0; k < ULEN; k++) free(x[k]), free(y[k]);
    return 0;
}
