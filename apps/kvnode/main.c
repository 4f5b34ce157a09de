/* apps/kvnode/main.c — command line of the production node; see kvnode.h. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "apps/common/cli.h"
#include "apps/kvnode/http_boot.h"
#include "apps/kvnode/kvnode.h"
#include "core/msgs.h"
#include "core/proxy.h"
#include "transport/tcp/tcp.h"

uint32_t kvn_abi(void) {
    static const size_t sizes[] = {sizeof(kv_req_spec),     sizeof(kv_m_abort),   sizeof(kv_m_req_done),
                                   sizeof(kv_wire_boot),    sizeof(kv_m_boot_query), sizeof(kvn_stats),
                                   sizeof(kv_m_proxy_submit), sizeof(kv_m_fault)};
    uint32_t h = 0x6b766e31u; /* "kvn1": bump when a payload changes meaning */
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) h = (h ^ (uint32_t)sizes[i]) * 16777619u;
    return h;
}

bool kvn_remote_ok(void *ctx, uint32_t kind, uint32_t len) {
    (void)ctx;
    switch (kind) {
    case KVN_M_STATS_REQ:
    case KVN_M_SHUTDOWN: return len == sizeof(uint32_t);
    case KVN_M_STATS: return len == sizeof(kvn_stats);
    default: return kv_msg_remote_ok(kind, len);
    }
}

void kvn_say_waiting(void *ctx, const char *what, uint64_t waited_ms, uint64_t limit_ms) {
    fprintf(stderr, "[%s] waiting for %s: %.0f s (gives up at %.0f s)\n", (const char *)ctx, what,
            (double)waited_ms / 1000.0, (double)limit_ms / 1000.0);
}

void kvn_stats_line(const kvn_stats *s, char *out, size_t cap) {
    size_t n = 0;
    int w = snprintf(out, cap, "%c%u (tp %u):", s->role == KV_ROLE_PRODUCER ? 'P' : 'D', s->engine, s->tp);
    n = w > 0 ? (size_t)w : 0;
    for (uint32_t g = 0; g < s->n_groups && n < cap; g++) {
        const kv_pool_report *r = &s->pool[g];
        w = snprintf(out + n, cap - n, " g%u[cap %u free %u cached %u owned %u pinned %u inflight %u]", g,
                     r->capacity, r->free, r->cached, r->owned, r->pinned, r->inflight);
        n += w > 0 ? (size_t)w : 0;
    }
    if (n < cap)
        snprintf(out + n, cap - n,
                 " live %u conn %u steps %llu finished %llu aborts %llu errors %llu recv %llu send %llu "
                 "load_errors %llu verified_blocks %llu violations %llu turned_away %llu",
                 s->live_reqs, s->conn_state, (unsigned long long)s->st.steps, (unsigned long long)s->st.finished,
                 (unsigned long long)s->st.aborts, (unsigned long long)s->st.errors,
                 (unsigned long long)s->st.finished_recving, (unsigned long long)s->st.finished_sending,
                 (unsigned long long)s->st.load_errors, (unsigned long long)s->verified_blocks,
                 (unsigned long long)s->violations, (unsigned long long)s->st.turned_away);
}

kv_status kvn_secure_kvt(const kvn_opts *o, kvt *t) {
    kvt_tcp_set_hello_deadline_ms(t, o->hello_ms);
    kvt_tcp_set_admission(t, o->max_pending, o->max_pending_addr);
    return kvt_tcp_set_secret(t, &o->key);
}

kv_status kvn_secure_rt(const kvn_opts *o, kvp_rt *rt) {
    kvp_rt_set_handshake_deadline_ms(rt, o->hello_ms);
    return kvp_rt_set_secret(rt, &o->key);
}

static FILE *json_stdout; /* --json -: stdout, taken over before anything was printed */

FILE *kvn_json_open(const kvn_opts *o) { return json_stdout ? json_stdout : fopen(o->json, "w"); }

void kvn_nap_ms(uint32_t ms) {
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

kv_status kvn_post_retry(kvp_rt *rt, uint32_t to, uint32_t kind, const void *p, uint32_t len) {
    kv_status st = KV_EFULL;
    for (uint32_t i = 0; i < 20000 && st == KV_EFULL; i++) {
        st = kv_rt_post(kvp_rt_iface(rt), to, kind, p, len);
        if (st == KV_EFULL) nanosleep(&(struct timespec){.tv_nsec = 100000}, NULL);
    }
    return st;
}

bool kvn_pool_clean(const kv_pool_report *r) {
    return !r->owned && !r->pinned && !r->inflight && r->free + r->cached == r->capacity;
}

bool kvn_write_port_file(const char *path, uint16_t port) {
    char tmp[512];
    if (snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp) return false;
    FILE *f = fopen(tmp, "w");
    if (!f) return false;
    bool ok = fprintf(f, "%u\n", (unsigned)port) > 0;
    ok = fclose(f) == 0 && ok;
    return ok && rename(tmp, path) == 0;
}

static void usage(FILE *out) {
    fputs("usage: kvnode --role prefill|decode|proxy|blast|kvt-blast|http-bootstrap [options]   (kvnode --help, kvnode --version)\n"
          "       kvnode keygen PATH   (writes a new cluster secret, mode 0600; never overwrites)\n"
          "  options take --opt value or --opt=value; numbers are decimal and range-checked\n"
          "  common:  --host IP (transport bind, 127.0.0.1)  --seed N  --log debug|info|warn|error\n"
          "           --secret-file PATH (the cluster secret; without it $KVCONN_SECRET, 64 hex digits;\n"
          "           with neither, links are unauthenticated and every address must be loopback)\n"
          "           --hello-ms N (5000: a link that has not proved the secret by then is closed)\n"
          "           --max-pending N (16)  --max-pending-per-addr N (8): transport connections still in\n"
          "           their HELLO, at most; a new one over a limit evicts the oldest (logged, counted)\n"
          "  prefill: --peer-share PCT (75): the most of P's pull and request slots one D rank may hold;\n"
          "           a pull over it is refused \"sender busy\" (logged, counted); 100: no cap\n"
          "           --groups N (1)  --tp N (1)  --block-size N (16)  --pool-blocks N (1024)  --head-bytes N (16384)\n"
          "           (a block holds --head-bytes x 4 heads / tp bytes per group and worker: 64 KiB by default)\n"
          "           --step-us N (0)  --recv-timeout-ms N (10000)  --abort-timeout-ms N (5000)\n"
          "           --policy fail|recompute\n"
          "           --spec N (0): draft tokens per decode step, 0..4 (speculative decoding: drafts take\n"
          "           blocks, the rejected ones roll back)\n"
          "  engines: --proxy IP:PORT  --index N (P 0, D 1; with the proxy's --prefills N: P 0..N-1, D N..)\n"
          "           --stats-ms N (live pool accounting)\n"
          "           --proxy-wait-ms N (30000): when the proxy's link is lost, the engine aborts what that\n"
          "           proxy had sent it, waits until it holds nothing, redials --proxy and answers to the new\n"
          "           proxy there; it exits 11 if none is taken within N ms (0: exit 11 at once)\n"
          "           --http-bootstrap IP:PORT (vLLM's Mooncake bootstrap over HTTP: prefill engine 0 serves\n"
          "           POST /register and GET /query there (port 0: any; it prints which), every prefill\n"
          "           engine registers its TP ranks, a decode engine queries it and prints what it lists)\n"
          "           --transport tcp|rdma (tcp; rdma: KV by RDMA WRITE, control over TCP; needs a\n"
          "           -DKVCONN_RDMA=ON build and an RDMA NIC)  --rdma-dev NAME (first)  --rdma-port N (1)\n"
          "           --kvmem host|staged|hbm (host; staged: KV apart from the transport's memory, as\n"
          "           device memory with a pinned mirror; hbm: KV in GPU memory, -DKVCONN_CUDA=ON and a GPU)\n"
          "  proxy:   --listen IP:PORT (127.0.0.1:0)  --port-file PATH  --requests N (1000)\n"
          "           --prefills N (1)  --decodes M (1): engines P0..P(N-1), D(N)..D(N+M-1), each started\n"
          "           with its --index; requests go round-robin over the P and over the D engines\n"
          "           --window N (16; an engine holds 64 live requests, P's also those D has yet to pull:\n"
          "           near 64 it turns requests away, logged and counted as turned_away)\n"
          "           --abort-frac F (0)  --abort-max-us N (20000)\n"
          "           --prompt-min N (256)  --prompt-max N (1000)  --decode-tokens N (2)  --sequential\n"
          "           --json PATH (- : stdout, the report then on stderr)  --quiesce-ms N  --stall-ms N (30000)\n"
          "           --no-shutdown\n"
          "  http-bootstrap: that server alone: --listen IP:PORT (127.0.0.1:0)  --port-file PATH; a connection\n"
          "           that has not sent a whole request in --hello-ms is answered 408 and closed\n"
          "  blast, kvt-blast: --blast-mb N (4096)  --json PATH\n"
          "           blast: --blast-buf-mb N (1: send from / receive into N MiB, cycling)\n",
          out);
    kv_exit_print(out);
}

static bool parse_u32(const char *s, uint32_t *out) {
    uint64_t v;
    if (kv_cli_u64(s, 0, UINT32_MAX, &v)) return false;
    *out = (uint32_t)v;
    return true;
}

/* A fraction in 0..1: digits with at most one '.', nothing else. */
static bool parse_frac(const char *s, double *out) {
    char *end = NULL;
    if (!s[0] || strspn(s, "0123456789.") != strlen(s)) return false;
    double v = strtod(s, &end);
    if (*end || v < 0 || v > 1) return false;
    *out = v;
    return true;
}

static bool one_of(const char *v, const char *const *names, uint32_t n) {
    for (uint32_t i = 0; i < n; i++)
        if (strcmp(v, names[i]) == 0) return true;
    return false;
}

/* 1 taken, 0 a bad value for a known option k, -1 k is not an option. */
static int parse_arg(kvn_opts *o, const char *k, const char *v) {
    struct { const char *name; uint32_t *dst; } u32s[] = {
        {"--index", &o->index},           {"--requests", &o->requests},
        {"--window", &o->window},         {"--abort-max-us", &o->abort_max_us},
        {"--prompt-min", &o->prompt_min}, {"--prompt-max", &o->prompt_max},
        {"--decode-tokens", &o->decode_tokens}, {"--tp", &o->tp},
        {"--block-size", &o->block_size}, {"--pool-blocks", &o->pool_blocks},
        {"--head-bytes", &o->head_bytes}, {"--step-us", &o->step_us},
        {"--recv-timeout-ms", &o->recv_timeout_ms}, {"--abort-timeout-ms", &o->abort_timeout_ms},
        {"--stats-ms", &o->stats_ms},     {"--quiesce-ms", &o->quiesce_ms},
        {"--stall-ms", &o->stall_ms},     {"--max-batched-tokens", &o->max_batched_tokens},
        {"--groups", &o->groups},         {"--blast-mb", &o->blast_mb},
        {"--blast-buf-mb", &o->blast_buf_mb}, {"--rdma-port", &o->rdma_port},
        {"--prefills", &o->prefills},     {"--decodes", &o->decodes},
        {"--hello-ms", &o->hello_ms},     {"--max-pending", &o->max_pending},
        {"--max-pending-per-addr", &o->max_pending_addr}, {"--peer-share", &o->peer_share},
        {"--proxy-wait-ms", &o->proxy_wait_ms}, {"--spec", &o->spec},
    };
    static const char *const transports[] = {"tcp", "rdma"}, *const kvmems[] = {"host", "staged", "hbm"},
                             *const levels[] = {"debug", "info", "warn", "error"};
    for (size_t i = 0; i < sizeof u32s / sizeof u32s[0]; i++)
        if (strcmp(k, u32s[i].name) == 0) return parse_u32(v, u32s[i].dst);
    if (strcmp(k, "--role") == 0) o->role = v;
    else if (strcmp(k, "--listen") == 0) o->listen = v;
    else if (strcmp(k, "--proxy") == 0) o->proxy = v;
    else if (strcmp(k, "--host") == 0) o->host = v;
    else if (strcmp(k, "--transport") == 0) {
        if (!one_of(v, transports, 2)) return 0;
        o->transport = v;
    } else if (strcmp(k, "--kvmem") == 0) {
        if (!one_of(v, kvmems, 3)) return 0;
        o->kvmem = v;
    } else if (strcmp(k, "--rdma-dev") == 0) o->rdma_dev = v;
    else if (strcmp(k, "--port-file") == 0) o->port_file = v;
    else if (strcmp(k, "--secret-file") == 0) o->secret_file = v;
    else if (strcmp(k, "--json") == 0) o->json = v;
    else if (strcmp(k, "--http-bootstrap") == 0) {
        char host[64];
        uint16_t port;
        if (kvn_http_split_addr(v, host, sizeof host, &port) != 0) return 0;
        o->http_boot = v;
    }
    else if (strcmp(k, "--seed") == 0) return kv_cli_u64(v, 0, UINT64_MAX, &o->seed) == 0;
    else if (strcmp(k, "--abort-frac") == 0) return parse_frac(v, &o->abort_frac);
    else if (strcmp(k, "--policy") == 0) {
        if (strcmp(v, "fail") == 0) o->policy = KV_POLICY_FAIL;
        else if (strcmp(v, "recompute") == 0) o->policy = KV_POLICY_RECOMPUTE;
        else return 0;
    } else if (strcmp(k, "--log") == 0) {
        for (uint32_t i = 0; i < 4; i++)
            if (strcmp(v, levels[i]) == 0) {
                o->log_level = (kv_log_level)i;
                return 1;
            }
        return 0;
    } else return -1;
    return 1;
}

static int usage_error(void) {
    fputs("try kvnode --help\n", stderr);
    return EXIT_USAGE;
}

/* argv[*i] (and its value): --opt value or --opt=value. 0 taken, else the
 * exit code after printing a message naming the option and the value. */
static int take_arg(kvn_opts *o, int argc, char **argv, int *i) {
    char key[64];
    const char *a = argv[*i], *eq = strncmp(a, "--", 2) == 0 ? strchr(a, '=') : NULL, *v;
    if (eq && (size_t)(eq - a) < sizeof key) {
        memcpy(key, a, (size_t)(eq - a));
        key[eq - a] = 0;
        v = eq + 1;
    } else {
        snprintf(key, sizeof key, "%s", a);
        v = *i + 1 < argc ? argv[*i + 1] : NULL;
    }
    int r = parse_arg(o, key, v ? v : "");
    if (r < 0) return fprintf(stderr, "kvnode: unknown option '%s'\n", a), usage_error();
    if (!v) return fprintf(stderr, "kvnode: %s needs a value\n", key), usage_error();
    if (r == 0) return fprintf(stderr, "kvnode: %s: bad value '%s'\n", key, v), usage_error();
    if (!eq) (*i)++;
    return 0;
}

/* The flags without a value, --help and --version: 1 taken, -1 not one of
 * them; *done set with the exit code when the program ends here. */
static int take_flag(kvn_opts *o, const char *a, int *done) {
    if (strcmp(a, "--sequential") == 0) o->sequential = true;
    else if (strcmp(a, "--no-shutdown") == 0) o->no_shutdown = true;
    else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) usage(stdout), *done = EXIT_CLEAN;
    else if (strcmp(a, "--version") == 0) kv_cli_version(stdout, "kvnode"), *done = EXIT_CLEAN;
    else return -1;
    return 1;
}

/* The checks of the options together; 0 or a usage error's exit code. */
static int check_opts(const kvn_opts *o) {
    if (!o->role)
        return fputs("kvnode: give --role prefill|decode|proxy|blast|kvt-blast|http-bootstrap\n", stderr), usage_error();
    if (o->groups == 0 || o->groups > KV_GROUPS_MAX)
        return fprintf(stderr, "kvnode: --groups: %u is not in 1..%u\n", o->groups, KV_GROUPS_MAX), EXIT_USAGE;
    if (strcmp(o->role, "proxy") == 0 && (!o->prefills || !o->decodes || o->prefills + o->decodes > KV_ENGINES_MAX))
        return fprintf(stderr, "kvnode: --prefills and --decodes must be at least 1 and add up to at most %u\n",
                       KV_ENGINES_MAX),
               EXIT_USAGE;
    if (!o->hello_ms || !o->max_pending || !o->max_pending_addr)
        return fputs("kvnode: --hello-ms, --max-pending and --max-pending-per-addr must be at least 1\n", stderr),
               EXIT_USAGE;
    if (o->spec > KV_SPEC_MAX)
        return fprintf(stderr, "kvnode: --spec: %u is not in 0..%u\n", o->spec, KV_SPEC_MAX), EXIT_USAGE;
    if (o->peer_share < 1 || o->peer_share > 100)
        return fprintf(stderr, "kvnode: --peer-share: %u is not in 1..100\n", o->peer_share), EXIT_USAGE;
    bool engine = strcmp(o->role, "prefill") == 0 || strcmp(o->role, "decode") == 0;
    if (!engine && strcmp(o->role, "proxy") && strcmp(o->role, "blast") && strcmp(o->role, "kvt-blast") &&
        strcmp(o->role, "http-bootstrap"))
        return fprintf(stderr, "kvnode: --role: unknown role '%s'\n", o->role), usage_error();
    if (!engine && o->http_boot)
        return fputs("kvnode: --http-bootstrap is for prefill and decode engines (the server alone: --role "
                     "http-bootstrap --listen IP:PORT)\n", stderr),
               EXIT_USAGE;
    if (!engine) return 0;
    if (!o->proxy) return fputs("kvnode: engines need --proxy IP:PORT\n", stderr), EXIT_USAGE;
    if (o->index != UINT32_MAX && o->index >= KV_ENGINES_MAX)
        return fprintf(stderr, "kvnode: --index: %u is not below %u\n", o->index, KV_ENGINES_MAX), EXIT_USAGE;
    char host[64];
    uint16_t port = 1;
    if (o->http_boot) kvn_http_split_addr(o->http_boot, host, sizeof host, &port);
    if (o->http_boot && port == 0 && !kvn_boot_is_owner(o))
        return fprintf(stderr, "kvnode: --http-bootstrap %s: port 0 only on prefill engine 0, which serves it; the "
                               "others need its real port\n", o->http_boot),
               EXIT_USAGE;
#ifndef KVCONN_HAVE_CUDA
    if (strcmp(o->kvmem, "hbm") == 0)
        return fputs("kvnode: --kvmem hbm: this build has no CUDA (configure with -DKVCONN_CUDA=ON: make build-cuda)\n",
                     stderr),
               EXIT_USAGE;
#endif
#ifndef KVCONN_HAVE_RDMA
    if (strcmp(o->transport, "rdma") == 0)
        return fputs("kvnode: --transport rdma: this build has no RDMA (configure with -DKVCONN_RDMA=ON: make build-rdma)\n",
                     stderr),
               EXIT_USAGE;
#endif
    return 0;
}

static bool loopback(const char *host_or_addr) {
    return strncmp(host_or_addr, "127.", 4) == 0;
}

/* The cluster secret from --secret-file or $KVCONN_SECRET; without one,
 * only loopback addresses. 0 or the exit code after a message. */
static int load_secret(kvn_opts *o) {
    char err[512];
    kv_status st = kv_auth_init();
    if (st != KV_OK) return fputs("kvnode: the crypto library (libsodium) cannot start\n", stderr), EXIT_SIM;
    st = o->secret_file ? kv_auth_load_file(o->secret_file, &o->key, err, sizeof err)
                        : kv_auth_load_env(KV_AUTH_ENV, &o->key, err, sizeof err);
    if (st != KV_OK && st != KV_ENOENT) return fprintf(stderr, "kvnode: %s\n", err), EXIT_BAD_INPUT;
    if (o->key.set) return 0;
    bool listener = strcmp(o->role, "proxy") == 0 || strcmp(o->role, "http-bootstrap") == 0;
    const char *listens[] = {o->host, listener ? o->listen : "127.0.0.1",
                             kvn_boot_is_owner(o) ? o->http_boot : "127.0.0.1"};
    const char *names[] = {"--host", "--listen", "--http-bootstrap"};
    for (int i = 0; i < 3; i++)
        if (!loopback(listens[i]))
            return fprintf(stderr,
                           "kvnode: %s %s: without a cluster secret kvnode listens on loopback (127.x) only; give "
                           "--secret-file PATH or %s (kvnode keygen PATH writes one)\n",
                           names[i], listens[i], KV_AUTH_ENV),
                   EXIT_USAGE;
    return 0;
}

static int keygen(int argc, char **argv) {
    char err[512];
    if (argc != 3 || argv[2][0] == '-')
        return fputs("usage: kvnode keygen PATH\n", stderr), EXIT_USAGE;
    if (kv_auth_init() != KV_OK) return fputs("kvnode: the crypto library (libsodium) cannot start\n", stderr), EXIT_SIM;
    kv_status st = kv_auth_generate(argv[2], err, sizeof err);
    if (st != KV_OK) return fprintf(stderr, "kvnode keygen: %s\n", err), st == KV_EEXIST ? EXIT_BAD_INPUT : EXIT_SIM;
    fprintf(stderr, "kvnode keygen: wrote a new cluster secret to %s (mode 0600); give it to every node with "
                    "--secret-file\n", argv[2]);
    return EXIT_CLEAN;
}

int main(int argc, char **argv) {
    if (argc >= 2 && strcmp(argv[1], "keygen") == 0) return keygen(argc, argv);
    kvn_opts o = {.listen = "127.0.0.1:0", .host = "127.0.0.1", .index = UINT32_MAX, .requests = 1000,
                  .window = 16, .abort_max_us = 20000, .prompt_min = 256, .prompt_max = 1000,
                  .decode_tokens = 2, .tp = 1, .block_size = 16, .pool_blocks = 1024, .head_bytes = KVN_HEAD_BYTES_DEFAULT,
                  .max_batched_tokens = 8192, .recv_timeout_ms = 10000, .abort_timeout_ms = 5000,
                  .groups = 1, .transport = "tcp", .kvmem = "host", .rdma_port = 1, .prefills = 1, .decodes = 1,
                  .stall_ms = 30000, .policy = KV_POLICY_FAIL, .log_level = KV_LOG_WARN, .hello_ms = 5000,
                  .max_pending = 16, .max_pending_addr = 8, .peer_share = 75, .proxy_wait_ms = 30000};
    for (int i = 1; i < argc; i++) {
        int done = -1, rc;
        if (take_flag(&o, argv[i], &done) > 0) {
            if (done >= 0) return done;
        } else if ((rc = take_arg(&o, argc, argv, &i))) {
            return rc;
        }
    }
    bool engine = o.role && (strcmp(o.role, "prefill") == 0 || strcmp(o.role, "decode") == 0);
    if (engine && o.index == UINT32_MAX) o.index = strcmp(o.role, "prefill") == 0 ? 0 : 1;
    int rc = check_opts(&o);
    if (rc) return rc;
    if ((rc = load_secret(&o))) return rc;
    signal(SIGPIPE, SIG_IGN);
    if (!o.quiesce_ms) o.quiesce_ms = o.abort_timeout_ms + o.recv_timeout_ms + 5000;
    if (o.json && kv_cli_is_stdout(o.json) && !(json_stdout = kv_cli_open_out(o.json, "w")))
        return fputs("kvnode: --json -: cannot take over stdout\n", stderr), EXIT_BAD_INPUT;
    if (strcmp(o.role, "proxy") == 0) return kvn_run_proxy(&o);
    if (strcmp(o.role, "blast") == 0) return kvn_run_blast(&o);
    if (strcmp(o.role, "kvt-blast") == 0) return kvn_run_kvt_blast(&o);
    if (strcmp(o.role, "http-bootstrap") == 0) return kvn_run_http_boot(&o);
    return kvn_run_engine(&o);
}
