/* sim/check_outcome.c — INV-OUTCOME: each request ends as the faults that
 * touched it allow, and no worse.
 *
 * Rule (docs/oracles.md has the table of causes):
 *  1. A request that nothing touched ends ok at the proxy, with D's status
 *     FINISHED_LENGTH_CAPPED and exactly its max_tokens output tokens, and no
 *     load of it failed, on P or D — under either load-failure policy.
 *  2. Under policy `recompute`, a touched request still ends ok unless a
 *     cause that may end it otherwise touched it ("fatal" below): an abort of
 *     it, the crash of its own P or D engine, or a refusal on arrival.
 *  3. A request ends aborted only if an abort (abort, abort_on_kv) touched it.
 *  4. Its failed loads (on any one rank) number at most what the causes
 *     that touched it can fail: one each, a store get failure its arg + 1,
 *     and no bound once a lasting fault (bootstrap down, delay, reset, dead
 *     peer) or mixed connector configurations touched it.
 *
 * A cause touches every request that is not over (ended at the proxy and
 * on P) when it strikes: engines share block pools, so a fault that leaves
 * blocks held until a timeout starves the other requests of the pool, and
 * their holds starve the engines they wait on in turn. This over-approximates
 * on purpose: the oracle never blames a fault-free path for what a fault did,
 * and every request that ended before the first cause (in fault-free runs,
 * all of them) is held to rule 1. The exception is a fault aimed at one P
 * engine's senders (sender_exception, err_reqs, drop_response, te_error):
 * it fails the pulls that engine answers, so it touches only the requests
 * whose P is that engine; and a dead or hung engine (peer_crash, peer_hang)
 * fails what waits on it, so it touches only the requests whose P or D it
 * is. What these do to the others goes through causes
 * that are observed when they happen (a P hold that the reap ended before D
 * asked, a pull that waited out P's ready wait, a full table), each of which
 * touches the requests it hits. What is per kind is whom a cause may end
 * otherwise than ok (fatal_of) and how many loads it may fail (fail_weight).
 * Causes that are not faults (docs/oracles.md): the plan telling D a longer
 * prompt than P's, mixed connector configurations, a refusal on arrival,
 * the store evicting keys for room, a P2P table full, P too slow for D's
 * pull (its ready wait ran out) and P's hold ended by the reap when D had
 * not asked in time (INV-HOLD checks that the reap came at the expiry). Each
 * is observed as it happens and checked before it excuses anything. */
#include "sim/check_int.h"

#include <string.h>

#include "core/p2p.h"

/* A wait that ran out is counted from a message's arrival, which trails
 * what the checker sees by a network latency at most. */
#define CHK_WAIT_TOLERANCE_NS 1000000ull

/* Which requests a fault may end otherwise than ok even under `recompute`. */
typedef enum fatal_scope {
    FS_NONE = 0,
    FS_REQ,    /* the target request */
    FS_ENGINE, /* requests whose P or D is the target engine (P engines first) */
} fatal_scope;

/* A fault touches the requests that have not ended when it strikes (all of
 * them, or those of one engine: the comment at the top). The column below is the
 * part that is per fault kind: whom it may end otherwise than ok under
 * `recompute` (a recompute survives every other fault). */
static const uint8_t fatal_of[SIM_F_KIND_COUNT] = {
    [SIM_F_ABORT] = FS_REQ,
    [SIM_F_ABORT_ON_KV] = FS_REQ,
    [SIM_F_PEER_CRASH] = FS_ENGINE,
    [SIM_F_PEER_HANG] = FS_ENGINE,
};

/* How many loads of one request a fault may fail (rule 4): a get failure
 * fails its next arg + 1 gets, whichever request retries them; a fault that
 * lasts (the bootstrap down, a delay, a dead peer) fails every attempt made
 * while it does, so it sets no bound; the rest fail one. */
static uint32_t fail_weight(const sim_fault *f) {
    switch ((sim_fault_kind)f->kind) {
    case SIM_F_STORE_GET_FAIL: return f->arg % 8u + 1u;
    case SIM_F_STORE_EXISTS_FAIL: return 0; /* a failed save or a miss: no load fails */
    case SIM_F_BOOT_DOWN:
    case SIM_F_NET_DELAY:
    case SIM_F_NET_RESET:
    case SIM_F_PEER_CRASH:
    case SIM_F_PEER_HANG:
    case SIM_F_STORE_CRASH: return CHK_UNBOUNDED;
    case SIM_F_ABORT:
    case SIM_F_ABORT_ON_KV:
    case SIM_F_SENDER_EXCEPTION:
    case SIM_F_SENDER_ERR_REQ:
    case SIM_F_SENDER_DROP_RESP:
    case SIM_F_TE_ERROR:
    case SIM_F_STORE_PUT_FAIL:
    case SIM_F_STORE_EVICT:
    case SIM_F_STORE_PRESSURE:
    case SIM_F_KIND_COUNT: return 1u;
    }
    return 1u;
}

/* A fault on one P engine's senders: touches that engine's requests only. */
static bool p_scoped(uint32_t kind) {
    return kind == SIM_F_SENDER_EXCEPTION || kind == SIM_F_SENDER_ERR_REQ || kind == SIM_F_SENDER_DROP_RESP ||
           kind == SIM_F_TE_ERROR;
}

/* A dead or hung engine: touches the requests whose P or D it is only. */
static bool engine_scoped(uint32_t kind) { return kind == SIM_F_PEER_CRASH || kind == SIM_F_PEER_HANG; }

static bool of_engine(const sim_check *c, uint32_t id, uint32_t target) {
    uint32_t e = target % (c->v.cfg->n_p + c->v.cfg->n_d);
    return chk_p_of(c, id) == e || chk_d_of(c, id) == e;
}

static bool is_fatal(const sim_check *c, const sim_fault *f, uint32_t id) {
    const sim_world_cfg *cfg = c->v.cfg;
    switch ((fatal_scope)fatal_of[f->kind]) {
    case FS_REQ: return id == f->target % (cfg->n_reqs ? cfg->n_reqs : 1u);
    case FS_ENGINE: return of_engine(c, id, f->target);
    case FS_NONE: return false;
    }
    return false;
}

void chk_outcome_begin(sim_check *c) {
    for (uint32_t id = 0; id < chk_n_reqs(c); id++) c->req[id].p_engine = chk_p_of(c, id);
    /* P and D configured differently: D may pull from a P without a P2P
     * side (every pull fails), or never pull from a P that holds for it */
    if (c->v.cfg->conn_p != c->v.cfg->conn_d) chk_touch_live(c, CHK_C_MIXED_CONN);
}

/* The proxy took a request in: one whose D is told a longer prompt than P's
 * fails its transfer from now on, and P holds its blocks until the expiry. */
void chk_outcome_submit(sim_check *c, const kv_msg *m) {
    if (m->len < sizeof(kv_m_proxy_submit)) return;
    kv_m_proxy_submit sub;
    memcpy(&sub, m->payload, sizeof sub);
    if (sub.d_extra_tokens) chk_touch_live(c, CHK_C_FEWER_BLOCKS);
}

void chk_outcome_fault(sim_check *c, const sim_fault *f) {
    if (f->kind == 0 || f->kind >= SIM_F_KIND_COUNT) return;
    for (uint32_t id = 0; id < chk_n_reqs(c); id++) {
        if (chk_ended_by(c, id, chk_now(c))) continue;
        if (p_scoped(f->kind) && chk_p_of(c, id) != f->target % c->v.cfg->n_p) continue;
        if (engine_scoped(f->kind) && !of_engine(c, id, f->target)) continue;
        chk_touch(c, id, f->kind);
        chk_add_fails(&c->req[id], fail_weight(f) - 1u); /* chk_touch counted one */
        if (is_fatal(c, f, id)) c->req[id].fatal = true;
    }
}

void chk_outcome_done(sim_check *c, const kv_m_req_done *d) {
    if (d->id >= chk_n_reqs(c)) return;
    chk_req *q = &c->req[d->id];
    if (d->refused) { /* turned away on arrival (no free slot, or it can never fit) */
        chk_touch(c, d->id, CHK_C_TURNED_AWAY);
        q->fatal = true;
    }
    if (d->engine == q->p_engine && !q->p_done_ns) q->p_done_ns = chk_now(c);
    if (d->engine != chk_d_of(c, d->id) || q->d_done) return;
    q->d_done = true;
    q->d_status = d->status;
    q->d_output = d->num_output;
    q->d_phase = d->phase;
    q->d_end_ns = chk_now(c);
}

/* After the store's event: keys it evicted to make room (its capacity is
 * the scenario's) may be keys a lookup already promised to a load. */
void chk_outcome_store(sim_check *c) {
    uint64_t ev = sim_store_get_stats(c->v.store)->evictions;
    if (ev == c->store_evictions) return;
    c->store_evictions = ev;
    chk_touch_live(c, CHK_C_STORE_FULL);
}

/* After an event of a P2P sender or receiver: when one of its bounded tables
 * is full, the pulls it has no room for fail (overload shedding: "sender
 * busy", "no free batch"); every request not over may be one of them. */
void chk_outcome_sender(sim_check *c, uint32_t engine, uint32_t rank) {
    if (kv_conn_worker_p2p_saturated(&c->v.eng[engine]->worker[rank]->conn)) chk_touch_live(c, CHK_C_P2P_FULL);
}

/* D's worker asked its receiver to pull a request. */
void chk_outcome_pull(sim_check *c, const kv_msg *m) {
    if (m->len < sizeof(kv_p2p_pull)) return;
    uint32_t id;
    memcpy(&id, m->payload, sizeof id); /* kv_p2p_pull.d_req, its first field */
    if (id < chk_n_reqs(c) && !c->req[id].pull_ns) c->req[id].pull_ns = chk_now(c);
}

/* Request id's load failed now. A pull answered only when P's
 * ready wait (the abort timeout, counted from the pull's arrival) ran out,
 * for a request P had not finished by then, failed because P was busy: under
 * overload P and D can fill each other's pools (P holding finished requests
 * D has no room to pull, D holding blocks for requests P has no room to
 * compute) until a timeout breaks the cycle. Every request not over when
 * the pull began may have waited behind it. */
static void load_failed(sim_check *c, uint32_t id) {
    chk_req *q = &c->req[id];
    uint64_t deadline = q->pull_ns + c->v.cfg->abort_timeout_ns; /* of P's ready wait */
    if (!q->pull_ns || chk_now(c) + CHK_WAIT_TOLERANCE_NS < deadline) return;
    if (q->p_done_ns && q->p_done_ns + CHK_WAIT_TOLERANCE_NS < deadline) return; /* P was ready in time */
    chk_touch_since(c, CHK_C_SLOW_P, q->pull_ns);
}

/* D's worker heard that a load of request id ended (a P2P pull's
 * RECV_DONE, a store load's LOAD_DONE), failed or not: the one place both
 * kinds of failure meet, whichever way the connector then reports them
 * (request-level failed_recving or invalid blocks). */
void chk_outcome_load_done(sim_check *c, uint32_t engine, uint32_t rank, uint32_t id, bool failed) {
    if (!failed || id >= chk_n_reqs(c) || rank >= KV_TP_MAX) return;
    chk_req *q = &c->req[id];
    uint8_t *n = &q->rank_fails[engine < c->v.cfg->n_p ? 0 : 1][rank];
    if (*n < UINT8_MAX) (*n)++;
    if (*n > q->load_errors) q->load_errors = *n;
    load_failed(c, id);
}

static void check_one(sim_check *c, uint32_t id) {
    const kv_proxy_req *pq = kv_proxy_slot(c->v.proxy, id);
    const chk_req *q = &c->req[id];
    const sim_req_plan *plan = &c->v.cfg->req[id];
    uint32_t want_out = plan->max_tokens ? plan->max_tokens : 1u;
    static const char *const out_name[] = {"pending", "ok", "error", "aborted"};
    const char *got = out_name[pq->outcome & 3u];
    char why[160];
    chk_causes_str(q->causes, why, sizeof why);
    /* armed: requests held to "ends ok" (rule 1, or rule 2 under recompute) */
    bool recompute = c->v.cfg->policy == KV_POLICY_RECOMPUTE;
    c->v.res->armed[KV_INV_OUTCOME] += !q->causes || (recompute && !q->fatal);
    if (!q->causes) {
        if (pq->outcome != KV_OUT_OK)
            kv_violate(c->v.env, KV_INV_OUTCOME, chk_d_of(c, id), id,
                       "request %u ended %s (D status %s, phase %s) but no fault touched it: it should end ok", id,
                       got, kv_req_status_name((kv_req_status)q->d_status), kv_phase_name((kv_phase)q->d_phase));
        else if (q->d_status != KV_RS_FINISHED_LENGTH_CAPPED || q->d_output != want_out)
            kv_violate(c->v.env, KV_INV_OUTCOME, chk_d_of(c, id), id,
                       "request %u ended ok with %u of its %u tokens (D status %s) and no fault touched it", id,
                       q->d_output, want_out, kv_req_status_name((kv_req_status)q->d_status));
        else if (q->load_errors)
            kv_violate(c->v.env, KV_INV_OUTCOME, chk_d_of(c, id), id,
                       "request %u: %u of its loads failed (on one rank) but no fault touched it", id, q->load_errors);
        return;
    }
    if (pq->outcome == KV_OUT_ABORTED && !(q->causes & (1u << SIM_F_ABORT | 1u << SIM_F_ABORT_ON_KV))) {
        kv_violate(c->v.env, KV_INV_OUTCOME, chk_d_of(c, id), id,
                   "request %u ended aborted but no abort touched it (touched by: %s)", id, why);
        return;
    }
    if (recompute && pq->outcome == KV_OUT_ERROR && !q->fatal) {
        kv_violate(c->v.env, KV_INV_OUTCOME, chk_d_of(c, id), id,
                   "request %u ended in error under policy recompute; only %s touched it, which a recompute "
                   "survives",
                   id, why);
        return;
    }
    if (q->n_touch < CHK_UNBOUNDED && q->load_errors > q->n_touch)
        kv_violate(c->v.env, KV_INV_OUTCOME, chk_d_of(c, id), id,
                   "request %u: %u of its loads failed (on one rank); the causes that touched it (%s) fail at most %u", id,
                   q->load_errors, why, q->n_touch);
}

void chk_outcome_end(sim_check *c) {
    for (uint32_t id = 0; id < chk_n_reqs(c) && !chk_violated(c); id++) check_one(c, id);
}
