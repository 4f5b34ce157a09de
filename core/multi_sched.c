/* core/multi_sched.c — scheduler half of the MultiConnector; see multi.h.
 *
 * State (owner: the engine scheduler actor): per request the chosen child
 * and which other children had a hit (rejected speculative loads); the
 * holds to publish with the next build.
 * Transitions:
 *   GNMT             ask every child in order; any "not ready" -> not ready;
 *                    the first child with ext > 0 is chosen, its answer
 *                    returned
 *   USAA             the chosen child (ext), every other child (0); both
 *                    get the real block table
 *   build            each child builds; the multi meta carries both plus
 *                    the holds
 *   request_finished every child is asked; n of them hold the blocks:
 *                    delay = n > 0, and n > 1 becomes a hold; the choice
 *                    is forgotten
 *   update_connector_output, on_message,
 *   on_new_request                          forwarded to every child
 * Invariants (multi_sched_invariants: M1-M2, O(1), on every hook's return
 * in every build; M3 walked after build in checked builds; INV-ASSERT,
 * core/assert.h):
 *   M1 cur is 0 or 1; the holds being collected fit (n_holds <=
 *      KV_ENGINE_REQS_MAX), each for 2..KV_MULTI_CHILDREN children;
 *   M2 both children exist;
 *   M3 a used choice: chosen is -1 or a child, had_hit names children only,
 *      and the chosen child had a hit; ids are unique among used choices.
 * Hooks assert what the engine promises: request_finished for a finished
 * request, and at most KV_MULTI_CHILDREN of them holding its blocks. */
#include <string.h>

#include "core/assert.h"
#include "core/multi.h"

typedef struct ms_req {
    bool used;
    uint32_t id;
    int32_t chosen;            /* child index, -1: none */
    uint8_t had_hit;           /* bit i: child i answered ext > 0 */
} ms_req;

typedef struct multi_sched {
    kv_owner owner;
    kv_engine *e;              /* borrowed */
    kv_conn_sched child[KV_MULTI_CHILDREN];
    ms_req req[KV_ENGINE_REQS_MAX];
    kv_multi_meta buf[2];      /* one being built, one frozen */
    uint32_t cur;
} multi_sched;

#define MS_ASSERT(c, cond, ...) KV_ASSERT((c)->e->env, (c)->e->cfg.index, cond, __VA_ARGS__)
#define MS_ASSERT_CHECKED(c, cond, ...) KV_ASSERT_CHECKED((c)->e->env, (c)->e->cfg.index, cond, __VA_ARGS__)

/* M1, M2: O(holds) of the meta being built. */
static bool multi_sched_invariants(const multi_sched *c) {
    const kv_multi_meta *m = &c->buf[c->cur & 1u];
    if (!MS_ASSERT(c, c->cur <= 1u && m->n_holds <= KV_ENGINE_REQS_MAX && c->child[0].ops && c->child[1].ops,
                   "engine %u multi scheduler: buffer %u, %u holds, children %d/%d", c->e->cfg.index, c->cur,
                   m->n_holds, c->child[0].ops != NULL, c->child[1].ops != NULL))
        return false;
    for (uint32_t h = 0; h < m->n_holds; h++)
        if (!MS_ASSERT(c, m->hold[h].n >= 2u && m->hold[h].n <= KV_MULTI_CHILDREN,
                       "engine %u multi scheduler: hold of request %u by %u children", c->e->cfg.index, m->hold[h].id,
                       m->hold[h].n))
            return false;
    return true;
}

/* M3. Checked builds. */
static bool multi_sched_walk(const multi_sched *c) {
    uint32_t ids[KV_ENGINE_REQS_MAX], n = 0, a, b;
    for (uint32_t i = 0; i < KV_ENGINE_REQS_MAX; i++) {
        const ms_req *q = &c->req[i];
        if (!q->used) continue;
        ids[n++] = q->id;
        if (!MS_ASSERT_CHECKED(c, q->chosen >= -1 && q->chosen < (int32_t)KV_MULTI_CHILDREN &&
                                      q->had_hit < (1u << KV_MULTI_CHILDREN) &&
                                      (q->chosen < 0 || (q->had_hit >> q->chosen & 1u)),
                               "engine %u multi request %u: chosen %d, hits %x", c->e->cfg.index, q->id, (int)q->chosen,
                               q->had_hit))
            return false;
    }
    return MS_ASSERT_CHECKED(c, kv_ids_distinct(ids, n, &a, &b), "engine %u multi request %u chosen twice (%u used)",
                             c->e->cfg.index, ids[a], n);
}

static ms_req *find(multi_sched *c, uint32_t id, bool create) {
    ms_req *free_slot = NULL;
    for (uint32_t i = 0; i < KV_ENGINE_REQS_MAX; i++) {
        if (c->req[i].used && c->req[i].id == id) return &c->req[i];
        if (!c->req[i].used && !free_slot) free_slot = &c->req[i];
    }
    if (!create || !free_slot) return NULL;
    *free_slot = (ms_req){.used = true, .id = id, .chosen = -1};
    return free_slot;
}

static kv_status gnmt(void *self, const kv_req *r, uint32_t num_computed, kv_match *out) {
    multi_sched *c = self;
    kv_owner_check(c->e->env, &c->owner, c->e->cfg.index);
    *out = (kv_match){.ready = true};
    int32_t chosen = -1;
    uint8_t hits = 0;
    kv_match first = {.ready = true};
    for (uint32_t i = 0; i < KV_MULTI_CHILDREN; i++) {
        kv_match m = {.ready = true};
        kv_status st = c->child[i].ops->get_num_new_matched_tokens(c->child[i].self, r, num_computed, &m);
        if (st != KV_OK) return st;
        if (!m.ready) {
            out->ready = false;
            return KV_OK;
        }
        if (m.ext > 0) {
            hits |= (uint8_t)(1u << i);
            if (chosen < 0) {
                chosen = (int32_t)i;
                first = m;
            }
        }
    }
    ms_req *q = find(c, r->id, true);
    if (q) {
        q->chosen = chosen;
        q->had_hit = hits;
    }
    if (chosen >= 0) *out = first;
    /* the answer is the chosen child's, or no external tokens at all */
    MS_ASSERT(c, chosen >= 0 ? out->ext > 0 : out->ext == 0 && !out->load_async,
              "engine %u multi GNMT(%u): chosen %d, ext %u, async %d", c->e->cfg.index, r->id, (int)chosen, out->ext,
              (int)out->load_async);
    return KV_OK;
}

static void usaa(void *self, kv_req *r, const kv_block_table *blocks, uint32_t ext) {
    multi_sched *c = self;
    kv_owner_check(c->e->env, &c->owner, c->e->cfg.index);
    const ms_req *q = find(c, r->id, false);
    int32_t chosen = q ? q->chosen : -1;
    for (uint32_t i = 0; i < KV_MULTI_CHILDREN; i++) {
        bool mine = (int32_t)i == chosen;
        if (!mine && q && (q->had_hit >> i & 1u)) c->e->stats.rejected_loads++;
        c->child[i].ops->update_state_after_alloc(c->child[i].self, r, blocks, mine ? ext : 0);
    }
}

static const void *build(void *self, const kv_sched_output *so) {
    multi_sched *c = self;
    kv_owner_check(c->e->env, &c->owner, c->e->cfg.index);
    kv_multi_meta *m = &c->buf[c->cur];
    for (uint32_t i = 0; i < KV_MULTI_CHILDREN; i++) m->child[i] = c->child[i].ops->build_connector_meta(c->child[i].self, so);
    c->cur ^= 1u;
    c->buf[c->cur].n_holds = 0; /* the next build's holds start empty */
    if (multi_sched_invariants(c) && KV_CHECKED) multi_sched_walk(c);
    return m;
}

static void request_finished(void *self, kv_req *r, const kv_block_table *blocks, bool *delay) {
    multi_sched *c = self;
    kv_owner_check(c->e->env, &c->owner, c->e->cfg.index);
    *delay = false;
    if (!MS_ASSERT(c, kv_req_status_finished((kv_req_status)r->status), "engine %u multi request_finished(%u) in %s",
                   c->e->cfg.index, r->id, kv_req_status_name((kv_req_status)r->status)))
        return;
    uint32_t n = 0;
    for (uint32_t i = 0; i < KV_MULTI_CHILDREN; i++) {
        bool d = false;
        c->child[i].ops->request_finished(c->child[i].self, r, blocks, &d);
        n += d;
    }
    *delay = n > 0;
    kv_multi_meta *m = &c->buf[c->cur];
    if (n > 1 && m->n_holds < KV_ENGINE_REQS_MAX) m->hold[m->n_holds++] = (kv_multi_hold){.id = r->id, .n = n};
    ms_req *q = find(c, r->id, false);
    if (q) q->used = false;
    multi_sched_invariants(c);
}

static void update_output(void *self, kv_conn_output *o) {
    multi_sched *c = self;
    for (uint32_t i = 0; i < KV_MULTI_CHILDREN; i++) c->child[i].ops->update_connector_output(c->child[i].self, o);
}

static void on_message(void *self, const kv_msg *m) {
    multi_sched *c = self;
    for (uint32_t i = 0; i < KV_MULTI_CHILDREN; i++)
        if (c->child[i].ops->on_message) c->child[i].ops->on_message(c->child[i].self, m);
}

static void on_new_request(void *self, kv_req *r) {
    multi_sched *c = self;
    for (uint32_t i = 0; i < KV_MULTI_CHILDREN; i++)
        if (c->child[i].ops->on_new_request) c->child[i].ops->on_new_request(c->child[i].self, r);
}

static const kv_conn_sched_ops multi_sched_ops = {
    .size = sizeof(kv_conn_sched_ops),
    .name = "multi",
    .get_num_new_matched_tokens = gnmt,
    .update_state_after_alloc = usaa,
    .build_connector_meta = build,
    .request_finished = request_finished,
    .update_connector_output = update_output,
    .on_message = on_message,
    .on_new_request = on_new_request,
};

kv_status kv_multi_sched_new(kv_engine *e, const kv_conn_kind kids[KV_MULTI_CHILDREN], kv_conn_sched *out) {
    multi_sched *c = kv_alloc(e->env, sizeof *c);
    if (!c) return KV_ENOMEM;
    c->e = e;
    c->owner = (kv_owner){.actor = e->sched_actor, .what = "multi scheduler state"};
    kv_status st = KV_OK;
    for (uint32_t i = 0; i < KV_MULTI_CHILDREN && st == KV_OK; i++) st = kv_conn_sched_new(e, kids[i], &c->child[i]);
    if (st != KV_OK) {
        for (uint32_t i = 0; i < KV_MULTI_CHILDREN; i++) kv_conn_sched_free(e, &c->child[i]);
        kv_release(e->env, c);
        return st;
    }
    *out = (kv_conn_sched){.ops = &multi_sched_ops, .self = c};
    return KV_OK;
}

void kv_multi_sched_free(kv_engine *e, kv_conn_sched *cs) {
    multi_sched *c = cs->self;
    if (!c) return;
    for (uint32_t i = 0; i < KV_MULTI_CHILDREN; i++) kv_conn_sched_free(e, &c->child[i]);
    kv_release(e->env, c);
    cs->self = NULL;
    cs->ops = NULL;
}

uint32_t kv_multi_sched_state(const kv_conn_sched *cs) {
    const multi_sched *c = cs->self;
    if (!c) return 0;
    uint32_t n = c->buf[c->cur].n_holds;
    for (uint32_t i = 0; i < KV_ENGINE_REQS_MAX; i++) n += c->req[i].used;
    for (uint32_t i = 0; i < KV_MULTI_CHILDREN; i++) n += kv_conn_sched_state(&c->child[i]);
    return n;
}
