/* apps/kvnode/proxy_link.c — an engine's link to the proxy's process: the
 * dial, P's bootstrap relay, and taking a new proxy when the link is lost;
 * see proxy_link.h. */
#include "apps/kvnode/proxy_link.h"

#include <stdio.h>
#include <string.h>

#include "core/worker.h"

#define MS 1000000ull
#define DRAIN_POLL_MS 50u

void kvn_plink_init(kvn_plink *l, kvp_rt *rt, const kv_env *env, const kvn_opts *o, const char *tag) {
    memset(l, 0, sizeof *l);
    l->rt = rt;
    l->env = env;
    l->o = o;
    l->tag = tag;
    l->proxy = l->boot = l->relay = l->relay_to = l->admin = KV_ACTOR_NONE;
    pthread_mutex_init(&l->mu, NULL);
    /* the proxy learns this engine's actors only from kvp_rt_publish: after a
     * redial, once the core answers to the new proxy */
    kvp_rt_set_dir_on_publish(rt, true);
}

kv_status kvn_plink_dial(kvn_plink *l, uint64_t timeout_ns) {
    uint64_t until = kvp_mono_ns() + timeout_ns;
    uint32_t pproc = 0;
    kv_status st = kvp_rt_dial(l->rt, l->o->proxy, timeout_ns, &pproc);
    if (st != KV_OK) {
        kv_logf(l->env, KV_LOG_ERROR, "cannot reach the proxy at %s: %s", l->o->proxy, kv_status_str(st));
        return st;
    }
    uint64_t now = kvp_mono_ns();
    st = kvp_rt_lookup(l->rt, "proxy", now < until ? until - now : 0, &l->proxy);
    now = kvp_mono_ns();
    if (st == KV_OK) st = kvp_rt_lookup(l->rt, "bootstrap", now < until ? until - now : 0, &l->boot);
    return st;
}

/* ---- P's relay in front of the proxy's bootstrap ------------------------------------ */

/* Forwards first, then keeps a copy of each REGISTER (a new proxy's
 * bootstrap gets them again, and the HTTP bootstrap registers from them). */
static void relay_handle(void *self, const kv_msg *m) {
    kvn_plink *l = self;
    kv_status st = kv_rt_post(kvp_rt_iface(l->rt), l->relay_to, m->kind, m->payload, m->len);
    if (st != KV_OK) kv_logf(l->env, KV_LOG_WARN, "bootstrap relay: a message to the bootstrap actor lost: %s",
                             kv_status_str(st));
    if (m->kind == KV_M_BOOT_REG && m->len == sizeof(kv_wire_boot)) {
        pthread_mutex_lock(&l->mu);
        if (l->n_regs < KV_TP_MAX) memcpy(&l->regs[l->n_regs++], m->payload, sizeof(kv_wire_boot));
        pthread_mutex_unlock(&l->mu);
    }
}

kv_status kvn_plink_relay(kvn_plink *l, uint32_t node, uint32_t *boot) {
    if (strcmp(l->o->role, "prefill") != 0) {
        *boot = l->boot;
        return KV_OK;
    }
    char name[KVP_NAME_MAX];
    snprintf(name, sizeof name, "P%u.bootrelay", l->o->index);
    l->relay_to = l->boot;
    kv_status st = kv_rt_spawn(kvp_rt_iface(l->rt), name, node, relay_handle, l, 1u << 16, &l->relay);
    if (st == KV_OK) *boot = l->relay;
    return st;
}

uint32_t kvn_plink_registered(kvn_plink *l, uint32_t tp, uint32_t ms, kv_wire_boot *out) {
    uint32_t n = 0;
    for (uint32_t waited = 0;; waited += 5) {
        pthread_mutex_lock(&l->mu);
        n = l->n_regs;
        if (out) memcpy(out, l->regs, sizeof l->regs);
        pthread_mutex_unlock(&l->mu);
        if (n >= tp || waited >= ms) return n;
        kvn_nap_ms(5);
    }
}

/* ---- a lost proxy --------------------------------------------------------------------- */

static uint64_t left_ns(uint64_t until) {
    uint64_t now = kvp_mono_ns();
    return now < until ? until - now : 0;
}

static void nothing(void *arg) { (void)arg; }

/* On the scheduler's thread, after every message the old proxy's link
 * delivered (a call is queued behind them): completions go nowhere from now
 * on, and the ids of every request the engine holds or has queued. */
typedef struct orphans {
    kv_engine *e;
    uint32_t n;
    uint32_t id[KV_ENGINE_REQS_MAX + KV_ENGINE_INQ(KV_ENGINE_REQS_MAX)];
} orphans;

static void take_orphans(void *arg) {
    orphans *c = arg;
    kv_engine *e = c->e;
    e->cfg.proxy_actor = KV_ACTOR_NONE;
    c->n = 0;
    for (uint32_t s = 0; s < e->cfg.reqs_max; s++)
        if (e->live >> s & 1u) c->id[c->n++] = e->live_id[s];
    for (uint32_t i = 0; i < e->n_inq; i++)
        if (e->inq[i].kind == KV_M_ADD_REQ) c->id[c->n++] = e->inq[i].spec.id;
}

/* Every request the old proxy had sent ends through the scheduler's own
 * ABORT (a finished one, held for its send, is left to the connector: the
 * abort is a no-op for it). */
static kv_status abort_orphans(kvn_plink *l) {
    static orphans c; /* main thread only */
    c.e = l->eng;
    kv_status st = kvp_rt_call(l->rt, l->eng->sched_actor, take_orphans, &c);
    for (uint32_t i = 0; i < c.n && st == KV_OK; i++) {
        kv_m_abort a = {.id = c.id[i]};
        st = kvn_post_retry(l->rt, l->eng->sched_actor, KV_M_ABORT, &a, sizeof a);
    }
    if (st == KV_OK)
        fprintf(stderr, "[%s] kvnode: the proxy's link is lost: aborting the %u request(s) it had sent here\n", l->tag,
                c.n);
    return st;
}

typedef struct holdings { const kv_engine *e; uint32_t live, queued, conn; bool pools; } holdings;

/* With every actor parked: what the engine still holds. */
static void count_holdings(void *arg) {
    holdings *h = arg;
    const kv_engine *e = h->e;
    h->live = kv_engine_live_reqs(e);
    h->queued = e->n_inq;
    h->conn = kv_engine_conn_state(e);
    h->pools = true;
    for (uint32_t g = 0; g < e->cfg.n_groups; g++) {
        kv_pool_report r;
        kv_engine_pool_report(e, g, &r);
        h->pools = h->pools && kvn_pool_clean(&r);
    }
}

/* Waits until the engine holds nothing (bounded by until): no request of
 * the old proxy can then end after a new one is taken (ids start again at 0). */
static bool drained(kvn_plink *l, uint64_t t0, uint64_t until) {
    uint64_t next = t0 + 1000u * MS;
    for (;;) {
        holdings h = {.e = l->eng};
        if (kvp_rt_stop_world(l->rt, count_holdings, &h) != KV_OK) return false;
        if (!h.live && !h.queued && !h.conn && h.pools) return true;
        uint64_t now = kvp_mono_ns();
        if (now >= until) {
            fprintf(stderr, "[%s] kvnode: the lost proxy's requests did not end in %u ms (%u live, %u queued, %u "
                            "connector entries)\n", l->tag, l->o->proxy_wait_ms, h.live, h.queued, h.conn);
            return false;
        }
        if (now >= next) {
            char what[160];
            snprintf(what, sizeof what, "the lost proxy's requests to end (%u live, %u queued, %u connector entries)",
                     h.live, h.queued, h.conn);
            kvn_say_waiting((void *)l->tag, what, (now - t0) / MS, (until - t0) / MS);
            next += 1000u * MS;
        }
        kvn_nap_ms(DRAIN_POLL_MS);
    }
}

/* With every actor parked: the core posts to the new proxy's actors. */
static void point_at(void *arg) {
    kvn_plink *l = arg;
    kv_engine *e = l->eng;
    e->cfg.proxy_actor = l->proxy;
    if (l->relay != KV_ACTOR_NONE) l->relay_to = l->boot; /* P's senders post to the relay */
    else
        for (uint32_t r = 0; r < e->cfg.tp; r++) e->worker[r]->cfg.bootstrap_actor = l->boot; /* D's receivers query it */
}

/* P: the new bootstrap gets every rank's REGISTER again, before the new
 * proxy learns this engine's actors (the same link carries both, in order). */
static kv_status register_again(kvn_plink *l) {
    kv_wire_boot regs[KV_TP_MAX];
    uint32_t n = l->relay == KV_ACTOR_NONE ? 0 : kvn_plink_registered(l, 0, 0, regs);
    kv_status st = KV_OK;
    for (uint32_t i = 0; i < n && st == KV_OK; i++) st = kvn_post_retry(l->rt, l->boot, KV_M_BOOT_REG, &regs[i], sizeof regs[i]);
    return st;
}

/* After a SHUTDOWN that came just before the link closed (the proxy's
 * normal end): has the admin actor taken it? A call queued behind it says. */
static bool told_to_stop(kvn_plink *l) {
    if (l->admin != KV_ACTOR_NONE) (void)kvp_rt_call(l->rt, l->admin, nothing, NULL);
    return atomic_load(l->shutdown);
}

static bool take_new_proxy(kvn_plink *l, uint64_t t0, uint64_t until) {
    if (abort_orphans(l) != KV_OK || !drained(l, t0, until)) return false;
    fprintf(stderr, "[%s] kvnode: every request of the lost proxy ended; redialling %s (gives up at %.0f s)\n",
            l->tag, l->o->proxy, (double)l->o->proxy_wait_ms / 1000.0);
    kv_status st = kvn_plink_dial(l, left_ns(until));
    if (st == KV_OK) st = kvp_rt_stop_world(l->rt, point_at, l);
    if (st == KV_OK) st = register_again(l);
    if (st == KV_OK) st = kvp_rt_publish(l->rt);
    if (st != KV_OK) {
        fprintf(stderr, "[%s] kvnode: no new proxy at %s: %s\n", l->tag, l->o->proxy, kv_status_str(st));
        return false;
    }
    l->takes++;
    fprintf(stderr, "[%s] kvnode: took the new proxy at %s (%u since start): answering to it\n", l->tag, l->o->proxy,
            l->takes);
    return true;
}

bool kvn_plink_lost(kvn_plink *l, int *rc) {
    if (told_to_stop(l)) {
        *rc = EXIT_CLEAN;
        return false;
    }
    if (!l->o->proxy_wait_ms) {
        fprintf(stderr, "[%s] kvnode: the proxy went away; stopping (--proxy-wait-ms 0)\n", l->tag);
        *rc = EXIT_PEER_LOST;
        return false;
    }
    uint64_t t0 = kvp_mono_ns(), until = t0 + (uint64_t)l->o->proxy_wait_ms * MS;
    if (take_new_proxy(l, t0, until)) return true;
    fprintf(stderr, "[%s] kvnode: the proxy went away and no new one was taken in %u ms; stopping\n", l->tag,
            l->o->proxy_wait_ms);
    *rc = EXIT_PEER_LOST;
    return false;
}
