/* tests/test_gpt2_kernels_cuda.c's checks at small shapes, for ThreadSanitizer runs on CPU threads (run.sh),
 * where the full set takes too long. */
#define main full_main
#include "test_gpt2_kernels_cuda.c"
#undef main
int main(void) {
    zt_name = "gpt2_kernels_small";
    test_contract();
    rng = zt_seed();
    CU(cudaStreamCreate(&S));
    test_to_f32_grad_add(7);
    test_to_f32_grad_add(300);
    test_gelu(1001);
    test_bias(5, 7);
    test_bias(300, 20);
    test_embed(2, 7, 33, 11, 16);
    test_embed(2, 5, 17, 1, 1);
    test_layernorm(7, 33);
    test_layernorm(130, 40);
    test_attention(1, 1, 8, 2);
    test_attention(2, 5, 12, 3);
    test_attention(1, 33, 64, 1);
    test_attention(1, 70, 96, 3);
    test_attention(1, 40, 400, 2);
    test_crossentropy(3, 7, 0);
    test_crossentropy(5, 257, 1);
    test_crossentropy(3, 1000, 2);
    test_crossentropy_bad_target();
    CU(cudaStreamDestroy(S));
    return zt_finish();
}
