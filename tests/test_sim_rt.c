/* tests/test_sim_rt.c — the simulator's actor runtime: mailbox FIFO, timers,
 * cross-node delivery order per pair, bounded mailboxes, reset. */
#include <criterion/criterion.h>
#include <string.h>

#include "kvconn/limits.h"
#include "sim/sim_rt.h"
#include "tests/support/test_env.h"

typedef struct rec {
    uint32_t n;
    uint32_t kind[256];
    uint32_t val[256];
    uint64_t at[256];
    sim_rt *rt;
    kv_rt *iface;
    uint32_t forward_to; /* KV_ACTOR_NONE: do not forward */
} rec;

static void rec_fn(void *self, const kv_msg *m) {
    rec *r = self;
    uint32_t v = 0;
    if (m->len >= sizeof v) memcpy(&v, m->payload, sizeof v);
    if (r->n < 256) {
        r->kind[r->n] = m->kind;
        r->val[r->n] = v;
        r->at[r->n] = sim_rt_now(r->rt);
        r->n++;
    }
    if (r->forward_to != KV_ACTOR_NONE) kv_rt_post(r->iface, r->forward_to, m->kind + 100, &v, sizeof v);
}

static test_env te;
static sim_choice ch;
static sim_rt *rt;

static void setup(void) {
    test_env_init(&te);
    sim_choice_init(&ch, NULL, 0, 7);
    sim_rt_cfg cfg = {.events_max = 1024, .arena_bytes = 1 << 16, .lat_min_ns = 1000, .lat_max_ns = 90000};
    cr_assert_eq(sim_rt_new(&te.env, &cfg, &ch, &rt), KV_OK);
}
static void teardown(void) { sim_rt_free(rt); }
TestSuite(sim_rt, .init = setup, .fini = teardown);

/* Runs until nothing is runnable or pending. */
static void drain(void) {
    for (int guard = 0; guard < 100000; guard++) {
        sim_rt_deliver_due(rt);
        if (sim_rt_run_one(rt)) continue;
        uint64_t next = sim_rt_next_event(rt);
        if (next == UINT64_MAX) return;
        sim_rt_set_now(rt, next);
    }
    cr_assert_fail("runtime did not drain");
}

Test(sim_rt, same_node_posts_are_fifo_and_immediate) {
    static rec a;
    memset(&a, 0, sizeof a);
    a.rt = rt;
    a.forward_to = KV_ACTOR_NONE;
    uint32_t id;
    cr_assert_eq(kv_rt_spawn(sim_rt_iface(rt), "a", 1, rec_fn, &a, 4096, &id), KV_OK);
    for (uint32_t i = 0; i < 50; i++) cr_assert_eq(kv_rt_post(sim_rt_iface(rt), id, 1, &i, sizeof i), KV_OK);
    drain();
    cr_assert_eq(a.n, 50);
    for (uint32_t i = 0; i < 50; i++) {
        cr_assert_eq(a.val[i], i);
        cr_assert_eq(a.at[i], 0);
    }
}

Test(sim_rt, cross_node_posts_keep_per_pair_order_with_latency) {
    static rec src, dst;
    memset(&src, 0, sizeof src);
    memset(&dst, 0, sizeof dst);
    src.rt = dst.rt = rt;
    src.iface = sim_rt_iface(rt);
    dst.forward_to = KV_ACTOR_NONE;
    uint32_t s_id, d_id;
    kv_rt_spawn(sim_rt_iface(rt), "src", 1, rec_fn, &src, 8192, &s_id);
    kv_rt_spawn(sim_rt_iface(rt), "dst", 2, rec_fn, &dst, 8192, &d_id);
    src.forward_to = d_id;
    for (uint32_t i = 0; i < 100; i++) kv_rt_post(sim_rt_iface(rt), s_id, 1, &i, sizeof i);
    drain();
    cr_assert_eq(dst.n, 100);
    for (uint32_t i = 0; i < 100; i++) {
        cr_assert_eq(dst.val[i], i, "reordered at %u", i);
        cr_assert_geq(dst.at[i], 1000, "a cross-node post takes at least the minimum latency");
        if (i) cr_assert_geq(dst.at[i], dst.at[i - 1]);
    }
}

Test(sim_rt, timers_fire_in_time_order) {
    static rec a;
    memset(&a, 0, sizeof a);
    a.rt = rt;
    a.forward_to = KV_ACTOR_NONE;
    uint32_t id;
    kv_rt_spawn(sim_rt_iface(rt), "a", 1, rec_fn, &a, 4096, &id);
    uint32_t v[] = {3, 1, 2};
    uint64_t at[] = {3000, 1000, 2000};
    for (int i = 0; i < 3; i++) kv_rt_post_at(sim_rt_iface(rt), id, at[i], 9, &v[i], sizeof v[i]);
    drain();
    cr_assert_eq(a.n, 3);
    for (uint32_t i = 0; i < 3; i++) {
        cr_assert_eq(a.val[i], i + 1);
        cr_assert_eq(a.at[i], (i + 1) * 1000ull);
    }
}

Test(sim_rt, full_mailbox_is_efull_and_flags_the_run) {
    static rec a;
    memset(&a, 0, sizeof a);
    uint32_t id;
    kv_rt_spawn(sim_rt_iface(rt), "a", 1, rec_fn, &a, 64, &id);
    uint8_t big[48] = {0};
    cr_assert_eq(kv_rt_post(sim_rt_iface(rt), id, 1, big, sizeof big), KV_OK);
    cr_assert_eq(kv_rt_post(sim_rt_iface(rt), id, 1, big, sizeof big), KV_EFULL);
    cr_assert_eq(sim_rt_error(rt), KV_EFULL);
}

Test(sim_rt, oversized_payload_is_rejected) {
    static rec a;
    uint32_t id;
    kv_rt_spawn(sim_rt_iface(rt), "a", 1, rec_fn, &a, 4096, &id);
    static uint8_t big[KV_MSG_PAYLOAD_MAX + 1];
    cr_assert_eq(kv_rt_post(sim_rt_iface(rt), id, 1, big, sizeof big), KV_EINVAL);
    cr_assert_eq(kv_rt_post(sim_rt_iface(rt), 99, 1, big, 4), KV_EINVAL);
}

Test(sim_rt, reset_forgets_actors_and_events) {
    static rec a;
    memset(&a, 0, sizeof a);
    a.forward_to = KV_ACTOR_NONE;
    uint32_t id, v = 1;
    kv_rt_spawn(sim_rt_iface(rt), "a", 1, rec_fn, &a, 4096, &id);
    kv_rt_post_at(sim_rt_iface(rt), id, 5000, 1, &v, sizeof v);
    sim_rt_reset(rt, &ch);
    cr_assert_eq(sim_rt_actor_count(rt), 0);
    cr_assert_eq(sim_rt_next_event(rt), UINT64_MAX);
    cr_assert_eq(sim_rt_now(rt), 0);
    cr_assert_eq(sim_rt_error(rt), KV_OK);
}

Test(sim_rt, choice_stream_steers_which_actor_runs) {
    static rec a, b;
    uint32_t ia, ib, v = 0;
    uint8_t first_b[] = {1};
    for (int round = 0; round < 2; round++) {
        sim_choice_init(&ch, round ? first_b : NULL, round ? 1 : 0, 3);
        sim_rt_reset(rt, &ch);
        memset(&a, 0, sizeof a);
        memset(&b, 0, sizeof b);
        a.rt = b.rt = rt;
        a.forward_to = b.forward_to = KV_ACTOR_NONE;
        kv_rt_spawn(sim_rt_iface(rt), "a", 1, rec_fn, &a, 4096, &ia);
        kv_rt_spawn(sim_rt_iface(rt), "b", 1, rec_fn, &b, 4096, &ib);
        kv_rt_post(sim_rt_iface(rt), ia, 1, &v, sizeof v);
        kv_rt_post(sim_rt_iface(rt), ib, 1, &v, sizeof v);
        cr_assert(sim_rt_run_one(rt));
        if (round) cr_assert_eq(b.n, 1, "choice byte 1 picks the second runnable actor");
    }
}

/* A killed actor (its process crashed) never runs again: what was queued
 * for it, and what reaches it later (posts, cross-node deliveries, timers),
 * is dropped and counted; the others go on, and a reset revives the slot. */
Test(sim_rt, a_killed_actor_never_runs_and_its_mail_is_dropped) {
    static rec a, b;
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    a.rt = b.rt = rt;
    a.forward_to = b.forward_to = KV_ACTOR_NONE;
    uint32_t ia, ib, v = 1;
    kv_rt *io = sim_rt_iface(rt);
    cr_assert_eq(kv_rt_spawn(io, "a", 1, rec_fn, &a, 4096, &ia), KV_OK);
    cr_assert_eq(kv_rt_spawn(io, "b", 1, rec_fn, &b, 4096, &ib), KV_OK);
    for (uint32_t i = 0; i < 3; i++) kv_rt_post(io, ia, 1, &v, sizeof v); /* queued */
    kv_rt_post_at(io, ia, 5000, 2, &v, sizeof v);                         /* a timer */
    kv_rt_post(io, ib, 1, &v, sizeof v);
    cr_assert_eq(sim_rt_runnable(rt), 2);
    sim_rt_kill(rt, ia);
    cr_assert(sim_rt_dead(rt, ia) && !sim_rt_dead(rt, ib));
    cr_assert_eq(sim_rt_runnable(rt), 1);
    kv_rt_post(io, ia, 1, &v, sizeof v); /* after the crash */
    drain();
    cr_assert_eq(a.n, 0, "the dead actor ran");
    cr_assert_eq(b.n, 1);
    cr_assert_eq(sim_rt_dropped(rt), 5, "3 queued + the timer + the late post");
    sim_rt_reset(rt, &ch);
    cr_assert_eq(kv_rt_spawn(io, "a2", 1, rec_fn, &a, 4096, &ia), KV_OK);
    cr_assert(!sim_rt_dead(rt, ia));
    kv_rt_post(io, ia, 1, &v, sizeof v);
    drain();
    cr_assert_eq(a.n, 1);
}
