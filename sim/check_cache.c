/* sim/check_cache.c — INV-CACHE: KV an engine computed or loaded is in its
 * prefix cache for the next request with the same prefix.
 *
 * A small reference model, kept from what the checker sees and not from the
 * engine's counters: per engine, per prefix group, the longest shared prefix
 * (tokens) of a request that finished ok there (status FINISHED_LENGTH_CAPPED:
 * its whole prompt was computed or loaded, so every full block of it was
 * cached). When a request arrives at the engine, the model says how much of
 * its prompt is cached: min(that prefix, its own shared prefix), in whole
 * blocks, capped at (prompt - 1) / block_size blocks (vLLM's hit leaves the
 * last token to compute). Requests that then finish ok there add that to
 * the engine's expected hit tokens.
 *
 * At the end, the engine's prefix-hit tokens (counted where the scheduler
 * takes a hit) must be at least the sum expected. The model does not follow
 * the pool's LRU, so it judges only engines where nothing could have taken a
 * cached block away or hidden it: prefix caching on; group 0 full attention
 * and no sliding-window or recurrent group (a sliding group frees the
 * blocks behind its window, a recurrent one keeps a state only where a
 * request stood at a block's end, so a hit may legally be shorter); no block of any group evicted
 * in the whole run; no crash of the engine (a new process starts empty). The
 * per-request detail of a violation names the requests whose hits the model
 * expected. */
#include "sim/check_int.h"

#include <string.h>

static bool engine_judged(const sim_check *c, uint32_t engine) {
    const kv_engine *e = c->v.eng[engine];
    if (!e->cfg.prefix_caching || e->cfg.group[0].kind != KV_GROUP_FULL) return false;
    for (uint32_t g = 0; g < e->cfg.n_groups; g++)
        if (e->cfg.group[g].kind == KV_GROUP_SLIDING) return false;
    return true;
}

void chk_cache_begin(sim_check *c) {
    memset(c->cache_have, 0, sizeof c->cache_have);
    memset(c->cache_want, 0, sizeof c->cache_want);
    memset(c->cache_crashed, 0, sizeof c->cache_crashed);
    for (uint32_t i = 0; i < KV_ENGINES_MAX; i++) c->cache_first[i] = KV_REQ_NONE;
    memset(c->cache_expect, 0, chk_n_reqs(c) * sizeof c->cache_expect[0]);
}

/* A request arrived at an engine's scheduler (ADD_REQ): what the model says
 * its hit will be. */
void chk_cache_arrive(sim_check *c, uint32_t engine, const kv_msg *m) {
    kv_req_spec s;
    if (m->len < sizeof s) return;
    memcpy(&s, m->payload, sizeof s);
    if (s.id >= chk_n_reqs(c) || engine >= KV_ENGINES_MAX) return;
    const kv_engine *e = c->v.eng[engine];
    uint32_t side = engine >= c->v.cfg->n_p, bs = e->cfg.block_size, g = s.tokens.prefix_group;
    /* a model with a recurrent group hits only where a state was kept (a
     * request stood exactly at that block's end): the model does not follow
     * that, so such engines are not judged */
    if (g >= CHK_CACHE_GROUPS || !s.tokens.prefix_len || !s.prompt_len || !bs || chk_recurrent(e)) return;
    uint32_t have = c->cache_have[engine][g], shared = have < s.tokens.prefix_len ? have : s.tokens.prefix_len;
    uint32_t blocks = shared / bs, cap = (s.prompt_len - 1u) / bs;
    if (cap > KV_REQ_BLOCKS_MAX) cap = KV_REQ_BLOCKS_MAX; /* a table's length */
    c->cache_expect[s.id][side] = (blocks < cap ? blocks : cap) * bs;
}

/* A request ended on an engine (REQ_DONE at the proxy). */
void chk_cache_done(sim_check *c, const kv_m_req_done *d) {
    if (d->id >= chk_n_reqs(c) || d->engine >= c->v.n_eng || d->refused) return;
    uint32_t side = d->engine >= c->v.cfg->n_p, want = c->cache_expect[d->id][side];
    c->cache_expect[d->id][side] = 0;
    if (d->status != KV_RS_FINISHED_LENGTH_CAPPED) return;
    c->cache_want[d->engine] += want;
    if (want && c->cache_first[d->engine] == KV_REQ_NONE) c->cache_first[d->engine] = d->id;
    /* what it cached of its prefix: the prefix, or its whole prompt when the
     * scenario's prefix is longer */
    const sim_req_plan *q = &c->v.cfg->req[d->id];
    uint32_t len = q->prefix_len < q->prompt_len ? q->prefix_len : q->prompt_len;
    if (q->prefix_group < CHK_CACHE_GROUPS && len > c->cache_have[d->engine][q->prefix_group])
        c->cache_have[d->engine][q->prefix_group] = len;
}

void chk_cache_engine_down(sim_check *c, uint32_t engine) {
    if (engine < KV_ENGINES_MAX) c->cache_crashed[engine] = true;
}

void chk_cache_end(sim_check *c) {
    for (uint32_t i = 0; i < c->v.n_eng && !chk_violated(c); i++) {
        const kv_engine *e = c->v.eng[i];
        if (c->cache_crashed[i] || !c->cache_want[i] || !engine_judged(c, i)) continue;
        uint64_t evictions = 0;
        for (uint32_t g = 0; g < e->cfg.n_groups; g++) evictions += e->pool[g].evictions;
        if (evictions) continue;
        c->v.res->armed[KV_INV_CACHE]++;
        if (e->stats.prefix_hit_tokens < c->cache_want[i])
            kv_violate(c->v.env, KV_INV_CACHE, i, c->cache_first[i],
                       "engine %u: prefix hits took %llu tokens, but requests that finished ok there left %llu "
                       "tokens of their prefixes cached for later ones (no block evicted; the first such later "
                       "request: %u)",
                       i, (unsigned long long)e->stats.prefix_hit_tokens, (unsigned long long)c->cache_want[i],
                       c->cache_first[i]);
    }
}
