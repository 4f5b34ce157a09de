/* core/connector.c — the connector factory: builds, frees and inspects
 * either half of every configuration (p2p, store, and the MultiConnector
 * of both in either order).
 *
 * The free and state dispatchers go by a half's ops name, and take any name
 * but "p2p" and "store" for a MultiConnector. So the factory's
 * postcondition (asserted, INV-ASSERT: core/assert.h): a half it built has
 * ops, state, and the name of the kind asked for. */
#include <string.h>

#include "core/assert.h"
#include "core/msgs.h"
#include "core/multi.h"
#include "core/p2p.h"
#include "core/store.h"

static const char *const kind_names[KV_CONN_KIND_COUNT] = {
    [KV_CONN_P2P] = "p2p",
    [KV_CONN_STORE] = "store",
    [KV_CONN_MULTI_P2P_STORE] = "multi(p2p,store)",
    [KV_CONN_MULTI_STORE_P2P] = "multi(store,p2p)",
};

const char *kv_conn_kind_name(uint32_t kind) {
    return kind < KV_CONN_KIND_COUNT && kind_names[kind] ? kind_names[kind] : "?";
}

uint32_t kv_conn_kind_parse(const char *name) {
    for (uint32_t k = 1; k < KV_CONN_KIND_COUNT; k++)
        if (!strcmp(name, kind_names[k])) return k;
    return 0;
}

bool kv_conn_kind_has_store(uint32_t kind) { return kind >= KV_CONN_STORE && kind < KV_CONN_KIND_COUNT; }

static const char *family_of(kv_conn_kind kind) {
    return kind == KV_CONN_P2P ? "p2p" : kind == KV_CONN_STORE ? "store" : "multi";
}

/* The factory's postcondition: a built half carries its kind's name. */
static kv_status built(const kv_env *env, uint32_t engine, kv_status st, kv_conn_kind kind, const char *name,
                       const void *self) {
    if (st != KV_OK) return st;
    KV_ASSERT(env, engine, name && self && !strcmp(name, family_of(kind)), "engine %u connector %s: built as %s (state %d)",
              engine, kv_conn_kind_name(kind), name ? name : "-", self != NULL);
    return st;
}

static void children(kv_conn_kind kind, kv_conn_kind out[KV_MULTI_CHILDREN]) {
    bool p2p_first = kind == KV_CONN_MULTI_P2P_STORE;
    out[0] = p2p_first ? KV_CONN_P2P : KV_CONN_STORE;
    out[1] = p2p_first ? KV_CONN_STORE : KV_CONN_P2P;
}

kv_status kv_conn_sched_new(kv_engine *e, kv_conn_kind kind, kv_conn_sched *out) {
    kv_conn_kind kids[KV_MULTI_CHILDREN];
    kv_status st = KV_EINVAL;
    switch (kind) {
    case KV_CONN_P2P: st = kv_p2p_sched_new(e, out); break;
    case KV_CONN_STORE: st = kv_store_sched_new(e, out); break;
    case KV_CONN_MULTI_P2P_STORE:
    case KV_CONN_MULTI_STORE_P2P: children(kind, kids); st = kv_multi_sched_new(e, kids, out); break;
    case KV_CONN_KIND_COUNT: return KV_EINVAL;
    }
    return built(e->env, e->cfg.index, st, kind, st == KV_OK && out->ops ? out->ops->name : NULL,
                 st == KV_OK ? out->self : NULL);
}

void kv_conn_sched_free(kv_engine *e, kv_conn_sched *c) {
    if (!c->ops) return;
    if (!strcmp(c->ops->name, "p2p")) kv_p2p_sched_free(e, c);
    else if (!strcmp(c->ops->name, "store")) kv_store_sched_free(e, c);
    else kv_multi_sched_free(e, c);
}

uint32_t kv_conn_sched_state(const kv_conn_sched *c) {
    if (!c->ops) return 0;
    if (!strcmp(c->ops->name, "p2p")) return kv_p2p_sched_state(c);
    if (!strcmp(c->ops->name, "store")) return kv_store_sched_state(c);
    return kv_multi_sched_state(c);
}

kv_status kv_conn_worker_new(kv_worker *w, kv_conn_kind kind, kv_conn_worker *out) {
    kv_conn_kind kids[KV_MULTI_CHILDREN];
    kv_status st = KV_EINVAL;
    switch (kind) {
    case KV_CONN_P2P: st = kv_p2p_worker_new(w, out); break;
    case KV_CONN_STORE: st = kv_store_worker_new(w, out); break;
    case KV_CONN_MULTI_P2P_STORE:
    case KV_CONN_MULTI_STORE_P2P: children(kind, kids); st = kv_multi_worker_new(w, kids, out); break;
    case KV_CONN_KIND_COUNT: return KV_EINVAL;
    }
    return built(w->env, w->cfg.index, st, kind, st == KV_OK && out->ops ? out->ops->name : NULL,
                 st == KV_OK ? out->self : NULL);
}

void kv_conn_worker_free(kv_worker *w, kv_conn_worker *c) {
    if (!c->ops) return;
    if (!strcmp(c->ops->name, "p2p")) kv_p2p_worker_free(w, c);
    else if (!strcmp(c->ops->name, "store")) kv_store_worker_free(w, c);
    else kv_multi_worker_free(w, c);
}

uint32_t kv_conn_worker_state(const kv_conn_worker *c) {
    if (!c->ops) return 0;
    if (!strcmp(c->ops->name, "p2p")) return kv_p2p_worker_state(c);
    if (!strcmp(c->ops->name, "store")) return kv_store_worker_state(c);
    return kv_multi_worker_state(c);
}

uint32_t kv_conn_worker_p2p_actor(const kv_conn_worker *c) {
    if (!c->ops) return KV_ACTOR_NONE;
    if (!strcmp(c->ops->name, "p2p")) return kv_p2p_worker_actor(c);
    if (strcmp(c->ops->name, "multi")) return KV_ACTOR_NONE;
    for (uint32_t i = 0; i < KV_MULTI_CHILDREN; i++) {
        uint32_t a = kv_conn_worker_p2p_actor(kv_multi_worker_child(c, i));
        if (a != KV_ACTOR_NONE) return a;
    }
    return KV_ACTOR_NONE;
}

bool kv_conn_worker_p2p_saturated(const kv_conn_worker *c) {
    if (!c->ops) return false;
    if (!strcmp(c->ops->name, "p2p")) return kv_p2p_worker_saturated(c);
    if (strcmp(c->ops->name, "multi")) return false;
    for (uint32_t i = 0; i < KV_MULTI_CHILDREN; i++)
        if (kv_conn_worker_p2p_saturated(kv_multi_worker_child(c, i))) return true;
    return false;
}

const char *kv_msg_family(uint32_t kind) {
    if (kind >= KV_M_P2P_RECV_START && kind <= KV_M_P2P_SEND_DONE) return "p2p";
    if (kind >= KV_M_STORE_LOOKUP && kind <= KV_M_STORE_LOAD_TIMEOUT) return "store";
    return "";
}
