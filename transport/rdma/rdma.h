/* transport/rdma/rdma.h — RDMA WRITE over RC queue pairs (rdma-core).
 *
 * Layers:
 *   kvt_rdma_verbs   the verbs calls this backend makes, as an ops table.
 *                    verbs_ibv.c binds it to libibverbs (-DKVCONN_RDMA=ON,
 *                    found with pkg-config libibverbs); tests bind it to a
 *                    fake (tests/test_rdma_fake.c) to drive every error path
 *                    without a NIC.
 *   kvt_rdma_qps     per-QP batch engine: a kvt batch of WRITEs becomes one
 *                    signalled RDMA WRITE work request per entry on the
 *                    peer's RC QP; at most max_outstanding WRs per QP are in
 *                    flight (a submit that would exceed it is refused with
 *                    KV_EFULL, no WR posted: the one-completion rule holds);
 *                    remote (region, offset, len) is bounds-checked against
 *                    the region table the peer sent at connection set-up
 *                    before anything is posted; completions are reaped from
 *                    the CQ and each batch completes exactly once.
 *   connection set-up goes over the TCP control channel (the tcp backend's
 *   ctrl messages): each side sends its QP number, LID/GID, PSN and region
 *   table (id, addr, rkey, len); both move their QP INIT -> RTR -> RTS
 *   (transport/README.md, "RDMA").
 *
 * Error completions are mapped to root causes. When one WR of a QP fails,
 * the QP enters the error state and every later WR on it completes with
 * IBV_WC_WR_FLUSH_ERR: those are knock-on, not causes. A batch's status is
 * its own first non-flush error if it has one, else the QP's recorded root
 * cause (the first non-flush error on that QP), else KV_ECONNRESET (flushed
 * with no cause seen: the QP was torn down):
 *   REM_ACCESS_ERR, LOC_PROT_ERR      -> KV_ERANGE   (outside a registered region)
 *   RETRY_EXC_ERR, RNR_RETRY_EXC_ERR  -> KV_ECONNRESET (peer gone / not receiving)
 *   anything else                     -> KV_EIO
 * provider_err carries the raw wc status (and vendor_err in the high half).
 *
 * Single-threaded like every backend: wrap in kvp_net for the threaded
 * runtime. Memory: all tables sized at kvt_rdma_qps_new. */
#ifndef KVCONN_TRANSPORT_RDMA_H
#define KVCONN_TRANSPORT_RDMA_H

#include <stdbool.h>
#include <stdint.h>

#include "kvconn/env.h"
#include "kvconn/transport.h"

#define KVT_RDMA_QPS_MAX 64u        /* peers (one RC QP each) */
#define KVT_RDMA_REGIONS_MAX KV_NODE_REGIONS_MAX /* regions per side (a peer's table: its regions and grants to us) */
#define KVT_RDMA_LOCAL_MAX (KV_NODE_REGIONS_MAX + KV_NODE_GRANTS_MAX) /* our registrations: regions and grants */
/* reg_mr access: a plain registration is local only (a source for our
 * WRITEs); a grant's registration is also remotely writable. */
enum { KVT_RDMA_ACCESS_LOCAL = 0, KVT_RDMA_ACCESS_REMOTE_WRITE = 1 };
#define KVT_RDMA_BATCHES_MAX 1024u  /* batches in flight */
#define KVT_RDMA_WC_BATCH 64u       /* completions reaped per poll_cq call */

/* Work-completion status codes, numerically equal to enum ibv_wc_status. */
enum {
    KVT_WC_SUCCESS = 0,
    KVT_WC_LOC_LEN_ERR = 1,
    KVT_WC_LOC_QP_OP_ERR = 2,
    KVT_WC_LOC_PROT_ERR = 4,
    KVT_WC_WR_FLUSH_ERR = 5,
    KVT_WC_REM_ACCESS_ERR = 10,
    KVT_WC_REM_OP_ERR = 11,
    KVT_WC_RETRY_EXC_ERR = 12,
    KVT_WC_RNR_RETRY_EXC_ERR = 13,
    KVT_WC_GENERAL_ERR = 21,
};

typedef struct kvt_rdma_wc {
    uint64_t wr_id;
    uint32_t status;     /* KVT_WC_* (ibv_wc_status) */
    uint32_t vendor_err;
    uint32_t qp_num;
} kvt_rdma_wc;

/* A memory registration as the peer needs it. */
typedef struct kvt_rdma_mr {
    void *handle;        /* struct ibv_mr *, or the fake's */
    uint64_t addr;
    uint32_t lkey, rkey;
} kvt_rdma_mr;

/* What a peer sends about its QP at connection set-up. */
typedef struct kvt_rdma_qp_info {
    uint32_t qp_num, psn;
    uint16_t lid;
    uint8_t gid[16];
} kvt_rdma_qp_info;

typedef struct kvt_rdma_verbs {
    size_t size;        /* sizeof(kvt_rdma_verbs) */
    const char *name;   /* "ibverbs", "fake" */
    void *ctx;          /* the binding's state */
    kv_status (*reg_mr)(void *ctx, void *addr, uint64_t len, uint32_t access, kvt_rdma_mr *out);
    void (*dereg_mr)(void *ctx, kvt_rdma_mr *mr);
    /* RC QP with max_send_wr >= max_outstanding, on the shared send CQ. */
    kv_status (*create_qp)(void *ctx, uint32_t max_outstanding, void **out_qp, kvt_rdma_qp_info *out_info);
    /* INIT -> RTR -> RTS against the remote's info. */
    kv_status (*connect_qp)(void *ctx, void *qp, const kvt_rdma_qp_info *remote);
    void (*destroy_qp)(void *ctx, void *qp);
    /* One signalled IBV_WR_RDMA_WRITE. */
    kv_status (*post_write)(void *ctx, void *qp, uint64_t wr_id, uint64_t laddr, uint32_t lkey, uint64_t raddr,
                            uint32_t rkey, uint32_t len);
    /* Non-blocking; up to max completions. */
    kv_status (*poll_cq)(void *ctx, kvt_rdma_wc *out, uint32_t max, uint32_t *out_n);
} kvt_rdma_verbs;

/* A remote region as the peer described it at set-up. */
typedef struct kvt_rdma_remote_region {
    kvt_region id;
    uint64_t addr, len;
    uint32_t rkey;
} kvt_rdma_remote_region;

typedef struct kvt_rdma_qps kvt_rdma_qps;

/* verbs is borrowed and must outlive the engine. */
kv_status kvt_rdma_qps_new(const kv_env *env, const kvt_rdma_verbs *verbs, uint32_t max_outstanding,
                           kvt_rdma_qps **out);
void kvt_rdma_qps_free(kvt_rdma_qps *q);
/* Local memory; region ids are never reused. kvt_rdma_reg: local access
 * only (never writable by a peer); kvt_rdma_reg_remote: remotely writable
 * (a write grant's window; its rkey is the grant's key). */
kv_status kvt_rdma_reg(kvt_rdma_qps *q, void *base, uint64_t len, kvt_region *out);
kv_status kvt_rdma_reg_remote(kvt_rdma_qps *q, void *base, uint64_t len, kvt_region *out);
kv_status kvt_rdma_dereg(kvt_rdma_qps *q, kvt_region r);
/* The entry the peer needs for one of our regions. */
kv_status kvt_rdma_export(kvt_rdma_qps *q, kvt_region r, kvt_rdma_remote_region *out);
/* A peer: creates its QP; info is what to send to the peer. */
kv_status kvt_rdma_peer_new(kvt_rdma_qps *q, kvt_peer *out, kvt_rdma_qp_info *info);
/* The peer's answer arrived: its QP info and region table; QP to RTS. */
kv_status kvt_rdma_peer_connect(kvt_rdma_qps *q, kvt_peer p, const kvt_rdma_qp_info *remote,
                                const kvt_rdma_remote_region *regions, uint32_t n_regions);
/* The peer registered (add) or deregistered (del, when add is NULL) one
 * region after set-up: its table for peer p changes; a later submit to a
 * removed id is refused with KV_ERANGE (and the peer's NIC refuses WRs
 * already posted with its revoked rkey: REM_ACCESS_ERR). */
kv_status kvt_rdma_peer_region(kvt_rdma_qps *q, kvt_peer p, const kvt_rdma_remote_region *add, kvt_region del);
/* Posts a batch; each entry's rkey is the one its writer presents
 * (kvt_write.key.w[0], the grant's key), never one from the table: KV_EINVAL / KV_ENOENT / KV_ERANGE (local or remote range),
 * KV_EFULL (per-QP outstanding limit or batch table) post nothing and
 * complete never; KV_OK completes exactly once. */
kv_status kvt_rdma_submit(kvt_rdma_qps *q, kvt_peer p, const kvt_write *w, uint32_t n, uint64_t tag);
/* Reaps the CQ; finished batches into out (at most max). */
kv_status kvt_rdma_poll(kvt_rdma_qps *q, kvt_completion *out, kvt_peer *out_peer, uint32_t max, uint32_t *out_n);
/* WRs of peer p in flight. */
uint32_t kvt_rdma_outstanding(const kvt_rdma_qps *q, kvt_peer p);
/* The wc status -> kv_status mapping above. */
kv_status kvt_rdma_wc_status(uint32_t wc_status);

/* ---- The rdma kvt (kvt_rdma.c): what kvnode --transport rdma runs ------------------
 *
 * A full kvt_ops backend: data through the batch engine above (one RDMA
 * WRITE per entry, straight from our registered region into the peer's),
 * control and connection set-up through a TCP kvt (tcp.h) it owns:
 *   - ep_open, send_ctrl, the ctrl events and PEER_DOWN are the TCP kvt's;
 *   - reg/dereg/export_desc register memory with the NIC (host memory only)
 *     with local access only: no peer can write a plain region (its table
 *     entry carries rkey 0). A reg or dereg after set-up is announced to
 *     every link (REGION ctrl message, ordered before anything sent after it
 *     on that link);
 *   - grant(r, ep, peer, off, len) registers the window [off, off + len) of
 *     r again, remotely writable (ibv_reg_mr with REMOTE_WRITE): the grant's
 *     key is that registration's rkey (key.w[0]; the NIC chooses it). The
 *     grant is announced (id, the region's address, the window's end, rkey
 *     0) to the grantee's link only, before the pull that names it; the rkey
 *     travels in the pull (kvt_desc.key) and the writer presents it with
 *     every entry. revoke deregisters it and tells that link: a later submit
 *     is refused, and WRs already posted are refused by our NIC (the MR and
 *     its rkey are gone: REM_ACCESS_ERR at the writer). The NIC checks rkey
 *     and range; it does not bind an MR to one QP (a type-2 memory window
 *     bound on the grantee's QP would; transport/README.md);
 *   - connect(ep, addr) connects the TCP ctrl channel and starts the QP
 *     set-up: our QP is created and a SETUP ctrl message (our QP info and
 *     region table: id, addr, len, rkey) goes to the peer, which creates its
 *     QP, connects it (INIT -> RTR -> RTS) and answers SETUP_ACK with its
 *     own; ours connects on the ACK. Set-up messages start with
 *     KVT_RDMA_SETUP_MAGIC and never reach the owner; a user ctrl message
 *     starting with it is refused (KV_EINVAL);
 *   - submit before the link is set up returns KV_EFULL (kvp_net's submit
 *     waits for its progress thread to finish the set-up); remote (region,
 *     offset, len) is checked against the table the peer sent;
 *   - the deadline is not enforced on posted WRs: they end at the NIC (its
 *     transport retry timeout gives RETRY_EXC_ERR -> KV_ECONNRESET);
 *   - PEER_DOWN of the TCP peer resets the link: the next connect or submit
 *     sets up a fresh QP (the old one stays until close: at most
 *     KVT_RDMA_QPS_MAX set-ups per kvt).
 * For a driver that sleeps (kvp_net): kvt_rdma_pollfds is the TCP set plus
 * a pipe that stays readable while WRs are in flight (completions have no
 * fd here: the progress thread polls the CQ without sleeping until they are
 * in). kvt_rdma_event_data is kvt_tcp_event_data for the passed-through
 * ctrl events. ops->close closes the TCP kvt and the engine. */
#define KVT_RDMA_SETUP_MAGIC "KVRS"

typedef struct kvt_rdma_cfg {
    kvt *ctrl;                   /* a TCP kvt (kvt_tcp_new); owned from a successful kvt_rdma_new on */
    const kvt_rdma_verbs *verbs; /* borrowed; outlives the kvt */
    uint32_t max_outstanding;    /* WRs per QP (0: 1024) */
} kvt_rdma_cfg;

typedef struct kvt_rdma_counters {
    uint64_t qps, links_ready, batches, writes, completions, not_ready;
} kvt_rdma_counters;

struct pollfd;
kv_status kvt_rdma_new(const kv_env *env, const kvt_rdma_cfg *cfg, kvt **out);
void kvt_rdma_free(kvt *t);
kv_status kvt_rdma_event_data(kvt *t, uint32_t i, const uint8_t **out);
kv_status kvt_rdma_pollfds(kvt *t, struct pollfd *out, uint32_t cap, uint32_t *out_n);
void kvt_rdma_counters_get(kvt *t, kvt_rdma_counters *out);

#endif

#ifdef KVCONN_HAVE_RDMA
/* The libibverbs binding (verbs_ibv.c, -DKVCONN_RDMA=ON): opens device
 * dev_name (NULL: the first), a PD, one CQ, on `port`; fills *out. */
kv_status kvt_rdma_ibv_open(const kv_env *env, const char *dev_name, uint8_t port, kvt_rdma_verbs *out);
void kvt_rdma_ibv_close(kvt_rdma_verbs *v);
#endif
