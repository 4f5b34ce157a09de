/* core/multi_worker.c — worker half of the MultiConnector; see multi.h.
 *
 * State (owner: the worker main actor): the children's worker halves and
 * the holds (request -> children still to report finished_sending).
 * Transitions:
 *   bind            child i gets meta->child[i]; the meta's holds are added
 *   get_finished    each child's sets are merged: recving and failed are
 *                   unions; a sending id under a hold counts it down and is
 *                   emitted at zero, any other passes through
 *   on_message      to the child whose actors send that kind
 * Invariants (multi_worker_invariants: N1, O(1), on return from bind and
 * get_finished in every build; N2 walked in checked builds; INV-ASSERT,
 * core/assert.h):
 *   N1 both children exist, with different names (one per family);
 *   N2 a live hold waits for at most KV_MULTI_CHILDREN children; ids are
 *      unique among live holds (count_down finds the first).
 * Postconditions: every hold the scheduler published finds a slot (a lost
 * hold would let the first child's finished_sending free blocks the other
 * child still sends from). */
#include <string.h>

#include "core/assert.h"
#include "core/msgs.h"
#include "core/multi.h"

typedef struct multi_worker {
    kv_owner owner;
    kv_worker *w;               /* borrowed */
    kv_conn_worker child[KV_MULTI_CHILDREN];
    kv_multi_hold hold[KV_ENGINE_REQS_MAX]; /* n == 0: free */
    kv_conn_output tmp;         /* scratch: one child's output */
} multi_worker;

#define MW_ASSERT(c, cond, ...) KV_ASSERT((c)->w->env, (c)->w->cfg.index, cond, __VA_ARGS__)
#define MW_ASSERT_CHECKED(c, cond, ...) KV_ASSERT_CHECKED((c)->w->env, (c)->w->cfg.index, cond, __VA_ARGS__)

/* N1: O(1). */
static bool multi_worker_invariants(const multi_worker *c) {
    return MW_ASSERT(c, c->child[0].ops && c->child[1].ops && strcmp(c->child[0].ops->name, c->child[1].ops->name) != 0,
                     "engine %u rank %u multi worker: children %s/%s", c->w->cfg.index, c->w->rank,
                     c->child[0].ops ? c->child[0].ops->name : "-", c->child[1].ops ? c->child[1].ops->name : "-");
}

/* N2. Checked builds. */
static bool multi_worker_walk(const multi_worker *c) {
    uint32_t ids[KV_ENGINE_REQS_MAX], n = 0, a, b;
    for (uint32_t i = 0; i < KV_ENGINE_REQS_MAX; i++) {
        if (!c->hold[i].n) continue;
        ids[n++] = c->hold[i].id;
        if (!MW_ASSERT_CHECKED(c, c->hold[i].n <= KV_MULTI_CHILDREN, "engine %u rank %u multi worker: hold of %u by %u",
                               c->w->cfg.index, c->w->rank, c->hold[i].id, c->hold[i].n))
            return false;
    }
    return MW_ASSERT_CHECKED(c, kv_ids_distinct(ids, n, &a, &b), "engine %u rank %u multi worker: request %u held twice (%u holds)",
                             c->w->cfg.index, c->w->rank, ids[a], n);
}

static void bind(void *self, const void *meta) {
    multi_worker *c = self;
    kv_owner_check(c->w->env, &c->owner, c->w->cfg.index);
    const kv_multi_meta *m = meta;
    for (uint32_t i = 0; i < KV_MULTI_CHILDREN; i++)
        c->child[i].ops->bind_connector_metadata(c->child[i].self, m ? m->child[i] : NULL);
    for (uint32_t h = 0; m && h < m->n_holds; h++) {
        bool kept = false;
        for (uint32_t i = 0; i < KV_ENGINE_REQS_MAX && !kept; i++)
            if (!c->hold[i].n) {
                c->hold[i] = m->hold[h];
                kept = true;
            }
        /* holds are requests the engine still holds: at most its table */
        MW_ASSERT(c, kept, "engine %u rank %u multi worker: no slot for the hold of request %u", c->w->cfg.index,
                  c->w->rank, m->hold[h].id);
    }
    if (multi_worker_invariants(c) && KV_CHECKED) multi_worker_walk(c);
}

static void start_load(void *self) {
    multi_worker *c = self;
    for (uint32_t i = 0; i < KV_MULTI_CHILDREN; i++) c->child[i].ops->start_load_kv(c->child[i].self);
}

static void wait_for_save(void *self) {
    multi_worker *c = self;
    for (uint32_t i = 0; i < KV_MULTI_CHILDREN; i++) c->child[i].ops->wait_for_save(c->child[i].self);
}

/* true: emit now. */
static bool count_down(multi_worker *c, uint32_t id) {
    for (uint32_t i = 0; i < KV_ENGINE_REQS_MAX; i++)
        if (c->hold[i].n && c->hold[i].id == id) return --c->hold[i].n == 0;
    return true;
}

static void get_finished(void *self, const kv_id_list *finished, kv_conn_output *out) {
    multi_worker *c = self;
    kv_owner_check(c->w->env, &c->owner, c->w->cfg.index);
    for (uint32_t k = 0; k < KV_MULTI_CHILDREN; k++) {
        kv_conn_output_clear(&c->tmp);
        c->child[k].ops->get_finished(c->child[k].self, finished, &c->tmp);
        kv_id_list_move(&out->finished_recving, &c->tmp.finished_recving);
        kv_id_list_move(&out->failed_recving, &c->tmp.failed_recving);
        for (uint32_t i = 0; i < c->tmp.finished_sending.n; i++)
            if (count_down(c, c->tmp.finished_sending.id[i])) kv_id_list_add(&out->finished_sending, c->tmp.finished_sending.id[i]);
    }
    multi_worker_invariants(c);
}

static void load_errors(void *self, kv_bad_blocks *out) {
    multi_worker *c = self;
    for (uint32_t i = 0; i < KV_MULTI_CHILDREN; i++) c->child[i].ops->get_block_ids_with_load_errors(c->child[i].self, out);
}

static void clear_meta(void *self) {
    multi_worker *c = self;
    for (uint32_t i = 0; i < KV_MULTI_CHILDREN; i++) c->child[i].ops->clear_connector_metadata(c->child[i].self);
}

static void on_message(void *self, const kv_msg *m) {
    multi_worker *c = self;
    kv_owner_check(c->w->env, &c->owner, c->w->cfg.index);
    const char *family = kv_msg_family(m->kind);
    for (uint32_t i = 0; i < KV_MULTI_CHILDREN; i++)
        if (!strcmp(c->child[i].ops->name, family)) {
            c->child[i].ops->on_message(c->child[i].self, m);
            return;
        }
    /* like every actor's default branch: an unknown kind is logged, not
     * asserted (a mailbox can be posted to from outside) */
    kv_logf(c->w->env, KV_LOG_WARN, "multi worker: no child takes message %u", m->kind);
}

static const kv_conn_worker_ops multi_worker_ops = {
    .size = sizeof(kv_conn_worker_ops),
    .name = "multi",
    .bind_connector_metadata = bind,
    .start_load_kv = start_load,
    .wait_for_save = wait_for_save,
    .get_finished = get_finished,
    .get_block_ids_with_load_errors = load_errors,
    .clear_connector_metadata = clear_meta,
    .on_message = on_message,
};

kv_status kv_multi_worker_new(kv_worker *w, const kv_conn_kind kids[KV_MULTI_CHILDREN], kv_conn_worker *out) {
    multi_worker *c = kv_alloc(w->env, sizeof *c);
    if (!c) return KV_ENOMEM;
    c->w = w;
    c->owner = (kv_owner){.actor = w->main_actor, .what = "multi worker state"};
    kv_status st = KV_OK;
    for (uint32_t i = 0; i < KV_MULTI_CHILDREN && st == KV_OK; i++) st = kv_conn_worker_new(w, kids[i], &c->child[i]);
    if (st != KV_OK) {
        for (uint32_t i = 0; i < KV_MULTI_CHILDREN; i++) kv_conn_worker_free(w, &c->child[i]);
        kv_release(w->env, c);
        return st;
    }
    *out = (kv_conn_worker){.ops = &multi_worker_ops, .self = c};
    return KV_OK;
}

void kv_multi_worker_free(kv_worker *w, kv_conn_worker *cw) {
    multi_worker *c = cw->self;
    if (!c) return;
    for (uint32_t i = 0; i < KV_MULTI_CHILDREN; i++) kv_conn_worker_free(w, &c->child[i]);
    kv_release(w->env, c);
    cw->self = NULL;
    cw->ops = NULL;
}

uint32_t kv_multi_worker_state(const kv_conn_worker *cw) {
    const multi_worker *c = cw->self;
    if (!c) return 0;
    uint32_t n = 0;
    for (uint32_t i = 0; i < KV_ENGINE_REQS_MAX; i++) n += c->hold[i].n ? 1u : 0u;
    for (uint32_t i = 0; i < KV_MULTI_CHILDREN; i++) n += kv_conn_worker_state(&c->child[i]);
    return n;
}

const kv_conn_worker *kv_multi_worker_child(const kv_conn_worker *cw, uint32_t i) {
    const multi_worker *c = cw->self;
    return c && i < KV_MULTI_CHILDREN ? &c->child[i] : NULL;
}
