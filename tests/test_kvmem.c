/* tests/test_kvmem.c — the block-memory hook (core/kvmem.h). The staged
 * provider keeps KV apart from the host memory the transport uses, as a
 * GPU's HBM with pinned staging would. Proves: the providers' semantics on
 * their own; a world whose workers use the staged provider runs every
 * generated scenario exactly as the host one (same trace hashes, no
 * violation), so the core calls fill, expose and absorb wherever KV moves;
 * and a provider that skips expose, or absorb, is caught by the checker
 * (INV-DATA), so the sweeps above would notice a missing call. */
#include <criterion/criterion.h>
#include <string.h>

#include "core/kv_data.h"
#include "core/kvmem.h"
#include "core/msgs.h"
#include "core/store.h"
#include "core/worker.h"
#include "sim/gen.h"
#include "sim/world.h"
#include "tests/support/rig.h"
#include "tests/support/test_env.h"
#include "transport/cuda/fill_formula.h"

static const kv_kvmem_group G = {.group = 1, .blocks = 8, .block_bytes = 32, .head_lo = 0, .head_hi = 4,
                                 .head_bytes = 8};

Test(kvmem, host_fill_is_the_host_memory) {
    test_env te;
    test_env_init(&te);
    uint8_t *host;
    void *h;
    cr_assert_eq(kv_kvmem_host.open(NULL, &te.env, &G, &host, &h), KV_OK);
    kv_kvmem_fill f = {.block = 3, .group = 1, .digest = 0x1234};
    kv_kvmem_host.fill(h, &f, 1);
    uint8_t want[32];
    kv_fill_block_digest(want, 0x1234, 1, 0, 4, 8);
    cr_assert(memcmp(host + 3 * 32, want, 32) == 0);
    cr_assert_eq(kv_kvmem_host.read(h, 3, NULL), host + 3 * 32);
    cr_assert_null(kv_kvmem_host.read(h, 8, NULL), "out of range");
    kv_kvmem_host.close(NULL, &te.env, h);
}

Test(kvmem, staged_moves_only_on_expose_and_absorb) {
    test_env te;
    test_env_init(&te);
    uint8_t *host;
    void *h;
    cr_assert_eq(kv_kvmem_staged.open(NULL, &te.env, &G, &host, &h), KV_OK);
    kv_kvmem_fill f[2] = {{.block = 2, .group = 1, .digest = 7}, {.block = 5, .group = 1, .digest = 9}};
    kv_kvmem_staged.fill(h, f, 2);
    uint8_t want[32], zero[32] = {0};
    kv_fill_block_digest(want, 7, 1, 0, 4, 8);
    cr_assert(memcmp(kv_kvmem_staged.read(h, 2, NULL), want, 32) == 0, "the KV is filled");
    cr_assert(memcmp(host + 2 * 32, zero, 32) == 0, "the host mirror is not, until exposed");
    uint32_t b = 2;
    kv_kvmem_staged.expose(h, &b, 1);
    cr_assert(memcmp(host + 2 * 32, want, 32) == 0);
    cr_assert(memcmp(host + 5 * 32, zero, 32) == 0, "only the exposed block moved");
    /* a WRITE lands in the host mirror of block 6: the KV changes on absorb */
    memcpy(host + 6 * 32, want, 32);
    cr_assert(memcmp(kv_kvmem_staged.read(h, 6, NULL), zero, 32) == 0);
    b = 6;
    kv_kvmem_staged.absorb(h, &b, 1);
    cr_assert(memcmp(kv_kvmem_staged.read(h, 6, NULL), want, 32) == 0);
    kv_kvmem_staged.close(NULL, &te.env, h);
}

/* Generated scenarios (both workloads) with the worlds' providers as given:
 * returns the number of runs that violated and checks each run's trace hash
 * against the host world's when `same` is set. */
static uint32_t sweep(kv_kvmem mem, bool same, kv_inv *first_inv) {
    sim_world *H, *S;
    cr_assert_eq(sim_world_new(&H), KV_OK);
    cr_assert_eq(sim_world_new(&S), KV_OK);
    sim_world_set_kvmem(S, mem);
    static sim_world_cfg cfg;
    uint32_t violated = 0;
    for (uint64_t seed = 1; seed <= 260; seed++) {
        sim_result a, b;
        if (seed <= 240) sim_gen(seed, 0, &cfg);
        else sim_gen_steady(seed, 0, &cfg);
        cr_assert_eq(sim_world_run(H, &cfg, NULL, &a), KV_OK);
        cr_assert_eq(sim_world_run(S, &cfg, NULL, &b), KV_OK);
        cr_assert(!a.violated, "seed %llu: the host world violated", (unsigned long long)seed);
        if (b.violated && !violated++) *first_inv = b.inv;
        if (same)
            cr_assert_eq(a.trace_hash, b.trace_hash, "seed %llu: the staged provider changed the run",
                         (unsigned long long)seed);
    }
    sim_world_free(H);
    sim_world_free(S);
    return violated;
}

Test(kvmem, staged_worlds_run_exactly_as_host_ones, .timeout = 120) {
    kv_inv inv = KV_INV_COUNT;
    cr_assert_eq(sweep((kv_kvmem){.ops = &kv_kvmem_staged}, true, &inv), 0);
}

Test(kvmem, skipping_expose_is_caught, .timeout = 120) {
    static kv_kvmem_staged_cfg broken = {.skip_expose = true};
    kv_inv inv = KV_INV_COUNT;
    uint32_t n = sweep((kv_kvmem){.ops = &kv_kvmem_staged, .ctx = &broken}, false, &inv);
    cr_log_info("skip_expose: %u of 260 runs violated", n);
    cr_assert_gt(n, 20, "P sent stale staging bytes in only %u runs", n);
    cr_assert_eq(inv, KV_INV_DATA);
}

Test(kvmem, skipping_absorb_is_caught, .timeout = 120) {
    static kv_kvmem_staged_cfg broken = {.skip_absorb = true};
    kv_inv inv = KV_INV_COUNT;
    uint32_t n = sweep((kv_kvmem){.ops = &kv_kvmem_staged, .ctx = &broken}, false, &inv);
    cr_log_info("skip_absorb: %u of 260 runs violated", n);
    cr_assert_gt(n, 20, "D verified stale KV in only %u runs", n);
    cr_assert_eq(inv, KV_INV_DATA);
}

/* The CUDA fill kernel's byte formula (transport/cuda/fill_formula.h, the
 * same source the kernel compiles) equals the host's bytes, tails included:
 * checked here because the kernel itself runs only where a GPU is. */
Test(kvmem, cuda_fill_formula_matches_host) {
    static uint8_t want[4 * 1100];
    uint64_t r = 99;
    for (uint32_t it = 0; it < 400; it++) {
        r = kv_mix64(r);
        uint32_t hb = 1 + (uint32_t)(r % 1100), lo = (uint32_t)(r >> 20) % 4, hi = lo + 1 + (uint32_t)(r >> 24) % (4 - lo);
        uint32_t group = (uint32_t)(r >> 30) % 5;
        uint64_t digest = kv_mix64(r ^ 7);
        kv_fill_block_digest(want, digest, group, lo, hi, hb);
        for (uint32_t k = 0; k < (hi - lo) * hb; k++)
            cr_assert_eq(kvf_byte(digest, group, lo, hb, k), want[k], "iteration %u (head_bytes %u) byte %u", it, hb, k);
    }
}

/* ---- the store worker's absorb of a load ------------------------------------------- */

static rig Rg;

/* A store load of four blocks reported to rank 0's worker main, the second
 * block failed. The receive actor builds its report in place, so past the
 * failed entries lies what an earlier load failed: here the third block.
 * Only the listed failures count: every other block of the load is
 * absorbed into the staged KV (and verified), the failed one is not and is
 * a load error. With host memory a skipped absorb would go unseen. */
Test(kvmem, a_store_load_absorbs_every_block_but_the_listed_failures) {
    rig_init(&Rg, NULL);
    kv_engine_cfg cfg = rig_engine_cfg(KV_ROLE_CONSUMER, 1);
    cfg.kvmem = (kv_kvmem){.ops = &kv_kvmem_staged};
    kv_engine *e;
    cr_assert_eq(rig_engine_new(&Rg, &cfg, KV_CONN_STORE, &e), KV_OK);
    kv_worker *w = e->worker[0];
    static kv_m_store_load_done d;
    d.job = (kv_m_store_load){.id = 5, .from_pos = 0, .to_pos = 4, .num_tokens = 4 * cfg.block_size,
                              .tokens = {.token_seed = 77}};
    d.job.blocks.n_groups = 1;
    d.job.blocks.n[0] = 4;
    kv_digest_memo dm;
    kv_digest_memo_init(&dm, &d.job.tokens, cfg.block_size, 0);
    for (uint32_t pos = 0; pos < 4; pos++) { /* what the receive actor wrote into host memory */
        d.job.blocks.id[0][pos] = 3 + 2 * pos;
        kv_fill_block_m(kv_worker_block(w, 0, d.job.blocks.id[0][pos]), &dm, pos, 0, w->head_lo, w->head_hi,
                        cfg.head_bytes);
    }
    d.id = d.job.id;
    d.n_failed = 1;
    d.failed[0] = (kv_bad_block){.group = 0, .block = d.job.blocks.id[0][1]};
    d.failed[1] = (kv_bad_block){.group = 0, .block = d.job.blocks.id[0][2]}; /* stale: not a failure of this load */
    sim_rt_set_current(Rg.sim, w->main_actor);
    kv_msg m = {.kind = KV_M_STORE_LOAD_DONE, .src = KV_ACTOR_NONE, .len = sizeof d, .payload = &d};
    w->conn.ops->on_message(w->conn.self, &m);
    cr_assert_eq(Rg.te.n_violations, 0, "%s", Rg.te.n_violations ? Rg.te.v[0].detail : "");
    for (uint32_t pos = 0; pos < 4; pos++) {
        uint32_t id = d.job.blocks.id[0][pos];
        bool holds = kv_verify_block_m(kv_worker_kv(w, 0, id), &dm, pos, 0, w->head_lo, w->head_hi, cfg.head_bytes);
        if (pos == 1) cr_assert(!holds, "the failed block %u was absorbed", id);
        else cr_assert(holds, "block %u (position %u) loaded but never absorbed into the KV", id, pos);
    }
    cr_assert_eq(w->verified_blocks, 3);
    static kv_bad_blocks bad;
    bad.n = 0;
    w->conn.ops->get_block_ids_with_load_errors(w->conn.self, &bad);
    cr_assert_eq(bad.n, 1);
    cr_assert_eq(bad.e[0].block, d.job.blocks.id[0][1]);
    kv_engine_free(e);
    rig_free(&Rg);
}
