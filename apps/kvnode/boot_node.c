/* apps/kvnode/boot_node.c — where the HTTP bootstrap (http_boot.h) meets
 * kvnode's processes (docs/kvnode.md, "HTTP bootstrap"):
 *   --role http-bootstrap   the server alone, until SIGINT or SIGTERM (vLLM's
 *                           bootstrap_server_address: a server run apart);
 *   --http-bootstrap IP:PORT on engines, vLLM's owner rule: prefill engine 0
 *                           (DP index 0, its TP rank 0 and PP rank 0 live in
 *                           this process) serves it; every prefill engine
 *                           registers each of its TP ranks (engine_id
 *                           "kvnode-P<index>", dp_rank = --index, pp_rank 0,
 *                           addr "tcp://" + the rank's sender endpoint); a
 *                           decode engine queries it and prints what it lists.
 * The sender's address comes from the core's own registration: on P the
 * core's bootstrap actor is fronted by a relay actor (proxy_link.c) that
 * forwards every message unchanged to the proxy's bootstrap actor and keeps
 * a copy of each REGISTER, which the HTTP registration is made from. The
 * core's path (KV_M_BOOT_REG and QUERY to the proxy) is not changed. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "apps/kvnode/http_boot.h"
#include "apps/kvnode/kvnode.h"
#include "core/msgs.h"

#define GIVE_UP_MS 30000u     /* registration and query: as kvnode's other start-up waits */

struct kvn_boot_hook {
    kvn_http_boot *srv;         /* the owner's server (NULL elsewhere) */
    char addr[96];              /* where the server is ("IP:PORT", the owner's real port) */
};

static kvn_boot_hook hook_storage; /* one engine per process */

static bool owner(const kvn_opts *o) { return strcmp(o->role, "prefill") == 0 && o->index == 0; }

bool kvn_boot_is_owner(const kvn_opts *o) { return o->http_boot && owner(o); }

kvn_boot_hook *kvn_boot_hook_begin(const kvn_opts *o, const char *tag, int *rc) {
    *rc = 0;
    if (!o->http_boot) return NULL;
    kvn_boot_hook *h = &hook_storage;
    memset(h, 0, sizeof *h);
    snprintf(h->addr, sizeof h->addr, "%s", o->http_boot);
    if (!owner(o)) return h;
    char why[256];
    kvn_http_boot_cfg c = {.listen = o->http_boot, .read_ms = o->hello_ms, .tag = tag};
    if (kvn_http_boot_new(&c, &h->srv, why, sizeof why) != 0 || kvn_http_boot_start(h->srv) != 0) {
        fprintf(stderr, "[%s] kvnode: http bootstrap: %s\n", tag, h->srv ? "cannot start its thread" : why);
        kvn_http_boot_free(h->srv);
        h->srv = NULL;
        *rc = EXIT_SIM;
        return NULL;
    }
    char host[64];
    uint16_t port;
    kvn_http_split_addr(o->http_boot, host, sizeof host, &port);
    snprintf(h->addr, sizeof h->addr, "%s:%u", host, (unsigned)kvn_http_boot_port(h->srv));
    fprintf(stderr, "[%s] http bootstrap: serving POST /register and GET /query on %s (owner: prefill engine 0)\n",
            tag, h->addr);
    return h;
}

/* P: each TP rank's registration, from the core's (the relay's copies). */
static int register_ranks(const kvn_boot_hook *h, const kvn_opts *o, const char *tag, const kv_wire_boot *regs,
                          uint32_t n) {
    if (n < o->tp) {
        fprintf(stderr, "[%s] kvnode: http bootstrap: %u of %u ranks registered with the core\n", tag, n, o->tp);
        return EXIT_SIM;
    }
    for (uint32_t i = 0; i < n; i++) {
        kvn_boot_reg p = {.dp_rank = o->index, .tp_rank = regs[i].tp_rank, .pp_rank = 0};
        snprintf(p.engine_id, sizeof p.engine_id, "kvnode-P%u", o->index);
        snprintf(p.addr, sizeof p.addr, "tcp://%s", regs[i].addr[0].s);
        char why[1200];
        if (kvn_boot_client_register(h->addr, &p, GIVE_UP_MS, why, sizeof why) != 0) {
            fprintf(stderr, "[%s] kvnode: http bootstrap: registering tp rank %u at %s failed: %s\n", tag, p.tp_rank,
                    h->addr, why);
            return EXIT_SIM;
        }
        fprintf(stderr, "[%s] http bootstrap: registered %s dp %u tp %u pp 0 as %s with %s\n", tag, p.engine_id,
                p.dp_rank, p.tp_rank, p.addr, h->addr);
    }
    return 0;
}

int kvn_boot_hook_up(kvn_boot_hook *h, const kvn_opts *o, const char *tag, const kv_wire_boot *regs, uint32_t n_regs) {
    if (!h) return 0;
    if (strcmp(o->role, "prefill") == 0) return register_ranks(h, o, tag, regs, n_regs);
    char why[512];
    int n = kvn_boot_client_query(h->addr, 1, GIVE_UP_MS, tag, why, sizeof why);
    if (n < 0) fprintf(stderr, "[%s] kvnode: http bootstrap: GET /query at %s: %s\n", tag, h->addr, why);
    else fprintf(stderr, "[%s] http bootstrap: %d engine(s) listed at %s\n", tag, n, h->addr);
    return 0;
}

void kvn_boot_hook_end(kvn_boot_hook *h) {
    if (!h) return;
    kvn_http_boot_free(h->srv);
    h->srv = NULL;
}

static _Atomic bool stop_flag;

static void on_signal(int sig) {
    (void)sig;
    atomic_store(&stop_flag, true);
}

int kvn_run_http_boot(const kvn_opts *o) {
    char why[256];
    kvn_http_boot *s = NULL;
    kvn_http_boot_cfg c = {.listen = o->listen, .read_ms = o->hello_ms, .tag = "http-bootstrap"};
    if (kvn_http_boot_new(&c, &s, why, sizeof why) != 0)
        return fprintf(stderr, "[http-bootstrap] kvnode: start-up failed: %s\n", why), EXIT_SIM;
    uint16_t port = kvn_http_boot_port(s);
    if (o->port_file && !kvn_write_port_file(o->port_file, port)) {
        fprintf(stderr, "[http-bootstrap] kvnode: cannot write --port-file %s\n", o->port_file);
        kvn_http_boot_free(s);
        return EXIT_SIM;
    }
    struct sigaction sa = {.sa_handler = on_signal};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    char host[64];
    uint16_t unused;
    kvn_http_split_addr(o->listen, host, sizeof host, &unused);
    fprintf(stderr, "[http-bootstrap] serving POST /register and GET /query on %s:%u (request deadline %u ms)\n",
            host, (unsigned)port, o->hello_ms);
    kvn_http_boot_serve(s, &stop_flag);
    kvn_http_boot_free(s);
    return EXIT_CLEAN;
}
