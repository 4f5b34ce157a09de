/* core/p2p_sched.c — scheduler half of the Mooncake P2P connector
 * (MooncakeConnectorScheduler). Runs on the engine scheduler actor.
 *
 * State (owner: the engine scheduler actor):
 *   need_recv      D: id -> local blocks to pull (cleared by every build)
 *   need_send      P: id -> [] (create the entry) or clipped blocks
 *   not_processed  P: transfer ids of requests that ended without a send
 * Transitions:
 *   GNMT (D)            do_remote_prefill: count = N' - computed > 0 -> (count, async)
 *   USAA (D)            need_recv[id] = ext > 0 ? sw_clip(new blocks) : ()  (empty pull)
 *                       do_remote_prefill = false, always
 *   USAA (P)            need_send[id] = []
 *   request_finished D  do_remote_prefill still set (aborted before first
 *                       schedule): need_recv[id] = () and clear it
 *   request_finished P  LENGTH_CAPPED: delay = any(blocks), need_send[id] =
 *                       clipped blocks; otherwise not_processed += tid
 *   build               move all three into the frozen meta
 * Invariants (p2p_sched_invariants: Q1-Q2, O(1), on every hook's return in
 * every build; Q3-Q4 walked after build in checked builds; INV-ASSERT,
 * core/assert.h):
 *   Q1 pending is one of the two buffers, and what it holds fits the
 *      engine's table: n_recv, n_send <= reqs_max;
 *   Q2 sliding groups keep blocks_per_sw >= 2 blocks (a window plus one),
 *      other groups none;
 *   Q3 every pull meta is D's request with the engine's groups, its clipped
 *      table within the request's blocks (first_pos[g] + n[g] <=
 *      KV_REQ_BLOCKS_MAX), a sliding group at most blocks_per_sw of them, a
 *      mamba group at most one;
 *   Q4 every send record names a request and a transfer; a filled one has
 *      the engine's groups, clipped as in Q3.
 * Hooks assert the phase vLLM calls them in: GNMT and USAA for a request
 * at its first schedule (WAITING), request_finished for a finished one. */
#include <string.h>

#include "core/assert.h"
#include "core/p2p.h"

typedef struct p2p_sched {
    kv_owner owner;
    kv_engine *e;                 /* borrowed: the engine this half serves */
    kv_p2p_meta buf[2];           /* double buffer: one pending, one frozen */
    kv_p2p_meta *pending;         /* what the next build publishes (buf[i]) */
    uint32_t blocks_per_sw[KV_GROUPS_MAX];
} p2p_sched;

#define Q_ASSERT(c, cond, ...) KV_ASSERT((c)->e->env, (c)->e->cfg.index, cond, __VA_ARGS__)
#define Q_ASSERT_CHECKED(c, cond, ...) KV_ASSERT_CHECKED((c)->e->env, (c)->e->cfg.index, cond, __VA_ARGS__)

/* Q1, Q2: O(1) (the groups are at most KV_GROUPS_MAX). */
static bool p2p_sched_invariants(const p2p_sched *c) {
    const kv_p2p_meta *m = c->pending;
    if (!Q_ASSERT(c, (m == &c->buf[0] || m == &c->buf[1]) && m->n_recv <= c->e->cfg.reqs_max &&
                         m->n_send <= c->e->cfg.reqs_max,
                  "engine %u p2p scheduler: pending buffer %d, %u pulls, %u sends of %u", c->e->cfg.index,
                  m == &c->buf[0] ? 0 : m == &c->buf[1] ? 1 : -1, m->n_recv, m->n_send, c->e->cfg.reqs_max))
        return false;
    for (uint32_t g = 0; g < c->e->cfg.n_groups; g++)
        if (!Q_ASSERT(c, (c->e->cfg.group[g].kind == KV_GROUP_SLIDING) == (c->blocks_per_sw[g] >= 2u),
                      "engine %u p2p scheduler: group %u (kind %u) keeps %u blocks", c->e->cfg.index, g,
                      c->e->cfg.group[g].kind, c->blocks_per_sw[g]))
            return false;
    return true;
}

/* The clip of Q3/Q4 on one table. */
static bool clipped_ok(const p2p_sched *c, const kv_block_table *t, const uint32_t *first_pos, uint32_t req) {
    if (!Q_ASSERT_CHECKED(c, t->n_groups == c->e->cfg.n_groups, "engine %u request %u: clipped table of %u groups",
                          c->e->cfg.index, req, t->n_groups))
        return false;
    for (uint32_t g = 0; g < t->n_groups; g++) {
        uint32_t kind = c->e->cfg.group[g].kind;
        uint32_t cap = kind == KV_GROUP_SLIDING ? c->blocks_per_sw[g] : kind == KV_GROUP_MAMBA ? 1u : KV_REQ_BLOCKS_MAX;
        if (!Q_ASSERT_CHECKED(c, t->n[g] <= cap && first_pos[g] + t->n[g] <= KV_REQ_BLOCKS_MAX,
                              "engine %u request %u group %u (kind %u): %u blocks from position %u", c->e->cfg.index,
                              req, g, kind, t->n[g], first_pos[g]))
            return false;
    }
    return true;
}

/* Q3, Q4 over a meta. Checked builds. */
static bool p2p_meta_walk(const p2p_sched *c, const kv_p2p_meta *m) {
    for (uint32_t i = 0; i < m->n_recv; i++)
        if (!clipped_ok(c, &m->recv[i].blocks, m->recv[i].first_pos, m->recv[i].d_req)) return false;
    for (uint32_t i = 0; i < m->n_send; i++) {
        const kv_p2p_send *x = &m->send[i];
        if (!Q_ASSERT_CHECKED(c, x->p_req != KV_REQ_NONE && x->filled <= 1, "engine %u send record %u: request %u filled %u",
                              c->e->cfg.index, i, x->p_req, x->filled))
            return false;
        if (x->filled && !clipped_ok(c, &x->blocks, x->first_pos, x->p_req)) return false;
    }
    return true;
}

static bool is_mamba_model(const kv_engine *e) {
    for (uint32_t g = 0; g < e->cfg.n_groups; g++)
        if (e->cfg.group[g].kind == KV_GROUP_MAMBA) return true;
    return false;
}

/* Keep the transferable tail of each group: the last blocks_per_sw blocks of
 * a sliding group, the state block of a mamba group, all of a full group,
 * starting at position `from`. */
static void sw_clip(const p2p_sched *c, const kv_block_table *in, uint32_t from, kv_block_table *out,
                    uint32_t *first_pos) {
    const kv_engine *e = c->e;
    kv_blocks_clear(out, in->n_groups);
    for (uint32_t g = 0; g < in->n_groups; g++) {
        uint32_t start = from < in->n[g] ? from : in->n[g];
        if (e->cfg.group[g].kind == KV_GROUP_SLIDING && in->n[g] - start > c->blocks_per_sw[g])
            start = in->n[g] - c->blocks_per_sw[g];
        if (e->cfg.group[g].kind == KV_GROUP_MAMBA && in->n[g] > start) start = in->n[g] - 1;
        first_pos[g] = start;
        for (uint32_t i = start; i < in->n[g]; i++) out->id[g][out->n[g]++] = in->id[g][i];
        /* the clip is the table's tail, from the position it names */
        Q_ASSERT(c, start <= in->n[g] && first_pos[g] + out->n[g] == in->n[g], "engine %u group %u: clip from %u of %u",
                 e->cfg.index, g, start, in->n[g]);
    }
}

/* vLLM's N - 1 rule for a model with a recurrent group: P computes the
 * prompt's state before its last token, D pulls that and computes the last
 * token from it (the state after N tokens is not the one D's first decode
 * step must continue from, and cannot be undone). D: the tokens it pulls. */
static uint32_t remote_tokens(const p2p_sched *c, const kv_req *r) {
    return is_mamba_model(c->e) && r->prompt_len > 1 ? r->prompt_len - 1u : r->prompt_len;
}

/* P: the prompt without its last token, and one token to generate (vLLM's
 * _truncate_mamba_request_for_prefill; a request is added once, so it is
 * truncated once). */
static void on_new_request(void *self, kv_req *r) {
    p2p_sched *c = self;
    kv_owner_check(c->e->env, &c->owner, c->e->cfg.index);
    if (!r->params.do_remote_decode || !is_mamba_model(c->e) || r->prompt_len <= 1) return;
    r->prompt_len--;
    r->max_tokens = 1;
}

static kv_status gnmt(void *self, const kv_req *r, uint32_t num_computed, kv_match *out) {
    p2p_sched *c = self;
    kv_owner_check(c->e->env, &c->owner, c->e->cfg.index);
    /* asked at a request's first schedule, with what is computed locally */
    Q_ASSERT(c, (r->status == KV_RS_WAITING || r->status == KV_RS_PREEMPTED) && num_computed < kv_req_num_tokens(r),
             "engine %u p2p GNMT(%u): %s, %u of %u tokens computed", c->e->cfg.index, r->id,
             kv_req_status_name((kv_req_status)r->status), num_computed, kv_req_num_tokens(r));
    *out = (kv_match){.ready = true};
    if (!r->params.do_remote_prefill) return KV_OK;
    uint32_t n = remote_tokens(c, r);
    if (n > num_computed) {
        out->ext = n - num_computed;
        out->load_async = true;
    }
    /* D never loads beyond the prompt P computed */
    Q_ASSERT(c, num_computed + out->ext <= r->prompt_len, "engine %u p2p GNMT(%u): %u computed + %u external > prompt %u",
             c->e->cfg.index, r->id, num_computed, out->ext, r->prompt_len);
    return KV_OK;
}

/* Appends unless present (a request finishes once); false when full. */
static bool xfer_id_list_add(kv_xfer_id_list *l, kv_xfer_id id) {
    for (uint32_t i = 0; i < l->n; i++)
        if (kv_xfer_id_eq(l->id[i], id)) return true;
    if (l->n >= KV_ENGINE_REQS_MAX) return false;
    l->id[l->n++] = id;
    return true;
}

static kv_p2p_pull *add_pull(p2p_sched *c, kv_req *r) {
    kv_p2p_meta *m = c->pending;
    if (m->n_recv >= c->e->cfg.reqs_max) return NULL;
    kv_p2p_pull *p = &m->recv[m->n_recv++];
    memset(p, 0, sizeof *p);
    p->d_req = r->id;
    p->transfer_id = r->params.transfer_id;
    p->remote_engine = r->params.remote_engine;
    p->bootstrap = r->params.remote_bootstrap;
    p->tokens = (kv_tokens){.token_seed = r->token_seed, .prefix_group = r->prefix_group,
                            .prefix_len = r->prefix_len};
    p->prompt_len = remote_tokens(c, r); /* what P computed */
    p->blocks.n_groups = c->e->cfg.n_groups;
    return p;
}

static void usaa(void *self, kv_req *r, const kv_block_table *blocks, uint32_t ext) {
    p2p_sched *c = self;
    kv_owner_check(c->e->env, &c->owner, c->e->cfg.index);
    /* right after the allocation of a request's first schedule: the table
     * is the engine's, with blocks for what it computed and will load */
    if (!Q_ASSERT(c, (r->status == KV_RS_WAITING || r->status == KV_RS_PREEMPTED) && blocks->n_groups == c->e->cfg.n_groups &&
                         blocks->n[0] * c->e->cfg.block_size >= r->num_computed + ext,
                  "engine %u p2p USAA(%u): %s, table %u groups x %u blocks for %u computed + %u external",
                  c->e->cfg.index, r->id, kv_req_status_name((kv_req_status)r->status), blocks->n_groups,
                  blocks->n[0], r->num_computed, ext))
        return;
    kv_xfer_params *x = &r->params;
    if (x->do_remote_prefill) {
        if (x->has_transfer_id && x->has_remote_engine && x->has_bootstrap) {
            kv_p2p_pull *p = add_pull(c, r);
            uint32_t from = r->num_computed / c->e->cfg.block_size; /* unhashed blocks */
            if (p && ext > 0) sw_clip(c, blocks, from, &p->blocks, p->first_pos);
        } else {
            kv_logf(c->e->env, KV_LOG_WARN, "p2p: request %u lacks transfer params; no transfer", r->id);
        }
        x->do_remote_prefill = false;
    }
    if (x->do_remote_decode && x->has_transfer_id && c->pending->n_send < c->e->cfg.reqs_max) {
        kv_p2p_send *s = &c->pending->send[c->pending->n_send++];
        memset(s, 0, sizeof *s);
        s->p_req = r->id;
        s->transfer_id = x->transfer_id;
        s->d_engine = x->has_decode_engine ? x->decode_engine : KV_ENGINE_ANY;
        s->blocks.n_groups = c->e->cfg.n_groups;
    }
    p2p_sched_invariants(c);
}

static const void *build(void *self, const kv_sched_output *so) {
    p2p_sched *c = self;
    (void)so;
    kv_owner_check(c->e->env, &c->owner, c->e->cfg.index);
    const kv_p2p_meta *frozen = c->pending;
    c->pending = c->pending == &c->buf[0] ? &c->buf[1] : &c->buf[0];
    c->pending->n_recv = 0;
    c->pending->n_send = 0;
    c->pending->not_processed.n = 0;
    if (p2p_sched_invariants(c) && KV_CHECKED) p2p_meta_walk(c, frozen);
    return frozen;
}

static void request_finished(void *self, kv_req *r, const kv_block_table *blocks, bool *delay) {
    p2p_sched *c = self;
    kv_owner_check(c->e->env, &c->owner, c->e->cfg.index);
    *delay = false;
    /* the engine set the final status before asking */
    if (!Q_ASSERT(c, kv_req_status_finished((kv_req_status)r->status), "engine %u p2p request_finished(%u) in %s",
                  c->e->cfg.index, r->id, kv_req_status_name((kv_req_status)r->status)))
        return;
    kv_xfer_params *x = &r->params;
    if (x->do_remote_prefill) { /* aborted before its first schedule: tell P to free */
        if (x->has_transfer_id && x->has_remote_engine && x->has_bootstrap) add_pull(c, r);
        x->do_remote_prefill = false;
        return;
    }
    if (!x->do_remote_decode || !x->has_transfer_id) return;
    if (r->status != KV_RS_FINISHED_LENGTH_CAPPED) {
        xfer_id_list_add(&c->pending->not_processed, x->transfer_id);
        return;
    }
    *delay = kv_blocks_any(blocks);
    if (!*delay || c->pending->n_send >= c->e->cfg.reqs_max) return;
    kv_p2p_send *s = &c->pending->send[c->pending->n_send++];
    memset(s, 0, sizeof *s);
    s->p_req = r->id;
    s->transfer_id = x->transfer_id;
    s->d_engine = x->has_decode_engine ? x->decode_engine : KV_ENGINE_ANY;
    s->filled = 1;
    sw_clip(c, blocks, 0, &s->blocks, s->first_pos);
    p2p_sched_invariants(c);
}

static void update_output(void *self, kv_conn_output *o) {
    (void)self;
    (void)o;
}

static const kv_conn_sched_ops p2p_sched_ops = {
    .size = sizeof(kv_conn_sched_ops),
    .name = "p2p",
    .get_num_new_matched_tokens = gnmt,
    .update_state_after_alloc = usaa,
    .build_connector_meta = build,
    .request_finished = request_finished,
    .update_connector_output = update_output,
    .on_new_request = on_new_request,
};

kv_status kv_p2p_sched_new(kv_engine *e, kv_conn_sched *out) {
    p2p_sched *c = kv_alloc(e->env, sizeof *c);
    if (!c) return KV_ENOMEM;
    c->e = e;
    for (uint32_t i = 0; i < 2; i++) {
        c->buf[i].recv = kv_alloc_scratch(e->env, e->cfg.reqs_max * sizeof c->buf[i].recv[0]);
        c->buf[i].send = kv_alloc_scratch(e->env, e->cfg.reqs_max * sizeof c->buf[i].send[0]);
        if (!c->buf[i].recv || !c->buf[i].send) {
            kv_conn_sched tmp = {.self = c};
            kv_p2p_sched_free(e, &tmp);
            return KV_ENOMEM;
        }
    }
    c->pending = &c->buf[0];
    c->owner = (kv_owner){.actor = e->sched_actor, .what = "p2p scheduler state"};
    for (uint32_t g = 0; g < e->cfg.n_groups; g++)
        c->blocks_per_sw[g] = e->cfg.group[g].kind == KV_GROUP_SLIDING
                                  ? kv_sw_blocks(e->cfg.group[g].window, e->cfg.block_size)
                                  : 0;
    *out = (kv_conn_sched){.ops = &p2p_sched_ops, .self = c};
    return KV_OK;
}

void kv_p2p_sched_free(kv_engine *e, kv_conn_sched *c) {
    p2p_sched *s = c->self;
    for (uint32_t i = 0; s && i < 2; i++) {
        kv_release(e->env, s->buf[i].recv);
        kv_release(e->env, s->buf[i].send);
    }
    kv_release(e->env, c->self);
    c->self = NULL;
    c->ops = NULL;
}

uint32_t kv_p2p_sched_state(const kv_conn_sched *c) {
    const p2p_sched *s = c->self;
    return s ? s->pending->n_recv + s->pending->n_send + s->pending->not_processed.n : 0;
}
