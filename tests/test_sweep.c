/* tests/test_sweep.c — the harness finds what it must: generated scenarios
 * run clean with every bug switch off, each P2P bug switch is found, and the
 * same seed always gives the same trace hash. */
#include <criterion/criterion.h>

#include "sim/gen.h"
#include "sim/sweep.h"

static sim_world *W;
static void setup(void) { cr_assert_eq(sim_world_new(&W), KV_OK); }
static void teardown(void) { sim_world_free(W); }
TestSuite(sweep, .init = setup, .fini = teardown, .timeout = 600);

Test(sweep, all_switches_off_is_clean) {
    static sim_sweep s;
    sim_sweep_init(&s);
    cr_assert_eq(sim_sweep_run(W, 1, 400, 0, false, 0, 1, NULL, NULL, &s), KV_OK);
    cr_assert_eq(s.runs, 400);
    cr_assert_eq(s.sim_errors, 0);
    cr_assert_eq(s.violations, 0, "seed %llu: %s: %s", (unsigned long long)s.first_violation_seed,
                 kv_inv_name(s.first.inv), s.first.detail);
    cr_assert_gt(s.armed[KV_INV_DATA], 0, "INV-DATA never armed");
    cr_assert_gt(s.armed[KV_INV_LEAK], 0, "INV-LEAK never armed");
    cr_assert_gt(s.fault_phase[SIM_F_ABORT][KV_PH_D_WAITING_KV] + s.fault_phase[SIM_F_ABORT][KV_PH_P_PREFILL], 0,
                 "aborts never hit a transfer phase");
}

static void expect_found(kv_bug bug, kv_inv inv, uint64_t max_seeds) {
    static sim_sweep s;
    sim_sweep_init(&s);
    cr_assert_eq(sim_sweep_run(W, 1, max_seeds, bug, true, 0, 1, NULL, NULL, &s), KV_OK);
    cr_assert_neq(s.first_violation_seed, UINT64_MAX, "%s not found in %llu seeds", kv_bug_name(bug),
                  (unsigned long long)max_seeds);
    cr_assert_eq(s.first.inv, inv, "%s found as %s: %s", kv_bug_name(bug), kv_inv_name(s.first.inv), s.first.detail);
    /* the printed seed reproduces the same violation and hash */
    static sim_world_cfg cfg;
    sim_result r;
    sim_gen(s.first_violation_seed, bug, &cfg);
    cr_assert_eq(sim_world_run(W, &cfg, NULL, &r), KV_OK);
    cr_assert(r.violated);
    cr_assert_eq(r.inv, inv);
    cr_assert_eq(r.trace_hash, s.first.trace_hash);
    /* and the same seed with the switch off is clean */
    sim_gen(s.first_violation_seed, 0, &cfg);
    cr_assert_eq(sim_world_run(W, &cfg, NULL, &r), KV_OK);
    cr_assert(!r.violated, "seed %llu without the switch: %s", (unsigned long long)s.first_violation_seed, r.detail);
}

Test(sweep, finds_err_early_return) { expect_found(KV_BUG_ERR_EARLY_RETURN, KV_INV_LIVE, 3000); }
Test(sweep, finds_recv_map_race) { expect_found(KV_BUG_RECV_MAP_RACE, KV_INV_OWNER, 3000); }
Test(sweep, finds_empty_pull_completion) { expect_found(KV_BUG_EMPTY_PULL_COMPLETION, KV_INV_SCHED_ASSERT, 3000); }

Test(sweep, same_seed_same_trace_hash) {
    static sim_world_cfg cfg;
    sim_result a, b;
    for (uint64_t seed = 1; seed <= 200; seed++) {
        sim_gen(seed, 0, &cfg);
        cr_assert_eq(sim_world_run(W, &cfg, NULL, &a), KV_OK);
        cr_assert_eq(sim_world_run(W, &cfg, NULL, &b), KV_OK);
        cr_assert_eq(a.trace_hash, b.trace_hash, "seed %llu", (unsigned long long)seed);
        cr_assert_eq(a.events, b.events);
    }
}

/* The serving workload: every request of every seed ends ok (the pacing
 * keeps P and D below saturation), nothing violates. */
Test(sweep, steady_workload_is_all_ok) {
    static sim_sweep s;
    sim_sweep_init(&s);
    sim_sweep_hooks h = {.gen = sim_gen_steady};
    cr_assert_eq(sim_sweep_run_hooks(W, 1, 30, 0, false, 0, 1, &h, &s), KV_OK);
    cr_assert_eq(s.violations, 0, "seed %llu: %s", (unsigned long long)s.first_violation_seed, s.first.detail);
    cr_assert_eq(s.requests, 30u * SIM_REQS_MAX);
    static sim_world_cfg cfg;
    for (uint64_t seed = 1; seed <= 30; seed++) {
        sim_result r;
        sim_gen_steady(seed, 0, &cfg);
        cr_assert_eq(cfg.n_faults, 0);
        cr_assert_eq(sim_world_run(W, &cfg, NULL, &r), KV_OK);
        cr_assert_eq(r.requests_ok, SIM_REQS_MAX, "seed %llu: %llu ok", (unsigned long long)seed,
                     (unsigned long long)r.requests_ok);
    }
}

/* The overload workload: clean with every switch off (queues, preemption,
 * pool pressure and up to 32 faults per run), and a bug finder: every
 * switch is found within a few seeds, as the right invariant, and the seed
 * reproduces it. */
Test(sweep, load_workload_is_clean_and_finds_every_switch) {
    static sim_sweep s;
    sim_sweep_init(&s);
    sim_sweep_hooks h = {.gen = sim_gen_load};
    cr_assert_eq(sim_sweep_run_hooks(W, 1, 60, 0, false, 0, 1, &h, &s), KV_OK);
    cr_assert_eq(s.sim_errors, 0);
    cr_assert_eq(s.violations, 0, "seed %llu: %s: %s", (unsigned long long)s.first_violation_seed,
                 kv_inv_name(s.first.inv), s.first.detail);
    cr_assert_geq(s.requests, 60u * 64u);
    cr_assert_gt(s.fault_phase[SIM_F_ABORT][KV_PH_P_QUEUED], 0, "no abort found a request queued");
    static const struct { kv_bug bug; kv_inv inv; } want[] = {
        {KV_BUG_ERR_EARLY_RETURN, KV_INV_LIVE},
        {KV_BUG_RECV_MAP_RACE, KV_INV_OWNER},
        {KV_BUG_EMPTY_PULL_COMPLETION, KV_INV_SCHED_ASSERT},
        {KV_BUG_STORE_EMPTY_BLOCK_TABLE, KV_INV_SAVE},
        {KV_BUG_STORE_REJECTED_LOAD_SAVE, KV_INV_SAVE},
    };
    static sim_world_cfg cfg;
    for (uint32_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        sim_sweep_init(&s);
        cr_assert_eq(sim_sweep_run_hooks(W, 1, 50, want[i].bug, true, 0, 1, &h, &s), KV_OK);
        cr_assert_neq(s.first_violation_seed, UINT64_MAX, "%s not found in 50 load seeds", kv_bug_name(want[i].bug));
        cr_assert_eq(s.first.inv, want[i].inv, "%s found as %s", kv_bug_name(want[i].bug), kv_inv_name(s.first.inv));
        sim_result r;
        sim_gen_load(s.first_violation_seed, want[i].bug, &cfg);
        cr_assert_eq(sim_world_run(W, &cfg, NULL, &r), KV_OK);
        cr_assert(r.violated && r.inv == want[i].inv && r.trace_hash == s.first.trace_hash);
    }
}
