/* tests/test_sim_net.c — sim/sim_net: the simulated network and the "sim"
 * transport. Writes land and copy bytes; every accepted batch completes
 * exactly once (ok, range error, timeout, reset, crash, injected fault);
 * rejected submits complete never; remote bounds checks never touch memory
 * outside a region; ctrl FIFO per pair under random latencies; the reply path
 * through a ctrl's peer id; PEER_DOWN on reset; crash/restart; deadlines;
 * determinism of the choice stream; reset to a clean state. Time advances by
 * setting te.now_ns. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "sim/sim_net.h"
#include "transport/regions.h"
#include "tests/support/test_env.h"

#define EV_MAX 4096u
#define CTRL_CAP (1u << 20)

static test_env te;
static sim_choice ch;
static sim_net *net;

static kvt_event ev[EV_MAX];
static uint32_t ev_off[EV_MAX];
static uint8_t ev_buf[CTRL_CAP];

/* Everything progressed so far, with each ctrl's bytes kept. */
typedef struct rec {
    kvt_event e;
    uint64_t at;
    uint8_t bytes[16];
} rec;
static rec log_[EV_MAX];
static uint32_t n_log;

static void setup_net(uint32_t nodes, uint64_t lat_min, uint64_t lat_max, uint64_t seed,
                      const uint8_t *bytes, size_t len) {
    test_env_init(&te);
    te.now_ns = 1000;
    sim_choice_init(&ch, bytes, len, seed);
    sim_net_cfg c = {.nodes_max = nodes, .eps_max = 4, .regions_max = 4, .packets_max = 256,
                     .ctrl_bytes_max = 1u << 16, .lat_min_ns = lat_min, .lat_max_ns = lat_max,
                     .ns_per_kib = 0};
    net = NULL;
    cr_assert_eq(sim_net_new(&te.env, &c, &ch, &net), KV_OK);
    cr_assert_not_null(net);
    n_log = 0;
}

static void teardown_net(void) {
    sim_net_free(net);
    net = NULL;
}

static kvt *T(uint32_t n) { return sim_net_node(net, n); }

/* Progress everything due now into log_; returns the number of new events. */
static uint32_t pump(void) {
    uint32_t before = n_log;
    kv_status st = KV_EAGAIN;
    for (int guard = 0; guard < 1000 && st == KV_EAGAIN; guard++) {
        uint32_t n = 0;
        st = sim_net_progress(net, ev, ev_off, EV_MAX, ev_buf, CTRL_CAP, &n);
        cr_assert(st == KV_OK || st == KV_EAGAIN, "progress: %s", kv_status_str(st));
        for (uint32_t i = 0; i < n; i++) {
            cr_assert_lt(n_log, EV_MAX);
            rec *r = &log_[n_log++];
            memset(r, 0, sizeof *r);
            r->e = ev[i];
            r->at = te.now_ns;
            if (ev[i].kind == KVT_EV_CTRL) memcpy(r->bytes, ev_buf + ev_off[i], ev[i].len < 16 ? ev[i].len : 16);
        }
    }
    cr_assert_eq(st, KV_OK);
    return n_log - before;
}

/* Advance the clock event by event up to `until` (inclusive), pumping each step. */
static void run_until(uint64_t until) {
    for (int guard = 0; guard < 100000; guard++) {
        uint64_t due = sim_net_next_due(net);
        if (due == UINT64_MAX || due > until) break;
        if (due > te.now_ns) te.now_ns = due;
        pump();
    }
    if (te.now_ns < until) te.now_ns = until;
    pump();
}

/* Run until nothing is pending; the clock stays at the last event. With
 * nothing submitted meanwhile, next_due never goes backwards (heap order). */
static void run_all(void) {
    uint64_t prev = 0;
    for (int guard = 0; guard < 100000 && sim_net_next_due(net) != UINT64_MAX; guard++) {
        uint64_t due = sim_net_next_due(net);
        cr_assert_geq(due, prev, "next_due went backwards: %llu after %llu", (unsigned long long)due,
                      (unsigned long long)prev);
        prev = due;
        if (due > te.now_ns) te.now_ns = due;
        pump();
    }
    cr_assert_eq(sim_net_next_due(net), UINT64_MAX);
}

static uint32_t count_done(uint64_t tag) {
    uint32_t c = 0;
    for (uint32_t i = 0; i < n_log; i++) c += log_[i].e.kind == KVT_EV_DONE && log_[i].e.done.tag == tag;
    return c;
}

static const kvt_event *find_done(uint64_t tag) {
    for (uint32_t i = 0; i < n_log; i++)
        if (log_[i].e.kind == KVT_EV_DONE && log_[i].e.done.tag == tag) return &log_[i].e;
    return NULL;
}

static uint32_t count_kind(uint32_t kind) {
    uint32_t c = 0;
    for (uint32_t i = 0; i < n_log; i++) c += log_[i].e.kind == kind;
    return c;
}

typedef struct link {
    uint32_t node[2];
    kvt_ep ep[2];
    kvt_addr addr[2];
    kvt_peer peer; /* ep[0] -> ep[1] */
} link;

/* Open one ep on node a (owner 100+a) and one on b (owner 200+b); connect a->b. */
static link make_link(uint32_t a, uint32_t b) {
    link l = {.node = {a, b}};
    cr_assert_eq(kvt_ep_open(T(a), 100 + a, &l.ep[0], &l.addr[0]), KV_OK);
    cr_assert_eq(kvt_ep_open(T(b), 200 + b, &l.ep[1], &l.addr[1]), KV_OK);
    cr_assert_eq(kvt_connect(T(a), l.ep[0], &l.addr[1], &l.peer), KV_OK);
    return l;
}

/* A region on the far side of a link is never writable as such: the far
 * node grants [off, off + len) of r to the link's writer (its peer id for
 * ep[0], made by connecting back), and the writer names the grant's id and
 * presents its key (transport.h, "write capabilities"). */
static kvt_desc grant_on(uint32_t node, kvt_ep ep, const kvt_addr *writer, kvt_region r, uint64_t off,
                         uint64_t len, uint32_t *out_id) {
    kvt_peer p;
    cr_assert_eq(kvt_connect(T(node), ep, writer, &p), KV_OK);
    kvt_desc d;
    uint32_t id;
    cr_assert_eq(kvt_grant(T(node), r, ep, p, off, len, &id, &d), KV_OK);
    cr_assert_eq(d.region, id);
    cr_assert_eq(d.len, off + len);
    cr_assert(d.key.w[0] | d.key.w[1], "a grant's key is never zero");
    if (out_id) *out_id = id;
    return d;
}

/* All of r (len bytes, on the link's far node) granted to the link's writer. */
static kvt_desc grant_link(const link *l, kvt_region r, uint64_t len) {
    return grant_on(l->node[1], l->ep[1], &l->addr[0], r, 0, len, NULL);
}

/* A WRITE through grant g (its id and key). */
static kvt_write W(kvt_region lr, uint64_t lo, const kvt_desc *g, uint64_t ro, uint32_t len) {
    return (kvt_write){.local = lr, .local_off = lo, .remote = g->region, .remote_off = ro, .len = len,
                       .key = g->key};
}

/* ---- basics ---- */

Test(sim_net, ops_table_and_addresses, .fini = teardown_net) {
    setup_net(3, 10, 10, 1, NULL, 0);
    kvt *t = T(2);
    cr_assert_not_null(t);
    cr_expect_null(sim_net_node(net, 3));
    cr_expect_eq(t, T(2), "kvt must be stable");
    cr_expect_eq(t->ops->size, sizeof(kvt_ops));
    cr_expect_str_eq(t->ops->name, "sim");
    kvt_ep e0, e1;
    kvt_addr a0, a1;
    cr_assert_eq(kvt_ep_open(t, 7, &e0, &a0), KV_OK);
    cr_assert_eq(kvt_ep_open(t, 7, &e1, &a1), KV_OK);
    cr_expect_neq(e0, e1);
    char want[KV_ADDR_MAX];
    snprintf(want, sizeof want, "sim:2/%u", e1);
    cr_expect_str_eq(a1.s, want);
    uint32_t n = 99;
    cr_expect_eq(kvt_poll(t, ev, EV_MAX, &n), KV_OK);
    cr_expect_eq(n, 0);
}

Test(sim_net, regions_unique_and_desc, .fini = teardown_net) {
    setup_net(2, 10, 10, 1, NULL, 0);
    static uint8_t a[64], b[32];
    kvt_region r1, r2, r3;
    cr_assert_eq(kvt_reg(T(0), a, sizeof a, KVT_MEM_HOST, &r1), KV_OK);
    cr_assert_eq(kvt_reg(T(0), b, sizeof b, KVT_MEM_CUDA, &r2), KV_OK);
    cr_expect_eq(r1, 1);
    cr_expect_neq(r1, r2);
    kvt_desc d;
    cr_assert_eq(kvt_export_desc(T(0), r2, &d), KV_OK);
    cr_expect_eq(d.region, r2);
    cr_expect_eq(d.len, sizeof b);
    cr_expect_eq(kvt_export_desc(T(1), r2, &d), KV_ENOENT, "regions are per node");
    cr_expect_eq(kvt_reg(T(0), NULL, 8, KVT_MEM_HOST, &r3), KV_EINVAL);
    cr_expect_eq(kvt_reg(T(0), a, 0, KVT_MEM_HOST, &r3), KV_EINVAL);
    cr_assert_eq(kvt_dereg(T(0), r1), KV_OK);
    cr_expect_eq(kvt_dereg(T(0), r1), KV_ENOENT);
    cr_expect_eq(kvt_export_desc(T(0), r1, &d), KV_ENOENT);
    cr_assert_eq(kvt_reg(T(0), a, sizeof a, KVT_MEM_HOST, &r3), KV_OK);
    cr_expect(r3 != r1 && r3 != r2, "ids are never reused: %u", r3);
    cr_assert_eq(kvt_reg(T(0), a, 1, KVT_MEM_HOST, &r1), KV_OK);
    cr_assert_eq(kvt_reg(T(0), a, 1, KVT_MEM_HOST, &r1), KV_OK);
    cr_expect_eq(kvt_reg(T(0), a, 1, KVT_MEM_HOST, &r1), KV_ENOMEM, "regions_max is 4");
}

Test(sim_net, connect_parses_addresses, .fini = teardown_net) {
    setup_net(3, 10, 10, 1, NULL, 0);
    link l = make_link(0, 1);
    kvt_peer p;
    cr_assert_eq(kvt_connect(T(0), l.ep[0], &l.addr[1], &p), KV_OK);
    cr_expect_eq(p, l.peer, "same address -> same peer id");
    const char *bad[] = {"", "sim:", "sim:1", "sim:1/", "tcp:1/0", "sim:01/0", "sim:1/00", "sim:1/0x",
                         "sim:-1/0", "sim:1/ 0", "sim: 1/0", "sim:99999999999/0", "SIM:1/0", "sim:1/0/0"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        kvt_addr a;
        memset(&a, 0, sizeof a);
        snprintf(a.s, sizeof a.s, "%s", bad[i]);
        cr_expect_eq(kvt_connect(T(0), l.ep[0], &a, &p), KV_EINVAL, "'%s'", bad[i]);
    }
    kvt_addr unterminated;
    memset(unterminated.s, '7', sizeof unterminated.s);
    memcpy(unterminated.s, "sim:1/", 6);
    cr_expect_eq(kvt_connect(T(0), l.ep[0], &unterminated, &p), KV_EINVAL);
    kvt_addr a;
    snprintf(a.s, sizeof a.s, "sim:3/0");
    cr_expect_eq(kvt_connect(T(0), l.ep[0], &a, &p), KV_ENOENT, "unknown node");
    snprintf(a.s, sizeof a.s, "sim:1/3");
    cr_expect_eq(kvt_connect(T(0), l.ep[0], &a, &p), KV_ENOENT, "unknown ep");
    cr_expect_eq(kvt_connect(T(0), 3, &l.addr[1], &p), KV_ENOENT, "local ep not open");
    kvt_ep e2;
    kvt_addr a2;
    cr_assert_eq(kvt_ep_open(T(2), 9, &e2, &a2), KV_OK);
    cr_assert_eq(kvt_connect(T(0), l.ep[0], &a2, &p), KV_OK);
    cr_expect_neq(p, l.peer);
}

Test(sim_net, write_delivered_and_bytes_copied, .fini = teardown_net) {
    setup_net(2, 500, 500, 1, NULL, 0);
    link l = make_link(0, 1);
    static uint8_t src[256], dst[256];
    for (int i = 0; i < 256; i++) src[i] = (uint8_t)(i * 7 + 1);
    kvt_region rs, rd;
    cr_assert_eq(kvt_reg(T(0), src, sizeof src, KVT_MEM_HOST, &rs), KV_OK);
    cr_assert_eq(kvt_reg(T(1), dst, sizeof dst, KVT_MEM_HOST, &rd), KV_OK);
    kvt_desc gd = grant_link(&l, rd, sizeof dst);
    kvt_write w[2] = {W(rs, 0, &gd, 100, 50), W(rs, 200, &gd, 0, 56)};
    cr_assert_eq(kvt_submit(T(0), l.ep[0], l.peer, w, 2, 42, 0), KV_OK);
    cr_expect_eq(sim_net_next_due(net), 1500);
    cr_expect_eq(pump(), 0, "nothing due yet");
    te.now_ns = 1499;
    cr_expect_eq(pump(), 0);
    static uint8_t zero[256];
    cr_expect_eq(memcmp(dst, zero, sizeof dst), 0, "not applied before delivery");
    te.now_ns = 1500;
    cr_assert_eq(pump(), 1);
    const kvt_event *e = &log_[0].e;
    cr_expect_eq(e->kind, KVT_EV_DONE);
    cr_expect_eq(e->ep, l.ep[0]);
    cr_expect_eq(e->owner, 100);
    cr_expect_eq(e->peer, l.peer);
    cr_expect_eq(e->done.tag, 42);
    cr_expect_eq(e->done.status, KV_OK);
    cr_expect_eq(e->done.n_ok, 2);
    cr_expect_eq(e->done.n_failed, 0);
    cr_expect_eq(e->done.provider_err, 0);
    cr_expect_eq(memcmp(dst + 100, src, 50), 0);
    cr_expect_eq(memcmp(dst, src + 200, 56), 0);
    cr_expect_eq(memcmp(dst + 56, zero, 44), 0);
    cr_expect_eq(memcmp(dst + 150, zero, 106), 0);
    sim_net_stats s;
    sim_net_stats_get(net, &s);
    cr_expect_eq(s.batches, 1);
    cr_expect_eq(s.writes, 2);
    cr_expect_eq(s.bytes, 106);
    cr_expect_eq(s.range_errors, 0);
    cr_expect_eq(s.grant_refused + s.grant_violations, 0);
    cr_expect_not(sim_net_grant_violation_get(net, NULL));
    cr_expect_eq(sim_net_next_due(net), UINT64_MAX);
}

Test(sim_net, bandwidth_term_adds_latency, .fini = teardown_net) {
    test_env_init(&te);
    te.now_ns = 0;
    sim_choice_init(&ch, NULL, 0, 1);
    sim_net_cfg c = {.nodes_max = 2, .eps_max = 2, .regions_max = 2, .packets_max = 8,
                     .ctrl_bytes_max = 64, .lat_min_ns = 100, .lat_max_ns = 100, .ns_per_kib = 1000};
    cr_assert_eq(sim_net_new(&te.env, &c, &ch, &net), KV_OK);
    link l = make_link(0, 1);
    static uint8_t src[4096], dst[4096];
    kvt_region rs, rd;
    cr_assert_eq(kvt_reg(T(0), src, sizeof src, KVT_MEM_HOST, &rs), KV_OK);
    cr_assert_eq(kvt_reg(T(1), dst, sizeof dst, KVT_MEM_HOST, &rd), KV_OK);
    kvt_desc gd = grant_link(&l, rd, sizeof dst);
    kvt_write w = W(rs, 0, &gd, 0, 2048 + 512);
    cr_assert_eq(kvt_submit(T(0), l.ep[0], l.peer, &w, 1, 1, 0), KV_OK);
    cr_expect_eq(sim_net_next_due(net), 100 + 2500);
}

/* ---- rejection ---- */

Test(sim_net, rejected_submit_gives_no_completion, .fini = teardown_net) {
    setup_net(3, 10, 10, 1, NULL, 0);
    link l = make_link(0, 1);
    static uint8_t src[64], dst[64];
    kvt_region rs, rd;
    cr_assert_eq(kvt_reg(T(0), src, sizeof src, KVT_MEM_HOST, &rs), KV_OK);
    cr_assert_eq(kvt_reg(T(1), dst, sizeof dst, KVT_MEM_HOST, &rd), KV_OK);
    kvt_desc gd = grant_link(&l, rd, sizeof dst);
    static kvt_write many[KVT_BATCH_WRITES_MAX + 1];
    for (uint32_t i = 0; i <= KVT_BATCH_WRITES_MAX; i++) many[i] = W(rs, 0, &gd, 0, 1);
    kvt_write bad_region = W(rs + 7, 0, &gd, 0, 4);
    kvt_write bad_off = W(rs, 61, &gd, 0, 4);
    kvt_write bad_wrap = W(rs, UINT64_MAX - 1, &gd, 0, 4);
    kvt_write ok = W(rs, 0, &gd, 0, 4);
    kvt_write mixed[2] = {ok, bad_off};
    cr_expect_eq(kvt_submit(T(0), l.ep[0], l.peer, many, 0, 1, 0), KV_EINVAL);
    cr_expect_eq(kvt_submit(T(0), l.ep[0], l.peer, many, KVT_BATCH_WRITES_MAX + 1, 2, 0), KV_EINVAL);
    cr_expect_eq(kvt_submit(T(0), l.ep[0], l.peer, NULL, 1, 3, 0), KV_EINVAL);
    cr_expect_eq(kvt_submit(T(0), l.ep[0], l.peer, &bad_region, 1, 4, 0), KV_ERANGE);
    cr_expect_eq(kvt_submit(T(0), l.ep[0], l.peer, &bad_off, 1, 5, 0), KV_ERANGE);
    cr_expect_eq(kvt_submit(T(0), l.ep[0], l.peer, &bad_wrap, 1, 6, 0), KV_ERANGE);
    cr_expect_eq(kvt_submit(T(0), l.ep[0], l.peer, mixed, 2, 7, 0), KV_ERANGE, "whole batch rejected");
    cr_expect_eq(kvt_submit(T(0), l.ep[0], l.peer + 5, &ok, 1, 8, 0), KV_ENOENT);
    cr_expect_eq(kvt_submit(T(0), 3, 0, &ok, 1, 9, 0), KV_ENOENT);
    cr_expect_eq(kvt_send_ctrl(T(0), l.ep[0], l.peer + 5, "x", 1), KV_ENOENT);
    static uint8_t big[KV_WIRE_MAX + 1];
    cr_expect_eq(kvt_send_ctrl(T(0), l.ep[0], l.peer, big, KV_WIRE_MAX + 1), KV_EINVAL);
    sim_net_fault_crash(net, 1);
    cr_expect_eq(kvt_submit(T(0), l.ep[0], l.peer, &ok, 1, 10, 0), KV_ECONNRESET, "destination crashed");
    cr_expect_eq(kvt_send_ctrl(T(0), l.ep[0], l.peer, "x", 1), KV_ECONNRESET);
    sim_net_fault_crash(net, 0);
    cr_expect_eq(kvt_submit(T(0), l.ep[0], l.peer, &ok, 1, 11, 0), KV_ECONNRESET, "source crashed");
    cr_expect_eq(sim_net_next_due(net), UINT64_MAX);
    run_until(1000000);
    cr_expect_eq(count_kind(KVT_EV_DONE), 0, "a rejected submit never completes");
    cr_expect_eq(memcmp(dst, (uint8_t[64]){0}, 64), 0);
    sim_net_stats s;
    sim_net_stats_get(net, &s);
    cr_expect_eq(s.batches, 0);
}

Test(sim_net, packet_pool_full_rejects, .fini = teardown_net) {
    test_env_init(&te);
    sim_choice_init(&ch, NULL, 0, 1);
    sim_net_cfg c = {.nodes_max = 2, .eps_max = 2, .regions_max = 2, .packets_max = 3,
                     .ctrl_bytes_max = 10, .lat_min_ns = 10, .lat_max_ns = 10};
    cr_assert_eq(sim_net_new(&te.env, &c, &ch, &net), KV_OK);
    link l = make_link(0, 1);
    cr_expect_eq(kvt_send_ctrl(T(0), l.ep[0], l.peer, "0123456789a", 11), KV_EFULL, "ctrl bytes full");
    cr_assert_eq(kvt_send_ctrl(T(0), l.ep[0], l.peer, "01234", 5), KV_OK);
    cr_assert_eq(kvt_send_ctrl(T(0), l.ep[0], l.peer, "5678", 4), KV_OK);
    cr_expect_eq(kvt_send_ctrl(T(0), l.ep[0], l.peer, "ab", 2), KV_EFULL, "10 bytes of ring: 9 used");
    cr_assert_eq(kvt_send_ctrl(T(0), l.ep[0], l.peer, "c", 1), KV_OK);
    cr_expect_eq(kvt_send_ctrl(T(0), l.ep[0], l.peer, NULL, 0), KV_EFULL, "3 packets in flight");
    run_all();
    cr_expect_eq(count_kind(KVT_EV_CTRL), 3);
    cr_expect_eq(memcmp(log_[0].bytes, "01234", 5), 0);
    cr_expect_eq(memcmp(log_[1].bytes, "5678", 4), 0);
    cr_expect_eq(memcmp(log_[2].bytes, "c", 1), 0);
    /* the ring wraps: space comes back once delivered */
    for (int round = 0; round < 20; round++) {
        cr_assert_eq(kvt_send_ctrl(T(0), l.ep[0], l.peer, "wxyz", 4), KV_OK, "round %d", round);
        cr_assert_eq(kvt_send_ctrl(T(0), l.ep[0], l.peer, "pqrstu", 6), KV_OK, "round %d", round);
        n_log = 0;
        run_all();
        cr_assert_eq(n_log, 2);
        cr_expect_eq(memcmp(log_[0].bytes, "wxyz", 4), 0);
        cr_expect_eq(memcmp(log_[1].bytes, "pqrstu", 6), 0);
    }
}

/* ---- bounds ---- */

Test(sim_net, out_of_range_remote_never_touches_guard_bytes, .fini = teardown_net) {
    setup_net(2, 10, 10, 1, NULL, 0);
    link l = make_link(0, 1);
    static uint8_t src[128];
    static uint8_t mem[64 + 32 + 64]; /* guard | region | guard */
    memset(src, 0xAB, sizeof src);
    memset(mem, 0x5A, sizeof mem);
    uint8_t *region = mem + 64;
    memset(region, 0, 32);
    kvt_region rs, rd;
    cr_assert_eq(kvt_reg(T(0), src, sizeof src, KVT_MEM_HOST, &rs), KV_OK);
    cr_assert_eq(kvt_reg(T(1), region, 32, KVT_MEM_HOST, &rd), KV_OK);
    kvt_desc gd = grant_link(&l, rd, 32); /* the whole region */
    kvt_desc far = gd, next = gd;
    far.region += 9;  /* no such grant */
    next.region += 1; /* the next id: not granted on node 1 */
    kvt_write w[] = {
        W(rs, 0, &gd, 0, 8),                 /* ok */
        W(rs, 0, &gd, 30, 4),                /* crosses the end */
        W(rs, 0, &gd, 32, 1),                /* just past */
        W(rs, 0, &gd, UINT64_MAX - 1, 4),    /* off + len wraps */
        W(rs, 0, &gd, 0, 33),                /* longer than the region */
        W(rs, 0, &far, 0, 4),                /* no such grant */
        W(rs, 0, &next, 0, 4),               /* the next id: not granted on node 1 */
        W(rs, 0, &gd, 24, 8),                /* ok: ends exactly at the end */
    };
    uint32_t n = sizeof w / sizeof w[0];
    cr_assert_eq(kvt_submit(T(0), l.ep[0], l.peer, w, n, 5, 0), KV_OK);
    run_all();
    cr_assert_eq(count_done(5), 1);
    const kvt_event *e = find_done(5);
    cr_expect_eq(e->done.status, KV_ERANGE);
    cr_expect_eq(e->done.n_ok, 2, "n_ok %u", e->done.n_ok);
    cr_expect_eq(e->done.n_failed, n - 2, "n_failed %u", e->done.n_failed);
    cr_expect_eq(e->done.n_ok + e->done.n_failed, n);
    for (int i = 0; i < 64; i++) {
        cr_assert_eq(mem[i], 0x5A, "guard before at %d", i);
        cr_assert_eq(mem[64 + 32 + i], 0x5A, "guard after at %d", i);
    }
    for (int i = 0; i < 32; i++) {
        uint8_t want = (i < 8 || i >= 24) ? 0xAB : 0;
        cr_expect_eq(region[i], want, "region byte %d", i);
    }
    sim_net_stats s;
    sim_net_stats_get(net, &s);
    cr_expect_eq(s.range_errors, n - 2);
    cr_expect_eq(s.writes, 2);
    cr_expect_eq(s.grant_violations, 4, "outside the window: %llu", (unsigned long long)s.grant_violations);
    cr_expect_eq(s.grant_refused, 2, "no such grant: %llu", (unsigned long long)s.grant_refused);
    sim_net_grant_violation v;
    cr_assert(sim_net_grant_violation_get(net, &v));
    cr_expect_eq(v.verdict, KVT_GRANT_OUTSIDE);
    cr_expect_eq(v.src, 0);
    cr_expect_eq(v.dst, 1);
    cr_expect_eq(v.grant, gd.region);
    cr_expect_eq(v.off, 30, "the first violation is kept");
    cr_expect_eq(v.len, 4);
}

Test(sim_net, dereg_before_delivery_fails_entry, .fini = teardown_net) {
    setup_net(2, 100, 100, 1, NULL, 0);
    link l = make_link(0, 1);
    static uint8_t src[16], dst[16];
    memset(src, 1, sizeof src);
    kvt_region rs, rd;
    cr_assert_eq(kvt_reg(T(0), src, sizeof src, KVT_MEM_HOST, &rs), KV_OK);
    cr_assert_eq(kvt_reg(T(1), dst, sizeof dst, KVT_MEM_HOST, &rd), KV_OK);
    kvt_desc gd = grant_link(&l, rd, sizeof dst);
    kvt_write w = W(rs, 0, &gd, 0, 16);
    cr_assert_eq(kvt_submit(T(0), l.ep[0], l.peer, &w, 1, 1, 0), KV_OK);
    cr_assert_eq(kvt_dereg(T(1), rd), KV_OK); /* revokes its grants */
    cr_expect_eq(kvt_revoke(T(1), gd.region), KV_ENOENT, "the dereg revoked the grant");
    run_all();
    const kvt_event *e = find_done(1);
    cr_assert_not_null(e);
    cr_expect_eq(e->done.status, KV_ERANGE);
    cr_expect_eq(e->done.n_failed, 1);
    cr_expect_eq(dst[0], 0);
    sim_net_stats s;
    sim_net_stats_get(net, &s);
    cr_expect_eq(s.grant_refused, 1, "a late write: refused, not a violation");
    cr_expect_eq(s.grant_violations, 0);
}

/* A grant revoked before the WRITE through it arrives: the entry fails
 * (counted as refused, not as a violation); a second grant over the same
 * memory still takes writes. */
Test(sim_net, revoked_grant_fails_in_flight_other_grant_still_works, .fini = teardown_net) {
    setup_net(2, 100, 100, 1, NULL, 0);
    link l = make_link(0, 1);
    static uint8_t src[16], dst[16];
    memset(src, 1, sizeof src);
    memset(dst, 0, sizeof dst);
    kvt_region rs, rd;
    cr_assert_eq(kvt_reg(T(0), src, sizeof src, KVT_MEM_HOST, &rs), KV_OK);
    cr_assert_eq(kvt_reg(T(1), dst, sizeof dst, KVT_MEM_HOST, &rd), KV_OK);
    kvt_desc keep = grant_link(&l, rd, sizeof dst);
    kvt_desc g = grant_link(&l, rd, sizeof dst);
    cr_assert_neq(g.region, keep.region);
    cr_expect(g.key.w[0] != keep.key.w[0] || g.key.w[1] != keep.key.w[1], "each grant has its own key");
    kvt_write w = W(rs, 0, &g, 0, 16);
    cr_assert_eq(kvt_submit(T(0), l.ep[0], l.peer, &w, 1, 1, 0), KV_OK);
    cr_assert_eq(kvt_revoke(T(1), g.region), KV_OK);
    cr_expect_eq(kvt_revoke(T(1), g.region), KV_ENOENT);
    run_all();
    cr_assert_not_null(find_done(1));
    cr_expect_eq(find_done(1)->done.status, KV_ERANGE);
    cr_expect_eq(dst[0], 0);
    w = W(rs, 0, &keep, 0, 16);
    cr_assert_eq(kvt_submit(T(0), l.ep[0], l.peer, &w, 1, 2, 0), KV_OK);
    run_all();
    cr_assert_not_null(find_done(2));
    cr_expect_eq(find_done(2)->done.status, KV_OK);
    cr_expect_eq(dst[15], 1);
    sim_net_stats s;
    sim_net_stats_get(net, &s);
    cr_expect_eq(s.grant_refused, 1);
    cr_expect_eq(s.grant_violations, 0);
    cr_expect_eq(s.writes, 1);
}

/* A writer with no key, a wrong key, another writer's grant, outside its
 * window or through a revoked grant: each entry is refused at delivery (the
 * batch completes once, KV_ERANGE), counted (violations apart from late
 * writes), the first violation kept for the checker; not a byte of the
 * destination moves outside what honest writes put there. */
Test(sim_net, grants_refuse_no_key_wrong_key_other_peer_outside_revoked, .fini = teardown_net) {
    setup_net(3, 100, 100, 1, NULL, 0);
    link l = make_link(0, 1); /* the writer under test */
    link o = make_link(2, 1); /* another writer to the same node */
    static uint8_t src[64], src2[64], dst[64];
    memset(src, 0xA1, sizeof src);
    memset(src2, 0xC2, sizeof src2);
    memset(dst, 0, sizeof dst);
    kvt_region rs, rs2, rd;
    cr_assert_eq(kvt_reg(T(0), src, sizeof src, KVT_MEM_HOST, &rs), KV_OK);
    cr_assert_eq(kvt_reg(T(2), src2, sizeof src2, KVT_MEM_HOST, &rs2), KV_OK);
    cr_assert_eq(kvt_reg(T(1), dst, sizeof dst, KVT_MEM_HOST, &rd), KV_OK);
    kvt_desc wd = grant_on(1, l.ep[1], &l.addr[0], rd, 16, 16, NULL); /* [16, 32) to node 0 */
    kvt_desc od = grant_on(1, o.ep[1], &o.addr[0], rd, 0, sizeof dst, NULL); /* all, to node 2 */
    kvt_desc rv = grant_link(&l, rd, sizeof dst);
    cr_assert_eq(wd.len, 32, "a grant's desc.len is the end of its window");
    cr_assert_eq(kvt_revoke(T(1), rv.region), KV_OK);
    kvt_desc nokey = wd, badkey = wd;
    nokey.key = (kvt_key){{0, 0}};
    badkey.key = od.key;
    kvt_write w[] = {
        W(rs, 0, &nokey, 16, 8), /* no key */
        W(rs, 0, &badkey, 16, 8), /* another grant's key */
        W(rs, 0, &od, 40, 8),    /* the right key, granted to another peer */
        W(rs, 0, &wd, 8, 8),     /* before the window */
        W(rs, 0, &wd, 28, 8),    /* crosses the window's end */
        W(rs, 0, &rv, 0, 8),     /* revoked */
        W(rs, 0, &wd, 16, 16),   /* honest: the whole window */
    };
    uint32_t n = sizeof w / sizeof w[0];
    cr_assert_eq(kvt_submit(T(0), l.ep[0], l.peer, w, n, 1, 0), KV_OK);
    kvt_write ok2 = W(rs2, 0, &od, 40, 8); /* node 2's honest write through its own grant */
    cr_assert_eq(kvt_submit(T(2), o.ep[0], o.peer, &ok2, 1, 2, 0), KV_OK);
    run_all();
    cr_assert_eq(count_done(1), 1);
    const kvt_event *e = find_done(1);
    cr_expect_eq(e->done.status, KV_ERANGE);
    cr_expect_eq(e->done.n_ok, 1);
    cr_expect_eq(e->done.n_failed, n - 1);
    cr_assert_eq(count_done(2), 1);
    cr_expect_eq(find_done(2)->done.status, KV_OK);
    for (int i = 0; i < 64; i++) {
        uint8_t want = (i >= 16 && i < 32) ? 0xA1 : (i >= 40 && i < 48) ? 0xC2 : 0;
        cr_assert_eq(dst[i], want, "byte %d: %u", i, dst[i]);
    }
    sim_net_stats s;
    sim_net_stats_get(net, &s);
    cr_expect_eq(s.grant_violations, 5);
    cr_expect_eq(s.grant_refused, 1, "the revoked one: a late write");
    cr_expect_eq(s.range_errors, n - 1);
    cr_expect_eq(s.writes, 2);
    sim_net_grant_violation v;
    cr_assert(sim_net_grant_violation_get(net, &v));
    cr_expect_eq(v.verdict, KVT_GRANT_BAD_KEY, "the first: no key");
    cr_expect_eq(v.src, 0);
    cr_expect_eq(v.dst, 1);
    cr_expect_eq(v.grant, wd.region);
    cr_expect_eq(v.off, 16);
    cr_expect_eq(v.len, 8);
    /* grant's own refusals: unknown region, endpoint or peer; an empty or
     * out-of-range window */
    uint32_t id;
    kvt_desc x;
    cr_expect_eq(kvt_grant(T(1), rd + 9, l.ep[1], 0, 0, 8, &id, &x), KV_ENOENT);
    cr_expect_eq(kvt_grant(T(1), rd, l.ep[1] + 3, 0, 0, 8, &id, &x), KV_ENOENT);
    cr_expect_eq(kvt_grant(T(1), rd, l.ep[1], 17, 0, 8, &id, &x), KV_ENOENT);
    cr_expect_eq(kvt_grant(T(1), rd, l.ep[1], 0, 0, 0, &id, &x), KV_ERANGE);
    cr_expect_eq(kvt_grant(T(1), rd, l.ep[1], 0, 60, 8, &id, &x), KV_ERANGE);
    cr_expect_eq(kvt_grant(T(1), rd, l.ep[1], 0, UINT64_MAX - 1, 4, &id, &x), KV_ERANGE);
}

/* ---- deadlines and faults ---- */

Test(sim_net, deadline_timeout_never_applies_later, .fini = teardown_net) {
    setup_net(2, 1000, 1000, 1, NULL, 0);
    link l = make_link(0, 1);
    static uint8_t src[16], dst[16];
    memset(src, 9, sizeof src);
    kvt_region rs, rd;
    cr_assert_eq(kvt_reg(T(0), src, sizeof src, KVT_MEM_HOST, &rs), KV_OK);
    cr_assert_eq(kvt_reg(T(1), dst, sizeof dst, KVT_MEM_HOST, &rd), KV_OK);
    kvt_desc gd = grant_link(&l, rd, sizeof dst);
    kvt_write w = W(rs, 0, &gd, 0, 16);
    cr_assert_eq(kvt_submit(T(0), l.ep[0], l.peer, &w, 1, 1, 1500), KV_OK); /* arrives 2000 */
    cr_assert_eq(kvt_submit(T(0), l.ep[0], l.peer, &w, 1, 2, 2000), KV_OK); /* deadline == arrival */
    cr_assert_eq(kvt_submit(T(0), l.ep[0], l.peer, &w, 1, 3, 500), KV_OK);  /* already past */
    cr_expect_eq(sim_net_next_due(net), 500);
    run_until(1499);
    cr_expect_eq(count_done(3), 1);
    cr_expect_eq(count_done(1), 0);
    run_until(1500);
    cr_assert_eq(count_done(1), 1, "completes at its deadline");
    cr_expect_eq(find_done(1)->done.status, KV_ETIMEDOUT);
    cr_expect_eq(find_done(1)->done.n_failed, 1);
    cr_expect_eq(find_done(1)->done.n_ok, 0);
    cr_expect_eq(find_done(3)->done.status, KV_ETIMEDOUT);
    run_until(1000000);
    cr_expect_eq(count_done(2), 1);
    cr_expect_eq(find_done(2)->done.status, KV_ETIMEDOUT);
    cr_expect_eq(count_done(1), 1);
    cr_expect_eq(count_done(3), 1);
    for (int i = 0; i < 16; i++) cr_assert_eq(dst[i], 0, "a timed-out write landed (byte %d)", i);
    sim_net_stats s;
    sim_net_stats_get(net, &s);
    cr_expect_eq(s.timeouts, 3);
    cr_expect_eq(s.writes, 0);
    /* a deadline after arrival does not fire */
    cr_assert_eq(kvt_submit(T(0), l.ep[0], l.peer, &w, 1, 4, te.now_ns + 1001), KV_OK);
    run_all();
    cr_expect_eq(find_done(4)->done.status, KV_OK);
    cr_expect_eq(dst[0], 9);
}

Test(sim_net, batch_fault_fails_entries_once, .fini = teardown_net) {
    setup_net(2, 10, 10, 1, NULL, 0);
    link l = make_link(0, 1);
    static uint8_t src[32], dst[32];
    memset(src, 3, sizeof src);
    kvt_region rs, rd;
    cr_assert_eq(kvt_reg(T(0), src, sizeof src, KVT_MEM_HOST, &rs), KV_OK);
    cr_assert_eq(kvt_reg(T(1), dst, sizeof dst, KVT_MEM_HOST, &rd), KV_OK);
    kvt_desc gd = grant_link(&l, rd, sizeof dst);
    kvt_write w[3] = {W(rs, 0, &gd, 0, 8), W(rs, 8, &gd, 8, 8), W(rs, 16, &gd, 16, 8)};
    sim_net_fault_batch(net, 1, -77, 1); /* a different node: no effect on node 0 */
    sim_net_fault_batch(net, 0, -5, 1);
    cr_assert_eq(kvt_submit(T(0), l.ep[0], l.peer, w, 3, 1, 0), KV_OK);
    cr_assert_eq(kvt_submit(T(0), l.ep[0], l.peer, w, 3, 2, 0), KV_OK);
    run_all();
    cr_assert_eq(count_done(1), 1);
    cr_assert_eq(count_done(2), 1);
    const kvt_event *e = find_done(1);
    cr_expect_eq(e->done.status, KV_EIO);
    cr_expect_eq(e->done.provider_err, -5);
    cr_expect_eq(e->done.n_ok, 2);
    cr_expect_eq(e->done.n_failed, 1);
    e = find_done(2);
    cr_expect_eq(e->done.status, KV_OK, "the fault is consumed by one batch");
    cr_expect_eq(e->done.provider_err, 0);
    cr_expect_eq(e->done.n_ok, 3);
    /* a faulted batch does not copy its failed entries */
    memset(dst, 0, sizeof dst);
    sim_net_fault_batch(net, 0, -6, 0); /* 0: every entry */
    cr_assert_eq(kvt_submit(T(0), l.ep[0], l.peer, w, 3, 3, 0), KV_OK);
    run_all();
    e = find_done(3);
    cr_assert_not_null(e);
    cr_expect_eq(e->done.status, KV_EIO);
    cr_expect_eq(e->done.n_failed, 3);
    cr_expect_eq(e->done.n_ok, 0);
    for (int i = 0; i < 32; i++) cr_assert_eq(dst[i], 0);
    memset(dst, 0, sizeof dst);
    sim_net_fault_batch(net, 0, -7, 1);
    cr_assert_eq(kvt_submit(T(0), l.ep[0], l.peer, w, 3, 4, 0), KV_OK);
    run_all();
    cr_expect_eq(dst[15], 3);
    cr_expect_eq(dst[16], 0, "the faulted (last) entry was copied");
}

Test(sim_net, delay_fault_window, .fini = teardown_net) {
    setup_net(2, 100, 100, 1, NULL, 0);
    link l = make_link(0, 1), m = make_link(0, 1);
    sim_net_fault_delay(net, 5000, 1000); /* window [1000, 2000) */
    cr_assert_eq(kvt_send_ctrl(T(0), l.ep[0], l.peer, "a", 1), KV_OK);
    cr_expect_eq(sim_net_next_due(net), 1000 + 100 + 5000);
    te.now_ns = 1999;
    cr_assert_eq(kvt_send_ctrl(T(0), m.ep[0], m.peer, "b", 1), KV_OK);
    te.now_ns = 2000;
    cr_assert_eq(kvt_send_ctrl(T(0), l.ep[0], l.peer + 0, "c", 1), KV_OK);
    kvt_peer back;
    cr_assert_eq(kvt_connect(T(1), l.ep[1], &l.addr[0], &back), KV_OK);
    cr_assert_eq(kvt_send_ctrl(T(1), l.ep[1], back, "d", 1), KV_OK);
    cr_expect_eq(sim_net_next_due(net), 2100, "window over");
    run_all();
    cr_assert_eq(n_log, 4);
    cr_expect_eq(log_[0].bytes[0], 'd');
    cr_expect_eq(log_[0].at, 2100);
    cr_expect_eq(log_[1].bytes[0], 'a');
    cr_expect_eq(log_[1].at, 6100);
    cr_expect_eq(log_[2].bytes[0], 'c', "FIFO on the pair keeps c behind a");
    cr_expect_eq(log_[2].at, 6100);
    cr_expect_eq(log_[3].bytes[0], 'b');
    cr_expect_eq(log_[3].at, 1999 + 5100);
}

/* ---- ctrl ---- */

Test(sim_net, ctrl_fifo_per_pair_while_pairs_interleave, .fini = teardown_net) {
    setup_net(3, 10, 3000, 77, NULL, 0);
    kvt_ep src;
    kvt_addr sa;
    cr_assert_eq(kvt_ep_open(T(0), 1, &src, &sa), KV_OK);
    kvt_ep dep[2];
    kvt_addr da[2];
    kvt_peer pp[2];
    for (int d = 0; d < 2; d++) {
        cr_assert_eq(kvt_ep_open(T(1 + d), 10 + d, &dep[d], &da[d]), KV_OK);
        cr_assert_eq(kvt_connect(T(0), src, &da[d], &pp[d]), KV_OK);
    }
    /* a second sender to node 1 makes a third pair */
    kvt_ep src2;
    kvt_addr sa2;
    kvt_peer p2;
    cr_assert_eq(kvt_ep_open(T(0), 2, &src2, &sa2), KV_OK);
    cr_assert_eq(kvt_connect(T(0), src2, &da[0], &p2), KV_OK);
    const uint32_t N = 200;
    for (uint32_t i = 0; i < N; i++) {
        uint8_t m[8];
        memcpy(m, &i, 4);
        m[4] = (uint8_t)(i % 3);
        kvt_ep from = i % 3 == 2 ? src2 : src;
        kvt_peer to = i % 3 == 2 ? p2 : pp[i % 3];
        cr_assert_eq(kvt_send_ctrl(T(0), from, to, m, 5), KV_OK);
        te.now_ns += 137; /* sends spread over time, well inside the latency spread */
    }
    run_all();
    cr_assert_eq(n_log, N);
    uint32_t last[3] = {0, 0, 0};
    bool seen[3] = {false, false, false};
    uint32_t switches = 0, prev_pair = 99, out_of_send_order = 0, last_i = 0;
    for (uint32_t k = 0; k < n_log; k++) {
        const rec *r = &log_[k];
        cr_assert_eq(r->e.kind, KVT_EV_CTRL);
        cr_assert_eq(r->e.len, 5);
        uint32_t i;
        memcpy(&i, r->bytes, 4);
        uint32_t pair = r->bytes[4];
        cr_assert_eq(pair, i % 3);
        cr_expect_eq(r->e.ep, dep[pair == 1 ? 1 : 0]);
        cr_expect_eq(r->e.owner, pair == 1 ? 11u : 10u);
        if (seen[pair]) cr_assert_gt(i, last[pair], "pair %u reordered: %u after %u", pair, i, last[pair]);
        seen[pair] = true;
        last[pair] = i;
        if (pair != prev_pair) switches++;
        prev_pair = pair;
        if (k > 0 && i < last_i) out_of_send_order++;
        last_i = i;
    }
    cr_expect_gt(switches, 40, "pairs must interleave (%u switches)", switches);
    cr_expect_gt(out_of_send_order, 0, "latency draws must reorder across pairs");
    sim_net_stats s;
    sim_net_stats_get(net, &s);
    cr_expect_eq(s.ctrl_msgs, N);
}

Test(sim_net, reply_via_peer_id_from_ctrl, .fini = teardown_net) {
    setup_net(2, 10, 50, 3, NULL, 0);
    link l = make_link(0, 1);
    /* the receiver already has an unrelated peer so ids are not trivially equal */
    kvt_ep other;
    kvt_addr oa;
    kvt_peer op;
    cr_assert_eq(kvt_ep_open(T(1), 300, &other, &oa), KV_OK);
    cr_assert_eq(kvt_connect(T(1), l.ep[1], &oa, &op), KV_OK);
    cr_assert_eq(kvt_send_ctrl(T(0), l.ep[0], l.peer, "ping", 4), KV_OK);
    run_all();
    cr_assert_eq(n_log, 1);
    const rec *r = &log_[0];
    cr_expect_eq(r->e.kind, KVT_EV_CTRL);
    cr_expect_eq(r->e.ep, l.ep[1]);
    cr_expect_eq(r->e.owner, 201);
    cr_expect_eq(memcmp(r->bytes, "ping", 4), 0);
    kvt_peer back = r->e.peer;
    cr_expect_neq(back, op);
    cr_assert_eq(kvt_send_ctrl(T(1), l.ep[1], back, "pong", 4), KV_OK);
    run_all();
    cr_assert_eq(n_log, 2);
    r = &log_[1];
    cr_expect_eq(r->e.kind, KVT_EV_CTRL);
    cr_expect_eq(r->e.ep, l.ep[0]);
    cr_expect_eq(r->e.owner, 100);
    cr_expect_eq(r->e.peer, l.peer, "the reply comes from the peer we connected to");
    cr_expect_eq(memcmp(r->bytes, "pong", 4), 0);
    kvt_peer again;
    cr_assert_eq(kvt_connect(T(1), l.ep[1], &l.addr[0], &again), KV_OK);
    cr_expect_eq(again, back, "connect to the sender's address reuses the reverse peer");
    /* a second message keeps the same identity */
    cr_assert_eq(kvt_send_ctrl(T(0), l.ep[0], l.peer, "", 0), KV_OK);
    run_all();
    cr_expect_eq(log_[2].e.peer, back);
    cr_expect_eq(log_[2].e.len, 0);
}

/* ---- reset, crash ---- */

Test(sim_net, reset_drops_in_flight_and_sends_peer_down, .fini = teardown_net) {
    setup_net(3, 1000, 1000, 1, NULL, 0);
    link ab = make_link(0, 1);
    link ac = make_link(0, 2);
    static uint8_t src[16], db[16], dc[16];
    memset(src, 4, sizeof src);
    kvt_region rs, rb, rc;
    cr_assert_eq(kvt_reg(T(0), src, sizeof src, KVT_MEM_HOST, &rs), KV_OK);
    cr_assert_eq(kvt_reg(T(1), db, sizeof db, KVT_MEM_HOST, &rb), KV_OK);
    cr_assert_eq(kvt_reg(T(2), dc, sizeof dc, KVT_MEM_HOST, &rc), KV_OK);
    /* give node 1's ep a reverse peer for node 0 */
    cr_assert_eq(kvt_send_ctrl(T(0), ab.ep[0], ab.peer, "hi", 2), KV_OK);
    run_all();
    cr_assert_eq(n_log, 1);
    kvt_peer rev = log_[0].e.peer;
    n_log = 0;
    kvt_desc gb = grant_link(&ab, rb, sizeof db), gc = grant_link(&ac, rc, sizeof dc);
    kvt_write wb = W(rs, 0, &gb, 0, 16), wc = W(rs, 0, &gc, 0, 16);
    cr_assert_eq(kvt_submit(T(0), ab.ep[0], ab.peer, &wb, 1, 1, 0), KV_OK);
    cr_assert_eq(kvt_submit(T(0), ac.ep[0], ac.peer, &wc, 1, 2, 0), KV_OK);
    cr_assert_eq(kvt_send_ctrl(T(0), ab.ep[0], ab.peer, "lost", 4), KV_OK);
    cr_assert_eq(kvt_send_ctrl(T(1), ab.ep[1], rev, "lost", 4), KV_OK);
    te.now_ns += 300;
    sim_net_fault_reset(net, 1, 0);
    cr_expect_eq(sim_net_next_due(net), te.now_ns, "the reset completes now");
    run_all();
    cr_assert_eq(count_done(1), 1);
    cr_expect_eq(find_done(1)->done.status, KV_ECONNRESET);
    cr_expect_eq(find_done(1)->done.n_ok, 0);
    cr_expect_eq(find_done(1)->done.n_failed, 1);
    cr_assert_eq(count_done(2), 1);
    cr_expect_eq(find_done(2)->done.status, KV_OK, "other pairs are unaffected");
    cr_expect_eq(count_kind(KVT_EV_CTRL), 0, "ctrl across the reset is lost");
    cr_expect_eq(db[0], 0, "a reset write never lands");
    cr_expect_eq(dc[0], 4);
    uint32_t downs = 0;
    bool down_a = false, down_b = false;
    for (uint32_t i = 0; i < n_log; i++) {
        const kvt_event *e = &log_[i].e;
        if (e->kind != KVT_EV_PEER_DOWN) continue;
        downs++;
        if (e->ep == ab.ep[0] && e->owner == 100 && e->peer == ab.peer) down_a = true;
        if (e->ep == ab.ep[1] && e->owner == 201 && e->peer == rev) down_b = true;
    }
    cr_expect_eq(downs, 2, "one PEER_DOWN per (ep, peer)");
    cr_expect(down_a && down_b);
    /* after a reset the connection works again */
    n_log = 0;
    cr_assert_eq(kvt_submit(T(0), ab.ep[0], ab.peer, &wb, 1, 3, 0), KV_OK);
    run_all();
    cr_expect_eq(find_done(3)->done.status, KV_OK);
    cr_expect_eq(db[0], 4);
    sim_net_stats s;
    sim_net_stats_get(net, &s);
    cr_expect_eq(s.resets, 3, "one batch and two ctrl messages lost");
}

Test(sim_net, crash_and_restart, .fini = teardown_net) {
    setup_net(3, 1000, 1000, 1, NULL, 0);
    link ab = make_link(0, 1); /* 0 -> 1 */
    link ba = make_link(1, 0); /* 1 -> 0 */
    link cb = make_link(2, 1); /* 2 -> 1 */
    static uint8_t a[16], b[16], c[16];
    memset(a, 0xA, sizeof a);
    memset(b, 0xB, sizeof b);
    kvt_region ra, rb, rc;
    cr_assert_eq(kvt_reg(T(0), a, sizeof a, KVT_MEM_HOST, &ra), KV_OK);
    cr_assert_eq(kvt_reg(T(1), b, sizeof b, KVT_MEM_HOST, &rb), KV_OK);
    cr_assert_eq(kvt_reg(T(2), c, sizeof c, KVT_MEM_HOST, &rc), KV_OK);
    kvt_desc gb = grant_link(&ab, rb, sizeof b), ga = grant_link(&ba, ra, sizeof a);
    kvt_write to_b = W(ra, 0, &gb, 0, 4), to_a = W(rb, 0, &ga, 8, 4);
    cr_assert_eq(kvt_submit(T(0), ab.ep[0], ab.peer, &to_b, 1, 1, 0), KV_OK);
    cr_assert_eq(kvt_submit(T(1), ba.ep[0], ba.peer, &to_a, 1, 2, 0), KV_OK);
    cr_assert_eq(kvt_send_ctrl(T(1), ba.ep[0], ba.peer, "gone", 4), KV_OK);
    cr_assert_eq(kvt_send_ctrl(T(2), cb.ep[0], cb.peer, "gone", 4), KV_OK);
    sim_net_fault_batch(net, 1, -1, 1);
    sim_net_fault_crash(net, 1);
    run_all();
    cr_assert_eq(count_done(1), 1, "a survivor's batch to the crashed node completes once");
    cr_expect_eq(find_done(1)->done.status, KV_ECONNRESET);
    cr_expect_eq(count_done(2), 0, "the crashed node's own events are discarded");
    cr_expect_eq(count_kind(KVT_EV_CTRL), 0);
    cr_expect_eq(a[8], 0xA, "the crashed node's write never lands");
    cr_expect_eq(b[0], 0xB);
    uint32_t downs = 0;
    for (uint32_t i = 0; i < n_log; i++) {
        const kvt_event *e = &log_[i].e;
        if (e->kind != KVT_EV_PEER_DOWN) continue;
        downs++;
        cr_expect(e->owner == 100 || e->owner == 102 || e->owner == 200, "PEER_DOWN to a survivor only (owner %u)",
                  e->owner);
    }
    /* node 0's ba ep is connected to node 1 too: it granted node 1's writer */
    cr_expect_eq(downs, 3, "node 0's ab and ba eps and node 2's ep");
    /* while crashed: everything from or to node 1 fails fast */
    kvt_ep e;
    kvt_addr ad;
    kvt_region r;
    cr_expect_eq(kvt_submit(T(0), ab.ep[0], ab.peer, &to_b, 1, 3, 0), KV_ECONNRESET);
    cr_expect_eq(kvt_send_ctrl(T(2), cb.ep[0], cb.peer, "x", 1), KV_ECONNRESET);
    cr_expect_eq(kvt_ep_open(T(1), 5, &e, &ad), KV_ECONNRESET);
    cr_expect_eq(kvt_reg(T(1), b, sizeof b, KVT_MEM_HOST, &r), KV_ECONNRESET);
    cr_expect_eq(kvt_connect(T(0), ab.ep[0], &ab.addr[1], &ab.peer), KV_ECONNRESET);
    run_all();
    cr_expect_eq(count_done(3), 0);
    /* restart: regions, grants and endpoints were forgotten; re-register */
    sim_net_fault_restart(net, 1);
    cr_expect_eq(kvt_export_desc(T(1), rb, &(kvt_desc){0}), KV_ENOENT);
    cr_expect_eq(kvt_revoke(T(1), gb.region), KV_ENOENT, "a crash revokes the node's grants");
    cr_assert_eq(kvt_reg(T(1), b, sizeof b, KVT_MEM_HOST, &r), KV_OK);
    cr_expect_neq(r, rb, "a stale region id must not alias the new region");
    cr_assert_eq(kvt_ep_open(T(1), 201, &e, &ad), KV_OK);
    kvt_peer np;
    cr_assert_eq(kvt_connect(T(0), ab.ep[0], &ad, &np), KV_OK);
    kvt_desc gr = grant_on(1, e, &ab.addr[0], r, 0, sizeof b, NULL);
    cr_expect_neq(gr.region, gb.region, "a stale grant id must not alias the new grant");
    n_log = 0;
    kvt_write stale = W(ra, 0, &gb, 0, 4), fresh = W(ra, 0, &gr, 0, 4);
    cr_assert_eq(kvt_submit(T(0), ab.ep[0], np, &stale, 1, 4, 0), KV_OK);
    cr_assert_eq(kvt_submit(T(0), ab.ep[0], np, &fresh, 1, 5, 0), KV_OK);
    run_all();
    cr_expect_eq(find_done(4)->done.status, KV_ERANGE);
    cr_expect_eq(find_done(5)->done.status, KV_OK, "the fault armed before the crash is gone");
    cr_expect_eq(b[0], 0xA);
}

Test(sim_net, quick_restart_never_sees_old_traffic, .fini = teardown_net) {
    setup_net(2, 1000, 1000, 1, NULL, 0);
    link ba = make_link(1, 0);
    static uint8_t a[16], b[16];
    memset(b, 0xB, sizeof b);
    kvt_region ra, rb;
    cr_assert_eq(kvt_reg(T(0), a, sizeof a, KVT_MEM_HOST, &ra), KV_OK);
    cr_assert_eq(kvt_reg(T(1), b, sizeof b, KVT_MEM_HOST, &rb), KV_OK);
    kvt_desc ga = grant_link(&ba, ra, sizeof a);
    kvt_write w = W(rb, 0, &ga, 0, 16);
    cr_assert_eq(kvt_submit(T(1), ba.ep[0], ba.peer, &w, 1, 1, 0), KV_OK);
    cr_assert_eq(kvt_send_ctrl(T(1), ba.ep[0], ba.peer, "old", 3), KV_OK);
    te.now_ns += 10;
    sim_net_fault_crash(net, 1);
    sim_net_fault_restart(net, 1);
    /* the new incarnation gets the same ep id and region id space back */
    kvt_ep e;
    kvt_addr ad;
    kvt_region r;
    cr_assert_eq(kvt_ep_open(T(1), 201, &e, &ad), KV_OK);
    cr_expect_eq(e, ba.ep[0]);
    cr_assert_eq(kvt_reg(T(1), b, sizeof b, KVT_MEM_HOST, &r), KV_OK);
    run_all();
    cr_expect_eq(count_done(1), 0, "the old incarnation's batch must not complete to the new one");
    cr_expect_eq(count_kind(KVT_EV_CTRL), 0);
    for (int i = 0; i < 16; i++) cr_assert_eq(a[i], 0, "old DMA landed at %d", i);
    sim_net_stats s;
    sim_net_stats_get(net, &s);
    cr_expect_eq(s.resets, 2, "one batch and one ctrl lost");
    cr_expect_eq(s.writes, 0);
}

/* Many batches with every outcome mixed; each accepted one completes once. */
Test(sim_net, exactly_one_completion_under_every_outcome, .fini = teardown_net) {
    setup_net(4, 10, 5000, 11, NULL, 0);
    static uint8_t mem[4][256];
    kvt_region reg[4];
    kvt_ep ep[4];
    kvt_addr ad[4];
    kvt_peer peer[4][4];
    for (uint32_t n = 0; n < 4; n++) {
        memset(mem[n], (int)n + 1, sizeof mem[n]);
        cr_assert_eq(kvt_reg(T(n), mem[n], sizeof mem[n], KVT_MEM_HOST, &reg[n]), KV_OK);
        cr_assert_eq(kvt_ep_open(T(n), 100 + n, &ep[n], &ad[n]), KV_OK);
    }
    for (uint32_t n = 0; n < 4; n++)
        for (uint32_t m = 0; m < 4; m++) cr_assert_eq(kvt_connect(T(n), ep[n], &ad[m], &peer[n][m]), KV_OK);
    /* node m's region, granted whole to node n's writer */
    static kvt_desc grant[4][4];
    for (uint32_t m = 0; m < 4; m++)
        for (uint32_t n = 0; n < 4; n++) {
            uint32_t id;
            cr_assert_eq(kvt_grant(T(m), reg[m], ep[m], peer[m][n], 0, sizeof mem[m], &id, &grant[m][n]), KV_OK);
        }
    static uint8_t accepted[2000];
    static uint32_t src_of[2000];
    sim_choice drive;
    sim_choice_init(&drive, NULL, 0, 99);
    uint32_t tag = 0;
    bool crashed3 = false;
    for (uint32_t step = 0; step < 1500; step++) {
        uint32_t a = sim_choice_below(&drive, 3), b = sim_choice_below(&drive, 4);
        uint32_t what = sim_choice_below(&drive, 10);
        kvt_write w = W(reg[a], sim_choice_below(&drive, 190), &grant[b][a], sim_choice_below(&drive, 300),
                        sim_choice_below(&drive, 64));
        uint64_t dl = what == 0 ? te.now_ns + sim_choice_below(&drive, 3000) : 0;
        if (what == 1) sim_net_fault_batch(net, a, -2, 1);
        if (what == 2 && step % 7 == 0) sim_net_fault_reset(net, a, b);
        if (what == 3 && step == 700) {
            sim_net_fault_crash(net, 3);
            crashed3 = true;
        }
        if (what == 3 && crashed3 && step > 1000) {
            sim_net_fault_restart(net, 3);
            crashed3 = false;
        }
        uint32_t t = tag++;
        src_of[t] = a;
        kv_status st = kvt_submit(T(a), ep[a], peer[a][b], &w, 1, t, dl);
        accepted[t] = st == KV_OK;
        cr_assert(st == KV_OK || st == KV_ECONNRESET, "step %u: %s", step, kv_status_str(st));
        te.now_ns += sim_choice_below(&drive, 400);
        pump();
    }
    run_all();
    uint32_t by_status[16] = {0};
    for (uint32_t t = 0; t < tag; t++) {
        uint32_t c = count_done(t);
        cr_assert_eq(c, accepted[t] ? 1u : 0u, "tag %u: %u completions (accepted %d)", t, c, accepted[t]);
        if (c) {
            const kvt_event *e = find_done(t);
            cr_assert_eq(e->done.n_ok + e->done.n_failed, 1);
            cr_assert_eq(e->ep, ep[src_of[t]]);
            by_status[-(int)e->done.status]++;
        }
    }
    cr_expect_gt(by_status[0], 0, "some ok");
    cr_expect_gt(by_status[-KV_ERANGE], 0, "some range errors");
    cr_expect_gt(by_status[-KV_ETIMEDOUT], 0, "some timeouts");
    cr_expect_gt(by_status[-KV_ECONNRESET], 0, "some resets");
    cr_expect_gt(by_status[-KV_EIO], 0, "some injected faults");
    cr_expect_eq(sim_net_next_due(net), UINT64_MAX);
}

/* ---- progress limits ---- */

Test(sim_net, progress_respects_max_and_ctrl_cap, .fini = teardown_net) {
    setup_net(2, 10, 10, 1, NULL, 0);
    link l = make_link(0, 1);
    for (int i = 0; i < 5; i++) cr_assert_eq(kvt_send_ctrl(T(0), l.ep[0], l.peer, "abcd", 4), KV_OK);
    te.now_ns += 10;
    uint32_t n = 0;
    cr_expect_eq(sim_net_progress(net, ev, ev_off, 2, ev_buf, CTRL_CAP, &n), KV_EAGAIN);
    cr_expect_eq(n, 2);
    cr_expect_eq(sim_net_progress(net, ev, ev_off, 10, ev_buf, 6, &n), KV_EAGAIN, "ctrl_cap holds one");
    cr_expect_eq(n, 1);
    cr_expect_eq(sim_net_progress(net, ev, ev_off, 10, ev_buf, 3, &n), KV_EINVAL, "never fits");
    cr_expect_eq(n, 0);
    cr_expect_eq(sim_net_progress(net, ev, ev_off, 0, ev_buf, CTRL_CAP, &n), KV_EAGAIN);
    cr_expect_eq(n, 0);
    cr_expect_eq(sim_net_progress(net, ev, ev_off, 10, ev_buf, 8, &n), KV_OK);
    cr_expect_eq(n, 2);
    cr_expect_eq(ev_off[0], 0);
    cr_expect_eq(ev_off[1], 4);
    cr_expect_eq(sim_net_progress(net, ev, ev_off, 10, ev_buf, 8, &n), KV_OK);
    cr_expect_eq(n, 0);
}

/* ---- determinism ---- */

typedef struct trace {
    uint32_t n;
    uint64_t h[512];
} trace;

/* Three senders, three receivers, ctrl and batches under wide latencies. */
static void scenario(uint64_t seed, const uint8_t *bytes, size_t len, trace *out) {
    setup_net(6, 1, 20000, seed, bytes, len);
    static uint8_t mem[6][128];
    kvt_region reg[6];
    kvt_ep ep[6];
    kvt_addr ad[6];
    for (uint32_t n = 0; n < 6; n++) {
        memset(mem[n], 0, sizeof mem[n]);
        cr_assert_eq(kvt_reg(T(n), mem[n], sizeof mem[n], KVT_MEM_HOST, &reg[n]), KV_OK);
        cr_assert_eq(kvt_ep_open(T(n), n, &ep[n], &ad[n]), KV_OK);
    }
    kvt_peer p[3];
    kvt_desc g[3];
    for (uint32_t s = 0; s < 3; s++) {
        cr_assert_eq(kvt_connect(T(s), ep[s], &ad[3 + s], &p[s]), KV_OK);
        g[s] = grant_on(3 + s, ep[3 + s], &ad[s], reg[3 + s], 0, sizeof mem[3 + s], NULL);
    }
    for (uint32_t i = 0; i < 90; i++) {
        uint32_t s = i % 3;
        uint8_t m[4] = {(uint8_t)i, (uint8_t)s, 0, 0};
        if (i % 2) {
            cr_assert_eq(kvt_send_ctrl(T(s), ep[s], p[s], m, 4), KV_OK);
        } else {
            kvt_write w = W(reg[s], 0, &g[s], i, 8);
            cr_assert_eq(kvt_submit(T(s), ep[s], p[s], &w, 1, i, 0), KV_OK);
        }
        te.now_ns += 50;
    }
    run_all();
    out->n = n_log;
    for (uint32_t i = 0; i < n_log && i < 512; i++) {
        const rec *r = &log_[i];
        uint64_t x = ((uint64_t)r->e.kind << 56) ^ ((uint64_t)r->e.ep << 48) ^ ((uint64_t)r->e.owner << 40) ^
                     ((uint64_t)r->e.peer << 32) ^ (r->e.kind == KVT_EV_DONE ? r->e.done.tag : r->bytes[0]);
        out->h[i] = sim_mix64(x) ^ r->at;
    }
    teardown_net();
}

Test(sim_net, determinism_same_seed_same_sequence) {
    static trace a, b, c, d, e;
    scenario(1234, NULL, 0, &a);
    scenario(1234, NULL, 0, &b);
    cr_assert_eq(a.n, 90);
    cr_assert_eq(a.n, b.n);
    cr_expect_eq(memcmp(a.h, b.h, a.n * sizeof a.h[0]), 0, "same seed, different sequence");
    scenario(1235, NULL, 0, &c);
    cr_assert_eq(c.n, 90);
    cr_expect_neq(memcmp(a.h, c.h, a.n * sizeof a.h[0]), 0, "a different seed must change the interleaving");
    static uint8_t bytes[400];
    for (int i = 0; i < 400; i++) bytes[i] = (uint8_t)(i * 37 + 5);
    scenario(1, bytes, sizeof bytes, &d);
    scenario(1, bytes, sizeof bytes, &e);
    cr_expect_eq(memcmp(d.h, e.h, d.n * sizeof d.h[0]), 0, "same choice bytes, different sequence");
    bytes[0] ^= 0xff;
    bytes[1] ^= 0x0f;
    scenario(1, bytes, sizeof bytes, &e);
    cr_expect_neq(memcmp(d.h, e.h, d.n * sizeof d.h[0]), 0, "flipped choice bytes must change something");
}

/* ---- reset ---- */

Test(sim_net, reset_returns_to_clean_state, .fini = teardown_net) {
    setup_net(3, 100, 900, 5, NULL, 0);
    link l = make_link(0, 1);
    static uint8_t src[16], dst[16];
    memset(src, 1, sizeof src);
    kvt_region rs, rd;
    cr_assert_eq(kvt_reg(T(0), src, sizeof src, KVT_MEM_HOST, &rs), KV_OK);
    cr_assert_eq(kvt_reg(T(1), dst, sizeof dst, KVT_MEM_HOST, &rd), KV_OK);
    uint32_t gid0;
    kvt_desc gd = grant_on(1, l.ep[1], &l.addr[0], rd, 0, sizeof dst, &gid0);
    kvt_write w = W(rs, 0, &gd, 0, 16);
    cr_assert_eq(kvt_submit(T(0), l.ep[0], l.peer, &w, 1, 1, 0), KV_OK);
    cr_assert_eq(kvt_send_ctrl(T(0), l.ep[0], l.peer, "abc", 3), KV_OK);
    te.now_ns += 2000;
    pump();
    cr_assert_eq(kvt_submit(T(0), l.ep[0], l.peer, &w, 1, 2, 0), KV_OK);
    sim_net_fault_batch(net, 0, -3, 1);
    sim_net_fault_delay(net, 1000000, 1000000000);
    sim_net_fault_reset(net, 0, 1);
    sim_net_fault_crash(net, 2);
    sim_choice ch2;
    sim_choice_init(&ch2, NULL, 0, 5);
    sim_net_reset(net, &ch2);
    sim_net_stats s;
    sim_net_stats_get(net, &s);
    cr_expect_eq(s.batches + s.writes + s.bytes + s.ctrl_msgs + s.range_errors + s.timeouts + s.resets +
                     s.grant_refused + s.grant_violations,
                 0);
    cr_expect_not(sim_net_grant_violation_get(net, NULL));
    cr_expect_eq(kvt_revoke(T(1), gid0), KV_ENOENT, "grants forgotten");
    cr_expect_eq(sim_net_next_due(net), UINT64_MAX, "no packets survive a reset");
    n_log = 0;
    run_until(te.now_ns + 10000000);
    cr_expect_eq(n_log, 0);
    cr_expect_eq(kvt_export_desc(T(0), rs, &(kvt_desc){0}), KV_ENOENT, "regions forgotten");
    cr_expect_eq(kvt_submit(T(0), l.ep[0], l.peer, &w, 1, 3, 0), KV_ENOENT, "endpoints forgotten");
    /* fresh: same ids as a new net, crash and faults cleared */
    link m = make_link(2, 1);
    cr_expect_eq(m.ep[0], 0);
    cr_expect_str_eq(m.addr[0].s, "sim:2/0");
    cr_expect_eq(m.peer, 0);
    kvt_region r0, r1;
    cr_assert_eq(kvt_reg(T(2), src, sizeof src, KVT_MEM_HOST, &r0), KV_OK);
    cr_assert_eq(kvt_reg(T(1), dst, sizeof dst, KVT_MEM_HOST, &r1), KV_OK);
    cr_expect_eq(r0, 1);
    cr_expect_eq(r1, 1);
    sim_net_fault_batch(net, 0, -3, 1); /* re-armed on node 0, which does not submit */
    memset(dst, 0, sizeof dst);
    uint32_t gid1;
    kvt_desc g1 = grant_on(1, m.ep[1], &m.addr[0], r1, 0, sizeof dst, &gid1);
    cr_expect_eq(gid1, gid0, "grant ids restart");
    cr_expect(g1.key.w[0] == gd.key.w[0] && g1.key.w[1] == gd.key.w[1], "grant keys restart (node 1's first)");
    kvt_write w2 = W(r0, 0, &g1, 0, 16);
    uint64_t t0 = te.now_ns;
    cr_assert_eq(kvt_submit(T(2), m.ep[0], m.peer, &w2, 1, 4, 0), KV_OK);
    cr_expect_leq(sim_net_next_due(net), t0 + 900, "the delay fault was cleared");
    run_all();
    cr_assert_eq(n_log, 1);
    cr_expect_eq(log_[0].e.done.status, KV_OK);
    cr_expect_eq(dst[0], 1);
}

Test(sim_net, new_rejects_bad_config) {
    test_env_init(&te);
    sim_choice_init(&ch, NULL, 0, 1);
    sim_net *n = NULL;
    sim_net_cfg ok = {.nodes_max = 2, .eps_max = 2, .regions_max = 2, .packets_max = 8,
                      .ctrl_bytes_max = 64, .lat_min_ns = 5, .lat_max_ns = 10};
    sim_net_cfg c = ok;
    c.nodes_max = 0;
    cr_expect_eq(sim_net_new(&te.env, &c, &ch, &n), KV_EINVAL);
    c = ok;
    c.packets_max = 0;
    cr_expect_eq(sim_net_new(&te.env, &c, &ch, &n), KV_EINVAL);
    c = ok;
    c.lat_min_ns = 11;
    cr_expect_eq(sim_net_new(&te.env, &c, &ch, &n), KV_EINVAL);
    cr_expect_eq(sim_net_new(&te.env, &ok, NULL, &n), KV_EINVAL);
    cr_assert_eq(sim_net_new(&te.env, &ok, &ch, &n), KV_OK);
    sim_net_free(n);
    sim_net_free(NULL);
}
