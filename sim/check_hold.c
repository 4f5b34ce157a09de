/* sim/check_hold.c — INV-HOLD: a hold ends within a bound of the event that
 * must end it, never at some later, longer timeout.
 *
 * P's delayed free (the hold this file checks; docs/oracles.md lists every
 * hold, its ending event and its bound): when P finishes a request whose KV
 * D will pull, it keeps the blocks (FINISHED, delayed free) until the
 * connector reports finished_sending. Two events may end the hold:
 *  - D's side of the request ended ok, with no load failed, and nothing
 *    touched the request (sim/check_outcome.c): every transfer D needed
 *    succeeded, or D needed none and said so with an empty pull, which P
 *    answered (it finished before the pull's ready wait ran out). P must
 *    have let the blocks go by max(P finished, D ended) + CHK_HOLD_EVENT_NS.
 *  - Otherwise the expiry reap (VLLM_MOONCAKE_ABORT_REQUEST_TIMEOUT) is the
 *    legal end of a P2P-only P's hold (with a store connector the hold also
 *    waits for saves, bounded only by the store's operation timeout per
 *    queued job): P must have let them go by P finished + abort timeout +
 *    CHK_HOLD_EXPIRY_SLACK_NS (the reap timer starts when the worker records
 *    the send, a step after the finish, and waits out a transfer still in
 *    flight; the scheduler frees at its next step).
 * A hold whose process dies ends with it. The deadline is checked when the
 * clock would pass it, so the violation carries the deadline's time. */
#include "sim/check_int.h"

#include <string.h>

/* Bounds in virtual time. A step costs at most 2 ms + 512 x 20 us (world.c),
 * so an event bound of 50 ms is several steps of either engine. */
#define CHK_HOLD_EVENT_NS 50000000ull
#define CHK_HOLD_EXPIRY_SLACK_NS 100000000ull
#define CHK_EXPIRY_TOLERANCE_NS 1000000ull

bool chk_pull_answerable(const sim_check *c, const chk_req *q) {
    uint64_t wait = c->v.cfg->abort_timeout_ns, tol = CHK_EXPIRY_TOLERANCE_NS;
    if (!q->pull_ns) return false;                             /* D never asked */
    if (q->pull_ns + tol >= q->p_fin_ns + wait) return false;  /* ... or after the expiry */
    return q->pull_ns + wait > q->p_fin_ns + tol;              /* the pull was still waiting when P finished */
}

static void set_deadline(sim_check *c, chk_req *q, uint64_t at, const char *why) {
    if (at >= q->hold_deadline_ns) return;
    q->hold_deadline_ns = at;
    q->hold_why = why;
    if (at < c->next_deadline_ns) c->next_deadline_ns = at;
}

/* D's side ended ok with every load it asked for served, nothing touched. */
static bool ended_ok_untouched(const chk_req *q) {
    return q->d_done && !q->causes && !q->load_errors && q->d_status == KV_RS_FINISHED_LENGTH_CAPPED;
}

static void tighten(sim_check *c, chk_req *q) {
    if (!q->p_held || q->p_freed || !ended_ok_untouched(q)) return;
    /* D's pull (an empty one when D needed nothing) waits at P only for the
     * abort timeout: a P that finished later has nobody to answer, and its
     * hold ends at the expiry. */
    if (!chk_pull_answerable(c, q)) return;
    uint64_t from = q->p_fin_ns > q->d_end_ns ? q->p_fin_ns : q->d_end_ns;
    set_deadline(c, q, from + CHK_HOLD_EVENT_NS, "D's side ended ok and nothing touched the request");
}

void chk_hold_done(sim_check *c, const kv_m_req_done *d) {
    if (d->id >= chk_n_reqs(c)) return;
    chk_req *q = &c->req[d->id];
    if (d->engine == q->p_engine && d->phase == KV_PH_P_HELD && !q->p_held) {
        q->p_held = true;
        q->p_fin_ns = chk_now(c);
        c->v.res->armed[KV_INV_HOLD]++;
        /* The report crossed the network: the hold may be over already. */
        const kv_sreq *s = c->v.down[d->engine] ? NULL : kv_engine_find(c->v.eng[d->engine], d->id);
        if (!s || !s->delay_free) {
            q->p_freed = true;
            q->p_free_ns = q->p_fin_ns;
            return;
        }
        c->held[c->n_held++] = d->id;
        /* A store connector's hold also waits for its saves, whose bound is
         * the store's per-operation timeout times the jobs queued ahead: the
         * expiry bounds a P2P-only P. */
        if (c->v.cfg->conn_p == KV_CONN_P2P)
            set_deadline(c, q, q->p_fin_ns + c->v.cfg->abort_timeout_ns + CHK_HOLD_EXPIRY_SLACK_NS,
                         "the expiry reap (abort timeout)");
    }
    tighten(c, q); /* D's end (recorded by the outcome oracle) or P's hold, whichever came second */
}

static void hold_over(sim_check *c, uint32_t k, bool died) {
    uint32_t id = c->held[k];
    chk_req *q = &c->req[id];
    q->p_freed = true;
    q->p_free_ns = chk_now(c);
    /* P's finish reached the proxy up to a cross-node latency after the
     * sender armed its reap timer: a free within CHK_EXPIRY_TOLERANCE_NS of
     * the expiry is the reap. When D never asked in time for it to be
     * answered, the hold it ends filled P's pool all along: every request
     * not over when it began may have starved behind it. (When D did ask,
     * the hold outlived a failed send, whose own cause is what touched the
     * requests.) */
    if (!died && q->p_free_ns + CHK_EXPIRY_TOLERANCE_NS >= q->p_fin_ns + c->v.cfg->abort_timeout_ns &&
        !chk_pull_answerable(c, q))
        chk_touch_since(c, CHK_C_EXPIRED, q->p_fin_ns);
    if (!died && q->p_free_ns + CHK_EXPIRY_TOLERANCE_NS >= q->p_fin_ns + c->v.cfg->abort_timeout_ns)
        c->v.res->reach[SIM_R_EXPIRED_HOLD]++;
    c->held[k] = c->held[--c->n_held];
}

static void late(sim_check *c, uint32_t id, uint64_t at) {
    const chk_req *q = &c->req[id];
    kv_violate(c->v.env, KV_INV_HOLD, q->p_engine, id,
               "P engine %u still holds request %u's blocks %llu us after it finished; the hold had to end by "
               "%llu us after (%s)",
               q->p_engine, id, (unsigned long long)((at - q->p_fin_ns) / 1000u),
               (unsigned long long)((q->hold_deadline_ns - q->p_fin_ns) / 1000u), q->hold_why);
}

/* After P's scheduler merged a step's results: which holds ended. */
void chk_hold_sched(sim_check *c, uint32_t engine) {
    const kv_engine *e = c->v.eng[engine];
    for (uint32_t k = 0; k < c->n_held;) {
        uint32_t id = c->held[k];
        if (c->req[id].p_engine != engine) { k++; continue; }
        const kv_sreq *s = kv_engine_find(e, id);
        if (s && s->delay_free) { k++; continue; }
        if (chk_now(c) > c->req[id].hold_deadline_ns) late(c, id, chk_now(c));
        hold_over(c, k, false);
    }
}

void chk_hold_engine_down(sim_check *c, uint32_t engine) {
    for (uint32_t k = 0; k < c->n_held;) {
        if (c->req[c->held[k]].p_engine == engine) hold_over(c, k, true);
        else k++;
    }
}

/* The clock moves to next_ns: a hold still on at its deadline is late then. */
void chk_hold_time(sim_check *c, uint64_t next_ns) {
    uint64_t soonest = UINT64_MAX;
    for (uint32_t k = 0; k < c->n_held; k++) {
        const chk_req *q = &c->req[c->held[k]];
        if (q->hold_deadline_ns < next_ns && !chk_violated(c)) {
            sim_rt_set_now(c->v.rt, q->hold_deadline_ns); /* report it at its own time */
            late(c, c->held[k], q->hold_deadline_ns);
        }
        if (q->hold_deadline_ns < soonest) soonest = q->hold_deadline_ns;
    }
    c->next_deadline_ns = soonest;
}

void chk_hold_end(sim_check *c) {
    for (uint32_t k = 0; k < c->n_held && !chk_violated(c); k++)
        if (chk_now(c) > c->req[c->held[k]].hold_deadline_ns) late(c, c->held[k], chk_now(c));
}
