/* apps/kvnode/engine_node.c — a P or D engine process: the core's engine on
 * the threaded runtime, its workers' KV memory registered with the TCP
 * transport, an admin actor, and a main thread that waits for SHUTDOWN,
 * takes a new proxy when the proxy's link is lost (proxy_link.c), and
 * prints live accounting on --stats-ms. */
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "apps/kvnode/kvnode.h"
#include "apps/kvnode/proxy_link.h"
#include "core/worker.h"
#include "transport/posix/net.h"
#include "transport/rdma/rdma.h"
#include "transport/tcp/tcp.h"
#ifdef KVCONN_HAVE_CUDA
#include "transport/cuda/kvmem_hbm.h"
#endif

#define LOOKUP_NS 30000000000ull
#define REG_WAIT_MS 10000u /* P: its senders' REGISTER reach the relay within this */

typedef struct engine_node {
    kvp_env pe;
    kvp_rt *rt;
    kvp_net *net;
    kv_engine *eng;
    uint32_t admin;
    kvn_boot_hook *http_boot; /* --http-bootstrap: the server (owner) or its client */
    kvn_plink link;           /* the link to the proxy, P's bootstrap relay */
#ifdef KVCONN_HAVE_RDMA
    kvt_rdma_verbs verbs;  /* --transport rdma: the libibverbs binding */
    bool verbs_open;
#endif
    _Atomic bool shutdown;
} engine_node;

/* Runs with every other actor of the process parked. */
typedef struct snap_ctx { engine_node *n; kvn_stats *s; } snap_ctx;

static void snapshot(void *arg) {
    snap_ctx *c = arg;
    const kv_engine *e = c->n->eng;
    kvn_stats *s = c->s;
    s->engine = e->cfg.index;
    s->role = e->cfg.role;
    s->tp = e->cfg.tp;
    s->n_groups = e->cfg.n_groups;
    s->block_size = e->cfg.block_size;
    s->head_bytes = e->cfg.head_bytes;
    s->pool_blocks = e->cfg.pool_blocks;
    s->live_reqs = kv_engine_live_reqs(e);
    s->conn_state = kv_engine_conn_state(e);
    for (uint32_t g = 0; g < e->cfg.n_groups; g++) kv_engine_pool_report(e, g, &s->pool[g]);
    s->st = e->stats;
    s->verified_blocks = 0;
    for (uint32_t r = 0; r < e->cfg.tp; r++) s->verified_blocks += e->worker[r]->verified_blocks;
}

static void take_stats(engine_node *n, kvn_stats *s) {
    memset(s, 0, sizeof *s);
    snap_ctx c = {n, s};
    kvp_rt_stop_world(n->rt, snapshot, &c);
    s->violations = kvp_env_violations(&n->pe);
    kvp_rt_counters_get(n->rt, &s->rt);
}

static void admin_handle(void *self, const kv_msg *m) {
    engine_node *n = self;
    switch (m->kind) {
    case KVN_M_STATS_REQ: {
        kvn_stats s;
        take_stats(n, &s);
        if (m->len == sizeof(uint32_t)) memcpy(&s.token, m->payload, sizeof s.token);
        kv_status st = kv_rt_post(kvp_rt_iface(n->rt), m->src, KVN_M_STATS, &s, sizeof s);
        if (st != KV_OK) kv_logf(&n->pe.env, KV_LOG_WARN, "admin: stats reply lost: %s", kv_status_str(st));
        break;
    }
    case KVN_M_SHUTDOWN: atomic_store(&n->shutdown, true); break;
    default: kv_logf(&n->pe.env, KV_LOG_WARN, "admin: unexpected message %#x", m->kind);
    }
}

static const char *namer(void *ctx, uint32_t actor) { return kvp_rt_actor_name(ctx, actor); }

static kv_engine_cfg engine_cfg(const kvn_opts *o, uint32_t proxy, uint32_t boot) {
    bool p = strcmp(o->role, "prefill") == 0;
    kv_engine_cfg e = {
        .index = o->index, .node = 1 + o->index * (KV_TP_MAX + 1), .role = p ? KV_ROLE_PRODUCER : KV_ROLE_CONSUMER,
        .tp = o->tp, .n_groups = o->groups, .block_size = o->block_size, .pool_blocks = o->pool_blocks,
        .head_bytes = o->head_bytes, .max_batched_tokens = o->max_batched_tokens, .max_running = 32,
        .num_spec = o->spec,
        .policy = o->policy, .prefix_caching = false, .step_ns_base = (uint64_t)o->step_us * 1000u,
        .step_ns_per_token = 0, .idle_poll_ns = 5000000, .abort_timeout_ns = (uint64_t)o->abort_timeout_ms * 1000000u,
        .recv_timeout_ns = (uint64_t)o->recv_timeout_ms * 1000000u, .peer_share_pct = o->peer_share,
        .bugs = 0, .proxy_actor = proxy,
        .bootstrap_actor = boot};
    for (uint32_t g = 0; g < o->groups; g++) e.group[g] = (kv_group_cfg){.kind = KV_GROUP_FULL};
    if (strcmp(o->kvmem, "staged") == 0) e.kvmem = (kv_kvmem){.ops = &kv_kvmem_staged};
#ifdef KVCONN_HAVE_CUDA
    if (strcmp(o->kvmem, "hbm") == 0) e.kvmem = (kv_kvmem){.ops = &kv_kvmem_hbm};
#endif
    return e;
}

/* Touches every page of the workers' KV pools before any request: the
 * first transfers then pay no page faults (the env maps big allocations as
 * huge pages, so this is one fault per 2 MiB where THP is on). */
static void prefault_pools(kv_engine *e) {
    for (uint32_t r = 0; r < e->cfg.tp; r++) {
        kv_worker *w = e->worker[r];
        for (uint32_t g = 0; g < e->cfg.n_groups; g++) {
            volatile uint8_t *p = w->kv[g];
            uint64_t len = (uint64_t)w->capacity * w->block_bytes;
            for (uint64_t off = 0; p && off < len; off += 4096u) p[off] = 0;
        }
    }
}

static kv_status build(engine_node *n, const kvn_opts *o) {
    kv_rt *rt = kvp_rt_iface(n->rt);
    kv_status st = kvn_plink_dial(&n->link, LOOKUP_NS);
    if (st != KV_OK) return st;
    kvt *inner = NULL;
    st = kvt_tcp_new(&n->pe.env, o->host, &inner);
    if (st != KV_OK) return st;
    if ((st = kvn_secure_kvt(o, inner)) != KV_OK) {
        kvt_tcp_free(inner);
        return st;
    }
    kvp_net_cfg nc = {.inner = inner, .rt = n->rt, .event_data = kvt_tcp_event_data, .pollfds = kvt_tcp_pollfds};
#ifdef KVCONN_HAVE_RDMA
    if (strcmp(o->transport, "rdma") == 0) { /* KV by RDMA WRITE; the TCP kvt carries control and set-up */
        st = kvt_rdma_ibv_open(&n->pe.env, o->rdma_dev, (uint8_t)o->rdma_port, &n->verbs);
        kvt *rk = NULL;
        kvt_rdma_cfg rc = {.ctrl = inner, .verbs = &n->verbs};
        if (st == KV_OK) {
            n->verbs_open = true;
            st = kvt_rdma_new(&n->pe.env, &rc, &rk);
        }
        if (st != KV_OK) {
            kv_logf(&n->pe.env, KV_LOG_ERROR, "rdma: cannot open device %s: %s", o->rdma_dev ? o->rdma_dev : "(first)",
                    kv_status_str(st));
            kvt_tcp_free(inner);
            return st;
        }
        inner = rk;
        nc = (kvp_net_cfg){.inner = inner, .rt = n->rt, .event_data = kvt_rdma_event_data, .pollfds = kvt_rdma_pollfds};
    }
#endif
    st = kvp_net_new(&n->pe.env, &nc, &n->net);
    if (st != KV_OK) {
        inner->ops->close(inner);
        return st;
    }
    kvt *t[KV_TP_MAX];
    for (uint32_t r = 0; r < KV_TP_MAX; r++) t[r] = kvp_net_kvt(n->net); /* ranks share this process's transport */
    kv_engine_cfg ec = engine_cfg(o, n->link.proxy, n->link.boot);
    /* P: the core's REGISTER goes through the relay, which keeps a copy (for a new proxy, and the HTTP one) */
    st = kvn_plink_relay(&n->link, ec.node, &ec.bootstrap_actor);
    if (st == KV_OK) st = kv_engine_new(&n->pe.env, rt, &ec, KV_CONN_P2P, t, &n->eng);
    if (st == KV_OK) prefault_pools(n->eng);
    char name[KVP_NAME_MAX];
    snprintf(name, sizeof name, "%c%u.admin", ec.role == KV_ROLE_PRODUCER ? 'P' : 'D', ec.index);
    if (st == KV_OK) st = kv_rt_spawn(rt, name, ec.node, admin_handle, n, 1u << 16, &n->admin);
    n->link.eng = n->eng;
    n->link.admin = n->admin;
    /* P's actors start before they are published, and the relay has forwarded every rank's REGISTER by
     * then: no one can send this engine a request before the proxy's bootstrap has its senders. */
    bool p = ec.role == KV_ROLE_PRODUCER;
    if (st == KV_OK && !p) st = kvp_rt_publish(n->rt);
    if (st == KV_OK) st = kvp_rt_start(n->rt);
    if (st == KV_OK && p && kvn_plink_registered(&n->link, o->tp, REG_WAIT_MS, NULL) < o->tp) {
        kv_logf(&n->pe.env, KV_LOG_ERROR, "the senders' REGISTER did not reach the relay in %u ms", REG_WAIT_MS);
        st = KV_ETIMEDOUT;
    }
    if (st == KV_OK && p) st = kvp_rt_publish(n->rt);
    if (st == KV_OK) st = kvp_net_start(n->net);
    return st;
}

int kvn_run_engine(const kvn_opts *o) {
    static engine_node n;
    char tag[16];
    bool p = strcmp(o->role, "prefill") == 0;
    snprintf(tag, sizeof tag, "%c%u", p ? 'P' : 'D', o->index);
    kvp_env_cfg ec = {.seed = o->seed, .level = o->log_level, .tag = tag, .keep_going = false};
    if (o->index + 1 >= KVP_PROCS_MAX || kvp_env_init(&n.pe, &ec) != KV_OK) return EXIT_SIM;
    kvp_rt_cfg rc = {.proc = 1 + o->index, .abi = kvn_abi()};
    if (kvp_rt_new(&n.pe.env, &rc, &n.rt) != KV_OK || kvn_secure_rt(o, n.rt) != KV_OK) return EXIT_SIM;
    kvp_env_set_namer(&n.pe, namer, n.rt);
    kvp_rt_set_waiting(n.rt, kvn_say_waiting, tag);
    kvp_rt_set_remote_filter(n.rt, kvn_remote_ok, NULL);
    atomic_init(&n.shutdown, false);
    kvn_plink_init(&n.link, n.rt, &n.pe.env, o, tag);
    n.link.shutdown = &n.shutdown;
    int rc_exit = EXIT_CLEAN;
    n.http_boot = kvn_boot_hook_begin(o, tag, &rc_exit);
    if (rc_exit) return rc_exit;
    kv_status st = build(&n, o);
    if (st != KV_OK) {
        fprintf(stderr, "[%s] kvnode: start-up failed: %s\n", tag, kv_status_str(st));
        kvp_rt_stop(n.rt);
        kvp_net_free(n.net);
        kvn_boot_hook_end(n.http_boot);
        return EXIT_SIM;
    }
    fprintf(stderr, "[%s] kvnode %s up (engine %u, tp %u, %u blocks x %u B, transport %s)\n", tag, o->role, o->index,
            o->tp, o->pool_blocks, o->head_bytes * KV_HEADS / o->tp, o->transport);
    kv_wire_boot regs[KV_TP_MAX];
    uint32_t n_regs = p ? kvn_plink_registered(&n.link, o->tp, 0, regs) : 0;
    if ((rc_exit = kvn_boot_hook_up(n.http_boot, o, tag, regs, n_regs))) atomic_store(&n.shutdown, true);
    uint64_t next_stats = kvp_mono_ns() + (uint64_t)o->stats_ms * 1000000u;
    while (!atomic_load(&n.shutdown)) {
        kvn_nap_ms(10);
        if (!kvp_rt_link_up(n.rt, 0) && !kvn_plink_lost(&n.link, &rc_exit)) break;
        if (o->stats_ms && kvp_mono_ns() >= next_stats) {
            kvn_stats s;
            char line[1024];
            take_stats(&n, &s);
            kvn_stats_line(&s, line, sizeof line);
            fprintf(stderr, "[%s] stats %s\n", tag, line);
            next_stats += (uint64_t)o->stats_ms * 1000000u;
        }
    }
    kvn_stats s;
    char line[1024];
    take_stats(&n, &s);
    kvn_stats_line(&s, line, sizeof line);
    fprintf(stderr, "[%s] final %s\n", tag, line);
    kvp_net_counters nc;
    kvp_net_counters_get(n.net, &nc);
    fprintf(stderr, "[%s] net polls %llu events %llu sleeps %llu post_retries %llu full_waits %llu full_fails %llu\n",
            tag, (unsigned long long)nc.polls, (unsigned long long)nc.events, (unsigned long long)nc.sleeps,
            (unsigned long long)nc.post_retries, (unsigned long long)nc.full_waits, (unsigned long long)nc.full_fails);
    kvp_net_stop(n.net);
    kvp_rt_stop(n.rt);
    kv_engine_free(n.eng);
    kvp_net_free(n.net);
    kvp_rt_free(n.rt);
    kvn_boot_hook_end(n.http_boot);
#ifdef KVCONN_HAVE_RDMA
    if (n.verbs_open) kvt_rdma_ibv_close(&n.verbs);
#endif
    return rc_exit;
}
