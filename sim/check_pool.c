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
 * request. A dead process's memory died with it.
 *
 * INV-LEAK (teardown, after a clean end): kv_engine_free of every process
 * of the run, the dead ones too, and kv_bootstrap_free give back exactly
 * the allocations each made, each once: no allocation left, none released
 * twice, no release of memory that is not theirs. The simulator never
 * frees anything otherwise (its arena rewinds per run), so without this a
 * missed, doubled or stray release (kvnode tears its engine down on exit)
 * would be invisible. */
#include <stdio.h>

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

void chk_pool_teardown(sim_check *c, const sim_teardown_report *t) {
    char who[64];
    if (t->bootstrap) snprintf(who, sizeof who, "the bootstrap service");
    else snprintf(who, sizeof who, "engine %u (process %u of the run)", t->engine, t->process);
    uint32_t eng = t->bootstrap ? KV_REQ_NONE : t->engine;
    c->v.res->armed[KV_INV_LEAK] += t->allocs;
    if (t->twice || t->foreign)
        kv_violate(c->v.env, KV_INV_LEAK, eng, KV_REQ_NONE,
                   "teardown of %s: %u releases of memory released before, %u of memory it did not allocate", who,
                   t->twice, t->foreign);
    else if (t->left)
        kv_violate(c->v.env, KV_INV_LEAK, eng, KV_REQ_NONE,
                   "teardown of %s: %u of its %u allocations (%llu bytes) never released; the first is allocation "
                   "%u (%u bytes)",
                   who, t->left, t->allocs, (unsigned long long)t->left_bytes, t->first_left, t->first_left_bytes);
}
