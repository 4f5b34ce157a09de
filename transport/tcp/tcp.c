/* transport/tcp/tcp.c — the TCP transport; see tcp.h.
 *
 * Wire protocol (one TCP connection = one byte stream of frames):
 *   frame   = len:u32le type:u8 payload[len - 1]      (len counts type+payload)
 *   HELLO     (1) addr bytes (1..KV_ADDR_MAX-1, no NUL): the connecting
 *                 endpoint's listening address. First frame the connecting
 *                 side sends; the accepting side maps the connection to the
 *                 peer id of that address on its endpoint (no reply).
 *   CTRL      (2) 0..KV_WIRE_MAX bytes of control message.
 *   WRITE     (3) tag:u64 index:u32 count:u32 grant:u32 offset:u64 dlen:u32
 *                 key:u64[2] then dlen (<= KVT_TCP_ENTRY_MAX) bytes;
 *                 len == 49 + dlen. grant and key are the receiver's write
 *                 grant (transport.h, "write capabilities"); offset is from
 *                 the start of the granted region.
 *                 Entry `index` of a batch of `count` entries. tag is the
 *                 sender's internal wire id of the batch (never the user tag,
 *                 so a late ack can never complete a reused user tag). The
 *                 entries of one batch are contiguous on the stream.
 *   WRITE_ACK (4) tag:u64 n_ok:u32 n_failed:u32; sent after the entry with
 *                 index == count-1; n_ok + n_failed == count.
 *   There is no CLOSE frame: EOF or an error closes the connection.
 *
 * With a cluster secret (kvt_tcp_set_secret; transport/README.md, "Threat
 * model") both sides prove they hold it before the connection carries
 * anything else:
 *   HELLO     (1) nonce_d[32] addr          the dialing side, first frame
 *   CHAL      (5) nonce_a[32] mac_a[32]     the accepting side's first frame:
 *                 mac_a = MAC("kvconn tcp accept", nonce_d, nonce_a, addr)
 *   PROOF     (6) mac_d[32]                 the dialing side's second frame:
 *                 mac_d = MAC("kvconn tcp dial", nonce_a, nonce_d, addr)
 * (MAC: HMAC-SHA-256 under the secret, transport/auth/auth.h.) The dialer
 * sends nothing past its HELLO until mac_a checks out; the acceptor maps the
 * connection to a peer (and so lets it reach a region, a batch or the
 * caller) only once mac_d checks out. A wrong MAC, a frame out of this order,
 * or a HELLO whose form says the two sides disagree on having a secret,
 * closes the connection with one log line (counted). Every connection, with
 * a secret or without, that has not finished its HELLO (and the
 * challenge–response) within the HELLO deadline is closed too.
 * Non-WRITE frames have len <= KVT_TCP_FRAME_MAX. Any frame with a bad length,
 * an unknown type, a frame before HELLO on an accepted connection, or a bad
 * field disconnects that connection with an error logged.
 *
 * The owning side checks every WRITE before any byte lands: a live grant by
 * that id, its key, granted to this connection's (endpoint, peer), the entry
 * inside its window (kvt_grant_check), and inside the region (overflow-safe).
 * A refused entry's bytes are read and discarded, it counts as failed (the
 * connection stays up), and the refusal is counted (kvt_tcp_stats) and
 * logged, rate-limited like the handshake's. The grant and the region are
 * looked up again for every chunk, so a revoke or dereg mid-entry fails the
 * entry.
 *
 * Memory: every table and buffer is allocated in kvt_tcp_new. Each
 * connection has a receive buffer of 4 + KVT_TCP_FRAME_MAX bytes, a send
 * ring of KVT_TCP_TX_CAP bytes for frame headers, ctrl bytes, HELLO and
 * acks, and a queue of KVT_TCP_TX_SEGS send segments: each is either a run
 * of ring bytes or a WRITE entry's data, referenced in place in the
 * registered source region (no copy: sendmsg() gathers headers and data
 * straight from the region). Entries up to KVT_TCP_INLINE_MAX bytes are
 * copied into the ring instead (a small copy costs less than a gather
 * entry). CTRL and WRITE_ACK frames do not queue behind WRITE data: they go
 * to the connection's express lane (LANE_CAP bytes of whole frames, FIFO),
 * which is sent at the next WRITE frame boundary of the stream (after our
 * HELLO), so a response or an ack waits for at most one entry of queued
 * data instead of every byte queued before it. Control messages stay in
 * order among themselves; relative to WRITE data they may overtake (the
 * transport contract orders control per peer only; a WRITE's completion is
 * its ack, never the order of a later control message). The caller keeps
 * the source bytes unchanged
 * until the batch completes; a batch whose deadline passes while some of
 * its bytes are still queued fails its connection (so no send can read its
 * buffers after its completion), and a dereg of a region that queued data
 * still references fails the connections that hold it. Data frames leave
 * TX_RESERVE ring bytes and TX_SEG_RESERVE segments free, and ctrl frames
 * LANE_RESERVE lane bytes free for acks, so two honest peers never deadlock
 * on full queues.
 *
 * Receive: WRITE data lands straight in the destination region (recvmsg
 * into the region, with the next frame header gathered into the receive
 * buffer in the same call) once RECV_DIRECT_MIN or more of an entry are
 * left; smaller entries, and bytes that arrived together with a header,
 * are copied from the receive buffer.
 *
 * Events are produced only while the caller's array has room; what does not
 * fit stays as state (a done batch, a pending PEER_DOWN, unparsed bytes) for
 * the next poll. CTRL event bytes point into the receive buffer, which is
 * compacted only at the start of the next poll (and a freed connection slot
 * is not reused within the poll that freed it).
 *
 * No threads, no blocking calls, every loop bounded. */
#include "transport/tcp/tcp.h"
#include "transport/auth/auth.h"
#include "transport/regions.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#define TC_NONE UINT32_MAX
#define RX_CAP (4u + KVT_TCP_FRAME_MAX)
#define TX_RESERVE (32u * 1024u)
#define TX_SEG_RESERVE 64u
#define IOV_MAX_SEND 64u
#define HDR 5u /* len + type */
#define WRITE_LEN_MAX (1u + KVT_TCP_WRITE_HDR + KVT_TCP_ENTRY_MAX)
#define ACCEPTS_PER_POLL 8u
#define RECV_ROUNDS 64u
#define LANE_CAP (256u * 1024u)   /* express lane bytes per connection: ctrl and ack frames */
#define LANE_RESERVE (16u * 1024u) /* lane bytes ctrl frames leave for acks */
#ifndef RECV_BYTES_PER_POLL
#define RECV_BYTES_PER_POLL (1u << 20) /* per connection and poll: others get their turn */
#endif
#ifndef SEND_BYTES_PER_POLL
#define SEND_BYTES_PER_POLL (1u << 20) /* per connection and poll: the caller hears of events between */
#endif
#define SEND_ROUNDS 8u
#define RECV_DIRECT_MIN 8192u /* sink bytes left for a recv straight into the region */
#define FRAMES_PER_CONN 4096u
#define BATCH_BITS 10u
#define NONCE KV_AUTH_NONCE_BYTES
#define MAC KV_AUTH_MAC_BYTES
#define HELLO_DEADLINE_MS_DEFAULT 5000u
#define PENDING_MAX_DEFAULT 16u       /* accepted connections still in their handshake, at most */
#define PENDING_PER_ADDR_DEFAULT 8u   /* of them from one IP address */
#define AUTH_LOG_FIRST 16u   /* rejections logged one by one, then every AUTH_LOG_EVERY-th */
#define AUTH_LOG_EVERY 1024u
#define WRITE_KEY_AT 32u     /* the key's place in a WRITE header */

enum { CS_FREE = 0, CS_CONNECTING, CS_OPEN, CS_FAILED };
/* Where a connection's handshake stands. AU_OK: it may carry traffic. */
enum { AU_OK = 0, AU_WAIT_HELLO, AU_WAIT_CHAL, AU_WAIT_PROOF };
enum { B_FREE = 0, B_WAIT, B_DONE };

typedef kvt_region_entry tc_region;

typedef struct tc_peer {
    kvt_addr addr;
    uint32_t conn; /* primary connection or TC_NONE */
    bool down_pending;
} tc_peer;

typedef struct tc_ep {
    bool open;
    int fd;
    uint32_t owner;
    kvt_addr addr;
    uint32_t n_peers;
    tc_peer peer[KVT_TCP_PEERS_MAX];
} tc_ep;

/* One run of the send stream: ring bytes (ext NULL) or entry data in place.
 * A WRITE frame's header always starts a run (fs): the lane may go there. */
typedef struct tc_seg {
    const uint8_t *ext;
    uint32_t len;
    bool fs;
} tc_seg;

typedef struct tc_conn {
    uint32_t state;
    uint32_t gen; /* bumped when the connection fails: batches remember theirs */
    int fd;
    uint32_t ep, peer; /* peer TC_NONE until HELLO on an accepted conn */
    uint64_t freed_poll;
    bool pinned; /* a ctrl event of this poll points into rx */
    uint8_t *rx;
    uint32_t rx_len, rx_off;
    uint8_t *tx;
    uint64_t tx_head, tx_tail;
    tc_seg *seg;              /* [KVT_TCP_TX_SEGS] */
    uint32_t seg_head, seg_tail, seg_off; /* queue counters; bytes of seg[head] sent */
    uint64_t q_bytes, sent_bytes;         /* stream bytes queued / handed to the kernel */
    uint64_t hello_end;                   /* stream bytes up to the end of our HELLO (0: we send none) */
    /* the handshake (see the top of the file) */
    uint8_t au;                           /* AU_* */
    uint64_t gate;                        /* stream bytes that may leave while au != AU_OK */
    uint64_t proof_pos;                   /* ring position of our PROOF's MAC (dialer) */
    uint64_t opened_ns;                   /* for the HELLO deadline */
    uint8_t nonce_mine[NONCE], nonce_peer[NONCE];
    kvt_addr claimed;                     /* the HELLO's address, until its PROOF checks out */
    char from[24];                        /* the remote a.b.c.d:port, for log lines */
    uint32_t from_ip;                     /* the remote IPv4 address (accepted connections) */
    const char *bad;                      /* why the last frame was refused, for the log line */
    uint8_t *lane;                        /* [LANE_CAP]: whole CTRL / WRITE_ACK frames */
    uint32_t lane_len, lane_off;          /* bytes in the lane; of them sent */
    /* the WRITE entry being received */
    bool sink;
    bool big; /* the last frame was a WRITE of RECV_DIRECT_MIN or more: read headers alone */
    bool s_ok;
    uint64_t s_tag, s_off;
    uint32_t s_index, s_count, s_region, s_left;
    /* ack accumulator of the batch being received */
    uint64_t a_tag;
    uint32_t a_ok;
} tc_conn;

typedef struct tc_batch {
    uint32_t state;
    uint32_t ep, peer, n;
    uint32_t conn, conn_gen; /* where its bytes are queued */
    uint64_t tag, wire, deadline;
    uint64_t end;            /* conn's q_bytes after its last byte */
    kvt_completion done;
} tc_batch;

typedef struct tcp {
    const kv_env *env;
    kvt self;
    char host[16]; /* IPv4 literal */
    uint32_t n_eps;
    uint64_t poll_no;
    bool writes_deferred; /* the last poll returned events before writing */
    uint64_t wire_seq;
    tc_ep *ep;         /* [EPS_MAX] */
    tc_region reg_store[KVT_TCP_REGIONS_MAX];
    kvt_region_tab reg;
    kvt_grant_entry grant_store[KVT_TCP_GRANTS_MAX];
    kvt_grant_tab grants;
    tc_conn *conn;     /* [CONNS_MAX] */
    tc_batch *batch;   /* [BATCHES_MAX] */
    uint8_t *rx_slab;  /* [CONNS_MAX * RX_CAP] */
    uint8_t *tx_slab;  /* [CONNS_MAX * TX_CAP] */
    uint8_t *lane_slab; /* [CONNS_MAX * LANE_CAP] */
    tc_seg *seg_slab;  /* [CONNS_MAX * TX_SEGS] */
    struct pollfd *pfd; /* [EPS_MAX + CONNS_MAX] */
    uint32_t *pfd_of;  /* pfd index per listener then per conn, TC_NONE if none */
    const uint8_t *ev_data[KVT_TCP_POLL_EVENTS_MAX];
    uint32_t ev_n;
    kv_auth_key key;        /* key.set: every connection runs the challenge-response */
    uint64_t hello_deadline_ns;
    uint32_t pending_max, pending_per_addr;
    kvt_tcp_stats st;
} tcp;

/* The caller's event array during one poll. */
typedef struct evout {
    kvt_event *ev;
    uint32_t cap, n;
} evout;

/* ---- small helpers ----------------------------------------------------------- */

static tcp *T(kvt *t) { return (tcp *)t->impl; }
static bool range_ok(const tc_region *r, uint64_t off, uint64_t len) { return kvt_range_ok(r, off, len); }
static void put32(uint8_t *p, uint32_t v) {
    for (uint32_t i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8u * i));
}
static void put64(uint8_t *p, uint64_t v) {
    for (uint32_t i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8u * i));
}
static uint32_t get32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t get64(const uint8_t *p) { return (uint64_t)get32(p) | (uint64_t)get32(p + 4) << 32; }

static tc_region *find_region(tcp *s, kvt_region id) { return kvt_region_find(&s->reg, id); }

/* Rate limit of every refusal's log line: the first AUTH_LOG_FIRST, then one
 * in AUTH_LOG_EVERY (the line carries the running count). */
static bool log_due(uint64_t n) { return n <= AUTH_LOG_FIRST || n % AUTH_LOG_EVERY == 0; }

static tc_ep *find_ep(tcp *s, kvt_ep ep) { return (ep < s->n_eps && s->ep[ep].open) ? &s->ep[ep] : NULL; }

static bool set_nonblock(int fd) {
    int fl = fcntl(fd, F_GETFL, 0);
    return fl >= 0 && fcntl(fd, F_SETFL, fl | O_NONBLOCK) == 0;
}

/* "a.b.c.d:port" with a canonical port 1..65535. */
static bool parse_addr(const char *s, struct sockaddr_in *out) {
    char host[KV_ADDR_MAX];
    const char *colon = NULL;
    size_t n = 0;
    for (; n < KV_ADDR_MAX && s[n]; n++)
        if (s[n] == ':') colon = s + n;
    if (n >= KV_ADDR_MAX || !colon || colon == s) return false;
    size_t hl = (size_t)(colon - s);
    memcpy(host, s, hl);
    host[hl] = '\0';
    const char *p = colon + 1;
    uint32_t port = 0, d = 0;
    for (; d < 6 && p[d] >= '0' && p[d] <= '9'; d++) port = port * 10u + (uint32_t)(p[d] - '0');
    if (d == 0 || d > 5 || p[d] != '\0' || port == 0 || port > 65535u || (d > 1 && p[0] == '0')) return false;
    memset(out, 0, sizeof *out);
    out->sin_family = AF_INET;
    out->sin_port = htons((uint16_t)port);
    return inet_pton(AF_INET, host, &out->sin_addr) == 1;
}

/* ---- send ring ------------------------------------------------------------------- */

static uint64_t tx_used(const tc_conn *c) { return c->tx_head - c->tx_tail; }
static uint64_t tx_free(const tc_conn *c) { return KVT_TCP_TX_CAP - tx_used(c); }
static uint32_t seg_used(const tc_conn *c) { return c->seg_tail - c->seg_head; }
static uint32_t seg_free(const tc_conn *c) { return KVT_TCP_TX_SEGS - seg_used(c); }
static bool data_pending(const tc_conn *c) { return c->seg_tail != c->seg_head; }
static bool lane_pending(const tc_conn *c) { return c->lane_len != c->lane_off; }
static bool tx_pending(const tc_conn *c) { return data_pending(c) || lane_pending(c); }
/* Stream bytes that may leave now: any once the handshake ended, before
 * that only those up to the gate (our HELLO, or our CHAL). */
static uint64_t may_send(const tc_conn *c) {
    return c->au == AU_OK ? UINT64_MAX : c->gate > c->sent_bytes ? c->gate - c->sent_bytes : 0;
}
/* Bytes wait and some of them may leave now. */
static bool tx_ready(const tc_conn *c) {
    return c->au == AU_OK ? tx_pending(c) : data_pending(c) && may_send(c) > 0;
}
/* The handshake (or, without a secret, the HELLO) has not ended. */
static bool handshaking(const tc_conn *c) { return c->au != AU_OK || c->peer == TC_NONE; }
static uint32_t lane_free(const tc_conn *c) { return LANE_CAP - (c->lane_len - c->lane_off); }
static tc_seg *seg_at(const tc_conn *c, uint32_t i) { return &c->seg[i % KVT_TCP_TX_SEGS]; }

/* The lane may be sent now: our HELLO is out and the stream is between two
 * WRITE frames (nothing queued, or the next byte starts a WRITE frame). */
static bool lane_ready(const tc_conn *c) {
    return lane_pending(c) && c->au == AU_OK && c->sent_bytes >= c->hello_end &&
           (!data_pending(c) || (c->seg_off == 0 && seg_at(c, c->seg_head)->fs));
}

/* Appends one whole frame to the lane. Callers checked lane_free. */
static void lane_put(tc_conn *c, uint8_t type, const void *p, uint32_t len) {
    if (LANE_CAP - c->lane_len < HDR + len) { /* compact: the unsent bytes to the front */
        memmove(c->lane, c->lane + c->lane_off, c->lane_len - c->lane_off);
        c->lane_len -= c->lane_off;
        c->lane_off = 0;
    }
    uint8_t *d = c->lane + c->lane_len;
    put32(d, 1u + len);
    d[4] = type;
    if (len) memcpy(d + HDR, p, len);
    c->lane_len += HDR + len;
}

/* Appends ring bytes; they join the last segment when it is ring bytes too.
 * Callers checked tx_free and seg_free. */
static void tx_put(tc_conn *c, const void *src, size_t len) {
    const uint8_t *b = src;
    size_t pos = (size_t)(c->tx_head % KVT_TCP_TX_CAP);
    size_t first = KVT_TCP_TX_CAP - pos < len ? KVT_TCP_TX_CAP - pos : len;
    if (first) memcpy(c->tx + pos, b, first);
    if (len > first) memcpy(c->tx, b + first, len - first);
    c->tx_head += len;
    c->q_bytes += len;
    tc_seg *last = seg_used(c) ? seg_at(c, c->seg_tail - 1u) : NULL;
    if (last && !last->ext) { /* ring bytes are contiguous in stream order */
        last->len += (uint32_t)len;
        return;
    }
    *seg_at(c, c->seg_tail++) = (tc_seg){.ext = NULL, .len = (uint32_t)len, .fs = false};
}

/* Starts a run for a WRITE frame's header (a point where the lane may go). */
static void tx_frame_start(tc_conn *c) { *seg_at(c, c->seg_tail++) = (tc_seg){.ext = NULL, .len = 0, .fs = true}; }

/* Appends len bytes at p, sent in place. */
static void tx_ext(tc_conn *c, const uint8_t *p, uint32_t len) {
    *seg_at(c, c->seg_tail++) = (tc_seg){.ext = p, .len = len, .fs = false};
    c->q_bytes += len;
}

static void tx_frame_hdr(tc_conn *c, uint32_t len, uint8_t type) {
    uint8_t h[HDR];
    put32(h, len);
    h[4] = type;
    tx_put(c, h, sizeof h);
}

/* Overwrites len queued, unsent ring bytes at ring position pos. */
static void tx_poke(tc_conn *c, uint64_t pos, const uint8_t *src, uint32_t len) {
    for (uint32_t i = 0; i < len; i++) c->tx[(pos + i) % KVT_TCP_TX_CAP] = src[i];
}

/* ---- connections ----------------------------------------------------------------- */

static uint32_t conn_alloc(tcp *s) {
    for (uint32_t i = 0; i < KVT_TCP_CONNS_MAX; i++) {
        tc_conn *c = &s->conn[i];
        if (c->state != CS_FREE || (c->freed_poll == s->poll_no && s->poll_no != 0)) continue;
        uint8_t *rx = c->rx, *tx = c->tx, *lane = c->lane;
        tc_seg *seg = c->seg;
        uint32_t gen = c->gen;
        memset(c, 0, sizeof *c);
        c->rx = rx;
        c->tx = tx;
        c->lane = lane;
        c->seg = seg;
        c->gen = gen + 1u;
        c->fd = -1;
        c->ep = c->peer = TC_NONE;
        return i;
    }
    return TC_NONE;
}

static void fail_peer_batches(tcp *s, uint32_t ep, uint32_t peer) {
    for (uint32_t i = 0; i < KVT_TCP_BATCHES_MAX; i++) {
        tc_batch *b = &s->batch[i];
        if (b->state != B_WAIT || b->ep != ep || b->peer != peer) continue;
        b->state = B_DONE;
        b->done = (kvt_completion){.tag = b->tag, .n_failed = b->n, .status = KV_ECONNRESET};
    }
}

/* Closes c; if it was its peer's primary connection, the peer's batches
 * complete KV_ECONNRESET and one PEER_DOWN is queued. */
static void conn_fail(tcp *s, uint32_t ci) {
    tc_conn *c = &s->conn[ci];
    if (c->fd >= 0) close(c->fd);
    c->fd = -1;
    c->gen++;
    c->seg_head = c->seg_tail = c->seg_off = 0; /* no queued byte is read again */
    c->tx_tail = c->tx_head;
    c->lane_len = c->lane_off = 0;
    if (c->peer != TC_NONE) {
        tc_peer *p = &s->ep[c->ep].peer[c->peer];
        if (p->conn == ci) {
            p->conn = TC_NONE;
            p->down_pending = true;
            fail_peer_batches(s, c->ep, c->peer);
        }
    }
    c->state = CS_FREE;
    c->sink = false;
    c->freed_poll = s->poll_no;
}

static void proto_error(tcp *s, uint32_t ci, const char *what) {
    const tc_conn *c = &s->conn[ci];
    const char *who = (c->peer != TC_NONE) ? s->ep[c->ep].peer[c->peer].addr.s : "(no hello)";
    s->st.protocol_errors++;
    kv_logf(s->env, KV_LOG_ERROR, "tcp: ep %u peer %s: protocol error: %s; disconnecting", c->ep, who, what);
    conn_fail(s, ci);
}

/* Closes a connection that failed the handshake or its deadline: one log
 * line per connection (the first AUTH_LOG_FIRST, then one in AUTH_LOG_EVERY,
 * with the count), never the secret or a MAC. */
static void auth_reject(tcp *s, uint32_t ci, uint64_t *counter, const char *what) {
    const tc_conn *c = &s->conn[ci];
    uint64_t n = ++*counter;
    if (log_due(n))
        kv_logf(s->env, KV_LOG_WARN, "tcp: ep %u: connection %s %s: %s; closed (%llu so far)", c->ep,
                c->peer != TC_NONE ? "to" : "from", c->peer != TC_NONE ? s->ep[c->ep].peer[c->peer].addr.s : c->from,
                what, (unsigned long long)n);
    conn_fail(s, ci);
}

/* The MAC a side of the handshake sends: label names the side that computes
 * it; nonce_a is the acceptor's, nonce_d the dialer's, addr the dialer's. */
#define HS_PARTS(first, second, addr) {{(first), NONCE}, {(second), NONCE}, {(addr)->s, strlen((addr)->s)}}
static void hs_mac(const tcp *s, const char *label, const uint8_t *first, const uint8_t *second, const kvt_addr *addr,
                   uint8_t out[MAC]) {
    kv_auth_part parts[] = HS_PARTS(first, second, addr);
    kv_auth_mac(&s->key, label, parts, 3, out);
}

static bool hs_check(const tcp *s, const char *label, const uint8_t *first, const uint8_t *second,
                     const kvt_addr *addr, const uint8_t mac[MAC]) {
    kv_auth_part parts[] = HS_PARTS(first, second, addr);
    return kv_auth_check(&s->key, label, parts, 3, mac);
}

#define LABEL_ACCEPT "kvconn tcp accept"
#define LABEL_DIAL "kvconn tcp dial"

/* Opens a non-blocking connection from ep to its peer's address. An
 * immediate failure leaves the connection CS_FAILED: the next poll fails it
 * like an asynchronous one (so queued batches complete once). */
static kv_status conn_dial(tcp *s, uint32_t ep, uint32_t peer) {
    tc_peer *p = &s->ep[ep].peer[peer];
    struct sockaddr_in sa;
    if (!parse_addr(p->addr.s, &sa)) return KV_EINVAL;
    uint32_t ci = conn_alloc(s);
    if (ci == TC_NONE) return KV_ENOMEM;
    tc_conn *c = &s->conn[ci];
    c->ep = ep;
    c->peer = peer;
    c->state = CS_FAILED;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd >= 0 && set_nonblock(fd)) {
        int one = 1;
        (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        c->fd = fd;
        if (connect(fd, (const struct sockaddr *)&sa, sizeof sa) == 0) c->state = CS_OPEN;
        else if (errno == EINPROGRESS) c->state = CS_CONNECTING;
    } else if (fd >= 0) {
        close(fd);
    }
    p->conn = ci;
    c->opened_ns = kv_now_ns(s->env);
    const kvt_addr *me = &s->ep[ep].addr;
    uint32_t al = (uint32_t)strlen(me->s);
    if (!s->key.set) {
        tx_frame_hdr(c, 1u + al, KVT_TCP_HELLO);
        tx_put(c, me->s, al);
        c->hello_end = c->q_bytes;
        return KV_OK;
    }
    /* HELLO with our nonce, then a PROOF whose MAC is filled in when the
     * acceptor's CHAL checks out: nothing past the HELLO leaves before. */
    static const uint8_t zero[MAC];
    kv_auth_random(c->nonce_mine, NONCE);
    tx_frame_hdr(c, 1u + NONCE + al, KVT_TCP_HELLO);
    tx_put(c, c->nonce_mine, NONCE);
    tx_put(c, me->s, al);
    c->gate = c->q_bytes;
    tx_frame_hdr(c, 1u + MAC, KVT_TCP_PROOF);
    c->proof_pos = c->tx_head;
    tx_put(c, zero, MAC);
    c->hello_end = c->q_bytes;
    c->au = AU_WAIT_CHAL;
    return KV_OK;
}

/* Finds or adds addr in e's peer table; TC_NONE when full. */
static uint32_t peer_get(tc_ep *e, const char *addr, size_t len) {
    for (uint32_t i = 0; i < e->n_peers; i++)
        if (strlen(e->peer[i].addr.s) == len && memcmp(e->peer[i].addr.s, addr, len) == 0) return i;
    if (e->n_peers >= KVT_TCP_PEERS_MAX) return TC_NONE;
    tc_peer *p = &e->peer[e->n_peers];
    memset(p, 0, sizeof *p);
    memcpy(p->addr.s, addr, len);
    p->conn = TC_NONE;
    return e->n_peers++;
}

/* The peer's primary connection, dialing if there is none. */
static kv_status route(tcp *s, kvt_ep ep, kvt_peer peer, tc_conn **out) {
    tc_ep *e = find_ep(s, ep);
    if (!e || peer >= e->n_peers) return KV_ENOENT;
    if (e->peer[peer].conn == TC_NONE) {
        kv_status st = conn_dial(s, ep, peer);
        if (st != KV_OK) return st == KV_ENOMEM ? KV_ENOMEM : KV_ECONNRESET;
    }
    *out = &s->conn[e->peer[peer].conn];
    return KV_OK;
}

/* ---- transport ops: memory ------------------------------------------------------- */

static kv_status op_reg(kvt *t, void *base, uint64_t len, kvt_mem_kind kind, kvt_region *out) {
    tcp *s = T(t);
    if (!base || len == 0 || !out) return KV_EINVAL;
    if (kind != KVT_MEM_HOST) return KV_ENOSYS;
    return kvt_region_add(&s->reg, base, len, out);
}

/* Another live registration covers all of r's memory (a grant over a
 * region that stays registered). */
static bool still_covered(tcp *s, const tc_region *r) {
    for (uint32_t i = 0; i < s->reg.hw; i++) {
        const tc_region *o = &s->reg.e[i];
        if (o != r && o->used && o->base <= r->base && r->base + r->len <= o->base + o->len) return true;
    }
    return false;
}

/* Queued data still pointing into the region would be read after the
 * caller frees it: those connections fail first (their batches complete
 * KV_ECONNRESET). Deregistering memory with transfers in flight is the
 * caller's error; this keeps it from becoming a use after free. Revoking a
 * grant whose memory stays registered frees nothing and fails nothing. */
static kv_status op_dereg(kvt *t, kvt_region id) {
    tcp *s = T(t);
    const tc_region *r = find_region(s, id);
    if (r && !still_covered(s, r)) {
        for (uint32_t ci = 0; ci < KVT_TCP_CONNS_MAX; ci++) {
            tc_conn *c = &s->conn[ci];
            bool hit = false;
            for (uint32_t i = c->seg_head; c->state != CS_FREE && i != c->seg_tail && !hit; i++) {
                const tc_seg *g = seg_at(c, i);
                hit = g->ext && g->ext >= r->base && g->ext < r->base + r->len;
            }
            if (!hit) continue;
            kv_logf(s->env, KV_LOG_WARN, "tcp: region %u deregistered with queued sends; connection failed", id);
            conn_fail(s, ci);
        }
    }
    kvt_grant_remove_region(&s->grants, id);
    return kvt_region_remove(&s->reg, id);
}

static kv_status op_export_desc(kvt *t, kvt_region id, kvt_desc *out) {
    return kvt_region_desc(&T(t)->reg, id, out);
}

/* A grant's key: 128 bits from libsodium's CSPRNG (never all zero). */
static kv_status op_grant(kvt *t, kvt_region r, kvt_ep ep, kvt_peer peer, uint64_t off, uint64_t len, uint32_t *out_id,
                          kvt_desc *out_desc) {
    tcp *s = T(t);
    if (!out_id || !out_desc) return KV_EINVAL;
    const tc_region *reg = find_region(s, r);
    const tc_ep *e = find_ep(s, ep);
    if (!reg || !e || peer >= e->n_peers) return KV_ENOENT;
    if (len == 0 || !range_ok(reg, off, len)) return KV_ERANGE;
    if (kv_auth_init() != KV_OK) return KV_EIO;
    kvt_key key = {{0, 0}};
    while (kvt_key_zero(&key)) kv_auth_random(&key, sizeof key);
    kv_status st = kvt_grant_add(&s->grants, r, ep, peer, off, len, &key, out_id);
    if (st == KV_OK) *out_desc = (kvt_desc){.region = *out_id, .len = off + len, .key = key};
    return st;
}

static kv_status op_revoke(kvt *t, uint32_t id) { return kvt_grant_remove(&T(t)->grants, id); }

/* ---- transport ops: endpoints ---------------------------------------------------- */

static int listen_socket(const char *host, uint16_t *port) {
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    if (inet_pton(AF_INET, host, &sa.sin_addr) != 1) return -1;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return -1;
    socklen_t sl = sizeof sa;
    if (!set_nonblock(fd) || bind(fd, (const struct sockaddr *)&sa, sizeof sa) != 0 || listen(fd, 128) != 0 ||
        getsockname(fd, (struct sockaddr *)&sa, &sl) != 0) {
        close(fd);
        return -1;
    }
    *port = ntohs(sa.sin_port);
    return fd;
}

static kv_status op_ep_open(kvt *t, uint32_t owner, kvt_ep *out_ep, kvt_addr *out_addr) {
    tcp *s = T(t);
    if (!out_ep) return KV_EINVAL;
    if (s->n_eps >= KVT_TCP_EPS_MAX) return KV_ENOMEM;
    uint16_t port = 0;
    int fd = listen_socket(s->host, &port);
    if (fd < 0) return KV_EIO;
    tc_ep *e = &s->ep[s->n_eps];
    memset(e, 0, sizeof *e);
    e->open = true;
    e->fd = fd;
    e->owner = owner;
    snprintf(e->addr.s, sizeof e->addr.s, "%s:%u", s->host, (unsigned)port);
    *out_ep = s->n_eps++;
    if (out_addr) *out_addr = e->addr;
    return KV_OK;
}

static kv_status op_connect(kvt *t, kvt_ep ep, const kvt_addr *addr, kvt_peer *out) {
    tcp *s = T(t);
    struct sockaddr_in sa;
    if (!addr || !out) return KV_EINVAL;
    tc_ep *e = find_ep(s, ep);
    if (!e) return KV_ENOENT;
    size_t len = strnlen(addr->s, sizeof addr->s);
    if (len >= sizeof addr->s || !parse_addr(addr->s, &sa)) return KV_EINVAL;
    uint32_t id = peer_get(e, addr->s, len);
    if (id == TC_NONE) return KV_ENOMEM;
    if (e->peer[id].conn == TC_NONE) {
        kv_status st = conn_dial(s, ep, id);
        if (st != KV_OK) return st;
    }
    *out = id;
    return KV_OK;
}

/* ---- transport ops: submit and ctrl ---------------------------------------------- */

/* Ring bytes the batch takes: frame headers, and the data of entries up to
 * KVT_TCP_INLINE_MAX (larger ones are sent in place). */
static kv_status check_local(tcp *s, const kvt_write *w, uint32_t n, uint64_t *bytes) {
    *bytes = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (w[i].len > KVT_TCP_ENTRY_MAX) return KV_EINVAL;
        const tc_region *r = find_region(s, w[i].local);
        if (!r || !range_ok(r, w[i].local_off, w[i].len)) return KV_ERANGE;
        *bytes += HDR + KVT_TCP_WRITE_HDR + (w[i].len <= KVT_TCP_INLINE_MAX ? w[i].len : 0u);
    }
    return KV_OK;
}

static uint32_t batch_alloc(tcp *s) {
    for (uint32_t i = 0; i < KVT_TCP_BATCHES_MAX; i++)
        if (s->batch[i].state == B_FREE) return i;
    return TC_NONE;
}

static void put_entry(tcp *s, tc_conn *c, uint64_t wire, uint32_t i, uint32_t n, const kvt_write *w) {
    uint8_t h[KVT_TCP_WRITE_HDR];
    put64(h, wire);
    put32(h + 8, i);
    put32(h + 12, n);
    put32(h + 16, w->remote);
    put64(h + 20, w->remote_off);
    put32(h + 28, w->len);
    put64(h + WRITE_KEY_AT, w->key.w[0]);
    put64(h + WRITE_KEY_AT + 8, w->key.w[1]);
    tx_frame_start(c);
    tx_frame_hdr(c, 1u + KVT_TCP_WRITE_HDR + w->len, KVT_TCP_WRITE);
    tx_put(c, h, sizeof h);
    const tc_region *r = find_region(s, w->local);
    if (w->len > KVT_TCP_INLINE_MAX) tx_ext(c, r->base + w->local_off, w->len);
    else if (w->len) tx_put(c, r->base + w->local_off, w->len); /* small: one copy beats a gather entry */
}

static kv_status op_submit(kvt *t, kvt_ep ep, kvt_peer peer, const kvt_write *w, uint32_t n, uint64_t tag,
                           uint64_t deadline_ns) {
    tcp *s = T(t);
    tc_conn *c;
    uint64_t bytes;
    if (!w || n == 0 || n > KVT_BATCH_WRITES_MAX) return KV_EINVAL;
    tc_ep *e = find_ep(s, ep);
    if (!e || peer >= e->n_peers) return KV_ENOENT;
    kv_status st = check_local(s, w, n, &bytes);
    if (st != KV_OK) return st;
    if (bytes > KVT_TCP_TX_CAP - TX_RESERVE) return KV_EINVAL;
    uint32_t bi = batch_alloc(s);
    if (bi == TC_NONE) return KV_EFULL;
    st = route(s, ep, peer, &c);
    if (st != KV_OK) return st;
    if (tx_free(c) < bytes + TX_RESERVE || seg_free(c) < 3u * n + TX_SEG_RESERVE) return KV_EFULL;
    tc_batch *b = &s->batch[bi];
    uint64_t wire = (++s->wire_seq << BATCH_BITS) | bi;
    *b = (tc_batch){.state = B_WAIT, .ep = ep, .peer = peer, .n = n, .tag = tag, .wire = wire, .deadline = deadline_ns,
                    .conn = (uint32_t)(c - s->conn), .conn_gen = c->gen};
    for (uint32_t i = 0; i < n; i++) put_entry(s, c, wire, i, n, &w[i]);
    b->end = c->q_bytes;
    return KV_OK;
}

static kv_status op_send_ctrl(kvt *t, kvt_ep ep, kvt_peer peer, const void *buf, uint32_t len) {
    tcp *s = T(t);
    tc_conn *c;
    if ((!buf && len > 0) || len > KV_WIRE_MAX) return KV_EINVAL;
    kv_status st = route(s, ep, peer, &c);
    if (st != KV_OK) return st;
    if (lane_free(c) < HDR + len + LANE_RESERVE) return KV_EFULL;
    lane_put(c, KVT_TCP_CTRL, buf, len);
    return KV_OK;
}

/* ---- events ---------------------------------------------------------------------- */

static kvt_event *ev_next(tcp *s, evout *o, uint32_t kind, uint32_t ep, uint32_t peer) {
    if (o->n >= o->cap) return NULL;
    kvt_event *ev = &o->ev[o->n];
    memset(ev, 0, sizeof *ev);
    ev->kind = kind;
    ev->ep = ep;
    ev->owner = s->ep[ep].owner;
    ev->peer = peer;
    s->ev_data[o->n] = NULL;
    o->n++;
    return ev;
}

/* Emits a done batch if there is room; otherwise it stays B_DONE. */
static void batch_emit(tcp *s, evout *o, tc_batch *b) {
    kvt_event *ev = ev_next(s, o, KVT_EV_DONE, b->ep, b->peer);
    if (!ev) return;
    ev->done = b->done;
    b->state = B_FREE;
}

static void batch_finish(tcp *s, evout *o, tc_batch *b, uint32_t n_ok, uint32_t n_failed, kv_status st) {
    b->state = B_DONE;
    b->done = (kvt_completion){.tag = b->tag, .n_ok = n_ok, .n_failed = n_failed, .status = st};
    batch_emit(s, o, b);
}

/* Deadlines and deferred completions. A timed-out batch whose bytes all
 * reached the kernel completes KV_ETIMEDOUT; they may still land on the
 * peer (the core's protocol guarantees D does not reuse the blocks before
 * P's response) and later acks for its wire tag find no batch and are
 * ignored. One with bytes still queued would have its source read after its
 * completion: its connection fails first (the batch completes KV_ETIMEDOUT,
 * the others on it KV_ECONNRESET, the peer gets a PEER_DOWN). */
static void scan_batches(tcp *s, evout *o, uint64_t now) {
    for (uint32_t i = 0; i < KVT_TCP_BATCHES_MAX && o->n < o->cap; i++) {
        tc_batch *b = &s->batch[i];
        if (b->state == B_DONE) {
            batch_emit(s, o, b);
        } else if (b->state == B_WAIT && b->deadline != 0 && now >= b->deadline) {
            tc_conn *c = b->conn < KVT_TCP_CONNS_MAX ? &s->conn[b->conn] : NULL;
            bool queued = c && c->state != CS_FREE && c->gen == b->conn_gen && c->sent_bytes < b->end;
            batch_finish(s, o, b, 0, b->n, KV_ETIMEDOUT);
            if (queued) {
                kv_logf(s->env, KV_LOG_WARN, "tcp: batch timed out with %llu bytes unsent; connection failed",
                        (unsigned long long)(b->end - c->sent_bytes));
                conn_fail(s, b->conn);
            }
        }
    }
}

static void scan_peers(tcp *s, evout *o) {
    for (uint32_t e = 0; e < s->n_eps; e++) {
        tc_ep *ep = &s->ep[e];
        for (uint32_t k = 0; k < ep->n_peers && o->n < o->cap; k++) {
            if (!ep->peer[k].down_pending) continue;
            if (ev_next(s, o, KVT_EV_PEER_DOWN, e, k)) ep->peer[k].down_pending = false;
        }
    }
}

/* ---- frame parsing --------------------------------------------------------------- */

/* The connection now belongs to the peer at address a. */
static bool map_peer(tcp *s, uint32_t ci, const kvt_addr *a) {
    tc_conn *c = &s->conn[ci];
    tc_ep *e = &s->ep[c->ep];
    uint32_t id = peer_get(e, a->s, strlen(a->s));
    if (id == TC_NONE) return false;
    c->peer = id;
    if (e->peer[id].conn == TC_NONE) e->peer[id].conn = ci; /* replies go back on it */
    return true;
}

static bool parse_hello_addr(const uint8_t *p, uint32_t len, kvt_addr *a) {
    struct sockaddr_in sa;
    if (len == 0 || len >= KV_ADDR_MAX || memchr(p, 0, len)) return false;
    memset(a, 0, sizeof *a);
    memcpy(a->s, p, len);
    return parse_addr(a->s, &sa);
}

static bool on_hello(tcp *s, uint32_t ci, const uint8_t *p, uint32_t len) {
    tc_conn *c = &s->conn[ci];
    kvt_addr a;
    if (c->peer != TC_NONE || (s->key.set && c->au != AU_WAIT_HELLO)) return false;
    if (!s->key.set) {
        if (len > NONCE && !parse_hello_addr(p, len, &a) && parse_hello_addr(p + NONCE, len - NONCE, &a))
            c->bad = "HELLO carries a nonce: the peer has a cluster secret and this node has none";
        return parse_hello_addr(p, len, &a) && map_peer(s, ci, &a);
    }
    if (len <= NONCE || !parse_hello_addr(p + NONCE, len - NONCE, &a)) {
        c->bad = parse_hello_addr(p, len, &a) ? "HELLO without a nonce: the peer has no cluster secret"
                                              : "malformed HELLO";
        return false;
    }
    if (tx_free(c) < HDR + NONCE + MAC || seg_free(c) < 1u) return false;
    memcpy(c->nonce_peer, p, NONCE);
    c->claimed = a;
    kv_auth_random(c->nonce_mine, NONCE);
    uint8_t mac[MAC];
    hs_mac(s, LABEL_ACCEPT, c->nonce_peer, c->nonce_mine, &a, mac);
    tx_frame_hdr(c, 1u + NONCE + MAC, KVT_TCP_CHAL);
    tx_put(c, c->nonce_mine, NONCE);
    tx_put(c, mac, MAC);
    c->gate = c->hello_end = c->q_bytes;
    c->au = AU_WAIT_PROOF;
    return true;
}

/* The dialer: the acceptor proved the secret; our PROOF may leave. */
static bool on_chal(tcp *s, uint32_t ci, const uint8_t *p, uint32_t len) {
    tc_conn *c = &s->conn[ci];
    const kvt_addr *me = &s->ep[c->ep].addr;
    c->bad = !s->key.set ? "a CHAL: the peer has a cluster secret and this node has none"
                         : "a CHAL out of the handshake's order or of the wrong size";
    if (c->au != AU_WAIT_CHAL || len != NONCE + MAC) return false;
    memcpy(c->nonce_peer, p, NONCE);
    if (!hs_check(s, LABEL_ACCEPT, c->nonce_mine, c->nonce_peer, me, p + NONCE)) {
        c->bad = "the accepting side does not hold the cluster secret (its CHAL does not check out)";
        return false;
    }
    uint8_t mac[MAC];
    hs_mac(s, LABEL_DIAL, c->nonce_peer, c->nonce_mine, me, mac);
    tx_poke(c, c->proof_pos, mac, MAC);
    c->au = AU_OK;
    s->st.auth_ok++;
    return true;
}

/* The acceptor: the dialer proved the secret; the connection is its peer's. */
static bool on_proof(tcp *s, uint32_t ci, const uint8_t *p, uint32_t len) {
    tc_conn *c = &s->conn[ci];
    c->bad = !s->key.set ? "a PROOF: the peer has a cluster secret and this node has none"
                         : "a PROOF out of the handshake's order or of the wrong size";
    if (c->au != AU_WAIT_PROOF || len != MAC) return false;
    if (!hs_check(s, LABEL_DIAL, c->nonce_mine, c->nonce_peer, &c->claimed, p)) {
        c->bad = "the dialing side does not hold the cluster secret (its PROOF does not check out)";
        return false;
    }
    if (!map_peer(s, ci, &c->claimed)) return false;
    c->au = AU_OK;
    s->st.auth_ok++;
    return true;
}

static bool on_ack(tcp *s, uint32_t ci, evout *o, const uint8_t *p, uint32_t len) {
    const tc_conn *c = &s->conn[ci];
    if (len != KVT_TCP_ACK_LEN) return false;
    uint64_t wire = get64(p);
    uint32_t n_ok = get32(p + 8), n_failed = get32(p + 12);
    tc_batch *b = &s->batch[wire & (KVT_TCP_BATCHES_MAX - 1u)];
    if (b->state != B_WAIT || b->wire != wire || b->ep != c->ep || b->peer != c->peer) return true; /* late: ignore */
    if ((uint64_t)n_ok + n_failed != b->n) return false;
    batch_finish(s, o, b, n_ok, n_failed, n_failed ? KV_ERANGE : KV_OK);
    return true;
}

/* The owner's check of one WRITE entry (c->s_region names the grant):
 * refusals are counted by reason and logged, rate-limited. */
static bool write_allowed(tcp *s, const tc_conn *c, const kvt_key *key, uint32_t dlen) {
    const kvt_grant_entry *g = NULL;
    kvt_grant_verdict v = kvt_grant_check(&s->grants, c->s_region, key, c->ep, c->peer, c->s_off, dlen, &g);
    if (v == KVT_GRANT_OK) {
        const tc_region *r = find_region(s, g->region);
        if (r && range_ok(r, c->s_off, dlen)) return true;
        v = KVT_GRANT_OUTSIDE;
    }
    uint64_t *by[] = {[KVT_GRANT_NONE] = &s->st.write_no_grant, [KVT_GRANT_BAD_KEY] = &s->st.write_bad_key,
                      [KVT_GRANT_WRONG_PEER] = &s->st.write_wrong_peer, [KVT_GRANT_OUTSIDE] = &s->st.write_outside};
    ++*by[v];
    uint64_t n = ++s->st.write_refused;
    if (log_due(n))
        kv_logf(s->env, KV_LOG_WARN,
                "tcp: ep %u peer %s: WRITE refused (grant %u, offset %llu, %u bytes): %s (%llu so far)", c->ep,
                c->peer < s->ep[c->ep].n_peers ? s->ep[c->ep].peer[c->peer].addr.s : "?", c->s_region,
                (unsigned long long)c->s_off, dlen, kvt_grant_verdict_str(v), (unsigned long long)n);
    return false;
}

/* Validates a WRITE header and arms the sink; false on a protocol error. */
static bool on_write_hdr(tcp *s, tc_conn *c, const uint8_t *p, uint32_t len) {
    uint32_t dlen = get32(p + 28);
    c->s_tag = get64(p);
    c->s_index = get32(p + 8);
    c->s_count = get32(p + 12);
    c->s_region = get32(p + 16);
    c->s_off = get64(p + 20);
    if (dlen != len - 1u - KVT_TCP_WRITE_HDR || c->s_count == 0 || c->s_count > KVT_BATCH_WRITES_MAX ||
        c->s_index >= c->s_count)
        return false;
    kvt_key key = {{get64(p + WRITE_KEY_AT), get64(p + WRITE_KEY_AT + 8)}};
    c->s_ok = write_allowed(s, c, &key, dlen);
    c->s_left = dlen;
    c->big = dlen >= RECV_DIRECT_MIN;
    c->sink = true;
    if (c->s_index == 0 || c->s_tag != c->a_tag) {
        c->a_tag = c->s_tag;
        c->a_ok = 0;
    }
    return true;
}

/* Where the next k sink bytes go, or NULL to discard (region gone). */
static uint8_t *sink_dst(tcp *s, tc_conn *c, uint32_t k) {
    if (!c->s_ok) return NULL;
    const kvt_grant_entry *g = kvt_grant_find(&s->grants, c->s_region);
    const tc_region *r = g ? find_region(s, g->region) : NULL;
    if (!r || !range_ok(r, c->s_off, k)) {
        c->s_ok = false;
        return NULL;
    }
    return r->base + c->s_off;
}

static void sink_advance(tcp *s, tc_conn *c, uint32_t k) {
    c->s_off += k;
    c->s_left -= k;
    if (c->s_left != 0) return;
    c->sink = false;
    c->a_ok += c->s_ok ? 1u : 0u;
    if (c->s_index + 1u != c->s_count) return;
    uint8_t a[KVT_TCP_ACK_LEN];
    put64(a, c->s_tag);
    put32(a + 8, c->a_ok);
    put32(a + 12, c->s_count - (c->a_ok > c->s_count ? c->s_count : c->a_ok));
    lane_put(c, KVT_TCP_WRITE_ACK, a, sizeof a);
    (void)s;
}

/* Copies buffered sink bytes into the region. */
static void sink_from_rx(tcp *s, tc_conn *c) {
    uint32_t avail = c->rx_len - c->rx_off;
    uint32_t k = avail < c->s_left ? avail : c->s_left;
    uint8_t *dst = sink_dst(s, c, k);
    if (dst && k) memcpy(dst, c->rx + c->rx_off, k);
    c->rx_off += k;
    sink_advance(s, c, k);
}

typedef enum { PR_MORE, PR_STOP, PR_ERR } pr_t;

static pr_t parse_small(tcp *s, uint32_t ci, evout *o, uint32_t len, uint8_t type) {
    tc_conn *c = &s->conn[ci];
    const uint8_t *p = c->rx + c->rx_off + HDR;
    uint32_t plen = len - 1u;
    if (len > KVT_TCP_FRAME_MAX) return PR_ERR;
    if (c->rx_len - c->rx_off < 4u + len) return PR_STOP;
    if (type == KVT_TCP_HELLO) {
        if (!on_hello(s, ci, p, plen)) return PR_ERR;
    } else if (type == KVT_TCP_CHAL) {
        if (!on_chal(s, ci, p, plen)) return PR_ERR;
    } else if (type == KVT_TCP_PROOF) {
        if (!on_proof(s, ci, p, plen)) return PR_ERR;
    } else if (c->peer == TC_NONE || c->au != AU_OK) {
        c->bad = "a frame before the handshake ended";
        return PR_ERR;
    } else if (type == KVT_TCP_CTRL) {
        if (plen > KV_WIRE_MAX) return PR_ERR;
        kvt_event *ev = ev_next(s, o, KVT_EV_CTRL, c->ep, c->peer);
        if (!ev) return PR_STOP;
        ev->len = plen;
        s->ev_data[o->n - 1u] = p;
        c->pinned = true;
    } else if (type == KVT_TCP_WRITE_ACK) {
        if (!on_ack(s, ci, o, p, plen)) return PR_ERR;
    } else {
        return PR_ERR;
    }
    c->rx_off += 4u + len;
    return PR_MORE;
}

static pr_t parse_one(tcp *s, uint32_t ci, evout *o) {
    tc_conn *c = &s->conn[ci];
    if (c->sink) {
        if (c->rx_len == c->rx_off) return PR_STOP;
        sink_from_rx(s, c);
        return PR_MORE;
    }
    if (o->n >= o->cap || c->rx_len - c->rx_off < HDR) return PR_STOP;
    const uint8_t *h = c->rx + c->rx_off;
    uint32_t len = get32(h);
    uint8_t type = h[4];
    if (len == 0) return PR_ERR;
    if (type != KVT_TCP_WRITE) {
        c->big = false;
        return parse_small(s, ci, o, len, type);
    }
    if (c->peer == TC_NONE || c->au != AU_OK) {
        c->bad = "a WRITE before the handshake ended";
        return PR_ERR;
    }
    if (len < 1u + KVT_TCP_WRITE_HDR || len > WRITE_LEN_MAX) return PR_ERR;
    if (c->rx_len - c->rx_off < HDR + KVT_TCP_WRITE_HDR) return PR_STOP;
    if (lane_free(c) < HDR + KVT_TCP_ACK_LEN) return PR_STOP; /* back-pressure: room for the ack */
    if (!on_write_hdr(s, c, h + HDR, len)) return PR_ERR;
    c->rx_off += HDR + KVT_TCP_WRITE_HDR;
    if (c->s_left == 0) sink_advance(s, c, 0);
    return PR_MORE;
}

/* Parses buffered frames; false if the connection was failed. */
static bool parse_conn(tcp *s, uint32_t ci, evout *o) {
    for (uint32_t g = 0; g < FRAMES_PER_CONN; g++) {
        pr_t r = parse_one(s, ci, o);
        if (r == PR_STOP) return true;
        if (r == PR_ERR) {
            const char *why = s->conn[ci].bad;
            if (why && s->key.set) auth_reject(s, ci, &s->st.auth_failed, why);
            else proto_error(s, ci, why ? why : "malformed or oversized frame");
            return false;
        }
    }
    return true;
}

/* ---- socket I/O ------------------------------------------------------------------ */

static void rx_compact(tc_conn *c) {
    if (c->rx_off == 0) return;
    memmove(c->rx, c->rx + c->rx_off, c->rx_len - c->rx_off);
    c->rx_len -= c->rx_off;
    c->rx_off = 0;
}

/* One recv; > 0 = bytes got, 0 = would block / no room, -1 = EOF or error. */
static int recv_some(tcp *s, tc_conn *c) {
    uint8_t *dst;
    size_t room;
    if (c->sink && c->rx_len == c->rx_off && c->s_left >= RECV_DIRECT_MIN && (dst = sink_dst(s, c, c->s_left)) != NULL) {
        /* straight into the region; the next frame's header (at most a
         * WRITE header, so its data lands in place too) into rx. Small
         * entries go through rx in bulk: fewer syscalls, short copies. */
        if (!c->pinned && c->rx_off) rx_compact(c);
        uint32_t room_hdr = RX_CAP - c->rx_len < HDR + KVT_TCP_WRITE_HDR ? RX_CAP - c->rx_len : HDR + KVT_TCP_WRITE_HDR;
        struct iovec iov[2] = {{.iov_base = dst, .iov_len = c->s_left}, {.iov_base = c->rx + c->rx_len, .iov_len = room_hdr}};
        struct msghdr mh = {.msg_iov = iov, .msg_iovlen = room_hdr ? 2u : 1u};
        ssize_t n = recvmsg(c->fd, &mh, 0);
        if (n > 0) {
            uint32_t k = (size_t)n < c->s_left ? (uint32_t)n : c->s_left;
            c->rx_len += (uint32_t)n - k;
            sink_advance(s, c, k);
        }
        return n > 0 ? (int)(n < INT32_MAX ? n : INT32_MAX) : (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) ? 0 : -1;
    }
    if (!c->pinned && c->rx_len == RX_CAP) rx_compact(c);
    room = RX_CAP - c->rx_len;
    if (room == 0) return 0;
    if (c->big) { /* in a stream of big entries: the rest of this one and the next header only */
        size_t want = (c->sink ? c->s_left : 0u) + HDR + KVT_TCP_WRITE_HDR;
        if (want < room) room = want;
    }
    ssize_t n = recv(c->fd, c->rx + c->rx_len, room, 0);
    if (n > 0) c->rx_len += (uint32_t)n;
    return n > 0 ? (int)n : (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) ? 0 : -1;
}

static void conn_read(tcp *s, uint32_t ci, evout *o) {
    tc_conn *c = &s->conn[ci];
    uint64_t bytes = 0;
    if (!parse_conn(s, ci, o)) return;
    for (uint32_t r = 0; r < RECV_ROUNDS && o->n < o->cap && bytes < RECV_BYTES_PER_POLL; r++) {
        int got = recv_some(s, c);
        if (got < 0) {
            (void)parse_conn(s, ci, o);
            if (c->state != CS_FREE) conn_fail(s, ci);
            return;
        }
        bytes += (uint64_t)got;
        if (!parse_conn(s, ci, o) || got == 0) return;
    }
}

/* Gathers up to IOV_MAX_SEND runs into one sendmsg: the lane first when it
 * may go (*lane_bytes of it), then the data queue; with lane frames waiting
 * behind a WRITE frame, the data only up to the next frame start. */
static uint32_t gather(const tc_conn *c, struct iovec *iov, uint32_t *lane_bytes, uint64_t budget) {
    uint32_t n = 0;
    uint64_t total = 0;
    uint64_t ring = c->tx_tail; /* ring bytes of the queue start here */
    bool lane = lane_ready(c), waiting = lane_pending(c) && !lane;
    *lane_bytes = 0;
    if (budget > may_send(c)) budget = may_send(c);
    if (lane) {
        *lane_bytes = c->lane_len - c->lane_off;
        iov[n++] = (struct iovec){.iov_base = c->lane + c->lane_off, .iov_len = *lane_bytes};
    }
    for (uint32_t i = c->seg_head; i != c->seg_tail && n + 2u <= IOV_MAX_SEND; i++) {
        const tc_seg *g = seg_at(c, i);
        if (waiting && g->fs && i != c->seg_head) break; /* the lane goes first there */
        uint32_t off = i == c->seg_head ? c->seg_off : 0, len = g->len - off;
        if (!len) continue;
        if (total >= budget) break;
        if (len > budget - total) len = (uint32_t)(budget - total);
        total += len;
        if (g->ext) {
            iov[n++] = (struct iovec){.iov_base = (void *)(uintptr_t)(g->ext + off), .iov_len = len};
            continue;
        }
        size_t pos = (size_t)(ring % KVT_TCP_TX_CAP);
        size_t first = KVT_TCP_TX_CAP - pos < len ? KVT_TCP_TX_CAP - pos : len;
        iov[n++] = (struct iovec){.iov_base = c->tx + pos, .iov_len = first};
        if (len > first) iov[n++] = (struct iovec){.iov_base = c->tx, .iov_len = len - first};
        ring += len;
    }
    return n;
}

static void consume(tc_conn *c, uint64_t k, uint32_t lane_bytes) {
    uint32_t kl = k < lane_bytes ? (uint32_t)k : lane_bytes;
    c->lane_off += kl;
    if (c->lane_off == c->lane_len) c->lane_off = c->lane_len = 0;
    k -= kl;
    c->sent_bytes += k;
    while (k) {
        tc_seg *g = seg_at(c, c->seg_head);
        uint32_t left = g->len - c->seg_off, take = k < left ? (uint32_t)k : left;
        if (!g->ext) c->tx_tail += take;
        c->seg_off += take;
        k -= take;
        if (c->seg_off == g->len) {
            c->seg_head++;
            c->seg_off = 0;
        }
    }
}

static void conn_write(tcp *s, uint32_t ci) {
    tc_conn *c = &s->conn[ci];
    struct iovec iov[IOV_MAX_SEND];
    uint64_t sent = 0;
    for (uint32_t r = 0; r < SEND_ROUNDS && tx_ready(c) && sent < SEND_BYTES_PER_POLL; r++) {
        uint32_t lane_bytes;
        struct msghdr mh = {.msg_iov = iov, .msg_iovlen = gather(c, iov, &lane_bytes, SEND_BYTES_PER_POLL - sent)};
        ssize_t n = sendmsg(c->fd, &mh, MSG_NOSIGNAL);
        if (n > 0) {
            consume(c, (uint64_t)n, lane_bytes);
            sent += (uint64_t)n;
            continue;
        }
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
        conn_fail(s, ci);
        return;
    }
}

static void conn_connected(tcp *s, uint32_t ci, short rev) {
    tc_conn *c = &s->conn[ci];
    int err = 0;
    socklen_t el = sizeof err;
    if (!(rev & (POLLOUT | POLLERR | POLLHUP))) return;
    if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &el) != 0 || err != 0) {
        conn_fail(s, ci);
        return;
    }
    c->state = CS_OPEN;
}

/* An accepted connection that has not finished its HELLO (and proof). */
static bool pending(const tc_conn *c) {
    return (c->state == CS_OPEN || c->state == CS_CONNECTING) && c->from_ip != 0 && handshaking(c);
}

/* Admission: at most pending_max accepted connections in their handshake,
 * pending_per_addr of them from one address. A new connection over either
 * limit evicts the oldest pending one (of that address, else of all): a
 * client that never finishes its HELLO cannot keep honest peers out, which
 * finish theirs in one round trip, and the slots above pending_max are
 * left to authenticated peers. */
static void admit(tcp *s, uint32_t ip) {
    for (int pass = 0; pass < 2; pass++) {
        uint32_t n = 0, oldest = TC_NONE;
        for (uint32_t i = 0; i < KVT_TCP_CONNS_MAX; i++) {
            const tc_conn *c = &s->conn[i];
            if (!pending(c) || (pass == 0 && c->from_ip != ip)) continue;
            n++;
            if (oldest == TC_NONE || c->opened_ns < s->conn[oldest].opened_ns) oldest = i;
        }
        uint32_t limit = pass == 0 ? s->pending_per_addr : s->pending_max;
        if (n >= limit && oldest != TC_NONE)
            auth_reject(s, oldest, &s->st.evicted,
                        pass == 0 ? "evicted: too many connections from its address in their HELLO"
                                  : "evicted: too many connections in their HELLO");
    }
}

static void accept_some(tcp *s, uint32_t ep) {
    for (uint32_t g = 0; g < ACCEPTS_PER_POLL; g++) {
        struct sockaddr_in sa;
        socklen_t sl = sizeof sa;
        int fd = accept(s->ep[ep].fd, (struct sockaddr *)&sa, &sl);
        if (fd < 0) return;
        uint32_t ip = sa.sin_family == AF_INET ? ntohl(sa.sin_addr.s_addr) : 0u;
        if (!ip) ip = 1u; /* 0 marks a connection this kvt dialed */
        admit(s, ip);
        uint32_t ci = conn_alloc(s);
        if (ci == TC_NONE || !set_nonblock(fd)) {
            uint64_t n = ++s->st.refused_no_slot;
            if (log_due(n))
                kv_logf(s->env, KV_LOG_WARN, "tcp: ep %u: no connection slot; incoming connection closed (%llu so far)",
                        ep, (unsigned long long)n);
            close(fd);
            continue;
        }
        int one = 1;
        (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        tc_conn *c = &s->conn[ci];
        c->fd = fd;
        c->ep = ep;
        c->state = CS_OPEN;
        c->opened_ns = kv_now_ns(s->env);
        c->from_ip = ip;
        c->au = s->key.set ? AU_WAIT_HELLO : AU_OK;
        char text[INET_ADDRSTRLEN] = "?";
        if (sa.sin_family == AF_INET) (void)inet_ntop(AF_INET, &sa.sin_addr, text, sizeof text);
        snprintf(c->from, sizeof c->from, "%s:%u", text, (unsigned)ntohs(sa.sin_port));
    }
}

/* Closes every connection whose HELLO (and handshake) did not end within
 * the deadline: a peer that connects and says nothing, or trickles, holds a
 * slot no longer than that. */
static void scan_handshakes(tcp *s, uint64_t now) {
    for (uint32_t i = 0; i < KVT_TCP_CONNS_MAX; i++) {
        tc_conn *c = &s->conn[i];
        if ((c->state != CS_OPEN && c->state != CS_CONNECTING) || !handshaking(c)) continue;
        if (now - c->opened_ns >= s->hello_deadline_ns)
            auth_reject(s, i, &s->st.hello_timeouts,
                        s->key.set ? "no HELLO and challenge-response within the HELLO deadline"
                                   : "no HELLO within the HELLO deadline");
    }
}

/* ---- poll ------------------------------------------------------------------------ */

static nfds_t fill_pollfds(tcp *s) {
    nfds_t n = 0;
    for (uint32_t e = 0; e < KVT_TCP_EPS_MAX; e++) {
        s->pfd_of[e] = TC_NONE;
        if (e >= s->n_eps || !s->ep[e].open) continue;
        s->pfd[n] = (struct pollfd){.fd = s->ep[e].fd, .events = POLLIN};
        s->pfd_of[e] = (uint32_t)n++;
    }
    for (uint32_t i = 0; i < KVT_TCP_CONNS_MAX; i++) {
        tc_conn *c = &s->conn[i];
        s->pfd_of[KVT_TCP_EPS_MAX + i] = TC_NONE;
        if (c->state != CS_CONNECTING && c->state != CS_OPEN) continue;
        short ev = (short)(c->state == CS_CONNECTING ? POLLOUT : (POLLIN | (tx_ready(c) ? POLLOUT : 0)));
        s->pfd[n] = (struct pollfd){.fd = c->fd, .events = ev};
        s->pfd_of[KVT_TCP_EPS_MAX + i] = (uint32_t)n++;
    }
    return n;
}

static void poll_conn(tcp *s, uint32_t ci, evout *o) {
    tc_conn *c = &s->conn[ci];
    uint32_t pi = s->pfd_of[KVT_TCP_EPS_MAX + ci];
    if (c->state == CS_FAILED) {
        conn_fail(s, ci);
        return;
    }
    if (pi == TC_NONE) return;
    short rev = s->pfd[pi].revents;
    if (c->state == CS_CONNECTING) conn_connected(s, ci, rev);
    if (c->state != CS_OPEN) return;
    conn_read(s, ci, o); /* also drains bytes buffered by an earlier poll */
}

static kv_status op_poll(kvt *t, kvt_event *out, uint32_t max, uint32_t *out_n) {
    tcp *s = T(t);
    if (!out_n || (max > 0 && !out)) return KV_EINVAL;
    *out_n = 0;
    s->poll_no++;
    s->ev_n = 0;
    evout o = {.ev = out, .cap = max < KVT_TCP_POLL_EVENTS_MAX ? max : KVT_TCP_POLL_EVENTS_MAX, .n = 0};
    for (uint32_t i = 0; i < KVT_TCP_CONNS_MAX; i++) {
        s->conn[i].pinned = false;
        if (s->conn[i].state != CS_FREE) rx_compact(&s->conn[i]);
    }
    nfds_t nfd = fill_pollfds(s);
    if (nfd > 0 && poll(s->pfd, nfd, 0) < 0 && errno != EINTR) return KV_EIO;
    for (uint32_t e = 0; e < s->n_eps; e++) {
        uint32_t pi = s->pfd_of[e];
        if (pi != TC_NONE && (s->pfd[pi].revents & POLLIN)) accept_some(s, e);
    }
    for (uint32_t i = 0; i < KVT_TCP_CONNS_MAX; i++)
        if (s->conn[i].state != CS_FREE) poll_conn(s, i, &o);
    /* Events first: when the reads produced events (a request for data, an
     * ack) and the last poll did write, this one returns them before the
     * write phase (up to SEND_BYTES_PER_POLL per connection): the caller
     * acts on them (submits the next batch, answers) while the kernel still
     * holds the bytes already sent, and the next poll writes. */
    bool write_now = o.n == 0 || s->writes_deferred;
    s->writes_deferred = false;
    for (uint32_t i = 0; i < KVT_TCP_CONNS_MAX; i++) {
        tc_conn *c = &s->conn[i];
        if (c->state != CS_OPEN || !tx_ready(c) || s->pfd_of[KVT_TCP_EPS_MAX + i] == TC_NONE) continue;
        if (write_now) conn_write(s, i);
        else s->writes_deferred = true;
    }
    uint64_t now = kv_now_ns(s->env);
    scan_handshakes(s, now);
    scan_batches(s, &o, now);
    scan_peers(s, &o);
    s->ev_n = o.n;
    *out_n = o.n;
    return KV_OK;
}

kv_status kvt_tcp_event_data(kvt *t, uint32_t i, const uint8_t **out) {
    if (!t || !out) return KV_EINVAL;
    tcp *s = T(t);
    if (i >= s->ev_n || !s->ev_data[i]) return KV_ENOENT;
    *out = s->ev_data[i];
    return KV_OK;
}

kv_status kvt_tcp_pollfds(kvt *t, struct pollfd *out, uint32_t cap, uint32_t *out_n) {
    if (!t || !out_n || (cap > 0 && !out)) return KV_EINVAL;
    tcp *s = T(t);
    nfds_t n = fill_pollfds(s);
    uint32_t k = n < cap ? (uint32_t)n : cap;
    if (k) memcpy(out, s->pfd, k * sizeof *out);
    *out_n = k;
    return n <= cap ? KV_OK : KV_EFULL;
}

/* ---- lifetime -------------------------------------------------------------------- */

static void op_close(kvt *t) {
    if (!t) return;
    tcp *s = T(t);
    const kv_env *env = s->env;
    for (uint32_t e = 0; e < s->n_eps; e++)
        if (s->ep[e].open && s->ep[e].fd >= 0) close(s->ep[e].fd);
    for (uint32_t i = 0; s->conn && i < KVT_TCP_CONNS_MAX; i++)
        if (s->conn[i].state != CS_FREE && s->conn[i].fd >= 0) close(s->conn[i].fd);
    kv_auth_forget(&s->key);
    void *p[] = {s->ep, s->conn, s->batch, s->rx_slab, s->tx_slab, s->lane_slab, s->seg_slab, s->pfd, s->pfd_of};
    for (size_t i = 0; i < sizeof p / sizeof p[0]; i++) kv_release(env, p[i]);
    kv_release(env, s);
}

static const kvt_ops tcp_ops = {
    .size = sizeof(kvt_ops),
    .name = "tcp",
    .reg = op_reg,
    .dereg = op_dereg,
    .export_desc = op_export_desc,
    .grant = op_grant,
    .revoke = op_revoke,
    .ep_open = op_ep_open,
    .connect = op_connect,
    .submit = op_submit,
    .send_ctrl = op_send_ctrl,
    .poll = op_poll,
    .close = op_close,
};

static bool alloc_tables(tcp *s) {
    const kv_env *env = s->env;
    s->ep = kv_alloc(env, KVT_TCP_EPS_MAX * sizeof *s->ep);
    s->conn = kv_alloc(env, KVT_TCP_CONNS_MAX * sizeof *s->conn);
    s->batch = kv_alloc(env, KVT_TCP_BATCHES_MAX * sizeof *s->batch);
    s->rx_slab = kv_alloc(env, (size_t)KVT_TCP_CONNS_MAX * RX_CAP);
    s->tx_slab = kv_alloc(env, (size_t)KVT_TCP_CONNS_MAX * KVT_TCP_TX_CAP);
    s->lane_slab = kv_alloc(env, (size_t)KVT_TCP_CONNS_MAX * LANE_CAP);
    s->seg_slab = kv_alloc(env, (size_t)KVT_TCP_CONNS_MAX * KVT_TCP_TX_SEGS * sizeof *s->seg_slab);
    s->pfd = kv_alloc(env, (KVT_TCP_EPS_MAX + KVT_TCP_CONNS_MAX) * sizeof *s->pfd);
    s->pfd_of = kv_alloc(env, (KVT_TCP_EPS_MAX + KVT_TCP_CONNS_MAX) * sizeof *s->pfd_of);
    return s->ep && s->conn && s->batch && s->rx_slab && s->tx_slab && s->lane_slab && s->seg_slab && s->pfd &&
           s->pfd_of;
}

kv_status kvt_tcp_new(const kv_env *env, const char *bind_host, kvt **out) {
    struct in_addr ia;
    if (!env || !bind_host || !out) return KV_EINVAL;
    *out = NULL;
    size_t hl = strnlen(bind_host, KV_ADDR_MAX);
    if (hl == 0 || hl > 15 || inet_pton(AF_INET, bind_host, &ia) != 1) return KV_EINVAL;
    tcp *s = kv_alloc(env, sizeof *s);
    if (!s) return KV_ENOMEM;
    memset(s, 0, sizeof *s);
    s->env = env;
    s->self = (kvt){.ops = &tcp_ops, .impl = s};
    memcpy(s->host, bind_host, hl);
    kvt_region_tab_init(&s->reg, s->reg_store, KVT_TCP_REGIONS_MAX);
    kvt_grant_tab_init(&s->grants, s->grant_store, KVT_TCP_GRANTS_MAX);
    s->hello_deadline_ns = (uint64_t)HELLO_DEADLINE_MS_DEFAULT * 1000000u;
    s->pending_max = PENDING_MAX_DEFAULT;
    s->pending_per_addr = PENDING_PER_ADDR_DEFAULT;
    if (!alloc_tables(s)) {
        op_close(&s->self);
        return KV_ENOMEM;
    }
    for (uint32_t i = 0; i < KVT_TCP_CONNS_MAX; i++) {
        s->conn[i] = (tc_conn){.state = CS_FREE, .fd = -1, .ep = TC_NONE, .peer = TC_NONE};
        s->conn[i].rx = s->rx_slab + (size_t)i * RX_CAP;
        s->conn[i].tx = s->tx_slab + (size_t)i * KVT_TCP_TX_CAP;
        s->conn[i].lane = s->lane_slab + (size_t)i * LANE_CAP;
        s->conn[i].seg = s->seg_slab + (size_t)i * KVT_TCP_TX_SEGS;
    }
    *out = &s->self;
    return KV_OK;
}

void kvt_tcp_free(kvt *t) {
    if (t) t->ops->close(t);
}

kv_status kvt_tcp_set_secret(kvt *t, const kv_auth_key *key) {
    if (!t) return KV_EINVAL;
    tcp *s = T(t);
    for (uint32_t i = 0; i < KVT_TCP_CONNS_MAX; i++)
        if (s->conn[i].state != CS_FREE) return KV_ESTATE;
    return kv_auth_set(&s->key, key);
}

void kvt_tcp_set_hello_deadline_ms(kvt *t, uint32_t ms) {
    if (t) T(t)->hello_deadline_ns = (uint64_t)(ms ? ms : 1u) * 1000000u;
}

void kvt_tcp_set_admission(kvt *t, uint32_t pending_max, uint32_t pending_per_addr) {
    if (!t) return;
    T(t)->pending_max = pending_max ? pending_max : 1u;
    T(t)->pending_per_addr = pending_per_addr ? pending_per_addr : 1u;
}

void kvt_tcp_stats_get(kvt *t, kvt_tcp_stats *out) {
    if (t && out) *out = T(t)->st;
}
