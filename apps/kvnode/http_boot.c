/* apps/kvnode/http_boot.c — the HTTP bootstrap server; see http_boot.h.
 * One state machine: a connection slot.
 *
 *   FREE --accept (conn_open)--> READING --whole request or refusal (conn_answer)--> WRITING
 *   WRITING --answer sent, write side shut (conn_sent)--> DRAINING
 *   READING / WRITING / DRAINING --deadline, error, peer gone, evicted (conn_close)--> FREE
 *   DRAINING --client's EOF or KVN_HTTP_DRAIN_MS (conn_close)--> FREE
 *
 * DRAINING reads and drops what the client still sends after the answer
 * (a body it sent though we refused on its header), so the close does not
 * turn into a reset that could destroy the answer before it is read.
 *
 * Invariants (conns_invariants, at each loop turn):
 *   C1 n_open is the number of slots not FREE;
 *   C2 a FREE slot has no socket and no answer; every other slot has a socket;
 *   C3 READING has no answer and at most IN_CAP bytes in; WRITING has an
 *      answer and sent <= its length.
 * Only this thread touches the slots and the registry. */
#define _GNU_SOURCE
#include "apps/kvnode/http_boot.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "apps/kvnode/http_req.h"
#include "util/json.h"

#define IN_CAP (KVN_HTTP_HEAD_MAX + KVN_BOOT_BODY_MAX) /* a whole request at its bounds */
#define ACCEPTS_PER_TURN 16u                           /* bounded work per loop turn */
#define POLL_MS 50

typedef enum conn_state { C_FREE = 0, C_READING, C_WRITING, C_DRAINING, C_STATES } conn_state;

static const char *const state_name[C_STATES] = {"FREE", "READING", "WRITING", "DRAINING"};

/* Allowed edges: edge[from][to]. */
static const bool edge[C_STATES][C_STATES] = {
    [C_FREE] = {[C_READING] = true},
    [C_READING] = {[C_WRITING] = true, [C_FREE] = true},
    [C_WRITING] = {[C_DRAINING] = true, [C_FREE] = true},
    [C_DRAINING] = {[C_FREE] = true},
};

typedef struct conn {
    conn_state state;
    int fd;               /* -1 when FREE */
    char peer[48];        /* "a.b.c.d:port", for the log */
    uint64_t opened_ms;   /* accept time: the oldest is evicted first */
    uint64_t deadline_ms; /* READING: whole request; WRITING: answer sent; DRAINING: give up */
    size_t in_len;
    char *in;             /* IN_CAP bytes, owned by the server (allocated once) */
    char *out;            /* the answer (malloc'd, owned by the slot) */
    size_t out_len, sent;
} conn;

struct kvn_http_boot {
    int lfd;                /* listening socket */
    uint16_t port;
    uint32_t read_ms;
    char tag[32];
    uint32_t n_open;
    conn c[KVN_HTTP_CONNS_MAX];
    char *in_bufs;          /* KVN_HTTP_CONNS_MAX x IN_CAP */
    kvn_boot_registry reg;  /* the registry (about 150 KB) */
    pthread_t thread;
    bool thread_on;
    _Atomic bool stop;      /* kvn_http_boot_start's thread: stop now */
    uint64_t timeouts, evictions; /* counters, for the log */
};

static uint64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static bool conns_invariants(const kvn_http_boot *s) {
    uint32_t open = 0;
    for (uint32_t i = 0; i < KVN_HTTP_CONNS_MAX; i++) {
        const conn *c = &s->c[i];
        if (c->state == C_FREE) {
            if (c->fd != -1 || c->out) return false;
            continue;
        }
        open++;
        if (c->fd < 0 || c->in_len > IN_CAP) return false;
        if (c->state == C_READING && c->out) return false;
        if (c->state == C_WRITING && (!c->out || c->sent > c->out_len)) return false;
    }
    return open == s->n_open;
}

static void conn_set(conn *c, conn_state to) {
    if (!edge[c->state][to]) {
        fprintf(stderr, "http bootstrap: connection edge %s -> %s is not allowed\n", state_name[c->state],
                state_name[to]);
        abort();
    }
    c->state = to;
}

/* -> FREE, from any other state. */
static void conn_close(kvn_http_boot *s, conn *c) {
    conn_set(c, C_FREE);
    close(c->fd);
    c->fd = -1;
    free(c->out);
    c->out = NULL;
    c->out_len = c->sent = c->in_len = 0;
    s->n_open--;
}

/* FREE -> READING. */
static void conn_open(kvn_http_boot *s, conn *c, int fd, const struct sockaddr_in *from, uint64_t now) {
    conn_set(c, C_READING);
    c->fd = fd;
    char ip[INET_ADDRSTRLEN] = "?";
    inet_ntop(AF_INET, &from->sin_addr, ip, sizeof ip);
    snprintf(c->peer, sizeof c->peer, "%s:%u", ip, (unsigned)ntohs(from->sin_port));
    c->opened_ms = now;
    c->deadline_ms = now + s->read_ms;
    c->in_len = 0;
    s->n_open++;
}

/* An answer: status line, headers, body (the body's length given; a HEAD
 * answer sends the headers alone). NULL when out of memory. */
static char *compose(int status, const char *allow, const char *body, size_t body_len, bool head_only,
                     size_t *out_len) {
    char hdr[256];
    int n = snprintf(hdr, sizeof hdr,
                     "HTTP/1.1 %d %s\r\ncontent-type: application/json\r\ncontent-length: %zu\r\n"
                     "connection: close\r\n%s%s%s\r\n",
                     status, kvn_http_reason(status), body_len, allow ? "allow: " : "", allow ? allow : "",
                     allow ? "\r\n" : "");
    size_t hn = n > 0 ? (size_t)n : 0, bn = head_only ? 0 : body_len;
    char *out = malloc(hn + bn + 1);
    if (!out) return NULL;
    memcpy(out, hdr, hn);
    if (bn) memcpy(out + hn, body, bn);
    *out_len = hn + bn;
    return out;
}

/* A JSON body {"KEY": "VALUE"} into buf. Its length. */
static size_t json_pair(char *buf, size_t cap, const char *key, const char *value) {
    FILE *f = fmemopen(buf, cap, "w");
    if (!f) return 0;
    kv_json j;
    kv_json_init(&j, f);
    kv_json_obj(&j);
    kv_json_kstr(&j, key, value);
    kv_json_end(&j);
    kv_json_done(&j);
    long n = ftell(f);
    fclose(f);
    return n > 0 && (size_t)n < cap ? (size_t)n : 0;
}

/* READING -> WRITING with the answer. A conn whose answer cannot be built
 * (no memory) is closed. */
static void conn_answer(kvn_http_boot *s, conn *c, int status, const char *allow, const char *body, size_t len,
                        bool head_only) {
    c->out = compose(status, allow, body, len, head_only, &c->out_len);
    if (!c->out) {
        conn_close(s, c);
        return;
    }
    conn_set(c, C_WRITING);
    c->sent = 0;
    c->deadline_ms = now_ms() + s->read_ms;
}

static void answer_detail(kvn_http_boot *s, conn *c, int status, const char *allow, const char *detail) {
    char body[1024];
    size_t n = json_pair(body, sizeof body, "detail", detail);
    conn_answer(s, c, status, allow, body, n, false);
}

static void on_register(kvn_http_boot *s, conn *c, const kvn_http_req *r) {
    kvn_boot_reg p;
    char why[640];
    if (kvn_boot_payload_parse(r->body, r->body_len, &p, why, sizeof why) != 0) {
        fprintf(stderr, "[%s] http bootstrap: %s: POST /register refused (400): %s\n", s->tag, c->peer, why);
        s->reg.refused++;
        answer_detail(s, c, 400, NULL, why);
        return;
    }
    int status = kvn_boot_register(&s->reg, &p, why, sizeof why);
    if (status != 200) {
        fprintf(stderr, "[%s] http bootstrap: %s: POST /register refused (%d): %s\n", s->tag, c->peer, status, why);
        answer_detail(s, c, status, NULL, why);
        return;
    }
    fprintf(stderr, "[%s] http bootstrap: registered engine %s dp %u tp %u pp %u at %s\n", s->tag, p.engine_id,
            p.dp_rank, p.tp_rank, p.pp_rank, p.addr);
    char body[64];
    size_t n = json_pair(body, sizeof body, "status", "ok");
    conn_answer(s, c, 200, NULL, body, n, false);
}

static void on_query(kvn_http_boot *s, conn *c, bool head_only) {
    char *doc = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&doc, &len);
    int rc = f ? kvn_boot_query_json(&s->reg, f) : -1;
    if (f) fclose(f);
    if (rc != 0 || !doc) {
        free(doc);
        answer_detail(s, c, 500, NULL, "the answer could not be written");
        return;
    }
    conn_answer(s, c, 200, NULL, doc, len, head_only);
    free(doc);
}

/* The routes: vLLM's two, with FastAPI's answers for the rest. */
static void dispatch(kvn_http_boot *s, conn *c, const kvn_http_req *r) {
    if (strcmp(r->path, "/register") == 0) {
        if (strcmp(r->method, "POST") == 0) on_register(s, c, r);
        else answer_detail(s, c, 405, "POST", "Method Not Allowed");
    } else if (strcmp(r->path, "/query") == 0) {
        if (strcmp(r->method, "GET") == 0 || strcmp(r->method, "HEAD") == 0)
            on_query(s, c, strcmp(r->method, "HEAD") == 0);
        else answer_detail(s, c, 405, "GET, HEAD", "Method Not Allowed");
    } else {
        answer_detail(s, c, 404, NULL, "Not Found");
    }
}

static void on_readable(kvn_http_boot *s, conn *c) {
    if (c->state == C_DRAINING) {
        char sink[4096];
        ssize_t n = recv(c->fd, sink, sizeof sink, 0);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) conn_close(s, c);
        return;
    }
    ssize_t n = recv(c->fd, c->in + c->in_len, IN_CAP - c->in_len, 0);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
    if (n <= 0) { /* gone before a whole request: nobody to answer */
        conn_close(s, c);
        return;
    }
    c->in_len += (size_t)n;
    kvn_http_req r;
    kvn_http_verdict v = kvn_http_parse(c->in, c->in_len, KVN_BOOT_BODY_MAX, &r);
    if (v == KVN_HTTP_MORE && c->in_len == IN_CAP) { /* cannot happen at these bounds; refuse rather than wait */
        v = KVN_HTTP_BAD;
        r.status = 400;
        snprintf(r.why, sizeof r.why, "the request is over %u bytes", (unsigned)IN_CAP);
    }
    if (v == KVN_HTTP_MORE) return;
    if (v == KVN_HTTP_BAD) {
        fprintf(stderr, "[%s] http bootstrap: %s: refused (%d): %s\n", s->tag, c->peer, r.status, r.why);
        answer_detail(s, c, r.status, NULL, r.why);
        return;
    }
    dispatch(s, c, &r);
}

/* WRITING: sends what it can; all sent -> DRAINING (write side shut). */
static void on_writable(kvn_http_boot *s, conn *c) {
    ssize_t n = send(c->fd, c->out + c->sent, c->out_len - c->sent, MSG_NOSIGNAL);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
    if (n <= 0) {
        conn_close(s, c);
        return;
    }
    c->sent += (size_t)n;
    if (c->sent < c->out_len) return;
    shutdown(c->fd, SHUT_WR);
    free(c->out);
    c->out = NULL;
    conn_set(c, C_DRAINING);
    c->deadline_ms = now_ms() + KVN_HTTP_DRAIN_MS;
}

static void on_deadline(kvn_http_boot *s, conn *c) {
    if (c->state == C_READING) {
        s->timeouts++;
        fprintf(stderr, "[%s] http bootstrap: %s: no whole request within %u ms (%zu bytes); closed (408)\n",
                s->tag, c->peer, s->read_ms, c->in_len);
        char body[128], ans[384];
        size_t n = json_pair(body, sizeof body, "detail", "no whole request in time");
        int hn = snprintf(ans, sizeof ans,
                          "HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\ncontent-length: "
                          "%zu\r\nconnection: close\r\n\r\n%.*s",
                          n, (int)n, body);
        if (hn > 0) (void)!send(c->fd, ans, (size_t)hn, MSG_NOSIGNAL | MSG_DONTWAIT); /* best effort */
    } else if (c->state == C_WRITING) {
        fprintf(stderr, "[%s] http bootstrap: %s: did not take its answer within %u ms; closed\n", s->tag, c->peer,
                s->read_ms);
    }
    conn_close(s, c);
}

/* A slot for a new connection: a FREE one, else the oldest READING one is
 * closed (evicted); NULL when every slot is writing or draining. */
static conn *slot_for_new(kvn_http_boot *s) {
    conn *oldest = NULL;
    for (uint32_t i = 0; i < KVN_HTTP_CONNS_MAX; i++) {
        conn *c = &s->c[i];
        if (c->state == C_FREE) return c;
        if (c->state == C_READING && (!oldest || c->opened_ms < oldest->opened_ms)) oldest = c;
    }
    if (!oldest) return NULL;
    s->evictions++;
    fprintf(stderr, "[%s] http bootstrap: %u connections open; the oldest still reading (%s) is closed\n", s->tag,
            KVN_HTTP_CONNS_MAX, oldest->peer);
    conn_close(s, oldest);
    return oldest;
}

static void accept_new(kvn_http_boot *s, uint64_t now) {
    for (uint32_t k = 0; k < ACCEPTS_PER_TURN; k++) {
        struct sockaddr_in from;
        socklen_t fl = sizeof from;
        int fd = accept4(s->lfd, (struct sockaddr *)&from, &fl, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) return; /* EAGAIN, or an error the next turn sees again */
        conn *c = slot_for_new(s);
        if (!c) {
            close(fd);
            continue;
        }
        conn_open(s, c, fd, &from, now);
    }
}

void kvn_http_boot_serve(kvn_http_boot *s, _Atomic bool *stop) {
    struct pollfd pf[1 + KVN_HTTP_CONNS_MAX];
    conn *of[1 + KVN_HTTP_CONNS_MAX];
    while (!atomic_load(stop)) {
        if (!conns_invariants(s)) { /* O(slots): always checked */
            fprintf(stderr, "[%s] http bootstrap: connection table broken (C1-C3)\n", s->tag);
            abort();
        }
        uint32_t n = 0;
        pf[n++] = (struct pollfd){.fd = s->lfd, .events = POLLIN};
        uint64_t now = now_ms(), next = now + POLL_MS;
        for (uint32_t i = 0; i < KVN_HTTP_CONNS_MAX; i++) {
            conn *c = &s->c[i];
            if (c->state == C_FREE) continue;
            if (c->deadline_ms < next) next = c->deadline_ms;
            of[n] = c;
            pf[n++] = (struct pollfd){.fd = c->fd, .events = c->state == C_WRITING ? POLLOUT : POLLIN};
        }
        int ready = poll(pf, n, next > now ? (int)(next - now) : 0);
        now = now_ms();
        if (ready > 0 && (pf[0].revents & POLLIN)) accept_new(s, now);
        for (uint32_t i = 1; ready > 0 && i < n; i++) {
            conn *c = of[i];
            if (c->state == C_FREE || !pf[i].revents || c->fd != pf[i].fd) continue; /* evicted meanwhile */
            if (c->state == C_WRITING) on_writable(s, c);
            else on_readable(s, c);
        }
        for (uint32_t i = 0; i < KVN_HTTP_CONNS_MAX; i++)
            if (s->c[i].state != C_FREE && now >= s->c[i].deadline_ms) on_deadline(s, &s->c[i]);
    }
}

int kvn_http_split_addr(const char *addr, char *host, size_t host_cap, uint16_t *port) {
    const char *colon = strrchr(addr, ':');
    if (!colon || colon == addr || (size_t)(colon - addr) >= host_cap || !colon[1]) return -1;
    memcpy(host, addr, (size_t)(colon - addr));
    host[colon - addr] = 0;
    struct in_addr ia;
    if (inet_pton(AF_INET, host, &ia) != 1) return -1;
    uint32_t v = 0;
    for (const char *p = colon + 1; *p; p++) {
        if (*p < '0' || *p > '9' || (v = v * 10u + (uint32_t)(*p - '0')) > 65535u) return -1;
    }
    *port = (uint16_t)v;
    return 0;
}

int kvn_http_boot_new(const kvn_http_boot_cfg *cfg, kvn_http_boot **out, char *why, size_t why_cap) {
    char host[64];
    uint16_t port;
    *out = NULL;
    if (kvn_http_split_addr(cfg->listen, host, sizeof host, &port) != 0)
        return snprintf(why, why_cap, "'%s' is not IPv4:PORT", cfg->listen), -1;
    kvn_http_boot *s = calloc(1, sizeof *s);
    char *bufs = s ? malloc((size_t)KVN_HTTP_CONNS_MAX * IN_CAP) : NULL;
    if (!bufs) {
        free(s);
        return snprintf(why, why_cap, "out of memory"), -1;
    }
    s->in_bufs = bufs;
    s->read_ms = cfg->read_ms;
    snprintf(s->tag, sizeof s->tag, "%s", cfg->tag);
    for (uint32_t i = 0; i < KVN_HTTP_CONNS_MAX; i++) {
        s->c[i].fd = -1;
        s->c[i].in = bufs + (size_t)i * IN_CAP;
    }
    kvn_boot_registry_init(&s->reg);
    atomic_init(&s->stop, false);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};
    inet_pton(AF_INET, host, &sa.sin_addr);
    int one = 1;
    s->lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (s->lfd < 0 || setsockopt(s->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
        bind(s->lfd, (struct sockaddr *)&sa, sizeof sa) != 0 || listen(s->lfd, 64) != 0) {
        snprintf(why, why_cap, "cannot listen on %s: %s", cfg->listen, strerror(errno));
        if (s->lfd >= 0) close(s->lfd);
        free(bufs);
        free(s);
        return -1;
    }
    socklen_t sl = sizeof sa;
    getsockname(s->lfd, (struct sockaddr *)&sa, &sl);
    s->port = ntohs(sa.sin_port);
    *out = s;
    return 0;
}

uint16_t kvn_http_boot_port(const kvn_http_boot *s) { return s->port; }

static void *serve_thread(void *arg) {
    kvn_http_boot *s = arg;
    kvn_http_boot_serve(s, &s->stop);
    return NULL;
}

int kvn_http_boot_start(kvn_http_boot *s) {
    if (pthread_create(&s->thread, NULL, serve_thread, s) != 0) return -1;
    s->thread_on = true;
    return 0;
}

void kvn_http_boot_free(kvn_http_boot *s) {
    if (!s) return;
    if (s->thread_on) {
        atomic_store(&s->stop, true);
        pthread_join(s->thread, NULL);
    }
    for (uint32_t i = 0; i < KVN_HTTP_CONNS_MAX; i++)
        if (s->c[i].state != C_FREE) conn_close(s, &s->c[i]);
    fprintf(stderr, "[%s] http bootstrap: %llu registered, %llu refused, %llu queries, %llu timed out, %llu evicted\n",
            s->tag, (unsigned long long)s->reg.registered, (unsigned long long)s->reg.refused,
            (unsigned long long)s->reg.queries, (unsigned long long)s->timeouts, (unsigned long long)s->evictions);
    close(s->lfd);
    free(s->in_bufs);
    free(s);
}
