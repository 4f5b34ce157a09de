/* transport/rdma/kvt_rdma.c — the rdma kvt: qps.c's batch engine for data,
 * a TCP kvt for control and connection set-up; see rdma.h ("The rdma kvt").
 *
 * Per (endpoint, TCP peer) a link: NONE --connect/submit--> SENT (our QP
 * made, SETUP sent) --SETUP_ACK--> READY; an incoming SETUP makes the QP,
 * connects it and answers SETUP_ACK: READY. PEER_DOWN of the TCP peer puts
 * the link back to NONE (the next connect or submit sets up a fresh QP).
 * Set-up messages are ctrl messages that start with KVT_RDMA_SETUP_MAGIC
 * (core wire messages start with "KV"): the adapter consumes them, every
 * other ctrl message passes through unchanged.
 *
 * Single-threaded like every backend (wrap it in kvp_net). */
#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <unistd.h>

#include "transport/rdma/rdma.h"
#include "transport/tcp/tcp.h"

enum { L_NONE = 0, L_SENT = 1, L_READY = 2 };
enum { S_SETUP = 1, S_ACK = 2, S_REGION = 3 };

/* Raw struct bytes: both ends run the same build (as the bridge's payloads). */
typedef struct setup_msg {
    char magic[4];
    uint32_t type;
    kvt_rdma_qp_info info;
    uint32_t n_regions;
    kvt_rdma_remote_region region[KVT_RDMA_REGIONS_MAX];
} setup_msg;

/* A region registered (add = 1) or deregistered after set-up. */
typedef struct region_msg {
    char magic[4];
    uint32_t type; /* S_REGION */
    uint32_t add;
    uint32_t pad_;
    kvt_rdma_remote_region region; /* add: all of it; remove: id only */
} region_msg;

typedef struct rlink {
    uint8_t state;
    kvt_peer qp_peer; /* the engine's peer (its QP) */
} rlink;

/* A write grant: its own remotely writable registration (id = the grant's
 * id, what the grantee names), bound to one link. */
typedef struct rgrant {
    bool used;
    kvt_region id, region;
    kvt_ep ep;
    kvt_peer peer;
} rgrant;

typedef struct rbatch {
    bool used;
    kvt_ep ep;
    kvt_peer peer;
    uint64_t tag;
} rbatch;

typedef struct rdma_kvt {
    kvt self;
    const kv_env *env;
    kvt *ctrl;                /* owned */
    kvt_rdma_qps *q;          /* owned */
    uint32_t owner[KVT_TCP_EPS_MAX];
    rlink link[KVT_TCP_EPS_MAX][KVT_TCP_PEERS_MAX];
    uint32_t qp_ep[KVT_RDMA_QPS_MAX], qp_tcp_peer[KVT_RDMA_QPS_MAX]; /* engine peer -> (ep, TCP peer) */
    kvt_region regs[KVT_RDMA_REGIONS_MAX];
    uint32_t n_regs;
    rgrant grant[KV_NODE_GRANTS_MAX];
    rbatch batch[KVT_RDMA_BATCHES_MAX];
    kvt_event in[KVT_TCP_POLL_EVENTS_MAX];
    kvt_completion done[KVT_TCP_POLL_EVENTS_MAX];
    kvt_peer done_peer[KVT_TCP_POLL_EVENTS_MAX];
    const uint8_t *ev_data[KVT_TCP_POLL_EVENTS_MAX];
    uint32_t ev_n;
    int busy_rd, busy_wr;     /* a pipe kept readable: "WRs in flight, do not sleep" */
    setup_msg msg;
    kvt_rdma_counters c;
} rdma_kvt;

static rdma_kvt *R(kvt *t) { return (rdma_kvt *)t->impl; }

static rlink *link_of(rdma_kvt *r, kvt_ep ep, kvt_peer peer) {
    return ep < KVT_TCP_EPS_MAX && peer < KVT_TCP_PEERS_MAX ? &r->link[ep][peer] : NULL;
}

/* ---- memory ------------------------------------------------------------------------ */

static kv_status send_region(rdma_kvt *r, kvt_ep ep, kvt_peer peer, bool add, const kvt_rdma_remote_region *rr) {
    region_msg m;
    memset(&m, 0, sizeof m);
    memcpy(m.magic, KVT_RDMA_SETUP_MAGIC, 4);
    m.type = S_REGION;
    m.add = add;
    m.region = *rr;
    return kvt_send_ctrl(r->ctrl, ep, peer, &m, (uint32_t)sizeof m);
}

/* Every link that has sent its SETUP hears of the change; one not set up
 * yet sends the whole table when it is. */
static void announce(rdma_kvt *r, bool add, const kvt_rdma_remote_region *rr) {
    for (uint32_t e = 0; e < KVT_TCP_EPS_MAX; e++)
        for (uint32_t k = 0; k < KVT_TCP_PEERS_MAX; k++)
            if (r->link[e][k].state != L_NONE && send_region(r, e, k, add, rr) != KV_OK)
                kv_logf(r->env, KV_LOG_WARN, "rdma: region %u %s not announced to peer %u", rr->id,
                        add ? "added" : "removed", k);
}

static kv_status op_reg(kvt *t, void *base, uint64_t len, kvt_mem_kind kind, kvt_region *out) {
    rdma_kvt *r = R(t);
    if (!base || !len || !out) return KV_EINVAL;
    if (kind != KVT_MEM_HOST) return KV_ENOSYS; /* GPUDirect (a CUDA MR) is not wired */
    if (r->n_regs >= KVT_RDMA_REGIONS_MAX) return KV_ENOMEM;
    kv_status st = kvt_rdma_reg(r->q, base, len, out);
    if (st != KV_OK) return st;
    r->regs[r->n_regs++] = *out;
    kvt_rdma_remote_region rr;
    if (kvt_rdma_export(r->q, *out, &rr) == KV_OK) {
        rr.rkey = 0; /* not writable: only grants are */
        announce(r, true, &rr);
    }
    return KV_OK;
}

static kv_status op_revoke(kvt *t, uint32_t id);

static kv_status op_dereg(kvt *t, kvt_region id) {
    rdma_kvt *r = R(t);
    for (uint32_t i = 0; i < KV_NODE_GRANTS_MAX; i++)
        if (r->grant[i].used && r->grant[i].region == id) op_revoke(t, r->grant[i].id);
    kv_status st = kvt_rdma_dereg(r->q, id);
    for (uint32_t i = 0; st == KV_OK && i < r->n_regs; i++)
        if (r->regs[i] == id) r->regs[i] = r->regs[--r->n_regs];
    if (st == KV_OK) announce(r, false, &(kvt_rdma_remote_region){.id = id});
    return st;
}

static kv_status op_export_desc(kvt *t, kvt_region id, kvt_desc *out) {
    kvt_rdma_remote_region rr;
    if (!out) return KV_EINVAL;
    kv_status st = kvt_rdma_export(R(t)->q, id, &rr);
    if (st == KV_OK) *out = (kvt_desc){.region = id, .len = rr.len};
    return st;
}

static kv_status start_link(rdma_kvt *r, kvt_ep ep, kvt_peer peer);

/* The window registered again, remotely writable; its rkey is the key. The
 * grantee's link hears of it (and only that link); offsets stay the
 * region's: the announced address is the region's start. */
static kv_status op_grant(kvt *t, kvt_region reg, kvt_ep ep, kvt_peer peer, uint64_t off, uint64_t len,
                          uint32_t *out_id, kvt_desc *out_desc) {
    rdma_kvt *r = R(t);
    kvt_rdma_remote_region rr;
    if (!out_id || !out_desc) return KV_EINVAL;
    bool plain = false;
    for (uint32_t i = 0; i < r->n_regs; i++) plain |= r->regs[i] == reg;
    if (!plain || kvt_rdma_export(r->q, reg, &rr) != KV_OK || !link_of(r, ep, peer)) return KV_ENOENT;
    if (len == 0 || off > rr.len || len > rr.len - off) return KV_ERANGE;
    uint32_t gi = 0;
    while (gi < KV_NODE_GRANTS_MAX && r->grant[gi].used) gi++;
    if (gi == KV_NODE_GRANTS_MAX) return KV_ENOMEM;
    kv_status st = start_link(r, ep, peer); /* the announcement needs a link (a no-op once there is one) */
    kvt_region id = KVT_NONE;
    if (st == KV_OK) st = kvt_rdma_reg_remote(r->q, (void *)(uintptr_t)(rr.addr + off), len, &id);
    if (st != KV_OK) return st;
    kvt_rdma_remote_region mine;
    kvt_rdma_export(r->q, id, &mine);
    kvt_rdma_remote_region ann = {.id = id, .addr = rr.addr, .len = off + len, .rkey = 0};
    st = send_region(r, ep, peer, true, &ann);
    if (st != KV_OK) {
        kvt_rdma_dereg(r->q, id);
        return st;
    }
    r->grant[gi] = (rgrant){.used = true, .id = id, .region = reg, .ep = ep, .peer = peer};
    *out_id = id;
    *out_desc = (kvt_desc){.region = id, .len = off + len, .key = {{mine.rkey, 0}}};
    return KV_OK;
}

static kv_status op_revoke(kvt *t, uint32_t id) {
    rdma_kvt *r = R(t);
    for (uint32_t i = 0; i < KV_NODE_GRANTS_MAX; i++) {
        rgrant *g = &r->grant[i];
        if (!g->used || g->id != id) continue;
        kv_status st = kvt_rdma_dereg(r->q, id);
        rlink *l = link_of(r, g->ep, g->peer);
        if (l && l->state != L_NONE) (void)send_region(r, g->ep, g->peer, false, &(kvt_rdma_remote_region){.id = id});
        memset(g, 0, sizeof *g);
        return st;
    }
    return KV_ENOENT;
}

/* ---- set-up ------------------------------------------------------------------------ */

static kv_status send_setup(rdma_kvt *r, kvt_ep ep, kvt_peer peer, uint32_t type, const kvt_rdma_qp_info *info) {
    setup_msg *m = &r->msg;
    memset(m, 0, sizeof *m);
    memcpy(m->magic, KVT_RDMA_SETUP_MAGIC, 4);
    m->type = type;
    m->info = *info;
    for (uint32_t i = 0; i < r->n_regs; i++)
        if (kvt_rdma_export(r->q, r->regs[i], &m->region[m->n_regions]) == KV_OK) {
            m->region[m->n_regions].rkey = 0; /* not writable: only grants are */
            m->n_regions++;
        }
    return kvt_send_ctrl(r->ctrl, ep, peer, m, (uint32_t)sizeof *m);
}

static kv_status new_qp(rdma_kvt *r, kvt_ep ep, kvt_peer peer, kvt_rdma_qp_info *info) {
    rlink *l = link_of(r, ep, peer);
    kv_status st = kvt_rdma_peer_new(r->q, &l->qp_peer, info);
    if (st != KV_OK) return st;
    r->qp_ep[l->qp_peer] = ep;
    r->qp_tcp_peer[l->qp_peer] = peer;
    r->c.qps++;
    return KV_OK;
}

/* Our side opens: QP, then SETUP with its info and our regions. */
static kv_status start_link(rdma_kvt *r, kvt_ep ep, kvt_peer peer) {
    rlink *l = link_of(r, ep, peer);
    if (!l) return KV_ENOENT;
    if (l->state != L_NONE) return KV_OK;
    kvt_rdma_qp_info info;
    kv_status st = new_qp(r, ep, peer, &info);
    if (st == KV_OK) st = send_setup(r, ep, peer, S_SETUP, &info);
    if (st == KV_OK) l->state = L_SENT;
    return st;
}

static void on_region(rdma_kvt *r, const kvt_event *ev, const uint8_t *bytes) {
    region_msg m;
    memcpy(&m, bytes, sizeof m);
    rlink *l = link_of(r, ev->ep, ev->peer);
    if (!l || l->state == L_NONE) return; /* no QP: the next set-up brings the whole table */
    kv_status st = kvt_rdma_peer_region(r->q, l->qp_peer, m.add ? &m.region : NULL, m.region.id);
    if (st != KV_OK)
        kv_logf(r->env, KV_LOG_ERROR, "rdma: region update from peer %u failed: %s", ev->peer, kv_status_str(st));
}

static void on_setup(rdma_kvt *r, const kvt_event *ev, const uint8_t *bytes) {
    setup_msg m;
    rlink *l = link_of(r, ev->ep, ev->peer);
    uint32_t type = 0;
    if (ev->len >= 8) memcpy(&type, bytes + 4, sizeof type);
    if (type == S_REGION) {
        if (ev->len == sizeof(region_msg)) on_region(r, ev, bytes);
        else kv_logf(r->env, KV_LOG_ERROR, "rdma: malformed region message (%u bytes) dropped", ev->len);
        return;
    }
    if (!l || ev->len != sizeof m) {
        kv_logf(r->env, KV_LOG_ERROR, "rdma: malformed set-up message (%u bytes) dropped", ev->len);
        return;
    }
    memcpy(&m, bytes, sizeof m);
    if (m.n_regions > KVT_RDMA_REGIONS_MAX || (m.type != S_SETUP && m.type != S_ACK)) {
        kv_logf(r->env, KV_LOG_ERROR, "rdma: bad set-up message dropped");
        return;
    }
    kv_status st = KV_OK;
    if (m.type == S_SETUP) { /* the peer opened (or re-opened): a fresh QP answers it */
        kvt_rdma_qp_info info;
        st = new_qp(r, ev->ep, ev->peer, &info);
        if (st == KV_OK) st = kvt_rdma_peer_connect(r->q, l->qp_peer, &m.info, m.region, m.n_regions);
        if (st == KV_OK) st = send_setup(r, ev->ep, ev->peer, S_ACK, &info);
    } else if (l->state == L_SENT) {
        st = kvt_rdma_peer_connect(r->q, l->qp_peer, &m.info, m.region, m.n_regions);
    } else {
        kv_logf(r->env, KV_LOG_WARN, "rdma: unexpected SETUP_ACK dropped");
        return;
    }
    if (st != KV_OK) {
        kv_logf(r->env, KV_LOG_ERROR, "rdma: QP set-up with peer %u failed: %s", ev->peer, kv_status_str(st));
        l->state = L_NONE;
        return;
    }
    l->state = L_READY;
    r->c.links_ready++;
}

/* ---- endpoints, submit, ctrl ------------------------------------------------------- */

static kv_status op_ep_open(kvt *t, uint32_t owner, kvt_ep *out_ep, kvt_addr *out_addr) {
    rdma_kvt *r = R(t);
    kv_status st = kvt_ep_open(r->ctrl, owner, out_ep, out_addr);
    if (st == KV_OK && *out_ep < KVT_TCP_EPS_MAX) r->owner[*out_ep] = owner;
    return st;
}

static kv_status op_connect(kvt *t, kvt_ep ep, const kvt_addr *addr, kvt_peer *out) {
    rdma_kvt *r = R(t);
    kv_status st = kvt_connect(r->ctrl, ep, addr, out);
    return st == KV_OK ? start_link(r, ep, *out) : st;
}

/* Not yet set up: KV_EFULL (kvp_net's submit waits for the progress thread,
 * which completes the set-up), nothing posted. */
static kv_status op_submit(kvt *t, kvt_ep ep, kvt_peer peer, const kvt_write *w, uint32_t n, uint64_t tag,
                           uint64_t deadline_ns) {
    rdma_kvt *r = R(t);
    (void)deadline_ns; /* posted WRs end at the NIC's retry timeout (RETRY_EXC_ERR -> KV_ECONNRESET) */
    rlink *l = link_of(r, ep, peer);
    if (!w || n == 0 || n > KVT_BATCH_WRITES_MAX) return KV_EINVAL;
    if (!l) return KV_ENOENT;
    if (l->state != L_READY) {
        kv_status st = start_link(r, ep, peer);
        r->c.not_ready++;
        return st == KV_OK ? KV_EFULL : st;
    }
    uint32_t bi = UINT32_MAX;
    for (uint32_t i = 0; i < KVT_RDMA_BATCHES_MAX && bi == UINT32_MAX; i++)
        if (!r->batch[i].used) bi = i;
    if (bi == UINT32_MAX) return KV_EFULL;
    kv_status st = kvt_rdma_submit(r->q, l->qp_peer, w, n, bi);
    if (st != KV_OK) return st;
    r->batch[bi] = (rbatch){.used = true, .ep = ep, .peer = peer, .tag = tag};
    r->c.batches++;
    r->c.writes += n;
    if (r->c.batches - r->c.completions == 1) (void)!write(r->busy_wr, "b", 1); /* first in flight */
    return KV_OK;
}

static kv_status op_send_ctrl(kvt *t, kvt_ep ep, kvt_peer peer, const void *buf, uint32_t len) {
    rdma_kvt *r = R(t);
    if (len >= 4 && buf && memcmp(buf, KVT_RDMA_SETUP_MAGIC, 4) == 0) return KV_EINVAL; /* reserved */
    return kvt_send_ctrl(r->ctrl, ep, peer, buf, len);
}

/* ---- poll -------------------------------------------------------------------------- */

static kv_status op_poll(kvt *t, kvt_event *out, uint32_t max, uint32_t *out_n) {
    rdma_kvt *r = R(t);
    if (!out_n || (max && !out)) return KV_EINVAL;
    *out_n = 0;
    r->ev_n = 0;
    uint32_t cap = max < KVT_TCP_POLL_EVENTS_MAX ? max : KVT_TCP_POLL_EVENTS_MAX, n = 0, got = 0;
    kv_status st = kvt_poll(r->ctrl, r->in, cap, &got);
    if (st != KV_OK) return st;
    for (uint32_t i = 0; i < got; i++) {
        const kvt_event *ev = &r->in[i];
        const uint8_t *bytes = NULL;
        if (ev->kind == KVT_EV_CTRL && kvt_tcp_event_data(r->ctrl, i, &bytes) == KV_OK && ev->len >= 4 &&
            memcmp(bytes, KVT_RDMA_SETUP_MAGIC, 4) == 0) {
            on_setup(r, ev, bytes);
            continue;
        }
        if (ev->kind == KVT_EV_PEER_DOWN) {
            rlink *l = link_of(r, ev->ep, ev->peer);
            if (l) l->state = L_NONE; /* its QP's WRs end on the CQ (flush / retry exceeded) */
        }
        out[n] = *ev;
        r->ev_data[n] = ev->kind == KVT_EV_CTRL ? bytes : NULL;
        n++;
    }
    uint32_t k = 0;
    st = kvt_rdma_poll(r->q, r->done, r->done_peer, cap - n, &k);
    for (uint32_t i = 0; i < k; i++) {
        uint64_t bi = r->done[i].tag;
        if (bi >= KVT_RDMA_BATCHES_MAX || !r->batch[bi].used) continue;
        rbatch *b = &r->batch[bi];
        kvt_event *ev = &out[n];
        memset(ev, 0, sizeof *ev);
        ev->kind = KVT_EV_DONE;
        ev->ep = b->ep;
        ev->owner = r->owner[b->ep];
        ev->peer = b->peer;
        ev->done = r->done[i];
        ev->done.tag = b->tag;
        r->ev_data[n] = NULL;
        n++;
        b->used = false;
        if (++r->c.completions == r->c.batches) { /* none in flight: let the driver sleep */
            char junk[8];
            while (read(r->busy_rd, junk, sizeof junk) > 0) {}
        }
    }
    r->ev_n = n;
    *out_n = n;
    return st;
}

kv_status kvt_rdma_event_data(kvt *t, uint32_t i, const uint8_t **out) {
    if (!t || !out) return KV_EINVAL;
    rdma_kvt *r = R(t);
    if (i >= r->ev_n || !r->ev_data[i]) return KV_ENOENT;
    *out = r->ev_data[i];
    return KV_OK;
}

kv_status kvt_rdma_pollfds(kvt *t, struct pollfd *out, uint32_t cap, uint32_t *out_n) {
    rdma_kvt *r = R(t);
    if (!out_n || (cap && !out)) return KV_EINVAL;
    uint32_t k = 0;
    kv_status st = kvt_tcp_pollfds(r->ctrl, out, cap, &k);
    if (st == KV_OK && k < cap) out[k++] = (struct pollfd){.fd = r->busy_rd, .events = POLLIN};
    else if (st == KV_OK) st = KV_EFULL;
    *out_n = k;
    return st;
}

void kvt_rdma_counters_get(kvt *t, kvt_rdma_counters *out) { *out = R(t)->c; }

/* ---- lifetime ---------------------------------------------------------------------- */

static void op_close(kvt *t) {
    if (!t) return;
    rdma_kvt *r = R(t);
    kvt_rdma_qps_free(r->q);
    kvt_tcp_free(r->ctrl);
    if (r->busy_rd >= 0) close(r->busy_rd);
    if (r->busy_wr >= 0) close(r->busy_wr);
    kv_release(r->env, r);
}

static const kvt_ops rdma_ops = {
    .size = sizeof(kvt_ops),
    .name = "rdma",
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

kv_status kvt_rdma_new(const kv_env *env, const kvt_rdma_cfg *cfg, kvt **out) {
    if (!env || !cfg || !cfg->ctrl || !cfg->verbs || !out) return KV_EINVAL;
    rdma_kvt *r = kv_alloc(env, sizeof *r);
    if (!r) return KV_ENOMEM;
    memset(r, 0, sizeof *r);
    r->env = env;
    r->busy_rd = r->busy_wr = -1;
    int p[2];
    kv_status st = kvt_rdma_qps_new(env, cfg->verbs, cfg->max_outstanding ? cfg->max_outstanding : 1024u, &r->q);
    if (st == KV_OK && pipe(p) != 0) st = KV_EIO;
    if (st != KV_OK) {
        kvt_rdma_qps_free(r->q);
        kv_release(env, r);
        return st;
    }
    for (int i = 0; i < 2; i++) (void)fcntl(p[i], F_SETFL, fcntl(p[i], F_GETFL, 0) | O_NONBLOCK);
    r->busy_rd = p[0];
    r->busy_wr = p[1];
    r->ctrl = cfg->ctrl;
    r->self = (kvt){.ops = &rdma_ops, .impl = r};
    *out = &r->self;
    return KV_OK;
}

void kvt_rdma_free(kvt *t) {
    if (t) t->ops->close(t);
}
