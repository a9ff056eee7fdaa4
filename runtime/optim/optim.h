/* An optimizer is one descriptor (zopt_desc, in runtime/optim/optim_<name>.c): what its state is, what it
 * computes from the config at each step, whether it needs per-tensor norms, and its chunk kernels. The
 * engine runs every optimizer through one shared pass over the optimizer-state store
 * (runtime/engine/engine_step_pass.c: memory or NVMe, pinned staging, overlap); the sizing plan, the state
 * store and the checkpoints read the descriptor instead of naming optimizers. Which config keys each
 * optimizer takes, and its defaults, are stated in the schema (base/config/config_schema.c: a key's
 * `optimizers` mask, zkey_optimizer_defaults). HACKING.md ("An optimizer") is the recipe. */
#ifndef ZINC_RUNTIME_OPTIM_OPTIM_H
#define ZINC_RUNTIME_OPTIM_OPTIM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "zinc.h"
#include "base/config/config.h"
#include "base/device/device.h"

/* What the engine knows at one step, for the descriptor's hparams. */
typedef struct zopt_step {
    double lr;          /* this step's learning rate (the schedule applied) */
    double beta1;       /* this step's beta1 (OneCycle cycles it; else optimizer.params.betas[0]) */
    double beta2;       /* this step's beta2 (0.99 while OneCycle cycles momentum; else betas[1]) */
    double grad_factor; /* the combined unscale-and-clip factor for every gradient element */
    int64_t t;          /* the step being taken, from 1 (bias correction) */
    double adam_lr;     /* Muon: its AdamW half's lr after the schedule (lr is the Muon half's) */
} zopt_step;

/* The per-step scalars, in the descriptor's own type (zadam_hparams, zlamb_hparams, ...) inside. */
#define ZOPT_HP_BYTES 192
typedef struct zopt_hp {
    _Alignas(double) unsigned char bytes[ZOPT_HP_BYTES];
} zopt_hp;

/* One piece of the own range the pass hands a kernel: n elements of the state and of the gradient and
 * parameter output, all of the same flat range. Elementwise optimizers get whole chunks (decay_mask); the
 * per-tensor ones get the part of one tensor inside a chunk (tensor, decayed). */
typedef struct zopt_piece {
    size_t n;
    float *master, *m, *v; /* the state (v NULL where the optimizer keeps two tensors; a whole-matrix
                              optimizer's v holds only the elements outside its matrices, compacted) */
    const void *grad;
    zinc_dtype gdt;
    void *out; /* the updated master in pdt (may be NULL) */
    zinc_dtype pdt;
    const uint8_t *decay_mask; /* one byte per ZADAM_MASK_GROUP elements from master; NULL: all decayed */
    int tensor;                /* per-tensor optimizers: the parameter's index */
    bool decayed;              /* per-tensor optimizers: the tensor takes weight decay */
    float coeff;               /* per-tensor, apply pass: the tensor's coefficient */
    double *sums;              /* per-tensor, sums pass: (||p||^2, ||u||^2) of the tensor, accumulated */
    void *workspace;           /* per-tensor, sums pass on a discrete device: the kernel's workspace */
    /* Whole-matrix optimizers (Muon): the update the engine assembled for these n elements (the engine's
     * muon_upd, runtime/engine/engine_muon.c), and the decay mask's bit ZOPT_MASK_MATRIX marks its elements;
     * NULL for the others. */
    const float *upd;
} zopt_piece;

/* The decay mask's bit for an element of a whole-matrix optimizer's matrix (bit 0 is weight decay). */
#define ZOPT_MASK_MATRIX 2u

typedef enum { ZOPT_APPLY = 0, ZOPT_SUMS = 1 } zopt_pass;

typedef struct zopt_desc {
    const char *name; /* as DeepSpeed's optimizer.type (also zkey_optimizer_names) */
    /* Checkpoints: optimizers of one family (named by this string, which the load error shows) read each
     * other's state (Adam's moments are LAMB's); another family's is refused at load. */
    const char *family;
    int state_tensors;           /* fp32 arrays per element: the master and 1 or 2 moments */
    const char *moment_names[2]; /* what the plan and the memory report call them (ZPLAN_EXP_AVG, _SQ) */
    /* Per-tensor trust ratio (LAMB): a sums pass (state only read), the sums over each tensor summed over
     * the ranks, coeff() per tensor, then the apply pass. false: one apply pass. */
    bool tensor_norms;
    /* The sums pass on a device the host cannot address sums into device memory (the plan's
     * ZPLAN_TENSOR_SUMS, laid out by zopt_tensor_sums_bytes): the sums kernel's workspace of these bytes,
     * then 2 doubles per tensor; NULL: the optimizer needs none. sums_name: what the plan and the memory
     * report call that buffer. */
    uint64_t (*device_sums_workspace)(void);
    const char *sums_name;
    /* Fills *hp (its own hparams type) from the config and the step. */
    void (*hparams)(const zcfg_optimizer *o, const zopt_step *s, zopt_hp *hp);
    /* The kernel on the compute device, with the state where the device operations reach it. NULL: the
     * optimizer has only CPU kernels; then a device the host can address runs cpu() on its pool, and
     * any other needs the state offloaded (zopt_check_placement). */
    zinc_status (*device)(zdevice *d, const zopt_hp *hp, zopt_pass pass, const zopt_piece *p);
    /* The CPU kernel on host memory (the calling thread's pool: ZDEV_ON_POOL): the update, or the sums
     * pass's two sums added into p->sums. */
    void (*cpu)(const zopt_hp *hp, zopt_pass pass, const zopt_piece *p);
    /* tensor_norms: the coefficient of one tensor from its summed squared norms. */
    float (*coeff)(const zopt_hp *hp, double wsq, double usq);
    /* Whole-matrix optimizers (Muon): the parameters marked ZINC_PARAM_MUON are stepped as matrices, each
     * assembled on one rank before the pass (runtime/engine/engine_muon.c); false: elementwise only. */
    bool whole_matrix;
} zopt_desc;

/* Adam's hparams (zadam_hparams), which Lion's extend. */
void zopt_adam_hparams(const zcfg_optimizer *o, const zopt_step *s, zopt_hp *hp);

/* Bytes of the device sums buffer of a per-tensor optimizer over nparams tensors (its workspace, then 2
 * doubles per tensor, from zopt_tensor_sums_at); 0 when its descriptor has no device_sums_workspace. */
uint64_t zopt_tensor_sums_bytes(const zopt_desc *o, int64_t nparams);
/* Where the 2 doubles per tensor begin in that buffer. */
double *zopt_tensor_sums_at(const zopt_desc *o, void *buffer);

/* The descriptor of an optimizer type (NULL only for a value the config loader never produces). */
const zopt_desc *zopt_get(zcfg_optimizer_type type);

/* ZINC_ERR_CONFIG when the optimizer cannot run where the state is: no kernel for a device the host
 * cannot address, with the state not offloaded. */
zinc_status zopt_check_placement(const zopt_desc *o, const zdevice *d, bool state_offloaded);

#endif
