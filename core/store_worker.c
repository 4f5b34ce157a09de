/* core/store_worker.c — worker half of the store connector on the worker
 * main actor (MooncakeStoreWorker).
 *
 * get_finished issues all I/O of the step (as vLLM's does):
 *   loads   every ReqMeta with a load -> one LOAD job to the receive actor
 *           (blocks [vllm_cached, kvpool_cached) / bs); its LOAD_DONE is
 *           verified (INV-DATA) and reported in finished_recving, failed
 *           keys as invalid blocks
 *   saves   every ReqMeta with can_save -> snapshot jobs of at most
 *           KV_STORE_BATCH_MAX blocks; each job takes one stored-request pin
 *           (add_stored_request), its SAVE_DONE releases it
 *   done_sending  preempted ids drop their counter; a finished id whose
 *           counter is 0 is done now, else deferred until it is
 *
 * INV-SAVE is checked where vLLM's send path indexes the metadata: every
 * save covers every KV group with in-range block ids (the IndexError of
 * seed 003), every block saved holds the request's KV (a save of a block
 * not computed yet, as a rejected speculative load on D makes), and every
 * pin is released exactly once.
 *
 * Owner of everything here: the worker main actor.
 *
 * Invariants (store_worker_invariants: V1, O(1), on return from every hook
 * and message in every build; V2-V3 walked in checked builds; INV-ASSERT,
 * core/assert.h):
 *   V1 the lists waiting for get_finished fit their bounds (the invalid
 *      blocks a connector's share, KV_BAD_BLOCKS_CHILD_MAX), and no job is
 *      half built between calls (job.n == 0);
 *   V2 a used pin has a request id unique among used pins (a free pin's
 *      fields are stale: pin_of rewrites a slot it hands out);
 *   V3 an orphan's id is unique among orphans with pins.
 * INV-SAVE stays what it was: the check of what the scheduler asked to
 * save (seed 003's switches break it), and of pins released exactly once.
 * The assertions are about this half's own bookkeeping: a dropped counter
 * finds an orphan slot, a save job never outgrows KV_STORE_BATCH_MAX, a
 * message from our own actors is one of theirs. */
#include <stddef.h>
#include <string.h>

#include "core/assert.h"
#include "core/msgs.h"
#include "core/store.h"

typedef struct sw_pin {
    bool used;
    bool finished;            /* in finished_store_req: done once pins is 0 */
    uint32_t id;
    uint32_t pins;            /* save jobs not yet released */
} sw_pin;

typedef struct sw_orphan {    /* pins of a dropped counter still in flight */
    uint32_t id;
    uint32_t pins;
} sw_orphan;

typedef struct store_worker {
    kv_owner owner;
    kv_worker *w;                     /* borrowed */
    const kv_store_meta *meta;        /* bound for this step (frozen) */
    kv_store_sender *sender;          /* owned; own actors */
    kv_store_receiver *receiver;
    kv_store_lookup *lookup;          /* rank 0 only */
    uint32_t sender_actor, receiver_actor;
    sw_pin pin[KV_ENGINE_REQS_MAX];
    sw_orphan orphan[KV_ENGINE_REQS_MAX];
    kv_id_list finished_recving;      /* since the last get_finished */
    kv_id_list failed_recving;        /* request-level load failures (too many blocks to list) */
    kv_bad_blocks invalid;
    kv_m_store_save job;              /* scratch */
} store_worker;

#define SW_VIOLATE(c, req, ...) kv_violate((c)->w->env, KV_INV_SAVE, (c)->w->cfg.index, (req), __VA_ARGS__)
#define SW_ASSERT(c, cond, ...) KV_ASSERT((c)->w->env, (c)->w->cfg.index, cond, __VA_ARGS__)
#define SW_ASSERT_CHECKED(c, cond, ...) KV_ASSERT_CHECKED((c)->w->env, (c)->w->cfg.index, cond, __VA_ARGS__)

/* V1: O(1). */
static bool store_worker_invariants(const store_worker *c) {
    return SW_ASSERT(c, c->finished_recving.n <= KV_ENGINE_REQS_MAX && c->failed_recving.n <= KV_ENGINE_REQS_MAX &&
                            c->invalid.n <= KV_BAD_BLOCKS_CHILD_MAX && c->job.n == 0,
                     "engine %u rank %u store worker: %u recving, %u failed, %u invalid, job of %u blocks left",
                     c->w->cfg.index, c->w->rank, c->finished_recving.n, c->failed_recving.n, c->invalid.n, c->job.n);
}

/* V2, V3. Checked builds. */
static bool store_worker_walk(const store_worker *c) {
    uint32_t pins[KV_ENGINE_REQS_MAX], orphans[KV_ENGINE_REQS_MAX], np = 0, no = 0, a, b;
    for (uint32_t i = 0; i < KV_ENGINE_REQS_MAX; i++) {
        if (c->pin[i].used) pins[np++] = c->pin[i].id;
        if (c->orphan[i].pins) orphans[no++] = c->orphan[i].id;
    }
    if (!SW_ASSERT_CHECKED(c, kv_ids_distinct(pins, np, &a, &b), "engine %u rank %u store worker: request %u pinned twice (%u pins)",
                           c->w->cfg.index, c->w->rank, pins[a], np))
        return false;
    return SW_ASSERT_CHECKED(c, kv_ids_distinct(orphans, no, &a, &b),
                             "engine %u rank %u store worker: request %u orphaned twice", c->w->cfg.index, c->w->rank,
                             orphans[a]);
}

static void store_worker_done(const store_worker *c) {
    if (store_worker_invariants(c) && KV_CHECKED) store_worker_walk(c);
}

static sw_pin *pin_of(store_worker *c, uint32_t id, bool create) {
    sw_pin *free_slot = NULL;
    for (uint32_t i = 0; i < KV_ENGINE_REQS_MAX; i++) {
        if (c->pin[i].used && c->pin[i].id == id) return &c->pin[i];
        if (!c->pin[i].used && !free_slot) free_slot = &c->pin[i];
    }
    if (!create || !free_slot) return NULL;
    *free_slot = (sw_pin){.used = true, .id = id};
    return free_slot;
}

static void bind(void *self, const void *meta) {
    store_worker *c = self;
    kv_owner_check(c->w->env, &c->owner, c->w->cfg.index);
    /* the previous step's metadata was cleared (one step at a time) */
    SW_ASSERT(c, c->meta == NULL && meta != NULL, "engine %u rank %u store worker: bind over a bound step (%d) or to none (%d)",
              c->w->cfg.index, c->w->rank, c->meta != NULL, meta == NULL);
    c->meta = meta;
}

static void start_load(void *self) { (void)self; }
static void wait_for_save(void *self) { (void)self; }

/* One job, one pin; a job the send actor's mailbox cannot take is a
 * dropped save (no pin taken). `last`: the save's last job, which may move
 * the resume offset (only when no job of the save was dropped). Returns
 * whether the job was posted. */
static bool post_job(store_worker *c, sw_pin *p, bool last) {
    bool posted = false;
    if (!c->job.n) return true;
    if (!SW_ASSERT(c, c->job.n <= KV_STORE_BATCH_MAX && p->used && p->id == c->job.id,
                   "engine %u rank %u store worker: save job of %u blocks for request %u on pin of %u (used %d)",
                   c->w->cfg.index, c->w->rank, c->job.n, c->job.id, p->id, (int)p->used)) {
        c->job.n = 0;
        return false;
    }
    c->job.last = last;
    if (kv_rt_post(c->w->rt, c->sender_actor, KV_M_STORE_SAVE, &c->job, sizeof c->job) == KV_OK) {
        p->pins++;
        c->w->store_saves++;
        posted = true;
    } else {
        kv_logf(c->w->env, KV_LOG_INFO, "store worker: send queue full; save of request %u dropped", c->job.id);
    }
    c->job.n = 0;
    return posted;
}

/* One ReqMeta's save: check it (INV-SAVE), snapshot its blocks into jobs. */
static void issue_save(store_worker *c, const kv_store_req_meta *rm) {
    kv_worker *w = c->w;
    const kv_engine_cfg *cfg = &w->cfg;
    uint32_t bs = cfg->block_size, from = rm->save_from / bs, to = rm->token_len / bs;
    sw_pin *p = pin_of(c, rm->id, true);
    if (!p) return;
    w->store_checks++;
    if (rm->blocks.n_groups != cfg->n_groups) {
        SW_VIOLATE(c, rm->id,
                   "save of request %u: block table has %u groups, the model %u (IndexError: tuple index out of range)",
                   rm->id, rm->blocks.n_groups, cfg->n_groups);
        return;
    }
    memset(&c->job, 0, offsetof(kv_m_store_save, e));
    c->job.id = rm->id;
    c->job.end_tokens = rm->token_len;
    bool all_posted = true;
    uint64_t hash[KV_REQ_BLOCKS_MAX];
    kv_digest_memo dm; /* full blocks: hashes and the saved bytes share digests */
    kv_digest_memo_init(&dm, &rm->tokens, bs, 0);
    for (uint32_t g = 0; g < cfg->n_groups; g++) {
        if (to > rm->blocks.n[g] && cfg->group[g].kind == KV_GROUP_FULL) {
            SW_VIOLATE(c, rm->id, "save of request %u: group %u has %u blocks, the save needs %u", rm->id, g,
                       rm->blocks.n[g], to);
            return;
        }
        kv_store_hashes(&dm, g, to, hash);
        for (uint32_t pos = from; pos < to && pos < rm->blocks.n[g]; pos++) {
            uint32_t id = rm->blocks.id[g][pos];
            /* what a later hit of `to` blocks needs: outside a sliding window
             * or behind a mamba state nothing is kept, and a mamba state only
             * when it is the one after exactly `to` blocks: at the table's
             * last position (the block before the last holds an older state
             * until the step that read it is done) */
            if (id == KV_NULL_BLOCK || !kv_store_needs(cfg, g, pos, to) ||
                (cfg->group[g].kind == KV_GROUP_MAMBA && pos + 1 != rm->blocks.n[g]))
                continue;
            if (id >= w->capacity) {
                SW_VIOLATE(c, rm->id, "save of request %u: group %u block id %u out of range (pool %u)", rm->id, g, id,
                           w->capacity);
                return;
            }
            const uint8_t *bytes = kv_worker_kv(w, g, id);
            uint64_t want = kv_group_digest_m(&dm, pos, cfg->group[g].kind == KV_GROUP_MAMBA);
            if (!kv_verify_block_digest(bytes, want, g, w->head_lo, w->head_hi, cfg->head_bytes)) {
                SW_VIOLATE(c, rm->id,
                           "save of request %u: group %u block %u (position %u) does not hold the request's KV "
                           "(saving blocks never computed)",
                           rm->id, g, id, pos);
                return;
            }
            /* a full job goes once another block follows it: the save's
             * last job is never empty */
            if (c->job.n == KV_STORE_BATCH_MAX) all_posted &= post_job(c, p, false);
            if (!SW_ASSERT(c, c->job.n < KV_STORE_BATCH_MAX && w->block_bytes <= KV_STORE_SNAP_BYTES,
                           "engine %u rank %u store worker: save job of request %u at %u blocks (%u bytes each)",
                           cfg->index, w->rank, rm->id, c->job.n, w->block_bytes)) {
                c->job.n = 0;
                return;
            }
            kv_store_snap *e = &c->job.e[c->job.n++];
            e->hash = hash[pos];
            e->group = (uint8_t)g;
            e->pos = (uint8_t)pos;
            memcpy(e->bytes, bytes, w->block_bytes);
        }
    }
    post_job(c, p, all_posted);
}

static void issue_load(store_worker *c, const kv_store_req_meta *rm) {
    uint32_t bs = c->w->cfg.block_size;
    /* a load is an accepted LoadSpec (T3 of store_sched.c): a non-empty
     * range of whole blocks within a request's table */
    if (!SW_ASSERT(c, rm->load.can_load && rm->load.vllm_cached < rm->load.kvpool_cached &&
                          rm->load.kvpool_cached % bs == 0 && rm->load.kvpool_cached / bs <= KV_REQ_BLOCKS_MAX,
                   "engine %u rank %u store worker: load of request %u: [%u, %u) tokens, can_load %d", c->w->cfg.index,
                   c->w->rank, rm->id, rm->load.vllm_cached, rm->load.kvpool_cached, (int)rm->load.can_load))
        return;
    kv_m_store_load j = {.id = rm->id, .from_pos = rm->load.vllm_cached / bs, .to_pos = rm->load.kvpool_cached / bs,
                         .num_tokens = rm->load.kvpool_cached, .tokens = rm->tokens, .blocks = rm->blocks};
    c->w->store_loads++;
    kv_rt_post(c->w->rt, c->receiver_actor, KV_M_STORE_LOAD, &j, sizeof j);
}

static void forget(store_worker *c, uint32_t id) {
    memset(&c->job, 0, offsetof(kv_m_store_save, e));
    c->job.id = id;
    c->job.forget = 1;
    kv_rt_post(c->w->rt, c->sender_actor, KV_M_STORE_SAVE, &c->job, sizeof c->job);
}

static void drop_counter(store_worker *c, sw_pin *p) {
    bool kept = !p->pins;
    if (p->pins) {
        for (uint32_t i = 0; i < KV_ENGINE_REQS_MAX; i++) {
            if (c->orphan[i].pins && c->orphan[i].id != p->id) continue;
            c->orphan[i].id = p->id;
            c->orphan[i].pins += p->pins;
            kept = true;
            break;
        }
    }
    /* pins of jobs still in flight are kept (each SAVE_DONE releases one):
     * one orphan per pinned request at most, so a slot is free */
    SW_ASSERT(c, kept, "engine %u rank %u store worker: %u pins of request %u lost (no orphan slot)", c->w->cfg.index,
              c->w->rank, p->pins, p->id);
    p->used = false;
}

static void get_finished(void *self, const kv_id_list *finished, kv_conn_output *out) {
    store_worker *c = self;
    kv_owner_check(c->w->env, &c->owner, c->w->cfg.index);
    const kv_store_meta *m = c->meta;
    if (m) {
        for (uint32_t i = 0; i < m->preempted.n; i++) { /* first: a resumed save of this step keeps its pins */
            sw_pin *p = pin_of(c, m->preempted.id[i], false);
            if (p) drop_counter(c, p);
        }
        for (uint32_t i = 0; i < m->n; i++) {
            const kv_store_req_meta *rm = &m->req[i];
            if (rm->has_load && rm->can_save)
                SW_VIOLATE(c, rm->id, "ReqMeta of request %u both loads and saves", rm->id);
            if (rm->has_load) issue_load(c, rm);
            if (rm->can_save) issue_save(c, rm);
        }
    }
    /* done_sending */
    for (uint32_t i = 0; i < finished->n; i++) {
        forget(c, finished->id[i]);
        sw_pin *p = pin_of(c, finished->id[i], false);
        if (p) p->finished = true;
    }
    for (uint32_t i = 0; i < KV_ENGINE_REQS_MAX; i++) {
        sw_pin *p = &c->pin[i];
        if (!p->used || !p->finished || p->pins) continue;
        kv_id_list_add(&out->finished_sending, p->id);
        p->used = false;
    }
    kv_id_list_move(&out->finished_recving, &c->finished_recving);
    kv_id_list_move(&out->failed_recving, &c->failed_recving);
    store_worker_done(c);
}

static void load_errors(void *self, kv_bad_blocks *out) {
    store_worker *c = self;
    kv_bad_blocks_move(out, &c->invalid);
}

static void clear_meta(void *self) { ((store_worker *)self)->meta = NULL; }

static bool failed_block(const kv_m_store_load_done *d, uint32_t g, uint32_t id) {
    for (uint32_t i = 0; i < d->n_failed; i++)
        if (d->failed[i].group == g && d->failed[i].block == id) return true;
    return false;
}

/* INV-DATA on what the store gave us; failed blocks become load errors. */
static void on_load_done(store_worker *c, const kv_m_store_load_done *d) {
    kv_worker *w = c->w;
    const kv_engine_cfg *cfg = &w->cfg;
    const kv_m_store_load *j = &d->job;
    /* our own receive actor's report of the job we gave it */
    if (!SW_ASSERT(c, d->id == j->id && d->n_failed <= KV_GROUPS_MAX * KV_REQ_BLOCKS_MAX && j->from_pos <= j->to_pos,
                   "engine %u rank %u store worker: LOAD_DONE %u of job %u, %u failed, [%u, %u)", cfg->index, w->rank,
                   d->id, j->id, d->n_failed, j->from_pos, j->to_pos))
        return;
    kv_digest_memo dm;
    kv_digest_memo_init(&dm, &j->tokens, cfg->block_size, 0);
    for (uint32_t g = 0; g < j->blocks.n_groups && g < cfg->n_groups; g++)
        for (uint32_t pos = j->from_pos; pos < j->to_pos && pos < j->blocks.n[g]; pos++) {
            uint32_t id = j->blocks.id[g][pos];
            if (id == KV_NULL_BLOCK || id >= w->capacity || !kv_store_needs(cfg, g, pos, j->to_pos) ||
                failed_block(d, g, id))
                continue;
            w->verified_blocks++;
            kv_worker_absorb(w, g, &id, 1); /* the store receiver wrote its host bytes */
            uint64_t want = kv_group_digest_m(&dm, pos, cfg->group[g].kind == KV_GROUP_MAMBA);
            if (kv_verify_block_digest(kv_worker_kv(w, g, id), want, g, w->head_lo, w->head_hi, cfg->head_bytes))
                continue;
            kv_violate(w->env, KV_INV_DATA, cfg->index, d->id,
                       "request %u group %u block %u (position %u) rank %u: bytes loaded from the store are not its KV",
                       d->id, g, id, pos, w->rank);
            return;
        }
    if (d->n_failed > KV_BAD_BLOCKS_CHILD_MAX - c->invalid.n) /* would not fit: the request fails as a whole (a block
                                                         * left out would be reported loaded, and decoded) */
        kv_id_list_add(&c->failed_recving, d->id);
    else
        for (uint32_t i = 0; i < d->n_failed; i++) c->invalid.e[c->invalid.n++] = d->failed[i];
    kv_id_list_add(&c->finished_recving, d->id);
}

static void on_save_done(store_worker *c, const kv_m_store_save_done *d) {
    c->w->store_checks++;
    sw_pin *p = pin_of(c, d->id, false);
    if (p && p->pins) {
        p->pins--;
        return;
    }
    for (uint32_t i = 0; i < KV_ENGINE_REQS_MAX; i++)
        if (c->orphan[i].pins && c->orphan[i].id == d->id) {
            c->orphan[i].pins--;
            return;
        }
    SW_VIOLATE(c, d->id, "stored-request pin of request %u released with none held (released twice)", d->id);
}

static void on_message(void *self, const kv_msg *m) {
    store_worker *c = self;
    kv_owner_check(c->w->env, &c->owner, c->w->cfg.index);
    switch (m->kind) {
    case KV_M_STORE_SAVE_DONE: on_save_done(c, m->payload); break;
    case KV_M_STORE_LOAD_DONE: on_load_done(c, m->payload); break;
    default: kv_logf(c->w->env, KV_LOG_WARN, "store worker: unexpected message %u", m->kind);
    }
    store_worker_done(c);
}

static const kv_conn_worker_ops store_worker_ops = {
    .size = sizeof(kv_conn_worker_ops),
    .name = "store",
    .bind_connector_metadata = bind,
    .start_load_kv = start_load,
    .wait_for_save = wait_for_save,
    .get_finished = get_finished,
    .get_block_ids_with_load_errors = load_errors,
    .clear_connector_metadata = clear_meta,
    .on_message = on_message,
};

kv_status kv_store_worker_new(kv_worker *w, kv_conn_worker *out) {
    if (w->block_bytes > KV_STORE_SNAP_BYTES) return KV_EINVAL;
    store_worker *c = kv_alloc(w->env, sizeof *c);
    if (!c) return KV_ENOMEM;
    c->w = w;
    c->owner = (kv_owner){.actor = w->main_actor, .what = "store worker state"};
    kv_status st = kv_store_sender_new(w, &c->sender, &c->sender_actor);
    if (st == KV_OK) st = kv_store_receiver_new(w, &c->receiver, &c->receiver_actor);
    if (st == KV_OK && w->rank == 0) st = kv_store_lookup_new(w, &c->lookup, &w->store_lookup_actor);
    if (st != KV_OK) {
        kv_store_sender_free(c->sender);
        kv_store_receiver_free(c->receiver);
        kv_release(w->env, c);
        return st;
    }
    *out = (kv_conn_worker){.ops = &store_worker_ops, .self = c};
    return KV_OK;
}

void kv_store_worker_free(kv_worker *w, kv_conn_worker *cw) {
    store_worker *c = cw->self;
    if (!c) return;
    kv_store_sender_free(c->sender);
    kv_store_receiver_free(c->receiver);
    kv_store_lookup_free(c->lookup);
    kv_release(w->env, c);
    cw->self = NULL;
    cw->ops = NULL;
}

uint32_t kv_store_worker_state(const kv_conn_worker *cw) {
    const store_worker *c = cw->self;
    if (!c) return 0;
    uint32_t n = c->finished_recving.n + c->failed_recving.n + c->invalid.n;
    for (uint32_t i = 0; i < KV_ENGINE_REQS_MAX; i++) n += c->pin[i].used + c->orphan[i].pins;
    return n + kv_store_sender_state(c->sender) + kv_store_receiver_state(c->receiver);
}
