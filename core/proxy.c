/* core/proxy.c — P/D router actor; see proxy.h.
 *
 * Per request:  NEW --submit--> AT_P (+AT_D when concurrent)
 *               (at submit: a fresh 128-bit transfer id; P's params name D
 *               as the only engine that may pull it)
 *               AT_P --P done LENGTH_CAPPED, sequential--> AT_D
 *               AT_D --D done--> ENDED (ok / error / aborted)
 *               any --client abort--> abort sent to every engine holding it
 * A request that P fails is not sent to D (when sequential).
 * Engine down: every request sent there and not done there is done there
 * with FINISHED_ERROR (the same transitions as a reply); sends to it fail
 * at once until it is up again.
 *
 * Invariants (proxy_invariants: X1, O(1), on entry to and return from every
 * message in every build; proxy_walk: X2-X3 on return in checked builds;
 * INV-ASSERT, core/assert.h):
 *   X1 ok + errors + aborted <= submitted (each request ends once), and
 *      1 <= reqs_max <= KV_PROXY_REQS_MAX;
 *   X2 a used slot: its id maps to it (id % reqs_max), it was sent to P,
 *      P and D are engine indices < KV_ENGINES_MAX, done on an engine only
 *      once sent there, its outcome one of kv_proxy_outcome, ended no
 *      earlier than submitted; a request sent to D while P is pending is a
 *      concurrent one (sequential ones go to D after P's success);
 *   X3 the slots' ended requests are at most the ends counted.
 * What comes in from outside is validated, never asserted on: the client's
 * SUBMIT (engine indices in range; refused otherwise) and the engines'
 * REQ_DONE (matched to a live slot by id, or dropped). */
#include "core/proxy.h"

#include <string.h>

#include "core/assert.h"

#define PX_ASSERT(p, cond, ...) KV_ASSERT((p)->env, UINT32_MAX, cond, __VA_ARGS__)
#define PX_ASSERT_CHECKED(p, cond, ...) KV_ASSERT_CHECKED((p)->env, UINT32_MAX, cond, __VA_ARGS__)

static kv_proxy_req *slot(kv_proxy *p, uint32_t id) { return &p->req[id % p->reqs_max]; }

const kv_proxy_req *kv_proxy_slot(const kv_proxy *p, uint32_t id) { return &p->req[id % p->reqs_max]; }

static void on_done(kv_proxy *p, const kv_m_req_done *d);

/* Request q is done on engine e with an error, as if e had replied so
 * (its process died, or it is down). */
static void fail_at(kv_proxy *p, const kv_proxy_req *q, uint32_t e) {
    /* one of the request's own engines */
    if (!PX_ASSERT(p, e == q->p_engine || e == q->d_engine, "proxy: request %u failed at engine %u (P %u, D %u)", q->id,
                   e, q->p_engine, q->d_engine))
        return;
    kv_m_req_done d = {.engine = e, .id = q->id, .status = KV_RS_FINISHED_ERROR, .phase = KV_PH_DONE};
    on_done(p, &d);
}

static void send_add(kv_proxy *p, kv_proxy_req *q, bool to_p) {
    kv_req_spec s = q->sub.spec;
    memset(&s.params, 0, sizeof s.params);
    s.params.has_transfer_id = true;
    s.params.transfer_id = q->tid;
    if (to_p) {
        s.max_tokens = 1;
        s.params.do_remote_decode = true;
        s.params.has_decode_engine = true; /* only this D's ranks may pull it */
        s.params.decode_engine = q->d_engine;
        q->sent_p = 1;
    } else {
        s.prompt_len += q->sub.d_extra_tokens;
        s.params.do_remote_prefill = true;
        s.params.has_remote_engine = true;
        s.params.remote_engine = q->p_engine;
        s.params.has_bootstrap = true;
        s.params.remote_bootstrap = p->bootstrap_addr;
        q->sent_d = 1;
    }
    uint32_t e = to_p ? q->p_engine : q->d_engine;
    if (!PX_ASSERT(p, e < KV_ENGINES_MAX, "proxy: request %u to engine %u", q->id, e)) return;
    if (p->engine_actor[e] == KV_ACTOR_NONE) { /* down: the connection is refused */
        fail_at(p, q, e);
        return;
    }
    kv_rt_post(p->rt, p->engine_actor[e], KV_M_ADD_REQ, &s, sizeof s);
}

static void end_req(kv_proxy *p, kv_proxy_req *q, kv_proxy_outcome o) {
    if (!PX_ASSERT(p, q->used && o != KV_OUT_PENDING && o <= KV_OUT_ABORTED, "proxy: request %u ends as %u (used %u)",
                   q->id, (unsigned)o, q->used))
        return;
    if (q->outcome != KV_OUT_PENDING) return;
    q->outcome = (uint8_t)o;
    q->done_ns = kv_now_ns(p->env);
    if (o == KV_OUT_OK) p->ok++;
    else if (o == KV_OUT_ABORTED) p->aborted++;
    else p->errors++;
}

static void on_submit(kv_proxy *p, const kv_m_proxy_submit *sub) {
    if (sub->p_engine >= KV_ENGINES_MAX || sub->d_engine >= KV_ENGINES_MAX) { /* the client's input: refused */
        kv_logf(p->env, KV_LOG_WARN, "proxy: request %u names engines %u/%u; dropped", sub->spec.id, sub->p_engine,
                sub->d_engine);
        return;
    }
    kv_proxy_req *q = slot(p, sub->spec.id);
    if (q->used && q->outcome == KV_OUT_PENDING) {
        kv_logf(p->env, KV_LOG_WARN, "proxy: request slot %u busy; request %u dropped", sub->spec.id % p->reqs_max, sub->spec.id);
        return;
    }
    memset(q, 0, sizeof *q);
    q->used = 1;
    q->id = sub->spec.id;
    q->sub = *sub;
    q->p_engine = sub->p_engine;
    q->d_engine = sub->d_engine;
    q->sequential = sub->sequential;
    /* 128 bits from the env's entropy: no request's id tells another's */
    q->tid.hi = kv_random_u64(p->env); /* two statements: an initializer's order is unspecified */
    q->tid.lo = kv_random_u64(p->env);
    q->submit_ns = kv_now_ns(p->env);
    p->submitted++;
    send_add(p, q, true);
    if (!q->sequential) send_add(p, q, false);
}

static void on_done(kv_proxy *p, const kv_m_req_done *d) {
    kv_proxy_req *q = slot(p, d->id);
    if (!q->used || q->id != d->id) return;
    if (d->engine == q->p_engine && !q->p_done) {
        q->p_done = 1;
        q->p_status = d->status;
        bool ok = d->status == KV_RS_FINISHED_LENGTH_CAPPED;
        if (q->aborted) return;
        if (q->sequential && ok) send_add(p, q, false);
        else if (q->sequential) end_req(p, q, KV_OUT_ERROR);
        return;
    }
    if (d->engine == q->d_engine && !q->d_done) {
        q->d_done = 1;
        q->d_status = d->status;
        kv_req_status st = (kv_req_status)d->status;
        end_req(p, q, q->aborted || st == KV_RS_FINISHED_ABORTED ? KV_OUT_ABORTED
                      : st == KV_RS_FINISHED_ERROR                ? KV_OUT_ERROR
                                                                  : KV_OUT_OK);
    }
}

static void on_abort(kv_proxy *p, uint32_t id) {
    kv_proxy_req *q = slot(p, id);
    if (!q->used || q->id != id || q->outcome != KV_OUT_PENDING || q->aborted) return;
    q->aborted = 1;
    /* engines checked at submit: they index the actor table */
    if (!PX_ASSERT(p, q->p_engine < KV_ENGINES_MAX && q->d_engine < KV_ENGINES_MAX, "proxy: request %u at engines %u/%u",
                   id, q->p_engine, q->d_engine))
        return;
    kv_m_abort a = {.id = id};
    if (q->sent_p && !q->p_done) kv_rt_post(p->rt, p->engine_actor[q->p_engine], KV_M_ABORT, &a, sizeof a);
    if (q->sent_d && !q->d_done) kv_rt_post(p->rt, p->engine_actor[q->d_engine], KV_M_ABORT, &a, sizeof a);
    if (!q->sent_d) end_req(p, q, KV_OUT_ABORTED);
}

static void on_engine_down(kv_proxy *p, uint32_t e) {
    if (e >= KV_ENGINES_MAX) return;
    p->engine_actor[e] = KV_ACTOR_NONE;
    for (uint32_t i = 0; i < p->reqs_max; i++) {
        kv_proxy_req *q = &p->req[i];
        if (!q->used || q->outcome != KV_OUT_PENDING) continue;
        bool at_p = q->p_engine == e && q->sent_p && !q->p_done, at_d = q->d_engine == e && q->sent_d && !q->d_done;
        if (at_p || at_d) fail_at(p, q, e);
    }
}

/* X1: O(1). */
static bool proxy_invariants(const kv_proxy *p) {
    return PX_ASSERT(p, p->ok + p->errors + p->aborted <= p->submitted && p->reqs_max >= 1 && p->reqs_max <= KV_PROXY_REQS_MAX,
                     "proxy: %llu ok + %llu errors + %llu aborted of %llu submitted, %u slots",
                     (unsigned long long)p->ok, (unsigned long long)p->errors, (unsigned long long)p->aborted,
                     (unsigned long long)p->submitted, p->reqs_max);
}

/* X2, X3. Checked builds. */
static bool proxy_walk(const kv_proxy *p) {
    uint64_t ended = 0;
    for (uint32_t i = 0; i < p->reqs_max; i++) {
        const kv_proxy_req *q = &p->req[i];
        if (!q->used) continue;
        ended += q->outcome != KV_OUT_PENDING;
        if (!PX_ASSERT_CHECKED(p, q->id % p->reqs_max == i && q->sent_p && q->p_engine < KV_ENGINES_MAX &&
                                      q->d_engine < KV_ENGINES_MAX && (!q->p_done || q->sent_p) &&
                                      (!q->d_done || q->sent_d) && q->outcome <= KV_OUT_ABORTED &&
                                      (q->outcome == KV_OUT_PENDING || q->done_ns >= q->submit_ns) &&
                                      (!q->sent_d || !q->sequential || q->p_done),
                               "proxy: slot %u request %u: sent %u/%u done %u/%u outcome %u sequential %u engines %u/%u",
                               i, q->id, q->sent_p, q->sent_d, q->p_done, q->d_done, q->outcome, q->sequential,
                               q->p_engine, q->d_engine))
            return false;
    }
    return PX_ASSERT_CHECKED(p, ended <= p->ok + p->errors + p->aborted, "proxy: %llu slots ended, %llu ends counted",
                             (unsigned long long)ended, (unsigned long long)(p->ok + p->errors + p->aborted));
}

static void proxy_handle(void *self, const kv_msg *m) {
    kv_proxy *p = self;
    kv_owner_check(p->env, &p->owner, UINT32_MAX);
    proxy_invariants(p);
    switch (m->kind) {
    case KV_M_PROXY_SUBMIT: on_submit(p, m->payload); break;
    case KV_M_REQ_DONE: on_done(p, m->payload); break;
    case KV_M_PROXY_ABORT: on_abort(p, ((const kv_m_abort *)m->payload)->id); break;
    case KV_M_PROXY_ENGINE_DOWN: on_engine_down(p, ((const kv_m_proxy_engine *)m->payload)->engine); break;
    case KV_M_PROXY_ENGINE_UP: {
        const kv_m_proxy_engine *u = m->payload;
        if (u->engine < KV_ENGINES_MAX) p->engine_actor[u->engine] = u->sched_actor;
        break;
    }
    default: kv_logf(p->env, KV_LOG_WARN, "proxy: unexpected message %u", m->kind);
    }
    if (proxy_invariants(p) && KV_CHECKED) proxy_walk(p);
}

kv_status kv_proxy_new(const kv_env *env, kv_rt *rt, uint32_t node, uint32_t reqs_max, kv_proxy **out) {
    if (reqs_max == 0 || reqs_max > KV_PROXY_REQS_MAX) return KV_EINVAL;
    kv_proxy *p = kv_alloc(env, sizeof *p);
    if (!p) return KV_ENOMEM;
    p->env = env;
    p->rt = rt;
    p->reqs_max = reqs_max;
    p->req = kv_alloc(env, sizeof(kv_proxy_req) * reqs_max);
    kv_status st = p->req ? kv_rt_spawn(rt, "proxy", node, proxy_handle, p, 1u << 18, &p->actor) : KV_ENOMEM;
    if (st != KV_OK) {
        kv_proxy_free(p);
        return st;
    }
    p->owner = (kv_owner){.actor = p->actor, .what = "proxy requests"};
    for (uint32_t i = 0; i < KV_ENGINES_MAX; i++) p->engine_actor[i] = KV_ACTOR_NONE;
    *out = p;
    return KV_OK;
}

void kv_proxy_free(kv_proxy *p) {
    if (!p) return;
    kv_release(p->env, p->req);
    kv_release(p->env, p);
}
