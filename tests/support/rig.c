/* tests/support/rig.c — see rig.h. */
#include "tests/support/rig.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kvconn/limits.h"

static uint64_t rig_now(void *ctx) { return sim_rt_now(((rig *)ctx)->sim); }
static uint32_t rig_actor(void *ctx) { return sim_rt_current(((rig *)ctx)->sim); }

static kv_rt *sim_of(kv_rt *rt) { return sim_rt_iface(((rig *)rt->impl)->sim); }

static kv_status rig_spawn(kv_rt *rt, const char *name, uint32_t node, kv_actor_fn fn, void *self,
                           uint32_t mailbox_bytes, uint32_t *out_id) {
    rig *r = rt->impl;
    if (++r->spawns == r->fail_spawn) return KV_ENOMEM;
    return kv_rt_spawn(sim_of(rt), name, node, fn, self, mailbox_bytes, out_id);
}
static kv_status rig_post(kv_rt *rt, uint32_t to, uint32_t kind, const void *payload, uint32_t len) {
    return kv_rt_post(sim_of(rt), to, kind, payload, len);
}
static kv_status rig_post_at(kv_rt *rt, uint32_t to, uint64_t at_ns, uint32_t kind, const void *payload,
                             uint32_t len) {
    return kv_rt_post_at(sim_of(rt), to, at_ns, kind, payload, len);
}
static const kv_rt_ops rig_rt_ops = {
    .size = sizeof(kv_rt_ops), .spawn = rig_spawn, .post = rig_post, .post_at = rig_post_at};

void rig_init(rig *r, const sim_net_cfg *nc) {
    memset(r, 0, sizeof *r);
    test_env_init(&r->te);
    r->te.env.now_ns = rig_now;
    r->te.env.current_actor = rig_actor;
    sim_choice_init(&r->choice, NULL, 0, 1);
    sim_rt_cfg rc = {.events_max = 1u << 12, .arena_bytes = 4u << 20, .lat_min_ns = 20000, .lat_max_ns = 200000};
    sim_net_cfg dflt = {.nodes_max = RIG_NODES, .eps_max = 8, .regions_max = KV_NODE_REGIONS_MAX,
                        .packets_max = 4096, .ctrl_bytes_max = 8u << 20, .lat_min_ns = 10000,
                        .lat_max_ns = 100000, .ns_per_kib = 100};
    if (sim_rt_new(&r->te.env, &rc, &r->choice, &r->sim) != KV_OK ||
        sim_net_new(&r->te.env, nc ? nc : &dflt, &r->choice, &r->net) != KV_OK)
        abort();
    r->rt = (kv_rt){.ops = &rig_rt_ops, .env = &r->te.env, .impl = r};
}

void rig_free(rig *r) {
    sim_store_free(r->store);
    sim_net_free(r->net);
    sim_rt_free(r->sim);
}

void rig_reset(rig *r) {
    sim_choice_init(&r->choice, NULL, 0, 1);
    sim_rt_reset(r->sim, &r->choice);
    sim_net_reset(r->net, &r->choice);
}

void rig_add_store(rig *r, uint32_t capacity, kvt_addr *addr) {
    if (sim_store_new(&r->te.env, sim_rt_iface(r->sim), sim_net_node(r->net, RIG_STORE_NODE), RIG_STORE_NODE,
                      capacity, &r->store) != KV_OK)
        abort();
    *addr = *sim_store_addr(r->store);
}

/* As the world's pump: each network event to its endpoint's owner. */
static void pump_net(rig *r) {
    if (sim_net_pump(r->net, sim_rt_iface(r->sim), &r->pump) != KV_OK) abort();
}

bool rig_step(rig *r) {
    pump_net(r);
    sim_rt_deliver_due(r->sim);
    if (sim_rt_run_one(r->sim)) return true;
    uint64_t a = sim_rt_next_event(r->sim), b = sim_net_next_due(r->net), next = a < b ? a : b;
    if (next == UINT64_MAX) return false;
    sim_rt_set_now(r->sim, next);
    return true;
}

void rig_run(rig *r, bool (*until)(void *ctx), void *ctx) {
    while (!(until && until(ctx)) && rig_step(r)) {
    }
}

static void sink_handle(void *self, const kv_msg *m) {
    rig_sink *s = self;
    if (s->n == RIG_SINK_MAX) return;
    s->kind[s->n] = m->kind;
    memcpy(s->payload[s->n], m->payload, m->len < sizeof s->payload[0] ? m->len : sizeof s->payload[0]);
    s->n++;
}

void rig_sink_spawn(rig *r, rig_sink *s, const char *name, uint32_t node) {
    memset(s, 0, sizeof *s);
    if (kv_rt_spawn(sim_rt_iface(r->sim), name, node, sink_handle, s, 1u << 16, &s->actor) != KV_OK) abort();
}

uint32_t rig_sink_count(const rig_sink *s, uint32_t kind) {
    uint32_t n = 0;
    for (uint32_t i = 0; i < s->n; i++) n += s->kind[i] == kind;
    return n;
}

/* ---- an engine alone ---------------------------------------------------------- */

kv_engine_cfg rig_engine_cfg(uint8_t role, uint32_t tp) {
    kv_engine_cfg c = {.index = 0, .node = 0, .role = role, .tp = tp, .n_groups = 1, .block_size = 16,
                       .pool_blocks = 32, .head_bytes = 8, .max_batched_tokens = 512, .max_running = 8,
                       .reqs_max = 8, .policy = KV_POLICY_FAIL, .step_ns_base = 2000000, .step_ns_per_token = 20000,
                       .idle_poll_ns = 5000000, .abort_timeout_ns = 2000000000ull, .recv_timeout_ns = 2500000000ull,
                       .proxy_actor = KV_ACTOR_NONE, .bootstrap_actor = KV_ACTOR_NONE};
    c.group[0] = (kv_group_cfg){.kind = KV_GROUP_FULL};
    snprintf(c.store_addr.s, sizeof c.store_addr.s, "sim:%u/0", RIG_STORE_NODE);
    return c;
}

kv_status rig_engine_new(rig *r, const kv_engine_cfg *cfg, kv_conn_kind kind, kv_engine **out) {
    kvt *t[KV_TP_MAX];
    for (uint32_t i = 0; i < cfg->tp && i < KV_TP_MAX; i++) t[i] = sim_net_node(r->net, cfg->node + 1 + i);
    rig_reset(r);
    return kv_engine_new(&r->te.env, &r->rt, cfg, kind, t, out);
}

/* One construction with allocation `alloc` or spawn `spawn` refused (0:
 * none); what it left behind, if anything, said in f->first_leak. */
static kv_status build_once(rig *r, const kv_engine_cfg *cfg, kv_conn_kind kind, uint64_t alloc, uint64_t spawn,
                       rig_failures *f) {
    int64_t live = r->te.live;
    kv_engine *e = NULL;
    r->te.fail_alloc = alloc ? r->te.allocs + alloc : 0;
    r->fail_spawn = spawn ? r->spawns + spawn : 0;
    kv_status st = rig_engine_new(r, cfg, kind, &e);
    r->te.fail_alloc = r->fail_spawn = 0;
    if (st == KV_OK) kv_engine_free(e);
    else f->failed++;
    if (st == KV_OK && (alloc || spawn) && !f->first_built[0])
        snprintf(f->first_built, sizeof f->first_built, "%s %llu refused, built anyway", alloc ? "allocation" : "spawn",
                 (unsigned long long)(alloc ? alloc : spawn));
    if (r->te.live != live && !f->first_leak[0])
        snprintf(f->first_leak, sizeof f->first_leak, "%s %llu refused: %s, %lld allocations left", alloc ? "allocation" : "spawn",
                 (unsigned long long)(alloc ? alloc : spawn), kv_status_str(st), (long long)(r->te.live - live));
    return st;
}

rig_failures rig_engine_failures(rig *r, const kv_engine_cfg *cfg, kv_conn_kind kind) {
    rig_failures f = {0};
    uint64_t a0 = r->te.allocs, s0 = r->spawns;
    f.built = build_once(r, cfg, kind, 0, 0, &f) == KV_OK;
    f.failed = 0;
    f.allocs = r->te.allocs - a0;
    f.spawns = r->spawns - s0;
    for (uint64_t k = 1; k <= f.allocs; k++) build_once(r, cfg, kind, k, 0, &f);
    for (uint64_t k = 1; k <= f.spawns; k++) build_once(r, cfg, kind, 0, k, &f);
    return f;
}
