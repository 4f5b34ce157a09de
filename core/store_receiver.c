/* core/store_receiver.c — the store connector's receive actor (vLLM's
 * KVCacheStoreRecvingThread): loads blocks from the store into the worker's
 * KV memory.
 *
 * State (owner: this actor): a FIFO of load jobs, one in flight, and the
 * (group, position) list of that job with a cursor.
 * Transitions, per job:
 *   start         list every needed (group, position) in [from, to) with a
 *                 real block (kv_store_needs with k = to); GET the first
 *                 KV_STORE_BATCH_MAX
 *   GET_REPLY 0   copy each found key's bytes into its block; a missing key
 *                 is a failed block; next batch, or done
 *   GET_REPLY err every block of the batch and of the rest failed; done
 *   timeout       as an error reply
 *   done          exactly one LOAD_DONE (with the failed blocks) to the
 *                 worker main: the request is always reported finished
 * Invariants (store_receiver_invariants: Y1-Y3, O(1), on entry to and
 * return from every message in every build; INV-ASSERT, core/assert.h):
 *   Y1 n <= KV_STORE_JOBS_MAX, head < KV_STORE_JOBS_MAX;
 *   Y2 busy => a job is queued; busy <=> a GET is in flight (the channel's
 *      seq): between messages a job waits only for the store;
 *   Y3 while busy: next + batch_n <= n_items <= RCV_ITEMS_MAX (the batch in
 *      flight is items the job listed), and the failed blocks fit.
 * Jobs come from our own worker main (asserted: a range of positions within
 * a table, the engine's groups at most); the store's GET replies are a
 * peer's (validated: a wrong count or size fails the batch). */
#include <string.h>

#include "core/assert.h"
#include "core/msgs.h"
#include "core/store.h"

#define RCV_ITEMS_MAX (KV_GROUPS_MAX * KV_REQ_BLOCKS_MAX)

typedef struct rcv_item {
    uint8_t group, pos;
    uint32_t block;
    uint64_t hash;
} rcv_item;

struct kv_store_receiver {
    kv_owner owner;
    kv_worker *w;                         /* borrowed: immutable parts and the KV memory */
    uint32_t main_actor;
    kv_store_chan chan;
    kv_m_store_load *q;                   /* [KV_STORE_JOBS_MAX], q[head .. head+n); scratch (env) */
    uint32_t head, n;
    bool busy;
    rcv_item *item;                       /* [RCV_ITEMS_MAX] of the job in flight; scratch (env) */
    uint32_t n_items, next, batch_n;
    kv_m_store_load_done done;            /* built in place */
};

static kv_m_store_load *current(kv_store_receiver *r) { return &r->q[r->head]; }

#define XR_ASSERT(r, cond, ...) KV_ASSERT((r)->w->env, (r)->w->cfg.index, cond, __VA_ARGS__)

/* Y1-Y3: O(1). */
static bool store_receiver_invariants(const kv_store_receiver *r) {
    if (!XR_ASSERT(r, r->n <= KV_STORE_JOBS_MAX && r->head < KV_STORE_JOBS_MAX && (!r->busy || r->n > 0) &&
                          r->busy == (r->chan.seq != 0),
                   "engine %u rank %u store recv: %u jobs from %u, busy %d, seq %u", r->w->cfg.index, r->w->rank, r->n,
                   r->head, (int)r->busy, r->chan.seq))
        return false;
    return XR_ASSERT(r, !r->busy || (r->next + r->batch_n <= r->n_items && r->n_items <= RCV_ITEMS_MAX &&
                                     r->done.n_failed <= RCV_ITEMS_MAX),
                     "engine %u rank %u store recv: batch %u+%u of %u items, %u failed", r->w->cfg.index, r->w->rank,
                     r->next, r->batch_n, r->n_items, r->done.n_failed);
}

static void fail_item(kv_store_receiver *r, const rcv_item *it) {
    if (r->done.n_failed < RCV_ITEMS_MAX) r->done.failed[r->done.n_failed++] = (kv_bad_block){it->group, it->block};
}

static void job_done(kv_store_receiver *r) {
    if (!XR_ASSERT(r, r->busy && r->n > 0, "engine %u rank %u store recv: job done while busy %d with %u jobs",
                   r->w->cfg.index, r->w->rank, (int)r->busy, r->n))
        return;
    r->done.id = current(r)->id;
    r->done.job = *current(r);
    kv_rt_post(r->w->rt, r->main_actor, KV_M_STORE_LOAD_DONE, &r->done, sizeof r->done);
    r->head = (r->head + 1) % KV_STORE_JOBS_MAX;
    r->n--;
    r->busy = false;
}

/* GET the next batch; false when nothing is left or it could not be sent. */
static bool get_batch(kv_store_receiver *r) {
    if (r->next >= r->n_items) return false;
    kv_wire_store *m = &r->chan.msg->u.store;
    kv_wire_msg_reset(r->chan.msg, KV_WIRE_STORE_GET);
    m->block_bytes = r->w->block_bytes;
    r->batch_n = r->n_items - r->next < KV_STORE_BATCH_MAX ? r->n_items - r->next : KV_STORE_BATCH_MAX;
    if (!XR_ASSERT(r, r->n_items <= RCV_ITEMS_MAX && r->batch_n <= KV_STORE_BATCH_MAX,
                   "engine %u rank %u store recv: batch of %u from %u of %u items", r->w->cfg.index, r->w->rank,
                   r->batch_n, r->next, r->n_items))
        return false;
    for (uint32_t i = 0; i < r->batch_n; i++)
        m->key[m->n++] = kv_store_key_of(r->item[r->next + i].hash, r->w->head_lo, r->w->head_hi);
    if (kv_store_chan_send(&r->chan)) return true;
    for (uint32_t i = r->next; i < r->n_items; i++) fail_item(r, &r->item[i]);
    r->next = r->n_items;
    return false;
}

static void start_next(kv_store_receiver *r) {
    const kv_engine_cfg *cfg = &r->w->cfg;
    while (r->n && !r->busy) {
        const kv_m_store_load *j = current(r);
        r->busy = true;
        r->n_items = r->next = 0;
        r->done.n_failed = 0;
        uint32_t to = j->to_pos < KV_REQ_BLOCKS_MAX ? j->to_pos : KV_REQ_BLOCKS_MAX;
        uint64_t hash[KV_REQ_BLOCKS_MAX];
        kv_digest_memo dm;
        kv_digest_memo_init(&dm, &j->tokens, cfg->block_size, 0);
        for (uint32_t g = 0; g < cfg->n_groups && g < j->blocks.n_groups; g++) {
            kv_store_hashes(&dm, g, to, hash);
            for (uint32_t pos = j->from_pos; pos < to && pos < j->blocks.n[g]; pos++) {
                uint32_t id = j->blocks.id[g][pos];
                if (id == KV_NULL_BLOCK || id >= r->w->capacity || !kv_store_needs(cfg, g, pos, to)) continue;
                /* one item per (group, position): the list cannot overflow */
                if (!XR_ASSERT(r, r->n_items < RCV_ITEMS_MAX, "engine %u rank %u store recv: request %u: %u items",
                               cfg->index, r->w->rank, j->id, r->n_items))
                    break;
                r->item[r->n_items++] = (rcv_item){.group = (uint8_t)g, .pos = (uint8_t)pos, .block = id, .hash = hash[pos]};
            }
        }
        if (!get_batch(r)) job_done(r);
    }
}

static void end_batch(kv_store_receiver *r, bool failed_all) {
    if (failed_all) {
        for (uint32_t i = r->next; i < r->n_items; i++) fail_item(r, &r->item[i]);
        r->next = r->n_items;
    } else {
        r->next += r->batch_n;
    }
    XR_ASSERT(r, r->next <= r->n_items, "engine %u rank %u store recv: cursor %u past %u items", r->w->cfg.index,
              r->w->rank, r->next, r->n_items);
    if (!get_batch(r)) job_done(r);
}

static void on_get(kv_store_receiver *r, const kv_wire_store *m) {
    if (m->status != 0 || m->n != r->batch_n || m->block_bytes != r->w->block_bytes) {
        end_batch(r, true);
        return;
    }
    uint32_t off = 0;
    /* the reply's count matched our batch: its items are ours */
    if (!XR_ASSERT(r, r->next + m->n <= r->n_items, "engine %u rank %u store recv: reply of %u from item %u of %u",
                   r->w->cfg.index, r->w->rank, m->n, r->next, r->n_items))
        return;
    for (uint32_t i = 0; i < m->n; i++) {
        const rcv_item *it = &r->item[r->next + i];
        if (!m->flag[i]) {
            fail_item(r, it);
            continue;
        }
        memcpy(kv_worker_block(r->w, it->group, it->block), &m->data[off], m->block_bytes);
        off += m->block_bytes;
    }
    end_batch(r, false);
}

static void handle(kv_store_receiver *r, const kv_msg *m);

static void recv_handle(void *self, const kv_msg *m) {
    kv_store_receiver *r = self;
    kv_owner_check(r->w->env, &r->owner, r->w->cfg.index);
    store_receiver_invariants(r);
    handle(r, m);
    store_receiver_invariants(r);
}

static void handle(kv_store_receiver *r, const kv_msg *m) {
    switch (m->kind) {
    case KV_M_STORE_LOAD: {
        /* our own worker main's job (issue_load of an accepted LoadSpec) */
        const kv_m_store_load *j = m->payload;
        if (!XR_ASSERT(r, j->from_pos < j->to_pos && j->to_pos <= KV_REQ_BLOCKS_MAX && j->blocks.n_groups <= KV_GROUPS_MAX,
                       "engine %u rank %u store recv: load of request %u positions [%u, %u), %u groups",
                       r->w->cfg.index, r->w->rank, j->id, j->from_pos, j->to_pos, j->blocks.n_groups))
            return;
        if (r->n == KV_STORE_JOBS_MAX) { /* cannot queue: every block failed, still reported */
            kv_m_store_load_done *d = &r->done;
            memset(d, 0, sizeof *d);
            d->job = *(const kv_m_store_load *)m->payload;
            d->id = d->job.id;
            for (uint32_t g = 0; g < d->job.blocks.n_groups; g++)
                for (uint32_t i = 0; i < d->job.blocks.n[g] && d->n_failed < RCV_ITEMS_MAX; i++)
                    if (d->job.blocks.id[g][i] != KV_NULL_BLOCK) d->failed[d->n_failed++] = (kv_bad_block){g, d->job.blocks.id[g][i]};
            kv_rt_post(r->w->rt, r->main_actor, KV_M_STORE_LOAD_DONE, d, sizeof *d);
            return;
        }
        r->q[(r->head + r->n++) % KV_STORE_JOBS_MAX] = *(const kv_m_store_load *)m->payload;
        start_next(r);
        break;
    }
    case KV_M_STORE_LOAD_TIMEOUT:
        if (!kv_store_chan_timeout(&r->chan, m)) return;
        kv_logf(r->w->env, KV_LOG_INFO, "store recv: request %u timed out", current(r)->id);
        end_batch(r, true);
        start_next(r);
        break;
    case KVT_MSG_EVENT:
        if (!r->busy || !kv_store_chan_reply(&r->chan, m)) return;
        if (r->chan.msg->type == KV_WIRE_STORE_GET_REPLY) on_get(r, &r->chan.msg->u.store);
        else end_batch(r, true);
        start_next(r);
        break;
    default: kv_logf(r->w->env, KV_LOG_WARN, "store recv: unexpected message %u", m->kind);
    }
}

kv_status kv_store_receiver_new(kv_worker *w, kv_store_receiver **out, uint32_t *out_actor) {
    kv_store_receiver *r = kv_alloc(w->env, sizeof *r);
    if (!r) return KV_ENOMEM;
    r->w = w;
    r->q = kv_alloc_scratch(w->env, KV_STORE_JOBS_MAX * sizeof r->q[0]);
    r->item = kv_alloc_scratch(w->env, RCV_ITEMS_MAX * sizeof r->item[0]);
    if (!r->q || !r->item) {
        kv_release(w->env, r->item);
        kv_release(w->env, r->q);
        kv_release(w->env, r);
        return KV_ENOMEM;
    }
    r->main_actor = w->main_actor;
    uint32_t actor;
    kv_status st = kv_worker_spawn(w, "srecv", recv_handle, r, 1u << 18, &actor);
    if (st == KV_OK) st = kv_store_chan_open(&r->chan, w, actor, KV_M_STORE_LOAD_TIMEOUT);
    if (st != KV_OK) {
        kv_store_chan_close(&r->chan);
        kv_release(w->env, r->item);
        kv_release(w->env, r->q);
        kv_release(w->env, r);
        return st;
    }
    r->owner = (kv_owner){.actor = actor, .what = "store recv jobs"};
    *out = r;
    *out_actor = actor;
    return KV_OK;
}

void kv_store_receiver_free(kv_store_receiver *r) {
    if (!r) return;
    kv_store_chan_close(&r->chan);
    kv_release(r->w->env, r->item);
    kv_release(r->w->env, r->q);
    kv_release(r->w->env, r);
}

uint32_t kv_store_receiver_state(const kv_store_receiver *r) { return r->n; }
