/* apps/kvnode/http_boot.h — kvnode's HTTP bootstrap: vLLM's Mooncake
 * bootstrap server contract (POST /register, GET /query; docs/kvnode.md,
 * "HTTP bootstrap") served over real HTTP/1.1, and the client calls the
 * engines make to it.
 *
 * Server (http_boot.c): one thread, one poll loop, at most
 * KVN_HTTP_CONNS_MAX connections, one request per connection (answered
 * "Connection: close"). A connection that has not sent a whole request
 * within read_ms is answered 408 and closed; when every slot is taken a new
 * connection evicts the oldest one still reading (logged). Requests are
 * bounded (http_req.h: head 8 KiB; body KVN_BOOT_BODY_MAX) and refused with
 * a status and a {"detail": ...} body that says why.
 *
 * Client (boot_client.c): one request with a deadline on every step
 * (connect, send, receive), a bounded answer. */
#ifndef KVCONN_APPS_KVNODE_HTTP_BOOT_H
#define KVCONN_APPS_KVNODE_HTTP_BOOT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "apps/kvnode/boot_registry.h"

#define KVN_HTTP_CONNS_MAX 32u       /* connections open at once */
#define KVN_HTTP_DRAIN_MS 1000u      /* after the answer: reading what the client still sends, at most */
#define KVN_HTTP_ANSWER_MAX 1048576u /* client: bytes of an answer it reads, at most */

typedef struct kvn_http_boot kvn_http_boot;

typedef struct kvn_http_boot_cfg {
    const char *listen;  /* "IPv4:PORT"; port 0 picks one (kvn_http_boot_port) */
    uint32_t read_ms;    /* a whole request within this, else 408 */
    const char *tag;     /* log prefix ("P0", "http-bootstrap") */
} kvn_http_boot_cfg;

/* Binds and listens. 0, or -1 with why. */
int kvn_http_boot_new(const kvn_http_boot_cfg *cfg, kvn_http_boot **out, char *why, size_t why_cap);
/* NULL-safe; stops the thread first when one runs. */
void kvn_http_boot_free(kvn_http_boot *s);
uint16_t kvn_http_boot_port(const kvn_http_boot *s);
/* Serves on the calling thread until *stop is true (seen within 50 ms). */
void kvn_http_boot_serve(kvn_http_boot *s, _Atomic bool *stop);
/* Serves on a thread of its own until kvn_http_boot_free. 0 or -1. */
int kvn_http_boot_start(kvn_http_boot *s);

/* "a.b.c.d:port" (IPv4 literal, port 0..65535) into host (a NUL-ended copy
 * of the IP, at least 16 bytes) and port. 0 or -1. */
int kvn_http_split_addr(const char *addr, char *host, size_t host_cap, uint16_t *port);

/* One request to the server at addr ("IPv4:PORT"): *status and the body
 * (NUL-ended; at most cap - 1 bytes kept). 0 answered, -2 nothing listens
 * there (connection refused: worth a retry), -1 any other failure; why says
 * which. body may be NULL (no body sent). */
int kvn_http_call(const char *addr, const char *method, const char *path, const char *body, uint32_t timeout_ms,
                  int *status, char *resp, size_t cap, char *why, size_t why_cap);

/* The engines' side (boot_client.c), vLLM's register_worker_with_bootstrap
 * and _connect_to_prefiller_bootstrap. Register: connection refused is
 * retried once a second until give_up_ms; an HTTP error ends it with the
 * server's detail in why. 0 registered, -1 not. */
int kvn_boot_client_register(const char *addr, const kvn_boot_reg *p, uint32_t give_up_ms, char *why,
                             size_t why_cap);
/* GET /query until it lists at least min_engines engines or give_up_ms
 * passes; prints one line per worker ("[tag] http bootstrap: engine E dp
 * D tp T pp P at ADDR"). The number of engines listed, or -1 with why. */
int kvn_boot_client_query(const char *addr, uint32_t min_engines, uint32_t give_up_ms, const char *tag, char *why,
                          size_t why_cap);

#endif
