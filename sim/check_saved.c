/* sim/check_saved.c — INV-CACHE, the store's half: every block a save was
 * handed is in the store once the save reports done.
 *
 * The reference model is the set of store keys the worker mains handed to
 * their store senders (each KV_M_STORE_SAVE job as the sender receives it:
 * one key per block, the block's prefix hash and the rank's head range). A
 * sender may leave a block out of its PUT only because the store already
 * has it (EXIST) or because an earlier job of the same request put it (the
 * resume offset); either way the key is in the store afterwards. So at the
 * end of a run every key of the set must be in the store, unless something
 * legally took it away or kept it out, and then the run is not judged:
 *   - a save ended otherwise than done (status != 0: a store fault, pool
 *     pressure's skip, a timeout, a full sender queue);
 *   - the store evicted a key (capacity or an evict fault), or the set grew
 *     past what the store can hold (then it must have evicted);
 *   - an engine crashed (its sender's jobs die with it).
 * The check runs at quiescence, after every save reported done. A violation
 * names the request that handed the missing key, where it came from
 * (engine, rank, group, position) and how many keys are missing.
 *
 * That set knows only the saves that were issued. The producer model says
 * what must have been: a request that ended ok on a P engine that saves to
 * the store computed or loaded its whole prompt there, so under the same
 * guards the store holds, per rank and group, every key a later hit of the
 * prompt's full blocks needs (kv_store_needs; a recurrent group's state at
 * the last full block only when the prompt ends on a block boundary: the
 * state of a shorter prefix is gone once the prompt runs past it). */
#include "sim/check_int.h"

#include <stddef.h>
#include <string.h>

#include "core/store.h"
#include "core/worker.h"

static chk_saved *slot_of(sim_check *c, kv_store_key k) {
    uint32_t i = (uint32_t)kv_mix64(k.hash ^ ((uint64_t)k.heads << 1)) & (CHK_SAVED_KEYS - 1);
    while (c->saved[i].run == c->saved_run &&
           (c->saved[i].key.hash != k.hash || c->saved[i].key.heads != k.heads))
        i = (i + 1) & (CHK_SAVED_KEYS - 1);
    return &c->saved[i];
}

void chk_saved_begin(sim_check *c) {
    /* a slot is used when its run is this run's number: nothing to clear */
    if (++c->saved_run == 0) {
        memset(c->saved, 0, sizeof c->saved);
        c->saved_run = 1;
    }
    c->saved_n = 0;
    c->saved_off = c->v.store ? NULL : "no store";
}

void chk_saved_off(sim_check *c, const char *why) {
    if (!c->saved_off) c->saved_off = why;
}

/* A save job reached a store sender; m->src is the worker main that posted it. */
void chk_saved_job(sim_check *c, const kv_msg *m) {
    if (c->saved_off || m->src >= SIM_ACTORS_MAX || m->len < offsetof(kv_m_store_save, e)) return;
    const chk_actor *a = &c->actor[m->src];
    const kv_m_store_save *j = m->payload;
    if (a->role != CHK_ACTOR_MAIN || j->forget || j->n > KV_STORE_BATCH_MAX ||
        m->len < offsetof(kv_m_store_save, e) + j->n * sizeof j->e[0])
        return;
    const kv_worker *w = c->v.eng[a->engine]->worker[a->rank];
    for (uint32_t i = 0; i < j->n; i++) {
        kv_store_key k = kv_store_key_of(j->e[i].hash, w->head_lo, w->head_hi);
        chk_saved *s = slot_of(c, k);
        if (s->run == c->saved_run) continue;
        if (c->saved_n == SIM_STORE_CAPACITY_MAX) { /* more than the store holds: it evicted */
            chk_saved_off(c, "more keys saved than the store holds");
            return;
        }
        *s = (chk_saved){.key = k, .run = c->saved_run, .id = j->id, .engine = a->engine, .rank = a->rank,
                         .group = j->e[i].group, .pos = j->e[i].pos};
        c->saved_n++;
    }
}

/* Does engine i save to the store (a producer with a store connector)? */
static bool store_producer(const sim_check *c, uint32_t i) {
    const kv_engine *e = c->v.eng[i];
    return i < c->v.cfg->n_p && e->cfg.role == KV_ROLE_PRODUCER && kv_conn_kind_has_store(e->conn_kind);
}

/* A request arrived at an engine's scheduler: P's view of its prompt. */
void chk_saved_arrive(sim_check *c, uint32_t engine, const kv_msg *m) {
    kv_req_spec s;
    if (m->len < sizeof s || engine >= c->v.cfg->n_p) return;
    memcpy(&s, m->payload, sizeof s);
    if (s.id >= chk_n_reqs(c)) return;
    c->req[s.id].p_tokens = s.tokens;
    c->req[s.id].p_prompt = chk_prompt_on(c, engine, &s);
}

/* A request ended on an engine: one that ended ok on a store producer
 * computed (or loaded) its whole prompt there, so its saves must have put
 * every block a later hit of the whole prompt needs. */
void chk_saved_req_done(sim_check *c, const kv_m_req_done *d) {
    if (d->id >= chk_n_reqs(c) || d->engine >= c->v.n_eng || d->refused) return;
    if (d->status == KV_RS_FINISHED_LENGTH_CAPPED && store_producer(c, d->engine)) c->req[d->id].produced = true;
}

/* The keys a request that ended ok on store producer `engine` must have
 * left in the store: per rank, per group, the positions a hit of the whole
 * prompt's full blocks needs (kv_store_needs). The first missing one, or
 * false. */
static bool produced_missing(sim_check *c, uint32_t engine, const chk_req *q, uint32_t *rank, uint32_t *group,
                             uint32_t *pos) {
    const kv_engine *e = c->v.eng[engine];
    const kv_engine_cfg *cfg = &e->cfg;
    uint32_t to = q->p_prompt / cfg->block_size;
    if (to > KV_REQ_BLOCKS_MAX) to = KV_REQ_BLOCKS_MAX;
    uint64_t hash[KV_REQ_BLOCKS_MAX];
    kv_digest_memo dm;
    kv_digest_memo_init(&dm, &q->p_tokens, cfg->block_size, 0);
    for (uint32_t g = 0; g < cfg->n_groups; g++) {
        /* a recurrent state exists only at the computed length: the state at
         * the last full block is gone once the prompt runs past it */
        if (cfg->group[g].kind == KV_GROUP_MAMBA && q->p_prompt % cfg->block_size) continue;
        kv_store_hashes(&dm, g, to, hash);
        for (uint32_t r = 0; r < cfg->tp; r++) {
            const kv_worker *w = e->worker[r];
            for (uint32_t p = 0; p < to; p++) {
                if (!kv_store_needs(cfg, g, p, to) ||
                    sim_store_has(c->v.store, kv_store_key_of(hash[p], w->head_lo, w->head_hi)))
                    continue;
                *rank = r, *group = g, *pos = p;
                return true;
            }
        }
    }
    return false;
}

/* A worker main heard its sender's SAVE_DONE. */
void chk_saved_done(sim_check *c, const kv_msg *m) {
    const kv_m_store_save_done *d = m->payload;
    if (m->len >= sizeof *d && d->status != 0) chk_saved_off(c, "a save failed or was skipped");
}

void chk_saved_end(sim_check *c) {
    if (c->saved_off) return;
    if (sim_store_get_stats(c->v.store)->evictions) return;
    c->v.res->armed[KV_INV_CACHE]++;
    uint32_t missing = 0;
    const chk_saved *first = NULL;
    for (uint32_t i = 0; i < CHK_SAVED_KEYS; i++) {
        const chk_saved *s = &c->saved[i];
        if (s->run != c->saved_run || sim_store_has(c->v.store, s->key)) continue;
        if (!first || s->id < first->id || (s->id == first->id && (s->group < first->group ||
                                                                    (s->group == first->group && s->pos < first->pos))))
            first = s;
        missing++;
    }
    if (first) {
        kv_violate(c->v.env, KV_INV_CACHE, first->engine, first->id,
                   "request %u: engine %u rank %u handed group %u position %u to a save that reported done, and the "
                   "store does not hold it (%u of %u saved keys missing; no save failed, no key evicted)",
                   first->id, first->engine, first->rank, first->group, first->pos, missing, c->saved_n);
        return;
    }
    for (uint32_t id = 0; id < chk_n_reqs(c); id++) {
        const chk_req *q = &c->req[id];
        uint32_t engine = chk_p_of(c, id), r, g, p;
        if (!q->produced || !produced_missing(c, engine, q, &r, &g, &p)) continue;
        kv_violate(c->v.env, KV_INV_CACHE, engine, id,
                   "request %u ended ok on engine %u, which saves to the store, but the store does not hold its "
                   "group %u position %u (rank %u) of a %u-token prompt: the blocks a later hit of its prompt needs "
                   "were never saved (no save failed, no key evicted)",
                   id, engine, g, p, r, q->p_prompt);
        return;
    }
}
