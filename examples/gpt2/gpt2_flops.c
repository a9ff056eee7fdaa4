/* See gpt2_flops.h. */
#include "gpt2_flops.h"

#include "gpt2_internal.h"

gpt2_flops gpt2_count_flops(const gpt2_shape *s, int T) {
    double t = T, C = s->channels, V = s->vocab, L = s->layers;
    gpt2_flops f = {0};
    f.block_fwd = 24 * t * C * C + 4 * t * t * C;
    f.block_bwd = 2 * f.block_fwd;
    f.embed_fwd = 4 * t * C * V;
    f.embed_bwd = 2 * t * C * V;
    f.total = L * (f.block_fwd + f.block_bwd) + f.embed_fwd + f.embed_bwd + f.lnf_fwd + f.lnf_bwd;
    return f;
}

zinc_status gpt2_declare_flops(gpt2_model *m) {
    gpt2_flops f = gpt2_count_flops(&m->s, m->T);
    zinc_status st = zinc_module_flops(m->e, m->mod_embed, f.embed_fwd, f.embed_bwd);
    for (int l = 0; st == ZINC_OK && l < m->s.layers; l++)
        st = zinc_module_flops(m->e, m->mod_block[l], f.block_fwd, f.block_bwd);
    if (st == ZINC_OK) st = zinc_module_flops(m->e, m->mod_lnf, f.lnf_fwd, f.lnf_bwd);
    return st;
}
