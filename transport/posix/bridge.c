/* transport/posix/bridge.c — posts between processes; see thread_rt.h and
 * transport/README.md ("Cross-process posts").
 *
 * Wire (one TCP stream per pair of processes, both directions):
 *   frame = len:u32le type:u8 body[len - 1]          (len counts type + body)
 *   HELLO (1) magic:u32 'KVB1' abi:u32 proc:u32      first frame each side sends
 *   DIR   (2) n:u32 then n x (id:u32 name[32])       the sender's actors (replaces
 *                                                    what the receiver knew of it)
 *   POST  (3) to:u32 src:u32 kind:u32 payload        one kv_rt post, payload <=
 *                                                    KV_MSG_PAYLOAD_MAX raw bytes
 * With a cluster secret (kvp_rt_set_secret; transport/README.md, "Threat
 * model") the HELLO carries a nonce and each side proves the secret before
 * the link is up; its DIR follows once the other side's PROOF checked out:
 *   HELLO (1) magic abi proc nonce[32]
 *   PROOF (4) mac[32] = MAC("kvconn bridge", nonce of the receiver, nonce of
 *             the sender, proc of the sender, proc of the receiver, abi)
 * (MAC: HMAC-SHA-256 under the secret, transport/auth/auth.h.) Nonces are
 * fresh per link; the order of the parts makes a proof useless in the other
 * direction, and a HELLO that echoes our own nonce is refused.
 * Anything else, a frame larger than a POST can be, an ABI or magic mismatch,
 * a second link for one process, a wrong PROOF, a HELLO whose size says the
 * two sides disagree on having a secret, or a DIR or POST before the link is
 * up closes the link with an error logged (rate-limited, counted). So does a
 * link not up within the handshake deadline, and the oldest of
 * BR_PENDING_MAX accepted links in their handshake when another arrives. A
 * POST for an actor this process does not have is logged and dropped. A POST
 * whose mailbox is full stays in the receive buffer and the link stops
 * reading (TCP back-pressure) until there is room.
 *
 * One bridge thread per process does all socket I/O (non-blocking sockets,
 * poll(2)); posting threads only append frames to the link's send ring under
 * the bridge lock and wake the thread through a self-pipe. */
#include "transport/posix/rt_impl.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "kvconn/limits.h"
#include "transport/posix/posix_env.h"

#define BR_MAGIC 0x3142564bu /* "KVB1" */
#define BR_HDR 5u
#define BR_POST_HDR 12u
#define BR_FRAME_MAX (1u + BR_POST_HDR + KV_MSG_PAYLOAD_MAX)
#define BR_RX_CAP (4u + BR_FRAME_MAX)
#define BR_TX_CAP (1u << 20)
#define BR_DIR_ENTRY (4u + KVP_NAME_MAX)
#define BR_READS_PER_POLL 16u

enum { B_HELLO = 1, B_DIR = 2, B_POST = 3, B_PROOF = 4 };
enum { LINK_HELLO = 1, LINK_UP = 2, LINK_PROOF = 3 };
#define BR_HELLO_PLAIN 12u
#define BR_HELLO_AUTH (BR_HELLO_PLAIN + KV_AUTH_NONCE_BYTES)
#define BR_LABEL "kvconn bridge"
#define BR_DEADLINE_MS_DEFAULT 5000u
#define BR_DIAL_BACKOFF_MIN_MS 20u  /* kvp_rt_dial's first wait after a refused connect ... */
#define BR_DIAL_BACKOFF_MAX_MS 500u /* ... doubling up to this */
#define BR_DIAL_TRIES 4u /* connections kvp_rt_dial makes when the other side closes one in its handshake */
#define BR_PENDING_MAX 8u /* accepted links in their handshake, at most: a new one evicts the oldest */
#define BR_LOG_FIRST 16u
#define BR_LOG_EVERY 1024u

static void put32(uint8_t *p, uint32_t v) {
    for (uint32_t i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8u * i));
}
static uint32_t get32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static bool set_nonblock(int fd) {
    int fl = fcntl(fd, F_GETFL, 0);
    return fl >= 0 && fcntl(fd, F_SETFL, fl | O_NONBLOCK) == 0;
}

static void kick(kvp_bridge *b) {
    uint8_t one = 1;
    if (b->wake_wr >= 0) (void)!write(b->wake_wr, &one, 1);
}

/* ---- send ring ------------------------------------------------------------------ */

static uint64_t tx_free(const kvp_link *l) { return BR_TX_CAP - (l->tx_head - l->tx_tail); }

static void tx_put(kvp_link *l, const void *src, uint32_t len) {
    const uint8_t *s = src;
    uint32_t pos = (uint32_t)(l->tx_head % BR_TX_CAP);
    uint32_t first = BR_TX_CAP - pos < len ? BR_TX_CAP - pos : len;
    memcpy(l->tx + pos, s, first);
    memcpy(l->tx, s + first, len - first);
    l->tx_head += len;
}

static void tx_hdr(kvp_link *l, uint32_t body, uint8_t type) {
    uint8_t h[BR_HDR];
    put32(h, 1u + body);
    h[4] = type;
    tx_put(l, h, sizeof h);
}

static void queue_hello(kvp_rt *rt, kvp_link *l) {
    uint8_t b[BR_HELLO_AUTH];
    uint32_t n = rt->br.key.set ? BR_HELLO_AUTH : BR_HELLO_PLAIN;
    put32(b, BR_MAGIC);
    put32(b + 4, rt->cfg.abi);
    put32(b + 8, rt->cfg.proc);
    if (rt->br.key.set) {
        kv_auth_random(l->nonce_mine, sizeof l->nonce_mine);
        memcpy(b + BR_HELLO_PLAIN, l->nonce_mine, sizeof l->nonce_mine);
    }
    tx_hdr(l, n, B_HELLO);
    tx_put(l, b, n);
}

/* What the proof `from` gives `to` covers, receiver's nonce first (see the
 * top); ids is the parts' storage for the process ids and the ABI. */
static void proof_parts(const kvp_rt *rt, const uint8_t *nonce_to, const uint8_t *nonce_from, uint32_t from,
                        uint32_t to, uint8_t ids[12], kv_auth_part parts[3]) {
    put32(ids, from);
    put32(ids + 4, to);
    put32(ids + 8, rt->cfg.abi);
    parts[0] = (kv_auth_part){nonce_to, KV_AUTH_NONCE_BYTES};
    parts[1] = (kv_auth_part){nonce_from, KV_AUTH_NONCE_BYTES};
    parts[2] = (kv_auth_part){ids, 12};
}

static void queue_dir(kvp_rt *rt, kvp_link *l) {
    uint32_t n = atomic_load_explicit(&rt->n_actors, memory_order_acquire);
    uint8_t e[BR_DIR_ENTRY], c[4];
    tx_hdr(l, 4u + n * BR_DIR_ENTRY, B_DIR);
    put32(c, n);
    tx_put(l, c, sizeof c);
    for (uint32_t i = 0; i < n; i++) {
        memset(e, 0, sizeof e);
        put32(e, rt->actor[i].id);
        memcpy(e + 4, rt->actor[i].name, KVP_NAME_MAX - 1);
        tx_put(l, e, sizeof e);
    }
}

/* ---- links ------------------------------------------------------------------------ */

static uint32_t link_add(kvp_rt *rt, int fd) {
    kvp_bridge *b = &rt->br;
    for (uint32_t i = 0; i < KVP_LINKS_MAX; i++) {
        kvp_link *l = &b->link[i];
        if (l->used) continue;
        memset(l, 0, sizeof *l);
        l->tx = kv_alloc(rt->env, BR_TX_CAP);
        l->rx = kv_alloc(rt->env, BR_RX_CAP);
        if (!l->tx || !l->rx) {
            kv_release(rt->env, l->tx);
            kv_release(rt->env, l->rx);
            l->tx = l->rx = NULL;
            return KVP_NONE;
        }
        l->used = true;
        l->fd = fd;
        l->state = LINK_HELLO;
        l->proc = l->peer_proc = KVP_NONE;
        l->opened_ns = kvp_mono_ns();
        queue_hello(rt, l);
        if (!b->key.set && !b->dir_on_publish) queue_dir(rt, l); /* with a secret, once the link is up */
        return i;
    }
    return KVP_NONE;
}

static void link_close(kvp_rt *rt, uint32_t li, const char *why) {
    kvp_bridge *b = &rt->br;
    kvp_link *l = &b->link[li];
    if (!l->used) return;
    if (l->state == LINK_UP && l->proc < KVP_PROCS_MAX && b->proc_link[l->proc] == li) {
        b->proc_link[l->proc] = KVP_NONE;
        b->dir[l->proc].n = 0; /* its actors are gone; a new process of that id publishes its own */
        atomic_fetch_add(&rt->c_losses, 1);
        if (!b->quit) kv_logf(rt->env, KV_LOG_WARN, "bridge: link to process %u lost: %s", l->proc, why);
    } else if (!b->quit && (++b->closed_early <= BR_LOG_FIRST || b->closed_early % BR_LOG_EVERY == 0)) {
        kv_logf(rt->env, KV_LOG_WARN, "bridge: link closed before it was up: %s (%llu so far)", why,
                (unsigned long long)b->closed_early);
    }
    close(l->fd);
    kv_release(rt->env, l->tx);
    kv_release(rt->env, l->rx);
    memset(l, 0, sizeof *l);
    l->fd = -1;
    pthread_cond_broadcast(&b->cv);
}

/* The link is up: posts may cross it. */
static void link_up(kvp_rt *rt, uint32_t li, uint32_t proc) {
    kvp_bridge *b = &rt->br;
    kvp_link *l = &b->link[li];
    l->proc = proc;
    l->state = LINK_UP;
    b->proc_link[proc] = li;
    pthread_cond_broadcast(&b->cv);
}

static bool on_hello(kvp_rt *rt, uint32_t li, const uint8_t *p, uint32_t n) {
    kvp_bridge *b = &rt->br;
    kvp_link *l = &b->link[li];
    if (l->state != LINK_HELLO) return false;
    if (n != (b->key.set ? BR_HELLO_AUTH : BR_HELLO_PLAIN)) {
        l->bad = n == BR_HELLO_PLAIN  ? "a HELLO without a nonce: the peer has no cluster secret"
                 : n == BR_HELLO_AUTH ? "a HELLO with a nonce: the peer has a cluster secret and this process has none"
                                      : "a HELLO of the wrong size";
        return false;
    }
    uint32_t magic = get32(p), abi = get32(p + 4), proc = get32(p + 8);
    if (magic != BR_MAGIC || abi != rt->cfg.abi) {
        kv_logf(rt->env, KV_LOG_ERROR, "bridge: HELLO with magic %#x abi %#x (want %#x): different build",
                magic, abi, rt->cfg.abi);
        return false;
    }
    if (proc >= KVP_PROCS_MAX || proc == rt->cfg.proc || b->proc_link[proc] != KVP_NONE) {
        kv_logf(rt->env, KV_LOG_ERROR, "bridge: HELLO from process %u refused (self, out of range or duplicate)",
                proc);
        return false;
    }
    if (!b->key.set) {
        link_up(rt, li, proc);
        return true;
    }
    memcpy(l->nonce_peer, p + BR_HELLO_PLAIN, KV_AUTH_NONCE_BYTES);
    if (memcmp(l->nonce_peer, l->nonce_mine, KV_AUTH_NONCE_BYTES) == 0) {
        l->bad = "a HELLO that echoes this side's nonce";
        return false;
    }
    uint8_t mac[KV_AUTH_MAC_BYTES], ids[12];
    kv_auth_part parts[3];
    proof_parts(rt, l->nonce_peer, l->nonce_mine, rt->cfg.proc, proc, ids, parts);
    kv_auth_mac(&b->key, BR_LABEL, parts, 3, mac);
    tx_hdr(l, sizeof mac, B_PROOF);
    tx_put(l, mac, sizeof mac);
    l->peer_proc = proc;
    l->state = LINK_PROOF;
    return true;
}

static bool on_proof(kvp_rt *rt, uint32_t li, const uint8_t *p, uint32_t n) {
    kvp_bridge *b = &rt->br;
    kvp_link *l = &b->link[li];
    if (l->state != LINK_PROOF || n != KV_AUTH_MAC_BYTES) {
        l->bad = b->key.set ? "a PROOF out of the handshake's order or of the wrong size"
                            : "a PROOF: the peer has a cluster secret and this process has none";
        return false;
    }
    uint8_t ids[12];
    kv_auth_part parts[3];
    proof_parts(rt, l->nonce_mine, l->nonce_peer, l->peer_proc, rt->cfg.proc, ids, parts);
    if (!kv_auth_check(&b->key, BR_LABEL, parts, 3, p)) {
        l->bad = "the peer does not hold the cluster secret (its PROOF does not check out)";
        return false;
    }
    if (b->proc_link[l->peer_proc] != KVP_NONE) {
        l->bad = "a second link for a process that has one";
        return false;
    }
    link_up(rt, li, l->peer_proc);
    if (!b->dir_on_publish) queue_dir(rt, l); /* names only to a peer that proved the secret */
    return true;
}

static bool on_dir(kvp_rt *rt, uint32_t li, const uint8_t *p, uint32_t n) {
    kvp_bridge *b = &rt->br;
    kvp_link *l = &b->link[li];
    if (l->state != LINK_UP || n < 4) return false;
    uint32_t cnt = get32(p);
    if (cnt > KVP_ACTORS_MAX || n != 4u + cnt * BR_DIR_ENTRY) return false;
    kvp_remote_dir *d = &b->dir[l->proc];
    d->n = 0;
    for (uint32_t i = 0; i < cnt; i++) {
        const uint8_t *e = p + 4 + i * BR_DIR_ENTRY;
        uint32_t id = get32(e);
        if (KVP_ACTOR_PROC(id) != l->proc) return false;
        d->id[d->n] = id;
        memcpy(d->name[d->n], e + 4, KVP_NAME_MAX);
        d->name[d->n][KVP_NAME_MAX - 1] = '\0';
        d->n++;
    }
    pthread_cond_broadcast(&b->cv);
    return true;
}

typedef enum { F_MORE, F_STOP, F_ERR } frame_res;

/* Handles one buffered frame. */
static frame_res parse_one(kvp_rt *rt, uint32_t li) {
    kvp_link *l = &rt->br.link[li];
    uint32_t avail = l->rx_len - l->rx_off;
    if (avail < BR_HDR) return F_STOP;
    const uint8_t *h = l->rx + l->rx_off;
    uint32_t len = get32(h);
    if (len == 0 || len > BR_FRAME_MAX) return F_ERR;
    if (avail < 4u + len) return F_STOP;
    const uint8_t *body = h + BR_HDR;
    uint32_t n = len - 1u;
    switch (h[4]) {
    case B_HELLO:
        if (!on_hello(rt, li, body, n)) return F_ERR;
        break;
    case B_PROOF:
        if (!on_proof(rt, li, body, n)) return F_ERR;
        break;
    case B_DIR:
        if (!on_dir(rt, li, body, n)) return F_ERR;
        break;
    case B_POST: {
        if (l->state != LINK_UP || n < BR_POST_HDR) return F_ERR;
        uint32_t to = get32(body), src = get32(body + 4), kind = get32(body + 8);
        if (rt->remote_ok && !rt->remote_ok(rt->remote_ctx, kind, n - BR_POST_HDR)) {
            atomic_fetch_add_explicit(&rt->c_refused, 1, memory_order_relaxed);
            if (l->refused < 16 || l->refused % 1024 == 0)
                kv_logf(rt->env, KV_LOG_WARN,
                        "bridge: post kind %#x of %u bytes from process %u to actor %#x refused: not a message "
                        "another process may send at that size (%llu refused on this link)",
                        kind, n - BR_POST_HDR, l->proc, to, (unsigned long long)l->refused + 1);
            l->refused++;
            break;
        }
        kv_status st = KVP_ACTOR_PROC(to) == rt->cfg.proc
                           ? kvp_mbox_push(rt, to, kind, src, body + BR_POST_HDR, n - BR_POST_HDR)
                           : KV_ENOENT;
        if (st == KV_EFULL) {
            l->rx_blocked = true;
            return F_STOP;
        }
        l->rx_blocked = false;
        if (st != KV_OK)
            kv_logf(rt->env, KV_LOG_WARN, "bridge: post kind %#x from process %u to actor %#x dropped: %s", kind,
                    l->proc, to, kv_status_str(st));
        else atomic_fetch_add_explicit(&rt->c_in, 1, memory_order_relaxed);
        break;
    }
    default: return F_ERR;
    }
    l->rx_off += 4u + len;
    return F_MORE;
}

/* Parses what is buffered; false if the link was closed. */
static bool parse_link(kvp_rt *rt, uint32_t li) {
    kvp_link *l = &rt->br.link[li];
    for (;;) {
        frame_res r = parse_one(rt, li);
        if (r == F_ERR) {
            const char *why = l->bad ? l->bad : "protocol error (bad frame)";
            if (l->state != LINK_UP && (rt->br.key.set || l->bad)) atomic_fetch_add(&rt->c_auth_failed, 1);
            link_close(rt, li, why);
            return false;
        }
        if (r == F_STOP) break;
    }
    if (l->rx_off) {
        memmove(l->rx, l->rx + l->rx_off, l->rx_len - l->rx_off);
        l->rx_len -= l->rx_off;
        l->rx_off = 0;
    }
    return true;
}

static void link_read(kvp_rt *rt, uint32_t li) {
    kvp_link *l = &rt->br.link[li];
    for (uint32_t r = 0; r < BR_READS_PER_POLL && !l->rx_blocked; r++) {
        ssize_t n = recv(l->fd, l->rx + l->rx_len, BR_RX_CAP - l->rx_len, 0);
        if (n == 0) {
            link_close(rt, li, "EOF");
            return;
        }
        if (n < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return;
            link_close(rt, li, strerror(errno));
            return;
        }
        l->rx_len += (uint32_t)n;
        if (!parse_link(rt, li)) return;
    }
}

static void link_flush(kvp_rt *rt, uint32_t li) {
    kvp_link *l = &rt->br.link[li];
    while (l->tx_head != l->tx_tail) {
        uint32_t pos = (uint32_t)(l->tx_tail % BR_TX_CAP);
        uint64_t len = l->tx_head - l->tx_tail;
        if (len > BR_TX_CAP - pos) len = BR_TX_CAP - pos;
        ssize_t n = send(l->fd, l->tx + pos, (size_t)len, MSG_NOSIGNAL);
        if (n > 0) {
            l->tx_tail += (uint64_t)n;
            continue;
        }
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
        link_close(rt, li, n < 0 ? strerror(errno) : "send failed");
        return;
    }
}

/* Admission: with BR_PENDING_MAX links still in their handshake, a new one
 * evicts the oldest of them, so links that never finish cannot keep an
 * engine out (which finishes in one round trip); the other link slots are
 * left to links that are up. */
static void admit_link(kvp_rt *rt) {
    kvp_bridge *b = &rt->br;
    uint32_t n = 0, oldest = KVP_NONE;
    for (uint32_t i = 0; i < KVP_LINKS_MAX; i++) {
        const kvp_link *l = &b->link[i];
        if (!l->used || !l->accepted || l->state == LINK_UP) continue;
        n++;
        if (oldest == KVP_NONE || l->opened_ns < b->link[oldest].opened_ns) oldest = i;
    }
    if (n < BR_PENDING_MAX || oldest == KVP_NONE) return;
    atomic_fetch_add(&rt->c_auth_failed, 1);
    link_close(rt, oldest, "evicted: too many links in their HELLO");
}

static void accept_links(kvp_rt *rt) {
    for (uint32_t g = 0; g < 32; g++) {
        int fd = accept(rt->br.listen_fd, NULL, NULL);
        if (fd < 0) return;
        admit_link(rt);
        int one = 1;
        (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        uint32_t li = set_nonblock(fd) ? link_add(rt, fd) : KVP_NONE;
        if (li == KVP_NONE) {
            kv_logf(rt->env, KV_LOG_WARN, "bridge: incoming link refused (no slot)");
            close(fd);
        } else {
            rt->br.link[li].accepted = true;
        }
    }
}

/* Closes links that are not up within the deadline: a peer that connects
 * and says nothing, trickles, or cannot prove the secret holds a link slot
 * no longer than that. */
static void close_late_links(kvp_rt *rt) {
    kvp_bridge *b = &rt->br;
    uint64_t now = kvp_mono_ns();
    for (uint32_t i = 0; i < KVP_LINKS_MAX; i++) {
        kvp_link *l = &b->link[i];
        if (!l->used || l->state == LINK_UP || now - l->opened_ns < b->deadline_ns) continue;
        atomic_fetch_add(&rt->c_auth_failed, 1);
        link_close(rt, i, b->key.set ? "no HELLO and challenge-response within the deadline"
                                     : "no HELLO within the deadline");
    }
}

/* ---- the bridge thread ------------------------------------------------------------ */

static void *bridge_main(void *arg) {
    kvp_rt *rt = arg;
    kvp_thread_name("bridge");
    kvp_bridge *b = &rt->br;
    struct pollfd pfd[2 + KVP_LINKS_MAX];
    uint32_t which[2 + KVP_LINKS_MAX];
    pthread_mutex_lock(&b->mu);
    while (!b->quit) {
        nfds_t n = 0;
        bool blocked = false;
        pfd[n] = (struct pollfd){.fd = b->wake_rd, .events = POLLIN};
        which[n++] = KVP_NONE;
        if (b->listen_fd >= 0) {
            pfd[n] = (struct pollfd){.fd = b->listen_fd, .events = POLLIN};
            which[n++] = KVP_NONE - 1;
        }
        for (uint32_t i = 0; i < KVP_LINKS_MAX; i++) {
            kvp_link *l = &b->link[i];
            if (!l->used) continue;
            blocked = blocked || l->rx_blocked;
            short ev = (short)((l->rx_blocked ? 0 : POLLIN) | (l->tx_head != l->tx_tail ? POLLOUT : 0));
            pfd[n] = (struct pollfd){.fd = l->fd, .events = ev};
            which[n++] = i;
        }
        pthread_mutex_unlock(&b->mu);
        (void)poll(pfd, n, blocked ? 1 : 100);
        pthread_mutex_lock(&b->mu);
        if (pfd[0].revents & POLLIN) {
            uint8_t junk[64];
            while (read(b->wake_rd, junk, sizeof junk) > 0) {}
        }
        for (nfds_t k = 1; k < n && !b->quit; k++) {
            short rev = pfd[k].revents;
            if (which[k] == KVP_NONE - 1) {
                if (rev & POLLIN) accept_links(rt);
                continue;
            }
            uint32_t li = which[k];
            kvp_link *l = &b->link[li];
            if (!l->used || l->fd != pfd[k].fd) continue;
            if (l->rx_blocked && !parse_link(rt, li)) continue; /* retry the stuck POST */
            if (rev & (POLLIN | POLLERR | POLLHUP)) link_read(rt, li);
            if (l->used && l->tx_head != l->tx_tail) link_flush(rt, li);
        }
        close_late_links(rt);
    }
    pthread_mutex_unlock(&b->mu);
    return NULL;
}

/* Caller holds b->mu. */
static kv_status ensure_thread(kvp_rt *rt) {
    kvp_bridge *b = &rt->br;
    if (b->running) return KV_OK;
    if (b->wake_rd < 0) {
        int p[2];
        if (pipe(p) != 0) return KV_EIO;
        set_nonblock(p[0]);
        set_nonblock(p[1]);
        b->wake_rd = p[0];
        b->wake_wr = p[1];
    }
    if (pthread_create(&b->thread, NULL, bridge_main, rt) != 0) return KV_ENOMEM;
    b->running = true;
    return KV_OK;
}

/* ---- API ---------------------------------------------------------------------------- */

void kvp_bridge_init(kvp_rt *rt) {
    kvp_bridge *b = &rt->br;
    pthread_mutex_init(&b->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&b->cv, &ca);
    pthread_condattr_destroy(&ca);
    b->listen_fd = b->wake_rd = b->wake_wr = -1;
    b->deadline_ns = (uint64_t)BR_DEADLINE_MS_DEFAULT * 1000000u;
    for (uint32_t i = 0; i < KVP_PROCS_MAX; i++) b->proc_link[i] = KVP_NONE;
    for (uint32_t i = 0; i < KVP_LINKS_MAX; i++) b->link[i].fd = -1;
}

void kvp_bridge_stop(kvp_rt *rt) {
    kvp_bridge *b = &rt->br;
    pthread_mutex_lock(&b->mu);
    b->quit = true;
    bool running = b->running;
    b->running = false;
    pthread_mutex_unlock(&b->mu);
    kick(b);
    if (running) pthread_join(b->thread, NULL);
    pthread_mutex_lock(&b->mu);
    for (uint32_t i = 0; i < KVP_LINKS_MAX; i++) link_close(rt, i, "stopped");
    if (b->listen_fd >= 0) close(b->listen_fd);
    b->listen_fd = -1;
    pthread_mutex_unlock(&b->mu);
}

void kvp_bridge_deinit(kvp_rt *rt) {
    kvp_bridge *b = &rt->br;
    if (b->wake_rd >= 0) close(b->wake_rd);
    if (b->wake_wr >= 0) close(b->wake_wr);
    b->wake_rd = b->wake_wr = -1;
    kv_auth_forget(&b->key);
    pthread_mutex_destroy(&b->mu);
    pthread_cond_destroy(&b->cv);
}

bool kvp_bridge_find_locked(kvp_rt *rt, const char *name, uint32_t *out) {
    for (uint32_t p = 0; p < KVP_PROCS_MAX; p++) {
        const kvp_remote_dir *d = &rt->br.dir[p];
        for (uint32_t i = 0; i < d->n; i++)
            if (strncmp(d->name[i], name, KVP_NAME_MAX) == 0) {
                *out = d->id[i];
                return true;
            }
    }
    return false;
}

kv_status kvp_bridge_post(kvp_rt *rt, uint32_t to, uint32_t kind, uint32_t src, const void *p, uint32_t len) {
    kvp_bridge *b = &rt->br;
    uint32_t proc = KVP_ACTOR_PROC(to);
    pthread_mutex_lock(&b->mu);
    uint32_t li = proc < KVP_PROCS_MAX && !b->quit ? b->proc_link[proc] : KVP_NONE;
    if (li == KVP_NONE) {
        pthread_mutex_unlock(&b->mu);
        uint64_t n = atomic_fetch_add(&rt->c_unreachable, 1);
        if (n < 8) kv_logf(rt->env, KV_LOG_WARN, "bridge: post kind %#x to actor %#x: process %u unreachable",
                           kind, to, proc);
        return KV_ECONNRESET;
    }
    kvp_link *l = &b->link[li];
    if (tx_free(l) < (uint64_t)BR_HDR + BR_POST_HDR + len) {
        pthread_mutex_unlock(&b->mu);
        atomic_fetch_add(&rt->c_full, 1);
        return KV_EFULL;
    }
    uint8_t h[BR_POST_HDR];
    put32(h, to);
    put32(h + 4, src);
    put32(h + 8, kind);
    tx_hdr(l, BR_POST_HDR + len, B_POST);
    tx_put(l, h, sizeof h);
    if (len) tx_put(l, p, len);
    pthread_mutex_unlock(&b->mu);
    atomic_fetch_add_explicit(&rt->c_out, 1, memory_order_relaxed);
    kick(b);
    return KV_OK;
}

static bool parse_host_port(const char *s, struct sockaddr_in *sa) {
    char host[KV_ADDR_MAX];
    const char *colon = strrchr(s, ':');
    if (!colon || (size_t)(colon - s) >= sizeof host) return false;
    memcpy(host, s, (size_t)(colon - s));
    host[colon - s] = '\0';
    char *end = NULL;
    unsigned long port = strtoul(colon + 1, &end, 10);
    if (!end || *end || port == 0 || port > 65535) return false;
    memset(sa, 0, sizeof *sa);
    sa->sin_family = AF_INET;
    sa->sin_port = htons((uint16_t)port);
    return inet_pton(AF_INET, host, &sa->sin_addr) == 1;
}

kv_status kvp_rt_listen(kvp_rt *rt, const char *host, uint16_t port, uint16_t *out_port) {
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_port = htons(port);
    if (!host || inet_pton(AF_INET, host, &sa.sin_addr) != 1) return KV_EINVAL;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return KV_EIO;
    int one = 1;
    (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    socklen_t sl = sizeof sa;
    if (bind(fd, (const struct sockaddr *)&sa, sizeof sa) != 0 || listen(fd, 128) != 0 || !set_nonblock(fd) ||
        getsockname(fd, (struct sockaddr *)&sa, &sl) != 0) {
        close(fd);
        return KV_EIO;
    }
    kvp_bridge *b = &rt->br;
    pthread_mutex_lock(&b->mu);
    kv_status st = b->listen_fd < 0 ? ensure_thread(rt) : KV_EEXIST;
    if (st == KV_OK) b->listen_fd = fd;
    pthread_mutex_unlock(&b->mu);
    if (st != KV_OK) {
        close(fd);
        return st;
    }
    kick(b);
    if (out_port) *out_port = ntohs(sa.sin_port);
    return KV_OK;
}

/* Connects, retrying a refused or failed connect with a backoff that starts
 * at BR_DIAL_BACKOFF_MIN_MS and doubles up to BR_DIAL_BACKOFF_MAX_MS, until
 * until_ns; says what it waits for once a second. */
static int dial_blocking(kvp_rt *rt, const char *addr, const struct sockaddr_in *sa, uint64_t t0, uint64_t until_ns) {
    uint64_t next = t0 + 1000000000ull;
    uint32_t backoff_ms = BR_DIAL_BACKOFF_MIN_MS;
    for (;;) {
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        if (fd < 0) return -1;
        if (connect(fd, (const struct sockaddr *)sa, sizeof *sa) == 0) return fd;
        int e = errno;
        close(fd);
        if (kvp_mono_ns() >= until_ns) return -1;
        char what[160];
        snprintf(what, sizeof what, "a connection to %s (%s)", addr, strerror(e));
        kvp_rt_report_wait(rt, what, t0, until_ns, &next);
        uint64_t left_ms = (until_ns - kvp_mono_ns()) / 1000000u, nap_ms = backoff_ms < left_ms ? backoff_ms : left_ms;
        struct timespec ts = {.tv_sec = (time_t)(nap_ms / 1000u), .tv_nsec = (long)(nap_ms % 1000u) * 1000000L};
        nanosleep(&ts, NULL);
        backoff_ms = backoff_ms * 2u < BR_DIAL_BACKOFF_MAX_MS ? backoff_ms * 2u : BR_DIAL_BACKOFF_MAX_MS;
    }
}

/* One connection and its wait for the link to come up. */
static kv_status dial_once(kvp_rt *rt, const char *addr, const struct sockaddr_in *sa, uint64_t t0, uint64_t until,
                           uint32_t *out_proc) {
    uint64_t next = kvp_mono_ns() + 1000000000ull;
    int fd = dial_blocking(rt, addr, sa, t0, until);
    if (fd < 0) return KV_ECONNRESET;
    int one = 1;
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (!set_nonblock(fd)) {
        close(fd);
        return KV_EIO;
    }
    kvp_bridge *b = &rt->br;
    pthread_mutex_lock(&b->mu);
    kv_status st = ensure_thread(rt);
    uint32_t li = st == KV_OK ? link_add(rt, fd) : KVP_NONE;
    if (li == KVP_NONE) {
        pthread_mutex_unlock(&b->mu);
        close(fd);
        return st == KV_OK ? KV_ENOMEM : st;
    }
    kick(b);
    char what[160];
    snprintf(what, sizeof what, "the HELLO of %s (connected)", addr);
    st = KV_ETIMEDOUT;
    while (kvp_mono_ns() < until) {
        kvp_link *l = &b->link[li];
        if (!l->used || l->fd != fd) {
            st = KV_ECONNRESET;
            break;
        }
        if (l->state == LINK_UP) {
            if (out_proc) *out_proc = l->proc;
            st = KV_OK;
            break;
        }
        kvp_rt_report_wait(rt, what, t0, until, &next);
        uint64_t at = next < until ? next : until;
        struct timespec ts = {.tv_sec = (time_t)(at / 1000000000ull), .tv_nsec = (long)(at % 1000000000ull)};
        pthread_cond_timedwait(&b->cv, &b->mu, &ts);
    }
    pthread_mutex_unlock(&b->mu);
    return st;
}

kv_status kvp_rt_dial(kvp_rt *rt, const char *addr, uint64_t timeout_ns, uint32_t *out_proc) {
    struct sockaddr_in sa;
    if (!addr || !parse_host_port(addr, &sa)) return KV_EINVAL;
    uint64_t t0 = kvp_mono_ns(), until = t0 + timeout_ns;
    kv_status st = KV_ECONNRESET;
    /* The listener may close a link in its handshake without a word (evicted
     * by a flood of links that never finish, or it refused ours): dial again,
     * a few times, unless this side found the other's proof wrong. */
    for (uint32_t attempt = 0; attempt < BR_DIAL_TRIES && kvp_mono_ns() < until; attempt++) {
        uint64_t refused = atomic_load(&rt->c_auth_failed);
        st = dial_once(rt, addr, &sa, t0, until, out_proc);
        if (st != KV_ECONNRESET || atomic_load(&rt->c_auth_failed) != refused) break;
        struct timespec ts = {.tv_sec = 0, .tv_nsec = 100000000};
        nanosleep(&ts, NULL);
    }
    return st;
}

kv_status kvp_rt_publish(kvp_rt *rt) {
    kvp_bridge *b = &rt->br;
    kv_status st = KV_OK;
    pthread_mutex_lock(&b->mu);
    for (uint32_t i = 0; i < KVP_LINKS_MAX; i++) {
        kvp_link *l = &b->link[i];
        if (!l->used || (b->key.set && l->state != LINK_UP)) continue; /* its DIR follows the proofs */
        if (tx_free(l) < BR_HDR + 4u + KVP_ACTORS_MAX * BR_DIR_ENTRY) st = KV_EFULL;
        else queue_dir(rt, l);
    }
    pthread_mutex_unlock(&b->mu);
    kick(b);
    return st;
}

kv_status kvp_rt_set_secret(kvp_rt *rt, const kv_auth_key *key) {
    kvp_bridge *b = &rt->br;
    pthread_mutex_lock(&b->mu);
    bool busy = b->listen_fd >= 0;
    for (uint32_t i = 0; i < KVP_LINKS_MAX; i++) busy = busy || b->link[i].used;
    kv_status st = busy ? KV_ESTATE : kv_auth_set(&b->key, key);
    pthread_mutex_unlock(&b->mu);
    return st;
}

void kvp_rt_set_dir_on_publish(kvp_rt *rt, bool on) {
    pthread_mutex_lock(&rt->br.mu);
    rt->br.dir_on_publish = on;
    pthread_mutex_unlock(&rt->br.mu);
}

void kvp_rt_set_handshake_deadline_ms(kvp_rt *rt, uint32_t ms) {
    pthread_mutex_lock(&rt->br.mu);
    rt->br.deadline_ns = (uint64_t)(ms ? ms : 1u) * 1000000u;
    pthread_mutex_unlock(&rt->br.mu);
}

bool kvp_rt_link_up(kvp_rt *rt, uint32_t proc) {
    kvp_bridge *b = &rt->br;
    pthread_mutex_lock(&b->mu);
    bool up = proc < KVP_PROCS_MAX && b->proc_link[proc] != KVP_NONE;
    pthread_mutex_unlock(&b->mu);
    return up;
}
