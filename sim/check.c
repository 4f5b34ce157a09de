/* sim/check.c — the checker's dispatch: which oracle hears of which event
 * (see check.h for the families and check_int.h for their state). */
#include "sim/check_int.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/p2p.h"
#include "core/store.h"
#include "core/worker.h"

kv_status sim_check_new(sim_check **out) {
    sim_check *c = calloc(1, sizeof *c);
    if (!c) return KV_ENOMEM;
    *out = c;
    return KV_OK;
}

void sim_check_free(sim_check *c) { free(c); }

/* The actor table: what each actor of engine i's live process is. */
static void map_engine(sim_check *c, uint32_t i) {
    const kv_engine *e = c->v.eng[i];
    if (e->sched_actor < SIM_ACTORS_MAX)
        c->actor[e->sched_actor] = (chk_actor){.role = CHK_ACTOR_SCHED, .engine = (uint8_t)i};
    for (uint32_t r = 0; r < e->cfg.tp; r++) {
        uint32_t a = e->worker[r]->main_actor;
        if (a < SIM_ACTORS_MAX) c->actor[a] = (chk_actor){.role = CHK_ACTOR_MAIN, .engine = (uint8_t)i, .rank = (uint8_t)r};
        a = kv_conn_worker_p2p_actor(&e->worker[r]->conn);
        if (a < SIM_ACTORS_MAX)
            c->actor[a] = (chk_actor){.role = CHK_ACTOR_P2P, .engine = (uint8_t)i, .rank = (uint8_t)r};
    }
}

void sim_check_begin(sim_check *c, const sim_check_view *v) {
    c->v = *v;
    memset(c->actor, 0, sizeof c->actor);
    memset(c->req, 0, chk_n_reqs(c) * sizeof c->req[0]);
    c->n_held = 0;
    c->first_token_checks = 0;
    c->decode_checks = 0;
    c->next_deadline_ns = UINT64_MAX;
    c->store_evictions = 0;
    if (v->proxy->actor < SIM_ACTORS_MAX) c->actor[v->proxy->actor].role = CHK_ACTOR_PROXY;
    if (v->store && sim_store_actor(v->store) < SIM_ACTORS_MAX) c->actor[sim_store_actor(v->store)].role = CHK_ACTOR_STORE;
    for (uint32_t i = 0; i < v->n_eng; i++) map_engine(c, i);
    for (uint32_t id = 0; id < chk_n_reqs(c); id++) c->req[id].hold_deadline_ns = UINT64_MAX;
    chk_outcome_begin(c);
    chk_answer_begin(c);
    chk_cache_begin(c);
    chk_saved_begin(c);
}

void sim_check_event(sim_check *c, uint32_t actor, const kv_msg *m) {
    c->v.res->armed[KV_INV_OWNER]++;  /* the core's owner checks ran on this event, */
    c->v.res->armed[KV_INV_ASSERT]++; /* and its actor's invariant function on return (core/assert.h) */
    chk_grant_event(c); /* the network's grant check, at the deliveries before this event */
    if (actor >= SIM_ACTORS_MAX) return;
    const chk_actor *a = &c->actor[actor];
    if (m->kind == KV_M_P2P_RECV_START) chk_outcome_pull(c, m); /* on D's receiver */
    if (m->kind == KV_M_STORE_SAVE) chk_saved_job(c, m);        /* on a store sender */
    switch (a->role) {
    case CHK_ACTOR_SCHED:
        /* Pools change only on their engine's scheduler actor (the owner). */
        chk_pool_event(c, a->engine);
        if (m->kind == KV_M_STEP_RESULT) chk_hold_sched(c, a->engine);
        if (m->kind == KV_M_ABORT) chk_stray_abort(c, a->engine, m);
        if (m->kind == KV_M_ADD_REQ) {
            chk_cache_arrive(c, a->engine, m);
            chk_saved_arrive(c, a->engine, m);
            chk_hit_arrive(c, a->engine, m);
        }
        break;
    case CHK_ACTOR_MAIN:
        if (m->kind == KV_M_EXECUTE) {
            chk_data_execute(c, a->engine, a->rank, m);
            chk_hit_execute(c, a->engine, a->rank, m);
        }
        if (m->kind == KV_M_P2P_RECV_DONE && m->len >= sizeof(kv_m_recv_done)) {
            const kv_m_recv_done *d = m->payload;
            chk_outcome_load_done(c, a->engine, a->rank, d->d_req, d->failed);
        }
        if (m->kind == KV_M_STORE_LOAD_DONE && m->len >= offsetof(kv_m_store_load_done, failed)) {
            uint32_t id, n_failed;
            memcpy(&id, m->payload, 4);
            memcpy(&n_failed, (const uint8_t *)m->payload + 4, 4);
            chk_outcome_load_done(c, a->engine, a->rank, id, n_failed != 0);
        }
        if (m->kind == KV_M_STORE_SAVE_DONE) chk_saved_done(c, m);
        break;
    case CHK_ACTOR_PROXY:
        if (m->kind == KV_M_PROXY_SUBMIT) chk_outcome_submit(c, m);
        if (m->kind == KV_M_REQ_DONE && m->len >= sizeof(kv_m_req_done)) {
            kv_m_req_done d;
            memcpy(&d, m->payload, sizeof d);
            chk_outcome_done(c, &d);
            chk_hold_done(c, &d);
            chk_cache_done(c, &d);
            chk_saved_req_done(c, &d);
        }
        break;
    case CHK_ACTOR_STORE: chk_outcome_store(c); break;
    case CHK_ACTOR_P2P:
        chk_answer_event(c, a->engine, a->rank, m);
        chk_outcome_sender(c, a->engine, a->rank);
        break;
    default: break;
    }
}

void sim_check_fault(sim_check *c, const sim_fault *f) {
    chk_outcome_fault(c, f);
    chk_answer_fault(c, f);
}

void sim_check_engine_down(sim_check *c, uint32_t i) {
    const kv_engine *e = c->v.eng[i];
    if (e->sched_actor < SIM_ACTORS_MAX) c->actor[e->sched_actor].role = CHK_ACTOR_OTHER;
    for (uint32_t r = 0; r < e->cfg.tp; r++) {
        uint32_t a = e->worker[r]->main_actor, s = kv_conn_worker_p2p_actor(&e->worker[r]->conn);
        if (a < SIM_ACTORS_MAX) c->actor[a].role = CHK_ACTOR_OTHER;
        if (s < SIM_ACTORS_MAX) c->actor[s].role = CHK_ACTOR_OTHER;
    }
    chk_hold_engine_down(c, i);
    chk_cache_engine_down(c, i);
    chk_saved_off(c, "an engine crashed");
}

void sim_check_engine_up(sim_check *c, uint32_t i) { map_engine(c, i); }

void sim_check_store_up(sim_check *c) {
    uint32_t a = sim_store_actor(c->v.store);
    if (a < SIM_ACTORS_MAX) c->actor[a].role = CHK_ACTOR_STORE;
}

void sim_check_time(sim_check *c, uint64_t next_ns) {
    if (next_ns > c->next_deadline_ns) chk_hold_time(c, next_ns);
}

void sim_check_end(sim_check *c, bool timed_out) {
    sim_rt_set_current(c->v.rt, KV_ACTOR_NONE);
    chk_grant_end(c);
    if (!chk_violated(c)) chk_live_end(c, timed_out);
    if (!chk_violated(c)) chk_pool_end(c);
    if (!chk_violated(c)) chk_outcome_end(c);
    if (!chk_violated(c)) chk_answer_end(c, timed_out);
    if (!chk_violated(c)) chk_hold_end(c);
    if (!chk_violated(c)) chk_data_end(c);
    if (!chk_violated(c)) chk_cache_end(c);
    if (!chk_violated(c)) chk_saved_end(c);
    if (!chk_violated(c)) chk_hit_end(c);
}

void sim_check_teardown(sim_check *c, const sim_teardown_report *t) {
    sim_rt_set_current(c->v.rt, KV_ACTOR_NONE);
    if (!chk_violated(c)) chk_pool_teardown(c, t);
}

/* ---- causes ----------------------------------------------------------------- */

void chk_touch(sim_check *c, uint32_t id, uint32_t cause) {
    if (id >= chk_n_reqs(c) || cause >= CHK_C_COUNT) return;
    c->req[id].causes |= 1u << cause;
    chk_add_fails(&c->req[id], cause == CHK_C_MIXED_CONN ? CHK_UNBOUNDED : 1u);
}

void chk_add_fails(chk_req *q, uint32_t n) {
    q->n_touch = n >= CHK_UNBOUNDED - q->n_touch ? CHK_UNBOUNDED : q->n_touch + n;
}

bool chk_ended_by(const sim_check *c, uint32_t id, uint64_t t) {
    const kv_proxy_req *q = kv_proxy_slot(c->v.proxy, id);
    const chk_req *r = &c->req[id];
    /* over at the proxy, and on P too: D may finish first (a local
     * recompute) while P still computes, and loads, the prompt */
    return q->used && q->id == id && q->outcome != KV_OUT_PENDING && q->done_ns <= t && r->p_done_ns &&
           r->p_done_ns <= t;
}

void chk_touch_since(sim_check *c, uint32_t cause, uint64_t t) {
    for (uint32_t id = 0; id < chk_n_reqs(c); id++)
        if (!chk_ended_by(c, id, t)) chk_touch(c, id, cause);
}

void chk_touch_live(sim_check *c, uint32_t cause) { chk_touch_since(c, cause, chk_now(c)); }

const char *chk_cause_name(uint32_t cause) {
    switch (cause) {
    case CHK_C_FEWER_BLOCKS: return "d_extra";
    case CHK_C_TURNED_AWAY: return "turned_away";
    case CHK_C_EXPIRED: return "p_expired";
    case CHK_C_MIXED_CONN: return "mixed_connectors";
    case CHK_C_STORE_FULL: return "store_full";
    case CHK_C_SLOW_P: return "p_too_slow";
    case CHK_C_P2P_FULL: return "p2p_table_full";
    default: return sim_fault_name(cause);
    }
}

void chk_causes_str(uint32_t causes, char *buf, size_t cap) {
    size_t n = 0;
    buf[0] = 0;
    for (uint32_t k = 0; k < CHK_C_COUNT && n < cap; k++) {
        if (!(causes >> k & 1u)) continue;
        int w = snprintf(buf + n, cap - n, "%s%s", n ? "," : "", chk_cause_name(k));
        if (w < 0) break;
        n += (size_t)w;
    }
    if (!causes) snprintf(buf, cap, "none");
}
