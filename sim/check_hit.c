/* sim/check_hit.c — INV-CACHE, the lookup half: a store hit that was there
 * when a request arrived is taken, loaded and not recomputed; and KV a D
 * pulled from P is used, not recomputed.
 *
 * The reference model is the store itself (sim/sim_store.h), read when a
 * request arrives at the scheduler of an engine with a store connector:
 * (unless its lookups are off, vLLM's enable_lookup = false: then none)
 * the largest k of whole blocks, below the request's length ((prompt - 1)
 * / block_size, as a lookup's hit), such that for every rank of the engine
 * and every group the key of each position a hit of k blocks needs
 * (kv_store_needs: the whole prefix for full attention, the window for a
 * sliding group, the state at block k - 1 for a recurrent one; per rank
 * its own head range) is in the store. The engine's lookup runs after the
 * arrival, and a store that evicts nothing only grows, so its hit is at
 * least k blocks; whichever connector then supplies the tokens (the store,
 * the P2P pull, the local prefix cache), the request's first schedule
 * there starts with at least k * block_size tokens already computed.
 *
 * The same for a D whose P2P connector is asked first (p2p, or a
 * MultiConnector with p2p first): it pulls the whole prompt from P (all but
 * the last token with a recurrent group), so its first schedule starts from
 * prompt - 1 tokens computed (vLLM computes the last token again).
 *
 * Judged for the requests that nothing touched (INV-OUTCOME's causes: no
 * fault, no store eviction, no refusal, no mixed connectors, none while
 * the request was live) when they end ok; a fault can legally fail a
 * lookup (its EXIST times out: a miss) or a load (a recompute). The
 * violation names the request, the engine, the hit the store held at
 * arrival and what the first schedule started from. */
#include "sim/check_int.h"

#include <stdio.h>
#include <string.h>

#include "core/store.h"
#include "core/worker.h"

/* Does the store hold, for every rank and group of engine e, each key a
 * hit of k blocks needs? hash[g][p]: the store hashes of the prompt. */
static bool store_holds(const sim_check *c, const kv_engine *e, uint64_t (*hash)[KV_REQ_BLOCKS_MAX], uint32_t k) {
    for (uint32_t g = 0; g < e->cfg.n_groups; g++)
        for (uint32_t p = 0; p < k; p++) {
            if (!kv_store_needs(&e->cfg, g, p, k)) continue;
            for (uint32_t r = 0; r < e->cfg.tp; r++) {
                const kv_worker *w = e->worker[r];
                if (!sim_store_has(c->v.store, kv_store_key_of(hash[g][p], w->head_lo, w->head_hi))) return false;
            }
        }
    return true;
}

void chk_hit_arrive(sim_check *c, uint32_t engine, const kv_msg *m) {
    kv_req_spec s;
    if (m->len < sizeof s || engine >= c->v.n_eng) return;
    memcpy(&s, m->payload, sizeof s);
    if (s.id >= chk_n_reqs(c)) return;
    const kv_engine *e = c->v.eng[engine];
    uint32_t side = engine >= c->v.cfg->n_p, bs = e->cfg.block_size;
    chk_req *q = &c->req[s.id];
    q->hit_expected[side] = 0;
    q->hit_from_p[side] = 0;
    q->first_computed[side] = CHK_NOT_SCHEDULED;
    /* a D whose P2P connector is asked first pulls the whole prompt (all
     * but its last token with a recurrent group) and computes from N - 1 */
    if (side == 1 && s.prompt_len > 1 && (e->conn_kind == KV_CONN_P2P || e->conn_kind == KV_CONN_MULTI_P2P_STORE)) {
        q->hit_expected[side] = s.prompt_len - 1u;
        q->hit_from_p[side] = 1;
        return;
    }
    uint32_t prompt = chk_prompt_on(c, engine, &s);
    if (!c->v.store || !kv_conn_kind_has_store(e->conn_kind) || !bs || prompt <= bs) return;
    if (e->cfg.store_lookup_off) return; /* the engine never asks the store: no hit to take */
    uint32_t max_k = (prompt - 1u) / bs;
    if (max_k > KV_REQ_BLOCKS_MAX) max_k = KV_REQ_BLOCKS_MAX;
    uint64_t hash[KV_GROUPS_MAX][KV_REQ_BLOCKS_MAX];
    kv_digest_memo dm;
    kv_digest_memo_init(&dm, &s.tokens, bs, 0);
    for (uint32_t g = 0; g < e->cfg.n_groups; g++) kv_store_hashes(&dm, g, max_k, hash[g]);
    for (uint32_t k = max_k; k > 0; k--)
        if (store_holds(c, e, hash, k)) {
            q->hit_expected[side] = k * bs;
            return;
        }
}

/* The local prefix hit the engine's scheduler took for request id (its
 * slot's), or UINT32_MAX. */
static uint32_t local_hit_of(const kv_engine *e, uint32_t id) {
    for (uint32_t i = 0; i < e->cfg.reqs_max; i++)
        if (e->req[i].used && e->req[i].r.id == id) return e->req[i].local_hit;
    return UINT32_MAX;
}

static bool gave_back(const kv_engine *e, uint32_t id) {
    for (uint32_t i = 0; i < e->cfg.reqs_max; i++)
        if (e->req[i].used && e->req[i].r.id == id) return e->req[i].gave_back;
    return false;
}

/* A step reached engine's rank 0: what each request scheduled for the
 * first time there started from (and the sweep's reach count of first
 * schedules whose local prefix hit is all but the last token). */
void chk_hit_execute(sim_check *c, uint32_t engine, uint32_t rank, const kv_msg *m) {
    if (rank != 0 || m->len < sizeof(kv_m_execute)) return;
    const kv_step *st = ((const kv_m_execute *)m->payload)->step;
    uint32_t side = engine >= c->v.cfg->n_p;
    for (uint32_t i = 0; i < st->n_reqs; i++) {
        const kv_step_req *r = &st->req[i];
        if (!r->num_scheduled || r->id >= chk_n_reqs(c)) continue;
        uint32_t *first = &c->req[r->id].first_computed[side];
        if (*first != CHK_NOT_SCHEDULED) continue;
        *first = r->computed_before;
        const kv_engine *e = c->v.eng[engine];
        /* a waiting request that gave its loaded KV back to let running ones
         * grow recomputes by the engine's rule: nothing to expect */
        if (gave_back(e, r->id)) c->req[r->id].hit_expected[side] = 0;
        bool recurrent = chk_recurrent(e);
        c->v.res->reach[SIM_R_RECURRENT_CONTINUED] += recurrent && r->computed_before > 0;
        uint32_t hit = local_hit_of(e, r->id);
        bool all_but_one = hit > 0 && hit == r->num_tokens - 1u;
        c->v.res->reach[SIM_R_HIT_ALL_BUT_ONE] += all_but_one;
        c->v.res->reach[SIM_R_HIT_ALL_BUT_ONE_RECURRENT] += all_but_one && recurrent;
    }
}

void chk_hit_end(sim_check *c) {
    const kv_proxy *p = c->v.proxy;
    for (uint32_t id = 0; id < chk_n_reqs(c) && !chk_violated(c); id++) {
        const chk_req *q = &c->req[id];
        const kv_proxy_req *pr = kv_proxy_slot(p, id);
        if (q->causes || !pr->used || pr->id != id || pr->outcome != KV_OUT_OK) continue;
        for (uint32_t side = 0; side < 2; side++) {
            if (!q->hit_expected[side]) continue;
            uint32_t engine = side ? chk_d_of(c, id) : chk_p_of(c, id);
            c->v.res->armed[KV_INV_CACHE]++;
            if (q->first_computed[side] != CHK_NOT_SCHEDULED && q->first_computed[side] >= q->hit_expected[side])
                continue;
            char first[96];
            if (q->first_computed[side] == CHK_NOT_SCHEDULED) snprintf(first, sizeof first, "it was never scheduled there");
            else snprintf(first, sizeof first, "its first schedule there started from %u computed tokens",
                          q->first_computed[side]);
            if (q->hit_from_p[side])
                kv_violate(c->v.env, KV_INV_CACHE, engine, id,
                           "request %u was pulled from P by engine %u, which should then compute it from %u tokens, but "
                           "%s: what was pulled was not used (nothing touched the request)",
                           id, engine, q->hit_expected[side], first);
            else
                kv_violate(c->v.env, KV_INV_CACHE, engine, id,
                           "request %u arrived at engine %u when the store held a hit of %u tokens of its prompt (every "
                           "rank and group), but %s: the hit was not taken (nothing touched the request, no key "
                           "evicted)",
                           id, engine, q->hit_expected[side], first);
            return;
        }
    }
}
