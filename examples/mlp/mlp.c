/* See mlp.h. Layer l computes z = h W^T + b (W is out x in, row-major, as torch.nn.Linear), followed by
 * ReLU except on the last layer; the loss is softmax cross-entropy averaged over the micro-batch. This
 * file holds the task, the parameters, the training loop and the host path of forward and backward;
 * mlp_cuda.c holds the GPU path (cuBLAS), which the loop picks on a cuda engine. */
#include "mlp_internal.h"
#include "../common/example_rng.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

mlp_config mlp_default_config(void) {
    mlp_config c = {32, 128, 2, 8, 42, MLP_COMPUTE_AUTO};
    return c;
}

/* ---------------------------------------------------------------- deterministic random numbers */

/* torch.nn.Linear's default: U(-1/sqrt(in), 1/sqrt(in)) for weights and biases. */
static zinc_status init_param(void *userdata, const zinc_param_info *p, uint64_t seed, float *out) {
    const mlp_model *m = userdata;
    int fan_in = p->ndim == 2 ? (int)p->shape[1] : m->cfg.hidden;
    if (p->ndim == 1) {
        /* a bias: its fan-in is the weight's input width, found from the layer it belongs to */
        for (int l = 0; l < m->nlayers; l++)
            if (m->layers[l].module == p->module) fan_in = m->layers[l].in;
    }
    double bound = 1.0 / sqrt((double)fan_in);
    uint64_t s = seed;
    for (int64_t i = 0; i < p->numel; i++) out[i] = (float)((2.0 * example_uniform(&s) - 1.0) * bound);
    return ZINC_OK;
}

/* ---------------------------------------------------------------- the synthetic task */

static void sample(const mlp_model *m, int64_t index, float *x, int *label) {
    int d = m->cfg.in_dim, hdim = 2 * d, c = m->cfg.classes;
    uint64_t s = example_mix(m->cfg.data_seed ^ example_mix((uint64_t)index));
    for (int i = 0; i < d; i++) x[i] = (float)example_normal(&s);
    float h[1024];
    for (int j = 0; j < hdim; j++) {
        double acc = 0;
        for (int i = 0; i < d; i++) acc += m->teacher_w1[j * d + i] * x[i];
        h[j] = (float)tanh(acc);
    }
    int best = 0;
    double bestv = -1e300;
    for (int k = 0; k < c; k++) {
        double acc = 0;
        for (int j = 0; j < hdim; j++) acc += m->teacher_w2[k * hdim + j] * h[j];
        if (acc > bestv) bestv = acc, best = k;
    }
    *label = best;
}

/* ---------------------------------------------------------------- model */

#define CHECK(expr)                                                                                                    \
    do {                                                                                                               \
        zinc_status st_ = (expr);                                                                                      \
        if (st_ != ZINC_OK) return st_;                                                                                \
    } while (0)

/* ---------------------------------------------------------------- where the model computes */

static int use_gpu_path(const mlp_model *m) {
    switch (m->cfg.compute) {
    case MLP_COMPUTE_HOST: return 0;
    case MLP_COMPUTE_DEVICE: return 1;
    default: return zinc_device(m->e) == ZINC_DEVICE_CUDA && !zinc_device_host_addressable(m->e);
    }
}

static zinc_status gpu_path_create(mlp_model *m) {
#ifdef ZINC_MLP_CUDA
    if (zinc_device(m->e) != ZINC_DEVICE_CUDA) {
        zinc_log(m->e, ZINC_LOG_ERROR,
                 "mlp: compute DEVICE needs an engine on device cuda; this one is on "
                 "the CPU (use MLP_COMPUTE_AUTO or HOST)");
        return ZINC_ERR_INVALID_ARG;
    }
    return mlp_cuda_create(m);
#else
    zinc_log(m->e, ZINC_LOG_ERROR,
             "mlp: compute DEVICE needs zinc built with the CUDA backend (this build has "
             "none; use MLP_COMPUTE_AUTO or HOST)");
    return ZINC_ERR_UNSUPPORTED;
#endif
}

/* ---------------------------------------------------------------- the host path */

/* Elements of the model's host buffers, the one place they are sized: create and the training step
 * allocate with these, and create declares their sum to the engine (zinc_memory_declare). */
static size_t n_inputs(const mlp_model *m) { return (size_t)(m->mb * m->cfg.in_dim); }
static size_t n_grads(const mlp_model *m) { return (size_t)(m->mb * m->widest); } /* dz, dh */
static size_t n_teacher1(const mlp_model *m) { return 2 * (size_t)m->cfg.in_dim * (size_t)m->cfg.in_dim; }
static size_t n_teacher2(const mlp_model *m) { return (size_t)m->cfg.classes * 2 * (size_t)m->cfg.in_dim; }
static size_t n_step_acts(const mlp_model *m) { /* act_a, act_b of a step */
    int C = m->cfg.classes;
    return (size_t)(m->mb * (m->cfg.hidden > C ? m->cfg.hidden : C));
}
static void layer_shape(const mlp_model *m, int l, int *in, int *out) {
    *in = l == 0 ? m->cfg.in_dim : m->cfg.hidden;
    *out = l == m->nlayers - 1 ? m->cfg.classes : m->cfg.hidden;
}

static void memory_sums(const mlp_model *m, int gpu, uint64_t *act, uint64_t *scr) {
    *act = *scr = 0;
    for (int l = 0; l < m->nlayers; l++) {
        int in, out;
        layer_shape(m, l, &in, &out);
        *act += (uint64_t)(m->mb * in + m->mb * out) * sizeof(float); /* h_in, z */
        *scr +=
            ((uint64_t)out * (uint64_t)in + (uint64_t)out) * sizeof(float); /* wf, bf: hidden x classes may pass 2^31 */
    }
    *scr +=
        (n_inputs(m) + 2 * n_grads(m) + n_teacher1(m) + n_teacher2(m)) * sizeof(float) + (size_t)m->mb * sizeof(int);
    if (!gpu) *scr += 2 * n_step_acts(m) * sizeof(float);
}

static zinc_status declare_memory(mlp_model *m) {
    uint64_t act, scr;
    memory_sums(m, use_gpu_path(m), &act, &scr);
    zinc_status st = zinc_memory_declare(m->e, ZINC_MEM_ACTIVATIONS, ZINC_MEMKIND_HOST, act, "mlp activations");
    return st != ZINC_OK ? st : zinc_memory_declare(m->e, ZINC_MEM_SCRATCH, ZINC_MEMKIND_HOST, scr, "mlp scratch");
}

/* The ranges mlp_create accepts, and micro batch x the widest layer within 2^38 floats: every size product
 * below is then far inside size_t and int64_t. */
static zinc_status check_sizes(const mlp_config *c, int64_t mb, int *widest_out) {
    if (c->in_dim < 1 || c->in_dim > 512 || c->hidden < 1 || c->hidden > (1 << 20) || c->depth < 0 || c->depth > 4096 ||
        c->classes < 2 || c->classes > (1 << 20) || c->compute < MLP_COMPUTE_AUTO || c->compute > MLP_COMPUTE_DEVICE)
        return ZINC_ERROR(ZINC_ERR_INVALID_ARG,
                          "mlp: in_dim %d, hidden %d, depth %d, classes %d, compute %d: want in_dim 1..512, "
                          "hidden 1..2^20, depth 0..4096, classes 2..2^20 and an mlp_compute",
                          c->in_dim, c->hidden, c->depth, c->classes, (int)c->compute);
    int widest = c->in_dim > c->classes ? c->in_dim : c->classes;
    if (c->hidden > widest) widest = c->hidden;
    int64_t act;
    if (mb < 1 || __builtin_mul_overflow(mb, (int64_t)widest, &act) || act > ((int64_t)1 << 40) / 4)
        return ZINC_ERROR(ZINC_ERR_INVALID_ARG,
                          "mlp: micro batch %lld x width %d floats per activation buffer is beyond 2^38 "
                          "elements (1 TiB): lower train_micro_batch_size_per_gpu or the width",
                          (long long)mb, widest);
    *widest_out = widest;
    return ZINC_OK;
}

zinc_status mlp_memory(const mlp_config *cfg, int64_t micro_batch, uint64_t *activations, uint64_t *scratch) {
    mlp_model m = {.cfg = cfg ? *cfg : mlp_default_config(), .mb = micro_batch};
    zinc_status st = check_sizes(&m.cfg, micro_batch, &m.widest);
    if (st != ZINC_OK) return st;
    m.nlayers = m.cfg.depth + 1;
    memory_sums(&m, 0, activations, scratch);
    return ZINC_OK;
}

zinc_status mlp_create(zinc_engine *e, const mlp_config *cfg, mlp_model **out) {
    mlp_model *m = calloc(1, sizeof *m);
    if (!m) return ZINC_ERROR(ZINC_ERR_NOMEM, "mlp: out of memory for the model");
    m->e = e;
    m->cfg = cfg ? *cfg : mlp_default_config();
    m->nlayers = m->cfg.depth + 1;
    m->mb = zinc_micro_batch_size(e);
    int widest = 0;
    /* The activations are micro batch x widest floats: checked before any size is computed from them. */
    zinc_status bad = check_sizes(&m->cfg, m->mb, &widest);
    if (bad != ZINC_OK) {
        free(m);
        return bad;
    }
    int d = m->cfg.in_dim;
    m->layers = calloc((size_t)m->nlayers, sizeof *m->layers);
    m->widest = widest;
    m->x = calloc(n_inputs(m), sizeof(float));
    m->dz = calloc(n_grads(m), sizeof(float));
    m->dh = calloc(n_grads(m), sizeof(float));
    m->labels = calloc((size_t)m->mb, sizeof(int));
    m->teacher_w1 = calloc(n_teacher1(m), sizeof(float));
    m->teacher_w2 = calloc(n_teacher2(m), sizeof(float));
    if (!m->layers || !m->x || !m->dz || !m->dh || !m->labels || !m->teacher_w1 || !m->teacher_w2) {
        zinc_status nomem = ZINC_ERROR(ZINC_ERR_NOMEM,
                                       "mlp: no memory for the activations (3 buffers of micro batch %lld x %d floats, "
                                       "%.1f MiB each): lower train_micro_batch_size_per_gpu",
                                       (long long)m->mb, widest, (double)m->mb * widest * 4 / 1048576.0);
        mlp_destroy(m);
        return nomem;
    }
    uint64_t s = example_mix(m->cfg.data_seed);
    for (int i = 0; i < 2 * d * d; i++) m->teacher_w1[i] = (float)(example_normal(&s) * 2.0 / sqrt((double)d));
    for (int i = 0; i < m->cfg.classes * 2 * d; i++) m->teacher_w2[i] = (float)(example_normal(&s) / sqrt(2.0 * d));

    /* Modules and parameters, in forward order. */
    for (int l = 0; l < m->nlayers; l++) {
        mlp_layer *L = &m->layers[l];
        layer_shape(m, l, &L->in, &L->out);
        char name[64];
        snprintf(name, sizeof name, "fc%d", l + 1);
        L->module = zinc_module_add(e, name);
        if (L->module < 0) goto fail;
        /* FLOPs per sample: forward y = W x + b is 2 in out; backward dW (2 in out) and, above the first
         * layer, dx (2 in out). Biases and ReLU are left out, as FLOP counts usually do. */
        double mac2 = 2.0 * L->in * L->out;
        if (zinc_module_flops(e, L->module, mac2, l > 0 ? 2 * mac2 : mac2) != ZINC_OK) goto fail;
        char pname[80];
        snprintf(pname, sizeof pname, "fc%d.weight", l + 1);
        /* Muon (ignored by other optimizers) on the hidden layers' weights, not the head's */
        unsigned wflags = ZINC_PARAM_DECAY | (l + 1 < m->nlayers ? ZINC_PARAM_MUON : 0u);
        L->w = zinc_param_add(e, L->module, pname, 2, (int64_t[]){L->out, L->in}, wflags);
        snprintf(pname, sizeof pname, "fc%d.bias", l + 1);
        L->b = zinc_param_add(e, L->module, pname, 1, (int64_t[]){L->out}, ZINC_PARAM_NO_DECAY);
        if (!L->w || !L->b) goto fail;
        L->wf = calloc((size_t)L->out * (size_t)L->in, sizeof(float));
        L->bf = calloc((size_t)L->out, sizeof(float));
        L->h_in = calloc((size_t)m->mb * (size_t)L->in, sizeof(float));
        L->z = calloc((size_t)m->mb * (size_t)L->out, sizeof(float));
        if (!L->wf || !L->bf || !L->h_in || !L->z) {
            zinc_status nomem =
                ZINC_ERROR(ZINC_ERR_NOMEM,
                           "mlp: no memory for layer fc%d's buffers (%d x %d weights, micro batch %lld): "
                           "lower the width or train_micro_batch_size_per_gpu",
                           l + 1, L->out, L->in, (long long)m->mb);
            mlp_destroy(m);
            return nomem;
        }
    }
    zinc_status st = declare_memory(m);
    if (st == ZINC_OK) st = zinc_build(e, init_param, m);
    if (st == ZINC_OK && use_gpu_path(m)) st = gpu_path_create(m);
    if (st != ZINC_OK) {
        mlp_destroy(m);
        return st;
    }
    *out = m;
    return ZINC_OK;
fail:
    mlp_destroy(m);
    return ZINC_ERR_INVALID_ARG; /* zinc_last_error() holds the engine's message */
}

void mlp_destroy(mlp_model *m) {
    if (!m) return;
#ifdef ZINC_MLP_CUDA
    mlp_cuda_destroy(m);
#endif
    for (int l = 0; m->layers && l < m->nlayers; l++) {
        free(m->layers[l].wf);
        free(m->layers[l].bf);
        free(m->layers[l].h_in);
        free(m->layers[l].z);
    }
    free(m->layers);
    free(m->x);
    free(m->dz);
    free(m->dh);
    free(m->labels);
    free(m->teacher_w1);
    free(m->teacher_w2);
    free(m);
}

void mlp_inject_grad(mlp_model *m, float value) {
    m->inject = value;
    m->has_inject = 1;
}

/* The model computes on the host. Where parameters and gradients are host memory (device cpu) they are
 * used in place; where they are device memory (cuda) parameters are copied to host buffers, gradients to
 * host, added to, and copied back (zinc_copy_to_host / zinc_copy_from_host). */
static int on_host(const mlp_model *m) { return zinc_device_host_addressable(m->e); }

/* A host copy of n elements of dtype t at device pointer p (malloc'd), or NULL. */
static void *host_copy(mlp_model *m, const void *p, zinc_dtype t, size_t n) {
    void *h = malloc(n * zinc_dtype_size(t));
    if (h && zinc_copy_to_host(m->e, h, p, n * zinc_dtype_size(t)) != ZINC_OK) {
        free(h);
        h = NULL;
    }
    return h;
}

/* Reads the layer's parameters (in the compute dtype) into float copies: valid only inside enter/exit
 * in ZeRO stage 3, so it is done at every entry. */
static zinc_status load_params(mlp_model *m, mlp_layer *L) {
    zinc_dtype t = zinc_compute_dtype(m->e);
    const void *w = zinc_param_data(L->w), *b = zinc_param_data(L->b);
    if (!w || !b) return ZINC_ERR_STATE;
    void *hw = NULL, *hb = NULL;
    if (!on_host(m)) {
        hw = host_copy(m, w, t, (size_t)L->out * (size_t)L->in);
        hb = host_copy(m, b, t, (size_t)L->out);
        if (!hw || !hb) {
            free(hw);
            free(hb);
            return ZINC_ERR_DEVICE;
        }
        w = hw;
        b = hb;
    }
    for (size_t i = 0; i < (size_t)L->out * (size_t)L->in; i++) L->wf[i] = zinc_load_f32(w, t, i);
    for (int i = 0; i < L->out; i++) L->bf[i] = zinc_load_f32(b, t, (size_t)i);
    free(hw);
    free(hb);
    return ZINC_OK;
}

static zinc_status forward_layer(mlp_model *m, int l, const float *h, float *out_act) {
    mlp_layer *L = &m->layers[l];
    CHECK(zinc_module_enter(m->e, L->module, ZINC_FORWARD));
    CHECK(load_params(m, L));
    memcpy(L->h_in, h, (size_t)(m->mb * L->in) * sizeof(float));
    int last = l == m->nlayers - 1;
    for (int64_t s = 0; s < m->mb; s++)
        for (int o = 0; o < L->out; o++) {
            const float *wr = L->wf + (size_t)o * (size_t)L->in, *hr = h + s * L->in;
            float acc = L->bf[o];
            for (int i = 0; i < L->in; i++) acc += wr[i] * hr[i];
            L->z[s * L->out + o] = acc;
            out_act[s * L->out + o] = last || acc > 0 ? acc : 0.0f;
        }
    return zinc_module_exit(m->e, L->module, ZINC_FORWARD);
}

/* dz (mb x out) is the gradient at the layer's pre-activation; writes dh (mb x in) for the layer below. */
static zinc_status backward_layer(mlp_model *m, int l, const float *dz, float *dh) {
    mlp_layer *L = &m->layers[l];
    zinc_engine *e = m->e;
    CHECK(zinc_module_enter(e, L->module, ZINC_BACKWARD));
    CHECK(load_params(m, L));
    zinc_dtype gt = zinc_grad_dtype(e);
    void *gw = zinc_param_grad(L->w), *gb = zinc_param_grad(L->b);
    if (!gw || !gb) return ZINC_ERR_STATE;
    void *dgw = gw, *dgb = gb; /* device gradients on a cuda engine, worked on through host copies */
    size_t nw = (size_t)L->out * (size_t)L->in, nb = (size_t)L->out, gs = zinc_dtype_size(gt);
    if (!on_host(m)) {
        gw = host_copy(m, dgw, gt, nw);
        gb = host_copy(m, dgb, gt, nb);
        if (!gw || !gb) {
            free(gw);
            free(gb);
            return ZINC_ERR_DEVICE;
        }
    }
    for (int o = 0; o < L->out; o++) {
        float sb = 0;
        for (int64_t s = 0; s < m->mb; s++) sb += dz[s * L->out + o];
        zinc_add_f32(gb, gt, (size_t)o, sb);
        for (int i = 0; i < L->in; i++) {
            float sw = 0;
            for (int64_t s = 0; s < m->mb; s++) sw += dz[s * L->out + o] * L->h_in[s * L->in + i];
            zinc_add_f32(gw, gt, (size_t)o * (size_t)L->in + (size_t)i, sw);
        }
    }
    if (l == 0 && m->has_inject) {
        zinc_add_f32(gw, gt, 0, m->inject);
        m->has_inject = 0;
    }
    if (!on_host(m)) {
        zinc_status st = zinc_copy_from_host(e, dgw, gw, nw * gs);
        if (st == ZINC_OK) st = zinc_copy_from_host(e, dgb, gb, nb * gs);
        free(gw);
        free(gb);
        if (st != ZINC_OK) return st;
    }
    if (dh) {
        const mlp_layer *below = &m->layers[l - 1];
        for (int64_t s = 0; s < m->mb; s++)
            for (int i = 0; i < L->in; i++) {
                float acc = 0;
                for (int o = 0; o < L->out; o++) acc += dz[s * L->out + o] * L->wf[(size_t)o * (size_t)L->in + i];
                dh[s * L->in + i] = below->z[s * below->out + i] > 0 ? acc : 0.0f; /* ReLU of the layer below */
            }
    }
    return zinc_module_exit(e, L->module, ZINC_BACKWARD);
}

/* Forward, loss and backward of one micro-step on the host, on the inputs in m->x, m->labels; adds the
 * micro-batch's loss and correct count to m->sums. act_a, act_b: mb x max(hidden, classes) scratch. */
static zinc_status host_microstep(mlp_model *m, float *act_a, float *act_b) {
    int C = m->cfg.classes;
    const float *h = m->x;
    float *outs[2] = {act_a, act_b};
    for (int l = 0; l < m->nlayers; l++) {
        float *o = outs[l & 1];
        CHECK(forward_layer(m, l, h, o));
        h = o;
    }
    /* loss: softmax cross-entropy, mean over the micro-batch; its gradient seeded with the loss scale */
    float scale = zinc_loss_scale(m->e);
    for (int64_t s = 0; s < m->mb; s++) {
        const float *z = h + s * C;
        float mx = z[0];
        int arg = 0;
        for (int k = 1; k < C; k++)
            if (z[k] > mx) mx = z[k], arg = k;
        double den = 0;
        for (int k = 0; k < C; k++) den += exp((double)(z[k] - mx));
        m->sums[0] += log(den) - (double)(z[m->labels[s]] - mx);
        m->sums[1] += arg == m->labels[s];
        for (int k = 0; k < C; k++) {
            double p = exp((double)(z[k] - mx)) / den;
            m->dz[s * C + k] = (float)((p - (k == m->labels[s])) / (double)m->mb * scale);
        }
    }
    return mlp_backward_all(m, backward_layer, m->dz, m->dh);
}

zinc_status mlp_backward_all(mlp_model *m, mlp_backward_fn fn, float *dz, float *dh) {
    for (int l = m->nlayers - 1; l >= 0; l--) {
        CHECK(fn(m, l, dz, l > 0 ? dh : NULL));
        float *t = dz;
        dz = dh;
        dh = t;
    }
    return ZINC_OK;
}

/* ---------------------------------------------------------------- the training step */

zinc_status mlp_microstep(mlp_model *m, int64_t step, int64_t j) {
    zinc_engine *e = m->e;
    int64_t B = zinc_train_batch_size(e);
    int W = zinc_world_size(e), r = zinc_rank(e);
    size_t act = n_step_acts(m);
    float *act_a = NULL, *act_b = NULL;
    zinc_status st = ZINC_OK;
    if (j == 0) m->sums[0] = m->sums[1] = 0;
    if (!m->cuda && (!(act_a = malloc(act * sizeof(float))) || !(act_b = malloc(act * sizeof(float))))) {
        st = ZINC_ERR_NOMEM;
        goto done;
    }
    int64_t first = step * B + (j * W + r) * m->mb;
    int64_t t_data = zinc_trace_begin(e);
    for (int64_t s = 0; s < m->mb; s++) sample(m, first + s, m->x + s * m->cfg.in_dim, &m->labels[s]);
    zinc_trace_end(e, t_data, "data", "batch"); /* --trace: the batch's generation */
#ifdef ZINC_MLP_CUDA
    if (m->cuda)
        st = mlp_cuda_microstep(m, j);
    else
#endif
        st = host_microstep(m, act_a, act_b);
done:
    free(act_a);
    free(act_b);
    return st;
}

zinc_status mlp_step_metrics(mlp_model *m, mlp_metrics *metrics) {
    zinc_engine *e = m->e;
    int64_t gas = zinc_grad_accum_steps(e), B = zinc_train_batch_size(e);
    zinc_status st = ZINC_OK;
    (void)gas;
#ifdef ZINC_MLP_CUDA
    if (m->cuda && (st = mlp_cuda_metrics(m, gas, m->sums)) != ZINC_OK) return st;
#endif
    if ((st = zinc_allreduce_sum(e, m->sums, 2)) != ZINC_OK) return st;
    if (metrics) {
        metrics->loss = m->sums[0] / (double)B;
        metrics->accuracy = m->sums[1] / (double)B;
    }
    return ZINC_OK;
}

zinc_status mlp_train_step(mlp_model *m, int64_t step, zinc_step_info *info, mlp_metrics *metrics) {
    zinc_status st = ZINC_OK;
    for (int64_t j = 0; j < zinc_grad_accum_steps(m->e) && st == ZINC_OK; j++) st = mlp_microstep(m, step, j);
    if (st == ZINC_OK) st = zinc_step(m->e, info);
    if (st == ZINC_OK) st = mlp_step_metrics(m, metrics);
    return st;
}
