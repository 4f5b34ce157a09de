/* core/store_lookup.c — the store connector's lookup actor on worker rank 0
 * (vLLM's LookupKeyServer): answers the scheduler's "how many tokens of
 * this request does the store hold" with one batch_is_exist.
 *
 * State (owner: this actor): a FIFO of lookups; one in flight.
 * Transitions:
 *   LOOKUP            queue it; start it if idle
 *   start             EXIST for every (position < max_k, group, rank) key,
 *                     max_k = (num_tokens - 1) / block_size (the hit stays
 *                     below the request's length, as a full hit is re-derived
 *                     at align(num_tokens - 1))
 *   EXIST_REPLY       hit = the largest k whose needed keys all exist
 *                     (kv_store_needs), on every rank; reply; next
 *   timeout, send     reply hit 0; next
 *   failure
 *   EXIST_REPLY fail  reply hit 0 (logged: the call failed, a miss); next
 * Invariants (store_lookup_invariants: L1-L2, O(1), on entry to and return
 * from every message in every build; INV-ASSERT, core/assert.h):
 *   L1 n <= KV_ENGINE_REQS_MAX, head < KV_ENGINE_REQS_MAX, max_k <=
 *      KV_REQ_BLOCKS_MAX;
 *   L2 busy => a lookup is queued; busy <=> an EXIST is in flight (the
 *      channel's seq).
 * A lookup comes from our own scheduler (asserted: a reply address, a
 * request of at least one block); the store's reply is a peer's (validated:
 * a flag count that does not match is a miss). Every lookup is answered
 * once, with a hit of whole blocks below the request's length. */
#include <string.h>

#include "core/assert.h"
#include "core/msgs.h"
#include "core/store.h"

struct kv_store_lookup {
    kv_owner owner;
    kv_worker *w;                     /* borrowed: immutable parts */
    kv_store_chan chan;
    kv_m_store_lookup q[KV_ENGINE_REQS_MAX]; /* q[head .. head+n): at most one per request */
    uint32_t head, n;
    bool busy;
    uint32_t max_k;                   /* of the lookup in flight */
};

#define SL_ASSERT(l, cond, ...) KV_ASSERT((l)->w->env, (l)->w->cfg.index, cond, __VA_ARGS__)

/* L1, L2: O(1). */
static bool store_lookup_invariants(const kv_store_lookup *l) {
    return SL_ASSERT(l, l->n <= KV_ENGINE_REQS_MAX && l->head < KV_ENGINE_REQS_MAX && l->max_k <= KV_REQ_BLOCKS_MAX &&
                            (!l->busy || l->n > 0) && l->busy == (l->chan.seq != 0),
                     "engine %u store lookup: %u queued from %u, max_k %u, busy %d, seq %u", l->w->cfg.index, l->n,
                     l->head, l->max_k, (int)l->busy, l->chan.seq);
}

static void reply(kv_store_lookup *l, const kv_m_store_lookup *q, uint32_t hit) {
    /* a hit is whole blocks below the request's length (vLLM re-derives a
     * full hit at align(num_tokens - 1)) */
    SL_ASSERT(l, hit % l->w->cfg.block_size == 0 && (hit == 0 || hit < q->num_tokens),
              "engine %u store lookup: request %u hit %u of %u tokens (block %u)", l->w->cfg.index, q->id, hit,
              q->num_tokens, l->w->cfg.block_size);
    kv_m_store_lookup_reply r = {.id = q->id, .hit_tokens = hit};
    kv_rt_post(l->w->rt, q->reply_to, KV_M_STORE_LOOKUP_REPLY, &r, sizeof r);
}

static const kv_m_store_lookup *current(const kv_store_lookup *l) { return &l->q[l->head]; }

static void pop(kv_store_lookup *l) {
    /* the lookup ends with nothing in flight: its reply was taken, its
     * timer fired, or its EXIST was never sent */
    if (!SL_ASSERT(l, l->n > 0 && l->chan.seq == 0, "engine %u store lookup: pop of %u queued with seq %u in flight",
                   l->w->cfg.index, l->n, l->chan.seq))
        return;
    l->head = (l->head + 1) % KV_ENGINE_REQS_MAX;
    l->n--;
    l->busy = false;
}

static void start_next(kv_store_lookup *l) {
    while (l->n && !l->busy) {
        const kv_m_store_lookup *q = current(l);
        const kv_engine_cfg *cfg = &l->w->cfg;
        uint32_t k = q->num_tokens ? (q->num_tokens - 1) / cfg->block_size : 0;
        l->max_k = k < KV_REQ_BLOCKS_MAX ? k : KV_REQ_BLOCKS_MAX;
        if (!l->max_k) {
            reply(l, q, 0);
            pop(l);
            continue;
        }
        kv_wire_store *m = &l->chan.msg->u.store;
        kv_wire_msg_reset(l->chan.msg, KV_WIRE_STORE_EXIST);
        uint64_t hash[KV_REQ_BLOCKS_MAX];
        kv_digest_memo dm;
        kv_digest_memo_init(&dm, &q->tokens, cfg->block_size, 0);
        for (uint32_t g = 0; g < cfg->n_groups; g++) {
            kv_store_hashes(&dm, g, l->max_k, hash);
            for (uint32_t r = 0; r < cfg->tp; r++) {
                uint32_t lo, hi;
                kv_heads_of(cfg->tp, r, &lo, &hi);
                for (uint32_t pos = 0; pos < l->max_k; pos++) m->key[m->n++] = kv_store_key_of(hash[pos], lo, hi);
            }
        }
        /* every (group, rank, position) key of the request, once */
        SL_ASSERT(l, m->n == cfg->n_groups * cfg->tp * l->max_k && m->n <= KV_STORE_KEYS_MAX,
                  "engine %u store lookup: request %u asks %u keys for %u groups x %u ranks x %u blocks", cfg->index, q->id,
                  m->n, cfg->n_groups, cfg->tp, l->max_k);
        l->busy = true;
        if (!kv_store_chan_send(&l->chan)) {
            reply(l, q, 0);
            pop(l);
        }
    }
}

/* Flags are laid out group-major, then rank, then position. */
static uint32_t best_hit(const kv_store_lookup *l, const kv_wire_store *m) {
    const kv_engine_cfg *cfg = &l->w->cfg;
    /* only the lookup in flight has a reply, and it asked for >= 1 block */
    if (!SL_ASSERT(l, l->busy && l->max_k >= 1, "engine %u store lookup: reply with busy %d, max_k %u", cfg->index,
                   (int)l->busy, l->max_k))
        return 0;
    uint32_t per_group = cfg->tp * l->max_k;
    if (m->status != 0) { /* the call failed: a miss */
        kv_logf(l->w->env, KV_LOG_INFO, "store lookup: exists of request %u failed (status %d); a miss", current(l)->id,
                (int)m->status);
        return 0;
    }
    if (m->n != cfg->n_groups * per_group) return 0;
    for (uint32_t k = l->max_k; k > 0; k--) {
        bool ok = true;
        for (uint32_t g = 0; g < cfg->n_groups && ok; g++)
            for (uint32_t r = 0; r < cfg->tp && ok; r++)
                for (uint32_t pos = 0; pos < k && ok; pos++)
                    if (kv_store_needs(cfg, g, pos, k) && !m->flag[g * per_group + r * l->max_k + pos]) ok = false;
        if (ok) return k;
    }
    return 0;
}

static void on_event(kv_store_lookup *l, const kv_msg *m) {
    if (!l->busy || !kv_store_chan_reply(&l->chan, m)) return;
    if (l->chan.msg->type != KV_WIRE_STORE_EXIST_REPLY) {
        kv_logf(l->w->env, KV_LOG_WARN, "store lookup: unexpected reply type %u", l->chan.msg->type);
        reply(l, current(l), 0);
    } else {
        reply(l, current(l), best_hit(l, &l->chan.msg->u.store) * l->w->cfg.block_size);
    }
    pop(l);
    start_next(l);
}

static void handle(kv_store_lookup *l, const kv_msg *m);

static void lookup_handle(void *self, const kv_msg *m) {
    kv_store_lookup *l = self;
    kv_owner_check(l->w->env, &l->owner, l->w->cfg.index);
    store_lookup_invariants(l);
    handle(l, m);
    store_lookup_invariants(l);
}

static void handle(kv_store_lookup *l, const kv_msg *m) {
    switch (m->kind) {
    case KV_M_STORE_LOOKUP:
        /* our own scheduler's question (gnmt of a request of >= 1 block) */
        if (!SL_ASSERT(l, m->len == sizeof(kv_m_store_lookup) && ((const kv_m_store_lookup *)m->payload)->reply_to != KV_ACTOR_NONE &&
                              ((const kv_m_store_lookup *)m->payload)->num_tokens >= l->w->cfg.block_size,
                       "engine %u store lookup: LOOKUP of %u bytes", l->w->cfg.index, m->len))
            return;
        if (l->n == KV_ENGINE_REQS_MAX) { /* never more than the engine's requests */
            reply(l, m->payload, 0);
            return;
        }
        l->q[(l->head + l->n++) % KV_ENGINE_REQS_MAX] = *(const kv_m_store_lookup *)m->payload;
        start_next(l);
        break;
    case KV_M_STORE_LOOKUP_TIMEOUT:
        if (!kv_store_chan_timeout(&l->chan, m)) return;
        kv_logf(l->w->env, KV_LOG_INFO, "store lookup: request %u timed out", current(l)->id);
        reply(l, current(l), 0);
        pop(l);
        start_next(l);
        break;
    case KVT_MSG_EVENT: on_event(l, m); break;
    default: kv_logf(l->w->env, KV_LOG_WARN, "store lookup: unexpected message %u", m->kind);
    }
}

kv_status kv_store_lookup_new(kv_worker *w, kv_store_lookup **out, uint32_t *out_actor) {
    kv_store_lookup *l = kv_alloc(w->env, sizeof *l);
    if (!l) return KV_ENOMEM;
    l->w = w;
    uint32_t actor;
    kv_status st = kv_worker_spawn(w, "slookup", lookup_handle, l, 1u << 16, &actor);
    if (st == KV_OK) st = kv_store_chan_open(&l->chan, w, actor, KV_M_STORE_LOOKUP_TIMEOUT);
    if (st != KV_OK) {
        kv_store_chan_close(&l->chan);
        kv_release(w->env, l);
        return st;
    }
    l->owner = (kv_owner){.actor = actor, .what = "store lookups"};
    *out = l;
    *out_actor = actor;
    return KV_OK;
}

void kv_store_lookup_free(kv_store_lookup *l) {
    if (!l) return;
    kv_store_chan_close(&l->chan);
    kv_release(l->w->env, l);
}
