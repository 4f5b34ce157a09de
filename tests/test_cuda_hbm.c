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
#include "transport/cuda/kvmem_hbm.h"

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
    kv_digest_memo dm;
    kv_digest_memo_init(&dm, &t, 16, NB * 16 - 5);
    for (uint32_t i = 0; i < NB; i++) /* head_bytes not a multiple of 8 on odd i: the tail path */
        f[i] = (kvt_hbm_fill){.block = (i * 7) % NB, .group = i % 3, .head_lo = 0, .head_hi = 4,
                              .head_bytes = BB / 4 - (i & 1u) * 3u, .digest = kv_block_digest_m(&dm, i)};
    cr_assert_eq(kvt_hbm_fill_blocks(h, f, NB), KV_OK);
    cr_assert_eq(kvt_hbm_fence(h), KV_OK);
    uint32_t ids[NB];
    for (uint32_t i = 0; i < NB; i++) ids[i] = f[i].block;
    cr_assert_eq(kvt_hbm_stage_out(h, ids, NB), KV_OK);
    static uint8_t want[BB];
    for (uint32_t i = 0; i < NB; i++) {
        kv_fill_block(want, &t, i, 16, NB * 16 - 5, f[i].group, 0, 4, f[i].head_bytes);
        cr_assert(memcmp(kvt_hbm_staging(h) + (uint64_t)i * BB, want, 4 * f[i].head_bytes) == 0,
                  "block %u differs from kv_fill_block", i);
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

/* The provider the core's hook uses (kvmem_hbm.c): fill on the device,
 * expose into the pinned mirror at the block's own slot, absorb back, read
 * for verification; the same bytes as the host provider. */
Test(cuda_hbm, provider_matches_the_host_provider) {
    if (kvt_hbm_probe(NULL, 0) != KV_OK) cr_skip_test("no CUDA device");
    test_env te;
    test_env_init(&te);
    kv_kvmem_group g = {.group = 2, .blocks = 33, .block_bytes = 4 * 1021, .head_lo = 0, .head_hi = 4, .head_bytes = 1021};
    uint8_t *dev_host, *host_host;
    void *dh, *hh;
    cr_assert_eq(kv_kvmem_hbm.open(NULL, &te.env, &g, &dev_host, &dh), KV_OK);
    cr_assert_eq(kv_kvmem_host.open(NULL, &te.env, &g, &host_host, &hh), KV_OK);
    kv_kvmem_fill f[32];
    for (uint32_t i = 0; i < 32; i++) f[i] = (kv_kvmem_fill){.block = 32 - i, .group = 2, .digest = kv_mix64(i)};
    kv_kvmem_hbm.fill(dh, f, 32);
    kv_kvmem_host.fill(hh, f, 32);
    uint32_t ids[32];
    for (uint32_t i = 0; i < 32; i++) ids[i] = f[i].block;
    kv_kvmem_hbm.expose(dh, ids, 32);
    cr_assert(memcmp(dev_host + g.block_bytes, host_host + g.block_bytes, 32u * g.block_bytes) == 0);
    static uint8_t scratch[4 * 1021];
    memset(dev_host + 5u * g.block_bytes, 0x3c, g.block_bytes); /* a WRITE lands in block 5's slot */
    kv_kvmem_hbm.absorb(dh, &(uint32_t){5}, 1);
    const uint8_t *got = kv_kvmem_hbm.read(dh, 5, scratch);
    cr_assert_not_null(got);
    for (uint32_t k = 0; k < g.block_bytes; k++) cr_assert_eq(got[k], 0x3c);
    kv_kvmem_hbm.close(NULL, &te.env, dh);
    kv_kvmem_host.close(NULL, &te.env, hh);
}
#else
Test(cuda_hbm, not_built) { cr_skip_test("built without -DKVCONN_CUDA=ON"); }
#endif
