/* core/engine.c — the engine scheduler actor: request table, block pools,
 * waiting/running queues, vLLM's schedule()/update_from_output() contract
 * with a connector. Request status changes go through core/request.c.
 *
 * Step cycle: TICK -> sched_schedule (connector hooks in vLLM's order) ->
 * EXECUTE to every rank -> STEP_RESULT from every rank -> sched_update ->
 * next TICK. The step (kv_step) is frozen between EXECUTE and the last
 * STEP_RESULT.
 *
 * Simplifications, each deliberate:
 *  - prefix caching uses group 0 (full attention) hashes; sliding-window
 *    groups need their window blocks cached too; a mamba-like group keeps
 *    its state in the block at the table's last position (a new block
 *    when the table grows, the old one freed after the step that read it),
 *    and a state that ends exactly at a block boundary is cached there, so
 *    a hit of k blocks takes the state after them;
 *  - a step's tokens are computed when the step is scheduled (vLLM's
 *    _update_after_schedule), and outputs arrive with STEP_RESULT;
 *  - progress rules vLLM's loop lacks (each found as a stall by the
 *    simulator): arrived remote KV is taken in before the token budget is
 *    spent; requests holding loaded KV are not blocked behind an
 *    unadmittable head; a request about to preempt itself, or a step that
 *    would schedule nothing with nothing in flight, first makes a waiting
 *    holder of loaded KV give its blocks back (it recomputes).
 *
 * As vLLM's schedule(): a waiting request with nothing computed (new, a
 * recompute after a failed load, or preempted) asks the local prefix cache
 * and the connector again; a step that preempted a request takes no
 * waiting request (the preempted one comes back at the earliest in the
 * next step, after the connectors' build has seen the preemption), and the
 * next step follows it at once.
 *
 * Invariants of the scheduler object (sched_invariants, O(1), on entry to
 * and return from every message in every build; sched_walk, the whole
 * table, on return in checked builds; INV-ASSERT, core/assert.h):
 *   E1 n_waiting <= reqs_max, n_running <= min(reqs_max, max_running);
 *   E2 no live bit at or above reqs_max;
 *   E3 n_waiting + n_running <= reqs_max (and, W1, the queued slots are
 *      distinct live ones);
 *   E4 busy <=> results_pending > 0, results_pending <= tp, and no TICK is
 *      armed while busy (a step's news is kept in wake_pending instead);
 *   E5 the frozen step holds at most reqs_max requests, and the input
 *      queue at most KV_ENGINE_INQ(reqs_max) entries;
 *   W1 every queued entry is a live slot, and no slot is queued twice;
 *   W2 waiting slots are WAITING, WAITING_FOR_REMOTE_KVS or PREEMPTED;
 *      running slots are RUNNING;
 *   W3 every live slot: used, live_id[i] is its id, its request keeps
 *      R1-R4 (core/request.c), its phase is the one its status and hold
 *      imply (phase_of), its table has the engine's groups, all of the same
 *      length (allocate_slots: all groups or none); it is queued exactly
 *      when it is not finished, and held (delay_free) only when finished;
 *   W4 ids are unique among live slots (find() relies on it);
 *   W5 every real block of a live request's table is held in its pool
 *      (after a TICK or a STEP_RESULT: where tables grow or change);
 *   W6 finished_recving_kv names live requests in WAITING_FOR_REMOTE_KVS,
 *      failed_recving_kv live requests.
 * Pre- and postconditions of the helpers below name what they rely on:
 * preempt a RUNNING request with room at the head of the queue, take remote
 * KV only WAITING_FOR_REMOTE_KVS, free a live slot, step a request within
 * its tokens, allocate after the free check without failing, take a prefix
 * hit the lookup found, merge a STEP_RESULT of one of our ranks. */
#include "core/engine.h"

#include <stdio.h> /* snprintf only */
#include <string.h>

#include "core/assert.h"
#include "core/request.h"
#include "core/worker.h"

_Static_assert(KV_DIGEST_MEMO_BLOCKS >= KV_REQ_BLOCKS_MAX, "a digest memo covers a request's blocks");

#define ENG_VIOLATE(e, inv, req, ...) kv_violate((e)->env, (inv), (e)->cfg.index, (req), __VA_ARGS__)
#define ENG_ASSERT(e, cond, ...) KV_ASSERT((e)->env, (e)->cfg.index, cond, __VA_ARGS__)
#define ENG_ASSERT_CHECKED(e, cond, ...) KV_ASSERT_CHECKED((e)->env, (e)->cfg.index, cond, __VA_ARGS__)

/* ---- request table ---------------------------------------------------- */

_Static_assert(KV_ENGINE_REQS_MAX <= 64, "kv_engine.live is one word");

/* Ids are unique among live slots (on_add ignores a duplicate): the hint
 * slot answers most look-ups, else a scan of the dense live_id array. */
static kv_sreq *find(kv_engine *e, uint32_t id) {
    uint32_t h = e->hint[id % KV_ENGINE_REQS_MAX];
    if ((e->live >> h & 1u) && e->live_id[h] == id) return &e->req[h];
    for (uint64_t m = e->live; m; m &= m - 1) {
        uint32_t i = (uint32_t)__builtin_ctzll(m);
        if (e->live_id[i] == id) return &e->req[i];
    }
    return NULL;
}

const kv_sreq *kv_engine_find(const kv_engine *e, uint32_t id) {
    return find((kv_engine *)e, id);
}

static uint32_t slot_of(const kv_engine *e, const kv_sreq *s) { return (uint32_t)(s - e->req); }

static void list_remove(uint32_t *list, uint32_t *n, uint32_t slot) {
    for (uint32_t i = 0; i < *n; i++) {
        if (list[i] != slot) continue;
        memmove(&list[i], &list[i + 1], (*n - i - 1) * sizeof list[0]);
        (*n)--;
        return;
    }
}

/* The phase a request's status and hold imply (fault-coverage accounting). */
static uint32_t phase_of(const kv_engine *e, const kv_sreq *s) {
    bool p = e->cfg.role == KV_ROLE_PRODUCER;
    switch ((kv_req_status)s->r.status) {
    case KV_RS_WAITING:
    case KV_RS_PREEMPTED: return p ? KV_PH_P_QUEUED : KV_PH_D_QUEUED;
    case KV_RS_WAITING_FOR_REMOTE_KVS: return KV_PH_D_WAITING_KV;
    case KV_RS_RUNNING: return p ? KV_PH_P_PREFILL : KV_PH_D_DECODE;
    case KV_RS_FINISHED_STOPPED:
    case KV_RS_FINISHED_LENGTH_CAPPED:
    case KV_RS_FINISHED_ABORTED:
    case KV_RS_FINISHED_ERROR:
    case KV_RS_COUNT: break;
    }
    return s->delay_free && p ? KV_PH_P_HELD : KV_PH_DONE;
}

static void set_phase(kv_engine *e, kv_sreq *s) { s->phase = phase_of(e, s); }

static void set_status(kv_engine *e, kv_sreq *s, kv_req_status to) {
    kv_req_set_status(e->env, e->cfg.index, &s->r, to);
    set_phase(e, s);
}

/* ---- blocks -------------------------------------------------------------- */

static void tag_blocks(kv_engine *e, kv_sreq *s, kv_block_tag tag) {
    for (uint32_t g = 0; g < s->r.blocks.n_groups; g++)
        for (uint32_t i = 0; i < s->r.blocks.n[g]; i++)
            if (s->r.blocks.id[g][i] != KV_NULL_BLOCK) kv_pool_tag(&e->pool[g], s->r.blocks.id[g][i], tag);
}

static void forget_cached(kv_sreq *s);

static void free_blocks(kv_engine *e, kv_sreq *s) {
    for (uint32_t g = 0; g < s->r.blocks.n_groups; g++) {
        kv_pool_free(&e->pool[g], s->r.blocks.id[g], s->r.blocks.n[g]);
        s->r.blocks.n[g] = 0;
    }
    forget_cached(s);
}

/* Blocks each group must add so the table covers `upto` tokens. */
static uint32_t blocks_needed(const kv_engine *e, const kv_sreq *s, uint32_t g, uint32_t upto) {
    uint32_t want = kv_cdiv(upto, e->cfg.block_size);
    uint32_t have = s->r.blocks.n[g];
    if (want <= have) return 0;
    if (e->cfg.group[g].kind == KV_GROUP_MAMBA) return 1u; /* the new last position's state */
    return want - have;
}

/* vLLM allocate_slots: all groups or none. */
static bool alloc_upto(kv_engine *e, kv_sreq *s, uint32_t upto) {
    if (kv_cdiv(upto, e->cfg.block_size) > KV_REQ_BLOCKS_MAX) return false;
    for (uint32_t g = 0; g < e->cfg.n_groups; g++)
        if (kv_pool_num_free(&e->pool[g]) < blocks_needed(e, s, g, upto)) return false;
    uint32_t want = kv_cdiv(upto, e->cfg.block_size);
    for (uint32_t g = 0; g < e->cfg.n_groups; g++) {
        kv_block_table *t = &s->r.blocks;
        uint32_t have = t->n[g];
        if (want <= have) continue;
        /* the free check above covered every group: an allocation that
         * fails now would leave the table half grown */
        kv_status st = KV_OK;
        if (e->cfg.group[g].kind == KV_GROUP_MAMBA) {
            /* the step writes its state into a new block at the last
             * position, reading the one it continues from at the old last */
            for (uint32_t i = have; i + 1 < want; i++) t->id[g][i] = KV_NULL_BLOCK;
            st = kv_pool_alloc(&e->pool[g], 1, &t->id[g][want - 1]);
        } else {
            st = kv_pool_alloc(&e->pool[g], want - have, &t->id[g][have]);
        }
        ENG_ASSERT(e, st == KV_OK, "engine %u request %u group %u: allocating %u -> %u blocks after the free check: %s",
                   e->cfg.index, s->r.id, g, have, want, kv_status_str(st));
        t->n[g] = want;
    }
    return true;
}

/* remove_skipped_blocks: sliding-window blocks wholly outside the window;
 * a mamba-like group's blocks before the one holding the current state. */
static void remove_skipped(kv_engine *e, kv_sreq *s) {
    for (uint32_t g = 0; g < e->cfg.n_groups; g++) {
        uint32_t tail = kv_cdiv(s->r.num_computed, e->cfg.block_size);
        uint32_t dead = e->cfg.group[g].kind == KV_GROUP_SLIDING
                            ? kv_sw_dead_blocks(s->r.num_computed, e->cfg.group[g].window, e->cfg.block_size)
                        : e->cfg.group[g].kind == KV_GROUP_MAMBA && tail ? tail - 1u
                                                                         : 0u;
        for (uint32_t i = 0; i < dead && i < s->r.blocks.n[g]; i++) {
            uint32_t *id = &s->r.blocks.id[g][i];
            if (*id == KV_NULL_BLOCK) continue;
            kv_pool_free(&e->pool[g], id, 1);
            *id = KV_NULL_BLOCK;
        }
    }
}

/* Cache every full block of tokens [0, upto) in full and sliding groups,
 * and a mamba-like group's state when it is the one after exactly upto;
 * positions cached by an earlier call are not hashed again (a block, once
 * full, never changes; the count restarts when the request loses its
 * blocks: forget_cached). */
static void cache_blocks(kv_engine *e, kv_sreq *s, uint32_t upto) {
    if (!e->cfg.prefix_caching) return;
    /* only computed KV may be found by a later prefix hit */
    if (!ENG_ASSERT(e, upto <= s->r.num_computed && s->cached_blocks <= KV_REQ_BLOCKS_MAX,
                    "engine %u request %u: caching %u tokens of %u computed (%u blocks cached)", e->cfg.index, s->r.id,
                    upto, s->r.num_computed, s->cached_blocks))
        return;
    uint32_t full = upto / e->cfg.block_size;
    /* a recurrent state exists only at the computed length: the one at the
     * last full block when that is where the request stands */
    bool state_at_full = upto == s->r.num_computed && upto == full * e->cfg.block_size;
    for (uint32_t pos = s->cached_blocks; pos < full && pos < KV_REQ_BLOCKS_MAX; pos++) {
        for (uint32_t g = 0; g < e->cfg.n_groups; g++) {
            uint64_t h = s->cache_parent[g] = kv_block_hash_m(&s->dm, s->cache_parent[g], pos, g);
            if (pos >= s->r.blocks.n[g]) continue;
            if (e->cfg.group[g].kind == KV_GROUP_MAMBA && !(state_at_full && pos + 1 == full)) continue;
            if (s->r.blocks.id[g][pos] != KV_NULL_BLOCK) kv_pool_cache(&e->pool[g], s->r.blocks.id[g][pos], h);
        }
        s->cached_blocks = pos + 1;
    }
}

static void forget_cached(kv_sreq *s) {
    s->cached_blocks = 0;
    memset(s->cache_parent, 0, sizeof s->cache_parent);
}

static uint32_t sw_blocks(const kv_engine *e, uint32_t g) {
    return e->cfg.group[g].kind == KV_GROUP_SLIDING ? kv_sw_blocks(e->cfg.group[g].window, e->cfg.block_size) : 0;
}

/* Is position pos of group g needed for a hit of k blocks? */
static bool hit_needs(const kv_engine *e, uint32_t g, uint32_t pos, uint32_t k) {
    switch ((kv_group_kind)e->cfg.group[g].kind) {
    case KV_GROUP_FULL: return true;
    case KV_GROUP_SLIDING: return pos + sw_blocks(e, g) >= k;
    case KV_GROUP_MAMBA: return pos + 1 == k; /* the state after the hit */
    }
    return true;
}

/* get_computed_blocks: the longest cached prefix, capped at num_tokens - 1. */
static uint32_t prefix_hit_blocks(const kv_engine *e, kv_sreq *s) {
    if (!e->cfg.prefix_caching || e->cfg.group[0].kind != KV_GROUP_FULL) return 0;
    uint32_t bs = e->cfg.block_size, n = kv_req_num_tokens(&s->r);
    uint32_t max_k = n ? (n - 1) / bs : 0;
    uint64_t hash[KV_REQ_BLOCKS_MAX][KV_GROUPS_MAX];
    uint64_t parent[KV_GROUPS_MAX] = {0};
    uint32_t k = 0;
    for (; k < max_k && k < KV_REQ_BLOCKS_MAX; k++) { /* group 0 first: most lookups stop early */
        parent[0] = hash[k][0] = kv_block_hash_m(&s->dm, parent[0], k, 0);
        if (!kv_pool_lookup(&e->pool[0], hash[k][0])) break;
    }
    for (uint32_t g = 1; g < e->cfg.n_groups; g++)
        for (uint32_t pos = 0; pos < k; pos++)
            parent[g] = hash[pos][g] = kv_block_hash_m(&s->dm, parent[g], pos, g);
    for (; k > 0; k--) { /* every other group must also have what it needs */
        bool ok = true;
        for (uint32_t g = 1; g < e->cfg.n_groups && ok; g++)
            for (uint32_t pos = 0; pos < k && ok; pos++)
                if (hit_needs(e, g, pos, k) && !kv_pool_lookup(&e->pool[g], hash[pos][g])) ok = false;
        if (ok) break;
    }
    return k;
}

static void take_prefix_hit(kv_engine *e, kv_sreq *s, uint32_t k) {
    uint32_t bs = e->cfg.block_size;
    uint64_t parent[KV_GROUPS_MAX] = {0};
    /* a fresh request: its table is empty, and a hit stays below its length */
    if (!ENG_ASSERT(e, k <= KV_REQ_BLOCKS_MAX && k * bs < kv_req_num_tokens(&s->r) && s->r.blocks.n[0] == 0,
                    "engine %u request %u: prefix hit of %u blocks for %u tokens, table of %u", e->cfg.index,
                    s->r.id, k, kv_req_num_tokens(&s->r), s->r.blocks.n[0]))
        return;
    for (uint32_t pos = 0; pos < k; pos++) {
        for (uint32_t g = 0; g < e->cfg.n_groups; g++) {
            uint64_t h = parent[g] = kv_block_hash_m(&s->dm, parent[g], pos, g);
            uint32_t id = KV_NULL_BLOCK;
            if (hit_needs(e, g, pos, k)) {
                /* prefix_hit_blocks found every needed block in this event */
                id = kv_pool_lookup(&e->pool[g], h);
                kv_status st = kv_pool_touch(&e->pool[g], id);
                ENG_ASSERT(e, id != KV_NULL_BLOCK && st == KV_OK,
                           "engine %u request %u group %u position %u: prefix hit block %u: %s", e->cfg.index,
                           s->r.id, g, pos, id, kv_status_str(st));
            }
            s->r.blocks.id[g][pos] = id;
            s->r.blocks.n[g] = pos + 1;
        }
    }
    s->r.num_computed = k * bs;
    s->local_hit = k * bs;
    e->stats.prefix_hit_tokens += k * bs;
}

/* ---- finishing ------------------------------------------------------------ */

static void post_done(kv_engine *e, const kv_sreq *s) {
    kv_m_req_done d = {.engine = e->cfg.index, .id = s->r.id, .status = s->r.status,
                       .num_output = s->r.num_output, .phase = s->phase};
    if (e->cfg.proxy_actor != KV_ACTOR_NONE)
        kv_rt_post(e->rt, e->cfg.proxy_actor, KV_M_REQ_DONE, &d, sizeof d);
}

static void delete_req(kv_engine *e, kv_sreq *s) {
    uint32_t slot = slot_of(e, s);
    /* a slot is freed once, while live, and never while a queue names it */
    if (!ENG_ASSERT(e, slot < e->cfg.reqs_max && (e->live >> slot & 1u) && s->used,
                    "engine %u request %u: delete of slot %u (live %d, used %d)", e->cfg.index, s->r.id, slot,
                    slot < 64u ? (int)(e->live >> slot & 1u) : -1, (int)s->used))
        return;
    for (uint32_t i = 0; KV_CHECKED && i < e->n_waiting + e->n_running; i++) {
        uint32_t q = i < e->n_waiting ? e->waiting[i] : e->running[i - e->n_waiting];
        if (!ENG_ASSERT_CHECKED(e, q != slot, "engine %u request %u: deleting slot %u while queued (%s)",
                                e->cfg.index, s->r.id, slot, i < e->n_waiting ? "waiting" : "running"))
            return;
    }
    kv_id_list_remove(&e->finished_recving_kv, s->r.id);
    kv_id_list_remove(&e->failed_recving_kv, s->r.id);
    e->live &= ~(1ull << slot_of(e, s));
    memset(s, 0, sizeof *s);
}

/* _free_request: ask the connector, then free now or hold. */
static void finish_req(kv_engine *e, kv_sreq *s, kv_req_status st) {
    kv_req_status was = (kv_req_status)s->r.status;
    uint32_t slot = slot_of(e, s);
    /* a live request ends, with an end status (the edge itself is the
     * request setter's SCHED-ASSERT, as in vLLM) */
    if (!ENG_ASSERT(e, slot < e->cfg.reqs_max && (e->live >> slot & 1u) && kv_req_status_finished(st),
                    "engine %u request %u: finish of slot %u as %s", e->cfg.index, s->r.id, slot, kv_req_status_name(st)))
        return;
    list_remove(e->waiting, &e->n_waiting, slot);
    list_remove(e->running, &e->n_running, slot);
    set_status(e, s, st);
    kv_id_list_add(&e->finished_since_step, s->r.id);
    bool delay = was == KV_RS_WAITING_FOR_REMOTE_KVS && !kv_id_list_has(&e->finished_recving_kv, s->r.id);
    remove_skipped(e, s);
    bool conn_delay = false;
    e->conn.ops->request_finished(e->conn.self, &s->r, &s->r.blocks, &conn_delay);
    if (conn_delay && !delay) tag_blocks(e, s, KV_BT_PINNED);
    delay = delay || conn_delay;
    s->delay_free = delay;
    set_phase(e, s);
    e->stats.finished++;
    post_done(e, s);
    if (!delay) {
        free_blocks(e, s);
        delete_req(e, s);
    }
}

/* ---- scheduling ------------------------------------------------------------ */

static void preempt(kv_engine *e, kv_sreq *s) {
    /* only a running request is preempted, and the waiting queue has room
     * for it at the head (it held a running slot, so the live slots bound
     * both queues together) */
    if (!ENG_ASSERT(e, s->r.status == KV_RS_RUNNING && e->n_waiting < e->cfg.reqs_max,
                    "engine %u request %u: preempt in %s, n_waiting %u of %u", e->cfg.index, s->r.id,
                    kv_req_status_name((kv_req_status)s->r.status), e->n_waiting, e->cfg.reqs_max))
        return;
    list_remove(e->running, &e->n_running, slot_of(e, s));
    free_blocks(e, s);
    s->r.num_computed = 0;
    s->r.num_preemptions++;
    set_status(e, s, KV_RS_PREEMPTED);
    kv_id_list_add(&e->preempted_since_step, s->r.id);
    memmove(&e->waiting[1], &e->waiting[0], e->n_waiting * sizeof e->waiting[0]);
    e->waiting[0] = slot_of(e, s);
    e->n_waiting++;
    e->stats.preemptions++;
}

/* n tokens of the request, spec of them drafts past its last token */
static void step_add(kv_engine *e, kv_sched_output *so, kv_sreq *s, uint32_t n, uint32_t spec, bool is_new) {
    /* one entry per scheduled request, within its tokens, its drafts and its table */
    if (!ENG_ASSERT(e, e->step.n_reqs < e->cfg.reqs_max && n > spec && spec <= e->cfg.num_spec &&
                           n - spec <= kv_req_num_tokens(&s->r) - s->r.num_computed && s->r.num_spec == 0 &&
                           s->r.blocks.n[0] * e->cfg.block_size >= s->r.num_computed + n,
                    "engine %u request %u: step entry %u of %u for %u tokens, %u drafts (%u of %u computed, table %u "
                    "blocks)",
                    e->cfg.index, s->r.id, e->step.n_reqs, e->cfg.reqs_max, n, spec, s->r.num_computed,
                    kv_req_num_tokens(&s->r), s->r.blocks.n[0]))
        return;
    kv_step_req *q = &e->step.req[e->step.n_reqs++];
    q->id = s->r.id;
    q->computed_before = s->r.num_computed;
    q->num_scheduled = n;
    q->num_spec = spec;
    s->r.num_spec = spec;
    e->stats.drafts += spec;
    e->stats.draft_blocks += spec && kv_cdiv(q->computed_before + n, e->cfg.block_size) >
                                         kv_cdiv(q->computed_before + n - spec, e->cfg.block_size);
    q->num_tokens = kv_req_num_tokens(&s->r);
    q->tokens = s->tokens;
    s->r.num_computed += n;
    if (is_new) kv_id_list_add(&so->new_reqs, s->r.id);
    else kv_id_list_add(&so->cached_reqs, s->r.id);
}

/* _update_waiting_for_remote_kv */
static void remote_kv_ready(kv_engine *e, kv_sreq *s) {
    if (!ENG_ASSERT(e, s->r.status == KV_RS_WAITING_FOR_REMOTE_KVS && kv_id_list_has(&e->finished_recving_kv, s->r.id),
                    "engine %u request %u: remote KV taken in %s (finished_recving %d)", e->cfg.index, s->r.id,
                    kv_req_status_name((kv_req_status)s->r.status), (int)kv_id_list_has(&e->finished_recving_kv, s->r.id)))
        return;
    bool failed = kv_id_list_remove(&e->failed_recving_kv, s->r.id);
    kv_id_list_remove(&e->finished_recving_kv, s->r.id);
    uint32_t n = kv_req_num_tokens(&s->r);
    tag_blocks(e, s, KV_BT_OWNED);
    if (failed) {
        /* recompute: free everything; the next schedule starts afresh and
         * finds whatever prefix is still cached */
        free_blocks(e, s);
        s->r.num_computed = 0;
        s->local_hit = 0;
    } else {
        uint32_t got = s->r.blocks.n[0] * e->cfg.block_size;
        uint32_t loaded = got < n ? got : n;
        /* sliding-window blocks outside the window were not loaded (the
         * transfer and the store keep only the window): free them before
         * anything is cached, so no prefix hit ever sees their bytes. The
         * window is the one at the end of what was loaded: P freed the
         * blocks outside it when it finished the whole prompt, one token
         * past what this engine counts as computed (it recomputes the
         * last), and when (n - window) is a multiple of the block size
         * that is one block more. */
        s->r.num_computed = loaded;
        remove_skipped(e, s);
        uint32_t c = loaded == n && n > 0 ? n - 1 : loaded;
        s->r.num_computed = c;
        cache_blocks(e, s, c);
    }
    set_status(e, s, s->r.num_preemptions ? KV_RS_PREEMPTED : KV_RS_WAITING);
}

static bool release_waiting_holder(kv_engine *e, uint32_t from);

/* The drafts a running request's step takes (vLLM: the spec_token_ids its
 * drafter proposed with its last token, trimmed to the token budget): a
 * request that has generated a token and has one left to compute takes up
 * to num_spec, never past its max_tokens (the accepted drafts and the
 * bonus token end it there) nor past its table. Blocks are allocated for
 * them like for any token. */
static uint32_t drafts_of(const kv_engine *e, const kv_sreq *s, uint32_t n, uint32_t budget) {
    const kv_req *r = &s->r;
    if (!e->cfg.num_spec || n != 1 || !r->num_output || r->num_computed + 1 != kv_req_num_tokens(r)) return 0;
    uint32_t k = e->cfg.num_spec, left = r->max_tokens - r->num_output; /* >= 1: one at max_tokens finished */
    uint32_t cap = KV_REQ_BLOCKS_MAX * e->cfg.block_size, room = cap > kv_req_num_tokens(r) ? cap - kv_req_num_tokens(r) : 0;
    if (k > left - 1) k = left - 1;
    if (k > budget - 1) k = budget - 1;
    return k < room ? k : room;
}

static void schedule_running(kv_engine *e, kv_sched_output *so, uint32_t *budget) {
    for (uint32_t i = 0; i < e->n_running && *budget;) {
        kv_sreq *s = &e->req[e->running[i]];
        uint32_t n = kv_req_num_tokens(&s->r) - s->r.num_computed;
        if (n > *budget) n = *budget;
        if (n == 0) { i++; continue; }
        uint32_t k = drafts_of(e, s, n, *budget);
        n += k;
        while (!alloc_upto(e, s, s->r.num_computed + n)) {
            kv_sreq *victim = &e->req[e->running[e->n_running - 1]];
            /* before a request preempts itself, waiting requests sitting on
             * loaded KV give theirs back (else it recomputes its prefill every
             * step while they wait for budget it always takes: a livelock) */
            if (victim == s && release_waiting_holder(e, 0)) continue;
            preempt(e, victim);
            if (victim == s) break;
        }
        if (s->r.status != KV_RS_RUNNING) continue; /* preempted itself; list shrank */
        step_add(e, so, s, n, k, false);
        *budget -= n;
        i++;
    }
}

/* First schedule of a waiting request: local prefix hit, connector hooks. */
static bool admit_new(kv_engine *e, kv_sreq *s, uint32_t budget, kv_match *m) {
    uint32_t k = prefix_hit_blocks(e, s);
    uint32_t hit = k * e->cfg.block_size;
    if (e->conn.ops->get_num_new_matched_tokens(e->conn.self, &s->r, hit, m) != KV_OK) return false;
    if (!m->ready) return false;
    uint32_t n = kv_req_num_tokens(&s->r);
    /* a connector never offers more than the request has (the sizes below
     * are n - hit - ext) */
    if (!ENG_ASSERT(e, hit + m->ext <= n, "engine %u request %u: local hit %u + external %u of %u tokens (connector %s)",
                    e->cfg.index, s->r.id, hit, m->ext, n, e->conn.ops->name))
        return false;
    /* a remote load allocates what it loads: for a model with a recurrent
     * group N - 1 tokens, which P computed (its connector truncated the
     * prompt), so both tables have the same length */
    uint32_t upto = m->load_async ? hit + m->ext : hit + m->ext + (n - hit - m->ext < budget ? n - hit - m->ext : budget);
    if (upto > n) upto = n;
    if (k) take_prefix_hit(e, s, k);
    if (!alloc_upto(e, s, upto > 0 ? upto : 1)) {
        free_blocks(e, s);
        s->r.num_computed = 0;
        s->local_hit = 0;
        return false;
    }
    e->conn.ops->update_state_after_alloc(e->conn.self, &s->r, &s->r.blocks, m->ext);
    e->stats.resumed_hits += s->r.status == KV_RS_PREEMPTED && hit + m->ext > 0;
    /* admitted: it computed its local hit and holds blocks for that and
     * everything it will load */
    ENG_ASSERT(e, s->r.num_computed == hit && s->r.blocks.n[0] * e->cfg.block_size >= hit + m->ext,
               "engine %u request %u admitted with %u computed (hit %u), %u blocks for %u external", e->cfg.index,
               s->r.id, s->r.num_computed, hit, s->r.blocks.n[0], m->ext);
    return true;
}

/* The waiting loop. A request that cannot be admitted blocks every later
 * new request (FCFS, as vLLM's `break`), but not requests whose remote KV
 * has arrived: they already hold their blocks, and letting a preempted
 * request at the head starve them can deadlock a small pool (the preempted
 * request needs exactly the blocks they hold). Visited requests that do not
 * run keep their order at the head of the queue (vLLM's prepend). */
static void schedule_waiting(kv_engine *e, kv_sched_output *so, uint32_t *budget) {
    uint32_t skipped[KV_ENGINE_REQS_MAX], n_skipped = 0;
    bool blocked = false;
    /* Arrived remote KV is bookkeeping, not compute: take it in for every
     * waiting request first, whatever the token budget (a failed load frees
     * its blocks now instead of when the budget reaches it). */
    for (uint32_t i = 0; i < e->n_waiting; i++) {
        kv_sreq *s = &e->req[e->waiting[i]];
        if (s->r.status == KV_RS_WAITING_FOR_REMOTE_KVS && kv_id_list_has(&e->finished_recving_kv, s->r.id))
            remote_kv_ready(e, s);
    }
    while (e->n_waiting && *budget && e->n_running < e->cfg.max_running) {
        uint32_t slot = e->waiting[0];
        kv_sreq *s = &e->req[slot];
        list_remove(e->waiting, &e->n_waiting, slot);
        bool remote = s->r.status == KV_RS_WAITING_FOR_REMOTE_KVS;
        bool ready = remote && kv_id_list_has(&e->finished_recving_kv, s->r.id);
        bool holds = remote || kv_blocks_any(&s->r.blocks); /* loaded KV, waiting for the rest */
        if ((remote && !ready) || (blocked && !holds)) {
            skipped[n_skipped++] = slot;
            continue;
        }
        if (ready) remote_kv_ready(e, s);
        kv_match m = {.ready = true};
        /* nothing computed: a new request, a recompute after a failed load, or
         * a preempted one (vLLM's num_computed_tokens == 0): the local prefix
         * cache and the connector are asked again */
        bool fresh = s->r.num_computed == 0 && (s->r.status == KV_RS_WAITING || s->r.status == KV_RS_PREEMPTED);
        if (fresh && !admit_new(e, s, *budget, &m)) {
            blocked = blocked || m.ready; /* "not ready yet" (vLLM's None) skips, a full pool blocks */
            skipped[n_skipped++] = slot;
            continue;
        }
        if (fresh && m.load_async) {
            tag_blocks(e, s, KV_BT_INFLIGHT);
            set_status(e, s, KV_RS_WAITING_FOR_REMOTE_KVS);
            skipped[n_skipped++] = slot;
            continue;
        }
        uint32_t n = kv_req_num_tokens(&s->r) - s->r.num_computed;
        if (n > *budget) n = *budget;
        if (!alloc_upto(e, s, s->r.num_computed + n)) {
            blocked = true;
            skipped[n_skipped++] = slot;
            continue;
        }
        if (!ENG_ASSERT(e, e->n_running < e->cfg.reqs_max, "engine %u request %u: running queue full (%u)",
                        e->cfg.index, s->r.id, e->n_running))
            return;
        e->running[e->n_running++] = slot;
        bool resumed = s->r.status == KV_RS_PREEMPTED;
        set_status(e, s, KV_RS_RUNNING);
        if (n) {
            step_add(e, so, s, n, 0, !resumed);
            if (resumed) kv_id_list_add(&so->resumed_reqs, s->r.id);
            *budget -= n;
        }
    }
    /* the skipped were taken off this queue: they fit back */
    if (!ENG_ASSERT(e, e->n_waiting + n_skipped <= e->cfg.reqs_max,
                    "engine %u: %u waiting + %u skipped exceed %u slots", e->cfg.index, e->n_waiting, n_skipped,
                    e->cfg.reqs_max))
        return;
    memmove(&e->waiting[n_skipped], &e->waiting[0], e->n_waiting * sizeof e->waiting[0]);
    memcpy(&e->waiting[0], skipped, n_skipped * sizeof skipped[0]);
    e->n_waiting += n_skipped;
}

static void fill_step_blocks(kv_engine *e) {
    for (uint32_t i = 0; i < e->step.n_reqs; i++) {
        const kv_sreq *s = find(e, e->step.req[i].id);
        /* what this step scheduled is live and running until it is frozen */
        if (!ENG_ASSERT(e, s && s->r.status == KV_RS_RUNNING, "engine %u step %llu: request %u %s", e->cfg.index,
                        (unsigned long long)e->step.step_no, e->step.req[i].id,
                        s ? kv_req_status_name((kv_req_status)s->r.status) : "not live"))
            continue;
        kv_blocks_copy(&e->step.req[i].blocks, &s->r.blocks);
    }
}

/* Step soon. While a step is in flight the news is remembered instead
 * (wake_pending), and sched_update steps again once it is back: a request
 * or abort that arrives during an empty step is never left waiting. */
static void arm_tick(kv_engine *e, uint64_t delay_ns) {
    if (e->busy) {
        e->wake_pending = true;
        return;
    }
    if (e->tick_armed) return;
    e->tick_armed = true;
    kv_rt_post_at(e->rt, e->sched_actor, kv_now_ns(e->env) + delay_ns, KV_M_TICK, NULL, 0);
}

/* The youngest waiting request at or after queue position `from` that holds
 * loaded KV (not one still receiving) gives its blocks back and will
 * recompute. A deliberate rule of this model, where vLLM's loop can wait
 * forever: see the callers. True if one did. */
static bool release_waiting_holder(kv_engine *e, uint32_t from) {
    for (uint32_t i = e->n_waiting; i-- > from;) {
        kv_sreq *s = &e->req[e->waiting[i]];
        if (s->r.status == KV_RS_WAITING_FOR_REMOTE_KVS || !kv_blocks_any(&s->r.blocks)) continue;
        /* a holder waits (it never ran with these blocks, or was preempted
         * and took KV in since): nothing in flight writes them */
        if (!ENG_ASSERT(e, s->r.status == KV_RS_WAITING || s->r.status == KV_RS_PREEMPTED,
                        "engine %u request %u: releasing the blocks of a %s request", e->cfg.index, s->r.id,
                        kv_req_status_name((kv_req_status)s->r.status)))
            continue;
        free_blocks(e, s);
        s->r.num_computed = 0;
        s->local_hit = 0;
        s->gave_back = true;
        e->stats.recomputes++;
        return true;
    }
    return false;
}

/* Nothing runs, nothing is in flight, and waiting requests that hold loaded
 * KV cannot grow while a blocked head waits for their blocks: one of them
 * (never the head) gives its blocks back. */
static bool release_a_holder(kv_engine *e) {
    if (e->n_running) return false;
    for (uint32_t i = 0; i < e->n_waiting; i++)
        if (e->req[e->waiting[i]].r.status == KV_RS_WAITING_FOR_REMOTE_KVS) return false;
    return release_waiting_holder(e, 1);
}

static void sched_step(kv_engine *e) {
    /* Lists are read up to their n only: set the counts and copy the used
     * ids, not the whole 1.5 KiB (a memset and three whole-list copies per
     * step were a third of this function's time). */
    kv_sched_output so;
    so.new_reqs.n = so.cached_reqs.n = so.resumed_reqs.n = 0;
    e->step.n_reqs = 0;
    e->step.step_no++;
    uint32_t budget = e->cfg.max_batched_tokens;
    schedule_running(e, &so, &budget);
    /* as vLLM's schedule(): no waiting request is taken in a step that
     * preempted one (a preempted request comes back at the earliest in the
     * next step, after the connectors' build has heard of the preemption) */
    bool preempted = e->preempted_since_step.n > 0;
    e->step_preempted = preempted;
    if (!preempted) schedule_waiting(e, &so, &budget);
    /* one holder at a time, until something is scheduled or none is left:
     * the head may need the blocks of several (a step that released one
     * and still scheduled nothing would otherwise be the engine's last) */
    while (!preempted && !e->step.n_reqs && release_a_holder(e)) schedule_waiting(e, &so, &budget);
    fill_step_blocks(e);
    kv_id_list_copy(&so.finished_reqs, &e->finished_since_step);
    kv_id_list_copy(&so.preempted_reqs, &e->preempted_since_step);
    kv_id_list_copy(&e->step.finished, &e->finished_since_step);
    e->finished_since_step.n = 0;
    e->preempted_since_step.n = 0;
    e->step.conn_meta = e->conn.ops->build_connector_meta(e->conn.self, &so);
    e->busy = true;
    e->wake_pending = false; /* this step's get_finished collects what woke it */
    e->results_pending = e->cfg.tp;
    kv_conn_output_clear(&e->agg);
    e->stats.steps++;
    kv_m_execute x = {.step = &e->step};
    for (uint32_t r = 0; r < e->cfg.tp; r++)
        kv_rt_post(e->rt, e->worker[r]->main_actor, KV_M_EXECUTE, &x, sizeof x);
}

/* ---- update_from_output ---------------------------------------------------- */

static bool holds_block(const kv_sreq *s, uint32_t g, uint32_t b) {
    if (g >= s->r.blocks.n_groups) return false;
    for (uint32_t i = 0; i < s->r.blocks.n[g]; i++)
        if (s->r.blocks.id[g][i] == b) return true;
    return false;
}

/* _handle_invalid_blocks, and request-level failed_recving. */
static void handle_load_errors(kv_engine *e) {
    for (uint64_t m = e->live; m; m &= m - 1) {
        kv_sreq *s = &e->req[__builtin_ctzll(m)];
        if (kv_req_status_finished((kv_req_status)s->r.status)) continue;
        bool hit = kv_id_list_has(&e->agg.failed_recving, s->r.id);
        for (uint32_t j = 0; j < e->agg.invalid_blocks.n && !hit; j++)
            hit = holds_block(s, e->agg.invalid_blocks.e[j].group, e->agg.invalid_blocks.e[j].block);
        if (!hit) continue;
        e->stats.load_errors++;
        if (e->cfg.policy == KV_POLICY_FAIL) {
            e->stats.errors++;
            finish_req(e, s, KV_RS_FINISHED_ERROR);
            continue;
        }
        e->stats.recomputes++;
        if (s->r.status == KV_RS_WAITING_FOR_REMOTE_KVS) {
            /* a lost failure would let the load count as done: the list
             * holds live requests only, so it has room */
            bool kept = kv_id_list_add(&e->failed_recving_kv, s->r.id);
            ENG_ASSERT(e, kept, "engine %u request %u: failed_recving_kv full (%u)", e->cfg.index, s->r.id,
                       e->failed_recving_kv.n);
        } else {
            s->r.num_computed = s->local_hit;
        }
    }
}

static void on_finished_recving(kv_engine *e, uint32_t id) {
    kv_sreq *s = find(e, id);
    if (!s) {
        ENG_VIOLATE(e, KV_INV_SCHED_ASSERT, id, "finished_recving(%u): assert req_id in self.requests failed", id);
        return;
    }
    e->stats.finished_recving++;
    if (s->r.status == KV_RS_WAITING_FOR_REMOTE_KVS) {
        if (!kv_id_list_add(&e->finished_recving_kv, id))
            ENG_VIOLATE(e, KV_INV_CONSERVE, id, "finished_recving_kv_req_ids full");
        return;
    }
    if (!kv_req_status_finished((kv_req_status)s->r.status) || !s->delay_free) {
        ENG_VIOLATE(e, KV_INV_SCHED_ASSERT, id,
                    "finished_recving(%u): assert RequestStatus.is_finished(req.status) failed (status %s)",
                    id, kv_req_status_name((kv_req_status)s->r.status));
        return;
    }
    free_blocks(e, s);
    delete_req(e, s);
}

static void on_finished_sending(kv_engine *e, uint32_t id) {
    kv_sreq *s = find(e, id);
    if (!s || !s->delay_free) {
        ENG_VIOLATE(e, KV_INV_STRAY, id, "finished_sending(%u) for a request not held for send", id);
        return;
    }
    e->stats.finished_sending++;
    free_blocks(e, s);
    delete_req(e, s);
}

static bool holds_block(const kv_sreq *s, uint32_t g, uint32_t b);

/* One rank's invalid block into the step's list. Ranks list the same block
 * ids (a table is the engine's, not the rank's): kept once. A block that no
 * longer fits fails its whole request instead of being dropped (a dropped
 * block would count as loaded, and be decoded). */
static void merge_bad_block(kv_engine *e, kv_bad_block b) {
    kv_bad_blocks *l = &e->agg.invalid_blocks;
    for (uint32_t j = 0; j < l->n; j++)
        if (l->e[j].group == b.group && l->e[j].block == b.block) return;
    if (l->n < KV_BAD_BLOCKS_MAX) {
        l->e[l->n++] = b;
        return;
    }
    for (uint64_t m = e->live; m; m &= m - 1) {
        const kv_sreq *s = &e->req[__builtin_ctzll(m)];
        if (holds_block(s, b.group, b.block)) kv_id_list_add(&e->agg.failed_recving, s->r.id);
    }
}

/* Aggregate one rank's output: an id is emitted once every rank reported. */
static void merge_result(kv_engine *e, const kv_m_step_result *res) {
    /* a STEP_RESULT is our own worker's (never a peer's): one of our ranks */
    if (!ENG_ASSERT(e, res->rank < e->cfg.tp, "engine %u step %llu: result from rank %u of %u", e->cfg.index,
                    (unsigned long long)res->step_no, res->rank, e->cfg.tp))
        return;
    for (uint32_t i = 0; i < res->out.finished_recving.n; i++) {
        uint32_t id = res->out.finished_recving.id[i];
        kv_sreq *s = find(e, id);
        if (!s) { kv_id_list_add(&e->agg.finished_recving, id); continue; } /* asserted later */
        if (++s->recv_votes == e->cfg.tp) {
            s->recv_votes = 0;
            kv_id_list_add(&e->agg.finished_recving, id);
        }
    }
    for (uint32_t i = 0; i < res->out.finished_sending.n; i++) {
        uint32_t id = res->out.finished_sending.id[i];
        kv_sreq *s = find(e, id);
        if (!s) { kv_id_list_add(&e->agg.finished_sending, id); continue; }
        if (++s->send_votes == e->cfg.tp) {
            s->send_votes = 0;
            kv_id_list_add(&e->agg.finished_sending, id);
        }
    }
    for (uint32_t i = 0; i < res->out.failed_recving.n; i++)
        kv_id_list_add(&e->agg.failed_recving, res->out.failed_recving.id[i]);
    for (uint32_t i = 0; i < res->out.invalid_blocks.n; i++) merge_bad_block(e, res->out.invalid_blocks.e[i]);
}

/* The step's output for its drafts (vLLM's update_from_output): of a
 * request's k drafts the first a = kv_spec_accepted were accepted, and the
 * KV of the other k - a is rolled back (num_computed_tokens -= rejected);
 * the accepted ones are output tokens whose KV exists, the bonus token
 * after them is generated below. Their slots keep the rejected drafts' KV
 * until a later step computes them again. First in the update, before a
 * load error can reset what a request computed. A request no longer
 * running generates nothing: all its drafts go. */
static void take_drafts(kv_engine *e) {
    for (uint32_t i = 0; e->cfg.num_spec && i < e->step.n_reqs; i++) {
        const kv_step_req *q = &e->step.req[i];
        kv_sreq *s = q->num_spec ? find(e, q->id) : NULL;
        if (!s) continue;
        if (!ENG_ASSERT(e, s->r.num_spec == q->num_spec && s->r.num_computed == q->computed_before + q->num_scheduled,
                        "engine %u request %u: %u drafts in the step, %u on the request, %u computed after [%u, +%u)",
                        e->cfg.index, s->r.id, q->num_spec, s->r.num_spec, s->r.num_computed, q->computed_before,
                        q->num_scheduled))
            continue;
        bool running = s->r.status == KV_RS_RUNNING;
        uint32_t a = running ? kv_spec_accepted(&s->tokens, q->computed_before + 1, q->num_spec) : 0;
        s->r.num_computed -= q->num_spec - a;
        s->r.num_output += a;
        s->r.num_spec = 0;
        e->stats.drafts_accepted += a;
    }
}

static void advance_generated(kv_engine *e) {
    for (uint32_t i = 0; i < e->step.n_reqs; i++) {
        kv_sreq *s = find(e, e->step.req[i].id);
        if (!s || s->r.status != KV_RS_RUNNING) continue;
        remove_skipped(e, s);
        if (s->r.num_computed < kv_req_num_tokens(&s->r)) continue; /* chunked prefill */
        /* a token is generated once everything before it is computed, and
         * never past max_tokens (that step finishes the request) */
        if (!ENG_ASSERT(e, s->r.num_computed == kv_req_num_tokens(&s->r) && s->r.num_output < s->r.max_tokens,
                        "engine %u request %u: generating with %u of %u tokens computed, output %u of %u",
                        e->cfg.index, s->r.id, s->r.num_computed, kv_req_num_tokens(&s->r), s->r.num_output,
                        s->r.max_tokens))
            continue;
        cache_blocks(e, s, s->r.num_computed);
        s->r.num_output++;
        if (s->r.num_output >= s->r.max_tokens) finish_req(e, s, KV_RS_FINISHED_LENGTH_CAPPED);
    }
}

static bool has_work(const kv_engine *e) { return e->live != 0 || e->n_inq != 0; }

static void sched_update(kv_engine *e) {
    e->busy = false;
    take_drafts(e);
    handle_load_errors(e);
    advance_generated(e);
    e->conn.ops->update_connector_output(e->conn.self, &e->agg);
    for (uint32_t i = 0; i < e->agg.finished_recving.n; i++) on_finished_recving(e, e->agg.finished_recving.id[i]);
    for (uint32_t i = 0; i < e->agg.finished_sending.n; i++) on_finished_sending(e, e->agg.finished_sending.id[i]);
    /* vLLM busy-loops; here the next step starts at once only when this one
     * changed something (computed tokens, connector output, finished or woken
     * requests). Otherwise the engine sleeps until a message can change its
     * state: a new request, an abort, or a WAKE from a worker whose connector
     * has news. The steps that are skipped would have computed nothing. */
    bool progressed = e->step.n_reqs || e->agg.finished_recving.n || e->agg.finished_sending.n ||
                      e->agg.failed_recving.n || e->agg.invalid_blocks.n || e->finished_since_step.n ||
                      e->wake_pending || e->step_preempted;
    if (progressed && (has_work(e) || e->finished_since_step.n)) arm_tick(e, 0);
}

/* ---- messages ---------------------------------------------------------------- */

static void on_add(kv_engine *e, const kv_req_spec *sp) {
    if (find(e, sp->id)) {
        kv_logf(e->env, KV_LOG_WARN, "engine %u: duplicate request %u ignored", e->cfg.index, sp->id);
        return;
    }
    uint32_t free_slot = e->live == ~0ull ? 64u : (uint32_t)__builtin_ctzll(~e->live);
    kv_sreq *s = free_slot < e->cfg.reqs_max ? &e->req[free_slot] : NULL;
    /* vLLM rejects what can never fit: the model length, or the KV cache. */
    uint32_t max_blocks = e->cfg.pool_blocks < KV_REQ_BLOCKS_MAX ? e->cfg.pool_blocks : KV_REQ_BLOCKS_MAX;
    uint32_t max_tok = max_blocks * e->cfg.block_size;
    uint32_t need = sp->prompt_len + (sp->max_tokens ? sp->max_tokens : 1);
    if (!s || sp->prompt_len == 0 || need > max_tok) {
        e->stats.turned_away++;
        kv_logf(e->env, KV_LOG_WARN, "engine %u: request %u turned away: %s (%u request slots; %u tokens, %u fit)",
                e->cfg.index, sp->id,
                !s ? "every request slot is live" : sp->prompt_len == 0 ? "empty prompt" : "longer than the KV cache",
                e->cfg.reqs_max, need, max_tok);
        kv_m_req_done d = {.engine = e->cfg.index, .id = sp->id, .status = KV_RS_FINISHED_ERROR,
                           .phase = KV_PH_DONE, .refused = 1};
        if (e->cfg.proxy_actor != KV_ACTOR_NONE)
            kv_rt_post(e->rt, e->cfg.proxy_actor, KV_M_REQ_DONE, &d, sizeof d);
        return;
    }
    memset(s, 0, sizeof *s);
    s->used = true;
    s->r.id = sp->id;
    e->live |= 1ull << free_slot;
    e->live_id[free_slot] = sp->id;
    e->hint[sp->id % KV_ENGINE_REQS_MAX] = (uint8_t)free_slot;
    s->r.status = KV_RS_WAITING;
    s->r.prompt_len = sp->prompt_len;
    s->r.max_tokens = sp->max_tokens ? sp->max_tokens : 1;
    s->r.params = sp->params;
    s->r.prefix_group = sp->tokens.prefix_group;
    s->r.prefix_len = sp->tokens.prefix_len;
    s->r.token_seed = sp->tokens.token_seed;
    s->r.blocks.n_groups = e->cfg.n_groups;
    s->tokens = sp->tokens;
    kv_digest_memo_init(&s->dm, &s->tokens, e->cfg.block_size, 0);
    if (e->conn.ops->on_new_request) e->conn.ops->on_new_request(e->conn.self, &s->r);
    s->seq = e->next_seq++;
    set_phase(e, s);
    e->waiting[e->n_waiting++] = slot_of(e, s);
}

static void on_abort(kv_engine *e, uint32_t id) {
    kv_sreq *s = find(e, id);
    if (!s || kv_req_status_finished((kv_req_status)s->r.status)) return;
    e->stats.aborts++;
    if (s->r.status == KV_RS_WAITING_FOR_REMOTE_KVS && kv_id_list_has(&e->finished_recving_kv, id))
        e->stats.aborts_after_recv++; /* a state only the step boundary makes */
    finish_req(e, s, KV_RS_FINISHED_ABORTED);
}

static void apply_input(kv_engine *e, const kv_engine_input *in) {
    if (in->kind == KV_M_ADD_REQ) on_add(e, &in->spec);
    else on_abort(e, in->spec.id);
}

/* A client request or abort arrived: it waits for the next schedule. A
 * full queue (a proxy far ahead of the table) refuses a request now; an
 * abort is never lost, so it then applies at once. */
static void enqueue_input(kv_engine *e, uint32_t kind, const void *payload, uint32_t len) {
    kv_engine_input in = {.kind = kind};
    memcpy(&in.spec, payload, len < sizeof in.spec ? len : sizeof in.spec);
    if (e->n_inq < KV_ENGINE_INQ(e->cfg.reqs_max)) {
        e->inq[e->n_inq++] = in;
    } else {
        kv_logf(e->env, KV_LOG_WARN, "engine %u: input queue full; %s %u applied now", e->cfg.index,
                kind == KV_M_ADD_REQ ? "request" : "abort of", in.spec.id);
        if (kind == KV_M_ADD_REQ) in.spec.prompt_len = 0; /* refused: turned away below */
        apply_input(e, &in);
    }
    arm_tick(e, 0);
}

/* _process_input_queue: everything that arrived since the last schedule,
 * in arrival order. */
static void drain_input(kv_engine *e) {
    for (uint32_t i = 0; i < e->n_inq; i++) apply_input(e, &e->inq[i]);
    e->n_inq = 0;
}

/* ---- STEP_RESULT packing ------------------------------------------------------- */

static uint8_t *put_u32(uint8_t *p, uint32_t v) { memcpy(p, &v, 4); return p + 4; }
static uint8_t *put_ids(uint8_t *p, const kv_id_list *l) {
    p = put_u32(p, l->n);
    memcpy(p, l->id, (size_t)l->n * 4u);
    return p + (size_t)l->n * 4u;
}

uint32_t kv_step_result_pack(const kv_m_step_result *r, uint8_t *buf) {
    const kv_conn_output *o = &r->out;
    uint8_t *p = put_u32(buf, r->rank);
    memcpy(p, &r->step_no, 8);
    p = put_ids(p + 8, &o->finished_sending);
    p = put_ids(p, &o->finished_recving);
    p = put_ids(p, &o->failed_recving);
    p = put_u32(p, o->invalid_blocks.n);
    memcpy(p, o->invalid_blocks.e, (size_t)o->invalid_blocks.n * sizeof o->invalid_blocks.e[0]);
    p += (size_t)o->invalid_blocks.n * sizeof o->invalid_blocks.e[0];
    return (uint32_t)(p - buf);
}

/* Reads a count of at most max entries of `size` bytes; NULL when it does not fit. */
static const uint8_t *take_n(const uint8_t *p, const uint8_t *end, uint32_t max, size_t size, uint32_t *n) {
    if (end - p < 4) return NULL;
    memcpy(n, p, 4);
    p += 4;
    if (*n > max || (size_t)(end - p) < (size_t)*n * size) return NULL;
    return p;
}
static const uint8_t *get_ids(const uint8_t *p, const uint8_t *end, kv_id_list *l) {
    if (!(p = take_n(p, end, KV_ENGINE_REQS_MAX, 4, &l->n))) return NULL;
    memcpy(l->id, p, (size_t)l->n * 4u);
    return p + (size_t)l->n * 4u;
}

bool kv_step_result_unpack(const uint8_t *buf, uint32_t len, kv_m_step_result *out) {
    const uint8_t *p = buf, *end = buf + len;
    kv_conn_output *o = &out->out;
    if (len < 12) return false;
    memcpy(&out->rank, p, 4);
    memcpy(&out->step_no, p + 4, 8);
    p += 12;
    if (!(p = get_ids(p, end, &o->finished_sending)) || !(p = get_ids(p, end, &o->finished_recving)) ||
        !(p = get_ids(p, end, &o->failed_recving)))
        return false;
    if (!(p = take_n(p, end, KV_BAD_BLOCKS_MAX, sizeof o->invalid_blocks.e[0], &o->invalid_blocks.n))) return false;
    memcpy(o->invalid_blocks.e, p, (size_t)o->invalid_blocks.n * sizeof o->invalid_blocks.e[0]);
    return p + (size_t)o->invalid_blocks.n * sizeof o->invalid_blocks.e[0] == end;
}

static void on_step_result(kv_engine *e, const kv_m_step_result *res) {
    if (!e->busy || res->step_no != e->step.step_no || e->results_pending == 0) {
        ENG_VIOLATE(e, KV_INV_STRAY, KV_REQ_NONE, "stray STEP_RESULT for step %llu",
                    (unsigned long long)res->step_no);
        return;
    }
    merge_result(e, res);
    if (--e->results_pending == 0) sched_update(e);
}

static void sched_handle(void *self, const kv_msg *m) {
    kv_engine *e = self;
    kv_owner_check(e->env, &e->owner, e->cfg.index);
    switch (m->kind) {
    case KV_M_ADD_REQ:
    case KV_M_ABORT: enqueue_input(e, m->kind, m->payload, m->len); break;
    case KV_M_TICK:
        e->tick_armed = false;
        if (e->busy) break;
        drain_input(e);
        sched_step(e);
        break;
    case KV_M_STEP_RESULT:
        if (kv_step_result_unpack(m->payload, m->len, &e->rx)) on_step_result(e, &e->rx);
        else ENG_VIOLATE(e, KV_INV_STRAY, KV_REQ_NONE, "malformed STEP_RESULT (%u bytes)", m->len);
        break;
    case KV_M_WAKE: arm_tick(e, 0); break;
    default:
        if (e->conn.ops->on_message) {
            e->conn.ops->on_message(e->conn.self, m);
            arm_tick(e, 0);
            break;
        }
        kv_logf(e->env, KV_LOG_WARN, "engine %u: unexpected message %u", e->cfg.index, m->kind);
    }
}

/* ---- invariants ------------------------------------------------------------------ */

/* E1-E5 as one branch-free test: every message pays it twice. */
static bool sched_invariants_hold(const kv_engine *e) {
    uint32_t cap = e->cfg.reqs_max;
    return (e->n_waiting <= cap) & (e->n_running <= cap) & (e->n_running <= e->cfg.max_running) &
           ((cap >= 64u) | ((e->live >> (cap & 63u)) == 0)) & (e->n_waiting + e->n_running <= cap) &
           (e->busy == (e->results_pending > 0)) & (e->results_pending <= e->cfg.tp) & !(e->busy & e->tick_armed) &
           (e->step.n_reqs <= cap) & (e->n_inq <= KV_ENGINE_INQ(cap));
}

/* E1-E5: O(1). */
static bool sched_invariants(const kv_engine *e) {
    if (KV_LIKELY(sched_invariants_hold(e))) return true;
    /* one failed: the assertions below name which */
    uint32_t cap = e->cfg.reqs_max;
    if (!ENG_ASSERT(e, e->n_waiting <= cap && e->n_running <= cap && e->n_running <= e->cfg.max_running,
                    "engine %u scheduler: n_waiting %u n_running %u, reqs_max %u max_running %u", e->cfg.index,
                    e->n_waiting, e->n_running, cap, e->cfg.max_running))
        return false;
    if (!ENG_ASSERT(e, cap >= 64u || (e->live >> cap) == 0, "engine %u scheduler: live %llx beyond %u slots",
                    e->cfg.index, (unsigned long long)e->live, cap))
        return false;
    /* E3 in full (queued slots are distinct live ones) is W1 of the walk:
     * without a popcnt instruction the count is a libgcc call */
    if (!ENG_ASSERT(e, e->n_waiting + e->n_running <= cap, "engine %u scheduler: %u waiting + %u running > %u slots",
                    e->cfg.index, e->n_waiting, e->n_running, cap))
        return false;
    if (!ENG_ASSERT(e, e->busy == (e->results_pending > 0) && e->results_pending <= e->cfg.tp && !(e->busy && e->tick_armed),
                    "engine %u scheduler: busy %d results_pending %u of %u tick_armed %d", e->cfg.index, (int)e->busy,
                    e->results_pending, e->cfg.tp, (int)e->tick_armed))
        return false;
    return ENG_ASSERT(e, e->step.n_reqs <= cap && e->n_inq <= KV_ENGINE_INQ(cap),
                      "engine %u scheduler: step %llu holds %u requests of %u; input queue %u", e->cfg.index,
                      (unsigned long long)e->step.step_no, e->step.n_reqs, cap, e->n_inq);
}

/* W1, W2: the queues. *queued gets the bit of every queued slot. */
static bool sched_walk_queues(const kv_engine *e, uint64_t *queued) {
    *queued = 0;
    for (uint32_t i = 0; i < e->n_waiting + e->n_running; i++) {
        bool waiting = i < e->n_waiting;
        uint32_t slot = waiting ? e->waiting[i] : e->running[i - e->n_waiting];
        if (!ENG_ASSERT_CHECKED(e, slot < e->cfg.reqs_max && (e->live >> slot & 1u) && !(*queued >> slot & 1u),
                                "engine %u scheduler: %s[%u] = slot %u (live %llx, queued %llx)", e->cfg.index,
                                waiting ? "waiting" : "running", waiting ? i : i - e->n_waiting, slot,
                                (unsigned long long)e->live, (unsigned long long)*queued))
            return false;
        *queued |= 1ull << slot;
        kv_req_status st = (kv_req_status)e->req[slot].r.status;
        bool ok = waiting ? st == KV_RS_WAITING || st == KV_RS_WAITING_FOR_REMOTE_KVS || st == KV_RS_PREEMPTED
                          : st == KV_RS_RUNNING;
        if (!ENG_ASSERT_CHECKED(e, ok, "engine %u scheduler: request %u in the %s queue is %s", e->cfg.index,
                                e->req[slot].r.id, waiting ? "waiting" : "running", kv_req_status_name(st)))
            return false;
    }
    return true;
}

/* W3 for the live slot i, and W5 when blocks is set. */
static bool sched_walk_slot(const kv_engine *e, uint32_t i, bool queued, bool blocks) {
    const kv_sreq *s = &e->req[i];
    const kv_req *r = &s->r;
    if (!ENG_ASSERT_CHECKED(e, s->used && e->live_id[i] == r->id, "engine %u slot %u: used %d, live_id %u, id %u",
                            e->cfg.index, i, (int)s->used, e->live_id[i], r->id))
        return false;
    if (!kv_req_invariants(e->env, e->cfg.index, r)) return false;
    bool fin = kv_req_status_finished((kv_req_status)r->status);
    if (!ENG_ASSERT_CHECKED(e, queued == !fin && (!s->delay_free || fin) && s->phase == phase_of(e, s),
                            "engine %u request %u: %s, queued %d, delay_free %d, phase %s", e->cfg.index, r->id,
                            kv_req_status_name((kv_req_status)r->status), (int)queued, (int)s->delay_free,
                            kv_phase_name((kv_phase)s->phase)))
        return false;
    if (!ENG_ASSERT_CHECKED(e, r->blocks.n_groups == e->cfg.n_groups, "engine %u request %u: table of %u groups, not %u",
                            e->cfg.index, r->id, r->blocks.n_groups, e->cfg.n_groups))
        return false;
    for (uint32_t g = 0; g < r->blocks.n_groups; g++) {
        if (!ENG_ASSERT_CHECKED(e, r->blocks.n[g] == r->blocks.n[0], "engine %u request %u: group %u has %u blocks, group 0 %u",
                                e->cfg.index, r->id, g, r->blocks.n[g], r->blocks.n[0]))
            return false;
        for (uint32_t b = 0; blocks && b < r->blocks.n[g]; b++) {
            uint32_t id = r->blocks.id[g][b];
            if (!ENG_ASSERT_CHECKED(e, id == KV_NULL_BLOCK || kv_pool_is_held(&e->pool[g], id),
                                    "engine %u request %u group %u position %u: block %u not held (%s)", e->cfg.index,
                                    r->id, g, b, id, kv_req_status_name((kv_req_status)r->status)))
                return false;
        }
    }
    return true;
}

/* W1-W6: the whole table, W5 (every block of every table: the walk's
 * bulk) when blocks is set. Checked builds. */
static bool sched_walk(const kv_engine *e, bool blocks) {
    uint64_t queued;
    if (!sched_walk_queues(e, &queued)) return false;
    for (uint64_t m = e->live; m; m &= m - 1) {
        uint32_t i = (uint32_t)__builtin_ctzll(m);
        if (!sched_walk_slot(e, i, queued >> i & 1u, blocks)) return false;
        /* W4 as find() sees it: each live id leads back to its own slot (a
         * duplicate sends one of the two to the other's) */
        const kv_sreq *f = find((kv_engine *)e, e->live_id[i]);
        if (!ENG_ASSERT_CHECKED(e, f == &e->req[i], "engine %u: request %u of slot %u is found in slot %d", e->cfg.index,
                                e->live_id[i], i, f ? (int)slot_of(e, f) : -1))
            return false;
    }
    for (uint32_t k = 0; k < e->finished_recving_kv.n + e->failed_recving_kv.n; k++) { /* W6 */
        bool fin = k < e->finished_recving_kv.n;
        uint32_t id = fin ? e->finished_recving_kv.id[k] : e->failed_recving_kv.id[k - e->finished_recving_kv.n];
        const kv_sreq *s = find((kv_engine *)e, id);
        if (!ENG_ASSERT_CHECKED(e, s && (!fin || s->r.status == KV_RS_WAITING_FOR_REMOTE_KVS),
                                "engine %u: %s_recving_kv names request %u (%s)", e->cfg.index, fin ? "finished" : "failed",
                                id, s ? kv_req_status_name((kv_req_status)s->r.status) : "not live"))
            return false;
    }
    return true;
}

/* The scheduler actor's handler: sched_handle between the invariants, on
 * entry (E1-E5) and after the transition it made (E1-E5, and W1-W6 in
 * checked builds). A request gains blocks only in a step (TICK) and
 * changes tables in update_from_output (the last STEP_RESULT); elsewhere
 * blocks are only freed, with their request: W5 runs after those two. A
 * WAKE changes nothing but the tick flags. */
static void sched_actor(void *self, const kv_msg *m) {
    const kv_engine *e = self;
    sched_invariants(e);
    sched_handle(self, m);
    /* a WAKE only arms a TICK (E4 covers the flags): no walk */
    if (sched_invariants(e) && KV_CHECKED && m->kind != KV_M_WAKE)
        sched_walk(e, m->kind == KV_M_TICK || m->kind == KV_M_STEP_RESULT);
}

/* ---- construction and views -------------------------------------------------- */

kv_status kv_engine_new(const kv_env *env, kv_rt *rt, const kv_engine_cfg *cfg, kv_conn_kind kind,
                        kvt *const *transports, kv_engine **out) {
    if (!cfg->tp || cfg->tp > KV_TP_MAX || KV_HEADS % cfg->tp || !cfg->n_groups ||
        cfg->n_groups > KV_GROUPS_MAX || !cfg->block_size || cfg->pool_blocks + 1 > KV_POOL_BLOCKS_MAX ||
        cfg->reqs_max > KV_ENGINE_REQS_MAX || cfg->num_spec > KV_SPEC_MAX)
        return KV_EINVAL;
    /* a recurrent state is read back from one whole word; its one state
     * block per step has no slots for drafts to roll back */
    for (uint32_t g = 0; g < cfg->n_groups; g++)
        if (cfg->group[g].kind == KV_GROUP_MAMBA && (cfg->head_bytes < 8u || cfg->num_spec)) return KV_EINVAL;
    kv_engine *e = kv_alloc(env, sizeof *e);
    if (!e) return KV_ENOMEM;
    e->env = env;
    e->rt = rt;
    e->cfg = *cfg;
    if (!e->cfg.reqs_max) e->cfg.reqs_max = KV_ENGINE_REQS_MAX;
    uint32_t cap = e->cfg.reqs_max;
    /* slots are reached only through the live bitmap; on_add clears one
     * before use. Queues and the frozen step are count-indexed: written
     * before read. */
    e->req = kv_alloc_scratch(env, cap * sizeof e->req[0]);
    e->waiting = kv_alloc_scratch(env, cap * sizeof e->waiting[0]);
    e->running = kv_alloc_scratch(env, cap * sizeof e->running[0]);
    e->step.req = kv_alloc_scratch(env, cap * sizeof e->step.req[0]);
    e->inq = kv_alloc_scratch(env, KV_ENGINE_INQ(cap) * sizeof e->inq[0]);
    if (!e->req || !e->waiting || !e->running || !e->step.req || !e->inq) {
        kv_engine_free(e);
        return KV_ENOMEM;
    }
    char name[32];
    snprintf(name, sizeof name, "%c%u.sched", cfg->role == KV_ROLE_PRODUCER ? 'P' : 'D', cfg->index);
    kv_status st = kv_rt_spawn(rt, name, cfg->node, sched_actor, e, 1u << 16, &e->sched_actor);
    e->owner = (kv_owner){.actor = e->sched_actor, .what = "engine scheduler"};
    for (uint32_t g = 0; g < cfg->n_groups && st == KV_OK; g++)
        st = kv_pool_init(&e->pool[g], env, e->sched_actor, cfg->index, g, cfg->pool_blocks + 1);
    e->conn_kind = kind;
    if (st == KV_OK && kv_conn_kind_has_store(kind) && !cfg->store_addr.s[0]) st = KV_EINVAL;
    if (st == KV_OK) st = kv_conn_sched_new(e, kind, &e->conn);
    for (uint32_t r = 0; r < cfg->tp && st == KV_OK; r++)
        st = kv_worker_new(e, r, transports[r], kind, &e->worker[r]);
    if (st != KV_OK) {
        kv_engine_free(e);
        return st;
    }
    /* built: a pool per group, a connector half, a worker per rank, and
     * the scheduler's invariants from the start */
    for (uint32_t r = 0; r < cfg->tp; r++)
        ENG_ASSERT(e, e->worker[r] && e->worker[r]->rank == r && e->conn.ops, "engine %u: rank %u of %u built as %d",
                   cfg->index, r, cfg->tp, e->worker[r] ? (int)e->worker[r]->rank : -1);
    sched_invariants(e);
    *out = e;
    return KV_OK;
}

void kv_engine_free(kv_engine *e) {
    if (!e) return;
    for (uint32_t r = 0; r < KV_TP_MAX; r++) kv_worker_free(e->worker[r]);
    kv_conn_sched_free(e, &e->conn);
    for (uint32_t g = 0; g < KV_GROUPS_MAX; g++)
        if (e->pool[g].meta) kv_pool_deinit(&e->pool[g]);
    kv_release(e->env, e->inq);
    kv_release(e->env, e->step.req);
    kv_release(e->env, e->running);
    kv_release(e->env, e->waiting);
    kv_release(e->env, e->req);
    kv_release(e->env, e);
}

bool kv_engine_inq_has(const kv_engine *e, uint32_t id) {
    for (uint32_t i = 0; i < e->n_inq; i++)
        if (e->inq[i].kind == KV_M_ADD_REQ && e->inq[i].spec.id == id) return true;
    return false;
}

uint32_t kv_engine_live_reqs(const kv_engine *e) {
    return (uint32_t)__builtin_popcountll(e->live);
}

void kv_engine_pool_report(const kv_engine *e, uint32_t group, kv_pool_report *out) {
    kv_pool_report_get(&e->pool[group], out);
}

uint32_t kv_engine_conn_state(const kv_engine *e) {
    uint32_t n = kv_conn_sched_state(&e->conn);
    for (uint32_t r = 0; r < e->cfg.tp; r++)
        if (e->worker[r]) n += kv_conn_worker_state(&e->worker[r]->conn);
    return n;
}

const char *kv_phase_name(kv_phase p) {
    static const char *const names[KV_PH_COUNT] = {
        [KV_PH_P_QUEUED] = "p_queued",     [KV_PH_P_PREFILL] = "p_prefill",
        [KV_PH_P_HELD] = "p_held",         [KV_PH_D_QUEUED] = "d_queued",
        [KV_PH_D_WAITING_KV] = "d_waiting_kv", [KV_PH_D_DECODE] = "d_decode",
        [KV_PH_DONE] = "done"};
    return (unsigned)p < KV_PH_COUNT ? names[p] : "?";
}

static const struct { kv_bug bit; const char *name; } bug_names[] = {
    {KV_BUG_ERR_EARLY_RETURN, "err_early_return"},
    {KV_BUG_RECV_MAP_RACE, "recv_map_race"},
    {KV_BUG_EMPTY_PULL_COMPLETION, "empty_pull_completion"},
    {KV_BUG_STORE_EMPTY_BLOCK_TABLE, "store_empty_block_table"},
    {KV_BUG_STORE_REJECTED_LOAD_SAVE, "store_rejected_load_save"},
};

uint32_t kv_bug_parse(const char *name) {
    for (size_t i = 0; i < sizeof bug_names / sizeof bug_names[0]; i++)
        if (strcmp(name, bug_names[i].name) == 0) return (uint32_t)bug_names[i].bit;
    return 0;
}

const char *kv_bug_list_next(const char *list, uint32_t *bit, size_t *len) {
    const char *end = list;
    while (*end && *end != ',') end++;
    *len = (size_t)(end - list);
    *bit = 0;
    char name[64];
    if (*len < sizeof name) {
        memcpy(name, list, *len);
        name[*len] = 0;
        *bit = kv_bug_parse(name);
    }
    return *end ? end + 1 : NULL;
}

const char *kv_bug_name(uint32_t bit) {
    for (size_t i = 0; i < sizeof bug_names / sizeof bug_names[0]; i++)
        if ((uint32_t)bug_names[i].bit == bit) return bug_names[i].name;
    return "?";
}
