/* transport/tcp/tcp.h — the real TCP backend of include/kvconn/transport.h.
 *
 * One kvt per process (node). Endpoints listen on bind_host:<ephemeral>;
 * their address is "a.b.c.d:port" (IPv4 literals only, no name lookup).
 * Everything is non-blocking and single-threaded: all socket work happens in
 * poll(), which never blocks (poll(2) with timeout 0) and does bounded work.
 * The wire protocol is documented at the top of tcp.c.
 *
 * Semantics mirror the sim backend (sim/sim_net.h):
 *  - regions are host memory only (KVT_MEM_CUDA -> KV_ENOSYS); a peer writes
 *    only through a live grant (its id and 128-bit key from libsodium's
 *    randombytes_buf, bound to one (endpoint, peer) and a window), checked by
 *    the node that owns the region; a refused entry counts as failed (the
 *    batch completes KV_ERANGE) and in kvt_tcp_stats, and is logged
 *    (rate-limited);
 *  - exactly one KVT_EV_DONE per accepted batch: when the peer's ack arrives
 *    (KV_OK / KV_ERANGE), at the deadline (KV_ETIMEDOUT; deadline 0 = none) or
 *    when the connection drops first (KV_ECONNRESET); a rejected submit
 *    (non-zero return) yields none;
 *  - source bytes of entries over KVT_TCP_INLINE_MAX are sent in place from
 *    the registered region (no copy; smaller ones are copied at submit):
 *    the caller keeps them unchanged until the batch completes. Every
 *    completion means no later send reads them: a batch whose deadline
 *    passes with bytes still queued fails its connection first, and a
 *    dereg of a region queued data points into fails those connections;
 *  - ctrl messages are ordered per connection; an incoming connection maps
 *    to a peer id of the receiving endpoint (from the HELLO address), so the
 *    receiver can answer through the KVT_EV_CTRL event's peer id; connect()
 *    to the same address returns the same peer id;
 *  - a lost connection yields one KVT_EV_PEER_DOWN per (ep, peer); the peer
 *    id stays valid and the next connect/submit/send_ctrl redials.
 *
 * KVT_EV_CTRL bytes: kvt_tcp_event_data(t, i, &p) returns the bytes of event
 * i of the most recent poll() (i < the n it returned). They stay valid until
 * the next poll() or kvt_tcp_free() on that kvt; a driver copies them right
 * after poll.
 *
 * ops->close(t) and kvt_tcp_free(t) are the same: close every socket and
 * release all memory, including t itself. Pending batches complete never. */
#ifndef KVCONN_TRANSPORT_TCP_H
#define KVCONN_TRANSPORT_TCP_H

#include <stdint.h>

#include "kvconn/env.h"
#include "kvconn/transport.h"
#include "transport/auth/auth.h"

#define KVT_TCP_EPS_MAX 16u        /* endpoints per kvt */
#define KVT_TCP_PEERS_MAX 64u      /* peers per endpoint */
#define KVT_TCP_REGIONS_MAX KV_NODE_REGIONS_MAX /* registered regions per kvt */
#define KVT_TCP_GRANTS_MAX KV_NODE_GRANTS_MAX   /* live write grants per kvt */
#define KVT_TCP_BATCHES_MAX 1024u  /* in-flight batches per kvt (power of 2) */
#define KVT_TCP_CONNS_MAX 64u      /* open TCP connections per kvt */
#define KVT_TCP_POLL_EVENTS_MAX 256u /* events one poll() hands out at most */
#define KVT_TCP_ENTRY_MAX (1u << 20) /* payload bytes of one WRITE entry */
#define KVT_TCP_FRAME_MAX (16u + KV_WIRE_MAX) /* length field of a non-WRITE frame */
#define KVT_TCP_TX_CAP (2u << 20)  /* send ring bytes per connection (HELLO, WRITE headers, small entries) */
#define KVT_TCP_TX_SEGS 4096u      /* send queue runs per connection (power of 2) */
#define KVT_TCP_INLINE_MAX 8192u   /* WRITE entries up to this are copied into the ring */

/* Frame types (see tcp.c). */
enum {
    KVT_TCP_HELLO = 1,
    KVT_TCP_CTRL = 2,
    KVT_TCP_WRITE = 3,
    KVT_TCP_WRITE_ACK = 4,
    KVT_TCP_CHAL = 5,  /* with a cluster secret: the acceptor's nonce and MAC */
    KVT_TCP_PROOF = 6  /* with a cluster secret: the dialer's MAC */
};
#define KVT_TCP_WRITE_HDR 48u /* WRITE payload bytes before the data (the grant's key included) */
#define KVT_TCP_ACK_LEN 16u   /* WRITE_ACK payload bytes */

/* bind_host: an IPv4 literal the endpoints listen on and advertise. */
kv_status kvt_tcp_new(const kv_env *env, const char *bind_host, kvt **out);
/* NULL-safe; same as t->ops->close(t). */
void kvt_tcp_free(kvt *t);
/* Bytes of KVT_EV_CTRL event i of the last poll(); KV_ENOENT if event i was
 * not a ctrl event of the last poll. */
kv_status kvt_tcp_event_data(kvt *t, uint32_t i, const uint8_t **out);

/* The cluster secret: from now on every connection this kvt dials or
 * accepts proves it, both ways, before it carries anything (tcp.c, top).
 * NULL or an unset key: none (HELLO only). Before the first connection
 * (KV_ESTATE after); KV_EIO when the crypto library cannot start. */
kv_status kvt_tcp_set_secret(kvt *t, const kv_auth_key *key);
/* A connection whose HELLO (and handshake) has not ended this long after it
 * opened is closed, logged and counted (default 5000 ms). */
void kvt_tcp_set_hello_deadline_ms(kvt *t, uint32_t ms);
/* Admission of accepted connections still in their HELLO: at most
 * pending_max of them (16), pending_per_addr from one IP address (8); a new
 * one over a limit evicts the oldest (logged, counted as evicted). The
 * KVT_TCP_CONNS_MAX - pending_max other slots are only ever held by
 * connections that finished their handshake, or that this kvt dialed. */
void kvt_tcp_set_admission(kvt *t, uint32_t pending_max, uint32_t pending_per_addr);

/* What the kvt refused, since it was made. */
typedef struct kvt_tcp_stats {
    uint64_t auth_ok;         /* handshakes that ended well, either side */
    uint64_t auth_failed;     /* closed: a wrong MAC, a frame out of order, secret on one side only */
    uint64_t hello_timeouts;  /* closed: no HELLO and handshake within the deadline */
    uint64_t protocol_errors; /* closed: malformed frames (no secret involved) */
    uint64_t refused_no_slot; /* incoming connections closed at once: every slot taken */
    uint64_t evicted;         /* connections in their HELLO closed to admit a newer one */
    /* WRITE entries refused by the owner's grant check (the entry fails,
     * the connection stays): write_refused is the sum of the four reasons */
    uint64_t write_refused;
    uint64_t write_no_grant;   /* no live grant by that id (never granted, or revoked) */
    uint64_t write_bad_key;    /* a live grant, another key (or none) */
    uint64_t write_wrong_peer; /* the key of a grant made for another peer or endpoint */
    uint64_t write_outside;    /* outside the grant's window */
} kvt_tcp_stats;
void kvt_tcp_stats_get(kvt *t, kvt_tcp_stats *out);

/* For a driver that sleeps until the transport has work instead of spinning
 * on poll(): copies into out the poll(2) set the next poll() would use (the
 * listeners, the connections, POLLOUT where bytes wait to be sent). The
 * driver polls it, with fds of its own, outside any lock, then calls poll().
 * Same threading rule as every other call: not concurrently with them.
 * KV_EFULL when cap is too small (out then holds the first cap). */
struct pollfd;
kv_status kvt_tcp_pollfds(kvt *t, struct pollfd *out, uint32_t cap, uint32_t *out_n);

#endif
