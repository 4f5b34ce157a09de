/* tests/test_engine_tables.c — what the engine's hot path leans on: the
 * packed STEP_RESULT (round trip, bounds, malformed input), the token-digest
 * memo (the same hashes and bytes as the one-shot functions), and request
 * tables sized by kv_engine_cfg.reqs_max (the simulator's fitted size never
 * changes a run; a small fixed size binds and is handled). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/engine.h"
#include "core/kv_data.h"
#include "sim/gen.h"
#include "sim/world.h"

static uint64_t rng = 0x1234;
static uint64_t next(void) { return rng = kv_mix64(rng); }

static void random_result(kv_m_step_result *r, bool full) {
    memset(r, 0xa5, sizeof *r); /* the unused tails must not matter */
    r->rank = (uint32_t)next() % KV_TP_MAX;
    r->step_no = next();
    kv_id_list *l[] = {&r->out.finished_sending, &r->out.finished_recving, &r->out.failed_recving};
    for (uint32_t k = 0; k < 3; k++) {
        l[k]->n = full ? KV_ENGINE_REQS_MAX : (uint32_t)(next() % (KV_ENGINE_REQS_MAX + 1));
        for (uint32_t i = 0; i < l[k]->n; i++) l[k]->id[i] = (uint32_t)next();
    }
    r->out.invalid_blocks.n = full ? KV_BAD_BLOCKS_MAX : (uint32_t)(next() % 9);
    for (uint32_t i = 0; i < r->out.invalid_blocks.n; i++)
        r->out.invalid_blocks.e[i] = (kv_bad_block){.group = (uint32_t)next() % KV_GROUPS_MAX, .block = (uint32_t)next()};
}

static void expect_same(const kv_m_step_result *a, const kv_m_step_result *b) {
    cr_assert_eq(a->rank, b->rank);
    cr_assert_eq(a->step_no, b->step_no);
    const kv_id_list *la[] = {&a->out.finished_sending, &a->out.finished_recving, &a->out.failed_recving};
    const kv_id_list *lb[] = {&b->out.finished_sending, &b->out.finished_recving, &b->out.failed_recving};
    for (uint32_t k = 0; k < 3; k++) {
        cr_assert_eq(la[k]->n, lb[k]->n, "list %u", k);
        cr_assert_eq(memcmp(la[k]->id, lb[k]->id, la[k]->n * sizeof la[k]->id[0]), 0, "list %u", k);
    }
    cr_assert_eq(a->out.invalid_blocks.n, b->out.invalid_blocks.n);
    cr_assert_eq(memcmp(a->out.invalid_blocks.e, b->out.invalid_blocks.e,
                        a->out.invalid_blocks.n * sizeof a->out.invalid_blocks.e[0]),
                 0);
}

Test(step_result, round_trip_and_size) {
    static kv_m_step_result a, b;
    static uint8_t buf[KV_STEP_RESULT_PACKED_MAX];
    for (uint32_t it = 0; it < 500; it++) {
        random_result(&a, it == 0);
        uint32_t len = kv_step_result_pack(&a, buf);
        cr_assert_leq(len, KV_STEP_RESULT_PACKED_MAX);
        if (it == 0) cr_assert_eq(len, KV_STEP_RESULT_PACKED_MAX, "full lists fill the bound exactly");
        memset(&b, 0x5a, sizeof b);
        cr_assert(kv_step_result_unpack(buf, len, &b), "iteration %u", it);
        expect_same(&a, &b);
    }
    kv_conn_output_clear(&a.out);
    cr_assert_eq(kv_step_result_pack(&a, buf), 28u, "an empty result is its header and four zero counts");
}

Test(step_result, malformed_is_rejected) {
    static kv_m_step_result a, b;
    static uint8_t buf[KV_STEP_RESULT_PACKED_MAX + 8];
    random_result(&a, false);
    a.out.finished_recving.n = 3;
    uint32_t len = kv_step_result_pack(&a, buf);
    for (uint32_t cut = 0; cut < len; cut++) cr_assert(!kv_step_result_unpack(buf, cut, &b), "truncated at %u", cut);
    cr_assert(!kv_step_result_unpack(buf, len + 4, &b), "trailing bytes");
    uint32_t huge = KV_ENGINE_REQS_MAX + 1;
    memcpy(buf + 12, &huge, 4); /* finished_sending count over the list's size */
    cr_assert(!kv_step_result_unpack(buf, len, &b));
}

Test(digest_memo, same_values_as_one_shot) {
    static uint8_t x[4 * 40], y[4 * 40];
    for (uint32_t it = 0; it < 200; it++) {
        kv_tokens t = {.token_seed = next(), .prefix_group = (uint32_t)next() % 3, .prefix_len = (uint32_t)next() % 90};
        uint32_t bs = 1 + (uint32_t)next() % 32, n_tokens = 1 + (uint32_t)next() % (KV_REQ_BLOCKS_MAX * bs);
        kv_digest_memo full, part;
        kv_digest_memo_init(&full, &t, bs, 0);
        kv_digest_memo_init(&part, &t, bs, n_tokens);
        uint64_t pa[KV_GROUPS_MAX] = {0}, pb[KV_GROUPS_MAX] = {0};
        for (uint32_t pos = 0; pos < KV_REQ_BLOCKS_MAX + 2; pos++) /* past the memo: computed directly */
            for (uint32_t g = 0; g < KV_GROUPS_MAX; g++) {
                pa[g] = kv_block_hash(&t, pa[g], pos, bs, g);
                pb[g] = kv_block_hash_m(&full, pb[g], pos, g);
                cr_assert_eq(pa[g], pb[g], "hash: iteration %u position %u group %u", it, pos, g);
            }
        uint32_t head_bytes = 1 + (uint32_t)next() % 40, lo = (uint32_t)next() % 4, hi = lo + 1 + (uint32_t)next() % (4 - lo);
        for (uint32_t pos = 0; pos * bs < n_tokens; pos += 1 + (uint32_t)next() % 3)
            for (uint32_t g = 0; g < KV_GROUPS_MAX; g++) {
                kv_fill_block(x, &t, pos, bs, n_tokens, g, lo, hi, head_bytes);
                kv_fill_block_m(y, &part, pos, g, lo, hi, head_bytes);
                cr_assert_eq(memcmp(x, y, (hi - lo) * head_bytes), 0, "fill: iteration %u position %u", it, pos);
                cr_assert(kv_verify_block_m(x, &part, pos, g, lo, hi, head_bytes));
                x[(hi - lo) * head_bytes - 1] ^= 1;
                cr_assert(!kv_verify_block_m(x, &part, pos, g, lo, hi, head_bytes), "a flipped byte is caught");
            }
    }
}

/* A block's digest grown token by token (a decode step each) equals the
 * digest computed from the block's start, also after a restart (a
 * preempted request computes its block again from fewer tokens). */
Test(digest_memo, growing_block_same_as_from_start) {
    static uint8_t x[64], y[64];
    for (uint32_t it = 0; it < 50; it++) {
        kv_tokens t = {.token_seed = next(), .prefix_group = (uint32_t)next() % 3, .prefix_len = (uint32_t)next() % 40};
        uint32_t bs = 1 + (uint32_t)next() % 32;
        kv_digest_run run = {0};
        bool valid = false;
        for (uint32_t n = 1; n <= 3 * bs; n++) {
            uint32_t m = n;
            if (n == 2 * bs + 1) m = bs + 1; /* a restart: fewer tokens than the run holds */
            uint32_t pos = (m - 1) / bs;
            kv_digest_memo dm;
            kv_digest_memo_init(&dm, &t, bs, m);
            kv_digest_memo_put(&dm, pos, kv_block_digest_grow(&t, pos, bs, m, &run, valid));
            valid = true;
            kv_fill_block_m(x, &dm, pos, 1, 0, 2, 16);
            kv_fill_block(y, &t, pos, bs, m, 1, 0, 2, 16);
            cr_assert_eq(memcmp(x, y, 32), 0, "iteration %u, %u tokens, block size %u", it, m, bs);
        }
    }
}

/* The recurrent state: the bytes of a state read back give the state
 * (every group, rank and head size), a chain continued step by step is the
 * chain from the start, and a token folded twice or skipped, or a state
 * continued from the wrong point, gives other bytes. */
Test(recurrent_state, a_chain_read_back_from_its_bytes) {
    static uint8_t b[4 * 4096];
    for (uint32_t it = 0; it < 200; it++) {
        kv_tokens t = {.token_seed = next(), .prefix_group = (uint32_t)next() % 3, .prefix_len = (uint32_t)next() % 40};
        uint32_t n = 1 + (uint32_t)next() % 300, g = (uint32_t)next() % 4, lo = (uint32_t)next() % 4;
        uint32_t hb = 8u << (next() % 10);
        uint64_t s = kv_state_digest(&t, n);
        kv_fill_block_digest(b, s, g, lo, 4, hb);
        cr_assert_eq(kv_state_read(b, g, lo), s, "iteration %u: group %u, heads from %u, %u bytes", it, g, lo, hb);
        /* step by step, in chunks of any size */
        uint64_t c = kv_state_initial();
        for (uint32_t from = 0; from < n;) {
            uint32_t to = from + 1 + (uint32_t)next() % 40;
            if (to > n) to = n;
            kv_fill_block_digest(b, kv_state_advance(&t, from ? kv_state_read(b, g, lo) : c, from, to), g, lo, 4, hb);
            from = to;
        }
        cr_assert_eq(kv_state_read(b, g, lo), s, "iteration %u: stepwise", it);
        if (n < 2) continue;
        cr_assert_neq(kv_state_advance(&t, kv_state_digest(&t, n - 1), n - 2, n), s, "a token folded twice");
        cr_assert_neq(kv_state_advance(&t, kv_state_digest(&t, n - 2), n - 1, n), s, "a token skipped");
        kv_tokens other = t;
        other.token_seed ^= 1;
        if (t.prefix_len < n) cr_assert_neq(kv_state_digest(&other, n), s, "another request's state");
    }
}

static sim_world *W;
static void setup(void) { cr_assert_eq(sim_world_new(&W), KV_OK); }
static void teardown(void) { sim_world_free(W); }
TestSuite(engine_tables, .init = setup, .fini = teardown, .timeout = 600);

/* The fitted size (as many slots as the engine has requests) must give
 * exactly the run the largest tables give: same trace hash, same outcome. */
Test(engine_tables, fitted_size_never_changes_a_run) {
    static sim_world_cfg cfg;
    for (uint64_t seed = 1; seed <= 300; seed++) {
        sim_result a, b;
        sim_gen(seed, 0, &cfg);
        cfg.reqs_max = 0;
        cr_assert_eq(sim_world_run(W, &cfg, NULL, &a), KV_OK);
        cfg.reqs_max = KV_ENGINE_REQS_MAX;
        cr_assert_eq(sim_world_run(W, &cfg, NULL, &b), KV_OK);
        cr_assert_eq(a.trace_hash, b.trace_hash, "seed %llu", (unsigned long long)seed);
        cr_assert_eq(a.requests_ok, b.requests_ok);
        cr_assert_eq(a.violated, b.violated);
    }
}

/* Tables of 2 slots with 12 requests at once on one P/D pair: the engines
 * turn away what does not fit (vLLM: a request the engine cannot take ends
 * with an error), every request still ends, nothing leaks. */
Test(engine_tables, small_tables_bind_cleanly) {
    static sim_world_cfg cfg;
    sim_world_cfg_default(&cfg);
    cfg.n_reqs = 12;
    for (uint32_t i = 0; i < cfg.n_reqs; i++)
        cfg.req[i] = (sim_req_plan){.at_ns = 1000000ull + 1000ull * i, .prompt_len = 40, .max_tokens = 8};
    cfg.reqs_max = 2;
    sim_result r;
    cr_assert_eq(sim_world_run(W, &cfg, NULL, &r), KV_OK);
    cr_assert(!r.violated, "%s: %s", kv_inv_name(r.inv), r.detail);
    cr_assert_eq(r.requests_ok + r.requests_error + r.requests_aborted, 12);
    cr_assert_gt(r.requests_error, 0, "two slots cannot hold twelve requests");
    cr_assert_gt(r.requests_ok, 0);
    /* each failed request was turned away by P or D (or both), and counted */
    cr_assert_geq(r.turned_away, r.requests_error, "%llu turned away, %llu errors", (unsigned long long)r.turned_away,
                  (unsigned long long)r.requests_error);
}

/* An engine of 2 request slots sent 24 requests at the same moment: its
 * input queue (KV_ENGINE_INQ(2) entries) takes what it holds until the next
 * schedule, and turns each later arrival away at once, so every request
 * still ends and the queue never holds more than its size (the engine's
 * invariants check it after every message). */
Test(engine_tables, a_burst_past_the_input_queue_is_turned_away_at_once) {
    static sim_world_cfg cfg;
    sim_world_cfg_default(&cfg);
    cfg.reqs_max = 2;
    cfg.n_reqs = 24;
    cr_assert_gt(cfg.n_reqs, KV_ENGINE_INQ(cfg.reqs_max), "the burst must be longer than the queue");
    for (uint32_t i = 0; i < cfg.n_reqs; i++)
        cfg.req[i] = (sim_req_plan){.at_ns = 1000000, .prompt_len = 40, .max_tokens = 4};
    sim_result r;
    char *trace = NULL;
    size_t trace_len = 0;
    FILE *f = open_memstream(&trace, &trace_len);
    cr_assert_not_null(f);
    cr_assert_eq(sim_world_run(W, &cfg, f, &r), KV_OK);
    fclose(f);
    bool overflowed = strstr(trace, "input queue full") != NULL;
    free(trace);
    cr_assert(!r.violated, "%s: %s", kv_inv_name(r.inv), r.detail);
    cr_assert(overflowed, "the burst never filled an input queue");
    cr_assert_eq(r.requests_ok + r.requests_error + r.requests_aborted, cfg.n_reqs);
    cr_assert_geq(r.turned_away, cfg.n_reqs - KV_ENGINE_INQ(cfg.reqs_max), "%llu turned away",
                  (unsigned long long)r.turned_away);
    cr_assert_gt(r.requests_ok, 0);
}

/* KV bytes and block hashes are part of every recorded trace and of what
 * kvnode's D checks: their values are frozen. The constant is what the first
 * (byte-at-a-time) implementation gave; every vector path must match it. */
static uint64_t frozen_digest(void) {
    static uint8_t b[4 * 200];
    uint64_t h = 0;
    for (uint32_t it = 0; it < 64; it++) {
        kv_tokens t = {.token_seed = kv_mix64(it), .prefix_group = it % 3, .prefix_len = it * 3};
        uint32_t hb = 1 + (it * 37) % 200; /* 1..200 bytes: byte tails, runs of 4 and 8 words */
        kv_fill_block(b, &t, it % 7, 16, 200, it % 5, it % 2, 4, hb);
        for (uint32_t i = 0; i < (4 - it % 2) * hb; i++) h = kv_mix64(h ^ b[i]);
        h ^= kv_block_hash(&t, h, it % 9, 16, it % 5);
    }
    return h;
}

static const kv_tokens big_tokens = {.token_seed = 99, .prefix_group = 1, .prefix_len = 20};

/* Heads 1 and 2 of block `pos` (group, head_bytes each) into out, on the
 * path in force: they must hash as on the scalar path (*scalar, taken
 * there) and verify. */
static void fill_as_scalar(uint8_t *out, uint32_t pos, uint32_t group, uint32_t head_bytes, kv_simd p,
                           uint64_t *scalar) {
    kv_fill_block(out, &big_tokens, pos, 16, 200, group, 1, 3, head_bytes);
    uint64_t h = 0;
    for (uint32_t i = 0; i < 2 * head_bytes; i++) h = kv_mix64(h ^ out[i]);
    if (p == KV_SIMD_SCALAR) *scalar = h;
    cr_assert_eq(h, *scalar, "path %d: two %u-byte heads differ from the scalar path", (int)p, head_bytes);
    cr_assert(kv_verify_block(out, &big_tokens, pos, 16, 200, group, 1, 3, head_bytes), "path %d", (int)p);
}

/* A process fills and verifies on the best path its CPU has from its load,
 * before anything forced one (criterion runs each test in a process of its
 * own), and kvconn's tools print it with --version. */
Test(kv_data, the_best_path_is_used_from_load) {
    cr_assert_eq(kv_simd_used(), kv_simd_best(), "path %s in use, the CPU has %s", kv_simd_name(kv_simd_used()),
                 kv_simd_name(kv_simd_best()));
}

/* Each path this CPU has (scalar always), forced in turn: the frozen values,
 * the same bytes as the scalar path for big heads (unaligned, and aligned:
 * the streaming-store path), and verify finds one flipped byte anywhere in
 * a head (every lane and the tail of a 16 KiB + 5 head; 8-byte heads). */
Test(kv_data, bytes_and_hashes_are_frozen) {
    kv_simd best = kv_simd_best();
    static uint8_t b[2 * 16389];
    static _Alignas(64) uint8_t a[2 * 16384];
    uint64_t odd_scalar = 0, aligned_scalar = 0;
    for (int pi = KV_SIMD_SCALAR; pi <= (int)best; pi++) {
        kv_simd p = (kv_simd)pi;
        cr_assert_eq(kv_simd_force(p), p);
        uint64_t h = frozen_digest();
        cr_assert_eq(h, 0x77b076bac4b9ab16ull, "path %d: got 0x%016llx", (int)p, (unsigned long long)h);
        fill_as_scalar(a, 3, 1, 16384, p, &aligned_scalar);
        a[20000] ^= 4;
        cr_assert(!kv_verify_block(a, &big_tokens, 3, 16, 200, 1, 1, 3, 16384), "path %d: aligned heads, byte 20000",
                  (int)p);
        fill_as_scalar(b, 2, 3, 16389, p, &odd_scalar);
        /* word lanes 0..7 of the first runs, the middle, the last word, the
         * 5-byte tail; head 1 is [0, 16389), head 2 [16389, 32778) */
        static const uint32_t flips[] = {0,     1,     8,     16,    24,    31,    32,    40,    56,    63,
                                         8000,  16376, 16383, 16384, 16388, 16389, 16397, 16421, 24001, 32765,
                                         32772, 32773, 32777};
        for (uint32_t i = 0; i < sizeof flips / sizeof flips[0]; i++) {
            uint32_t at = flips[i];
            b[at] ^= 0x10;
            cr_assert(!kv_verify_block(b, &big_tokens, 2, 16, 200, 3, 1, 3, 16389), "path %d: byte %u flipped", (int)p,
                      at);
            b[at] ^= 0x10;
        }
        kv_fill_block(b, &big_tokens, 1, 16, 200, 2, 0, 4, 8); /* one word per head (the simulator's) */
        for (uint32_t at = 0; at < 32; at += 5) {
            cr_assert(kv_verify_block(b, &big_tokens, 1, 16, 200, 2, 0, 4, 8), "path %d", (int)p);
            b[at] ^= 1;
            cr_assert(!kv_verify_block(b, &big_tokens, 1, 16, 200, 2, 0, 4, 8), "path %d: byte %u of 8-byte heads",
                      (int)p, at);
            b[at] ^= 1;
        }
    }
    kv_simd_force(best);
}

/* Scratch memory (kv_alloc_scratch: codec messages and buffers) is not
 * zeroed per run. Filled with a byte that changes every run, it must give
 * exactly the runs of a world that never poisons: nothing reads scratch
 * before writing it. */
Test(engine_tables, scratch_is_written_before_read) {
    sim_world *P;
    cr_assert_eq(sim_world_new(&P), KV_OK);
    sim_world_set_scratch_poison(P, true);
    static sim_world_cfg cfg;
    for (uint64_t seed = 1; seed <= 330; seed++) {
        sim_result a, b;
        if (seed <= 300) sim_gen(seed, 0, &cfg);
        else if (seed <= 320) sim_gen_steady(seed, 0, &cfg);
        else sim_gen_load(seed, 0, &cfg); /* full tables: the receiver's pull table, the engine's slots */
        cr_assert_eq(sim_world_run(W, &cfg, NULL, &a), KV_OK);
        cr_assert_eq(sim_world_run(P, &cfg, NULL, &b), KV_OK);
        cr_assert_eq(a.trace_hash, b.trace_hash, "seed %llu: poisoned scratch changed the run",
                     (unsigned long long)seed);
    }
    sim_world_free(P);
}
