/* sim/check_pool.c — block accounting.
 *
 * INV-CONSERVE: per engine per group, free + cached + owned + pinned +
 * in-flight == capacity after every event of the engine's scheduler (the
 * pools' owner). The pool's structural check (free list, index, counters
 * recounted by scanning) runs on a sample of those events, sized so that it
 * costs about two blocks per check on any pool, and on every pool at the end.
 *
 * INV-LEAK (at the end, on every engine whose process is alive): no block is
 * owned, pinned or in flight, and no connector entry is left for any
 * request. A dead process's memory died with it. */
#include "sim/check_int.h"

static void check_engine(sim_check *c, const kv_engine *e, bool full) {
    sim_result *res = c->v.res;
    for (uint32_t g = 0; g < e->cfg.n_groups; g++) {
        kv_pool_report r;
        kv_pool_report_get(&e->pool[g], &r);
        uint64_t period = 64u * (((uint64_t)e->cfg.pool_blocks + 127u) / 128u);
        if (full || res->armed[KV_INV_CONSERVE] % period == 0) kv_pool_check(&e->pool[g]);
        res->armed[KV_INV_CONSERVE]++;
        if (r.free + r.cached + r.owned + r.pinned + r.inflight != r.capacity)
            kv_violate(c->v.env, KV_INV_CONSERVE, e->cfg.index, KV_REQ_NONE,
                       "engine %u group %u: free %u + cached %u + owned %u + pinned %u + inflight %u != %u",
                       e->cfg.index, g, r.free, r.cached, r.owned, r.pinned, r.inflight, r.capacity);
    }
}

void chk_pool_event(sim_check *c, uint32_t engine) { check_engine(c, c->v.eng[engine], false); }

void chk_pool_end(sim_check *c) {
    sim_result *res = c->v.res;
    for (uint32_t i = 0; i < c->v.n_eng && !res->violated; i++) {
        const kv_engine *e = c->v.eng[i];
        if (c->v.down[i]) continue; /* its memory died with it */
        check_engine(c, e, true);
        for (uint32_t g = 0; g < e->cfg.n_groups && !res->violated; g++) {
            kv_pool_report r;
            kv_pool_report_get(&e->pool[g], &r);
            res->armed[KV_INV_LEAK]++;
            if (r.owned || r.pinned || r.inflight)
                kv_violate(c->v.env, KV_INV_LEAK, i, KV_REQ_NONE,
                           "engine %u group %u: %u owned, %u pinned, %u in-flight blocks at the end (HBM leak)", i, g,
                           r.owned, r.pinned, r.inflight);
        }
        uint32_t cs = kv_engine_conn_state(e);
        if (!res->violated && cs)
            kv_violate(c->v.env, KV_INV_LEAK, i, KV_REQ_NONE, "engine %u: %u connector entries left at the end", i, cs);
    }
}
