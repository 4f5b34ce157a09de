/* tests/test_p2p.c — the Mooncake P2P connector and the engine contract,
 * transition by transition (spec section C), through the public world API
 * with the in-process (sim) transport. Each test names the transition. */
#include <criterion/criterion.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "core/bootstrap.h"
#include "core/engine.h"
#include "core/msgs.h"
#include "core/p2p.h"
#include "core/proxy.h"
#include "core/worker.h"
#include "sim/world.h"
#include "tests/support/rig.h"

static sim_world *W;
static sim_world_cfg C;
static sim_result R;

static void setup(void) {
    cr_assert_eq(sim_world_new(&W), KV_OK);
    sim_world_cfg_default(&C);
}
static void teardown(void) { sim_world_free(W); }

TestSuite(p2p, .init = setup, .fini = teardown, .timeout = 60);

static void reqs(uint32_t n, uint32_t prompt, uint32_t max_tokens) {
    C.n_reqs = n;
    for (uint32_t i = 0; i < n; i++)
        C.req[i] = (sim_req_plan){.at_ns = 1000000ull * (i + 1), .d_engine = i, .p_engine = i,
                                  .prompt_len = prompt + 7 * i, .max_tokens = max_tokens};
}

static void run(void) { cr_assert_eq(sim_world_run(W, &C, NULL, &R), KV_OK); }

static void expect_clean(void) {
    cr_assert(!R.violated, "unexpected %s at event %llu: %s", kv_inv_name(R.inv),
              (unsigned long long)R.event, R.detail);
    cr_assert_eq(R.sim_error, KV_OK);
}

static void expect_violation(kv_inv inv) {
    cr_assert(R.violated, "expected %s, run was clean", kv_inv_name(inv));
    cr_assert_eq(R.inv, inv, "expected %s, got %s: %s", kv_inv_name(inv), kv_inv_name(R.inv), R.detail);
}

/* ---- normal path ------------------------------------------------------------ */

Test(p2p, normal_pd_transfers_and_verifies_every_block) {
    reqs(8, 90, 5);
    run();
    expect_clean();
    cr_assert_eq(R.requests_ok, 8);
    cr_assert_gt(R.armed[KV_INV_DATA], 8 * 5, "D verified %llu blocks", (unsigned long long)R.armed[KV_INV_DATA]);
}

Test(p2p, tp_layouts_pair_ranks_by_heads) {
    static const uint32_t layouts[][2] = {{2, 1}, {1, 2}, {4, 2}, {2, 4}, {4, 4}};
    for (size_t i = 0; i < sizeof layouts / sizeof layouts[0]; i++) {
        sim_world_cfg_default(&C);
        C.tp_p = layouts[i][0];
        C.tp_d = layouts[i][1];
        reqs(4, 70, 3);
        run();
        expect_clean();
        cr_assert_eq(R.requests_ok, 4, "tp %u->%u", C.tp_p, C.tp_d);
    }
}

Test(p2p, hybrid_groups_sliding_window_and_mamba_are_clipped) {
    C.n_groups = 3;
    C.group[1] = (kv_group_cfg){.kind = KV_GROUP_SLIDING, .window = 32};
    C.group[2] = (kv_group_cfg){.kind = KV_GROUP_MAMBA};
    reqs(6, 150, 4);
    run();
    expect_clean();
    cr_assert_eq(R.requests_ok, 6);
}

/* Blocks D's workers checked against INV-DATA on arrival, summed over D engines. */
static uint64_t d_verified(void) {
    uint64_t n = 0;
    for (uint32_t e = C.n_p; e < C.n_p + C.n_d; e++) {
        const kv_engine *eng = sim_world_engine(W, e);
        for (uint32_t r = 0; r < eng->cfg.tp; r++) n += eng->worker[r]->verified_blocks;
    }
    return n;
}

/* D verifies what it pulled in every group, not only the first: a second
 * full-attention group pulls the same blocks again, so D checks twice as many. */
Test(p2p, d_verifies_the_pulled_blocks_of_every_group) {
    reqs(6, 150, 4);
    run();
    expect_clean();
    uint64_t one = d_verified();
    cr_assert_gt(one, 6 * 5, "D verified %llu blocks of one group", (unsigned long long)one);
    C.n_groups = 2;
    C.group[1] = C.group[0];
    run();
    expect_clean();
    cr_assert_eq(d_verified(), 2 * one, "D verified %llu blocks of two full groups, %llu of one",
                 (unsigned long long)d_verified(), (unsigned long long)one);
}

Test(p2p, sequential_and_concurrent_proxy_paths) {
    reqs(6, 80, 3);
    for (uint32_t i = 0; i < 6; i++) C.req[i].sequential = (uint8_t)(i & 1);
    C.req[0].at_ns = C.req[1].at_ns = 1000; /* D's pull can beat P's request: placeholder */
    run();
    expect_clean();
    cr_assert_eq(R.requests_ok, 6);
}

Test(p2p, partial_prefix_hit_on_d_pulls_only_new_blocks) {
    C.prefix_caching = true;
    reqs(2, 130, 2);
    C.req[0].prefix_len = C.req[1].prefix_len = 96;
    C.req[1].at_ns = 200000000; /* after request 0 cached its blocks on D */
    run();
    expect_clean();
    cr_assert_eq(R.requests_ok, 2);
}

/* ---- empty pulls (spec E, bug 3) ------------------------------------------- */

/* (i): D aborts a request before its first schedule: request 0 decodes
 * for a while and holds D's small pool, so request 1 cannot be admitted and
 * is aborted while still WAITING. request_finished queues an empty pull
 * whose only purpose is to let P free its blocks. */
static void empty_pull_early_abort(void) {
    C.pool_blocks_d = 8;
    reqs(2, 0, 0);
    C.req[0] = (sim_req_plan){.at_ns = 1000000, .prompt_len = 40, .max_tokens = 60};
    C.req[1] = (sim_req_plan){.at_ns = 2000000, .prompt_len = 90, .max_tokens = 2};
    C.n_faults = 1;
    C.fault[0] = (sim_fault){.at_ns = 30000000, .kind = SIM_F_ABORT, .target = 1};
}

Test(p2p, empty_pull_early_abort_frees_p_without_completion) {
    empty_pull_early_abort();
    run();
    expect_clean();
    cr_assert_eq(R.requests_aborted, 1);
    cr_assert_eq(R.requests_ok, 1);
}

Test(p2p, seed004_empty_pull_completion_early_abort_trips_scheduler_assert) {
    empty_pull_early_abort();
    C.bugs = KV_BUG_EMPTY_PULL_COMPLETION;
    run();
    expect_violation(KV_INV_SCHED_ASSERT);
    cr_assert(strstr(R.detail, "in self.requests"), "%s", R.detail);
}

/* (ii): a full local prefix hit with a mamba group (N' = N - 1): ext == 0,
 * the request runs locally and the pull is empty. */
static void empty_pull_full_hit(void) {
    C.prefix_caching = true;
    C.n_groups = 2;
    C.group[1] = (kv_group_cfg){.kind = KV_GROUP_MAMBA};
    reqs(2, 0, 2);
    C.req[0].prompt_len = C.req[1].prompt_len = 4 * 16 + 1;
    C.req[0].prefix_len = C.req[1].prefix_len = 4 * 16 + 1;
    C.req[1].d_engine = 0;
    C.req[1].at_ns = 300000000;
    C.req[1].max_tokens = 50; /* still RUNNING when a stray completion would land */
}

Test(p2p, empty_pull_full_local_hit_runs_locally) {
    empty_pull_full_hit();
    run();
    expect_clean();
    cr_assert_eq(R.requests_ok, 2);
}

Test(p2p, seed004_empty_pull_completion_full_hit_trips_is_finished_assert) {
    empty_pull_full_hit();
    C.bugs = KV_BUG_EMPTY_PULL_COMPLETION;
    run();
    expect_violation(KV_INV_SCHED_ASSERT);
    cr_assert(strstr(R.detail, "is_finished"), "%s", R.detail);
}

/* ---- errors ------------------------------------------------------------------ */

Test(p2p, whole_message_error_fails_loads_and_frees_blocks) {
    reqs(3, 90, 3);
    C.n_faults = 1;
    C.fault[0] = (sim_fault){.at_ns = 500000, .kind = SIM_F_SENDER_EXCEPTION, .target = 0};
    run();
    expect_clean();
    cr_assert_geq(R.requests_error, 1);
}

Test(p2p, seed000_err_early_return_leaks_d_blocks) {
    reqs(3, 90, 3);
    C.n_faults = 1;
    C.fault[0] = (sim_fault){.at_ns = 500000, .kind = SIM_F_SENDER_EXCEPTION, .target = 0};
    C.bugs = KV_BUG_ERR_EARLY_RETURN;
    run();
    expect_violation(KV_INV_LIVE);
    cr_assert(strstr(R.detail, "WAITING_FOR_REMOTE_KVS"), "%s", R.detail);
}

Test(p2p, finish_with_err_reqs_is_a_load_error) {
    reqs(2, 90, 3);
    C.n_faults = 1;
    C.fault[0] = (sim_fault){.at_ns = 500000, .kind = SIM_F_SENDER_ERR_REQ, .target = 0};
    run();
    expect_clean();
    cr_assert_geq(R.requests_error, 1);
}

Test(p2p, transfer_engine_error_fails_every_request_of_the_round) {
    reqs(2, 90, 3);
    C.n_faults = 1;
    C.fault[0] = (sim_fault){.at_ns = 500000, .kind = SIM_F_TE_ERROR, .target = 0};
    run();
    expect_clean();
    cr_assert_geq(R.requests_error, 1);
}

Test(p2p, p_has_fewer_blocks_than_d_is_a_request_error) {
    reqs(2, 60, 3);
    C.req[0].d_extra_tokens = 64; /* D was told a longer prompt */
    run();
    expect_clean();
    cr_assert_eq(R.requests_error, 1);
    cr_assert_eq(R.requests_ok, 1);
}

Test(p2p, receive_timeout_fails_the_load_exactly_once) {
    reqs(2, 90, 3);
    C.n_faults = 1;
    C.fault[0] = (sim_fault){.at_ns = 500000, .kind = SIM_F_SENDER_DROP_RESP, .target = 0};
    run();
    expect_clean();
    cr_assert_geq(R.requests_error, 1);
}

/* D's receive timeout counts from P's last response, not from the pull (as
 * vLLM re-arms it on every response): five requests arrive together and
 * go to P in one pull; P answers CONTINUE as each turns ready, its prefill
 * a budget at a time, so the whole answer takes longer than D's 20 ms
 * timeout while no gap between two responses does. Every request ends ok.
 * (D's timeout shorter than P's ready wait: the two are configured apart.) */
Test(p2p, receive_timeout_counts_from_the_last_response) {
    C.recv_timeout_ns = 20000000;
    C.pool_blocks_d = 256;
    C.n_reqs = 6;
    C.req[0] = (sim_req_plan){.at_ns = 1000000, .prompt_len = 40, .max_tokens = 60};
    C.req[1] = (sim_req_plan){.at_ns = 20000000, .prompt_len = 20, .max_tokens = 2};
    for (uint32_t i = 2; i < 6; i++) C.req[i] = (sim_req_plan){.at_ns = 20000000, .prompt_len = 400, .max_tokens = 2};
    run();
    expect_clean();
    cr_assert_eq(R.requests_ok, 6, "%u ok, %u errors", (unsigned)R.requests_ok, (unsigned)R.requests_error);
}

/* A drop_response fault drops one response of P's sender, not every one
 * after it: request 0's pull loses its answer and fails by D's receive
 * timeout; request 1, pulled well after that, is answered and ends ok. */
Test(p2p, a_dropped_response_costs_only_the_pull_it_answered) {
    reqs(2, 90, 3);
    C.recv_timeout_ns = 50000000;
    C.req[1].at_ns = 500000000;
    C.n_faults = 1;
    C.fault[0] = (sim_fault){.at_ns = 500000, .kind = SIM_F_SENDER_DROP_RESP, .target = 0};
    run();
    expect_clean();
    const kv_proxy *px = sim_world_proxy(W);
    cr_assert_eq(kv_proxy_slot(px, 0)->outcome, KV_OUT_ERROR, "request 0's pull lost its only response");
    cr_assert_eq(kv_proxy_slot(px, 1)->outcome, KV_OUT_OK, "request 1 (outcome %u) was pulled after the drop",
                 kv_proxy_slot(px, 1)->outcome);
}

Test(p2p, seed000_err_early_return_timeout_path_also_leaks) {
    reqs(2, 90, 3);
    C.n_faults = 1;
    C.fault[0] = (sim_fault){.at_ns = 500000, .kind = SIM_F_SENDER_DROP_RESP, .target = 0};
    C.bugs = KV_BUG_ERR_EARLY_RETURN;
    run();
    expect_violation(KV_INV_LIVE);
}

Test(p2p, recompute_policy_recovers_from_a_failed_load) {
    reqs(3, 90, 3);
    C.policy = KV_POLICY_RECOMPUTE;
    C.n_faults = 1;
    C.fault[0] = (sim_fault){.at_ns = 500000, .kind = SIM_F_SENDER_EXCEPTION, .target = 0};
    run();
    expect_clean();
    cr_assert_eq(R.requests_ok, 3, "recompute keeps every request alive");
}

Test(p2p, unknown_engine_at_bootstrap_fails_the_batch) {
    reqs(2, 90, 3);
    C.n_faults = 1;
    C.fault[0] = (sim_fault){.at_ns = 0, .kind = SIM_F_BOOT_DOWN, .arg = 1000};
    run();
    expect_clean();
    cr_assert_eq(R.requests_error, 2);
}

Test(p2p, connection_reset_mid_transfer_fails_cleanly) {
    reqs(4, 200, 3);
    C.n_faults = 1;
    C.fault[0] = (sim_fault){.at_ns = 1000000 + 150000, .kind = SIM_F_NET_RESET, .target = 0, .arg = 0};
    run();
    expect_clean();
}

/* ---- peer crash and restart ------------------------------------------------ */

/* Requests 0..9 every ms from 1 ms, 3 more at 150-152 ms (when P has
 * prefilled the first ten); engine `engine`'s process dies at 4.2 ms
 * (transfers in flight) and a new one takes its place 20 ms later. */
static void crash_plan(uint32_t engine, kv_fail_policy policy) {
    reqs(13, 200, 4);
    for (uint32_t i = 10; i < 13; i++) C.req[i].at_ns = 140000000ull + 1000000ull * i;
    C.policy = policy;
    C.n_faults = 1;
    C.fault[0] = (sim_fault){.at_ns = 4200000, .kind = SIM_F_PEER_CRASH, .target = engine, .arg = 20};
}

/* D's pulls from the dead P fail (PEER_DOWN, refused connections): load
 * errors, and under policy fail those requests end in error; the proxy fails
 * P's side of each. Nothing hangs, D's pool is clean, and the new P serves
 * the requests that come after it. */
Test(p2p, peer_crash_of_p_fails_loads_and_a_new_p_serves_again) {
    crash_plan(0, KV_POLICY_FAIL);
    run();
    expect_clean();
    cr_assert_eq(R.requests_ok + R.requests_error, 13, "every request ended");
    cr_assert_gt(R.requests_error, 0);
    cr_assert_gt(sim_world_engine(W, 1)->stats.load_errors, 0, "D saw its loads fail");
    cr_assert_geq(R.requests_ok, 3, "the new P serves requests 10..12");
    cr_assert_eq(R.fault_phase[SIM_F_PEER_CRASH][KV_PH_DONE], 0, "P held requests when it died");
}

/* Under policy recompute D computes the failed loads itself: a concurrent
 * request survives its P's death (P's side fails, D's decides). */
Test(p2p, peer_crash_of_p_under_recompute_keeps_concurrent_requests) {
    crash_plan(0, KV_POLICY_RECOMPUTE);
    run();
    expect_clean();
    cr_assert_eq(R.requests_ok, 13, "%llu errors", (unsigned long long)R.requests_error);
    cr_assert_gt(sim_world_engine(W, 1)->stats.recomputes, 0);
}

/* D dies mid-transfer: P's sender sees its peers go down; the blocks P held
 * for D's pulls are released (by the failed transfers, or by P's abort
 * timeout), so P's pool is clean at the end (INV-LEAK), and the new D
 * serves the later requests. */
Test(p2p, peer_crash_of_d_releases_blocks_p_held_for_it) {
    crash_plan(1, KV_POLICY_FAIL);
    C.abort_timeout_ns = 30000000; /* P lets go of never-pulled blocks after 30 ms */
    C.recv_timeout_ns = 40000000;
    run();
    expect_clean();
    cr_assert_eq(R.requests_ok + R.requests_error, 13);
    cr_assert_geq(R.requests_ok, 3);
    const kv_engine *p = sim_world_engine(W, 0);
    cr_assert_eq(p->stats.finished_sending, 13, "each of P's holds ended once");
}

/* The same crash plan gives the same run, and a crash target beyond the
 * engines maps into them (any bytes are a scenario). */
Test(p2p, peer_crash_runs_are_deterministic) {
    crash_plan(0, KV_POLICY_FAIL);
    C.fault[0].target = 7; /* 7 % 2: D */
    run();
    expect_clean();
    uint64_t h = R.trace_hash;
    run();
    cr_assert_eq(R.trace_hash, h);
    C.fault[0].target = 1;
    run();
    cr_assert_eq(R.trace_hash, h, "target 7 is engine 1");
}

/* ---- silent crash (peer_hang) ---------------------------------------------- */

/* crash_plan with the process dying silently; its host is back restart_ms
 * later (the fault's arg + 1). */
static void hang_plan(uint32_t engine, uint32_t restart_ms) {
    crash_plan(engine, KV_POLICY_FAIL);
    C.fault[0].kind = SIM_F_PEER_HANG;
    C.fault[0].arg = restart_ms - 1;
}

/* The earliest end of a request that failed, or UINT64_MAX. */
static uint64_t first_error_ns(void) {
    uint64_t t = UINT64_MAX;
    for (uint32_t id = 0; id < C.n_reqs; id++) {
        const kv_proxy_req *q = kv_proxy_slot(sim_world_proxy(W), id);
        if (q->used && q->outcome == KV_OUT_ERROR && q->done_ns < t) t = q->done_ns;
    }
    return t;
}

/* P dies silently at 4.2 ms with D's pulls in flight; its host is back at
 * 104.2 ms. Nothing tells D before: its loads fail by its 40 ms receive
 * timeout, not at the death as when the crash resets connections (the same
 * plan with peer_crash, below). Every request ends, nothing leaks, and the
 * new P serves requests 10..12 (150 ms on). */
Test(p2p, peer_hang_of_p_fails_loads_by_the_receive_timeout) {
    hang_plan(0, 100);
    C.recv_timeout_ns = 40000000;
    run();
    expect_clean();
    cr_assert_eq(R.requests_ok + R.requests_error, 13, "every request ended");
    cr_assert_gt(sim_world_engine(W, 1)->stats.load_errors, 0, "D saw its loads fail");
    cr_assert_geq(R.requests_ok, 3, "the new P serves requests 10..12");
    uint64_t hang = 0, crash = 0;
    for (uint32_t ph = 0; ph < KV_PH_COUNT; ph++) {
        hang += R.fault_phase[SIM_F_PEER_HANG][ph];
        crash += R.fault_phase[SIM_F_PEER_CRASH][ph];
    }
    cr_assert(hang > 0 && crash == 0, "counted under peer_hang");
    uint64_t t = first_error_ns();
    cr_assert(t >= 40000000ull && t < 104200000ull, "first failure at %llu ns: by the receive timeout, before the host is back",
              (unsigned long long)t);
    C.fault[0].kind = SIM_F_PEER_CRASH; /* told at once */
    C.fault[0].arg = 100;
    run();
    expect_clean();
    cr_assert_lt(first_error_ns(), 40000000ull, "a crash that resets fails them sooner");
}

/* D dies silently at 4.2 ms while P holds blocks for its pulls, and nothing
 * tells P until the host is back at 54.2 ms (P's abort timeout is 30 ms):
 * each of P's holds still ends once, its pool is clean at the end, and the
 * new D serves 10..12. */
Test(p2p, peer_hang_of_d_releases_blocks_p_held_for_it) {
    hang_plan(1, 50);
    C.abort_timeout_ns = 30000000;
    C.recv_timeout_ns = 40000000;
    run();
    expect_clean();
    cr_assert_eq(R.requests_ok + R.requests_error, 13);
    cr_assert_geq(R.requests_ok, 3);
    cr_assert_eq(sim_world_engine(W, 0)->stats.finished_sending, 13, "each of P's holds ended once");
}

/* Same plan, same run; silent and loud deaths are different runs. */
Test(p2p, peer_hang_runs_are_deterministic) {
    hang_plan(0, 20);
    run();
    expect_clean();
    uint64_t h = R.trace_hash;
    run();
    cr_assert_eq(R.trace_hash, h);
    C.fault[0].kind = SIM_F_PEER_CRASH;
    C.fault[0].arg = 20;
    run();
    cr_assert_neq(R.trace_hash, h);
}

/* P's abort-request timeout: D cannot admit request 1 (request 0 holds its
 * small pool) for longer than P's expiry, so P reaps the held blocks
 * (finished_sending without a transfer). When D finally pulls, P has only a
 * placeholder: the ready wait times out and D's load fails cleanly. */
Test(p2p, p_abort_timeout_reaps_blocks_never_pulled) {
    C.pool_blocks_d = 8;
    C.abort_timeout_ns = 50000000;  /* 50 ms */
    C.recv_timeout_ns = 80000000;   /* D's stays longer than P's, as in vLLM */
    reqs(2, 0, 0);
    C.req[0] = (sim_req_plan){.at_ns = 1000000, .prompt_len = 40, .max_tokens = 60};
    C.req[1] = (sim_req_plan){.at_ns = 2000000, .prompt_len = 90, .max_tokens = 2};
    run();
    expect_clean();
    cr_assert_eq(R.requests_ok, 1);
    cr_assert_eq(R.requests_error, 1, "the late pull fails under policy fail");
    const kv_engine *p = sim_world_engine(W, 0);
    cr_assert_eq(p->stats.finished_sending, 2, "both of P's holds ended (one by transfer, one by expiry)");
}

/* ---- aborts in every phase ---------------------------------------------------- */

/* Each (time, request) below lands an abort in one of the request's phases
 * on P and/or D; together they cover every phase, and each run is clean. */
Test(p2p, abort_in_every_phase_is_clean) {
    /* request 0 at 1 ms keeps D decoding while 1 (8 ms) and 2 (9 ms) arrive */
    static const struct { uint64_t at; uint32_t target; } plan[] = {
        {800000, 0},  {1300000, 0},  {5600000, 0},  {8200000, 1},  {9700000, 1},
        {12700000, 1}, {15700000, 1}, {9100000, 2}, {17400000, 2},
    };
    uint64_t seen[KV_PH_COUNT] = {0};
    for (size_t i = 0; i < sizeof plan / sizeof plan[0]; i++) {
        sim_world_cfg_default(&C);
        reqs(3, 120, 8);
        C.req[1].at_ns = 8000000;
        C.req[2].at_ns = 9000000;
        C.n_faults = 1;
        C.fault[0] = (sim_fault){.at_ns = plan[i].at, .kind = SIM_F_ABORT, .target = plan[i].target};
        run();
        expect_clean();
        for (uint32_t ph = 0; ph < KV_PH_COUNT; ph++) seen[ph] += R.fault_phase[SIM_F_ABORT][ph];
    }
    for (uint32_t ph = 0; ph < KV_PH_COUNT; ph++)
        cr_assert_gt(seen[ph], 0, "no abort landed in phase %s", kv_phase_name((kv_phase)ph));
}

/* ---- preemption ----------------------------------------------------------------- */

Test(p2p, preemption_on_small_pools_keeps_accounting) {
    C.pool_blocks_p = 24;
    C.pool_blocks_d = 24;
    reqs(8, 150, 40);
    for (uint32_t i = 0; i < 8; i++) C.req[i].at_ns = 1000;
    run();
    expect_clean();
    cr_assert_eq(R.requests_ok + R.requests_error, 8);
}

/* ---- ownership (seed 000 (a)) ---------------------------------------------------- */

Test(p2p, seed000_recv_map_race_is_an_owner_violation) {
    reqs(2, 90, 3);
    C.bugs = KV_BUG_RECV_MAP_RACE;
    run();
    expect_violation(KV_INV_OWNER);
    cr_assert(strstr(R.detail, "receiver pull map"), "%s", R.detail);
}

/* ---- determinism ------------------------------------------------------------------ */

Test(p2p, same_config_same_trace_hash) {
    reqs(6, 100, 4);
    C.n_faults = 1;
    C.fault[0] = (sim_fault){.at_ns = 2000000, .kind = SIM_F_ABORT, .target = 2};
    run();
    uint64_t h = R.trace_hash, ev = R.events;
    run();
    cr_assert_eq(R.trace_hash, h);
    cr_assert_eq(R.events, ev);
    C.seed = 2;
    run();
    cr_assert_neq(R.trace_hash, h, "a different seed interleaves differently");
}

/* ---- construction ---------------------------------------------------------------- */

static rig Rg;

/* A p2p engine (P: sender; D: receiver), built with each allocation and
 * each spawn of the construction refused in turn: each refusal fails the
 * construction, and a constructor that fails gives back everything it took
 * (a sender that cannot spawn its actor included). */
Test(p2p, a_failed_construction_releases_everything) {
    rig_init(&Rg, NULL);
    for (uint8_t role = KV_ROLE_PRODUCER; role <= KV_ROLE_CONSUMER; role++) {
        kv_engine_cfg cfg = rig_engine_cfg(role, 2);
        rig_failures f = rig_engine_failures(&Rg, &cfg, KV_CONN_P2P);
        cr_assert(f.built, "role %u: the engine cannot be built at all", role);
        cr_assert_gt(f.failed, 0, "role %u: no refusal made the construction fail", role);
        cr_assert_str_empty(f.first_leak, "role %u: %s", role, f.first_leak);
        /* every allocation and spawn is needed: a refused one fails the construction */
        cr_assert_str_empty(f.first_built, "role %u: %s", role, f.first_built);
    }
    rig_free(&Rg);
}

/* The bootstrap service whose actor cannot be spawned fails, and gives back
 * its table. */
Test(p2p, a_bootstrap_that_cannot_spawn_releases_itself) {
    rig_init(&Rg, NULL);
    int64_t live = Rg.te.live;
    Rg.fail_spawn = Rg.spawns + 1;
    kv_bootstrap *b = NULL;
    cr_assert_neq(kv_bootstrap_new(&Rg.te.env, &Rg.rt, 0, &b), KV_OK);
    cr_assert_eq(Rg.te.live, live, "%lld allocations left", (long long)(Rg.te.live - live));
    Rg.fail_spawn = 0;
    cr_assert_eq(kv_bootstrap_new(&Rg.te.env, &Rg.rt, 0, &b), KV_OK, "with room for its actor it is built");
    kv_bootstrap_free(b);
    cr_assert_eq(Rg.te.live, live);
    rig_free(&Rg);
}

/* ---- the receiver alone --------------------------------------------------------- */

/* D's receiver of a stand-in rank (engine 0, rank 0 of 1, two full
 * groups) on a node with room for one region only, a recording worker main
 * and a recording bootstrap service. */
static kv_worker Wd;
static rig_sink DMain, Boot;
static kv_p2p_receiver *Rcv;
static uint32_t RcvActor;
static uint8_t Kv[2][8 * 64];

static void receiver_alone(uint32_t regions) {
    sim_net_cfg nc = {.nodes_max = RIG_NODES, .eps_max = 8, .regions_max = regions, .packets_max = 4096,
                      .ctrl_bytes_max = 8u << 20, .lat_min_ns = 10000, .lat_max_ns = 100000, .ns_per_kib = 100};
    rig_init(&Rg, &nc);
    rig_sink_spawn(&Rg, &DMain, "D0.w0.main", 0);
    rig_sink_spawn(&Rg, &Boot, "bootstrap", 0);
    kv_engine_cfg cfg = rig_engine_cfg(KV_ROLE_CONSUMER, 1);
    cfg.n_groups = 2;
    cfg.group[1] = (kv_group_cfg){.kind = KV_GROUP_FULL};
    cfg.bootstrap_actor = Boot.actor;
    Wd = (kv_worker){.env = &Rg.te.env, .rt = &Rg.rt, .cfg = cfg, .rank = 0, .node = 1, .main_actor = DMain.actor,
                     .t = sim_net_node(Rg.net, 1), .head_lo = 0, .head_hi = KV_HEADS, .block_bytes = 64,
                     .capacity = 8, .kv = {Kv[0], Kv[1]}};
    cr_assert_eq(kv_p2p_receiver_new(&Wd, &Rcv, &RcvActor), KV_OK);
}

/* Request d_req's pull from engine 0 (two blocks per group), flushed; P's
 * engine 0 (one rank) is then known to the bootstrap. */
static void pull_from_engine_0(uint32_t d_req) {
    static kv_p2p_pull p;
    memset(&p, 0, sizeof p);
    p = (kv_p2p_pull){.d_req = d_req, .transfer_id = {.hi = d_req, .lo = d_req}, .remote_engine = 0,
                      .blocks = {.n_groups = 2, .n = {2, 2}}};
    for (uint32_t g = 0; g < 2; g++) {
        p.blocks.id[g][0] = 1;
        p.blocks.id[g][1] = 2;
    }
    kv_rt_post(&Rg.rt, RcvActor, KV_M_P2P_RECV_START, &p, sizeof p);
    kv_rt_post(&Rg.rt, RcvActor, KV_M_P2P_RECV_FLUSH, NULL, 0);
    rig_run(&Rg, NULL, NULL);
    cr_assert_eq(rig_sink_count(&Boot, KV_M_BOOT_QUERY), 1, "the receiver asks where engine 0 is");
    kv_wire_boot rep = {.engine = 0, .tp_size = 1, .found = 1};
    snprintf(rep.addr[0].s, sizeof rep.addr[0].s, "sim:2/0");
    kv_rt_post(&Rg.rt, RcvActor, KV_M_BOOT_REPLY, &rep, sizeof rep);
    rig_run(&Rg, NULL, NULL);
}

/* A pull whose batch gets no region grant for every group (the transport
 * refuses the second registration) fails its request at once: reported to
 * the worker main as a failed load, the batch released, and the grant it
 * did get revoked (the node's one region is free again). */
Test(p2p, a_pull_without_room_for_its_grants_fails_at_once_and_gives_the_room_back) {
    receiver_alone(1);
    pull_from_engine_0(7);
    cr_assert_eq(Rg.te.n_violations, 0, "%s", Rg.te.n_violations ? Rg.te.v[0].detail : "");
    cr_assert_eq(rig_sink_count(&DMain, KV_M_P2P_RECV_DONE), 1, "the request is reported once");
    kv_m_recv_done d;
    memcpy(&d, DMain.payload[DMain.n - 1], offsetof(kv_m_recv_done, pull));
    cr_assert_eq(d.d_req, 7);
    cr_assert_eq(d.failed, 1, "its load failed");
    cr_assert_eq(kv_p2p_receiver_state(Rcv), 0, "the receiver holds nothing of it");
    kvt_region id;
    cr_assert_eq(kvt_reg(Wd.t, Kv[0], sizeof Kv[0], KVT_MEM_HOST, &id), KV_OK, "the first group's grant is revoked");
    kvt_dereg(Wd.t, id);
    kv_p2p_receiver_free(Rcv);
    rig_free(&Rg);
}
