/* A darknet-style convolutional network trained by zinc with SGD + momentum, through the installed header
 * alone (issue 41): conv 3x3 -> maxpool -> conv 3x3 -> maxpool -> fc -> fc -> softmax on generated 12x12
 * images of four classes (a horizontal, vertical, diagonal or anti-diagonal bar in noise). Each layer owns
 * its arrays as darknet's do (weights, biases, and weight_updates / bias_updates holding the NEGATED gradient
 * summed over the batch); the network runs forward and backward in one call, as darknet's does.
 *
 * The zinc glue is the part between the two "zinc glue" markers: one module per layer with weights, its two
 * tensors bound to the layer's own arrays (zinc_param_bind_f32, with the factor -1/batch that turns the
 * negated sums into the batch mean's gradient), a build without an init function whose weights come from the
 * layers (zinc_bound_set_master), and per step one call before the network's forward and backward (the
 * weights into the layers, zinc_bound_to_f32) and one after (the sums to zinc, zinc_bound_grad_add_f32).
 * Without comments and blank lines: 43 lines there and 7 calls in main, 50 in all (issue 41's goal for a
 * darknet wrap): the config and zinc_create 12, the error check 6, the modules, tensors and bindings 18, the
 * step 7. Before the bound calls it was 72 (the per-tensor set, copy and add loops). Counted by
 * scripts/count_glue.sh (the test examples_convnet_glue keeps it at 50 or fewer).
 *
 *   convnet [--stage N] [--steps N] [--min-accuracy A]      (under mpirun for more ranks)
 *
 * Prints the loss every 25 steps and the held-out accuracy at the end; exits 1 when it is below
 * --min-accuracy (the CI tests examples_convnet_* use it). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zinc.h"

enum { IMG = 12, NCLASS = 4, BATCH = 32, NLAYERS = 6, NEVAL = 512 };
enum { CONV, POOL, FC };

typedef struct cnn_layer {
    int type, c, h, w;  /* input channels and size */
    int n, relu;        /* conv: filters (3x3, pad 1); fc: outputs */
    int oc, oh, ow, nw; /* output; weights */
    float *weights, *biases, *weight_updates, *bias_updates;
    float *output, *delta; /* batch x outputs */
    int *index;            /* maxpool: the input element each output came from */
} cnn_layer;

typedef struct cnn_net {
    cnn_layer l[NLAYERS];
    int batch; /* this rank's micro-batch */
    float *input, *truth;
} cnn_net;

static uint64_t cnn_rng(uint64_t *s) { /* splitmix64 */
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static float cnn_uniform(uint64_t *s) { return (float)((double)(cnn_rng(s) >> 11) * 0x1.0p-53); }

static int cnn_outputs(const cnn_layer *l) { return l->oc * l->oh * l->ow; }

static void cnn_add(cnn_net *net, int i, int type, int n, int relu, int batch) {
    cnn_layer *l = &net->l[i], *p = i ? &net->l[i - 1] : NULL;
    l->type = type, l->n = n, l->relu = relu;
    l->c = p ? p->oc : 1, l->h = p ? p->oh : IMG, l->w = p ? p->ow : IMG;
    if (type == FC) { /* flattens its input */
        l->c = l->c * l->h * l->w, l->h = l->w = 1;
        l->oc = n, l->oh = l->ow = 1, l->nw = n * l->c;
    } else if (type == CONV) {
        l->oc = n, l->oh = l->h, l->ow = l->w, l->nw = n * l->c * 9;
    } else {
        l->oc = l->c, l->oh = l->h / 2, l->ow = l->w / 2, l->nw = 0;
    }
    uint64_t seed = 1234 + (uint64_t)i; /* every rank draws the same initial weights */
    float scale = sqrtf(2.0f / (float)(type == FC ? l->c : l->c * 9));
    l->weights = malloc(sizeof(float) * (size_t)(l->nw + 1));
    l->weight_updates = calloc((size_t)l->nw + 1, sizeof(float));
    l->biases = calloc((size_t)l->oc, sizeof(float));
    l->bias_updates = calloc((size_t)l->oc, sizeof(float));
    for (int k = 0; k < l->nw; k++) l->weights[k] = scale * (2 * cnn_uniform(&seed) - 1);
    l->output = calloc((size_t)(batch * cnn_outputs(l)), sizeof(float));
    l->delta = calloc((size_t)(batch * cnn_outputs(l)), sizeof(float));
    l->index = calloc((size_t)(batch * cnn_outputs(l)), sizeof(int));
}

/* Sample s: class s % 4, a bar at a random offset, noise. */
static int cnn_sample(int64_t s, float *img) {
    uint64_t seed = (uint64_t)s * 7919u + 17;
    int cls = (int)(s % NCLASS), off = 2 + (int)(cnn_rng(&seed) % (IMG - 4));
    for (int y = 0; y < IMG; y++)
        for (int x = 0; x < IMG; x++) {
            int on = cls == 0   ? y == off
                     : cls == 1 ? x == off
                     : cls == 2 ? x - y == off - IMG / 2
                                : x + y == off + IMG / 2;
            img[y * IMG + x] = (on ? 1.0f : 0.0f) + 0.3f * (cnn_uniform(&seed) - 0.5f);
        }
    return cls;
}

static void cnn_forward(cnn_net *net, const float *in) {
    for (int i = 0; i < NLAYERS; i++) {
        cnn_layer *l = &net->l[i];
        int ni = l->c * l->h * l->w, no = cnn_outputs(l);
        for (int b = 0; b < net->batch; b++) {
            const float *x = in + (size_t)b * ni;
            float *y = l->output + (size_t)b * no;
            if (l->type == CONV) {
                for (int f = 0; f < l->n; f++)
                    for (int oy = 0; oy < l->oh; oy++)
                        for (int ox = 0; ox < l->ow; ox++) {
                            float s = l->biases[f];
                            for (int c = 0; c < l->c; c++)
                                for (int ky = 0; ky < 3; ky++)
                                    for (int kx = 0; kx < 3; kx++) {
                                        int iy = oy + ky - 1, ix = ox + kx - 1;
                                        if (iy >= 0 && iy < l->h && ix >= 0 && ix < l->w)
                                            s += l->weights[((f * l->c + c) * 3 + ky) * 3 + kx] *
                                                 x[(c * l->h + iy) * l->w + ix];
                                    }
                            y[(f * l->oh + oy) * l->ow + ox] = s;
                        }
            } else if (l->type == FC) {
                for (int o = 0; o < l->n; o++) {
                    float s = l->biases[o];
                    for (int k = 0; k < l->c; k++) s += l->weights[o * l->c + k] * x[k];
                    y[o] = s;
                }
            } else {
                for (int c = 0; c < l->c; c++)
                    for (int oy = 0; oy < l->oh; oy++)
                        for (int ox = 0; ox < l->ow; ox++) {
                            int best = (c * l->h + 2 * oy) * l->w + 2 * ox;
                            for (int k = 1; k < 4; k++) {
                                int j = (c * l->h + 2 * oy + k / 2) * l->w + 2 * ox + k % 2;
                                if (x[j] > x[best]) best = j;
                            }
                            int o = (c * l->oh + oy) * l->ow + ox;
                            y[o] = x[best];
                            l->index[(size_t)b * no + o] = best;
                        }
            }
            if (l->relu)
                for (int o = 0; o < no; o++) y[o] = y[o] > 0 ? y[o] : 0;
        }
        in = l->output;
    }
}

/* Softmax cross-entropy on the last layer; darknet's deltas (the negated gradients), and the updates summed
 * over the batch. Returns the summed loss and counts the correct predictions. */
static double cnn_backward(cnn_net *net, const float *in, const int *labels, int *correct) {
    cnn_layer *last = &net->l[NLAYERS - 1];
    double loss = 0;
    for (int b = 0; b < net->batch; b++) {
        float *z = last->output + b * NCLASS, *d = last->delta + b * NCLASS, mx = z[0], sum = 0;
        int arg = 0;
        for (int k = 1; k < NCLASS; k++)
            if (z[k] > mx) mx = z[k], arg = k;
        for (int k = 0; k < NCLASS; k++) sum += expf(z[k] - mx);
        for (int k = 0; k < NCLASS; k++) d[k] = (k == labels[b]) - expf(z[k] - mx) / sum;
        loss -= log(expf(z[labels[b]] - mx) / sum);
        *correct += arg == labels[b];
    }
    for (int i = NLAYERS - 1; i >= 0; i--) {
        cnn_layer *l = &net->l[i];
        const float *x = i ? net->l[i - 1].output : in;
        float *pd = i ? net->l[i - 1].delta : NULL;
        int ni = l->c * l->h * l->w, no = cnn_outputs(l);
        if (pd) memset(pd, 0, sizeof(float) * (size_t)(net->batch * ni));
        for (int b = 0; b < net->batch; b++) {
            float *d = l->delta + (size_t)b * no, *y = l->output + (size_t)b * no;
            const float *xb = x + (size_t)b * ni;
            float *pdb = pd ? pd + (size_t)b * ni : NULL;
            if (l->relu)
                for (int o = 0; o < no; o++) d[o] = y[o] > 0 ? d[o] : 0;
            if (l->type == POOL) {
                for (int o = 0; o < no; o++) pdb[l->index[(size_t)b * no + o]] += d[o];
            } else if (l->type == FC) {
                for (int o = 0; o < l->n; o++) {
                    l->bias_updates[o] += d[o];
                    for (int k = 0; k < l->c; k++) {
                        l->weight_updates[o * l->c + k] += d[o] * xb[k];
                        if (pdb) pdb[k] += l->weights[o * l->c + k] * d[o];
                    }
                }
            } else {
                for (int f = 0; f < l->n; f++)
                    for (int oy = 0; oy < l->oh; oy++)
                        for (int ox = 0; ox < l->ow; ox++) {
                            float g = d[(f * l->oh + oy) * l->ow + ox];
                            l->bias_updates[f] += g;
                            for (int c = 0; c < l->c; c++)
                                for (int ky = 0; ky < 3; ky++)
                                    for (int kx = 0; kx < 3; kx++) {
                                        int iy = oy + ky - 1, ix = ox + kx - 1, wi = ((f * l->c + c) * 3 + ky) * 3 + kx;
                                        if (iy < 0 || iy >= l->h || ix < 0 || ix >= l->w) continue;
                                        l->weight_updates[wi] += g * xb[(c * l->h + iy) * l->w + ix];
                                        if (pdb) pdb[(c * l->h + iy) * l->w + ix] += l->weights[wi] * g;
                                    }
                        }
            }
        }
    }
    return loss;
}

/* Darknet's train step on this rank's micro-batch, without the update: the updates start from zero. */
static double cnn_train_batch(cnn_net *net, const int *labels, int *correct) {
    for (int i = 0; i < NLAYERS; i++) {
        memset(net->l[i].weight_updates, 0, sizeof(float) * (size_t)net->l[i].nw);
        memset(net->l[i].bias_updates, 0, sizeof(float) * (size_t)net->l[i].oc);
    }
    cnn_forward(net, net->input);
    return cnn_backward(net, net->input, labels, correct);
}

/* ---------------------------------------------------------------- zinc glue */
static void cnn_check(zinc_status st, const char *what) {
    if (st == ZINC_OK) return;
    fprintf(stderr, "convnet: %s: %s\n", what, zinc_last_error());
    exit(1);
}
#define CK(x) cnn_check((x), #x)

static zinc_engine *cnn_zinc_create(int stage) {
    char cfg[512];
    snprintf(cfg, sizeof cfg,
             "{\"train_batch_size\": %d, \"optimizer\": {\"type\": \"SGD\", \"params\": {\"lr\": 0.05, "
             "\"momentum\": 0.9, \"weight_decay\": 0.0005}}, \"zero_optimization\": {\"stage\": %d}}",
             BATCH, stage);
    zinc_options o = zinc_default_options();
    o.config_json = cfg;
    zinc_engine *e = NULL;
    CK(zinc_create(&o, &e));
    return e;
}

/* One module per layer with weights, its two tensors bound to the layer's own arrays: zinc reads the
 * negated batch sums (factor -1/batch) and writes the weights back into the layer, so the build takes no
 * init function (the layers' initial weights are set from their arrays) and a step no per-tensor loop. */
static void cnn_zinc_build(zinc_engine *e, cnn_net *net) {
    char name[32];
    for (int i = 0; i < NLAYERS; i++) {
        cnn_layer *l = &net->l[i];
        if (!l->nw) continue;
        snprintf(name, sizeof name, "layer%d", i);
        int m = zinc_module_add(e, name);
        snprintf(name, sizeof name, "layer%d.weights", i);
        zinc_param *w = zinc_param_add(e, m, name, 1, (int64_t[]){l->nw}, ZINC_PARAM_DECAY);
        snprintf(name, sizeof name, "layer%d.biases", i);
        zinc_param *b = zinc_param_add(e, m, name, 1, (int64_t[]){l->oc}, 0);
        CK(m >= 0 && w && b ? ZINC_OK : ZINC_ERR_INVALID_ARG);
        CK(zinc_param_bind_f32(w, l->weights, l->weight_updates, -1.0f / (float)net->batch));
        CK(zinc_param_bind_f32(b, l->biases, l->bias_updates, -1.0f / (float)net->batch));
    }
    CK(zinc_build(e, NULL, NULL));
    CK(zinc_bound_set_master(e));
}

/* One step: the weights into the layers, the network's own forward and backward (in one call, darknet's
 * way), the layers' gradient sums to zinc, the optimizer step. */
static double cnn_zinc_step(zinc_engine *e, cnn_net *net, const int *labels, int *correct) {
    CK(zinc_bound_to_f32(e));
    double loss = cnn_train_batch(net, labels, correct);
    CK(zinc_bound_grad_add_f32(e));
    CK(zinc_step(e, NULL));
    return loss;
}
/* ---------------------------------------------------------------- end of zinc glue */

int main(int argc, char **argv) {
    int stage = 0, steps = 150;
    double min_acc = 0;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--stage"))
            stage = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--steps"))
            steps = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--min-accuracy"))
            min_acc = atof(argv[i + 1]);
        else {
            fprintf(stderr, "usage: convnet [--stage N] [--steps N] [--min-accuracy A]\n");
            return 2;
        }
    }
    zinc_engine *e = cnn_zinc_create(stage);
    int rank = zinc_rank(e), world = zinc_world_size(e);
    cnn_net net = {.batch = BATCH / world};
    int bmax = net.batch > NEVAL ? net.batch : NEVAL;
    static const int spec[NLAYERS][3] = {{CONV, 4, 1}, {POOL, 0, 0}, {CONV, 8, 1},
                                         {POOL, 0, 0}, {FC, 16, 1},  {FC, NCLASS, 0}};
    for (int i = 0; i < NLAYERS; i++) cnn_add(&net, i, spec[i][0], spec[i][1], spec[i][2], bmax);
    net.input = malloc(sizeof(float) * (size_t)(bmax * IMG * IMG));
    int *labels = malloc(sizeof(int) * (size_t)bmax);
    cnn_zinc_build(e, &net);
    double window[2] = {0, 0};
    for (int t = 0; t < steps; t++) {
        for (int b = 0; b < net.batch; b++)
            labels[b] = cnn_sample((int64_t)t * BATCH + rank * net.batch + b, net.input + b * IMG * IMG);
        int correct = 0;
        window[0] += cnn_zinc_step(e, &net, labels, &correct);
        window[1] += net.batch;
        if ((t + 1) % 25 == 0) {
            CK(zinc_allreduce_sum(e, window, 2));
            if (rank == 0) printf("step %d: loss %.4f\n", t + 1, window[0] / window[1]);
            window[0] = window[1] = 0;
        }
    }
    CK(zinc_bound_to_f32(e)); /* the trained weights back in the layers, on every rank (collective) */
    net.batch = NEVAL;
    for (int b = 0; b < NEVAL; b++) labels[b] = cnn_sample(1000000 + b, net.input + b * IMG * IMG);
    int correct = 0;
    cnn_forward(&net, net.input);
    double loss = cnn_backward(&net, net.input, labels, &correct);
    double acc = (double)correct / NEVAL;
    if (rank == 0) printf("held-out: loss %.4f, accuracy %.3f (%d ranks, stage %d)\n", loss / NEVAL, acc, world, stage);
    zinc_destroy(e);
    for (int i = 0; i < NLAYERS; i++) {
        cnn_layer *l = &net.l[i];
        free(l->weights), free(l->biases), free(l->weight_updates), free(l->bias_updates);
        free(l->output), free(l->delta), free(l->index);
    }
    free(net.input), free(labels);
    if (acc < min_acc) {
        if (rank == 0) fprintf(stderr, "convnet: accuracy %.3f is below --min-accuracy %.3f\n", acc, min_acc);
        return 1;
    }
    return 0;
}
