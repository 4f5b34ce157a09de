/* kvconn/transport.h — the pluggable transport (libfabric-style ops table).
 *
 * One kvt instance is one node's view of the network: it owns the memory
 * regions registered on that node and the endpoints its actors use. Three
 * backends implement this table: sim (sim/sim_transport.c), tcp
 * (transport/tcp) and rdma (transport/rdma).
 *
 * Contract (libuv style):
 *  - submit: a batch of WRITEs (local region, offset) -> (remote region,
 *    offset, len) with a tag and a deadline. An accepted batch yields exactly
 *    one completion carrying per-entry ok/failed counts and the raw provider
 *    error; a rejected submit (non-zero return) yields none.
 *  - poll: progress, never blocks. Deadlines are enforced here with the
 *    env's clock; a timed-out batch completes only once no DMA can still touch
 *    its buffers. Events are handed to the driver (the simulator's world or
 *    the production progress thread), which posts each one into the mailbox of
 *    the endpoint's owner actor as a KVT_MSG_EVENT message.
 *  - control messages are small, ordered per peer (vLLM's ZMQ side channel).
 *  - remote memory is (region, offset), never an address; every backend bounds
 *    checks it on the side that owns the memory.
 *  - a registered region is never writable by a peer: it is a source for
 *    our own WRITEs and the memory that grants open. Registering memory that
 *    is already registered gives a new, independent id over it.
 *  - write capabilities (grants, like RDMA rkeys): grant(r, ep, peer, off,
 *    len) lets the peer that `peer` names on endpoint `ep` (and no other)
 *    WRITE into [off, off + len) of our region r until revoke(id). It gives
 *    the grant's local id and the descriptor the peer writes through: its
 *    region field is what the peer names as kvt_write.remote, its key an
 *    unguessable capability the peer presents as kvt_write.key with every
 *    entry (at least 64 random bits; the sim derives them from a counter,
 *    never from the scenario's choice stream). Offsets stay relative to the
 *    start of r, so a peer computes them as it would for the whole region.
 *    The owner refuses (entry failed, KV_ERANGE) an entry with no live grant,
 *    a wrong key, from another peer or endpoint, or outside the window, and
 *    counts it. Once revoke (or a dereg of r) returns, no WRITE through the
 *    grant lands, whether submitted later or already in flight. D's receiver
 *    grants each pull's P ranks their windows and revokes them before it
 *    reports the pull's requests (core/p2p_receiver.c). */
#ifndef KVCONN_TRANSPORT_H
#define KVCONN_TRANSPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kvconn/limits.h"
#include "kvconn/status.h"

typedef struct kvt kvt;

typedef enum kvt_mem_kind { KVT_MEM_HOST = 0, KVT_MEM_CUDA = 1 } kvt_mem_kind;

/* A node-unique region id. */
typedef uint32_t kvt_region;
/* An endpoint id, unique within one kvt. */
typedef uint32_t kvt_ep;
/* A connected peer, as seen from one endpoint. */
typedef uint32_t kvt_peer;

#define KVT_NONE UINT32_MAX
/* Most WRITE entries one submit may carry; callers split larger rounds. */
#define KVT_BATCH_WRITES_MAX 64u

/* An endpoint's public address ("sim:3/7", "127.0.0.1:40112"). */
typedef struct kvt_addr {
    char s[KV_ADDR_MAX]; /* NUL-terminated */
} kvt_addr;

/* A write capability's secret: 128 bits (RDMA: the rkey in w[0], the rest
 * zero). All zero is never a live grant's key. */
typedef struct kvt_key {
    uint64_t w[2];
} kvt_key;

/* What a peer needs to address one of our regions, or to write through one
 * of our grants (key zero for a plain region: not writable). */
typedef struct kvt_desc {
    kvt_region region; /* id on the owning node (a grant: what the peer names) */
    uint64_t len;      /* bytes (a grant: the end of its window, off + len) */
    kvt_key key;       /* a grant's key */
} kvt_desc;

typedef struct kvt_write {
    kvt_region local;  /* source region on this node */
    uint64_t local_off;
    kvt_region remote; /* destination on the peer's node: a grant's desc.region */
    uint64_t remote_off; /* from the start of the granted region */
    uint32_t len;
    kvt_key key;       /* the grant's key, presented with the entry */
} kvt_write;

typedef enum kvt_event_kind { KVT_EV_CTRL = 1, KVT_EV_DONE = 2, KVT_EV_PEER_DOWN = 3 } kvt_event_kind;

typedef struct kvt_completion {
    uint64_t tag;         /* as submitted */
    uint32_t n_ok;        /* entries written */
    uint32_t n_failed;    /* entries not written */
    int32_t provider_err; /* raw backend error (0 = none) */
    kv_status status;     /* KV_OK, KV_ETIMEDOUT, KV_ECONNRESET, KV_ERANGE, KV_EIO */
} kvt_completion;

/* One event for one endpoint's owner. For KVT_EV_CTRL the message bytes
 * follow the struct in the posted payload (len bytes). */
typedef struct kvt_event {
    uint32_t kind;  /* kvt_event_kind */
    kvt_ep ep;      /* receiving endpoint */
    uint32_t owner; /* owner actor of ep */
    kvt_peer peer;  /* who sent it / whose batch completed */
    uint32_t len;   /* KVT_EV_CTRL: bytes that follow */
    uint32_t pad_;  /* zero; keeps the struct free of holes */
    kvt_completion done; /* KVT_EV_DONE */
} kvt_event;

/* Message kind the driver uses when it posts a kvt_event to an actor. */
#define KVT_MSG_EVENT 0x7e000001u

typedef struct kvt_ops {
    size_t size;      /* sizeof(kvt_ops); first so the table can grow */
    const char *name; /* "sim", "tcp", "rdma" */
    kv_status (*reg)(kvt *t, void *base, uint64_t len, kvt_mem_kind kind, kvt_region *out);
    kv_status (*dereg)(kvt *t, kvt_region r);
    kv_status (*export_desc)(kvt *t, kvt_region r, kvt_desc *out);
    /* Open an endpoint whose events go to actor `owner`. */
    kv_status (*ep_open)(kvt *t, uint32_t owner, kvt_ep *out_ep, kvt_addr *out_addr);
    /* Connect ep to the endpoint at addr; idempotent per (ep, addr). */
    kv_status (*connect)(kvt *t, kvt_ep ep, const kvt_addr *addr, kvt_peer *out);
    kv_status (*submit)(kvt *t, kvt_ep ep, kvt_peer peer, const kvt_write *w, uint32_t n,
                        uint64_t tag, uint64_t deadline_ns);
    kv_status (*send_ctrl)(kvt *t, kvt_ep ep, kvt_peer peer, const void *buf, uint32_t len);
    /* Progress; writes up to max events into out. Never blocks. */
    kv_status (*poll)(kvt *t, kvt_event *out, uint32_t max, uint32_t *out_n);
    void (*close)(kvt *t);
    /* Write capabilities ("grants" above). grant: KV_ENOENT (no region r,
     * endpoint or peer), KV_ERANGE (window outside r or empty), KV_ENOMEM
     * (grant table full). revoke: KV_ENOENT for an id not live. */
    kv_status (*grant)(kvt *t, kvt_region r, kvt_ep ep, kvt_peer peer, uint64_t off, uint64_t len,
                       uint32_t *out_id, kvt_desc *out_desc);
    kv_status (*revoke)(kvt *t, uint32_t id);
} kvt_ops;

struct kvt {
    const kvt_ops *ops;
    void *impl; /* backend state, owned by the backend */
};

static inline kv_status kvt_reg(kvt *t, void *b, uint64_t n, kvt_mem_kind k, kvt_region *o) {
    return t->ops->reg(t, b, n, k, o);
}
static inline kv_status kvt_dereg(kvt *t, kvt_region r) { return t->ops->dereg(t, r); }
static inline kv_status kvt_export_desc(kvt *t, kvt_region r, kvt_desc *o) {
    return t->ops->export_desc(t, r, o);
}
static inline kv_status kvt_ep_open(kvt *t, uint32_t owner, kvt_ep *o, kvt_addr *a) {
    return t->ops->ep_open(t, owner, o, a);
}
static inline kv_status kvt_connect(kvt *t, kvt_ep ep, const kvt_addr *a, kvt_peer *o) {
    return t->ops->connect(t, ep, a, o);
}
static inline kv_status kvt_submit(kvt *t, kvt_ep ep, kvt_peer p, const kvt_write *w, uint32_t n,
                                   uint64_t tag, uint64_t deadline_ns) {
    return t->ops->submit(t, ep, p, w, n, tag, deadline_ns);
}
static inline kv_status kvt_send_ctrl(kvt *t, kvt_ep ep, kvt_peer p, const void *b, uint32_t n) {
    return t->ops->send_ctrl(t, ep, p, b, n);
}
static inline kv_status kvt_grant(kvt *t, kvt_region r, kvt_ep ep, kvt_peer p, uint64_t off, uint64_t len,
                                  uint32_t *id, kvt_desc *d) {
    return t->ops->grant(t, r, ep, p, off, len, id, d);
}
static inline kv_status kvt_revoke(kvt *t, uint32_t id) { return t->ops->revoke(t, id); }
static inline kv_status kvt_poll(kvt *t, kvt_event *o, uint32_t max, uint32_t *n) {
    return t->ops->poll(t, o, max, n);
}

#endif
