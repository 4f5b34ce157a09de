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
 * (engine, rank, group, position) and how many keys are missing. */
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

/* A worker main heard its sender's SAVE_DONE. */
void chk_saved_done(sim_check *c, const kv_msg *m) {
    const kv_m_store_save_done *d = m->payload;
    if (m->len >= sizeof *d && d->status != 0) chk_saved_off(c, "a save failed or was skipped");
}

void chk_saved_end(sim_check *c) {
    if (c->saved_off || !c->saved_n) return;
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
    if (first)
        kv_violate(c->v.env, KV_INV_CACHE, first->engine, first->id,
                   "request %u: engine %u rank %u handed group %u position %u to a save that reported done, and the "
                   "store does not hold it (%u of %u saved keys missing; no save failed, no key evicted)",
                   first->id, first->engine, first->rank, first->group, first->pos, missing, c->saved_n);
}
