/* core/store_sched.c — scheduler half of the store connector
 * (MooncakeStoreConnector's scheduler). Runs on the engine scheduler actor.
 *
 * State per request (owner: the engine scheduler actor):
 *   lookup       none / pending / done (hit tokens), asked of rank 0's
 *                lookup actor; GNMT answers "not ready" (vLLM's None) until
 *                the reply is in
 *   load_spec    LoadSpec(vllm_cached, kvpool_cached, can_load)
 *   tracker      RequestTracker(token_len, blocks, num_saved, prefill_end)
 *   unfinished   _unfinished_requests: the block table recorded by USAA
 * Transitions:
 *   GNMT          hit = lookup (below the request's length; 0 with lookups
 *                 off, vLLM's enable_lookup = false: no lookup asked); need = hit -
 *                 computed; need > 0: spec = (computed, hit, false),
 *                 (need, async); else (0, sync)
 *   USAA          unfinished = the full table (bug store_empty_block_table:
 *                 () unless ext > 0); spec: ext > 0 -> can_load
 *   build         1 finished: drop everything; 2 preempted: drop spec,
 *                 reset tracker, drop unfinished, tell the workers;
 *                 3 new: tracker from the table, ReqMeta (no save on a
 *                 consumer); 4 cached (not on a consumer): the tracker
 *                 follows the table up to the prompt's end; 5 pending
 *                 load, for unfinished requests not scheduled: pop the
 *                 spec; only when can_load (a bug switch: any spec) a
 *                 tracker from the recorded table with token_len =
 *                 kvpool_cached, ReqMeta
 *   from_tracker  boundary = cdiv(saved + 1, bs) * bs, to_save =
 *                 floor(token_len, bs); skip = skip_save or to_save <
 *                 boundary or can_load; not skip: a save of [saved, to_save)
 *   request_finished  consumer, no tracker or nothing saved: free now;
 *                 else hold the blocks until finished_sending
 * Invariants (store_sched_invariants: T1, O(1), on every hook's return in
 * every build; store_sched_walk: T2-T4 after every build and lookup reply
 * in checked builds; INV-ASSERT, core/assert.h):
 *   T1 cur is 0 or 1, and the meta being built fits the engine's table
 *      (n <= reqs_max, preempted within its list);
 *   T2 a used slot's lookup is NONE, PENDING or DONE; a DONE hit is block
 *      aligned (the lookup actor answers whole blocks);
 *   T3 a LoadSpec is what GNMT made of a hit: kvpool_cached > vllm_cached,
 *      kvpool_cached block aligned; can_load only once USAA accepted it;
 *   T4 a tracker's num_saved is block aligned and at most its prefill end
 *      (a save never runs past the prompt); ids are unique among used slots.
 * The table shapes a ReqMeta carries are deliberately not asserted here:
 * the seed-003 bug switches break exactly those, and the worker's INV-SAVE
 * check is the oracle that must catch them. */
#include <string.h>

#include "core/assert.h"
#include "core/msgs.h"
#include "core/store.h"

typedef enum ss_lookup { SS_NONE = 0, SS_PENDING = 1, SS_DONE = 2 } ss_lookup;

typedef struct ss_tracker {
    bool used;
    uint32_t token_len;
    uint32_t num_saved;
    uint32_t prefill_end;
    kv_block_table blocks;
} ss_tracker;

typedef struct ss_req {
    bool used;
    uint32_t id;
    uint8_t lookup;            /* ss_lookup */
    uint32_t hit;
    bool has_spec;
    kv_store_load_spec spec;
    ss_tracker tracker;
    bool unfinished;
    kv_block_table stored;     /* what USAA recorded */
    kv_tokens tokens;
} ss_req;

typedef struct store_sched {
    kv_owner owner;
    kv_engine *e;              /* borrowed */
    ss_req *req;               /* [engine reqs_max] */
    kv_store_meta buf[2];      /* one being built, one frozen */
    uint32_t cur;
} store_sched;

static ss_req *find(store_sched *c, uint32_t id, bool create) {
    ss_req *free_slot = NULL;
    for (uint32_t i = 0; i < c->e->cfg.reqs_max; i++) {
        if (c->req[i].used && c->req[i].id == id) return &c->req[i];
        if (!c->req[i].used && !free_slot) free_slot = &c->req[i];
    }
    if (!create || !free_slot) return NULL;
    memset(free_slot, 0, sizeof *free_slot);
    free_slot->used = true;
    free_slot->id = id;
    return free_slot;
}

static void check_owner(const store_sched *c) { kv_owner_check(c->e->env, &c->owner, c->e->cfg.index); }

#define SS_ASSERT(c, cond, ...) KV_ASSERT((c)->e->env, (c)->e->cfg.index, cond, __VA_ARGS__)
#define SS_ASSERT_CHECKED(c, cond, ...) KV_ASSERT_CHECKED((c)->e->env, (c)->e->cfg.index, cond, __VA_ARGS__)

/* T1: O(1). */
static bool store_sched_invariants(const store_sched *c) {
    const kv_store_meta *m = &c->buf[c->cur & 1u];
    return SS_ASSERT(c, c->cur <= 1u && m->n <= c->e->cfg.reqs_max && m->preempted.n <= KV_ENGINE_REQS_MAX,
                     "engine %u store scheduler: buffer %u holds %u metas of %u, %u preempted", c->e->cfg.index, c->cur,
                     m->n, c->e->cfg.reqs_max, m->preempted.n);
}

/* T2-T4 for slot i. */
static bool store_sched_walk_slot(const store_sched *c, uint32_t i) {
    const ss_req *q = &c->req[i];
    uint32_t bs = c->e->cfg.block_size;
    if (!SS_ASSERT_CHECKED(c, q->lookup <= SS_DONE && (q->lookup != SS_DONE || q->hit % bs == 0),
                           "engine %u store request %u: lookup %u hit %u (block %u)", c->e->cfg.index, q->id, q->lookup,
                           q->hit, bs))
        return false;
    if (!SS_ASSERT_CHECKED(c, !q->has_spec || (q->spec.kvpool_cached > q->spec.vllm_cached && q->spec.kvpool_cached % bs == 0),
                           "engine %u store request %u: LoadSpec %u computed, %u in the store (can_load %d)",
                           c->e->cfg.index, q->id, q->spec.vllm_cached, q->spec.kvpool_cached, (int)q->spec.can_load))
        return false;
    const ss_tracker *t = &q->tracker;
    if (!SS_ASSERT_CHECKED(c, !t->used || (t->num_saved % bs == 0 && t->num_saved <= t->prefill_end),
                           "engine %u store request %u: tracker saved %u of prefill %u (tokens %u)", c->e->cfg.index,
                           q->id, t->num_saved, t->prefill_end, t->token_len))
        return false;
    return true;
}

/* T2-T4: every slot. Checked builds. */
static bool store_sched_walk(const store_sched *c) {
    uint32_t ids[KV_ENGINE_REQS_MAX], n = 0, a, b;
    for (uint32_t i = 0; i < c->e->cfg.reqs_max; i++) {
        if (!c->req[i].used) continue;
        if (!store_sched_walk_slot(c, i)) return false;
        ids[n++] = c->req[i].id;
    }
    return SS_ASSERT_CHECKED(c, kv_ids_distinct(ids, n, &a, &b), "engine %u store request %u in two slots (%u used)",
                             c->e->cfg.index, ids[a], n);
}

static bool consumer(const store_sched *c) { return c->e->cfg.role == KV_ROLE_CONSUMER; }

static kv_status gnmt(void *self, const kv_req *r, uint32_t num_computed, kv_match *out) {
    store_sched *c = self;
    check_owner(c);
    /* asked at a request's first schedule (and again while "not ready") */
    SS_ASSERT(c, (r->status == KV_RS_WAITING || r->status == KV_RS_PREEMPTED) && num_computed < kv_req_num_tokens(r),
              "engine %u store GNMT(%u): %s, %u of %u tokens computed", c->e->cfg.index, r->id,
              kv_req_status_name((kv_req_status)r->status), num_computed, kv_req_num_tokens(r));
    uint32_t bs = c->e->cfg.block_size, n = kv_req_num_tokens(r);
    *out = (kv_match){.ready = true};
    if (n < bs) return KV_OK; /* shorter than one block: nothing to look up */
    ss_req *q = find(c, r->id, true);
    if (!q) return KV_OK;     /* table full (bounded by the engine's own): no lookup */
    if (q->lookup == SS_NONE) {
        const kv_worker *w0 = c->e->worker[0];
        kv_m_store_lookup l = {.id = r->id, .reply_to = c->e->sched_actor, .num_tokens = n,
                               .tokens = {.token_seed = r->token_seed, .prefix_group = r->prefix_group,
                                          .prefix_len = r->prefix_len}};
        if (c->e->cfg.store_lookup_off || !w0 || w0->store_lookup_actor == KV_ACTOR_NONE ||
            kv_rt_post(c->e->rt, w0->store_lookup_actor, KV_M_STORE_LOOKUP, &l, sizeof l) != KV_OK) {
            q->lookup = SS_DONE; /* lookups off (enable_lookup = false) or no lookup server: a miss */
            q->hit = 0;
        } else {
            q->lookup = SS_PENDING;
        }
    }
    if (q->lookup == SS_PENDING) {
        out->ready = false;
        return KV_OK;
    }
    uint32_t cap = (n - 1) / bs * bs;
    uint32_t hit = q->hit < cap ? q->hit : cap;
    if (hit <= num_computed) return KV_OK;
    q->has_spec = true;
    q->spec = (kv_store_load_spec){.vllm_cached = num_computed, .kvpool_cached = hit, .can_load = false};
    out->ext = hit - num_computed;
    out->load_async = true;
    store_sched_invariants(c);
    return KV_OK;
}

static void usaa(void *self, kv_req *r, const kv_block_table *blocks, uint32_t ext) {
    store_sched *c = self;
    check_owner(c);
    SS_ASSERT(c, r->status == KV_RS_WAITING || r->status == KV_RS_PREEMPTED, "engine %u store USAA(%u) in %s", c->e->cfg.index, r->id,
              kv_req_status_name((kv_req_status)r->status));
    ss_req *q = find(c, r->id, true);
    if (!q) return;
    q->unfinished = true;
    q->tokens = (kv_tokens){.token_seed = r->token_seed, .prefix_group = r->prefix_group, .prefix_len = r->prefix_len};
    if (ext > 0 || !kv_bug_on(c->e->cfg.bugs, KV_BUG_STORE_EMPTY_BLOCK_TABLE)) q->stored = *blocks;
    else kv_blocks_clear(&q->stored, 0); /* seed 003 before #54643: () */
    if (!q->has_spec) return;
    if (ext == 0) {
        q->spec.can_load = false;
        return;
    }
    if (ext != q->spec.kvpool_cached - q->spec.vllm_cached)
        kv_violate(c->e->env, KV_INV_SCHED_ASSERT, c->e->cfg.index, r->id,
                   "store USAA(%u): assert num_external_tokens == hit - computed (%u != %u)", r->id, ext,
                   q->spec.kvpool_cached - q->spec.vllm_cached);
    q->spec.can_load = true;
}

static kv_store_meta *building(store_sched *c) { return &c->buf[c->cur]; }

/* from_request_tracker: appends the ReqMeta (if any) to the meta being built. */
static void from_tracker(store_sched *c, ss_req *q, const kv_store_load_spec *spec, bool skip_save, uint8_t origin) {
    uint32_t bs = c->e->cfg.block_size;
    ss_tracker *t = &q->tracker;
    uint32_t boundary = kv_cdiv(t->num_saved + 1, bs) * bs;
    uint32_t to_save = t->token_len / bs * bs;
    bool skip = skip_save || to_save < boundary;
    bool load = spec && spec->can_load;
    if (load) skip = true;
    if (skip && !load) return; /* nothing to save, nothing to load */
    kv_store_meta *m = building(c);
    if (m->n >= c->e->cfg.reqs_max) return;
    /* a save moves the tracker forward and stays within the prompt (T4) */
    SS_ASSERT(c, skip || (t->num_saved < to_save && to_save <= t->prefill_end),
              "engine %u store request %u: save of [%u, %u) tokens, prefill ends at %u", c->e->cfg.index, q->id,
              t->num_saved, to_save, t->prefill_end);
    kv_store_req_meta *rm = &m->req[m->n++];
    memset(rm, 0, sizeof *rm);
    rm->id = q->id;
    rm->origin = origin;
    rm->tokens = q->tokens;
    rm->blocks = t->blocks;
    rm->save_from = t->num_saved / bs * bs;
    rm->token_len = to_save;
    rm->can_save = !skip;
    if (load) {
        rm->has_load = true;
        rm->load = *spec;
    }
    if (!skip) t->num_saved = to_save;
}

static const kv_sreq *engine_req(const store_sched *c, uint32_t id) { return kv_engine_find(c->e, id); }

static void on_new(store_sched *c, uint32_t id) {
    const kv_sreq *s = engine_req(c, id);
    /* scheduled this step: the engine has it */
    if (!SS_ASSERT(c, s != NULL, "engine %u store: new request %u is not live", c->e->cfg.index, id)) return;
    ss_req *q = find(c, id, true);
    if (!q) return;
    q->tokens = s->tokens;
    bool had = q->has_spec;
    kv_store_load_spec spec = q->spec;
    q->has_spec = false;
    q->tracker = (ss_tracker){.used = true, .token_len = s->r.num_computed, .prefill_end = s->r.prompt_len,
                              .blocks = s->r.blocks};
    if (q->tracker.token_len > q->tracker.prefill_end) q->tracker.token_len = q->tracker.prefill_end;
    from_tracker(c, q, had ? &spec : NULL, consumer(c), KV_STORE_FROM_NEW);
}

static void on_cached(store_sched *c, uint32_t id, bool resumed) {
    /* a consumer never saves (build skips it) */
    if (!SS_ASSERT(c, !consumer(c), "engine %u store: cached request %u on a consumer", c->e->cfg.index, id)) return;
    const kv_sreq *s = engine_req(c, id);
    ss_req *q = find(c, id, false);
    if (!s || !q) return;
    ss_tracker *t = &q->tracker;
    if (resumed || !t->used) {
        *t = (ss_tracker){.used = true, .prefill_end = s->r.prompt_len};
    } else if (t->token_len >= t->prefill_end) {
        return; /* decoding: nothing more to save */
    }
    t->blocks = s->r.blocks;
    t->token_len = s->r.num_computed < t->prefill_end ? s->r.num_computed : t->prefill_end;
    from_tracker(c, q, NULL, false, KV_STORE_FROM_CACHED);
}

static void pending_loads(store_sched *c, const kv_sched_output *so) {
    for (uint32_t i = 0; i < c->e->cfg.reqs_max; i++) {
        ss_req *q = &c->req[i];
        if (!q->used || !q->unfinished || !q->has_spec) continue;
        if (kv_id_list_has(&so->new_reqs, q->id) || kv_id_list_has(&so->cached_reqs, q->id)) continue;
        kv_store_load_spec spec = q->spec;
        q->has_spec = false;
        /* T3: what GNMT made of a hit */
        if (!SS_ASSERT(c, spec.kvpool_cached > spec.vllm_cached, "engine %u store request %u: LoadSpec [%u, %u)",
                       c->e->cfg.index, q->id, spec.vllm_cached, spec.kvpool_cached))
            continue;
        bool before_fix = kv_bug_on(c->e->cfg.bugs, KV_BUG_STORE_EMPTY_BLOCK_TABLE) ||
                          kv_bug_on(c->e->cfg.bugs, KV_BUG_STORE_REJECTED_LOAD_SAVE);
        if (!spec.can_load && !before_fix) continue; /* a rejected speculative load is dropped */
        q->lookup = SS_NONE; /* a failed load looks again, as the store may have lost keys */
        q->tracker = (ss_tracker){.used = true, .token_len = spec.kvpool_cached, .blocks = q->stored,
                                  .prefill_end = spec.kvpool_cached};
        from_tracker(c, q, &spec, false, KV_STORE_FROM_PENDING);
    }
}

static const void *build(void *self, const kv_sched_output *so) {
    store_sched *c = self;
    check_owner(c);
    kv_store_meta *m = building(c);
    m->n = 0;
    m->preempted.n = 0;
    for (uint32_t i = 0; i < so->finished_reqs.n; i++) {
        ss_req *q = find(c, so->finished_reqs.id[i], false);
        if (q) q->used = false;
    }
    for (uint32_t i = 0; i < so->preempted_reqs.n; i++) {
        ss_req *q = find(c, so->preempted_reqs.id[i], false);
        kv_id_list_add(&m->preempted, so->preempted_reqs.id[i]);
        if (!q) continue;
        q->has_spec = false;
        q->tracker = (ss_tracker){0};
        q->unfinished = false;
        q->lookup = SS_NONE;
    }
    for (uint32_t i = 0; i < so->new_reqs.n; i++) on_new(c, so->new_reqs.id[i]);
    if (!consumer(c))
        for (uint32_t i = 0; i < so->cached_reqs.n; i++)
            on_cached(c, so->cached_reqs.id[i], kv_id_list_has(&so->resumed_reqs, so->cached_reqs.id[i]));
    pending_loads(c, so);
    c->cur ^= 1u;
    if (store_sched_invariants(c) && KV_CHECKED) store_sched_walk(c);
    return m;
}

static void request_finished(void *self, kv_req *r, const kv_block_table *blocks, bool *delay) {
    store_sched *c = self;
    check_owner(c);
    *delay = false;
    if (!SS_ASSERT(c, kv_req_status_finished((kv_req_status)r->status), "engine %u store request_finished(%u) in %s",
                   c->e->cfg.index, r->id, kv_req_status_name((kv_req_status)r->status)))
        return;
    const ss_req *q = find(c, r->id, false);
    if (consumer(c) || !q || !q->tracker.used || q->tracker.num_saved == 0) return;
    *delay = kv_blocks_any(blocks);
}

static void update_output(void *self, kv_conn_output *o) {
    (void)self;
    (void)o;
}

static void on_message(void *self, const kv_msg *m) {
    store_sched *c = self;
    check_owner(c);
    if (m->kind != KV_M_STORE_LOOKUP_REPLY) return;
    /* our own lookup actor's reply: whole blocks */
    const kv_m_store_lookup_reply *r = m->payload;
    if (!SS_ASSERT(c, m->len == sizeof *r && r->hit_tokens % c->e->cfg.block_size == 0,
                   "engine %u store lookup reply of %u bytes: %u tokens (block %u)", c->e->cfg.index, m->len,
                   m->len == sizeof *r ? r->hit_tokens : 0u, c->e->cfg.block_size))
        return;
    ss_req *q = find(c, r->id, false);
    if (!q || q->lookup != SS_PENDING) return; /* the request ended meanwhile */
    q->lookup = SS_DONE;
    q->hit = r->hit_tokens;
    if (store_sched_invariants(c) && KV_CHECKED) store_sched_walk(c);
}

static const kv_conn_sched_ops store_sched_ops = {
    .size = sizeof(kv_conn_sched_ops),
    .name = "store",
    .get_num_new_matched_tokens = gnmt,
    .update_state_after_alloc = usaa,
    .build_connector_meta = build,
    .request_finished = request_finished,
    .update_connector_output = update_output,
    .on_message = on_message,
};

kv_status kv_store_sched_new(kv_engine *e, kv_conn_sched *out) {
    store_sched *c = kv_alloc(e->env, sizeof *c);
    if (!c) return KV_ENOMEM;
    c->e = e;
    c->req = kv_alloc_scratch(e->env, e->cfg.reqs_max * sizeof c->req[0]); /* find clears a slot it hands out */
    c->buf[0].req = kv_alloc_scratch(e->env, e->cfg.reqs_max * sizeof c->buf[0].req[0]);
    c->buf[1].req = kv_alloc_scratch(e->env, e->cfg.reqs_max * sizeof c->buf[1].req[0]);
    c->owner = (kv_owner){.actor = e->sched_actor, .what = "store scheduler state"};
    *out = (kv_conn_sched){.ops = &store_sched_ops, .self = c};
    if (!c->req || !c->buf[0].req || !c->buf[1].req) {
        kv_store_sched_free(e, out);
        return KV_ENOMEM;
    }
    for (uint32_t i = 0; i < e->cfg.reqs_max; i++) c->req[i].used = false;
    return KV_OK;
}

void kv_store_sched_free(kv_engine *e, kv_conn_sched *c) {
    store_sched *s = c->self;
    if (s) {
        kv_release(e->env, s->buf[1].req);
        kv_release(e->env, s->buf[0].req);
        kv_release(e->env, s->req);
    }
    kv_release(e->env, c->self);
    c->self = NULL;
    c->ops = NULL;
}

uint32_t kv_store_sched_state(const kv_conn_sched *c) {
    const store_sched *s = c->self;
    uint32_t n = 0;
    if (!s) return 0;
    for (uint32_t i = 0; i < s->e->cfg.reqs_max; i++) n += s->req[i].used;
    return n;
}
