/* core/p2p_worker.c — worker half of the P2P connector on the worker main
 * actor (MooncakeConnectorWorker's main-thread methods).
 *
 * start_load_kv only posts: pull metas to the receiver (D), send records and
 * not-processed ids to the sender (P). Completions come back as messages
 * and wait here until get_finished swaps them out (vLLM's fetch_finished_*).
 * On D, every successful completion is verified against the bytes P must
 * have computed (INV-DATA) before the scheduler hears of it.
 *
 * Owner of everything here: the worker main actor.
 *
 * Invariants (p2p_worker_invariants, O(1), at every step's bind and after
 * every message, in every build; INV-ASSERT, core/assert.h):
 *   K1 exactly one of sender (P) and receiver (D) exists, the one of the
 *      engine's role, with its actor;
 *   K2 a step's metadata is bound only while the worker runs that step
 *      (bind .. clear within one EXECUTE): a message from our own actors
 *      never finds one bound;
 *   K3 the lists waiting for get_finished fit their bounds.
 * A completion from our own receiver names the request it pulled (its
 * d_req is its pull's); from our own sender, a request. */
#include <string.h>

#include "core/assert.h"
#include "core/p2p.h"

typedef struct p2p_worker {
    kv_owner owner;
    kv_worker *w;                 /* borrowed: the worker this half lives on */
    const kv_p2p_meta *meta;      /* bound for the current step (frozen) */
    kv_p2p_sender *sender;        /* P: owned, runs as its own actor */
    kv_p2p_receiver *receiver;    /* D: owned, runs as its own actor */
    uint32_t sender_actor, receiver_actor;
    kv_id_list finished_sending;  /* since the last get_finished */
    kv_id_list finished_recving;
    kv_id_list failed_recving;
    kv_bad_blocks invalid;
} p2p_worker;

#define PW_ASSERT(c, cond, ...) KV_ASSERT((c)->w->env, (c)->w->cfg.index, cond, __VA_ARGS__)

/* K1, K3; K2 where the caller knows whether a step is bound. */
static bool p2p_worker_invariants(const p2p_worker *c) {
    bool producer = c->w->cfg.role == KV_ROLE_PRODUCER;
    if (!PW_ASSERT(c, (c->sender != NULL) == producer && (c->receiver != NULL) == !producer &&
                          (producer ? c->sender_actor : c->receiver_actor) != KV_ACTOR_NONE,
                   "engine %u rank %u p2p worker: sender %d receiver %d on a %s", c->w->cfg.index, c->w->rank,
                   c->sender != NULL, c->receiver != NULL, producer ? "producer" : "consumer"))
        return false;
    return PW_ASSERT(c, c->finished_sending.n <= KV_ENGINE_REQS_MAX && c->finished_recving.n <= KV_ENGINE_REQS_MAX &&
                            c->failed_recving.n <= KV_ENGINE_REQS_MAX && c->invalid.n <= KV_BAD_BLOCKS_CHILD_MAX,
                     "engine %u rank %u p2p worker: %u sending, %u recving, %u failed, %u invalid", c->w->cfg.index,
                     c->w->rank, c->finished_sending.n, c->finished_recving.n, c->failed_recving.n, c->invalid.n);
}

static void bind(void *self, const void *meta) {
    p2p_worker *c = self;
    kv_owner_check(c->w->env, &c->owner, c->w->cfg.index);
    /* K1, K3 at every step's start; K2: the previous step's metadata was
     * cleared. A broken half binds nothing, so start_load (which asserts
     * a binding) posts nothing to an actor it may no longer know. */
    bool ok = p2p_worker_invariants(c) &&
              PW_ASSERT(c, c->meta == NULL && meta != NULL,
                        "engine %u rank %u p2p worker: bind over a bound step (%d) or to none (%d)", c->w->cfg.index,
                        c->w->rank, c->meta != NULL, meta == NULL);
    c->meta = ok ? meta : NULL;
}

static void start_load(void *self) {
    p2p_worker *c = self;
    kv_worker *w = c->w;
    const kv_p2p_meta *m = c->meta;
    if (!PW_ASSERT(c, m != NULL, "engine %u rank %u p2p worker: start_load_kv without metadata", w->cfg.index, w->rank))
        return;
    if (c->receiver) {
        for (uint32_t i = 0; i < m->n_recv; i++) {
            if (kv_bug_on(w->cfg.bugs, KV_BUG_RECV_MAP_RACE)) /* seed 000 (a): main writes the loop's map */
                kv_p2p_receiver_insert(c->receiver, &m->recv[i]);
            else
                kv_rt_post(w->rt, c->receiver_actor, KV_M_P2P_RECV_START, &m->recv[i], sizeof m->recv[i]);
        }
        if (m->n_recv) kv_rt_post(w->rt, c->receiver_actor, KV_M_P2P_RECV_FLUSH, NULL, 0);
    }
    if (c->sender) {
        for (uint32_t i = 0; i < m->n_send; i++) {
            /* the forward pass that finished these blocks ran: make them
             * readable for the sender's WRITEs before it learns of them */
            if (m->send[i].filled) kv_worker_expose_table(w, &m->send[i].blocks);
            kv_rt_post(w->rt, c->sender_actor, KV_M_P2P_SEND_RECORD, &m->send[i], sizeof m->send[i]);
        }
        for (uint32_t i = 0; i < m->not_processed.n; i++)
            kv_rt_post(w->rt, c->sender_actor, KV_M_P2P_NOT_PROCESSED, &m->not_processed.id[i],
                       sizeof m->not_processed.id[i]);
    }
}

static void wait_for_save(void *self) { (void)self; }

static void get_finished(void *self, const kv_id_list *finished, kv_conn_output *out) {
    p2p_worker *c = self;
    (void)finished;
    kv_owner_check(c->w->env, &c->owner, c->w->cfg.index);
    kv_id_list_move(&out->finished_sending, &c->finished_sending);
    kv_id_list_move(&out->finished_recving, &c->finished_recving);
    kv_id_list_move(&out->failed_recving, &c->failed_recving);
    /* every id was handed over: nothing reported twice, nothing kept */
    PW_ASSERT(c, c->finished_sending.n == 0 && c->finished_recving.n == 0 && c->failed_recving.n == 0,
              "engine %u rank %u p2p worker: get_finished left %u/%u/%u ids", c->w->cfg.index, c->w->rank,
              c->finished_sending.n, c->finished_recving.n, c->failed_recving.n);
}

static void load_errors(void *self, kv_bad_blocks *out) {
    p2p_worker *c = self;
    kv_bad_blocks_move(out, &c->invalid);
}

static void clear_meta(void *self) { ((p2p_worker *)self)->meta = NULL; }

/* INV-DATA: every block D received holds the bytes P computed for it. */
static void verify(p2p_worker *c, const kv_p2p_pull *p) {
    kv_worker *w = c->w;
    kv_digest_memo dm;
    kv_digest_memo_init(&dm, &p->tokens, w->cfg.block_size, p->prompt_len);
    for (uint32_t g = 0; g < p->blocks.n_groups; g++) {
        bool sliding = w->cfg.group[g].kind == KV_GROUP_SLIDING;
        uint32_t dead = sliding ? kv_sw_dead_blocks(p->prompt_len, w->cfg.group[g].window, w->cfg.block_size) : 0;
        for (uint32_t i = 0; i < p->blocks.n[g]; i++) {
            uint32_t id = p->blocks.id[g][i];
            /* outside the window P no longer holds it: no content promised */
            if (id == KV_NULL_BLOCK || p->first_pos[g] + i < dead) continue;
            w->verified_blocks++;
            uint64_t want = kv_group_digest_m(&dm, p->first_pos[g] + i, w->cfg.group[g].kind == KV_GROUP_MAMBA);
            if (kv_verify_block_digest(kv_worker_kv(w, g, id), want, g, w->head_lo, w->head_hi, w->cfg.head_bytes))
                continue;
            kv_violate(w->env, KV_INV_DATA, w->cfg.index, p->d_req,
                       "request %u group %u block %u (position %u) rank %u: bytes differ from P's",
                       p->d_req, g, id, p->first_pos[g] + i, w->rank);
            return;
        }
    }
}

static void on_recv_done(p2p_worker *c, const kv_m_recv_done *d) {
    /* our own receiver's report of the pull it made for this request */
    if (!PW_ASSERT(c, d->d_req == d->pull.d_req && d->failed <= 1 && d->pull.blocks.n_groups <= KV_GROUPS_MAX,
                   "engine %u rank %u p2p worker: RECV_DONE for %u about pull %u (failed %u, %u groups)",
                   c->w->cfg.index, c->w->rank, d->d_req, d->pull.d_req, d->failed, d->pull.blocks.n_groups))
        return;
    if (!d->failed) {
        kv_worker_absorb_table(c->w, &d->pull.blocks); /* every WRITE of the pull has landed */
        verify(c, &d->pull);
    } else if (d->pull.blocks.n_groups > 1 || kv_blocks_count_real(&d->pull.blocks) > KV_BAD_BLOCKS_CHILD_MAX - c->invalid.n) {
        /* HMA: request-level. So is a failure whose blocks do not all fit
         * the step's invalid-block list: a block left out would be reported
         * as received, and decoded. */
        kv_id_list_add(&c->failed_recving, d->d_req);
    } else {
        for (uint32_t i = 0; i < d->pull.blocks.n[0]; i++)
            if (d->pull.blocks.id[0][i] != KV_NULL_BLOCK)
                c->invalid.e[c->invalid.n++] = (kv_bad_block){0, d->pull.blocks.id[0][i]};
    }
    kv_id_list_add(&c->finished_recving, d->d_req);
}

static void on_message(void *self, const kv_msg *m) {
    p2p_worker *c = self;
    kv_owner_check(c->w->env, &c->owner, c->w->cfg.index);
    /* K2: between steps */
    PW_ASSERT(c, c->meta == NULL, "engine %u rank %u p2p worker: message %s while a step is bound", c->w->cfg.index,
              c->w->rank, kv_msg_kind_name(m->kind));
    switch (m->kind) {
    case KV_M_P2P_RECV_DONE: on_recv_done(c, m->payload); break;
    case KV_M_P2P_SEND_DONE: {
        uint32_t id = ((const kv_m_send_done *)m->payload)->p_req;
        /* the sender reports only entries whose request it learned */
        if (!PW_ASSERT(c, c->sender && id != KV_REQ_NONE, "engine %u rank %u p2p worker: SEND_DONE for %u (sender %d)",
                       c->w->cfg.index, c->w->rank, id, c->sender != NULL))
            break;
        kv_id_list_add(&c->finished_sending, id);
        break;
    }
    default: kv_logf(c->w->env, KV_LOG_WARN, "p2p worker: unexpected message %u", m->kind);
    }
    p2p_worker_invariants(c);
}

static const kv_conn_worker_ops p2p_worker_ops = {
    .size = sizeof(kv_conn_worker_ops),
    .name = "p2p",
    .bind_connector_metadata = bind,
    .start_load_kv = start_load,
    .wait_for_save = wait_for_save,
    .get_finished = get_finished,
    .get_block_ids_with_load_errors = load_errors,
    .clear_connector_metadata = clear_meta,
    .on_message = on_message,
};

kv_status kv_p2p_worker_new(kv_worker *w, kv_conn_worker *out) {
    p2p_worker *c = kv_alloc(w->env, sizeof *c);
    if (!c) return KV_ENOMEM;
    c->w = w;
    c->owner = (kv_owner){.actor = w->main_actor, .what = "p2p worker state"};
    kv_status st = w->cfg.role == KV_ROLE_PRODUCER
                       ? kv_p2p_sender_new(w, &c->sender, &c->sender_actor)
                       : kv_p2p_receiver_new(w, &c->receiver, &c->receiver_actor);
    if (st != KV_OK) {
        kv_release(w->env, c);
        return st;
    }
    *out = (kv_conn_worker){.ops = &p2p_worker_ops, .self = c};
    p2p_worker_invariants(c); /* K1 from the start */
    return KV_OK;
}

void kv_p2p_worker_free(kv_worker *w, kv_conn_worker *cw) {
    p2p_worker *c = cw->self;
    if (!c) return;
    kv_p2p_sender_free(c->sender);
    kv_p2p_receiver_free(c->receiver);
    kv_release(w->env, c);
    cw->self = NULL;
    cw->ops = NULL;
}

uint32_t kv_p2p_worker_state(const kv_conn_worker *cw) {
    const p2p_worker *c = cw->self;
    if (!c) return 0;
    uint32_t n = c->finished_sending.n + c->finished_recving.n + c->failed_recving.n + c->invalid.n;
    if (c->sender) n += kv_p2p_sender_state(c->sender);
    if (c->receiver) n += kv_p2p_receiver_state(c->receiver);
    return n;
}

bool kv_p2p_worker_saturated(const kv_conn_worker *cw) {
    const p2p_worker *c = cw->self;
    if (!c) return false;
    return c->sender ? kv_p2p_sender_saturated(c->sender) : c->receiver && kv_p2p_receiver_saturated(c->receiver);
}

uint32_t kv_p2p_worker_actor(const kv_conn_worker *cw) {
    const p2p_worker *c = cw->self;
    if (!c) return KV_ACTOR_NONE;
    return c->sender ? c->sender_actor : c->receiver_actor;
}
