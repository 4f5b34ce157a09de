/* tests/test_store.c — the store connector and the MultiConnector, transition
 * by transition (spec section D), through the public world API with the
 * simulated store and network. Each test names the transition. */
#include <criterion/criterion.h>
#include <string.h>

#include "core/msgs.h"
#include "core/store.h"
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

TestSuite(store, .init = setup, .fini = teardown, .timeout = 60);
TestSuite(multi, .init = setup, .fini = teardown, .timeout = 60);

static void run(void) { cr_assert_eq(sim_world_run(W, &C, NULL, &R), KV_OK); }

static void expect_clean(void) {
    cr_assert(!R.violated, "unexpected %s at event %llu: %s", kv_inv_name(R.inv), (unsigned long long)R.event,
              R.detail);
    cr_assert_eq(R.sim_error, KV_OK);
}

static void expect_violation(kv_inv inv, const char *what) {
    cr_assert(R.violated, "expected %s, run was clean", kv_inv_name(inv));
    cr_assert_eq(R.inv, inv, "expected %s, got %s: %s", kv_inv_name(inv), kv_inv_name(R.inv), R.detail);
    cr_assert(strstr(R.detail, what), "'%s' lacks '%s'", R.detail, what);
}

/* Request 0 puts a 96-token prefix into the store, request 1 (long, other
 * tokens) evicts it from the local prefix caches, request 2 shares it. */
static void shared_prefix(uint8_t conn_p, uint8_t conn_d) {
    C.conn_p = conn_p;
    C.conn_d = conn_d;
    C.pool_blocks_p = C.pool_blocks_d = 24;
    C.prefix_caching = true;
    C.n_reqs = 3;
    C.req[0] = (sim_req_plan){.at_ns = 1000000, .prompt_len = 96, .max_tokens = 4, .prefix_group = 1, .prefix_len = 96,
                              .sequential = 1};
    C.req[1] = (sim_req_plan){.at_ns = 40000000, .prompt_len = 300, .max_tokens = 4, .prefix_group = 2, .sequential = 1};
    C.req[2] = (sim_req_plan){.at_ns = 80000000, .prompt_len = 120, .max_tokens = 4, .prefix_group = 1,
                              .prefix_len = 96, .sequential = 1};
}

/* A recurrent group too. A P that feeds a decoder computes all but the
 * last prompt token of such a model (vLLM's N - 1 rule), so request 0 is
 * one token longer: P still saves 96 tokens, six whole blocks and the state
 * after them. */
static void hybrid(void) {
    C.n_groups = 2;
    C.group[1] = (kv_group_cfg){.kind = KV_GROUP_MAMBA};
    C.req[0].prompt_len = 97;
}

/* ---- store connector ---------------------------------------------------------- */

Test(store, lookup_then_async_load_of_the_shared_prefix_is_verified) {
    shared_prefix(KV_CONN_STORE, KV_CONN_STORE);
    run();
    expect_clean();
    cr_assert_eq(R.requests_ok, 3);
    cr_assert_geq(R.store_loads, 2, "P and D both load request 2's prefix (%llu loads)", (unsigned long long)R.store_loads);
    cr_assert_geq(R.store.get_hits, 2 * 6, "6 blocks each (%llu hits)", (unsigned long long)R.store.get_hits);
    cr_assert_gt(R.armed[KV_INV_DATA], 0, "every loaded block is checked against its tokens");
}

Test(store, a_request_shorter_than_a_block_never_asks_the_store) {
    C.conn_p = C.conn_d = KV_CONN_STORE;
    C.n_reqs = 1;
    C.req[0] = (sim_req_plan){.at_ns = 1000000, .prompt_len = 8, .max_tokens = 4};
    run();
    expect_clean();
    cr_assert_eq(R.requests_ok, 1);
    cr_assert(R.store.exists == 0 && R.store.puts == 0 && R.store_loads == 0, "no lookup, no save, no load");
}

Test(store, every_save_covers_every_kv_group) {
    shared_prefix(KV_CONN_STORE, KV_CONN_STORE);
    C.n_groups = 3;
    C.group[1] = (kv_group_cfg){.kind = KV_GROUP_SLIDING, .window = 32};
    C.group[2] = (kv_group_cfg){.kind = KV_GROUP_MAMBA};
    run();
    expect_clean();
    cr_assert_eq(R.requests_ok, 3);
    cr_assert_gt(R.armed[KV_INV_SAVE], 0, "INV-SAVE was armed %llu times", (unsigned long long)R.armed[KV_INV_SAVE]);
    cr_assert_gt(R.store_loads, 0, "hybrid hits need the window and the state at k-1 too");
}

Test(store, request_finished_holds_blocks_until_the_saves_are_done) {
    shared_prefix(KV_CONN_STORE, KV_CONN_STORE);
    run();
    expect_clean();
    /* every P request saved something, so each was held and released by
     * exactly one finished_sending; D (a consumer) never saves */
    cr_assert_eq(sim_world_engine(W, 0)->stats.finished_sending, 3);
    cr_assert_eq(sim_world_engine(W, 1)->stats.finished_sending, 0);
}

Test(store, put_failure_drops_the_save_and_releases_the_pin_once) {
    shared_prefix(KV_CONN_STORE, KV_CONN_STORE);
    C.n_faults = 1;
    C.fault[0] = (sim_fault){.at_ns = 0, .kind = SIM_F_STORE_PUT_FAIL, .arg = 7};
    run();
    expect_clean(); /* no pin leaks (INV-LEAK), none released twice (INV-SAVE) */
    cr_assert_gt(R.store.failures, 0);
    cr_assert_eq(R.requests_ok, 3);
}

Test(store, pool_pressure_turns_on_the_save_skip) {
    shared_prefix(KV_CONN_STORE, KV_CONN_STORE);
    run();
    uint64_t puts = R.store.puts;
    C.n_faults = 1;
    C.fault[0] = (sim_fault){.at_ns = 0, .kind = SIM_F_STORE_PRESSURE, .arg = 0};
    C.req[1].at_ns = C.req[0].at_ns + 1000; /* inside the skip window */
    run();
    expect_clean();
    cr_assert_lt(R.store.puts, puts, "saves skipped after NO_AVAILABLE_HANDLE (%llu vs %llu puts)",
                 (unsigned long long)R.store.puts, (unsigned long long)puts);
}

Test(store, failed_get_is_a_load_error_under_either_policy) {
    shared_prefix(KV_CONN_STORE, KV_CONN_STORE);
    C.n_faults = 1;
    C.fault[0] = (sim_fault){.at_ns = 60000000, .kind = SIM_F_STORE_GET_FAIL, .arg = 7};
    C.policy = KV_POLICY_FAIL;
    run();
    expect_clean();
    cr_assert_geq(R.requests_error, 1, "policy fail ends the request in error");
    C.policy = KV_POLICY_RECOMPUTE;
    run();
    expect_clean();
    cr_assert_eq(R.requests_ok, 3, "policy recompute computes it instead");
    cr_assert_gt(sim_world_engine(W, 0)->stats.recomputes + sim_world_engine(W, 1)->stats.recomputes, 0);
}

Test(store, evicted_keys_miss_and_are_not_loaded) {
    shared_prefix(KV_CONN_STORE, KV_CONN_STORE);
    run();
    uint64_t loads = R.store_loads;
    C.n_faults = 1;
    C.fault[0] = (sim_fault){.at_ns = 60000000, .kind = SIM_F_STORE_EVICT, .arg = 255};
    run();
    expect_clean();
    cr_assert_lt(R.store_loads, loads, "request 2's prefix is gone (%llu vs %llu loads)",
                 (unsigned long long)R.store_loads, (unsigned long long)loads);
    cr_assert_gt(R.store.evictions, 0);
}

/* The store's process dies 30 ms in (request 0's prefix saved) and an
 * empty one listens at the same address 5 ms later. Every engine's store
 * clients find their connection reset and must connect again: request 2
 * saves the prefix anew into the new process, request 4 (after request 3
 * pushed it out of the local caches) finds it there and loads it. Every
 * get hit is from after the restart (nothing hit before it). */
Test(store, a_crashed_store_comes_back_empty_and_is_used_again) {
    shared_prefix(KV_CONN_STORE, KV_CONN_STORE);
    C.n_reqs = 5;
    C.req[3] = C.req[1];
    C.req[3].at_ns = 120000000;
    C.req[4] = C.req[2];
    C.req[4].at_ns = 160000000;
    C.n_faults = 1;
    C.fault[0] = (sim_fault){.at_ns = 30000000, .kind = SIM_F_STORE_CRASH, .arg = 4};
    run();
    expect_clean();
    cr_assert_eq(R.requests_ok, 5);
    cr_assert_eq(R.store.crashes, 1);
    cr_assert_gt(R.store.crash_keys, 0, "request 0's keys were in the store when it died");
    cr_assert_gt(R.store.get_hits, 0, "no store op succeeded after the restart (%llu puts, %llu gets)",
                 (unsigned long long)R.store.puts, (unsigned long long)R.store.gets);
    cr_assert_geq(R.store_loads, 2, "P and D load request 4's prefix from the new process");
}

Test(store, a_tiny_store_evicts_and_stays_consistent) {
    shared_prefix(KV_CONN_STORE, KV_CONN_STORE);
    C.store_capacity = 16;
    run();
    expect_clean();
    cr_assert_gt(R.store.evictions, 0);
}

Test(store, preemption_resets_trackers_and_drops_counters) {
    C.conn_p = C.conn_d = KV_CONN_STORE;
    C.pool_blocks_p = C.pool_blocks_d = 24;
    C.prefix_caching = true;
    C.n_reqs = 12;
    for (uint32_t i = 0; i < C.n_reqs; i++)
        C.req[i] = (sim_req_plan){.at_ns = 1000000ull * (i + 1), .prompt_len = 100 + 9 * i, .max_tokens = 20,
                                  .prefix_group = i % 2, .prefix_len = 64};
    run();
    expect_clean();
    cr_assert_gt(sim_world_engine(W, 0)->stats.preemptions + sim_world_engine(W, 1)->stats.preemptions, 0);
}

/* Request tables of two. Request 0's 1000-token prompt takes two long
 * prefill steps on P; request 1 arrives during the first, asks the store at
 * its boundary and waits for the lookup while the second runs. Its abort
 * and request 2 arrive during that step, so the next schedule applies both:
 * request 1 ends (nothing saved: no hold) and request 2 takes its engine
 * slot, while the connector's table still holds request 1 until the step's
 * metadata frees it. So request 2's first schedule finds that table full
 * and gets no lookup; it must still get a slot and a tracker when its
 * metadata is built, and be saved (INV-CACHE: the store holds every block
 * of the prompt of each request that ended ok on P). */
Test(store, a_request_taken_in_while_the_table_is_full_is_still_saved) {
    C.conn_p = C.conn_d = KV_CONN_STORE;
    C.reqs_max = 2;
    C.n_reqs = 3;
    C.req[0] = (sim_req_plan){.at_ns = 1000000, .prompt_len = 1000, .max_tokens = 2};
    C.req[1] = (sim_req_plan){.at_ns = 2000000, .prompt_len = 64, .max_tokens = 2};
    C.req[2] = (sim_req_plan){.at_ns = 18300000, .prompt_len = 80, .max_tokens = 2};
    C.n_faults = 1;
    C.fault[0] = (sim_fault){.at_ns = 18000000, .kind = SIM_F_ABORT, .target = 1};
    run();
    expect_clean();
    cr_assert_eq(R.requests_aborted, 1);
    cr_assert_eq(R.requests_ok, 2);
    cr_assert_eq(R.turned_away, 0, "request 2 found no free slot: it never took request 1's");
    cr_assert_gt(R.armed[KV_INV_CACHE], 0, "the store's contents were judged");
}

/* ---- MultiConnector ------------------------------------------------------------ */

Test(multi, p2p_first_is_chosen_and_the_store_hit_is_a_rejected_load) {
    shared_prefix(KV_CONN_MULTI_P2P_STORE, KV_CONN_MULTI_P2P_STORE);
    hybrid();
    run();
    expect_clean();
    cr_assert_eq(R.requests_ok, 3);
    cr_assert_geq(R.rejected_loads, 1, "D's store child had a hit the p2p child won");
    cr_assert_gt(R.armed[KV_INV_DATA], 0, "P2P blocks and P's store loads are verified");
}

Test(multi, seed003_store_empty_block_table_saves_with_no_table) {
    shared_prefix(KV_CONN_MULTI_P2P_STORE, KV_CONN_MULTI_P2P_STORE);
    hybrid();
    C.bugs = KV_BUG_STORE_EMPTY_BLOCK_TABLE;
    run();
    expect_violation(KV_INV_SAVE, "IndexError");
}

Test(multi, seed003_store_rejected_load_save_saves_blocks_never_computed) {
    shared_prefix(KV_CONN_MULTI_P2P_STORE, KV_CONN_MULTI_P2P_STORE);
    hybrid();
    C.bugs = KV_BUG_STORE_REJECTED_LOAD_SAVE;
    run();
    expect_violation(KV_INV_SAVE, "never computed");
}

Test(multi, store_first_is_chosen_and_the_p2p_child_empty_pulls) {
    shared_prefix(KV_CONN_MULTI_STORE_P2P, KV_CONN_MULTI_STORE_P2P);
    run();
    expect_clean();
    cr_assert_eq(R.requests_ok, 3);
    /* D's request 2 loads from the store; the p2p child got USAA with 0
     * tokens, so its empty pull told P to free without a transfer */
    cr_assert_geq(R.store_loads, 2);
    cr_assert_geq(R.rejected_loads, 1, "the p2p child's remote prefill lost to the store");
}

Test(multi, finished_sending_once_when_both_children_hold_the_blocks) {
    shared_prefix(KV_CONN_MULTI_P2P_STORE, KV_CONN_MULTI_P2P_STORE);
    run();
    expect_clean(); /* a second finished_sending would be INV-STRAY */
    cr_assert_eq(sim_world_engine(W, 0)->stats.finished_sending, 3, "one per request, after the last child");
}

Test(multi, store_only_p_with_p2p_d_mixes_cleanly) {
    shared_prefix(KV_CONN_MULTI_P2P_STORE, KV_CONN_P2P);
    run();
    expect_clean();
    cr_assert_eq(R.requests_ok, 3);
}

static rig Rg;

/* ---- the send actor alone ------------------------------------------------------- */

/* A store send actor of a stand-in rank (engine 0, rank 0, all heads,
 * 64-byte blocks), the simulated store, and a recording worker main. */
static kv_worker Wk;
static rig_sink Main;
static kv_store_sender *Snd;
static uint32_t SndActor;

static void sender_alone(const sim_net_cfg *nc) {
    rig_init(&Rg, nc);
    rig_sink_spawn(&Rg, &Main, "P0.w0.main", 0);
    Wk = (kv_worker){.env = &Rg.te.env, .rt = &Rg.rt, .cfg = rig_engine_cfg(KV_ROLE_PRODUCER, 1), .rank = 0,
                     .node = 1, .main_actor = Main.actor, .t = sim_net_node(Rg.net, 1), .head_lo = 0,
                     .head_hi = KV_HEADS, .block_bytes = KV_STORE_SNAP_BYTES};
    rig_add_store(&Rg, 256, &Wk.cfg.store_addr);
    cr_assert_eq(kv_store_sender_new(&Wk, &Snd, &SndActor), KV_OK);
}

static void sender_gone(void) {
    kv_store_sender_free(Snd);
    rig_free(&Rg);
}

/* Request id's save of its first n blocks (positions 0..n-1, one job, the
 * save's last), run until everything is quiet; its SAVE_DONE. */
static kv_m_store_save_done save(uint32_t id, uint32_t n) {
    static kv_m_store_save j;
    memset(&j, 0, sizeof j);
    j = (kv_m_store_save){.id = id, .end_tokens = n * Wk.cfg.block_size, .last = 1, .n = n};
    for (uint32_t pos = 0; pos < n; pos++) {
        j.e[pos] = (kv_store_snap){.hash = kv_mix64(id * 1000u + pos), .pos = (uint8_t)pos};
        memset(j.e[pos].bytes, (int)(id + pos), sizeof j.e[pos].bytes);
    }
    uint32_t before = rig_sink_count(&Main, KV_M_STORE_SAVE_DONE);
    kv_rt_post(&Rg.rt, SndActor, KV_M_STORE_SAVE, &j, sizeof j);
    rig_run(&Rg, NULL, NULL);
    cr_assert_eq(Rg.te.n_violations, 0, "%s", Rg.te.n_violations ? Rg.te.v[0].detail : "");
    cr_assert_eq(rig_sink_count(&Main, KV_M_STORE_SAVE_DONE), before + 1, "request %u: a save job ends once", id);
    kv_m_store_save_done d;
    memcpy(&d, Main.payload[Main.n - 1], sizeof d);
    cr_assert_eq(Main.kind[Main.n - 1], KV_M_STORE_SAVE_DONE);
    return d;
}

/* X: the resume offset (vLLM's _saved_offset). A request's second save
 * repeats the blocks its first one put (a save goes from the tracker's
 * start, which a preemption resets): the sender asks the store only about
 * the blocks past what the request's earlier saves put. */
Test(store, a_second_save_asks_the_store_only_about_new_blocks) {
    sender_alone(NULL);
    kv_m_store_save_done d = save(9, 4);
    cr_assert_eq(d.status, 0);
    cr_assert_eq(d.saved_blocks, 4);
    const sim_store_stats *st = sim_store_get_stats(Rg.store);
    uint64_t asked = st->exist_keys;
    cr_assert_eq(asked, 4, "the first save asks about its blocks");
    d = save(9, 6);
    cr_assert_eq(d.status, 0);
    cr_assert_eq(d.saved_blocks, 2);
    cr_assert_eq(st->exist_keys - asked, 2, "the second save asked about %llu blocks, 2 of them new",
                 (unsigned long long)(st->exist_keys - asked));
    asked = st->exist_keys;
    d = save(9, 6);
    cr_assert_eq(d.status, 0);
    cr_assert_eq(st->exist_keys, asked, "a save of nothing new asks nothing");
    d = save(10, 3);
    cr_assert_eq(st->exist_keys - asked, 3, "another request has its own offset");
    sender_gone();
}

/* X: the EXIST reply names blocks to put, and the PUT cannot be sent (a
 * network with no room for it). The job ends failed at once, the save's
 * pin released, and the next job runs. */
Test(store, a_put_that_cannot_be_sent_ends_the_save) {
    sim_net_cfg nc = {.nodes_max = RIG_NODES, .eps_max = 8, .regions_max = KV_NODE_REGIONS_MAX, .packets_max = 64,
                      .ctrl_bytes_max = 512, .lat_min_ns = 10000, .lat_max_ns = 100000, .ns_per_kib = 100};
    sender_alone(&nc);
    const sim_store_stats *st = sim_store_get_stats(Rg.store);
    kv_m_store_save_done d = save(4, 8); /* 8 keys fit, 8 blocks of 64 bytes do not */
    cr_assert_eq(st->exists, 1, "its EXIST went through");
    cr_assert_eq(st->puts, 0);
    cr_assert_eq(d.status, KV_STORE_FAILED);
    cr_assert_eq(d.saved_blocks, 0);
    d = save(5, 1);
    cr_assert_eq(d.status, 0, "the sender goes on with the next job");
    cr_assert_eq(d.saved_blocks, 1);
    sender_gone();
}

/* ---- construction ---------------------------------------------------------------- */

/* A store engine (P and D) and both MultiConnector orders, built with each
 * allocation and each spawn of the construction refused in turn: a
 * constructor that fails gives back everything it took, also what its
 * children (the first MultiConnector child, the store actors) had built. */
static void failed_constructions_release_everything(kv_conn_kind kind) {
    rig_init(&Rg, NULL);
    for (uint8_t role = KV_ROLE_PRODUCER; role <= KV_ROLE_CONSUMER; role++) {
        kv_engine_cfg cfg = rig_engine_cfg(role, 2);
        rig_failures f = rig_engine_failures(&Rg, &cfg, kind);
        cr_assert(f.built, "role %u: the engine cannot be built at all", role);
        cr_assert_gt(f.failed, 0, "role %u: no refusal made the construction fail (%llu allocations, %llu spawns)",
                     role, (unsigned long long)f.allocs, (unsigned long long)f.spawns);
        cr_assert_str_empty(f.first_leak, "role %u: %s", role, f.first_leak);
        /* every allocation and spawn of a construction is needed: a refused one fails it */
        cr_assert_str_empty(f.first_built, "role %u: %s", role, f.first_built);
    }
    rig_free(&Rg);
}

Test(store, a_failed_construction_releases_everything) { failed_constructions_release_everything(KV_CONN_STORE); }

/* An engine whose connector uses the store needs the store's address: with
 * none it is refused (KV_EINVAL) and gives back everything it took; an
 * engine whose connector never asks the store is built without one. */
Test(store, an_engine_using_the_store_without_its_address_is_refused) {
    static const kv_conn_kind with_store[] = {KV_CONN_STORE, KV_CONN_MULTI_P2P_STORE, KV_CONN_MULTI_STORE_P2P};
    rig_init(&Rg, NULL);
    for (uint8_t role = KV_ROLE_PRODUCER; role <= KV_ROLE_CONSUMER; role++) {
        kv_engine_cfg cfg = rig_engine_cfg(role, 2);
        cfg.store_addr.s[0] = '\0';
        for (size_t k = 0; k < sizeof with_store / sizeof with_store[0]; k++) {
            int64_t live = Rg.te.live;
            kv_engine *e = NULL;
            kv_status st = rig_engine_new(&Rg, &cfg, with_store[k], &e);
            cr_expect_eq(st, KV_EINVAL, "role %u, %s: %s", role, kv_conn_kind_name(with_store[k]), kv_status_str(st));
            if (st == KV_OK) kv_engine_free(e);
            cr_expect_eq(Rg.te.live, live, "role %u, %s: %lld allocations left", role,
                         kv_conn_kind_name(with_store[k]), (long long)(Rg.te.live - live));
        }
        kv_engine *e = NULL;
        cr_assert_eq(rig_engine_new(&Rg, &cfg, KV_CONN_P2P, &e), KV_OK, "role %u: p2p needs no store", role);
        kv_engine_free(e);
    }
    cr_assert_eq(Rg.te.n_violations, 0, "%s", Rg.te.n_violations ? Rg.te.v[0].detail : "");
    rig_free(&Rg);
}

/* A recurrent group's state is read back from one whole word: an engine
 * with such a group, in any position, and heads narrower than 8 bytes is
 * refused; with 8-byte heads it is built. */
Test(store, an_engine_with_a_recurrent_group_and_heads_under_a_word_is_refused) {
    rig_init(&Rg, NULL);
    for (uint32_t at = 1; at < 3; at++) { /* the first group is full attention */
        kv_engine_cfg cfg = rig_engine_cfg(KV_ROLE_CONSUMER, 1);
        cfg.n_groups = 3;
        for (uint32_t g = 0; g < 3; g++) cfg.group[g] = (kv_group_cfg){.kind = g == at ? KV_GROUP_MAMBA : KV_GROUP_FULL};
        cfg.head_bytes = 4;
        kv_engine *e = NULL;
        kv_status st = rig_engine_new(&Rg, &cfg, KV_CONN_P2P, &e);
        cr_expect_eq(st, KV_EINVAL, "recurrent group %u, 4-byte heads: %s", at, kv_status_str(st));
        if (st == KV_OK) kv_engine_free(e);
        cfg.head_bytes = 8;
        cr_assert_eq(rig_engine_new(&Rg, &cfg, KV_CONN_P2P, &e), KV_OK, "recurrent group %u, 8-byte heads", at);
        kv_engine_free(e);
    }
    cr_assert_eq(Rg.te.n_violations, 0, "%s", Rg.te.n_violations ? Rg.te.v[0].detail : "");
    rig_free(&Rg);
}

Test(multi, a_failed_construction_releases_both_children) {
    failed_constructions_release_everything(KV_CONN_MULTI_P2P_STORE);
    failed_constructions_release_everything(KV_CONN_MULTI_STORE_P2P);
}
