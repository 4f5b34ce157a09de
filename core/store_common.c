/* core/store_common.c — what every store actor shares: keys, prefix hashes,
 * which positions a hit needs, and one request/reply channel to the store
 * (endpoint, connection, sequence number, timeout). See store.h.
 *
 * The channel's invariant (asserted by its calls; INV-ASSERT, core/assert.h):
 * one operation in flight at most, seq != 0 exactly while it is, and every
 * request it sends is our own encoder's well-formed frame
 * (kv_wire_encoded_ok). The store's replies are a peer's bytes: decoded and
 * matched by seq, never asserted on. */
#include <string.h>

#include "core/assert.h"
#include "core/msgs.h"
#include "core/store.h"

_Static_assert(KV_WIRE_HDR_BYTES + 10u + KV_STORE_BATCH_MAX * (12u + KV_STORE_BLOCK_BYTES_MAX) <= KV_STORE_WIRE_MAX,
               "a full PUT fits a store channel's buffer");

kv_store_key kv_store_key_of(uint64_t hash, uint32_t head_lo, uint32_t head_hi) {
    return (kv_store_key){.hash = hash, .heads = head_lo << 16 | head_hi};
}

void kv_store_hashes(kv_digest_memo *m, uint32_t g, uint32_t n, uint64_t *out) {
    uint64_t h = 0;
    for (uint32_t pos = 0; pos < n && pos < KV_REQ_BLOCKS_MAX; pos++) out[pos] = h = kv_block_hash_m(m, h, pos, g);
}

bool kv_store_needs(const kv_engine_cfg *cfg, uint32_t g, uint32_t pos, uint32_t k) {
    if (pos >= k) return false;
    switch ((kv_group_kind)cfg->group[g].kind) {
    case KV_GROUP_FULL: return true;
    case KV_GROUP_SLIDING: return pos + kv_sw_blocks(cfg->group[g].window, cfg->block_size) >= k;
    case KV_GROUP_MAMBA: return pos + 1 == k;
    }
    return true;
}

kv_status kv_store_chan_open(kv_store_chan *c, kv_worker *w, uint32_t actor, uint32_t timer_kind) {
    c->w = w; /* c is part of a freshly allocated (zeroed) actor */
    c->actor = actor;
    c->peer = KVT_NONE;
    c->next_seq = 1;
    c->timer_kind = timer_kind;
    c->buf = kv_alloc_scratch(w->env, KV_STORE_WIRE_MAX);
    c->msg = kv_alloc_scratch(w->env, sizeof *c->msg);
    if (!c->buf || !c->msg) return KV_ENOMEM;
    return kvt_ep_open(w->t, actor, &c->ep, &c->addr);
}

void kv_store_chan_close(kv_store_chan *c) {
    if (!c->w) return;
    kv_release(c->w->env, c->msg);
    kv_release(c->w->env, c->buf);
    c->msg = NULL;
    c->buf = NULL;
}

bool kv_store_chan_send(kv_store_chan *c) {
    kv_worker *w = c->w;
    /* one operation at a time: a second would orphan the first's reply */
    if (!KV_ASSERT(w->env, w->cfg.index, c->seq == 0 && c->next_seq != 0,
                   "engine %u rank %u store channel of actor %u: send with seq %u in flight (next %u)", w->cfg.index,
                   w->rank, c->actor, c->seq, c->next_seq))
        return false;
    if (c->peer == KVT_NONE && kvt_connect(w->t, c->ep, &w->cfg.store_addr, &c->peer) != KV_OK) {
        c->peer = KVT_NONE;
        return false;
    }
    c->seq = c->next_seq++;
    if (c->next_seq == 0) c->next_seq = 1;
    c->msg->u.store.seq = c->seq;
    size_t len = 0;
    kv_status st = kv_wire_encode(c->msg, c->buf, KV_STORE_WIRE_MAX, &len);
    /* our own request always fits KV_STORE_WIRE_MAX (store.h) and decodes
     * back as sent; only the send itself may fail (the peer) */
    if (!KV_ASSERT(w->env, w->cfg.index, st == KV_OK && kv_wire_encoded_ok(c->msg, c->buf, len),
                   "engine %u rank %u store channel of actor %u: request type %u with %u keys: encode %s, %zu bytes",
                   w->cfg.index, w->rank, c->actor, c->msg->type, c->msg->u.store.n, kv_status_str(st), len) ||
        kvt_send_ctrl(w->t, c->ep, c->peer, c->buf, (uint32_t)len) != KV_OK) {
        c->seq = 0;
        return false;
    }
    kv_rt_post_at(w->rt, c->actor, kv_now_ns(w->env) + KV_STORE_OP_TIMEOUT_NS, c->timer_kind, &c->seq, sizeof c->seq);
    return true;
}

bool kv_store_chan_reply(kv_store_chan *c, const kv_msg *m) {
    const kvt_event *ev = m->payload;
    if (m->len < sizeof *ev || ev->kind != KVT_EV_CTRL || !c->seq) return false;
    const uint8_t *bytes = (const uint8_t *)m->payload + sizeof *ev;
    if (kv_wire_decode(bytes, ev->len, c->msg) != KV_OK) {
        kv_logf(c->w->env, KV_LOG_WARN, "store client: malformed reply dropped");
        return false;
    }
    if (c->msg->u.store.seq != c->seq) return false; /* a late reply of a timed-out operation */
    c->seq = 0;
    return true;
}

bool kv_store_chan_timeout(kv_store_chan *c, const kv_msg *m) {
    if (m->kind != c->timer_kind || m->len != sizeof(uint32_t) || !c->seq) return false;
    uint32_t seq;
    memcpy(&seq, m->payload, sizeof seq);
    if (seq != c->seq) return false;
    c->seq = 0;
    return true;
}
