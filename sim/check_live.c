/* sim/check_live.c — every request ends, and every request is counted.
 *
 * INV-LIVE (at the end): after the last fault and arrival, every request
 * reaches a terminal state on every engine and at the proxy within the
 * liveness bound; a violation names the state it stalled in.
 *
 * Accounting (INV-LIVE): every request of the scenario was submitted and
 * ended with exactly one outcome (ok, error or aborted) at the proxy, so the
 * proxy's totals equal the scenario's request count. A request that never
 * reached the proxy, or that the proxy forgot, is a violation, not a run
 * with fewer requests.
 *
 * Non-vacuity: a run whose requests ended ok must have had their KV checked
 * at their first token (sim/check_data.c); a check that never armed although
 * its subject occurred fails the run. */
#include "sim/check_int.h"

static const char *stall_state(const sim_check *c, uint32_t id, uint32_t *engine) {
    for (uint32_t i = c->v.n_eng; i-- > 0;) {
        const kv_sreq *s = c->v.down[i] ? NULL : kv_engine_find(c->v.eng[i], id); /* a dead process holds nothing */
        if (!s) continue;
        *engine = i;
        return s->delay_free ? "finished, blocks held (delayed free)" : kv_req_status_name((kv_req_status)s->r.status);
    }
    *engine = UINT32_MAX;
    return "not on any engine";
}

static void check_accounting(sim_check *c) {
    const kv_proxy *p = c->v.proxy;
    uint32_t n = chk_n_reqs(c);
    c->v.res->armed[KV_INV_LIVE]++;
    uint64_t outcomes = p->ok + p->errors + p->aborted;
    if (p->submitted != n || outcomes != n)
        kv_violate(c->v.env, KV_INV_LIVE, KV_REQ_NONE, KV_REQ_NONE,
                   "accounting: the scenario has %u requests, the proxy saw %llu submitted and %llu outcomes "
                   "(%llu ok, %llu error, %llu aborted)",
                   n, (unsigned long long)p->submitted, (unsigned long long)outcomes, (unsigned long long)p->ok,
                   (unsigned long long)p->errors, (unsigned long long)p->aborted);
}

void chk_live_end(sim_check *c, bool timed_out) {
    for (uint32_t id = 0; id < chk_n_reqs(c) && !chk_violated(c); id++) {
        c->v.res->armed[KV_INV_LIVE]++;
        const kv_proxy_req *q = kv_proxy_slot(c->v.proxy, id);
        uint32_t eng = UINT32_MAX;
        const char *st = stall_state(c, id, &eng);
        bool known = q->used && q->id == id;
        if (eng != UINT32_MAX || !known || q->outcome == KV_OUT_PENDING)
            kv_violate(c->v.env, KV_INV_LIVE, eng, id, "request %u did not end by %s: %s%s on engine %d", id,
                       timed_out ? "the liveness bound" : "quiescence", known ? "stalled in " : "the proxy never had it; ",
                       st, (int)eng);
    }
    if (!chk_violated(c)) check_accounting(c);
}
