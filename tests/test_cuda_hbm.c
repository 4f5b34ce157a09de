/* tests/test_cuda_hbm.c — transport/cuda (-DKVCONN_CUDA=ON): the fill
 * kernel writes exactly the bytes kv_fill_block derives from token ids; the
 * event fence and the pinned staging round trip (device -> pinned ->
 * device -> pinned) keep them. Skipped where no GPU is present (CI): the
 * CUDA path must compile everywhere, it runs only on a GPU. */
#include <criterion/criterion.h>
#include <string.h>

#include "core/kv_data.h"
#include "tests/support/test_env.h"

#ifdef KVCONN_HAVE_CUDA
#include "transport/cuda/hbm.h"

#define BB 4096u
#define NB 64u

Test(cuda_hbm, fill_matches_host_and_staging_round_trips) {
    char name[128] = "";
    if (kvt_hbm_probe(name, sizeof name) != KV_OK) cr_skip_test("no CUDA device");
    test_env te;
    test_env_init(&te);
    kvt_hbm *h;
    cr_assert_eq(kvt_hbm_new(&te.env, NB, BB, NB, &h), KV_OK, "device %s", name);
    static kvt_hbm_fill f[NB];
    kv_tokens t = {.token_seed = 0x1234, .prefix_group = 3, .prefix_len = 40};
    for (uint32_t i = 0; i < NB; i++)
        f[i] = (kvt_hbm_fill){.block = (i * 7) % NB, .tokens = t, .pos = i, .block_size = 16, .n_tokens = NB * 16 - 5,
                              .group = i % 3, .head_lo = 0, .head_hi = 4, .head_bytes = BB / 4};
    cr_assert_eq(kvt_hbm_fill_blocks(h, f, NB), KV_OK);
    cr_assert_eq(kvt_hbm_fence(h), KV_OK);
    uint32_t ids[NB];
    for (uint32_t i = 0; i < NB; i++) ids[i] = f[i].block;
    cr_assert_eq(kvt_hbm_stage_out(h, ids, NB), KV_OK);
    static uint8_t want[BB];
    for (uint32_t i = 0; i < NB; i++) {
        kv_fill_block(want, &t, f[i].pos, 16, f[i].n_tokens, f[i].group, 0, 4, BB / 4);
        cr_assert(memcmp(kvt_hbm_staging(h) + (uint64_t)i * BB, want, BB) == 0, "block %u differs from kv_fill_block", i);
    }
    /* D's side: what arrived in pinned memory goes to HBM and back intact */
    for (uint32_t i = 0; i < NB; i++) ids[i] = NB - 1 - i;
    cr_assert_eq(kvt_hbm_stage_in(h, ids, NB), KV_OK);
    uint8_t *copy = malloc((size_t)NB * BB);
    memcpy(copy, kvt_hbm_staging(h), (size_t)NB * BB);
    memset(kvt_hbm_staging(h), 0, (size_t)NB * BB);
    cr_assert_eq(kvt_hbm_stage_out(h, ids, NB), KV_OK);
    cr_assert(memcmp(copy, kvt_hbm_staging(h), (size_t)NB * BB) == 0);
    free(copy);
    cr_assert_eq(kvt_hbm_fill_blocks(h, &(kvt_hbm_fill){.block = NB, .head_hi = 1, .head_bytes = 1}, 1), KV_ERANGE);
    kvt_hbm_free(h);
}
#else
Test(cuda_hbm, not_built) { cr_skip_test("built without -DKVCONN_CUDA=ON"); }
#endif
