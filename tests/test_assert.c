/* tests/test_assert.c — the core's own assertions (core/assert.h): for each
 * class (the invariant function of every state machine, a precondition, a
 * postcondition, our own wire message well formed) a deliberately broken
 * core trips it.
 *
 * How the core is broken, never by a bug switch in production code:
 *   - objects a test can build alone (block pool, request, bootstrap) are
 *     corrupted through their structs;
 *   - inside a simulated run, a block-memory provider (core/kvmem.h: the
 *     worker calls its fill for every block a forward pass computes) is
 *     the test's hook: at a chosen fill it corrupts an object of the
 *     running world, through its public struct or, for the opaque actors,
 *     through tests/assert_shims/ (the module compiled into this suite with
 *     its private struct in reach), or posts a message our own actors would
 *     never send.
 * In the simulator a failed assertion is KV_INV_ASSERT: recorded, the run
 * stopped after the event (no event runs after it), the detail naming
 * file:line, the object and its state. In a production env (posix_env) a
 * cheap assertion aborts, after a line that names it. Checked-tier tests
 * (whole-object walks) skip themselves where KVCONN_CHECKED is off.
 *
 * The same shims reach what no correct simulated run shows: the object
 * after a failed assertion (after_assert), a peer's forged control
 * messages, refused and answered, never asserted on (peer_input), a probe
 * of a MultiConnector (probe_sim), and the forward pass of a request id
 * that comes back with other tokens (worker_alone). */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "core/block_pool.h"
#include "core/bootstrap.h"
#include "core/multi.h"
#include "core/request.h"
#include "kvconn/wire.h"
#include "sim/sim_rt.h"
#include "sim/world.h"
#include "tests/assert_shims/shims.h"
#include "tests/support/test_env.h"
#include "transport/posix/posix_env.h"

#ifdef KVCONN_CHECKED
#define NEED_CHECKED() ((void)0)
#else
#define NEED_CHECKED() cr_skip_test("a checked-tier assertion: this build has no KVCONN_CHECKED")
#endif

/* ---- objects alone, in the test env (it records like the simulator) ---------- */

static test_env te;

static void expect_assert(const char *file, const char *what) {
    cr_assert_geq(te.n_violations, 1, "the broken object went unnoticed");
    cr_assert_eq(te.v[0].inv, KV_INV_ASSERT, "first violation %s: %s", kv_inv_name(te.v[0].inv), te.v[0].detail);
    cr_assert(strstr(te.v[0].detail, file) && strstr(te.v[0].detail, what), "detail '%s' lacks '%s' / '%s'",
              te.v[0].detail, file, what);
}

static kv_block_pool pool;

static void pool_setup(void) {
    test_env_init(&te);
    te.quiet = 1;
    cr_assert_eq(kv_pool_init(&pool, &te.env, KV_ACTOR_NONE, 3, 1, 33), KV_OK);
    cr_assert_eq(te.n_violations, 0);
}
static void pool_teardown(void) { kv_pool_deinit(&pool); }

TestSuite(assert_pool, .init = pool_setup, .fini = pool_teardown);

/* Invariant function, cheap tier (P5): a held block counted as pinned too
 * breaks conservation; the next transition reports it. */
Test(assert_pool, invariants_catch_a_block_counted_twice) {
    uint32_t ids[4];
    cr_assert_eq(kv_pool_alloc(&pool, 4, ids), KV_OK);
    pool.n_tag[KV_BT_PINNED]++;
    kv_pool_free(&pool, ids, 1);
    expect_assert("core/block_pool.c:", "engine 3 group 1: free");
    cr_expect(strstr(te.v[0].detail, "pinned 1"), "%s", te.v[0].detail);
}

/* Postcondition of one block (B1, B2): a held block that still has free-list
 * links is reported by the next operation on it, in every build (the walk
 * that would also see it runs only now and then, in checked builds). */
Test(assert_pool, one_block_check_catches_a_held_block_with_links) {
    uint32_t ids[2];
    cr_assert_eq(kv_pool_alloc(&pool, 2, ids), KV_OK);
    pool.meta[ids[0]].next = ids[1];
    cr_assert_eq(kv_pool_touch(&pool, ids[0]), KV_OK);
    expect_assert("core/block_pool.c:", "links 0/");
    cr_expect(strstr(te.v[0].detail, "ref_cnt 2 on_free 0"), "%s", te.v[0].detail);
}

/* Invariant function, checked tier (P7): a broken back link keeps every
 * counter right, so only the structural walk sees it; the pool runs the
 * walk itself every walk_period transitions. */
Test(assert_pool, structural_walk_catches_a_broken_free_list) {
    NEED_CHECKED();
    uint32_t id;
    cr_assert_eq(kv_pool_alloc(&pool, 1, &id), KV_OK);
    pool.meta[pool.meta[pool.head].next].prev = 0; /* the second free block forgets the first */
    for (uint32_t i = 0; i < 200 && te.n_violations == 0; i++) {
        kv_pool_tag(&pool, id, KV_BT_PINNED);
        kv_pool_tag(&pool, id, KV_BT_OWNED);
    }
    expect_assert("core/block_pool.c:", "pool structure");
    cr_expect(strstr(te.v[0].detail, "prev link"), "%s", te.v[0].detail);
    /* the checker's call of the same walk still reports INV-CONSERVE */
    te.n_violations = 0;
    cr_expect_not(kv_pool_check(&pool));
    cr_expect_eq(te.v[0].inv, KV_INV_CONSERVE);
}

/* Precondition: an allocation trusts n_free; a free list that ends early is
 * reported, and the allocation hands out the null block instead of
 * corrupting block 0. */
Test(assert_pool, allocation_from_a_list_shorter_than_n_free) {
    pool.head = 0;
    uint32_t id = 99;
    kv_pool_alloc(&pool, 1, &id);
    expect_assert("core/block_pool.c:", "free-list head 0");
    cr_expect_eq(id, KV_NULL_BLOCK);
    cr_expect_eq(pool.meta[0].ref_cnt, 0, "the null block stays untouched");
}

/* Postcondition (the request setter asserts R1-R4 after every edge): a
 * request that computed more tokens than it has is caught at its next
 * transition, even a legal one. */
Test(assert_request, setter_asserts_the_request_after_each_edge) {
    test_env_init(&te);
    te.quiet = 1;
    kv_req r = {.id = 7, .status = KV_RS_RUNNING, .prompt_len = 32, .max_tokens = 4, .num_output = 1};
    cr_assert(kv_req_set_status(&te.env, 2, &r, KV_RS_PREEMPTED));
    cr_assert(kv_req_set_status(&te.env, 2, &r, KV_RS_RUNNING));
    cr_assert_eq(te.n_violations, 0);
    r.num_computed = 40; /* 33 tokens exist */
    cr_expect_not(kv_req_set_status(&te.env, 2, &r, KV_RS_PREEMPTED));
    expect_assert("core/request.c:", "request 7 (PREEMPTED): num_computed 40");
    cr_expect_eq(r.status, KV_RS_PREEMPTED, "the edge itself is legal and taken");
    /* an illegal edge stays vLLM's scheduler assertion */
    te.n_violations = 0;
    cr_expect_not(kv_req_set_status(&te.env, 2, &r, KV_RS_WAITING)); /* a preempted request stays PREEMPTED */
    cr_expect_eq(te.v[0].inv, KV_INV_SCHED_ASSERT);
}

/* ---- the production env: a cheap assertion aborts, naming itself -------------- */

Test(assert_production, a_cheap_assertion_aborts, .signal = SIGABRT) {
    static kvp_env pe;
    kvp_env_cfg cfg = {.level = KV_LOG_ERROR, .tag = "test"};
    cr_assert_eq(kvp_env_init(&pe, &cfg), KV_OK);
    static kv_block_pool p;
    cr_assert_eq(kv_pool_init(&p, &pe.env, KV_ACTOR_NONE, 0, 0, 9), KV_OK);
    p.n_free_cached = p.n_free + 1; /* P3 */
    kv_pool_reset(&p);              /* fixed by the fill, so: */
    p.n_tag[KV_BT_OWNED] = 3;       /* P5 */
    uint32_t id;
    kv_pool_alloc(&p, 1, &id); /* aborts */
}

Test(assert_production, the_line_names_the_assertion) {
    static kvp_env pe;
    kvp_env_cfg cfg = {.level = KV_LOG_ERROR, .tag = "test", .keep_going = true};
    cr_assert_eq(kvp_env_init(&pe, &cfg), KV_OK);
    char path[] = "/tmp/kvconn-assert-XXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    int saved = dup(STDERR_FILENO);
    dup2(fd, STDERR_FILENO);
    kv_req r = {.id = 9, .status = KV_RS_RUNNING, .prompt_len = 8, .max_tokens = 1, .num_output = 2};
    kv_req_set_status(&pe.env, 4, &r, KV_RS_FINISHED_ABORTED);
    dup2(saved, STDERR_FILENO);
    close(saved);
    char line[512] = {0};
    cr_assert_geq(pread(fd, line, sizeof line - 1, 0), 1);
    close(fd);
    unlink(path);
    cr_expect_eq(kvp_env_violations(&pe), 1);
    cr_expect(strstr(line, "VIOLATION INV-ASSERT engine 4"), "%s", line);
    cr_expect(strstr(line, "core/request.c:") && strstr(line, "assert(r->num_output <= r->max_tokens) failed"), "%s", line);
    cr_expect(strstr(line, "request 9 (FINISHED_ABORTED): num_output 2 > max_tokens 1"), "%s", line);
}

/* ---- bootstrap, on the simulator's runtime ---------------------------------------- */

static void sink(void *self, const kv_msg *m) {
    (void)m;
    ++*(uint32_t *)self;
}

/* The bootstrap service alone on a simulated runtime whose messages take
 * lat_ns, with a client actor that counts its replies. */
static sim_choice boot_ch;
static sim_rt *boot_rt;
static kv_bootstrap *boot;
static uint32_t boot_client, boot_replies;

static void boot_alone(uint64_t lat_ns) {
    test_env_init(&te);
    sim_choice_init(&boot_ch, NULL, 0, 3);
    sim_rt_cfg rc = {.events_max = 64, .arena_bytes = 1 << 16, .lat_min_ns = lat_ns, .lat_max_ns = 2 * lat_ns};
    cr_assert_eq(sim_rt_new(&te.env, &rc, &boot_ch, &boot_rt), KV_OK);
    cr_assert_eq(kv_bootstrap_new(&te.env, sim_rt_iface(boot_rt), 0, &boot), KV_OK);
    boot_replies = 0;
    cr_assert_eq(kv_rt_spawn(sim_rt_iface(boot_rt), "client", 1, sink, &boot_replies, 4096, &boot_client), KV_OK);
    te.actor = boot->actor; /* the test env names the running actor: the bootstrap's own */
}

static void boot_free(void) {
    kv_bootstrap_free(boot);
    sim_rt_free(boot_rt);
}

/* Invariant function (B1-B2): an engine whose TP size is outside 1..4 is
 * caught at the service's next message, whoever sends it. */
Test(assert_bootstrap, invariants_catch_an_impossible_tp_size) {
    boot_alone(1000);
    te.quiet = 1; /* the assertion below is expected: keep its log out of the output */
    sim_rt *rt = boot_rt;
    kv_bootstrap *b = boot;
    uint32_t client = boot_client;
    b->tp[2] = 9;
    kv_m_boot_query q = {.engine = 2, .reply_to = client};
    kv_rt_post(sim_rt_iface(rt), b->actor, KV_M_BOOT_QUERY, &q, sizeof q);
    sim_rt_deliver_due(rt);
    cr_assert(sim_rt_run_one(rt));
    expect_assert("core/bootstrap.c:", "engine 2 with TP 9");
    boot_free();
}

/* Posts a message at `at` (the test env's clock, which the service reads)
 * and runs it and what it sends. */
static void boot_post_at(sim_rt *rt, uint32_t to, uint64_t at, uint32_t kind, const void *p, uint32_t len) {
    te.now_ns = at;
    kv_rt_post(sim_rt_iface(rt), to, kind, p, len);
    for (uint32_t i = 0; i < 16; i++) { /* the message, then its reply */
        sim_rt_deliver_due(rt);
        while (sim_rt_run_one(rt)) {}
        if (sim_rt_next_event(rt) == UINT64_MAX) break;
        sim_rt_set_now(rt, sim_rt_next_event(rt));
    }
}

/* A bootstrap_down fault of arg ms makes the service answer "not found"
 * from the moment it arrives until arg ms later, exclusive: a query at the
 * last nanosecond of the window misses, one at its end is answered. */
Test(assert_bootstrap, down_window_ends_at_its_last_nanosecond) {
    boot_alone(0);
    sim_rt *rt = boot_rt;
    kv_bootstrap *b = boot;
    kv_wire_boot reg = {.engine = 0, .tp_size = 1, .tp_rank = 0};
    snprintf(reg.addr[0].s, sizeof reg.addr[0].s, "sim:2/0");
    boot_post_at(rt, b->actor, 1000, KV_M_BOOT_REG, &reg, sizeof reg);
    kv_m_fault f = {.kind = KV_F_BOOT_DOWN, .arg = 3};
    boot_post_at(rt, b->actor, 5000000, KV_M_FAULT, &f, sizeof f); /* down until 8 ms */
    kv_m_boot_query q = {.engine = 0, .reply_to = boot_client};
    boot_post_at(rt, b->actor, 8000000 - 1, KV_M_BOOT_QUERY, &q, sizeof q);
    cr_assert(b->queries == 1 && b->misses == 1, "a query at 8 ms - 1 ns: %llu queries, %llu misses",
              (unsigned long long)b->queries, (unsigned long long)b->misses);
    boot_post_at(rt, b->actor, 8000000, KV_M_BOOT_QUERY, &q, sizeof q);
    cr_assert(b->queries == 2 && b->misses == 1, "a query at 8 ms is answered: %llu queries, %llu misses",
              (unsigned long long)b->queries, (unsigned long long)b->misses);
    cr_assert_eq(boot_replies, 2);
    cr_assert_eq(te.n_violations, 0);
    boot_free();
}

/* ---- inside simulated runs ------------------------------------------------------------ */

static sim_world *W;
static sim_world_cfg C;
static sim_result R, CLEAN;

/* One breakage per run: called at every fill (a forward pass computed
 * blocks), or with at_read at every read of a block's KV (a save's
 * snapshot, a verification), until it returns true. */
typedef bool (*breaker)(void);
static breaker brk;
static bool at_read;
static int broke;
static kv_kvmem_ops hook;

static void hook_fill(void *h, const kv_kvmem_fill *f, uint32_t n) {
    kv_kvmem_host.fill(h, f, n);
    if (brk && !at_read && !broke && brk()) broke = 1;
}

static const uint8_t *hook_read(void *h, uint32_t block, uint8_t *scratch) {
    if (brk && at_read && !broke && brk()) broke = 1;
    return kv_kvmem_host.read(h, block, scratch);
}

static void world_setup(void) {
    cr_assert_eq(sim_world_new(&W), KV_OK);
    sim_world_cfg_default(&C);
    hook = kv_kvmem_host;
    hook.fill = hook_fill;
    hook.read = hook_read;
    sim_world_set_kvmem(W, (kv_kvmem){.ops = &hook});
    brk = NULL;
    at_read = false;
}
static void world_teardown(void) { sim_world_free(W); }

TestSuite(assert_sim, .init = world_setup, .fini = world_teardown, .timeout = 60);

static kv_engine *eng(uint32_t i) { return (kv_engine *)sim_world_engine(W, i); }
static kv_worker *rank0(uint32_t i) { return eng(i)->worker[0]; }

/* The scenario runs clean as it is, and trips `what` in `file` when b
 * breaks it: KV_INV_ASSERT, and no event after the one that failed. */
static void run_broken(breaker b, const char *file, const char *what) {
    brk = NULL;
    cr_assert_eq(sim_world_run(W, &C, NULL, &CLEAN), KV_OK);
    cr_assert(!CLEAN.violated, "the scenario is not clean unbroken: %s %s", kv_inv_name(CLEAN.inv), CLEAN.detail);
    brk = b;
    broke = 0;
    cr_assert_eq(sim_world_run(W, &C, NULL, &R), KV_OK);
    cr_assert(broke, "the breaker never found its moment");
    cr_assert(R.violated, "a broken core ran clean");
    cr_assert_eq(R.inv, KV_INV_ASSERT, "expected INV-ASSERT, got %s: %s", kv_inv_name(R.inv), R.detail);
    cr_assert(strstr(R.detail, file) && strstr(R.detail, what), "detail '%s' lacks '%s' / '%s'", R.detail, file, what);
    cr_assert_eq(R.events, R.event + 1, "the run went on after the failed event (%llu of %llu)",
                 (unsigned long long)R.event, (unsigned long long)R.events);
    cr_assert_lt(R.events, CLEAN.events);
}

/* P/D over p2p: request 0 at 1 ms, request 1 at 50 ms. */
static void p2p_two(uint32_t max_tokens) {
    C.n_reqs = 2;
    C.req[0] = (sim_req_plan){.at_ns = 1000000, .prompt_len = 90, .max_tokens = max_tokens};
    C.req[1] = (sim_req_plan){.at_ns = 50000000, .prompt_len = 97, .max_tokens = max_tokens};
}

/* Runs W on C into R with a text trace; the trace, as one string the
 * caller frees. */
static char *run_traced(void) {
    char *trace = NULL;
    size_t trace_len = 0;
    FILE *f = open_memstream(&trace, &trace_len);
    cr_assert_not_null(f);
    cr_assert_eq(sim_world_run(W, &C, f, &R), KV_OK);
    fclose(f);
    return trace;
}

/* Lines of a trace that contain text (each log line says it once). */
static uint32_t lines_with(const char *trace, const char *text) {
    uint32_t n = 0;
    for (const char *p = trace; (p = strstr(p, text)); p++) n++;
    return n;
}

/* The sender's state, which INV-LEAK reads at the end (no connector entry
 * left), counts what P holds for D. Request 1 finishes on P while D's pool
 * is busy with request 0's decode: P keeps request 1's entry for the many
 * decode steps before D can pull it, and the count includes it (with no
 * pull in flight, nothing else would make it non-zero). */
static uint32_t fills_p_holding, fills_p_holding_counted;
static bool watch_p_state(void) {
    const kv_engine *p = eng(0);
    uint32_t held = 0;
    for (uint32_t i = 0; i < p->cfg.reqs_max; i++) held += p->req[i].used && p->req[i].phase == KV_PH_P_HELD;
    if (held) {
        fills_p_holding++;
        fills_p_holding_counted += kv_p2p_sender_state(shim_p2p_sender(rank0(0))) >= held;
    }
    return false;
}
Test(assert_sim, sender_state_counts_what_p_holds_for_d) {
    C.pool_blocks_d = 8;
    C.n_reqs = 2;
    C.req[0] = (sim_req_plan){.at_ns = 1000000, .prompt_len = 40, .max_tokens = 60};
    C.req[1] = (sim_req_plan){.at_ns = 2000000, .prompt_len = 90, .max_tokens = 2};
    brk = watch_p_state;
    fills_p_holding = fills_p_holding_counted = 0;
    cr_assert_eq(sim_world_run(W, &C, NULL, &R), KV_OK);
    cr_assert(!R.violated, "%s: %s", kv_inv_name(R.inv), R.detail);
    cr_assert_geq(fills_p_holding, 10, "the scenario no longer keeps P holding request 1 (%u fills)", fills_p_holding);
    cr_expect_geq(fills_p_holding_counted * 2, fills_p_holding,
                  "P held a request for D at %u fills, and its sender's state counted it at %u", fills_p_holding,
                  fills_p_holding_counted);
}

/* Request 0 saves a 96-token prefix, 1 evicts it locally, 2 loads it from
 * the store on P and on D (test_store.c's shared prefix). */
static void shared_prefix(uint8_t conn) {
    C.conn_p = C.conn_d = conn;
    C.pool_blocks_p = C.pool_blocks_d = 24;
    C.prefix_caching = true;
    C.n_reqs = 3;
    C.req[0] = (sim_req_plan){.at_ns = 1000000, .prompt_len = 96, .max_tokens = 8, .prefix_group = 1, .prefix_len = 96,
                              .sequential = 1};
    C.req[1] = (sim_req_plan){.at_ns = 40000000, .prompt_len = 300, .max_tokens = 8, .prefix_group = 2, .sequential = 1};
    C.req[2] = (sim_req_plan){.at_ns = 80000000, .prompt_len = 120, .max_tokens = 8, .prefix_group = 1,
                              .prefix_len = 96, .sequential = 1};
}

/* The store connector's state counts, which INV-LEAK reads at the end (no
 * connector entry left), count what they hold: the scheduler half a slot
 * per request it runs, the worker half a pin per save it holds. */
static uint32_t seen_running, seen_running_counted;
static bool watch_store_sched(void) {
    const kv_engine *p = eng(0);
    uint32_t running = 0;
    for (uint64_t m = p->live; m; m &= m - 1) running += p->req[__builtin_ctzll(m)].r.status == KV_RS_RUNNING;
    if (running) {
        seen_running++;
        seen_running_counted += kv_store_sched_state(&p->conn) >= running;
    }
    return false;
}
/* Runs the scenario clean with watcher w (at fills, or at reads), which
 * counts the moments something was held (*seen) and those at which the
 * state count it reads covered it (*counted): every one must. */
static void expect_counted(breaker w, bool reads, const uint32_t *seen, const uint32_t *counted, const char *what) {
    at_read = reads;
    brk = w;
    cr_assert_eq(sim_world_run(W, &C, NULL, &R), KV_OK);
    cr_assert(!R.violated, "%s: %s", kv_inv_name(R.inv), R.detail);
    cr_assert_geq(*seen, 1, "%s: the scenario never held any", what);
    cr_expect_eq(*counted, *seen, "%s held at %u moments, counted at %u", what, *seen, *counted);
}
Test(assert_sim, store_sched_state_counts_its_requests) {
    shared_prefix(KV_CONN_STORE);
    seen_running = seen_running_counted = 0;
    expect_counted(watch_store_sched, false, &seen_running, &seen_running_counted, "P's running requests");
}

static uint32_t seen_pinned, seen_pinned_counted;
static bool watch_store_pins(void) {
    uint32_t pins = shim_store_worker_pins(rank0(0));
    if (pins) {
        seen_pinned++;
        seen_pinned_counted += kv_store_worker_state(&rank0(0)->conn) >= pins;
    }
    return false;
}
Test(assert_sim, store_worker_state_counts_its_pins) {
    shared_prefix(KV_CONN_STORE);
    seen_pinned = seen_pinned_counted = 0;
    expect_counted(watch_store_pins, true, &seen_pinned, &seen_pinned_counted, "rank 0's store pins");
}

/* The pool's tags, which INV-CONSERVE sums and the pool report splits:
 * P's blocks held for D are pinned, D's blocks a pull writes are in
 * flight. Request 1 is held on P for many of D's decode steps (as above). */
static uint32_t max_pinned_p, max_inflight_d;
static bool watch_tags(void) {
    kv_pool_report r;
    kv_pool_report_get(&eng(0)->pool[0], &r);
    if (r.pinned > max_pinned_p) max_pinned_p = r.pinned;
    kv_pool_report_get(&eng(1)->pool[0], &r);
    if (r.inflight > max_inflight_d) max_inflight_d = r.inflight;
    return false;
}
Test(assert_sim, pool_report_splits_held_blocks_by_what_holds_them) {
    C.pool_blocks_d = 8;
    C.n_reqs = 2;
    C.req[0] = (sim_req_plan){.at_ns = 1000000, .prompt_len = 40, .max_tokens = 60};
    C.req[1] = (sim_req_plan){.at_ns = 2000000, .prompt_len = 90, .max_tokens = 2};
    max_pinned_p = max_inflight_d = 0;
    brk = watch_tags;
    cr_assert_eq(sim_world_run(W, &C, NULL, &R), KV_OK);
    cr_assert(!R.violated, "%s: %s", kv_inv_name(R.inv), R.detail);
    cr_expect_geq(max_pinned_p, 6, "P's held request 1 (90 tokens, 6 blocks) is pinned (at most %u)", max_pinned_p);
    cr_expect_gt(max_inflight_d, 0, "D's blocks for a pull in flight are tagged in flight");
}

/* The probe behind INV-OUTCOME's "P2P table full" cause, read after every
 * sender event: could a pull be refused now? A request-slot pool below its
 * cap is sized so that every pull its engine's requests can make fits
 * (preq_pool_size), so a fresh sender is not saturated whatever its size;
 * it is once every pull slot is taken, not while one is free. (Before, the
 * sender of an engine of one or two requests always read as saturated, and
 * the cause excused every live request of the run.) */
Test(assert_probe, sender_saturated_only_when_a_pull_could_be_refused) {
    for (uint32_t r = 1; r <= KV_ENGINE_REQS_MAX; r *= 2)
        cr_expect_not(shim_p2p_sender_saturated_as_built(r, 0), "reqs_max %u", r);
    cr_expect_not(shim_p2p_sender_saturated_as_built(2, 1u));
    cr_expect_not(shim_p2p_sender_saturated_as_built(2, 0x7fffffffu));
    cr_expect(shim_p2p_sender_saturated_as_built(2, 0xffffffffu));
}

/* -- engine scheduler -- */

/* Invariant function, cheap tier (E4): a step in flight with no result to
 * wait for. */
static bool lose_pending_results(void) {
    kv_engine *p = eng(0);
    if (!p->busy) return false;
    p->results_pending = 0;
    return true;
}
Test(assert_sim, engine_invariants_catch_a_step_with_no_result_pending) {
    p2p_two(4);
    run_broken(lose_pending_results, "core/engine.c:", "busy 1 results_pending 0");
    cr_expect_eq(R.engine, 0);
}

/* Invariant function, checked tier (W3): a decoding request whose phase
 * says it is held on P. */
static bool wrong_phase(void) {
    kv_engine *d = eng(1);
    for (uint64_t m = d->live; m; m &= m - 1) {
        kv_sreq *s = &d->req[__builtin_ctzll(m)];
        if (s->r.status != KV_RS_RUNNING || s->r.num_output + 2 >= s->r.max_tokens) continue;
        s->phase = KV_PH_P_HELD;
        return true;
    }
    return false;
}
Test(assert_sim, engine_walk_catches_a_phase_its_status_does_not_imply) {
    NEED_CHECKED();
    p2p_two(8);
    run_broken(wrong_phase, "core/engine.c:", "RUNNING, queued 1, delay_free 0, phase p_held");
}

/* Precondition: a STEP_RESULT (our own workers' message) from a rank the
 * engine does not have. */
static bool result_from_rank_7(void) {
    kv_engine *p = eng(0);
    if (!p->busy) return false;
    static kv_m_step_result res;
    static uint8_t buf[KV_STEP_RESULT_PACKED_MAX];
    memset(&res, 0, sizeof res);
    res.rank = 7;
    res.step_no = p->step.step_no;
    uint32_t len = kv_step_result_pack(&res, buf);
    kv_rt_post(p->rt, p->sched_actor, KV_M_STEP_RESULT, buf, len);
    return true;
}
Test(assert_sim, engine_precondition_refuses_a_result_from_a_rank_it_lacks) {
    p2p_two(4);
    run_broken(result_from_rank_7, "core/engine.c:", "result from rank 7 of 1");
}

/* Invariant, checked tier: a request's slot is never freed while a queue
 * names it (delete_req walks both queues). */
static bool delete_running(void) {
    kv_engine *d = eng(1);
    for (uint32_t i = 0; i < d->n_running; i++) {
        kv_sreq *s = &d->req[d->running[i]];
        if (s->r.status == KV_RS_RUNNING) return shim_engine_delete(d, s->r.id);
    }
    return false;
}
Test(assert_sim, engine_refuses_to_free_a_slot_still_queued) {
    NEED_CHECKED();
    p2p_two(8);
    run_broken(delete_running, "core/engine.c:", "while queued (running)");
}

/* update_from_output's invalid blocks (merge_bad_block): ranks list the
 * same block once; a block that no longer fits the step's list (256, the
 * ranks disagreeing) fails the request that holds it instead of being
 * dropped, which would count it as loaded. Watched on D at a fill, on a
 * request holding a block of group 0: a list of 256 blocks nobody holds
 * from one rank, then that request's block from another (the results
 * merged into a copy of the step's aggregate). */
static int merge_checked, merge_dedup_failed, merge_fit_failed, merge_over_failed;
static bool watch_merge(void) {
    kv_engine *d = eng(1);
    static kv_m_step_result res[2];
    for (uint64_t m = d->live; m; m &= m - 1) {
        const kv_sreq *s = &d->req[__builtin_ctzll(m)];
        if (!s->r.blocks.n[0] || s->r.blocks.id[0][0] == KV_NULL_BLOCK) continue;
        kv_bad_block mine = {.group = 0, .block = s->r.blocks.id[0][0]};
        memset(res, 0, sizeof res);
        res[0].rank = res[1].rank = 0; /* D has one rank: its results twice stand for two ranks' */
        res[1].out.invalid_blocks.n = 1;
        res[1].out.invalid_blocks.e[0] = mine;
        /* fits: listed, not failed; listed by both ranks: still not failed */
        merge_fit_failed += shim_engine_merge_fails(d, &res[1], 1, s->r.id);
        res[0].out.invalid_blocks.n = 1;
        res[0].out.invalid_blocks.e[0] = mine;
        merge_dedup_failed += shim_engine_merge_fails(d, res, 2, s->r.id);
        res[0].out.invalid_blocks.n = KV_BAD_BLOCKS_MAX;
        for (uint32_t i = 0; i < KV_BAD_BLOCKS_MAX; i++)
            res[0].out.invalid_blocks.e[i] = (kv_bad_block){.group = 0, .block = 1000000u + i};
        merge_over_failed += shim_engine_merge_fails(d, res, 2, s->r.id);
        merge_checked++;
        return true;
    }
    return false;
}
Test(assert_sim, a_bad_block_past_the_steps_list_fails_its_request) {
    p2p_two(8);
    brk = watch_merge;
    broke = 0;
    merge_checked = merge_dedup_failed = merge_fit_failed = merge_over_failed = 0;
    cr_assert_eq(sim_world_run(W, &C, NULL, &R), KV_OK);
    cr_assert(!R.violated, "%s: %s", kv_inv_name(R.inv), R.detail);
    cr_assert_eq(merge_checked, 1, "no fill on D with a request holding a block");
    cr_expect_eq(merge_fit_failed, 0, "a bad block that fits the list failed its request");
    cr_expect_eq(merge_dedup_failed, 0, "a bad block two ranks listed failed its request (listed twice?)");
    cr_expect_eq(merge_over_failed, 1, "a bad block past the list's %u did not fail its request", KV_BAD_BLOCKS_MAX);
}

/* -- p2p -- */

/* Invariant function, checked tier (S5): a request slot no pull holds. */
static bool leak_sender_slot(void) {
    shim_p2p_sender_leak_request_slot(shim_p2p_sender(rank0(0)));
    return true;
}
Test(assert_sim, p2p_sender_walk_catches_a_leaked_request_slot) {
    NEED_CHECKED();
    p2p_two(4);
    run_broken(leak_sender_slot, "core/p2p_sender.c:", "request slots used, pulls hold");
}

/* Precondition: a ready-wait timer (our own) for a pull slot that does not
 * exist. */
static bool bogus_sender_timer(void) {
    struct { uint32_t slot, gen; } t = {.slot = 99, .gen = 1}; /* kv_m_snd_timer */
    kv_rt_post(eng(0)->rt, kv_conn_worker_p2p_actor(&rank0(0)->conn), KV_M_P2P_SEND_TIMEOUT, &t, sizeof t);
    return true;
}
Test(assert_sim, p2p_sender_precondition_refuses_a_timer_it_never_armed) {
    p2p_two(4);
    run_broken(bogus_sender_timer, "core/p2p_sender.c:", "timer slot 99");
}

/* Invariant function, checked tier (R4): a request slot in use that is
 * neither staged nor in a batch. */
static bool orphan_receiver_request(void) {
    shim_p2p_receiver_orphan_request(shim_p2p_receiver(rank0(1)));
    return true;
}
Test(assert_sim, p2p_receiver_walk_catches_an_orphaned_request) {
    NEED_CHECKED();
    p2p_two(4);
    run_broken(orphan_receiver_request, "core/p2p_receiver.c:", "requests used,");
}

/* Invariant function (Q2): a full-attention group told to keep a window. */
static bool window_on_full_group(void) {
    shim_p2p_sched_window_on_full_group(eng(0));
    return true;
}
Test(assert_sim, p2p_sched_invariants_catch_a_window_on_a_full_group) {
    p2p_two(4);
    run_broken(window_on_full_group, "core/p2p_sched.c:", "group 0 (kind 0) keeps 3 blocks");
}

/* Invariant function (K1): P's worker half loses its sender's actor. */
static bool forget_sender_actor(void) {
    shim_p2p_worker_forget_sender_actor(rank0(0));
    return true;
}
Test(assert_sim, p2p_worker_invariants_catch_a_lost_sender) {
    p2p_two(4);
    run_broken(forget_sender_actor, "core/p2p_worker.c:", "p2p worker: sender 1 receiver 0 on a producer");
}

/* Our own wire message: the receiver's address loses its terminator, so
 * the next pull it encodes is out of the codec's bounds; the receiver
 * asserts the encode (and refuses to send), not P. */
static bool unterminated_receiver_addr(void) {
    shim_p2p_receiver_unterminated_addr(shim_p2p_receiver(rank0(1)));
    return true;
}
Test(assert_sim, our_own_pull_that_cannot_encode_is_an_assertion) {
    p2p_two(4);
    run_broken(unterminated_receiver_addr, "core/p2p_receiver.c:", "encode KV_EINVAL");
}

/* -- store -- */

/* Invariant function, checked tier (T4): the save tracker of a request D
 * still decodes says half a block was saved. */
static bool misaligned_tracker(void) {
    kv_engine *d = eng(1);
    for (uint64_t m = d->live; m; m &= m - 1) {
        const kv_sreq *s = &d->req[__builtin_ctzll(m)];
        if (s->r.status == KV_RS_RUNNING && s->r.num_output + 2 < s->r.max_tokens)
            return shim_store_sched_misalign_tracker(d, s->r.id);
    }
    return false;
}
Test(assert_sim, store_sched_walk_catches_a_save_off_the_block_grid) {
    NEED_CHECKED();
    shared_prefix(KV_CONN_STORE);
    run_broken(misaligned_tracker, "core/store_sched.c:", "tracker saved 8 of prefill");
}

/* Invariant function, checked tier (V2): a request pinned twice, made while
 * its save snapshots P's blocks (a read of their KV). */
static bool duplicate_pin(void) { return shim_store_worker_duplicate_pin(rank0(0)); }
Test(assert_sim, store_worker_walk_catches_a_request_pinned_twice) {
    NEED_CHECKED();
    shared_prefix(KV_CONN_STORE);
    at_read = true;
    run_broken(duplicate_pin, "core/store_worker.c:", "pinned twice");
}

/* Invariant functions (X2, Y2, L2): busy no longer says whether the store
 * channel has an operation in flight. */
static bool flip_sender_busy(void) {
    shim_store_sender_flip_busy(shim_store_sender(rank0(0)));
    return true;
}
static bool flip_receiver_busy(void) {
    shim_store_receiver_flip_busy(shim_store_receiver(rank0(0)));
    return true;
}
static bool flip_lookup_busy(void) {
    shim_store_lookup_flip_busy(shim_store_lookup(rank0(0)));
    return true;
}
Test(assert_sim, store_sender_invariants_catch_a_phantom_job) {
    shared_prefix(KV_CONN_STORE);
    run_broken(flip_sender_busy, "core/store_sender.c:", "store send: busy");
}
Test(assert_sim, store_receiver_invariants_catch_a_phantom_job) {
    shared_prefix(KV_CONN_STORE);
    run_broken(flip_receiver_busy, "core/store_receiver.c:", "store recv:");
}
Test(assert_sim, store_lookup_invariants_catch_a_phantom_lookup) {
    shared_prefix(KV_CONN_STORE);
    run_broken(flip_lookup_busy, "core/store_lookup.c:", "store lookup:");
}

/* -- MultiConnector -- */

/* Invariant function, checked tier (M3): D's choice of a child that had no
 * hit, while the request still decodes. */
static bool choice_without_hit(void) {
    kv_engine *d = eng(1);
    for (uint64_t m = d->live; m; m &= m - 1) {
        const kv_sreq *s = &d->req[__builtin_ctzll(m)];
        if (s->r.status == KV_RS_RUNNING && s->r.num_output + 2 < s->r.max_tokens)
            return shim_multi_sched_choice_without_hit(d);
    }
    return false;
}
Test(assert_sim, multi_sched_walk_catches_a_choice_without_a_hit) {
    NEED_CHECKED();
    shared_prefix(KV_CONN_MULTI_P2P_STORE);
    run_broken(choice_without_hit, "core/multi_sched.c:", "chosen 0, hits 0");
}

/* Invariant function, checked tier (N2): two holds for one request. */
static bool duplicate_hold(void) {
    shim_multi_worker_duplicate_hold(rank0(0));
    return true;
}
Test(assert_sim, multi_worker_walk_catches_a_request_held_twice) {
    NEED_CHECKED();
    shared_prefix(KV_CONN_MULTI_P2P_STORE);
    run_broken(duplicate_hold, "core/multi_worker.c:", "request 4242 held twice");
}

/* -- proxy, worker -- */

/* Invariant function (X1): more requests ended than were submitted. */
static bool proxy_overcount(void) {
    kv_proxy *px = (kv_proxy *)sim_world_proxy(W);
    px->ok = px->submitted + 1;
    return true;
}
Test(assert_sim, proxy_invariants_catch_more_ends_than_requests) {
    p2p_two(4);
    run_broken(proxy_overcount, "core/proxy.c:", "aborted of 1 submitted");
}

/* Invariant function (G1): a rank that holds no heads. */
static bool headless_rank(void) {
    kv_worker *w = rank0(0);
    w->head_lo = w->head_hi;
    return true;
}
Test(assert_sim, worker_invariants_catch_a_rank_without_heads) {
    p2p_two(4);
    run_broken(headless_rank, "core/worker.c:", "rank 0 of 1 worker: heads [4, 4)");
}

/* ---- our own wire messages ---------------------------------------------------------- */

static kv_wire_msg msg;
static uint8_t frame[KV_WIRE_MAX];

static size_t encode(void) {
    size_t len = 0;
    cr_assert_eq(kv_wire_encode(&msg, frame, sizeof frame, &len), KV_OK);
    return len;
}

/* The encode path's postcondition holds for what the encoder writes, of
 * every type, and fails for a frame that is not what was encoded. */
Test(assert_wire, encoded_ok_holds_for_the_encoder_and_fails_for_other_frames) {
    kv_wire_msg_reset(&msg, KV_WIRE_XFER_META);
    msg.u.meta = (kv_wire_xfer_meta){.d_engine = 1, .d_tp_size = 2, .d_tp_rank = 1, .batch = 7, .n_groups = 1,
                                     .block_bytes = 64, .n_reqs = 1};
    snprintf(msg.u.meta.d_addr.s, sizeof msg.u.meta.d_addr.s, "sim:3/1");
    msg.u.meta.req[0] = (kv_wire_req_blocks){.d_req = 5, .transfer_id = {.hi = 5, .lo = 5}, .blocks = {.n_groups = 1, .n = {2}}};
    msg.u.meta.req[0].blocks.id[0][0] = 3;
    msg.u.meta.req[0].blocks.id[0][1] = 4;
    size_t len = encode();
    cr_assert(kv_wire_encoded_ok(&msg, frame, len));
    frame[3] = KV_WIRE_XFER_RESP; /* C1: another type */
    cr_expect_not(kv_wire_encoded_ok(&msg, frame, len));
    frame[3] = KV_WIRE_XFER_META;
    cr_expect_not(kv_wire_encoded_ok(&msg, frame, len - 1)); /* C2: the length field says otherwise */
#ifdef KVCONN_CHECKED
    frame[len - 1] ^= 1; /* C3: the last block id differs from what was encoded */
    cr_expect_not(kv_wire_encoded_ok(&msg, frame, len));
    frame[len - 1] ^= 1;
    msg.u.meta.region[0].region ^= 1; /* C3: a region's id alone differs, its length the same */
    cr_expect_not(kv_wire_encoded_ok(&msg, frame, len));
    msg.u.meta.region[0].region ^= 1;
    msg.u.meta.region[0].len ^= 1; /* C3: a region's length alone differs */
    cr_expect_not(kv_wire_encoded_ok(&msg, frame, len));
    msg.u.meta.region[0].len ^= 1;
    msg.u.meta.req[0].blocks.n_groups = 2; /* C3: a block table's group count alone differs (group 1 empty) */
    cr_expect_not(kv_wire_encoded_ok(&msg, frame, len));
    msg.u.meta.req[0].blocks.n_groups = 1;
#endif
    cr_expect(kv_wire_encoded_ok(&msg, frame, len));

    kv_wire_msg_reset(&msg, KV_WIRE_XFER_RESP);
    msg.u.resp.batch = 7;
    msg.u.resp.n_ok = 1;
    msg.u.resp.ok[0] = 5;
    snprintf(msg.u.resp.err_msg, sizeof msg.u.resp.err_msg, "none");
    len = encode();
    cr_expect(kv_wire_encoded_ok(&msg, frame, len));
#ifdef KVCONN_CHECKED
    msg.u.resp.ok[0] = 6; /* the frame no longer carries the message */
    cr_expect_not(kv_wire_encoded_ok(&msg, frame, len));
#endif

    kv_wire_msg_reset(&msg, KV_WIRE_STORE_PUT);
    msg.u.store = (kv_wire_store){.seq = 3, .block_bytes = 4, .n = 1};
    msg.u.store.key[0] = (kv_store_key){.hash = 0x1234, .heads = 4};
    memcpy(msg.u.store.data, "abcd", 4);
    len = encode();
    cr_expect(kv_wire_encoded_ok(&msg, frame, len));
#ifdef KVCONN_CHECKED
    frame[len - 2] = 'X'; /* a byte of the block */
    cr_expect_not(kv_wire_encoded_ok(&msg, frame, len));
#endif

    kv_wire_msg_reset(&msg, KV_WIRE_STORE_PUT_REPLY); /* a reply's status is what it carries */
    msg.u.store = (kv_wire_store){.seq = 3, .status = 0};
    len = encode();
    cr_expect(kv_wire_encoded_ok(&msg, frame, len));
#ifdef KVCONN_CHECKED
    msg.u.store.status = 1;
    cr_expect_not(kv_wire_encoded_ok(&msg, frame, len));
#endif

    kv_wire_msg_reset(&msg, KV_WIRE_STORE_EXIST_REPLY); /* a reply's flags are what it carries */
    msg.u.store = (kv_wire_store){.seq = 3, .n = 2};
    msg.u.store.flag[0] = 1;
    len = encode();
    cr_expect(kv_wire_encoded_ok(&msg, frame, len));
#ifdef KVCONN_CHECKED
    msg.u.store.flag[0] = 0; /* the frame says 1 */
    cr_expect_not(kv_wire_encoded_ok(&msg, frame, len));
#endif

    kv_wire_msg_reset(&msg, KV_WIRE_STORE_EXIST); /* a request's keys are what it carries */
    msg.u.store = (kv_wire_store){.seq = 4, .n = 1};
    msg.u.store.key[0] = (kv_store_key){.hash = 0x99, .heads = 2};
    len = encode();
    cr_expect(kv_wire_encoded_ok(&msg, frame, len));
#ifdef KVCONN_CHECKED
    msg.u.store.key[0].hash = 0x98;
    cr_expect_not(kv_wire_encoded_ok(&msg, frame, len));
#endif

    kv_wire_msg_reset(&msg, KV_WIRE_BOOT_REG);
    msg.u.boot = (kv_wire_boot){.engine = 2, .tp_size = 1};
    snprintf(msg.u.boot.addr[0].s, sizeof msg.u.boot.addr[0].s, "sim:1/0");
    len = encode();
    cr_expect(kv_wire_encoded_ok(&msg, frame, len));
}

/* ---- peer input: refused and answered, never asserted on ------------------------------ */

/* P's sender validates what arrives on its control channel (core/assert.h:
 * a peer's bytes are refused, never asserted on) and answers a pull it
 * cannot serve with an ERROR response that says why, holding nothing for
 * it: no pull slot, no request slot, no entry. A simulated D sends only
 * well-formed pulls to the ranks it pairs with, so the test forges them, as
 * a corrupted or hostile peer would: from D's own pull (the last one P's
 * rank 0 decoded) with one thing changed. The sender hears each in the
 * middle of a run, from no peer (the test reads the response from the
 * sender's encoder), and the run goes on clean. P and D have two ranks:
 * P's rank 0 pairs with D's rank 0 only. */
TestSuite(peer_input, .init = world_setup, .fini = world_teardown, .timeout = 60);

static kv_wire_xfer_meta pull;     /* D's own pull, as P's rank 0 decoded it */
static kv_wire_msg forged;
static uint8_t forged_frame[KV_WIRE_MAX];
typedef uint32_t (*forger)(void);  /* writes forged_frame from pull; returns its length */
static forger forge;
static bool all_pull_slots_taken;  /* the sender hears it with every pull slot in use */
static uint32_t share_slots;       /* or with this many pull slots held by the forged pull's peer */
static bool answered;
static kv_wire_xfer_resp reply;
static uint32_t held_before, held_after, slots_before, slots_after;

static uint32_t encode_forged(void) {
    size_t len = 0;
    cr_assert_eq(kv_wire_encode(&forged, forged_frame, sizeof forged_frame, &len), KV_OK);
    return (uint32_t)len;
}

static void forge_pull(void) {
    kv_wire_msg_reset(&forged, KV_WIRE_XFER_META);
    forged.u.meta = pull;
}

static bool hear_forged(void) {
    kv_p2p_sender *s = shim_p2p_sender(rank0(0));
    if (!shim_p2p_sender_last_pull(s, &pull)) return false;
    uint32_t len = forge();
    uint32_t taken = all_pull_slots_taken ? shim_p2p_sender_take_pull_slots(s)
                     : share_slots     ? shim_p2p_sender_take_pull_slots_of(s, KVT_NONE, share_slots)
                                       : 0;
    held_before = kv_p2p_sender_state(s);
    slots_before = shim_p2p_sender_request_slots_used(s);
    answered = shim_p2p_sender_hear(s, KVT_NONE, forged_frame, len, &reply);
    held_after = kv_p2p_sender_state(s);
    slots_after = shim_p2p_sender_request_slots_used(s);
    shim_p2p_sender_give_back_pull_slots(s, taken);
    return true;
}

/* The forged message is answered with an ERROR saying `why`, for the
 * pull's batch when it names one, and P holds nothing more for it. */
static void expect_refused(forger f, const char *why, bool names_batch) {
    C.tp_p = C.tp_d = 2;
    p2p_two(4);
    forge = f;
    brk = hear_forged;
    broke = 0;
    cr_assert_eq(sim_world_run(W, &C, NULL, &R), KV_OK);
    cr_assert(broke, "P's rank 0 never decoded a pull");
    cr_assert(!R.violated, "%s: %s", kv_inv_name(R.inv), R.detail);
    cr_assert(answered, "no response (expected '%s')", why);
    cr_expect_eq(reply.status, KV_XFER_ERROR);
    cr_expect_str_eq(reply.err_msg, why);
    cr_expect_eq(reply.p_tp_rank, 0);
    if (names_batch) cr_expect_eq(reply.batch, pull.batch);
    cr_expect_eq(reply.n_ok + reply.n_err, 0, "an ERROR for a pull P never took names no request");
    cr_expect_eq(held_after, held_before, "P holds %u entries and pulls after it, %u before", held_after, held_before);
    cr_expect_eq(slots_after, slots_before, "P holds %u request slots after it, %u before", slots_after, slots_before);
    cr_expect_eq(R.requests_ok, 2, "D's own pulls are served as before");
}

/* A D rank whose heads P's rank 0 does not hold: its block size is that
 * rank's, so only the pairing is wrong. */
static uint32_t unpaired_d_rank(void) {
    forge_pull();
    const kv_engine *p = eng(0);
    kv_wire_xfer_meta *m = &forged.u.meta;
    for (uint32_t r = 0; r < m->d_tp_size; r++) {
        uint32_t ranks[KV_TP_MAX], lo, hi;
        uint32_t n = kv_p2p_paired_ranks(m->d_tp_size, r, p->cfg.tp, ranks);
        bool pairs = false;
        for (uint32_t i = 0; i < n; i++) pairs = pairs || ranks[i] == 0;
        if (pairs) continue;
        m->d_tp_rank = r;
        kv_heads_of(m->d_tp_size, r, &lo, &hi);
        m->block_bytes = (hi - lo) * p->cfg.head_bytes;
        return encode_forged();
    }
    cr_assert_fail("every D rank of %u pairs with P's rank 0", m->d_tp_size);
    return 0;
}
Test(peer_input, a_pull_from_a_d_rank_that_does_not_pair_with_this_rank_is_refused) {
    expect_refused(unpaired_d_rank, "unpaired TP rank", true);
}

/* A well-formed control message that is not a pull: a response. */
static uint32_t a_response(void) {
    kv_wire_msg_reset(&forged, KV_WIRE_XFER_RESP);
    forged.u.resp.batch = pull.batch;
    forged.u.resp.n_ok = 1;
    forged.u.resp.ok[0] = pull.req[0].d_req;
    return encode_forged();
}
Test(peer_input, a_control_message_that_is_not_a_pull_is_refused) {
    expect_refused(a_response, "malformed pull request", false);
}

/* D's pull, its last byte cut off: it does not decode. */
static uint32_t a_pull_cut_short(void) {
    forge_pull();
    return encode_forged() - 1;
}
Test(peer_input, a_pull_that_does_not_decode_is_refused) {
    expect_refused(a_pull_cut_short, "malformed pull request", false);
}

/* D's pull naming an endpoint of D's node that is not open (D's receiver
 * gone): P cannot connect to it, and gives back the request slots it took
 * for the pull. */
static uint32_t a_gone_d(void) {
    forge_pull();
    uint32_t node, ep;
    cr_assert_eq(sscanf(pull.d_addr.s, "sim:%u/%u", &node, &ep), 2, "address '%s'", pull.d_addr.s);
    snprintf(forged.u.meta.d_addr.s, sizeof forged.u.meta.d_addr.s, "sim:%u/%u", node, ep + 100);
    return encode_forged();
}
Test(peer_input, a_pull_whose_d_cannot_be_reached_is_refused_and_its_request_slots_freed) {
    expect_refused(a_gone_d, "cannot reach D", true);
}

/* D's own pull, unchanged, heard while every pull slot is in use. */
static uint32_t d_pull_again(void) {
    forge_pull();
    return encode_forged();
}
Test(peer_input, a_pull_with_every_pull_slot_in_use_is_refused_as_busy) {
    all_pull_slots_taken = true;
    expect_refused(d_pull_again, "sender busy", true);
}

/* D's own pull, heard while its peer holds half of the pull slots, with a
 * share of 50%: refused as busy, P holds nothing more for it. */
static uint32_t d_pull_over_its_share(void) {
    kv_p2p_sender *s = shim_p2p_sender(rank0(0));
    shim_p2p_sender_set_share(s, 50);
    forge_pull();
    return encode_forged();
}
Test(peer_input, a_pull_from_a_d_peer_holding_its_share_of_the_pull_slots_is_refused_as_busy) {
    share_slots = 16; /* the forged pull's peer holds 16 of 32 */
    expect_refused(d_pull_over_its_share, "sender busy (this D's share)", true);
}

/* 1,100 pulls from a D peer over its share, heard at once: each is refused
 * as busy, and the warning is rate-limited: the first 16 refusals are
 * logged, then every 1,024th, each line with the count so far. */
#define OVER_SHARE_PULLS 1100u
static uint32_t over_share_refused;
static bool hear_over_share_many(void) {
    kv_p2p_sender *s = shim_p2p_sender(rank0(0));
    if (!shim_p2p_sender_last_pull(s, &pull)) return false;
    uint32_t pct = rank0(0)->cfg.peer_share_pct;
    shim_p2p_sender_set_share(s, 50);
    forge_pull();
    uint32_t len = encode_forged();
    uint32_t taken = shim_p2p_sender_take_pull_slots_of(s, KVT_NONE, 16);
    for (uint32_t i = 0; i < OVER_SHARE_PULLS; i++) {
        kv_wire_xfer_resp r;
        if (shim_p2p_sender_hear(s, KVT_NONE, forged_frame, len, &r) && r.status == KV_XFER_ERROR &&
            !strcmp(r.err_msg, "sender busy (this D's share)"))
            over_share_refused++;
    }
    shim_p2p_sender_give_back_pull_slots(s, taken);
    shim_p2p_sender_set_share(s, pct);
    return true;
}
Test(peer_input, refusals_over_a_share_are_logged_the_first_16_then_every_1024th) {
    C.tp_p = C.tp_d = 2;
    p2p_two(4);
    brk = hear_over_share_many;
    char *trace = run_traced();
    uint32_t lines = lines_with(trace, "that peer holds its share");
    bool has_1024th = strstr(trace, "(1024 refused)") != NULL, has_17th = strstr(trace, "(17 refused)") != NULL;
    free(trace);
    cr_assert(!R.violated, "%s: %s", kv_inv_name(R.inv), R.detail);
    cr_assert_eq(over_share_refused, OVER_SHARE_PULLS, "%u of %u refused as busy", over_share_refused, OVER_SHARE_PULLS);
    cr_expect_eq(lines, 17u, "%u lines logged for %u refusals", lines, OVER_SHARE_PULLS);
    cr_expect(has_1024th && !has_17th, "the 1,024th logged: %d, the 17th: %d", (int)has_1024th, (int)has_17th);
    cr_expect_eq(R.requests_ok, 2, "D's own pulls are served as before");
}

Test(peer_input, the_share_counts_one_peers_pull_and_request_slots_and_never_less_than_one_pull) {
    /* an engine of 64 requests: 32 pull slots, 64 request slots (SND_PREQS_MAX) */
    cr_assert(!shim_p2p_sender_over_share_as_built(64, 0, 31, 4, 0, 4), "0: no cap");
    cr_assert(!shim_p2p_sender_over_share_as_built(64, 100, 31, 4, 0, 4), "100: no cap");
    cr_assert(!shim_p2p_sender_over_share_as_built(64, 50, 15, 1, 0, 1), "15 + 1 pulls of 16 allowed");
    cr_assert(shim_p2p_sender_over_share_as_built(64, 50, 16, 1, 0, 1), "a 17th pull is over half");
    cr_assert(!shim_p2p_sender_over_share_as_built(64, 50, 1, 1, 16, 1), "other peers' pulls do not count");
    cr_assert(!shim_p2p_sender_over_share_as_built(64, 50, 1, 16, 0, 16), "16 + 16 of 64 request slots: at the share");
    cr_assert(shim_p2p_sender_over_share_as_built(64, 50, 1, 16, 0, 17), "16 + 17 request slots: over");
    /* a share smaller than one pull still lets one whole pull through */
    cr_assert(!shim_p2p_sender_over_share_as_built(64, 1, 0, 0, 0, KV_PULL_REQS_MAX), "the first pull always fits");
    cr_assert(shim_p2p_sender_over_share_as_built(64, 1, 1, 1, 0, 1), "one percent of 32 pull slots: one at a time");
}

/* D's own pull, unchanged, from no peer: the link it came over is not the
 * one of the address it names, where P would write. */
Test(peer_input, a_pull_over_another_link_than_its_d_addrs_is_refused) {
    expect_refused(d_pull_again, "pull not sent from its d_addr", true);
}

/* A pull from D's own link, naming another D engine and a batch of its
 * own, of request 1's transfer id, heard at the first fill at which P's
 * request 1 is in phase forge_phase. Its request must fail, nothing be
 * written for it, and D's real pull of request 1 be served (the entry
 * stays for the engine it is bound to). */
#define FORGED_BATCH_OFFSET 1000u
static uint32_t forge_phase;
static bool forged_heard, forged_answered;
static kv_wire_xfer_resp forged_reply;
static uint64_t foreign_refused;
static bool hear_foreign_engine(void) {
    kv_p2p_sender *s = shim_p2p_sender(rank0(0));
    if (forged_heard) {
        foreign_refused = shim_p2p_sender_foreign_refused(s);
        return false;
    }
    const kv_sreq *q = kv_engine_find(eng(0), 1);
    if (!q || !q->used || q->phase != forge_phase || !shim_p2p_sender_last_pull(s, &pull)) return false;
    forge_pull();
    kv_wire_xfer_meta *m = &forged.u.meta;
    m->d_engine = pull.d_engine + 1;
    m->batch = pull.batch + FORGED_BATCH_OFFSET;
    m->n_reqs = 1;
    m->req[0].d_req = 1;
    m->req[0].transfer_id = q->r.params.transfer_id;
    uint32_t len = encode_forged();
    forged_heard = true;
    forged_answered = shim_p2p_sender_hear(s, shim_p2p_sender_link_to(s, &m->d_addr), forged_frame, len,
                                           &forged_reply) &&
                      forged_reply.batch == m->batch;
    foreign_refused = shim_p2p_sender_foreign_refused(s);
    return false;
}
static void run_foreign_engine(uint32_t phase) {
    forge_phase = phase;
    brk = hear_foreign_engine;
    char *trace = run_traced();
    uint32_t lines = lines_with(trace, "which is bound to D"); /* logged: the first 16, then every 1,024th */
    free(trace);
    cr_assert(forged_heard, "P's request 1 was never in phase %s after a pull of D's", kv_phase_name(phase));
    cr_assert(!R.violated, "%s: %s", kv_inv_name(R.inv), R.detail);
    cr_expect_eq(foreign_refused, 1, "%llu requests refused", (unsigned long long)foreign_refused);
    cr_expect_eq(lines, 1u, "%u log lines for one refused foreign pull", lines);
    cr_expect_eq(R.requests_ok, 2, "D's own pulls are served as before");
}

/* Heard while P holds request 1 for D (D's pool is busy with request 0's
 * long decode, so D has not pulled it yet): the entry is ready and bound,
 * and the forged pull is answered at once. */
Test(peer_input, a_pull_naming_another_d_engine_than_its_transfer_ids_gets_nothing) {
    C.pool_blocks_d = 8;
    C.n_reqs = 2;
    C.req[0] = (sim_req_plan){.at_ns = 1000000, .prompt_len = 40, .max_tokens = 60};
    C.req[1] = (sim_req_plan){.at_ns = 2000000, .prompt_len = 90, .max_tokens = 2};
    run_foreign_engine(KV_PH_P_HELD);
    cr_assert(forged_answered, "the forged pull was not answered at once");
    cr_expect_eq(forged_reply.status, KV_XFER_FINISH);
    cr_expect_eq(forged_reply.n_ok, 0, "P served a pull from another engine");
    cr_expect(forged_reply.n_err == 1 && forged_reply.err[0] == 1, "%u errors, the first %u", forged_reply.n_err,
              forged_reply.err[0]);
    cr_expect_str_eq(forged_reply.err_msg, "transfer id bound to another D engine");
}

/* Heard while P computes request 1: the entry is a placeholder, bound to
 * no engine yet; the forged request waits, and fails when P records the
 * request bound to the D engine the proxy named. */
Test(peer_input, a_pull_naming_another_d_engine_before_p_records_the_request_fails_at_the_record) {
    C.tp_p = C.tp_d = 2;
    p2p_two(4);
    run_foreign_engine(KV_PH_P_PREFILL);
}

/* A failed transfer round: P's response names the transfer engine's code
 * (kvt_completion.provider_err), not the transport's status. One request,
 * recompute policy: D computes the prompt itself after the failure, and
 * P's sender answers nothing else, so its last response is that one at
 * each of D's fills. */
static char failed_round_text[KV_ERR_MSG_MAX];
static bool watch_failed_round(void) {
    kv_wire_xfer_resp last;
    if (shim_p2p_sender_last_response(shim_p2p_sender(rank0(0)), &last) && last.err_msg[0])
        snprintf(failed_round_text, sizeof failed_round_text, "%s", last.err_msg);
    return false;
}
Test(peer_input, a_failed_transfer_round_names_the_transfer_engine_code) {
    C.policy = KV_POLICY_RECOMPUTE;
    C.n_reqs = 1;
    C.req[0] = (sim_req_plan){.at_ns = 1000000, .prompt_len = 90, .max_tokens = 4};
    C.n_faults = 1;
    C.fault[0] = (sim_fault){.at_ns = 500000, .kind = SIM_F_TE_ERROR, .target = 0};
    brk = watch_failed_round;
    cr_assert_eq(sim_world_run(W, &C, NULL, &R), KV_OK);
    cr_assert(!R.violated, "%s: %s", kv_inv_name(R.inv), R.detail);
    cr_assert_eq(R.requests_ok, 1);
    char want[KV_ERR_MSG_MAX];
    snprintf(want, sizeof want, "Mooncake transfer engine returned %d", sim_te_error_code(0));
    cr_expect_str_eq(failed_round_text, want);
}

/* ---- after a failed assertion: the object as it was -------------------------------- */

/* The simulator records a failed assertion and stops the run after the
 * event, so the handler runs on (core/assert.h): a precondition returns at
 * once, leaving its object as it was, and an invariant function returns
 * false at its first failure, before a later check reads what it found
 * broken. These tests look at the object after the failure. */
TestSuite(after_assert, .init = world_setup, .fini = world_teardown, .timeout = 60);

/* D's connector offers more tokens than the request has (a broken
 * connector, from the moment it is swapped in): admit_new refuses the
 * request, which stays WAITING with no blocks, and the connector never
 * hears of an allocation for it. */
static kv_conn_sched_ops lying_ops;
static const kv_conn_sched_ops *honest_ops;
static uint32_t lied_about = KV_REQ_NONE, allocs_told;
static kv_status offer_too_much(void *c, const kv_req *r, uint32_t num_computed, kv_match *out) {
    kv_status st = honest_ops->get_num_new_matched_tokens(c, r, num_computed, out);
    if (st == KV_OK && out->ready) {
        out->ext = kv_req_num_tokens(r) - num_computed + 1;
        if (lied_about == KV_REQ_NONE) lied_about = r->id;
    }
    return st;
}
static void count_alloc(void *c, kv_req *r, const kv_block_table *blocks, uint32_t ext) {
    allocs_told += r->id == lied_about;
    honest_ops->update_state_after_alloc(c, r, blocks, ext);
}
static bool connector_offers_too_much(void) {
    kv_engine *d = eng(1);
    honest_ops = d->conn.ops;
    lying_ops = *honest_ops;
    lying_ops.get_num_new_matched_tokens = offer_too_much;
    lying_ops.update_state_after_alloc = count_alloc;
    d->conn.ops = &lying_ops;
    return true;
}
Test(after_assert, a_connector_offering_more_than_the_request_has_admits_nothing) {
    p2p_two(4);
    run_broken(connector_offers_too_much, "core/engine.c:", "external");
    const kv_engine *d = eng(1);
    const kv_sreq *s = NULL;
    for (uint32_t i = 0; i < d->cfg.reqs_max; i++)
        if (d->req[i].used && d->req[i].r.id == lied_about) s = &d->req[i];
    cr_assert_not_null(s, "D has no request %u", lied_about);
    cr_expect_eq(s->r.status, KV_RS_WAITING, "request %u is %s", lied_about,
                 kv_req_status_name((kv_req_status)s->r.status));
    cr_expect_not(kv_blocks_any(&s->r.blocks), "request %u holds blocks", lied_about);
    cr_expect_eq(allocs_told, 0, "the connector heard of %u allocations for it", allocs_told);
}

/* The receiver's pull encodes, and the frame does not read back as the
 * pull (a codec bug): the receiver refuses to send it and fails the pull,
 * so no batch waits for a response P never gets. */
static bool codec_starts_lying(void) {
    shim_p2p_receiver_codec_lies(true);
    return true;
}
Test(after_assert, a_pull_whose_frame_fails_its_check_is_not_sent_and_holds_no_batch) {
    p2p_two(4);
    run_broken(codec_starts_lying, "core/p2p_receiver.c:", "encode KV_OK");
    cr_expect_eq(shim_p2p_receiver_batches(shim_p2p_receiver(rank0(1))), 0);
}

/* The clip check (Q3) of a pull whose table has other groups than the
 * engine: the walk stops there, and reads no entry after it. Two such
 * pulls, one assertion. */
Test(after_assert, p2p_sched_walk_stops_at_a_table_of_other_groups) {
    NEED_CHECKED();
    test_env_init(&te);
    static kv_engine e;
    static kv_p2p_pull recv[2];
    e.env = &te.env;
    e.cfg.index = 3;
    e.cfg.n_groups = 1;
    e.cfg.group[0].kind = KV_GROUP_FULL;
    for (uint32_t i = 0; i < 2; i++) recv[i] = (kv_p2p_pull){.d_req = 10 + i, .blocks = {.n_groups = 2}};
    kv_p2p_meta m = {.n_recv = 2, .recv = recv};
    cr_expect_not(shim_p2p_sched_walk(&e, &m));
    expect_assert("core/p2p_sched.c:", "request 10: clipped table of 2 groups");
    cr_expect_eq(te.n_violations, 1, "the walk went on past the first broken pull");
}

/* ---- probes and paths no simulated run reaches ----------------------------------------- */

/* INV-OUTCOME's "P2P table full" probe on a MultiConnector reads its P2P
 * child: saturated exactly when the child's sender is (every pull slot in
 * use, for the moment of the check). */
TestSuite(probe_sim, .init = world_setup, .fini = world_teardown, .timeout = 60);

static const kv_conn_worker *p2p_child(const kv_conn_worker *c) {
    for (uint32_t i = 0; i < KV_MULTI_CHILDREN; i++) {
        const kv_conn_worker *k = kv_multi_worker_child(c, i);
        if (k && k->ops && !strcmp(k->ops->name, "p2p")) return k;
    }
    return NULL;
}
static bool multi_saturated_before, multi_saturated_when_full, multi_saturated_after;
static bool fill_p2p_child(void) {
    kv_worker *w = rank0(0);
    const kv_conn_worker *child = p2p_child(&w->conn);
    cr_assert_not_null(child, "P's MultiConnector has no P2P child");
    kv_p2p_sender *s = shim_p2p_sender_of(child);
    multi_saturated_before = kv_conn_worker_p2p_saturated(&w->conn);
    uint32_t taken = shim_p2p_sender_take_pull_slots(s);
    multi_saturated_when_full = kv_conn_worker_p2p_saturated(&w->conn);
    shim_p2p_sender_give_back_pull_slots(s, taken);
    multi_saturated_after = kv_conn_worker_p2p_saturated(&w->conn);
    return true;
}
Test(probe_sim, a_multi_connector_is_saturated_when_its_p2p_sender_is) {
    shared_prefix(KV_CONN_MULTI_P2P_STORE);
    brk = fill_p2p_child;
    broke = 0;
    cr_assert_eq(sim_world_run(W, &C, NULL, &R), KV_OK);
    cr_assert(broke);
    cr_assert(!R.violated, "%s: %s", kv_inv_name(R.inv), R.detail);
    cr_expect_not(multi_saturated_before);
    cr_expect(multi_saturated_when_full);
    cr_expect_not(multi_saturated_after);
}

/* The forward pass continues the digest of a request's last block from
 * its previous step (the worker's tail slot) only for the same request: a
 * request id that comes back with other tokens (a proxy that reuses ids,
 * as kvnode's does) digests its block from the block's start, whichever
 * of its tokens' fields differs. Alone, in the test env. */
static kv_kvmem_fill filled[4];
static uint32_t n_filled;
static void capture_fill(void *h, const kv_kvmem_fill *f, uint32_t n) {
    (void)h;
    for (uint32_t i = 0; i < n && n_filled < 4; i++) filled[n_filled++] = f[i];
}
static const kv_kvmem_ops capture = {.size = sizeof(kv_kvmem_ops), .name = "capture", .fill = capture_fill};

/* One step of request 7 on a worker of one full group, 16-token blocks:
 * tokens [from, to) into blocks ids[]; the digest filled into the last. */
static uint64_t step_of_7(kv_worker *w, kv_tokens t, uint32_t from, uint32_t to, const uint32_t *ids, uint32_t n) {
    static kv_step_req q;
    q = (kv_step_req){.id = 7, .computed_before = from, .num_scheduled = to - from, .num_tokens = to, .tokens = t,
                      .blocks = {.n_groups = 1, .n = {n}}};
    memcpy(q.blocks.id[0], ids, n * sizeof ids[0]);
    kv_step st = {.step_no = 1, .n_reqs = 1, .req = &q};
    n_filled = 0;
    shim_worker_forward(w, &st);
    cr_assert_geq(n_filled, 1);
    return filled[n_filled - 1].digest;
}
Test(worker_alone, a_request_id_that_comes_back_with_other_tokens_digests_its_block_from_the_start) {
    test_env_init(&te);
    static kv_worker w;
    const kv_tokens first = {.token_seed = 99, .prefix_group = 1, .prefix_len = 10};
    kv_tokens again[3] = {first, first, first};
    again[0].token_seed++;
    again[1].prefix_group++;
    again[2].prefix_len += 8; /* a longer shared prefix: tokens 16, 17 are the prefix's now */
    static const uint32_t ids[] = {1, 2}, hit_ids[] = {3, 4};
    for (uint32_t k = 0; k < 3; k++) {
        memset(&w, 0, sizeof w);
        w.env = &te.env;
        w.cfg = (kv_engine_cfg){.tp = 1, .n_groups = 1, .block_size = 16, .pool_blocks = 7};
        w.capacity = 8;
        w.mem = &capture;
        step_of_7(&w, first, 0, 20, ids, 2); /* blocks 0 and 1, block 1 holding tokens 16..19 */
        /* id 7 again: block 0 a local prefix hit, block 1 computed, tokens 16..20 */
        uint64_t got = step_of_7(&w, again[k], 16, 21, hit_ids, 2);
        kv_digest_memo dm;
        kv_digest_memo_init(&dm, &again[k], 16, 21);
        cr_expect_eq(got, kv_block_digest_m(&dm, 1), "field %u differs: a digest continued from the other tokens", k);
    }
    cr_expect_eq(te.n_violations, 0, "%s", te.n_violations ? te.v[0].detail : "");
}
