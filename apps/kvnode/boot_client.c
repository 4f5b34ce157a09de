/* apps/kvnode/boot_client.c — the engines' calls to the HTTP bootstrap
 * (http_boot.h): one bounded HTTP/1.1 request, vLLM's registration (retried
 * while nothing listens yet, as register_worker_with_bootstrap retries a
 * ConnectError once a second; an HTTP error is final) and D's query. Every
 * step has a deadline and the answer is read into a bounded buffer: a server
 * that stalls or sends too much ends the call, it does not hang the engine. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "apps/kvnode/http_boot.h"
#include "apps/kvnode/kvnode.h"
#include "util/json.h"
#include "util/json_read.h"

#define CALL_MS 5000u        /* one request, connect to last byte */
#define RETRY_MS 1000u       /* vLLM's wait before another try when nothing listens */
#define QUERY_AGAIN_MS 200u  /* D: the registry lists too few engines yet */

static uint64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Waits for ev on fd until deadline. 0 ready, -1 timed out or failed. */
static int wait_fd(int fd, short ev, uint64_t deadline) {
    for (;;) {
        uint64_t now = now_ms();
        if (now >= deadline) return -1;
        struct pollfd pf = {.fd = fd, .events = ev};
        int r = poll(&pf, 1, (int)(deadline - now));
        if (r > 0) return 0;
        if (r < 0 && errno != EINTR) return -1;
    }
}

static int connect_by(const char *addr, uint64_t deadline, int *out_fd, char *why, size_t cap) {
    char host[64];
    uint16_t port;
    if (kvn_http_split_addr(addr, host, sizeof host, &port) != 0)
        return snprintf(why, cap, "'%s' is not IPv4:PORT", addr), -1;
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};
    inet_pton(AF_INET, host, &sa.sin_addr);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return snprintf(why, cap, "socket: %s", strerror(errno)), -1;
    int err = 0;
    socklen_t el = sizeof err;
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        if (errno != EINPROGRESS) err = errno;
        else if (wait_fd(fd, POLLOUT, deadline) != 0) err = ETIMEDOUT;
        else getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el);
    }
    if (err) {
        close(fd);
        snprintf(why, cap, "cannot connect to %s: %s", addr, strerror(err));
        return err == ECONNREFUSED ? -2 : -1;
    }
    *out_fd = fd;
    return 0;
}

static int send_all(int fd, const char *p, size_t n, uint64_t deadline) {
    while (n) {
        ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
        if (k > 0) {
            p += k;
            n -= (size_t)k;
        } else if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
            if (wait_fd(fd, POLLOUT, deadline) != 0) return -1;
        } else {
            return -1;
        }
    }
    return 0;
}

/* Reads until the server closes (it answers "connection: close"), at most
 * cap bytes. The count, or -1. */
static ssize_t recv_all(int fd, char *buf, size_t cap, uint64_t deadline) {
    size_t n = 0;
    for (;;) {
        if (n == cap) return -1;
        ssize_t k = recv(fd, buf + n, cap - n, 0);
        if (k > 0) n += (size_t)k;
        else if (k == 0) return (ssize_t)n;
        else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return -1;
        else if (wait_fd(fd, POLLIN, deadline) != 0) return -1;
    }
}

/* The three digits of a status line (the buffer is not NUL-ended). */
static bool status3(const char *p, unsigned *out) {
    *out = 0;
    for (int i = 0; i < 3; i++) {
        if (p[i] < '0' || p[i] > '9') return false;
        *out = *out * 10u + (unsigned)(p[i] - '0');
    }
    return true;
}

static int exchange(int fd, const char *req, size_t req_len, uint64_t deadline, int *status, char *resp, size_t cap,
                    char *why, size_t why_cap) {
    if (send_all(fd, req, req_len, deadline) != 0) return snprintf(why, why_cap, "sending the request failed"), -1;
    char *buf = malloc(KVN_HTTP_ANSWER_MAX);
    if (!buf) return snprintf(why, why_cap, "out of memory"), -1;
    ssize_t n = recv_all(fd, buf, KVN_HTTP_ANSWER_MAX, deadline);
    int rc = -1;
    unsigned st = 0;
    const char *end = n > 0 ? memmem(buf, (size_t)n, "\r\n\r\n", 4) : NULL;
    if (n < 0) snprintf(why, why_cap, "no whole answer (timed out, reset, or over %u bytes)", KVN_HTTP_ANSWER_MAX);
    else if (n < 12 || memcmp(buf, "HTTP/1.", 7) != 0 || !status3(buf + 9, &st) || !end)
        snprintf(why, why_cap, "the answer is not HTTP/1.x");
    else {
        size_t off = (size_t)(end + 4 - buf), blen = (size_t)n - off;
        if (blen >= cap) blen = cap - 1;
        memcpy(resp, buf + off, blen);
        resp[blen] = 0;
        *status = (int)st;
        rc = 0;
    }
    free(buf);
    return rc;
}

int kvn_http_call(const char *addr, const char *method, const char *path, const char *body, uint32_t timeout_ms,
                  int *status, char *resp, size_t cap, char *why, size_t why_cap) {
    uint64_t deadline = now_ms() + timeout_ms;
    int fd, rc = connect_by(addr, deadline, &fd, why, why_cap);
    if (rc != 0) return rc;
    size_t blen = body ? strlen(body) : 0;
    char *req = NULL;
    size_t req_len = 0;
    FILE *f = open_memstream(&req, &req_len);
    if (f) {
        fprintf(f, "%s %s HTTP/1.1\r\nhost: %s\r\nconnection: close\r\n", method, path, addr);
        if (body) fprintf(f, "content-type: application/json\r\ncontent-length: %zu\r\n", blen);
        fprintf(f, "\r\n%s", body ? body : "");
        fclose(f);
    }
    rc = req ? exchange(fd, req, req_len, deadline, status, resp, cap, why, why_cap)
             : (snprintf(why, why_cap, "out of memory"), -1);
    free(req);
    close(fd);
    return rc;
}

int kvn_boot_client_register(const char *addr, const kvn_boot_reg *p, uint32_t give_up_ms, char *why,
                             size_t why_cap) {
    char body[1024], resp[1024];
    FILE *f = fmemopen(body, sizeof body, "w");
    if (!f) return snprintf(why, why_cap, "out of memory"), -1;
    kv_json j;
    kv_json_init(&j, f);
    kv_json_obj(&j);
    kv_json_kstr(&j, "engine_id", p->engine_id);
    kv_json_ku64(&j, "dp_rank", p->dp_rank);
    kv_json_ku64(&j, "tp_rank", p->tp_rank);
    kv_json_ku64(&j, "pp_rank", p->pp_rank);
    kv_json_kstr(&j, "addr", p->addr);
    kv_json_end(&j);
    int jrc = kv_json_done(&j);
    fclose(f); /* writes the NUL */
    if (jrc != 0) return snprintf(why, why_cap, "the registration does not fit %zu bytes", sizeof body), -1;
    uint64_t give_up = now_ms() + give_up_ms;
    for (;;) {
        int status = 0;
        int rc = kvn_http_call(addr, "POST", "/register", body, CALL_MS, &status, resp, sizeof resp, why, why_cap);
        if (rc == -2 && now_ms() + RETRY_MS < give_up) {
            kvn_nap_ms(RETRY_MS);
            continue;
        }
        if (rc != 0) return -1;
        if (status == 200) return 0;
        return snprintf(why, why_cap, "HTTP %d: %s", status, resp), -1;
    }
}

/* Prints the workers of one /query answer; the number of engines, or -1
 * when the document is not the shape vLLM's query returns. */
static int print_query(const kv_jdoc *d, const char *tag, bool print) {
    const kv_jnode *root = kv_jdoc_root(d);
    if (root->type != KV_J_OBJ) return -1;
    int engines = 0;
    for (const kv_jnode *dp = kv_jfirst(d, root); dp; dp = kv_jnext(d, dp)) {
        const char *eid = kv_jget_str(d, dp, "engine_id");
        const kv_jnode *wa = kv_jget(d, dp, "worker_addr");
        if (!eid || !wa || wa->type != KV_J_OBJ) return -1;
        for (const kv_jnode *tp = kv_jfirst(d, wa); tp; tp = kv_jnext(d, tp)) {
            if (tp->type != KV_J_OBJ) return -1;
            for (const kv_jnode *pp = kv_jfirst(d, tp); pp; pp = kv_jnext(d, pp)) {
                if (pp->type != KV_J_STR) return -1;
                if (print)
                    fprintf(stderr, "[%s] http bootstrap: engine %s dp %s tp %s pp %s at %s\n", tag, eid, dp->key,
                            tp->key, pp->key, pp->str);
            }
        }
        engines++;
    }
    return engines;
}

int kvn_boot_client_query(const char *addr, uint32_t min_engines, uint32_t give_up_ms, const char *tag, char *why,
                          size_t why_cap) {
    uint64_t give_up = now_ms() + give_up_ms;
    char *resp = malloc(KVN_HTTP_ANSWER_MAX);
    if (!resp) return snprintf(why, why_cap, "out of memory"), -1;
    int rc = -1;
    for (;;) {
        int status = 0;
        int c = kvn_http_call(addr, "GET", "/query", NULL, CALL_MS, &status, resp, KVN_HTTP_ANSWER_MAX, why, why_cap);
        bool late = now_ms() + RETRY_MS >= give_up;
        if (c == -2 && !late) {
            kvn_nap_ms(RETRY_MS);
            continue;
        }
        if (c != 0) break;
        if (status != 200) {
            snprintf(why, why_cap, "HTTP %d: %.200s", status, resp);
            break;
        }
        kv_jdoc d;
        int engines = kv_jdoc_parse(&d, resp, strlen(resp)) == 0 ? print_query(&d, tag, false) : -1;
        if (engines >= 0 && ((uint32_t)engines >= min_engines || late)) print_query(&d, tag, true);
        kv_jdoc_free(&d);
        if (engines < 0) {
            snprintf(why, why_cap, "the answer is not the /query document");
            break;
        }
        if ((uint32_t)engines >= min_engines) {
            rc = engines;
            break;
        }
        if (late) {
            snprintf(why, why_cap, "%d engine(s) listed after %u ms, wanted %u", engines, give_up_ms, min_engines);
            break;
        }
        kvn_nap_ms(QUERY_AGAIN_MS);
    }
    free(resp);
    return rc;
}
