/* tests/assert_shims/shim_p2p_sender.c — core/p2p_sender.c with its
 * private struct in reach (shims.h). */
#include "core/p2p_sender.c"

#include "tests/assert_shims/shims.h"

/* A request slot marked used that no pull holds: the pool leaks it. */
void shim_p2p_sender_leak_request_slot(kv_p2p_sender *s) {
    for (uint32_t i = s->n_preqs; i-- > 0;)
        if (!s->preq_used[i]) {
            s->preq_used[i] = true;
            return;
        }
}

/* kv_p2p_sender_saturated of a sender as kv_p2p_sender_new sizes it for an
 * engine of reqs_max requests, holding no entry and no request slot, with
 * pull slot i taken for each bit i of pulls_used. */
bool shim_p2p_sender_saturated_as_built(uint32_t reqs_max, uint32_t pulls_used) {
    static kv_p2p_sender s;
    static bool preq_used[SND_PREQS_MAX];
    memset(&s, 0, sizeof s);
    memset(preq_used, 0, sizeof preq_used);
    s.n_entries = 2u * reqs_max < SND_ENTRIES_MAX ? 2u * reqs_max : SND_ENTRIES_MAX;
    s.n_preqs = preq_pool_size(reqs_max);
    s.preq_used = preq_used;
    for (uint32_t i = 0; i < SND_PULLS_MAX && i < 32u; i++) s.pull[i].used = (pulls_used >> i) & 1u;
    return kv_p2p_sender_saturated(&s);
}

/* The sender hears `len` bytes on its control channel from `peer`, as its
 * actor does when the transport delivers them (the handler's body: the
 * message, then its invariants and, in checked builds, its walk). *reply is
 * the response it encoded for them; false when it encoded none. */
bool shim_p2p_sender_hear(kv_p2p_sender *s, kvt_peer peer, const uint8_t *bytes, uint32_t len,
                          kv_wire_xfer_resp *reply) {
    static union {
        kvt_event ev;
        uint8_t raw[sizeof(kvt_event) + KV_WIRE_MAX];
    } in;
    if (len > KV_WIRE_MAX) return false;
    in.ev = (kvt_event){.kind = KVT_EV_CTRL, .ep = s->ep, .owner = s->actor, .peer = peer, .len = len};
    memcpy(in.raw + sizeof in.ev, bytes, len);
    kv_msg m = {.kind = KVT_MSG_EVENT, .src = KV_ACTOR_NONE, .len = (uint32_t)sizeof in.ev + len, .payload = &in};
    s->out->type = 0; /* respond() sets it */
    sender_invariants(s);
    on_event(s, &m);
    if (sender_invariants(s) && KV_CHECKED) sender_walk(s);
    if (s->out->type != KV_WIRE_XFER_RESP) return false;
    *reply = s->out->u.resp;
    return true;
}

/* The last response the sender encoded (for any pull); false if none. */
bool shim_p2p_sender_last_response(const kv_p2p_sender *s, kv_wire_xfer_resp *out) {
    if (s->out->type != KV_WIRE_XFER_RESP) return false;
    *out = s->out->u.resp;
    return true;
}

/* The last pull the sender decoded (a D rank's XFER_META); false if none. */
bool shim_p2p_sender_last_pull(const kv_p2p_sender *s, kv_wire_xfer_meta *out) {
    if (s->in->type != KV_WIRE_XFER_META) return false;
    *out = s->in->u.meta;
    return true;
}

uint32_t shim_p2p_sender_request_slots_used(const kv_p2p_sender *s) {
    uint32_t n = 0;
    for (uint32_t i = 0; i < s->n_preqs; i++) n += s->preq_used[i];
    return n;
}

/* Every free pull slot taken by a pull of no requests (as many pulls in
 * flight hold them, S4); returns the slots taken (bit i: slot i). */
_Static_assert(SND_PULLS_MAX <= 32u, "a slot per bit of the mask");
uint32_t shim_p2p_sender_take_pull_slots(kv_p2p_sender *s) {
    uint32_t taken = 0;
    for (uint32_t i = 0; i < SND_PULLS_MAX; i++)
        if (!s->pull[i].used) {
            s->pull[i] = (snd_pull){.used = true, .ctrl_peer = KVT_NONE, .data_peer = KVT_NONE, .req = &s->preq[0]};
            taken |= 1u << i;
        }
    return taken;
}
void shim_p2p_sender_give_back_pull_slots(kv_p2p_sender *s, uint32_t taken) {
    for (uint32_t i = 0; i < SND_PULLS_MAX; i++)
        if (taken & (1u << i)) s->pull[i] = (snd_pull){0};
}

/* The share a D peer may hold (cfg.peer_share_pct = pct): on a sender sized
 * for an engine of reqs_max requests, `mine` pull slots are taken by peer 1
 * with reqs_each requests each and `others` by peer 2; would a pull of
 * n_reqs requests from peer 1 take it past its share? */
bool shim_p2p_sender_over_share_as_built(uint32_t reqs_max, uint32_t pct, uint32_t mine, uint32_t reqs_each,
                                         uint32_t others, uint32_t n_reqs) {
    static kv_p2p_sender s;
    static kv_worker w;
    memset(&s, 0, sizeof s);
    memset(&w, 0, sizeof w);
    w.cfg.peer_share_pct = pct;
    s.w = &w;
    s.n_preqs = preq_pool_size(reqs_max);
    for (uint32_t i = 0; i < SND_PULLS_MAX && i < mine + others; i++)
        s.pull[i] = (snd_pull){.used = true, .ctrl_peer = i < mine ? 1u : 2u, .n_reqs = i < mine ? reqs_each : 1u};
    return over_share(&s, 1u, n_reqs);
}

void shim_p2p_sender_set_share(kv_p2p_sender *s, uint32_t pct) { ((kv_worker *)s->w)->cfg.peer_share_pct = pct; }

/* n free pull slots taken by pulls of no requests from peer (a bit each). */
uint32_t shim_p2p_sender_take_pull_slots_of(kv_p2p_sender *s, kvt_peer peer, uint32_t n) {
    uint32_t taken = 0;
    for (uint32_t i = 0; i < SND_PULLS_MAX && n; i++)
        if (!s->pull[i].used) {
            s->pull[i] = (snd_pull){.used = true, .ctrl_peer = peer, .data_peer = KVT_NONE, .req = &s->preq[0]};
            taken |= 1u << i;
            n--;
        }
    return taken;
}

kvt_peer shim_p2p_sender_link_to(kv_p2p_sender *s, const kvt_addr *a) {
    kvt_peer peer = KVT_NONE;
    return kvt_connect(s->w->t, s->ep, a, &peer) == KV_OK ? peer : KVT_NONE;
}

uint64_t shim_p2p_sender_foreign_refused(const kv_p2p_sender *s) { return s->foreign_refused; }
uint64_t shim_p2p_sender_peer_refused(const kv_p2p_sender *s) { return s->peer_refused; }
