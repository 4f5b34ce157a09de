/* core/p2p_receiver.c — D's receiver loop (vLLM's receiver_loop) as an actor.
 *
 * Owns: pull metas (one per request being pulled), batches (one pull message
 * to every paired P rank), remote agents (P engine -> worker addresses).
 * Nobody else touches them: the worker main posts RECV_START/RECV_FLUSH.
 *
 * Per task (batch x P rank):
 *
 *   SENT --resp CONTINUE--> SENT (timer re-armed)
 *     |--resp FINISH-------> DONE
 *     |--resp ERROR--------> DONE  + fail every request of the batch
 *     |--RCVTIMEO / reset--> DONE  + fail every request of the batch
 *
 * Per request: count = paired P ranks; each ok decrements; at 0 it is
 * reported once, but only when it holds local blocks (seed 004: an empty pull
 * exists only to let P free). A failure is sticky and is reported once, with
 * a load error, again only when the request holds blocks (seed 000 (b): the
 * original returned before reporting and leaked D's blocks), and only once
 * every task of its batch is done, so no P rank can still write into blocks
 * that D frees on the report.
 * Every task writes through its own write grants (grant_task: per group a
 * window over the batch's blocks, an unguessable key, bound to that P
 * rank's peer), revoked when the task ends (before a FINISH or ERROR is
 * processed) and when the batch is released, in both cases before any of
 * its requests is reported, so a late WRITE from P for a batch D gave up on
 * fails instead of landing in reused blocks.
 * Edge -> function: RECV_START on_start; FLUSH on_flush; BOOT_REPLY
 * on_boot_reply; resp on_resp; timer on_timeout; PEER_DOWN on_peer_down.
 * Invariant: a request is reported at most once (reported flag), and every
 * batch whose tasks are all DONE is released.
 *
 * Numbered (receiver_invariants: R1, O(1), on entry to and return from every
 * message in every build; receiver_walk: R2-R7 on return in checked builds;
 * INV-ASSERT, core/assert.h):
 *   R1 n_req <= RCV_REQS_MAX and n_staged <= n_req;
 *   R2 every staged index is a used request not yet in a batch;
 *   R3 a used batch: n_reqs <= KV_PULL_REQS_MAX, n_tasks <= KV_TP_MAX,
 *      its engine < KV_ENGINES_MAX; each of its requests is used and names
 *      this batch; a batch still waiting for the bootstrap has no tasks; a
 *      batch with tasks has one not DONE (all DONE: it is released); a task
 *      holds at most one grant per group, and a DONE task none;
 *   R4 every used request is staged or in exactly the batch it names (the
 *      table leaks no slot: used == staged + the batches' requests);
 *   R5 a request's count of P ranks yet to confirm is <= its total, and
 *      total <= KV_TP_MAX;
 *   R6 a known agent has 1..KV_TP_MAX ranks;
 *   R7 timer and batch ids only grow (a stale timer never matches).
 * Preconditions name the rest: a request is reported at most once, a task
 * is done once, a batch is released once. Messages from our own worker
 * (RECV_START/FLUSH) and our own timers are asserted on; P's responses and
 * the bootstrap's replies come from other processes and are validated. */
#include <string.h>

#include "core/assert.h"
#include "core/p2p.h"

#define RCV_REQS_MAX (KV_ENGINE_REQS_MAX * 2u)
#define RCV_BATCHES_MAX KV_RECV_BATCHES_MAX

typedef struct rcv_req {
    bool used;
    bool failed;     /* sticky: later successes are ignored */
    bool reported;   /* finished_recving sent to the worker main */
    uint32_t count;  /* P ranks yet to confirm */
    uint32_t total;
    uint32_t batch;  /* batch slot, or UINT32_MAX while staged */
    kv_p2p_pull m;
} rcv_req;

typedef struct rcv_task {
    uint32_t p_rank;
    kvt_peer peer;
    bool done;
    uint32_t timer;  /* id of the one live timer; stale ones are ignored */
    uint32_t n_grants;                /* live ones among grant[] */
    uint32_t grant[KV_GROUPS_MAX];    /* per group: its grant id, KVT_NONE if none */
    kvt_desc desc[KV_GROUPS_MAX];     /* what P writes through (sent in the pull) */
} rcv_task;

typedef struct rcv_batch {
    bool used;
    bool waiting_boot;
    uint32_t id;     /* echoed by P in every response */
    uint32_t engine;
    uint32_t n_reqs;
    uint32_t req[KV_PULL_REQS_MAX]; /* rcv_req slots */
    uint32_t n_tasks;
    rcv_task task[KV_TP_MAX];
} rcv_batch;

typedef struct rcv_agent {
    bool known;
    bool querying;
    uint32_t tp;
    kvt_addr addr[KV_TP_MAX];
} rcv_agent;

typedef struct kv_m_rcv_timeout {
    uint32_t batch, task, gen;
} kv_m_rcv_timeout;

struct kv_p2p_receiver {
    kv_owner owner;
    kv_worker *w;           /* borrowed; immutable fields only */
    uint32_t actor;
    kvt_ep ep;
    kvt_addr addr;
    uint32_t n_req;         /* 2 x the engine's reqs_max, at most RCV_REQS_MAX */
    rcv_req *req;           /* [n_req] */
    rcv_batch batch[RCV_BATCHES_MAX];
    uint32_t next_batch_id;
    uint32_t next_timer;    /* timer ids never repeat, even across slot reuse */
    rcv_agent agent[KV_ENGINES_MAX];
    uint32_t *staged;       /* [n_req] */
    uint32_t n_staged;
    kv_wire_msg *msg;       /* scratch (env): encode and decode */
    uint8_t *buf;           /* scratch (env): KV_WIRE_MAX bytes */
};

#define RCV_ENV(r) ((r)->w->env)
#define RCV_BUG(r, b) kv_bug_on((r)->w->cfg.bugs, (b))
#define RCV_ASSERT(r, cond, ...) KV_ASSERT(RCV_ENV(r), (r)->w->cfg.index, cond, __VA_ARGS__)
#define RCV_ASSERT_CHECKED(r, cond, ...) KV_ASSERT_CHECKED(RCV_ENV(r), (r)->w->cfg.index, cond, __VA_ARGS__)

static void report(kv_p2p_receiver *r, rcv_req *q, bool failed) {
    /* finished_recving once per request: a second report would free D's
     * blocks twice (or a reused slot's) */
    if (!RCV_ASSERT(r, q->used && !q->reported, "engine %u rank %u receiver: request %u reported again (failed %d)",
                    r->w->cfg.index, r->w->rank, q->m.d_req, (int)failed))
        return;
    kv_m_recv_done d = {.d_req = q->m.d_req, .failed = failed ? 1 : 0, .pull = q->m};
    q->reported = true;
    kv_rt_post(r->w->rt, r->w->main_actor, KV_M_P2P_RECV_DONE, &d, sizeof d);
}

/* _handle_failed_recv for one request: the failure is sticky. It is
 * reported (with a load error, only when the request holds blocks) once no
 * task of its batch can still be writing: a P rank that has not answered
 * yet may still WRITE into these blocks, and D frees them on the report.
 * (Reporting at the first failing rank, as the original does, lets another
 * rank's late WRITE land in blocks already given to a new request.) */
static void fail_req(kv_p2p_receiver *r, rcv_req *q) {
    (void)r;
    if (q->used) q->failed = true;
}

/* No task is outstanding for q: report its failure now. */
static void fail_now(kv_p2p_receiver *r, rcv_req *q) {
    fail_req(r, q);
    if (q->used && !q->reported && kv_blocks_any(&q->m.blocks)) report(r, q, true);
}

static void fail_batch(kv_p2p_receiver *r, rcv_batch *b) {
    for (uint32_t i = 0; i < b->n_reqs; i++) fail_req(r, &r->req[b->req[i]]);
}

/* Grants (transport.h, "write capabilities"): each task (batch x P rank)
 * gives its P rank, and only the peer D reaches it by, a write grant per
 * group: a window from the batch's lowest to one past its highest block of
 * that group, with an unguessable key, sent in the pull. D's whole regions
 * are never writable. A task's grants are revoked when it ends and, at the
 * latest, when its batch is released, before any of the batch's requests is
 * reported, so a late or stray WRITE (a pull D gave up on, a P rank that
 * already answered) fails at delivery instead of landing in blocks D has
 * since freed and handed to another request. The original exposed one
 * region for the worker's life. */
static void window_of(const kv_p2p_receiver *r, const rcv_batch *b, uint32_t g, uint64_t *off, uint64_t *len) {
    uint32_t lo = UINT32_MAX, hi = 0;
    for (uint32_t i = 0; i < b->n_reqs; i++) {
        const kv_block_table *t = &r->req[b->req[i]].m.blocks;
        for (uint32_t k = 0; g < t->n_groups && k < t->n[g]; k++) {
            uint32_t id = t->id[g][k];
            if (id == KV_NULL_BLOCK) continue;
            if (id < lo) lo = id;
            if (id + 1u > hi) hi = id + 1u;
        }
    }
    *off = lo < hi ? (uint64_t)lo * r->w->block_bytes : 0;
    *len = lo < hi ? (uint64_t)(hi - lo) * r->w->block_bytes : 0;
}

static void revoke_task(kv_p2p_receiver *r, rcv_task *t) {
    for (uint32_t g = 0; g < KV_GROUPS_MAX && t->n_grants; g++) {
        if (t->grant[g] == KVT_NONE) continue;
        kvt_revoke(r->w->t, t->grant[g]);
        t->grant[g] = KVT_NONE;
        t->n_grants--;
    }
    memset(t->desc, 0, sizeof t->desc);
}

static kv_status grant_task(kv_p2p_receiver *r, rcv_batch *b, rcv_task *t) {
    kv_worker *w = r->w;
    for (uint32_t g = 0; g < KV_GROUPS_MAX; g++) {
        t->grant[g] = KVT_NONE;
        t->desc[g] = (kvt_desc){.region = KVT_NONE};
    }
    t->n_grants = 0;
    for (uint32_t g = 0; g < w->cfg.n_groups; g++) {
        uint64_t off, len;
        window_of(r, b, g, &off, &len);
        if (!len) continue; /* no block of this group: nothing to write */
        kv_status st = kvt_grant(w->t, w->region[g], r->ep, t->peer, off, len, &t->grant[g], &t->desc[g]);
        if (st != KV_OK) {
            t->grant[g] = KVT_NONE;
            revoke_task(r, t);
            return st;
        }
        t->n_grants++;
    }
    return KV_OK;
}

static void revoke_batch(kv_p2p_receiver *r, rcv_batch *b) {
    for (uint32_t k = 0; k < b->n_tasks && k < KV_TP_MAX; k++) revoke_task(r, &b->task[k]);
}

/* Every task of b is done, or given up: its grants are revoked first, so
 * nothing can write into its requests' blocks any more. A request that is
 * not reported yet failed (or P never answered for it); it is reported now.
 * The original (err_early_return) reported none. */
static void release_batch(kv_p2p_receiver *r, rcv_batch *b) {
    if (!RCV_ASSERT(r, b->used && b->n_reqs <= KV_PULL_REQS_MAX, "engine %u rank %u receiver: release of batch %u (used %d, %u requests)",
                    r->w->cfg.index, r->w->rank, b->id, (int)b->used, b->n_reqs))
        return;
    revoke_batch(r, b);
    for (uint32_t i = 0; i < b->n_reqs; i++) {
        rcv_req *q = &r->req[b->req[i]];
        if (!q->reported && !RCV_BUG(r, KV_BUG_ERR_EARLY_RETURN)) fail_now(r, q);
        memset(q, 0, sizeof *q);
    }
    memset(b, 0, sizeof *b);
}

static void task_done(kv_p2p_receiver *r, rcv_batch *b, rcv_task *t) {
    /* a task ends once: its P rank's FINISH, ERROR, timeout or reset */
    if (!RCV_ASSERT(r, b->used && !t->done, "engine %u rank %u receiver: batch %u task of P rank %u done twice",
                    r->w->cfg.index, r->w->rank, b->id, t->p_rank))
        return;
    t->done = true;
    revoke_task(r, t);
    for (uint32_t i = 0; i < b->n_tasks; i++)
        if (!b->task[i].done) return;
    release_batch(r, b);
}

/* An exception, RCVTIMEO or reset on one task. */
static void task_failed(kv_p2p_receiver *r, rcv_batch *b, rcv_task *t) {
    if (!RCV_BUG(r, KV_BUG_ERR_EARLY_RETURN)) fail_batch(r, b);
    task_done(r, b, t);
}

void kv_p2p_receiver_insert(kv_p2p_receiver *r, const kv_p2p_pull *p) {
    kv_owner_check(RCV_ENV(r), &r->owner, r->w->cfg.index);
    /* our own scheduler's pull meta (sw_clip of our own table): D's groups;
     * the remote engine and bootstrap came from the proxy and are checked
     * at the flush */
    if (!RCV_ASSERT(r, p->blocks.n_groups == r->w->cfg.n_groups || !kv_blocks_any(&p->blocks),
                    "engine %u rank %u receiver: pull of request %u with %u groups", r->w->cfg.index, r->w->rank,
                    p->d_req, p->blocks.n_groups))
        return;
    for (uint32_t i = 0; i < r->n_req; i++) {
        rcv_req *q = &r->req[i];
        if (q->used) continue;
        /* staged slots are used ones: a free slot leaves room to stage */
        if (!RCV_ASSERT(r, r->n_staged < r->n_req, "engine %u rank %u receiver: %u staged of %u with slot %u free",
                        r->w->cfg.index, r->w->rank, r->n_staged, r->n_req, i))
            return;
        memset(q, 0, sizeof *q);
        q->used = true;
        q->batch = UINT32_MAX;
        q->m = *p;
        r->staged[r->n_staged++] = i;
        return;
    }
    kv_logf(RCV_ENV(r), KV_LOG_ERROR, "receiver: pull table full; request %u fails", p->d_req);
    if (kv_blocks_any(&p->blocks)) {
        kv_m_recv_done d = {.d_req = p->d_req, .failed = 1, .pull = *p};
        kv_rt_post(r->w->rt, r->w->main_actor, KV_M_P2P_RECV_DONE, &d, sizeof d);
    }
}

static void arm_timer(kv_p2p_receiver *r, uint32_t slot, uint32_t ti) {
    if (!RCV_ASSERT(r, slot < RCV_BATCHES_MAX && ti < r->batch[slot].n_tasks && !r->batch[slot].task[ti].done,
                    "engine %u rank %u receiver: timer for batch slot %u task %u", r->w->cfg.index, r->w->rank, slot, ti))
        return;
    rcv_task *t = &r->batch[slot].task[ti];
    t->timer = ++r->next_timer;
    kv_m_rcv_timeout to = {.batch = slot, .task = ti, .gen = t->timer};
    kv_rt_post_at(r->w->rt, r->actor, kv_now_ns(RCV_ENV(r)) + r->w->cfg.recv_timeout_ns,
                  KV_M_P2P_RECV_TIMEOUT, &to, sizeof to);
}

static kv_status send_meta(kv_p2p_receiver *r, rcv_batch *b, rcv_task *t) {
    kv_worker *w = r->w;
    kv_wire_xfer_meta *m = &r->msg->u.meta;
    kv_wire_msg_reset(r->msg, KV_WIRE_XFER_META);
    m->d_engine = w->cfg.index;
    m->d_tp_size = w->cfg.tp;
    m->d_tp_rank = w->rank;
    m->batch = b->id;
    m->d_addr = r->addr;
    m->n_groups = w->cfg.n_groups;
    kv_status st = kvt_connect(w->t, r->ep, &r->agent[b->engine].addr[t->p_rank], &t->peer);
    if (st == KV_OK) st = grant_task(r, b, t);
    if (st != KV_OK) {
        kv_logf(RCV_ENV(r), KV_LOG_WARN, "receiver: pull batch %u to P%u rank %u: no peer or grant (%s)", b->id,
                b->engine, t->p_rank, kv_status_str(st));
        return st;
    }
    for (uint32_t g = 0; g < w->cfg.n_groups; g++) m->region[g] = t->desc[g];
    m->block_bytes = w->block_bytes;
    m->n_reqs = b->n_reqs;
    for (uint32_t i = 0; i < b->n_reqs; i++) {
        const rcv_req *q = &r->req[b->req[i]];
        m->req[i] = (kv_wire_req_blocks){.d_req = q->m.d_req, .transfer_id = q->m.transfer_id,
                                         .blocks = q->m.blocks};
    }
    size_t len = 0;
    st = kv_wire_encode(r->msg, r->buf, KV_WIRE_MAX, &len);
    /* our own pull (at most KV_PULL_REQS_MAX tables, well under KV_WIRE_MAX)
     * always encodes, and decodes back as sent; a failure to reach P below
     * is the peer's, and fails the task */
    if (!RCV_ASSERT(r, st == KV_OK && kv_wire_encoded_ok(r->msg, r->buf, len),
                    "engine %u rank %u receiver: pull batch %u (%u requests): encode %s, %zu bytes", w->cfg.index,
                    w->rank, b->id, b->n_reqs, kv_status_str(st), len))
        return st == KV_OK ? KV_EPROTO : st;
    if (st == KV_OK) st = kvt_send_ctrl(w->t, r->ep, t->peer, r->buf, (uint32_t)len);
    kv_logf(RCV_ENV(r), KV_LOG_INFO, "receiver: pull batch %u to P%u rank %u: %u requests (%s)", b->id, b->engine,
            t->p_rank, b->n_reqs, kv_status_str(st));
    return st;
}

/* receive_kv: one task per paired P rank, all sharing the batch's metas. */
static void receive_kv(kv_p2p_receiver *r, uint32_t slot) {
    rcv_batch *b = &r->batch[slot];
    /* a batch starts once: used, its engine known, nothing granted or sent */
    if (!RCV_ASSERT(r, b->used && !b->waiting_boot && b->engine < KV_ENGINES_MAX && r->agent[b->engine].known &&
                           b->n_tasks == 0,
                    "engine %u rank %u receiver: batch %u starts (used %d, waiting_boot %d, engine %u, %u tasks)",
                    r->w->cfg.index, r->w->rank, b->id, (int)b->used, (int)b->waiting_boot, b->engine, b->n_tasks))
        return;
    rcv_agent *a = &r->agent[b->engine];
    uint32_t ranks[KV_TP_MAX];
    b->n_tasks = kv_p2p_paired_ranks(r->w->cfg.tp, r->w->rank, a->tp, ranks);
    for (uint32_t i = 0; i < b->n_reqs; i++) {
        rcv_req *q = &r->req[b->req[i]];
        q->count = q->total = b->n_tasks;
    }
    for (uint32_t i = 0; i < b->n_tasks; i++) {
        b->task[i] = (rcv_task){.p_rank = ranks[i], .peer = KVT_NONE};
        for (uint32_t g = 0; g < KV_GROUPS_MAX; g++) b->task[i].grant[g] = KVT_NONE;
    }
    for (uint32_t i = 0; i < b->n_tasks; i++) {
        rcv_task *t = &b->task[i];
        if (send_meta(r, b, t) != KV_OK) {
            kv_logf(RCV_ENV(r), KV_LOG_WARN, "receiver: pull to P%u rank %u failed to send", b->engine, t->p_rank);
            task_failed(r, b, t);
            if (!b->used) return;
            continue;
        }
        arm_timer(r, slot, i);
    }
}

static void query_bootstrap(kv_p2p_receiver *r, uint32_t engine) {
    if (!RCV_ASSERT(r, engine < KV_ENGINES_MAX, "engine %u rank %u receiver: query for engine %u", r->w->cfg.index,
                    r->w->rank, engine))
        return;
    rcv_agent *a = &r->agent[engine];
    if (a->querying) return;
    a->querying = true;
    kv_m_boot_query q = {.engine = engine, .reply_to = r->actor};
    kv_rt_post(r->w->rt, r->w->cfg.bootstrap_actor, KV_M_BOOT_QUERY, &q, sizeof q);
}

static uint32_t new_batch(kv_p2p_receiver *r, uint32_t engine) {
    for (uint32_t i = 0; i < RCV_BATCHES_MAX; i++) {
        if (r->batch[i].used) continue;
        memset(&r->batch[i], 0, sizeof r->batch[i]);
        r->batch[i].used = true;
        r->batch[i].id = ++r->next_batch_id;
        r->batch[i].engine = engine;
        return i;
    }
    return UINT32_MAX;
}

static void start_batch(kv_p2p_receiver *r, uint32_t slot) {
    rcv_batch *b = &r->batch[slot];
    /* on_flush checked every remote engine before batching it */
    if (!RCV_ASSERT(r, b->used && b->engine < KV_ENGINES_MAX && b->n_reqs > 0,
                    "engine %u rank %u receiver: batch %u for engine %u with %u requests", r->w->cfg.index, r->w->rank,
                    b->id, b->engine, b->n_reqs))
        return;
    if (r->agent[b->engine].known) {
        receive_kv(r, slot);
        return;
    }
    b->waiting_boot = true;
    query_bootstrap(r, b->engine);
}

/* _start_load_kv: group staged metas by remote engine into batches. */
static void on_flush(kv_p2p_receiver *r) {
    if (!RCV_ASSERT(r, r->n_staged <= r->n_req, "engine %u rank %u receiver: %u staged of %u", r->w->cfg.index,
                    r->w->rank, r->n_staged, r->n_req))
        return;
    uint32_t open[KV_ENGINES_MAX];
    for (uint32_t e = 0; e < KV_ENGINES_MAX; e++) open[e] = UINT32_MAX;
    for (uint32_t i = 0; i < r->n_staged; i++) {
        rcv_req *q = &r->req[r->staged[i]];
        uint32_t e = q->m.remote_engine;
        if (e >= KV_ENGINES_MAX) {
            fail_now(r, q);
            memset(q, 0, sizeof *q);
            continue;
        }
        if (open[e] == UINT32_MAX || r->batch[open[e]].n_reqs == KV_PULL_REQS_MAX) open[e] = new_batch(r, e);
        if (open[e] == UINT32_MAX) {
            kv_logf(RCV_ENV(r), KV_LOG_ERROR, "receiver: no free batch; request %u fails", q->m.d_req);
            fail_now(r, q);
            memset(q, 0, sizeof *q);
            continue;
        }
        rcv_batch *b = &r->batch[open[e]];
        if (!RCV_ASSERT(r, b->n_reqs < KV_PULL_REQS_MAX && q->used && q->batch == UINT32_MAX,
                        "engine %u rank %u receiver: request %u into batch %u (%u requests, in batch %u)",
                        r->w->cfg.index, r->w->rank, q->m.d_req, b->id, b->n_reqs, q->batch))
            continue;
        q->batch = open[e];
        b->req[b->n_reqs++] = r->staged[i];
    }
    r->n_staged = 0;
    for (uint32_t i = 0; i < RCV_BATCHES_MAX; i++)
        if (r->batch[i].used && !r->batch[i].n_tasks && !r->batch[i].waiting_boot) start_batch(r, i);
}

static void on_boot_reply(kv_p2p_receiver *r, const kv_wire_boot *rep) {
    if (rep->engine >= KV_ENGINES_MAX) return;
    rcv_agent *a = &r->agent[rep->engine];
    a->querying = false;
    if (rep->found && rep->tp_size && rep->tp_size <= KV_TP_MAX) {
        a->known = true;
        a->tp = rep->tp_size;
        memcpy(a->addr, rep->addr, sizeof a->addr);
    }
    for (uint32_t i = 0; i < RCV_BATCHES_MAX; i++) {
        rcv_batch *b = &r->batch[i];
        if (!b->used || !b->waiting_boot || b->engine != rep->engine) continue;
        b->waiting_boot = false;
        if (a->known) {
            receive_kv(r, i);
            continue;
        }
        kv_logf(RCV_ENV(r), KV_LOG_WARN, "receiver: engine %u unknown to bootstrap", rep->engine);
        if (!RCV_BUG(r, KV_BUG_ERR_EARLY_RETURN)) fail_batch(r, b); /* original returned bare */
        release_batch(r, b);
    }
}

static rcv_req *batch_req(kv_p2p_receiver *r, rcv_batch *b, uint32_t d_req) {
    for (uint32_t i = 0; i < b->n_reqs; i++)
        if (r->req[b->req[i]].m.d_req == d_req) return &r->req[b->req[i]];
    return NULL;
}

/* process_pulling_result */
static void process_result(kv_p2p_receiver *r, rcv_batch *b, const kv_wire_xfer_resp *resp) {
    for (uint32_t i = 0; i < resp->n_ok; i++) {
        rcv_req *q = batch_req(r, b, resp->ok[i]);
        if (!q || q->failed || q->count == 0) continue;
        /* our count, whatever P's lists say (they are validated, not trusted) */
        if (!RCV_ASSERT(r, q->count <= q->total && q->total <= KV_TP_MAX, "engine %u rank %u receiver: request %u count %u of %u",
                        r->w->cfg.index, r->w->rank, q->m.d_req, q->count, q->total))
            continue;
        if (--q->count) continue;
        bool has_blocks = kv_blocks_any(&q->m.blocks);
        if (has_blocks || RCV_BUG(r, KV_BUG_EMPTY_PULL_COMPLETION)) report(r, q, false);
    }
    for (uint32_t i = 0; i < resp->n_err; i++) {
        rcv_req *q = batch_req(r, b, resp->err[i]);
        if (q) fail_req(r, q);
    }
}

/* P's error text, quoted as it came on the wire (vLLM logs the response's
 * err_msg): a peer's bytes, so anything outside printable ASCII becomes '?'
 * and one log line stays one line. */
static void quote_err(kv_p2p_receiver *r, const rcv_batch *b, const kv_wire_xfer_resp *resp) {
    if (!resp->err_msg[0]) return;
    char text[sizeof resp->err_msg];
    kv_wire_printable(resp->err_msg, sizeof resp->err_msg, text, sizeof text);
    kv_logf(RCV_ENV(r), KV_LOG_INFO, "receiver: batch %u rank %u %s: \"%s\"", b->id, resp->p_tp_rank,
            resp->status == KV_XFER_ERROR ? "ERROR" : resp->status == KV_XFER_FINISH ? "FINISH" : "CONTINUE", text);
}

static void on_resp(kv_p2p_receiver *r, const kv_wire_xfer_resp *resp) {
    for (uint32_t i = 0; i < RCV_BATCHES_MAX; i++) {
        rcv_batch *b = &r->batch[i];
        if (!b->used || b->id != resp->batch) continue;
        for (uint32_t k = 0; k < b->n_tasks; k++) {
            rcv_task *t = &b->task[k];
            if (t->p_rank != resp->p_tp_rank || t->done) continue;
            quote_err(r, b, resp);
            /* P rank done with this batch: its grants go before any of
             * the batch's requests is reported below */
            if (resp->status != KV_XFER_CONTINUE) revoke_task(r, t);
            if (resp->status == KV_XFER_ERROR) {
                if (RCV_BUG(r, KV_BUG_ERR_EARLY_RETURN)) { /* seed 000 (b): return before reporting */
                    task_done(r, b, t);
                    return;
                }
                process_result(r, b, resp);
                fail_batch(r, b);
                task_done(r, b, t);
                return;
            }
            process_result(r, b, resp);
            if (resp->status == KV_XFER_FINISH) task_done(r, b, t);
            else arm_timer(r, i, k);
            return;
        }
    }
    kv_logf(RCV_ENV(r), KV_LOG_INFO, "receiver: response for unknown batch %u", resp->batch);
}

static void on_timeout(kv_p2p_receiver *r, const kv_m_rcv_timeout *to) {
    /* our own timer: a batch slot we armed, an id we gave out */
    if (!RCV_ASSERT(r, to->batch < RCV_BATCHES_MAX && to->task < KV_TP_MAX && to->gen <= r->next_timer,
                    "engine %u rank %u receiver: timer batch %u task %u gen %u (next %u)", r->w->cfg.index,
                    r->w->rank, to->batch, to->task, to->gen, r->next_timer))
        return;
    rcv_batch *b = &r->batch[to->batch];
    if (!b->used || to->task >= b->n_tasks) return;
    rcv_task *t = &b->task[to->task];
    if (t->done || t->timer != to->gen) return;
    kv_logf(RCV_ENV(r), KV_LOG_INFO, "receiver: batch %u rank %u timed out", b->id, t->p_rank);
    task_failed(r, b, t);
}

static void on_event(kv_p2p_receiver *r, const kv_msg *m) {
    const kvt_event *ev = m->payload;
    if (ev->kind == KVT_EV_PEER_DOWN) {
        for (uint32_t i = 0; i < RCV_BATCHES_MAX; i++)
            for (uint32_t k = 0; k < r->batch[i].n_tasks && r->batch[i].used; k++)
                if (!r->batch[i].task[k].done && r->batch[i].task[k].peer == ev->peer)
                    task_failed(r, &r->batch[i], &r->batch[i].task[k]);
        return;
    }
    if (ev->kind != KVT_EV_CTRL) return;
    const uint8_t *bytes = (const uint8_t *)m->payload + sizeof *ev;
    if (kv_wire_decode(bytes, ev->len, r->msg) != KV_OK || r->msg->type != KV_WIRE_XFER_RESP) {
        kv_logf(RCV_ENV(r), KV_LOG_WARN, "receiver: malformed control message dropped");
        return;
    }
    on_resp(r, &r->msg->u.resp);
}

/* R1: O(1). */
static bool receiver_invariants(const kv_p2p_receiver *r) {
    return RCV_ASSERT(r, r->n_req <= RCV_REQS_MAX && r->n_staged <= r->n_req,
                      "engine %u rank %u receiver: %u request slots, %u staged", r->w->cfg.index, r->w->rank, r->n_req,
                      r->n_staged);
}

/* R3 for batch slot i; counts its requests into *in_batches. */
static bool receiver_walk_batch(const kv_p2p_receiver *r, uint32_t i, uint32_t *in_batches) {
    const rcv_batch *b = &r->batch[i];
    uint32_t open = 0, stray = 0;
    for (uint32_t k = 0; k < b->n_tasks && k < KV_TP_MAX; k++) {
        const rcv_task *t = &b->task[k];
        open += !t->done;
        stray += t->n_grants > r->w->cfg.n_groups || (t->done && t->n_grants);
    }
    if (!RCV_ASSERT_CHECKED(r, b->n_reqs <= KV_PULL_REQS_MAX && b->n_tasks <= KV_TP_MAX && b->engine < KV_ENGINES_MAX &&
                                   b->id <= r->next_batch_id && (!b->waiting_boot || !b->n_tasks) &&
                                   (!b->n_tasks || open) && !stray,
                            "engine %u rank %u receiver: batch slot %u id %u engine %u: %u requests, %u tasks (%u open), "
                            "%u tasks holding grants they should not, waiting_boot %d",
                            r->w->cfg.index, r->w->rank, i, b->id, b->engine, b->n_reqs, b->n_tasks, open, stray,
                            (int)b->waiting_boot))
        return false;
    for (uint32_t k = 0; k < b->n_reqs; k++) {
        uint32_t q = b->req[k];
        if (!RCV_ASSERT_CHECKED(r, q < r->n_req && r->req[q].used && r->req[q].batch == i,
                                "engine %u rank %u receiver: batch %u request %u is slot %u (used %d, batch %u)",
                                r->w->cfg.index, r->w->rank, b->id, k, q, q < r->n_req ? (int)r->req[q].used : -1,
                                q < r->n_req ? r->req[q].batch : 0u))
            return false;
    }
    *in_batches += b->n_reqs;
    return true;
}

/* R2-R7: the whole receiver. Checked builds. */
static bool receiver_walk(const kv_p2p_receiver *r) {
    uint32_t in_batches = 0, used = 0;
    for (uint32_t i = 0; i < r->n_staged; i++) { /* R2 */
        uint32_t q = r->staged[i];
        if (!RCV_ASSERT_CHECKED(r, q < r->n_req && r->req[q].used && r->req[q].batch == UINT32_MAX,
                                "engine %u rank %u receiver: staged[%u] = slot %u", r->w->cfg.index, r->w->rank, i, q))
            return false;
    }
    for (uint32_t i = 0; i < RCV_BATCHES_MAX; i++) /* R3 */
        if (r->batch[i].used && !receiver_walk_batch(r, i, &in_batches)) return false;
    for (uint32_t i = 0; i < r->n_req; i++) { /* R4, R5 */
        const rcv_req *q = &r->req[i];
        if (!q->used) continue;
        used++;
        if (!RCV_ASSERT_CHECKED(r, (q->batch == UINT32_MAX || (q->batch < RCV_BATCHES_MAX && r->batch[q->batch].used)) &&
                                       q->count <= q->total && q->total <= KV_TP_MAX,
                                "engine %u rank %u receiver: request %u (slot %u) in batch %u, count %u of %u",
                                r->w->cfg.index, r->w->rank, q->m.d_req, i, q->batch, q->count, q->total))
            return false;
    }
    if (!RCV_ASSERT_CHECKED(r, used == r->n_staged + in_batches,
                            "engine %u rank %u receiver: %u requests used, %u staged + %u in batches", r->w->cfg.index,
                            r->w->rank, used, r->n_staged, in_batches))
        return false;
    for (uint32_t e = 0; e < KV_ENGINES_MAX; e++) /* R6 */
        if (!RCV_ASSERT_CHECKED(r, !r->agent[e].known || (r->agent[e].tp >= 1 && r->agent[e].tp <= KV_TP_MAX),
                                "engine %u rank %u receiver: agent of engine %u with %u ranks", r->w->cfg.index,
                                r->w->rank, e, r->agent[e].tp))
            return false;
    return true;
}

static void recv_handle(void *self, const kv_msg *m) {
    kv_p2p_receiver *r = self;
    kv_owner_check(RCV_ENV(r), &r->owner, r->w->cfg.index);
    receiver_invariants(r);
    switch (m->kind) {
    case KV_M_P2P_RECV_START: kv_p2p_receiver_insert(r, m->payload); break;
    case KV_M_P2P_RECV_FLUSH: on_flush(r); break;
    case KV_M_P2P_RECV_TIMEOUT: on_timeout(r, m->payload); break;
    case KV_M_BOOT_REPLY: on_boot_reply(r, m->payload); break;
    case KVT_MSG_EVENT: on_event(r, m); break;
    default: kv_logf(RCV_ENV(r), KV_LOG_WARN, "receiver: unexpected message %u", m->kind);
    }
    if (receiver_invariants(r) && KV_CHECKED) receiver_walk(r);
}

kv_status kv_p2p_receiver_new(kv_worker *w, kv_p2p_receiver **out, uint32_t *out_actor) {
    kv_p2p_receiver *r = kv_alloc(w->env, sizeof *r);
    if (!r) return KV_ENOMEM;
    r->w = w;
    r->n_req = 2u * w->cfg.reqs_max < RCV_REQS_MAX ? 2u * w->cfg.reqs_max : RCV_REQS_MAX;
    r->req = kv_alloc_scratch(w->env, r->n_req * sizeof r->req[0]); /* insert writes a whole slot */
    r->staged = kv_alloc_scratch(w->env, r->n_req * sizeof r->staged[0]);
    for (uint32_t i = 0; r->req && i < r->n_req; i++) r->req[i].used = false;
    r->msg = kv_alloc_scratch(w->env, sizeof *r->msg);
    r->buf = kv_alloc_scratch(w->env, KV_WIRE_MAX);
    kv_status st = r->req && r->staged && r->msg && r->buf ? KV_OK : KV_ENOMEM;
    if (st == KV_OK) st = kv_worker_spawn(w, "recv", recv_handle, r, 1u << 18, &r->actor);
    if (st == KV_OK) st = kvt_ep_open(w->t, r->actor, &r->ep, &r->addr);
    if (st != KV_OK) {
        kv_p2p_receiver_free(r);
        return st;
    }
    r->owner = (kv_owner){.actor = r->actor, .what = "receiver pull map"};
    *out = r;
    *out_actor = r->actor;
    return KV_OK;
}

void kv_p2p_receiver_free(kv_p2p_receiver *r) {
    if (!r) return;
    kv_release(r->w->env, r->buf);
    kv_release(r->w->env, r->msg);
    kv_release(r->w->env, r->staged);
    kv_release(r->w->env, r->req);
    kv_release(r->w->env, r);
}

bool kv_p2p_receiver_saturated(const kv_p2p_receiver *r) {
    bool req_free = false, batch_free = false; /* each scan stops at the first free slot */
    for (uint32_t i = 0; i < r->n_req && !req_free; i++) req_free = !r->req[i].used;
    if (!req_free) return true;
    for (uint32_t i = 0; i < RCV_BATCHES_MAX && !batch_free; i++) batch_free = !r->batch[i].used;
    return !batch_free;
}

uint32_t kv_p2p_receiver_state(const kv_p2p_receiver *r) {
    uint32_t n = r->n_staged;
    for (uint32_t i = 0; i < r->n_req; i++) n += r->req[i].used;
    for (uint32_t i = 0; i < RCV_BATCHES_MAX; i++) n += r->batch[i].used;
    return n;
}

uint32_t kv_p2p_paired_ranks(uint32_t tp, uint32_t rank, uint32_t other_tp, uint32_t *out) {
    uint32_t lo, hi, n = 0;
    kv_heads_of(tp, rank, &lo, &hi);
    for (uint32_t o = 0; o < other_tp && o < KV_TP_MAX; o++) {
        uint32_t olo, ohi;
        kv_heads_of(other_tp, o, &olo, &ohi);
        if (olo < hi && lo < ohi) out[n++] = o;
    }
    return n;
}
