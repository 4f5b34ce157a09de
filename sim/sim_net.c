/* sim/sim_net.c — the simulated network and the "sim" transport; see
 * sim_net.h.
 *
 * Model:
 *  - One packet pool, allocated once: the first packets_max slots carry
 *    batches and control messages (a batch's WRITE list lives in a parallel
 *    slab of KVT_BATCH_WRITES_MAX entries per slot); a reserve of
 *    nodes_max * eps_max * peers-per-ep slots carries KVT_EV_PEER_DOWN events
 *    (at most one pending per (ep, peer), so the reserve never runs out).
 *  - A binary min-heap of live packets keyed by (time, seq); seq is a global
 *    counter, so ties never depend on pointers or pool slots. Every packet
 *    knows its heap position, so faults can re-key or remove it.
 *  - A batch's key is min(arrival, deadline). At the key: a reset batch
 *    completes KV_ECONNRESET, a batch whose deadline is at or before its
 *    arrival completes KV_ETIMEDOUT (never applied), otherwise the writes are
 *    applied (memmove from the source region to the destination region, both
 *    bounds-checked again at delivery) and the completion is emitted at the
 *    same virtual instant: the drawn one-way latency stands for the whole
 *    round trip, there is no separate return latency.
 *  - Control bytes are copied at send time into a byte ring of
 *    ctrl_bytes_max (virtual positions; a FIFO of allocations lets messages
 *    be freed out of order while space is reclaimed in order).
 *  - A connection reset does not kill the peer ids: after PEER_DOWN the ids
 *    stay valid and the next submit/send reconnects transparently (ZMQ
 *    style). Only a crashed node fails submits/sends fast.
 *  - A hung node (a silent crash) takes submits and sends as if alive and
 *    never answers: ctrl to it is lost, a batch to it completes
 *    KV_ETIMEDOUT at its deadline (or waits, without one, for the node to
 *    crash for real, which resets it).
 *  - Write grants (transport.h): a peer writes only through a live grant of
 *    the destination node, checked at delivery like the bounds (revoked
 *    since the submit: the entry fails). Keys are the node's grant counter
 *    through a mixer (splitmix64, two rounds), never drawn from the choice
 *    stream, so a scenario's draws and its trace do not depend on them; the
 *    counters restart at sim_net_reset. A refusal is counted: through a
 *    revoked or unknown id (a late write, the mechanism at work) in
 *    grant_refused, with a wrong key, from another peer or outside the window
 *    (something an honest sender never does) in grant_violations, the first
 *    of which is kept for the checker (sim_net_grant_violation).
 *  - poll() on a sim kvt returns no events: the world drives the network
 *    through sim_net_progress(). close() is a no-op (the net owns all memory).
 *
 * The env and the choice stream are borrowed. No allocation after
 * sim_net_new; no wall clock; the only randomness is sim_choice_below. */
#include "sim/sim_net.h"

#include "transport/regions.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#define SN_PEERS_MAX 64u       /* peers per endpoint */
#define SN_DIM_MAX (1u << 16)  /* bound on nodes, eps, regions */
#define SN_PKTS_MAX (1u << 20) /* bound on packets_max */
#define SN_GRANTS KV_NODE_GRANTS_MAX /* live write grants per node */

enum { PK_BATCH = 1, PK_CTRL = 2, PK_DOWN = 3 };
enum { PS_LIVE = 0, PS_RESET = 1 };

typedef struct sn_peer {
    uint32_t node, ep;
    uint64_t last_due;  /* ctrl FIFO per (this ep, peer) */
    bool down_pending;  /* a PEER_DOWN for this peer is queued */
} sn_peer;

typedef struct sn_ep {
    bool open;
    uint32_t owner;
    uint32_t n_peers;
    sn_peer *peer; /* [peers_max] */
} sn_ep;

typedef kvt_region_entry sn_region;

typedef struct sn_node {
    sim_net *net;
    uint32_t index;
    bool crashed;
    bool hung; /* its process died and nobody was told: see sim_net_fault_hang */
    uint32_t n_eps;
    sn_ep *ep;      /* [eps_max] */
    kvt_region_tab reg; /* over [regions_max] of the net's regs */
    kvt_grant_tab grants; /* over [SN_GRANTS] of the net's grant slab */
    uint64_t grant_ctr;   /* keys: mix(node, ++grant_ctr) */
    bool fault_armed;
    int32_t fault_err;
    uint32_t fault_n;
} sn_node;

typedef struct sn_pkt {
    uint64_t at;  /* heap key */
    uint64_t seq; /* tie-break */
    uint64_t arrive, deadline, tag;
    uint64_t cpos; /* ctrl: ring position */
    uint32_t kind, state;
    uint32_t src, src_ep, dst, dst_ep;
    uint32_t peer; /* batch: submitter's peer id; down: the peer that went down */
    uint32_t n;    /* batch: entries; ctrl: bytes */
    uint32_t cslot;
    uint32_t fail_n; /* batch: entries failed by an injected fault */
    int32_t perr;
    uint32_t heap_pos;
} sn_pkt;

typedef struct sn_cslot {
    uint64_t end;
    bool live;
} sn_cslot;

struct sim_net {
    const kv_env *env;
    sim_choice *choice;
    sim_net_cfg cfg;
    uint32_t peers_max;
    uint32_t down_max; /* reserve of PEER_DOWN packets */
    uint32_t pkts_total;
    sn_node *node;     /* [nodes_max] */
    kvt *kvts;         /* [nodes_max] */
    sn_ep *eps;        /* [nodes_max * eps_max] */
    sn_peer *peers;    /* [nodes_max * eps_max * peers_max] */
    sn_region *regs;   /* [nodes_max * regions_max] */
    kvt_grant_entry *grant_slab; /* [nodes_max * SN_GRANTS] */
    sim_net_grant_violation viol; /* the first of the run (viol.seen) */
    sn_pkt *pkt;       /* [pkts_total] */
    kvt_write *wr;     /* [packets_max * KVT_BATCH_WRITES_MAX] */
    uint32_t *heap;    /* [pkts_total] */
    uint32_t heap_n;
    uint32_t *free_data; /* [packets_max] */
    uint32_t n_free_data;
    uint32_t *free_down; /* [down_max] */
    uint32_t n_free_down;
    /* Packets never handed out this run: data [hw_data, packets_max), down
     * [packets_max + hw_down, pkts_total). A free stack holds only released
     * packets; when it is empty the next fresh index is taken, so the order
     * is that of a stack filled with every index, and reset costs only what
     * the run used. */
    uint32_t hw_data, hw_down;
    uint8_t *cbytes;   /* [ctrl_bytes_max] */
    uint64_t chead, ctail;
    sn_cslot *cfifo;   /* [packets_max] */
    uint32_t cf_head, cf_n;
    uint64_t seq;
    uint64_t delay_until, delay_extra;
    sim_net_stats stats;
};

/* ---- small helpers ----------------------------------------------------------- */

static uint64_t sat_add(uint64_t a, uint64_t b) { return a > UINT64_MAX - b ? UINT64_MAX : a + b; }
static uint64_t sat_mul(uint64_t a, uint64_t b) {
    if (a != 0 && b > UINT64_MAX / a) return UINT64_MAX;
    return a * b;
}
static uint64_t now_ns(const sim_net *net) { return kv_now_ns(net->env); }
static bool range_ok(const sn_region *r, uint64_t off, uint64_t len) { return kvt_range_ok(r, off, len); }
static sn_node *t_node(kvt *t) { return (sn_node *)t->impl; }
static sn_node *net_node(sim_net *net, uint32_t n) { return n < net->cfg.nodes_max ? &net->node[n] : NULL; }

static sn_region *find_region(sn_node *nd, kvt_region id) {
    return kvt_region_find(&nd->reg, id);
}

static sn_ep *find_ep(sn_node *nd, kvt_ep ep) {
    if (!nd || nd->crashed || ep >= nd->n_eps || !nd->ep[ep].open) return NULL;
    return &nd->ep[ep];
}

static uint32_t find_peer(const sn_ep *e, uint32_t node, uint32_t ep) {
    for (uint32_t i = 0; i < e->n_peers; i++)
        if (e->peer[i].node == node && e->peer[i].ep == ep) return i;
    return KVT_NONE;
}

/* Finds or adds (node, ep) in e's table; KVT_NONE when full. */
static uint32_t peer_get(sim_net *net, sn_ep *e, uint32_t node, uint32_t ep) {
    uint32_t id = find_peer(e, node, ep);
    if (id != KVT_NONE || e->n_peers >= net->peers_max) return id;
    id = e->n_peers++;
    e->peer[id] = (sn_peer){.node = node, .ep = ep, .last_due = 0, .down_pending = false};
    return id;
}

static uint64_t draw_latency(sim_net *net) {
    uint64_t span = net->cfg.lat_max_ns - net->cfg.lat_min_ns;
    if (span >= UINT32_MAX) span = UINT32_MAX - 1u;
    uint64_t lat = net->cfg.lat_min_ns + sim_choice_below(net->choice, (uint32_t)span + 1u);
    if (now_ns(net) < net->delay_until) lat = sat_add(lat, net->delay_extra);
    return lat;
}

/* ---- heap over packet indices, key (at, seq) ------------------------------------ */

static bool pkt_less(const sim_net *net, uint32_t a, uint32_t b) {
    const sn_pkt *x = &net->pkt[a], *y = &net->pkt[b];
    return x->at < y->at || (x->at == y->at && x->seq < y->seq);
}

static void heap_set(sim_net *net, uint32_t pos, uint32_t idx) {
    net->heap[pos] = idx;
    net->pkt[idx].heap_pos = pos;
}

static void heap_up(sim_net *net, uint32_t pos) {
    uint32_t idx = net->heap[pos];
    for (uint32_t g = 0; g < 64 && pos > 0; g++) {
        uint32_t parent = (pos - 1u) / 2u;
        if (!pkt_less(net, idx, net->heap[parent])) break;
        heap_set(net, pos, net->heap[parent]);
        pos = parent;
    }
    heap_set(net, pos, idx);
}

static void heap_down(sim_net *net, uint32_t pos) {
    uint32_t idx = net->heap[pos];
    for (uint32_t g = 0; g < 64; g++) {
        uint32_t c = 2u * pos + 1u;
        if (c >= net->heap_n) break;
        if (c + 1u < net->heap_n && pkt_less(net, net->heap[c + 1u], net->heap[c])) c++;
        if (!pkt_less(net, net->heap[c], idx)) break;
        heap_set(net, pos, net->heap[c]);
        pos = c;
    }
    heap_set(net, pos, idx);
}

static void heap_push(sim_net *net, uint32_t idx) {
    net->heap[net->heap_n] = idx;
    net->pkt[idx].heap_pos = net->heap_n;
    net->heap_n++;
    heap_up(net, net->heap_n - 1u);
}

static void heap_remove(sim_net *net, uint32_t idx) {
    uint32_t pos = net->pkt[idx].heap_pos;
    net->pkt[idx].heap_pos = KVT_NONE;
    net->heap_n--;
    if (pos == net->heap_n) return;
    uint32_t moved = net->heap[net->heap_n];
    heap_set(net, pos, moved);
    heap_up(net, pos);
    heap_down(net, net->pkt[moved].heap_pos);
}

/* Moves a packet's key earlier (never later). */
static void heap_advance(sim_net *net, uint32_t idx, uint64_t at) {
    if (net->pkt[idx].at <= at) return;
    net->pkt[idx].at = at;
    heap_up(net, net->pkt[idx].heap_pos);
}

/* ---- ctrl byte ring ------------------------------------------------------------- */

static kv_status ring_alloc(sim_net *net, uint32_t len, uint32_t *slot, uint64_t *pos) {
    uint64_t cap = net->cfg.ctrl_bytes_max;
    *slot = KVT_NONE;
    *pos = 0;
    if (len == 0) return KV_OK;
    if (len > cap || net->cf_n >= net->cfg.packets_max) return KV_EFULL;
    uint64_t start = net->chead;
    if (start % cap + len > cap) start += cap - start % cap;
    if (start + len - net->ctail > cap) return KV_EFULL;
    uint32_t s = (net->cf_head + net->cf_n) % net->cfg.packets_max;
    net->cf_n++;
    net->cfifo[s] = (sn_cslot){.end = start + len, .live = true};
    net->chead = start + len;
    *slot = s;
    *pos = start;
    return KV_OK;
}

static void ring_free(sim_net *net, uint32_t slot) {
    if (slot == KVT_NONE) return;
    net->cfifo[slot].live = false;
    for (uint32_t g = 0; g < net->cfg.packets_max && net->cf_n > 0 && !net->cfifo[net->cf_head].live; g++) {
        net->ctail = net->cfifo[net->cf_head].end;
        net->cf_head = (net->cf_head + 1u) % net->cfg.packets_max;
        net->cf_n--;
    }
    if (net->cf_n == 0) net->chead = net->ctail = 0;
}

static const uint8_t *ring_at(const sim_net *net, uint64_t pos) {
    return net->cbytes + (pos % net->cfg.ctrl_bytes_max);
}

/* ---- packet pool ---------------------------------------------------------------- */

static uint32_t pkt_alloc(sim_net *net, uint32_t kind) {
    uint32_t idx;
    if (kind == PK_DOWN) {
        if (net->n_free_down) idx = net->free_down[--net->n_free_down];
        else if (net->hw_down < net->down_max) idx = net->cfg.packets_max + net->hw_down++;
        else return KVT_NONE;
    } else {
        if (net->n_free_data) idx = net->free_data[--net->n_free_data];
        else if (net->hw_data < net->cfg.packets_max) idx = net->hw_data++;
        else return KVT_NONE;
    }
    sn_pkt *p = &net->pkt[idx];
    memset(p, 0, sizeof *p);
    p->kind = kind;
    p->seq = net->seq++;
    p->cslot = KVT_NONE;
    p->heap_pos = KVT_NONE;
    return idx;
}

/* Returns a packet (already out of the heap) to its pool. */
static void pkt_release(sim_net *net, uint32_t idx) {
    sn_pkt *p = &net->pkt[idx];
    if (p->kind == PK_CTRL) ring_free(net, p->cslot);
    p->kind = 0;
    if (idx >= net->cfg.packets_max) net->free_down[net->n_free_down++] = idx;
    else net->free_data[net->n_free_data++] = idx;
}

static void pkt_drop(sim_net *net, uint32_t idx) {
    if (net->pkt[idx].heap_pos != KVT_NONE) heap_remove(net, idx);
    pkt_release(net, idx);
}

static const kvt_write *pkt_writes(const sim_net *net, uint32_t idx) {
    return &net->wr[(size_t)idx * KVT_BATCH_WRITES_MAX];
}

/* Queues one PEER_DOWN for (node, ep, peer) unless one is already pending. */
static void queue_down(sim_net *net, uint32_t node, uint32_t ep, uint32_t peer) {
    sn_peer *pe = &net->node[node].ep[ep].peer[peer];
    if (pe->down_pending) return;
    uint32_t idx = pkt_alloc(net, PK_DOWN);
    if (idx == KVT_NONE) return; /* cannot happen: the reserve covers every (ep, peer) */
    sn_pkt *p = &net->pkt[idx];
    p->at = now_ns(net);
    p->dst = node;
    p->dst_ep = ep;
    p->peer = peer;
    pe->down_pending = true;
    heap_push(net, idx);
}

/* ---- transport ops -------------------------------------------------------------- */

static kv_status op_reg(kvt *t, void *base, uint64_t len, kvt_mem_kind kind, kvt_region *out) {
    (void)kind;
    sn_node *nd = t_node(t);
    if (nd->crashed) return KV_ECONNRESET;
    return kvt_region_add(&nd->reg, base, len, out);
}

static kv_status op_dereg(kvt *t, kvt_region id) {
    sn_node *nd = t_node(t);
    kvt_grant_remove_region(&nd->grants, id);
    return kvt_region_remove(&nd->reg, id);
}

static kv_status op_export_desc(kvt *t, kvt_region id, kvt_desc *out) {
    sn_node *nd = t_node(t);
    return kvt_region_desc(&nd->reg, id, out);
}

/* Deterministic and free of the choice stream: (node, counter) mixed. */
static kv_status op_grant(kvt *t, kvt_region r, kvt_ep ep, kvt_peer peer, uint64_t off, uint64_t len, uint32_t *out_id,
                          kvt_desc *out_desc) {
    sn_node *nd = t_node(t);
    if (!out_id || !out_desc) return KV_EINVAL;
    if (nd->crashed) return KV_ECONNRESET;
    const sn_region *reg = find_region(nd, r);
    const sn_ep *e = find_ep(nd, ep);
    if (!reg || !e || peer >= e->n_peers) return KV_ENOENT;
    if (len == 0 || !range_ok(reg, off, len)) return KV_ERANGE;
    uint64_t c = ++nd->grant_ctr;
    kvt_key key = {{sim_mix64(((uint64_t)nd->index << 40) ^ c), sim_mix64(sim_mix64(c) ^ nd->index)}};
    if (kvt_key_zero(&key)) key.w[0] = 1;
    kv_status st = kvt_grant_add(&nd->grants, r, ep, peer, off, len, &key, out_id);
    if (st == KV_OK) *out_desc = (kvt_desc){.region = *out_id, .len = off + len, .key = key};
    return st;
}

static kv_status op_revoke(kvt *t, uint32_t id) { return kvt_grant_remove(&t_node(t)->grants, id); }

static kv_status op_ep_open(kvt *t, uint32_t owner, kvt_ep *out_ep, kvt_addr *out_addr) {
    sn_node *nd = t_node(t);
    if (!out_ep) return KV_EINVAL;
    if (nd->crashed) return KV_ECONNRESET;
    if (nd->n_eps >= nd->net->cfg.eps_max) return KV_ENOMEM;
    uint32_t id = nd->n_eps++;
    sn_ep *e = &nd->ep[id];
    e->open = true;
    e->owner = owner;
    e->n_peers = 0;
    *out_ep = id;
    if (out_addr) {
        memset(out_addr, 0, sizeof *out_addr);
        snprintf(out_addr->s, sizeof out_addr->s, "sim:%u/%u", nd->index, id);
    }
    return KV_OK;
}

/* Canonical decimal: 1..10 digits, no leading zero, fits uint32. */
static bool parse_u32(const char **p, uint32_t *out) {
    const char *s = *p;
    uint64_t v = 0;
    uint32_t n = 0;
    for (; n < 11 && s[n] >= '0' && s[n] <= '9'; n++) v = v * 10u + (uint64_t)(s[n] - '0');
    if (n == 0 || n > 10 || v > UINT32_MAX || (n > 1 && s[0] == '0')) return false;
    *out = (uint32_t)v;
    *p = s + n;
    return true;
}

static bool parse_addr(const kvt_addr *a, uint32_t *node, uint32_t *ep) {
    if (!memchr(a->s, 0, sizeof a->s) || strncmp(a->s, "sim:", 4) != 0) return false;
    const char *p = a->s + 4;
    if (!parse_u32(&p, node) || *p != '/') return false;
    p++;
    return parse_u32(&p, ep) && *p == '\0';
}

static kv_status op_connect(kvt *t, kvt_ep ep, const kvt_addr *addr, kvt_peer *out) {
    sn_node *nd = t_node(t);
    sim_net *net = nd->net;
    uint32_t rn, re;
    if (!addr || !out) return KV_EINVAL;
    if (nd->crashed) return KV_ECONNRESET;
    sn_ep *e = find_ep(nd, ep);
    if (!e) return KV_ENOENT;
    if (!parse_addr(addr, &rn, &re)) return KV_EINVAL;
    sn_node *rnd = net_node(net, rn);
    if (!rnd) return KV_ENOENT;
    if (rnd->crashed) return KV_ECONNRESET;
    if (!find_ep(rnd, re)) return KV_ENOENT;
    uint32_t id = peer_get(net, e, rn, re);
    if (id == KVT_NONE) return KV_ENOMEM;
    *out = id;
    return KV_OK;
}

/* The remote side of (ep, peer): ENOENT for an unknown ep or peer,
 * ECONNRESET when the remote node or endpoint is gone. */
static kv_status route(sn_node *nd, kvt_ep ep, kvt_peer peer, sn_ep **out_e, sn_peer **out_p) {
    if (nd->crashed) return KV_ECONNRESET;
    sn_ep *e = find_ep(nd, ep);
    if (!e || peer >= e->n_peers) return KV_ENOENT;
    sn_peer *pe = &e->peer[peer];
    if (!find_ep(net_node(nd->net, pe->node), pe->ep)) return KV_ECONNRESET;
    *out_e = e;
    *out_p = pe;
    return KV_OK;
}

static kv_status check_local(sn_node *nd, const kvt_write *w, uint32_t n, uint64_t *bytes) {
    *bytes = 0;
    for (uint32_t i = 0; i < n; i++) {
        const sn_region *r = find_region(nd, w[i].local);
        if (!r || !range_ok(r, w[i].local_off, w[i].len)) return KV_ERANGE;
        *bytes += w[i].len;
    }
    return KV_OK;
}

static kv_status op_submit(kvt *t, kvt_ep ep, kvt_peer peer, const kvt_write *w, uint32_t n, uint64_t tag,
                           uint64_t deadline_ns) {
    sn_node *nd = t_node(t);
    sim_net *net = nd->net;
    sn_ep *e;
    sn_peer *pe;
    uint64_t bytes = 0;
    if (!w || n == 0 || n > KVT_BATCH_WRITES_MAX) return KV_EINVAL;
    kv_status st = route(nd, ep, peer, &e, &pe);
    if (st == KV_OK) st = check_local(nd, w, n, &bytes);
    if (st != KV_OK) return st;
    uint32_t idx = pkt_alloc(net, PK_BATCH);
    if (idx == KVT_NONE) return KV_EFULL;
    sn_pkt *p = &net->pkt[idx];
    uint64_t bw = sat_add(sat_mul(bytes >> 10, net->cfg.ns_per_kib), sat_mul(bytes & 1023u, net->cfg.ns_per_kib) >> 10);
    p->arrive = sat_add(sat_add(now_ns(net), draw_latency(net)), bw);
    p->deadline = deadline_ns;
    p->at = (deadline_ns != 0 && deadline_ns < p->arrive) ? deadline_ns : p->arrive;
    p->tag = tag;
    p->src = nd->index;
    p->src_ep = ep;
    p->dst = pe->node;
    p->dst_ep = pe->ep;
    p->peer = peer;
    p->n = n;
    if (nd->fault_armed) {
        p->fail_n = (nd->fault_n == 0 || nd->fault_n > n) ? n : nd->fault_n;
        p->perr = nd->fault_err;
        nd->fault_armed = false;
    }
    memcpy(&net->wr[(size_t)idx * KVT_BATCH_WRITES_MAX], w, (size_t)n * sizeof *w);
    net->stats.batches++;
    heap_push(net, idx);
    return KV_OK;
}

static kv_status op_send_ctrl(kvt *t, kvt_ep ep, kvt_peer peer, const void *buf, uint32_t len) {
    sn_node *nd = t_node(t);
    sim_net *net = nd->net;
    sn_ep *e;
    sn_peer *pe;
    if ((!buf && len > 0) || len > KV_WIRE_MAX) return KV_EINVAL;
    kv_status st = route(nd, ep, peer, &e, &pe);
    if (st != KV_OK) return st;
    if (net->n_free_data == 0 && net->hw_data == net->cfg.packets_max) return KV_EFULL;
    uint32_t slot;
    uint64_t pos;
    st = ring_alloc(net, len, &slot, &pos);
    if (st != KV_OK) return st;
    uint32_t idx = pkt_alloc(net, PK_CTRL);
    sn_pkt *p = &net->pkt[idx];
    uint64_t due = sat_add(now_ns(net), draw_latency(net));
    if (due < pe->last_due) due = pe->last_due;
    pe->last_due = due;
    p->at = due;
    p->src = nd->index;
    p->src_ep = ep;
    p->dst = pe->node;
    p->dst_ep = pe->ep;
    p->peer = peer;
    p->n = len;
    p->cslot = slot;
    p->cpos = pos;
    if (len) memcpy(net->cbytes + (pos % net->cfg.ctrl_bytes_max), buf, len);
    heap_push(net, idx);
    return KV_OK;
}

static kv_status op_poll(kvt *t, kvt_event *out, uint32_t max, uint32_t *out_n) {
    (void)t;
    (void)out;
    (void)max;
    if (!out_n) return KV_EINVAL;
    *out_n = 0; /* the world drives the sim network via sim_net_progress */
    return KV_OK;
}

static void op_close(kvt *t) { (void)t; }

static const kvt_ops sim_ops = {
    .size = sizeof(kvt_ops),
    .name = "sim",
    .reg = op_reg,
    .dereg = op_dereg,
    .export_desc = op_export_desc,
    .ep_open = op_ep_open,
    .connect = op_connect,
    .submit = op_submit,
    .send_ctrl = op_send_ctrl,
    .poll = op_poll,
    .close = op_close,
    .grant = op_grant,
    .revoke = op_revoke,
};

/* ---- delivery ------------------------------------------------------------------- */

/* The destination's grant check of one entry (the owner side's, as tcp's);
 * the destination region it may land in, or NULL (counted). */
static sn_region *granted(sim_net *net, const sn_pkt *p, const kvt_write *w) {
    sn_node *dst = &net->node[p->dst];
    const sn_ep *e = find_ep(dst, p->dst_ep);
    uint32_t peer = e ? find_peer(e, p->src, p->src_ep) : KVT_NONE;
    const kvt_grant_entry *g = NULL;
    kvt_grant_verdict v =
        kvt_grant_check(&dst->grants, w->remote, &w->key, p->dst_ep, peer, w->remote_off, w->len, &g);
    sn_region *rr = g ? find_region(dst, g->region) : NULL;
    if (g && (!rr || !range_ok(rr, w->remote_off, w->len))) v = KVT_GRANT_OUTSIDE;
    if (v == KVT_GRANT_OK) return rr;
    if (v == KVT_GRANT_NONE) {
        net->stats.grant_refused++;
        return NULL;
    }
    net->stats.grant_violations++;
    if (!net->viol.seen)
        net->viol = (sim_net_grant_violation){.seen = true, .verdict = (uint32_t)v, .src = p->src, .dst = p->dst,
                                              .grant = w->remote, .off = w->remote_off, .len = w->len,
                                              .at_ns = now_ns(net)};
    return NULL;
}

/* Applies one entry; false when either side is out of range or the
 * destination's grant refuses it. */
static bool apply_write(sim_net *net, const sn_pkt *p, const kvt_write *w) {
    sn_region *lr = find_region(&net->node[p->src], w->local);
    if (!lr || !range_ok(lr, w->local_off, w->len)) return false;
    sn_region *rr = granted(net, p, w);
    if (!rr) return false;
    if (w->len) memmove(rr->base + w->remote_off, lr->base + w->local_off, w->len);
    net->stats.writes++;
    net->stats.bytes += w->len;
    return true;
}

static void apply_batch(sim_net *net, uint32_t idx, kvt_completion *c) {
    const sn_pkt *p = &net->pkt[idx];
    const kvt_write *w = pkt_writes(net, idx);
    uint32_t first_fault = p->n - p->fail_n;
    bool range = false;
    for (uint32_t i = 0; i < p->n; i++) {
        if (i >= first_fault) {
            c->n_failed++;
        } else if (apply_write(net, p, &w[i])) {
            c->n_ok++;
        } else {
            c->n_failed++;
            net->stats.range_errors++;
            range = true;
        }
    }
    c->provider_err = p->fail_n ? p->perr : 0;
    c->status = p->fail_n ? KV_EIO : range ? KV_ERANGE : KV_OK;
}

static bool deliver_batch(sim_net *net, uint32_t idx, kvt_event *ev) {
    const sn_pkt *p = &net->pkt[idx];
    const sn_ep *e = find_ep(&net->node[p->src], p->src_ep);
    if (!e) return false; /* submitter gone (crash discards these earlier) */
    ev->kind = KVT_EV_DONE;
    ev->ep = p->src_ep;
    ev->owner = e->owner;
    ev->peer = p->peer;
    ev->done.tag = p->tag;
    if (p->state == PS_RESET || net->node[p->dst].crashed) {
        ev->done.n_failed = p->n;
        ev->done.status = KV_ECONNRESET;
        net->stats.resets += p->state != PS_RESET; /* reset ones were counted at the fault */
    } else if (p->deadline != 0 && p->deadline <= p->arrive) {
        ev->done.n_failed = p->n;
        ev->done.status = KV_ETIMEDOUT;
        net->stats.timeouts++;
    } else {
        apply_batch(net, idx, &ev->done);
    }
    return true;
}

static bool deliver_ctrl(sim_net *net, uint32_t idx, kvt_event *ev, uint8_t *dst) {
    const sn_pkt *p = &net->pkt[idx];
    sn_ep *e = find_ep(&net->node[p->dst], p->dst_ep);
    if (!e || net->node[p->dst].hung) return false; /* nobody reads it */
    ev->kind = KVT_EV_CTRL;
    ev->ep = p->dst_ep;
    ev->owner = e->owner;
    ev->peer = peer_get(net, e, p->src, p->src_ep);
    ev->len = p->n;
    if (p->n) memcpy(dst, ring_at(net, p->cpos), p->n);
    net->stats.ctrl_msgs++;
    return true;
}

static bool deliver_down(sim_net *net, uint32_t idx, kvt_event *ev) {
    const sn_pkt *p = &net->pkt[idx];
    sn_ep *e = find_ep(&net->node[p->dst], p->dst_ep);
    if (!e || p->peer >= e->n_peers || net->node[p->dst].hung) return false;
    e->peer[p->peer].down_pending = false;
    ev->kind = KVT_EV_PEER_DOWN;
    ev->ep = p->dst_ep;
    ev->owner = e->owner;
    ev->peer = p->peer;
    return true;
}

static bool deliver(sim_net *net, uint32_t idx, kvt_event *ev, uint8_t *ctrl) {
    memset(ev, 0, sizeof *ev);
    switch (net->pkt[idx].kind) {
    case PK_BATCH: return deliver_batch(net, idx, ev);
    case PK_CTRL: return deliver_ctrl(net, idx, ev, ctrl);
    case PK_DOWN: return deliver_down(net, idx, ev);
    default: return false;
    }
}

/* A batch reaching a hung node is not applied and not answered: it goes
 * back into the heap at its deadline (then it completes KV_ETIMEDOUT), or,
 * without one, at the end of time (the node's real crash resets it). */
static bool park_at_hung(sim_net *net, uint32_t idx, uint64_t now) {
    sn_pkt *p = &net->pkt[idx];
    if (p->kind != PK_BATCH || p->state != PS_LIVE || !net->node[p->dst].hung) return false;
    if (p->deadline != 0 && p->deadline <= now) return false; /* due: deliver_batch times it out */
    p->arrive = UINT64_MAX;
    p->at = p->deadline ? p->deadline : UINT64_MAX;
    heap_push(net, idx);
    return true;
}

kv_status sim_net_progress(sim_net *net, kvt_event *out, uint32_t *out_ctrl_off, uint32_t max, uint8_t *ctrl_buf,
                           uint32_t ctrl_cap, uint32_t *out_n) {
    if (!net || !out_n || (max > 0 && (!out || !out_ctrl_off)) || (ctrl_cap > 0 && !ctrl_buf)) return KV_EINVAL;
    *out_n = 0;
    uint64_t now = now_ns(net);
    uint32_t n = 0, coff = 0;
    for (uint32_t g = 0; g <= net->pkts_total && net->heap_n > 0; g++) {
        uint32_t idx = net->heap[0];
        const sn_pkt *p = &net->pkt[idx];
        if (p->at > now) break;
        if (n >= max) break;
        if (p->kind == PK_CTRL && p->n > ctrl_cap - coff) {
            *out_n = n;
            return (n == 0 && p->n > ctrl_cap) ? KV_EINVAL : KV_EAGAIN;
        }
        heap_remove(net, idx);
        if (park_at_hung(net, idx, now)) continue;
        out_ctrl_off[n] = coff;
        if (deliver(net, idx, &out[n], ctrl_buf ? ctrl_buf + coff : NULL)) {
            if (out[n].kind == KVT_EV_CTRL) coff += out[n].len;
            n++;
        }
        pkt_release(net, idx);
    }
    *out_n = n;
    return (net->heap_n > 0 && net->pkt[net->heap[0]].at <= now) ? KV_EAGAIN : KV_OK;
}

uint64_t sim_net_next_due(const sim_net *net) {
    if (!net || net->heap_n == 0) return UINT64_MAX;
    return net->pkt[net->heap[0]].at;
}

/* ---- faults --------------------------------------------------------------------- */

void sim_net_fault_batch(sim_net *net, uint32_t node, int32_t provider_err, uint32_t n_fail) {
    sn_node *nd = net ? net_node(net, node) : NULL;
    if (!nd) return;
    nd->fault_armed = true;
    nd->fault_err = provider_err;
    nd->fault_n = n_fail;
}

static bool between(const sn_pkt *p, uint32_t a, uint32_t b) {
    return (p->src == a && p->dst == b) || (p->src == b && p->dst == a);
}

/* Batches are marked reset and complete now; ctrl messages are lost. */
static void drop_between(sim_net *net, uint32_t a, uint32_t b) {
    uint64_t now = now_ns(net);
    for (uint32_t i = 0; i < net->cfg.packets_max; i++) {
        sn_pkt *p = &net->pkt[i];
        if (p->heap_pos == KVT_NONE || !between(p, a, b)) continue;
        if (p->kind == PK_CTRL) {
            net->stats.resets++;
            pkt_drop(net, i);
        } else if (p->kind == PK_BATCH && p->state != PS_RESET) {
            net->stats.resets++;
            p->state = PS_RESET;
            heap_advance(net, i, now);
        }
    }
}

/* One PEER_DOWN to every endpoint on `node` with a peer on `across`. */
static void down_across(sim_net *net, uint32_t node, uint32_t across) {
    sn_node *nd = &net->node[node];
    if (nd->crashed || nd->hung) return;
    for (uint32_t e = 0; e < nd->n_eps; e++) {
        if (!nd->ep[e].open) continue;
        for (uint32_t k = 0; k < nd->ep[e].n_peers; k++)
            if (nd->ep[e].peer[k].node == across) queue_down(net, node, e, k);
    }
}

void sim_net_fault_reset(sim_net *net, uint32_t a, uint32_t b) {
    if (!net || !net_node(net, a) || !net_node(net, b) || net->node[a].crashed || net->node[b].crashed ||
        net->node[a].hung || net->node[b].hung)
        return;
    drop_between(net, a, b);
    down_across(net, a, b);
    if (a != b) down_across(net, b, a);
}

/* Everything of the crashed node goes: its batches (no completion: the
 * submitter is dead), ctrl from or to it, its pending PEER_DOWNs; with
 * reset_incoming, batches towards it complete KV_ECONNRESET now. */
static void drop_node(sim_net *net, uint32_t n, bool reset_incoming) {
    uint64_t now = now_ns(net);
    for (uint32_t i = 0; i < net->pkts_total; i++) {
        if (i == net->hw_data && i < net->cfg.packets_max) i = net->cfg.packets_max; /* skip never-used */
        if (i >= net->cfg.packets_max + net->hw_down) break;
        sn_pkt *p = &net->pkt[i];
        if (p->heap_pos == KVT_NONE) continue;
        bool mine = p->kind == PK_DOWN ? p->dst == n : (p->src == n || (p->kind == PK_CTRL && p->dst == n));
        if (mine) {
            net->stats.resets += p->kind != PK_DOWN && p->state != PS_RESET;
            pkt_drop(net, i);
        } else if (reset_incoming && p->kind == PK_BATCH && p->dst == n && p->state != PS_RESET) {
            net->stats.resets++;
            p->state = PS_RESET;
            heap_advance(net, i, now);
        }
    }
}

static void wipe_node(sn_node *nd) {
    for (uint32_t e = 0; e < nd->net->cfg.eps_max; e++) {
        nd->ep[e].open = false;
        nd->ep[e].n_peers = 0;
    }
    nd->n_eps = 0;
    kvt_region_tab_clear(&nd->reg);
    kvt_grant_tab_clear(&nd->grants);
    nd->fault_armed = false;
    nd->fault_err = 0;
    nd->fault_n = 0;
}

void sim_net_fault_crash(sim_net *net, uint32_t node) {
    sn_node *nd = net ? net_node(net, node) : NULL;
    if (!nd || nd->crashed) return;
    nd->hung = false;
    drop_node(net, node, true);
    for (uint32_t m = 0; m < net->cfg.nodes_max; m++)
        if (m != node) down_across(net, m, node);
    wipe_node(nd);
    nd->crashed = true;
}

/* Its own traffic goes with it; what others send to it stays in flight
 * and is parked on arrival (park_at_hung). */
void sim_net_fault_hang(sim_net *net, uint32_t node) {
    sn_node *nd = net ? net_node(net, node) : NULL;
    if (!nd || nd->crashed || nd->hung) return;
    drop_node(net, node, false);
    nd->hung = true;
}

void sim_net_fault_restart(sim_net *net, uint32_t node) {
    sn_node *nd = net ? net_node(net, node) : NULL;
    if (nd) nd->crashed = false;
}

void sim_net_fault_delay(sim_net *net, uint64_t extra_ns, uint64_t window_ns) {
    if (!net) return;
    net->delay_extra = extra_ns;
    net->delay_until = sat_add(now_ns(net), window_ns);
}

void sim_net_stats_get(const sim_net *net, sim_net_stats *out) {
    if (!out) return;
    if (!net) {
        memset(out, 0, sizeof *out);
        return;
    }
    *out = net->stats;
}

/* ---- lifetime ------------------------------------------------------------------- */

static bool cfg_ok(const sim_net_cfg *c) {
    return c->nodes_max >= 1 && c->nodes_max <= SN_DIM_MAX && c->eps_max >= 1 && c->eps_max <= SN_DIM_MAX &&
           c->regions_max >= 1 && c->regions_max <= SN_DIM_MAX && c->packets_max >= 1 &&
           c->packets_max <= SN_PKTS_MAX && c->lat_min_ns <= c->lat_max_ns;
}

static void *alloc_n(const kv_env *env, size_t n, size_t size, bool *ok) {
    if (n != 0 && size > SIZE_MAX / n) {
        *ok = false;
        return NULL;
    }
    void *p = kv_alloc(env, n * size);
    if (!p) *ok = false;
    return p;
}

static bool alloc_tables(sim_net *net) {
    const kv_env *env = net->env;
    const sim_net_cfg *c = &net->cfg;
    size_t n_eps = (size_t)c->nodes_max * c->eps_max;
    bool ok = n_eps <= SIZE_MAX / net->peers_max;
    if (!ok) return false;
    net->node = alloc_n(env, c->nodes_max, sizeof *net->node, &ok);
    net->kvts = alloc_n(env, c->nodes_max, sizeof *net->kvts, &ok);
    net->eps = alloc_n(env, n_eps, sizeof *net->eps, &ok);
    net->peers = alloc_n(env, n_eps * net->peers_max, sizeof *net->peers, &ok);
    net->regs = alloc_n(env, c->nodes_max, (size_t)c->regions_max * sizeof *net->regs, &ok);
    net->grant_slab = alloc_n(env, c->nodes_max, (size_t)SN_GRANTS * sizeof *net->grant_slab, &ok);
    net->pkt = alloc_n(env, net->pkts_total, sizeof *net->pkt, &ok);
    net->wr = alloc_n(env, c->packets_max, KVT_BATCH_WRITES_MAX * sizeof *net->wr, &ok);
    net->heap = alloc_n(env, net->pkts_total, sizeof *net->heap, &ok);
    net->free_data = alloc_n(env, c->packets_max, sizeof *net->free_data, &ok);
    net->free_down = alloc_n(env, net->down_max ? net->down_max : 1u, sizeof *net->free_down, &ok);
    net->cbytes = alloc_n(env, c->ctrl_bytes_max ? c->ctrl_bytes_max : 1u, 1, &ok);
    net->cfifo = alloc_n(env, c->packets_max, sizeof *net->cfifo, &ok);
    return ok;
}

static void wire_tables(sim_net *net) {
    const sim_net_cfg *c = &net->cfg;
    for (uint32_t n = 0; n < c->nodes_max; n++) {
        sn_node *nd = &net->node[n];
        nd->net = net;
        nd->index = n;
        nd->ep = &net->eps[(size_t)n * c->eps_max];
        kvt_region_tab_init(&nd->reg, &net->regs[(size_t)n * c->regions_max], c->regions_max);
        kvt_grant_tab_init(&nd->grants, &net->grant_slab[(size_t)n * SN_GRANTS], SN_GRANTS);
        for (uint32_t e = 0; e < c->eps_max; e++)
            nd->ep[e].peer = &net->peers[((size_t)n * c->eps_max + e) * net->peers_max];
        net->kvts[n] = (kvt){.ops = &sim_ops, .impl = nd};
    }
}

kv_status sim_net_new(const kv_env *env, const sim_net_cfg *cfg, sim_choice *choice, sim_net **out) {
    if (!env || !cfg || !choice || !out || !cfg_ok(cfg)) return KV_EINVAL;
    *out = NULL;
    sim_net *net = kv_alloc(env, sizeof *net);
    if (!net) return KV_ENOMEM;
    memset(net, 0, sizeof *net);
    net->env = env;
    net->cfg = *cfg;
    uint64_t all_eps = (uint64_t)cfg->nodes_max * cfg->eps_max;
    net->peers_max = all_eps < SN_PEERS_MAX ? (uint32_t)all_eps : SN_PEERS_MAX;
    uint64_t down = all_eps * net->peers_max;
    if (down + cfg->packets_max > UINT32_MAX - 1u) {
        kv_release(env, net);
        return KV_EINVAL;
    }
    net->down_max = (uint32_t)down;
    net->pkts_total = cfg->packets_max + net->down_max;
    if (!alloc_tables(net)) {
        sim_net_free(net);
        return KV_ENOMEM;
    }
    wire_tables(net);
    for (uint32_t i = 0; i < net->pkts_total; i++) net->pkt[i].heap_pos = KVT_NONE;
    sim_net_reset(net, choice);
    *out = net;
    return KV_OK;
}

void sim_net_free(sim_net *net) {
    if (!net) return;
    const kv_env *env = net->env;
    void *p[] = {net->node, net->kvts, net->eps, net->peers, net->regs, net->grant_slab, net->pkt,
                 net->wr, net->heap, net->free_data, net->free_down, net->cbytes, net->cfifo};
    for (size_t i = 0; i < sizeof p / sizeof p[0]; i++) kv_release(env, p[i]);
    kv_release(env, net);
}

void sim_net_reset(sim_net *net, sim_choice *choice) {
    if (!net) return;
    if (choice) net->choice = choice;
    for (uint32_t n = 0; n < net->cfg.nodes_max; n++) {
        sn_node *nd = &net->node[n];
        wipe_node(nd);
        nd->reg.next_id = 1;
        nd->grants.seq = 1;
        nd->grant_ctr = 0;
        nd->crashed = nd->hung = false;
    }
    for (uint32_t i = 0; i < net->pkts_total; i++) {
        if (i == net->hw_data && i < net->cfg.packets_max) i = net->cfg.packets_max;
        if (i >= net->cfg.packets_max + net->hw_down) break;
        net->pkt[i].kind = 0;
        net->pkt[i].heap_pos = KVT_NONE;
    }
    net->heap_n = 0;
    net->n_free_data = net->n_free_down = 0;
    net->hw_data = net->hw_down = 0;
    net->chead = net->ctail = 0;
    net->cf_head = net->cf_n = 0;
    net->seq = 0;
    net->delay_until = net->delay_extra = 0;
    memset(&net->stats, 0, sizeof net->stats);
    memset(&net->viol, 0, sizeof net->viol);
}

bool sim_net_grant_violation_get(const sim_net *net, sim_net_grant_violation *out) {
    if (!net || !net->viol.seen) return false;
    if (out) *out = net->viol;
    return true;
}

kvt *sim_net_node(sim_net *net, uint32_t node) {
    if (!net || node >= net->cfg.nodes_max) return NULL;
    return &net->kvts[node];
}

kv_status sim_net_pump(sim_net *net, kv_rt *rt, sim_net_pump_buf *b) {
    kv_status st, out = KV_OK;
    do {
        uint32_t n = 0;
        st = sim_net_progress(net, b->ev, b->off, SIM_NET_PUMP_EVENTS, b->ctrl, sizeof b->ctrl, &n);
        for (uint32_t i = 0; i < n; i++) {
            const kvt_event *ev = &b->ev[i];
            uint32_t len = (uint32_t)sizeof *ev;
            memcpy(b->msg, ev, sizeof *ev);
            if (ev->kind == KVT_EV_CTRL) {
                uint32_t clen = ev->len <= KV_WIRE_MAX ? ev->len : 0;
                memcpy(b->msg + sizeof *ev, b->ctrl + b->off[i], clen);
                len += clen;
            }
            if (len > KV_MSG_PAYLOAD_MAX) {
                out = KV_EFULL;
                continue;
            }
            kv_rt_post(rt, ev->owner, KVT_MSG_EVENT, b->msg, len);
        }
    } while (st == KV_EAGAIN);
    return out;
}
