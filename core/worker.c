/* core/worker.c — the worker main actor (vLLM's model-runner thread) of one
 * TP rank: per step it binds the connector metadata, starts loads, runs the
 * "forward pass" (writes each scheduled block's KV bytes, derived from token
 * ids), waits for saves and collects the connector's finished sets.
 *
 * Invariants (worker_invariants, O(1), at construction and on every message
 * in every build; INV-ASSERT, core/assert.h):
 *   G1 rank < tp, its heads a non-empty range [head_lo, head_hi) of
 *      KV_HEADS, block_bytes = heads x head_bytes, capacity = pool + 1;
 *   G2 a connector worker half is bound, with its ops;
 *   G3 the tails (last written block per request) are keyed by id mod
 *      KV_WORKER_TAILS.
 * The frozen step of an EXECUTE is our own scheduler's (asserted: at most
 * reqs_max requests, a step number, every block id within this rank's
 * memory; in checked builds each table the engine's groups covering the
 * tokens to compute); the STEP_RESULT it packs fits
 * KV_STEP_RESULT_PACKED_MAX. */
#include "core/worker.h"

#include <stdio.h> /* snprintf only */
#include <string.h>

#include "core/assert.h"

#define WK_ASSERT(w, cond, ...) KV_ASSERT((w)->env, (w)->cfg.index, cond, __VA_ARGS__)

/* G1-G3: O(1) (G3 is checked where a tail is used). */
static bool worker_invariants(const kv_worker *w) {
    if (!WK_ASSERT(w, w->rank < w->cfg.tp && w->head_lo < w->head_hi && w->head_hi <= KV_HEADS &&
                          w->block_bytes == (w->head_hi - w->head_lo) * w->cfg.head_bytes &&
                          w->capacity == w->cfg.pool_blocks + 1u,
                   "engine %u rank %u of %u worker: heads [%u, %u), block %u bytes, capacity %u", w->cfg.index,
                   w->rank, w->cfg.tp, w->head_lo, w->head_hi, w->block_bytes, w->capacity))
        return false;
    return WK_ASSERT(w, w->conn.ops && w->conn.self && w->mem, "engine %u rank %u worker: connector %d, memory %d",
                     w->cfg.index, w->rank, w->conn.ops != NULL, w->mem != NULL);
}


/* A recurrent group's state after the step: the state the block at the
 * position of the last token before the step holds (what this request
 * computed, pulled, loaded or hit before), with the step's tokens folded
 * in; a request computing from its first token starts from the initial
 * state. */
static uint64_t next_state(kv_worker *w, const kv_step_req *q, uint32_t g, uint32_t end) {
    uint64_t s = kv_state_initial();
    if (q->computed_before) {
        uint32_t pos = (q->computed_before - 1) / w->cfg.block_size;
        uint32_t id = pos < q->blocks.n[g] ? q->blocks.id[g][pos] : KV_NULL_BLOCK;
        /* the scheduler keeps that block until the step is done */
        if (!WK_ASSERT(w, id != KV_NULL_BLOCK && id < w->capacity,
                       "engine %u rank %u worker: request %u group %u: no state at position %u (block %u)",
                       w->cfg.index, w->rank, q->id, g, pos, id))
            return s;
        s = kv_state_read(kv_worker_kv(w, g, id), g, w->head_lo);
    }
    return kv_state_advance(&q->tokens, s, q->computed_before, end);
}

/* Rejected drafts (speculative decoding). The slots the step's rejected
 * drafts wrote, [accepted end, end), hold their KV, not the request's, and
 * so do an earlier step's rejected slots that this step starts past (it
 * does not compute them again: a scheduler that did not roll them back).
 * The memo gets the digest of every block of the step holding such slots;
 * the tail remembers them for the next step. A plain step that starts at
 * or before them computes them again. */
static void add_slots(kv_draft_slots *d, uint32_t lo, uint32_t hi) {
    if (lo >= hi) return;
    d->lo[d->n] = lo;
    d->hi[d->n++] = hi;
}

static void draft_slots(const kv_step_req *q, kv_worker_tail *tl, bool same, kv_digest_memo *dm) {
    uint32_t bs = dm->block_size, end = q->computed_before + q->num_scheduled, cb = q->computed_before;
    bool had = same && tl->dlo < tl->dhi;
    kv_draft_slots d = {0};
    /* an earlier step's drafts this one starts past; its own after what it keeps */
    if (had && cb > tl->dlo) add_slots(&d, tl->dlo, tl->dhi < cb ? tl->dhi : cb);
    if (q->num_spec) add_slots(&d, cb + 1 + kv_spec_accepted(&q->tokens, cb + 1, q->num_spec), end);
    /* a plain step from at or before an earlier step's drafts computes
     * them again up to its end; the ones past it stay */
    else if (had && cb <= tl->dlo) add_slots(&d, end > tl->dlo ? end : tl->dlo, tl->dhi);
    tl->dlo = d.n ? d.lo[d.n - 1] : 0; /* the last interval: the one a next step can meet */
    tl->dhi = d.n ? d.hi[d.n - 1] : 0;
    if (!d.n) return;
    for (uint32_t pos = cb / bs; pos < kv_cdiv(end, bs); pos++)
        if (pos * bs < d.hi[d.n - 1] && (pos + 1) * bs > d.lo[0])
            kv_digest_memo_put(dm, pos, kv_block_digest_drafts(&q->tokens, pos, bs, end, &d));
    tl->run.pos = UINT32_MAX; /* the tail's chain holds real tokens only: start it again */
}

/* Forward pass: rewrite every block the step's tokens touched. */
static void forward(kv_worker *w, const kv_step *st) {
    uint32_t bs = w->cfg.block_size;
    for (uint32_t i = 0; i < st->n_reqs; i++) {
        const kv_step_req *q = &st->req[i];
        uint32_t end = q->computed_before + q->num_scheduled;
        if (!q->num_scheduled) continue;
        uint32_t first = q->computed_before / bs, last = kv_cdiv(end, bs);
        kv_digest_memo dm;
        kv_digest_memo_init(&dm, &q->tokens, bs, end);
        /* the block the step ends in: continue its digest from the last step */
        kv_worker_tail *tl = &w->tail[q->id % KV_WORKER_TAILS];
        WK_ASSERT(w, !tl->used || tl->id % KV_WORKER_TAILS == q->id % KV_WORKER_TAILS,
                  "engine %u rank %u worker: tail of request %u in the slot of %u", w->cfg.index, w->rank, tl->id, q->id);
        bool same = tl->used && tl->id == q->id && tl->tokens.token_seed == q->tokens.token_seed &&
                    tl->tokens.prefix_group == q->tokens.prefix_group && tl->tokens.prefix_len == q->tokens.prefix_len;
        kv_digest_memo_put(&dm, last - 1, kv_block_digest_grow(&q->tokens, last - 1, bs, end, &tl->run, same));
        draft_slots(q, tl, same, &dm);
        tl->used = true;
        tl->id = q->id;
        tl->tokens = q->tokens;
        for (uint32_t g = 0; g < w->cfg.n_groups; g++) {
            bool mamba = w->cfg.group[g].kind == KV_GROUP_MAMBA;
            kv_kvmem_fill f[KV_REQ_BLOCKS_MAX];
            uint32_t n = 0;
            for (uint32_t pos = mamba ? last - 1 : first; pos < last && pos < q->blocks.n[g]; pos++) {
                uint32_t id = q->blocks.id[g][pos];
                if (id == KV_NULL_BLOCK) continue;
                /* our scheduler's block: within this rank's memory (the
                 * provider would skip one that is not, silently) */
                if (!WK_ASSERT(w, id < w->capacity, "engine %u rank %u worker: request %u group %u position %u block %u of %u",
                               w->cfg.index, w->rank, q->id, g, pos, id, w->capacity))
                    continue;
                f[n++] = (kv_kvmem_fill){
                    .block = id, .group = g, .digest = mamba ? next_state(w, q, g, end) : kv_block_digest_m(&dm, pos)};
            }
            if (n) w->mem->fill(w->memh[g], f, n);
        }
    }
}

/* The frozen step our scheduler published: within its table (cheap), each
 * request with the engine's groups and tokens to compute within its table
 * (a walk of the step: checked builds). */
static bool step_ok(const kv_worker *w, const kv_step *st) {
    if (!WK_ASSERT(w, st && st->n_reqs <= w->cfg.reqs_max && st->step_no > 0,
                   "engine %u rank %u worker: EXECUTE of step %llu with %u requests of %u", w->cfg.index, w->rank,
                   st ? (unsigned long long)st->step_no : 0ull, st ? st->n_reqs : 0u, w->cfg.reqs_max))
        return false;
    for (uint32_t i = 0; KV_CHECKED && i < st->n_reqs; i++) {
        const kv_step_req *q = &st->req[i];
        if (!KV_ASSERT_CHECKED(w->env, w->cfg.index, q->blocks.n_groups == w->cfg.n_groups && q->num_scheduled > 0 &&
                              q->num_spec < q->num_scheduled &&
                              q->computed_before + q->num_scheduled <= q->num_tokens + q->num_spec &&
                              kv_cdiv(q->computed_before + q->num_scheduled, w->cfg.block_size) <= q->blocks.n[0],
                       "engine %u rank %u worker: step %llu request %u: %u groups, [%u, +%u) of %u tokens, %u blocks",
                       w->cfg.index, w->rank, (unsigned long long)st->step_no, q->id, q->blocks.n_groups,
                       q->computed_before, q->num_scheduled, q->num_tokens, q->blocks.n[0]))
            return false;
    }
    return true;
}

static void on_execute(kv_worker *w, const kv_m_execute *x) {
    const kv_step *st = x->step;
    const kv_conn_worker_ops *ops = w->conn.ops;
    if (!step_ok(w, st)) return;
    ops->bind_connector_metadata(w->conn.self, st->conn_meta);
    ops->start_load_kv(w->conn.self);
    forward(w, st);
    ops->wait_for_save(w->conn.self);
    kv_m_step_result *res = w->result;
    res->rank = w->rank;
    res->step_no = st->step_no;
    kv_conn_output_clear(&res->out);
    ops->get_finished(w->conn.self, &st->finished, &res->out);
    ops->get_block_ids_with_load_errors(w->conn.self, &res->out.invalid_blocks);
    ops->clear_connector_metadata(w->conn.self);
    /* The forward pass takes model time: the result is back after it. */
    uint64_t toks = 0;
    for (uint32_t i = 0; i < st->n_reqs; i++) toks += st->req[i].num_scheduled;
    uint64_t cost = st->n_reqs ? w->cfg.step_ns_base + toks * w->cfg.step_ns_per_token : 0;
    uint32_t len = kv_step_result_pack(res, w->result_buf);
    /* what the scheduler will unpack: every list within its bound */
    WK_ASSERT(w, len <= KV_STEP_RESULT_PACKED_MAX && res->out.finished_sending.n <= KV_ENGINE_REQS_MAX &&
                     res->out.finished_recving.n <= KV_ENGINE_REQS_MAX && res->out.failed_recving.n <= KV_ENGINE_REQS_MAX &&
                     res->out.invalid_blocks.n <= KV_BAD_BLOCKS_MAX,
              "engine %u rank %u worker: step %llu result of %u bytes", w->cfg.index, w->rank,
              (unsigned long long)st->step_no, len);
    kv_rt_post_at(w->rt, w->sched_actor, kv_now_ns(w->env) + cost, KV_M_STEP_RESULT, w->result_buf, len);
}

static void main_handle(void *self, const kv_msg *m) {
    kv_worker *w = self;
    kv_owner_check(w->env, &w->owner, w->cfg.index);
    worker_invariants(w);
    if (m->kind == KV_M_EXECUTE) {
        on_execute(w, m->payload);
        return;
    }
    w->conn.ops->on_message(w->conn.self, m);
    kv_rt_post(w->rt, w->sched_actor, KV_M_WAKE, NULL, 0); /* its get_finished has news */
}

kv_status kv_worker_new(kv_engine *e, uint32_t rank, kvt *t, kv_conn_kind kind, kv_worker **out) {
    kv_worker *w = kv_alloc(e->env, sizeof *w);
    if (!w) return KV_ENOMEM;
    w->env = e->env;
    w->rt = e->rt;
    w->cfg = e->cfg;
    w->rank = rank;
    w->node = e->cfg.node + 1 + rank;
    w->sched_actor = e->sched_actor;
    w->t = t;
    kv_heads_of(e->cfg.tp, rank, &w->head_lo, &w->head_hi);
    w->block_bytes = (w->head_hi - w->head_lo) * e->cfg.head_bytes;
    w->capacity = e->cfg.pool_blocks + 1;
    char name[32];
    snprintf(name, sizeof name, "%c%u.w%u.main", e->cfg.role == KV_ROLE_PRODUCER ? 'P' : 'D',
             e->cfg.index, rank);
    kv_status st = kv_rt_spawn(e->rt, name, e->cfg.node, main_handle, w, 1u << 17, &w->main_actor);
    w->owner = (kv_owner){.actor = w->main_actor, .what = "worker main"};
    w->mem = e->cfg.kvmem.ops ? e->cfg.kvmem.ops : &kv_kvmem_host;
    w->scratch = st == KV_OK ? kv_alloc_scratch(e->env, w->block_bytes) : NULL;
    w->result = st == KV_OK ? kv_alloc_scratch(e->env, sizeof *w->result) : NULL;
    w->result_buf = st == KV_OK ? kv_alloc_scratch(e->env, KV_STEP_RESULT_PACKED_MAX) : NULL;
    if (st == KV_OK && (!w->scratch || !w->result || !w->result_buf)) st = KV_ENOMEM;
    for (uint32_t g = 0; g < e->cfg.n_groups && st == KV_OK; g++) {
        uint64_t bytes = (uint64_t)w->capacity * w->block_bytes;
        kv_kvmem_group mg = {.group = g, .blocks = w->capacity, .block_bytes = w->block_bytes,
                             .head_lo = w->head_lo, .head_hi = w->head_hi, .head_bytes = e->cfg.head_bytes};
        st = w->mem->open(e->cfg.kvmem.ctx, e->env, &mg, &w->kv[g], &w->memh[g]);
        if (st == KV_OK) st = kvt_reg(t, w->kv[g], bytes, KVT_MEM_HOST, &w->region[g]);
    }
    w->store_lookup_actor = KV_ACTOR_NONE;
    if (st == KV_OK) st = kv_conn_worker_new(w, kind, &w->conn);
    if (st != KV_OK) {
        kv_worker_free(w);
        return st;
    }
    worker_invariants(w);
    *out = w;
    return KV_OK;
}

void kv_worker_expose_table(kv_worker *w, const kv_block_table *t) {
    for (uint32_t g = 0; g < t->n_groups && g < w->cfg.n_groups; g++) kv_worker_expose(w, g, t->id[g], t->n[g]);
}

void kv_worker_absorb_table(kv_worker *w, const kv_block_table *t) {
    for (uint32_t g = 0; g < t->n_groups && g < w->cfg.n_groups; g++) kv_worker_absorb(w, g, t->id[g], t->n[g]);
}

kv_status kv_worker_spawn(const kv_worker *w, const char *what, kv_actor_fn fn, void *self, uint32_t mailbox_bytes,
                          uint32_t *out_actor) {
    char name[32];
    snprintf(name, sizeof name, "%c%u.w%u.%s", w->cfg.role == KV_ROLE_PRODUCER ? 'P' : 'D', w->cfg.index, w->rank,
             what);
    return kv_rt_spawn(w->rt, name, w->cfg.node, fn, self, mailbox_bytes, out_actor);
}

void kv_worker_free(kv_worker *w) {
    if (!w) return;
    kv_conn_worker_free(w, &w->conn);
    for (uint32_t g = 0; g < KV_GROUPS_MAX; g++)
        if (w->memh[g]) w->mem->close(w->cfg.kvmem.ctx, w->env, w->memh[g]);
    kv_release(w->env, w->result_buf);
    kv_release(w->env, w->result);
    kv_release(w->env, w->scratch);
    kv_release(w->env, w);
}
