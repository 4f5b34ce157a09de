/* apps/kvnode/proxy_node.c — the proxy process: the core's proxy and
 * bootstrap actors, a "proxy.drv" actor that collects engine stats, and the
 * driver (main thread) that submits requests, aborts a fraction of them at
 * random moments, watches completions through calls on the proxy actor's own
 * thread, and reports.
 *
 * Driver loop (bounded: every wait has a limit; a run with no completion
 * for --stall-ms is reported as stuck):
 *   fill the window -> post due aborts -> scan in-flight slots -> nap
 * (the nap doubles from 50 us to 800 us while scans find nothing, and goes
 * back to 50 us on a completion: request latency is stamped by the proxy
 * actor, so only the window's refill waits for the scan). */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "apps/kvnode/kvnode.h"
#include "core/bootstrap.h"
#include "core/proxy.h"

#define N_ENGINES 2u       /* engine 0 = P, engine 1 = D */
#define WINDOW_MAX 256u
#define LOOKUP_NS 60000000000ull

typedef struct req_rec {
    uint8_t outcome;       /* kv_proxy_outcome */
    uint32_t prompt_len;
    uint64_t submit_ns, done_ns;
    uint64_t abort_at_ns;  /* 0: none */
    bool abort_sent;
} req_rec;

typedef struct proxy_node {
    kvp_env pe;
    kvp_rt *rt;
    kv_proxy *proxy;
    kv_bootstrap *boot;
    uint32_t drv;
    uint32_t sched[N_ENGINES], admin[N_ENGINES];
    pthread_mutex_t mu;    /* guards stats, have */
    pthread_cond_t cv;
    kvn_stats stats[N_ENGINES];
    uint32_t have[N_ENGINES]; /* token of the last reply */
    req_rec *rec;          /* [requests]; owned */
    uint32_t inflight[WINDOW_MAX], n_inflight;
} proxy_node;

static uint64_t mix(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static void nap_us(long us) {
    struct timespec ts = {.tv_sec = us / 1000000, .tv_nsec = (us % 1000000) * 1000L};
    nanosleep(&ts, NULL);
}

static void drv_handle(void *self, const kv_msg *m) {
    proxy_node *n = self;
    if (m->kind != KVN_M_STATS || m->len != sizeof(kvn_stats)) return;
    const kvn_stats *s = m->payload;
    if (s->engine >= N_ENGINES) return;
    pthread_mutex_lock(&n->mu);
    n->stats[s->engine] = *s;
    n->have[s->engine] = s->token;
    pthread_cond_broadcast(&n->cv);
    pthread_mutex_unlock(&n->mu);
}

static const char *namer(void *ctx, uint32_t actor) { return kvp_rt_actor_name(ctx, actor); }

/* Posts from the main thread, retrying a full mailbox (bounded). */
static kv_status post_retry(proxy_node *n, uint32_t to, uint32_t kind, const void *p, uint32_t len) {
    kv_status st = KV_EFULL;
    for (uint32_t i = 0; i < 20000 && st == KV_EFULL; i++) {
        st = kv_rt_post(kvp_rt_iface(n->rt), to, kind, p, len);
        if (st == KV_EFULL) nap_us(100);
    }
    return st;
}

/* Posts from the driver actor's thread so replies come back to it. */
typedef struct ask_ctx { proxy_node *n; uint32_t to, kind, token; kv_status st; } ask_ctx;
static void ask_on_drv(void *arg) {
    ask_ctx *a = arg;
    a->st = kv_rt_post(kvp_rt_iface(a->n->rt), a->to, a->kind, &a->token, sizeof a->token);
}

/* Asks engine e for stats; false if it did not answer within timeout. */
static bool engine_stats(proxy_node *n, uint32_t e, uint32_t token, uint64_t timeout_ns, kvn_stats *out) {
    if (!kvp_rt_link_up(n->rt, 1 + e)) return false;
    ask_ctx a = {n, n->admin[e], KVN_M_STATS_REQ, token, KV_OK};
    if (kvp_rt_call(n->rt, n->drv, ask_on_drv, &a) != KV_OK || a.st != KV_OK) return false;
    uint64_t until = kvp_mono_ns() + timeout_ns;
    pthread_mutex_lock(&n->mu);
    while (n->have[e] != token && kvp_mono_ns() < until) {
        pthread_mutex_unlock(&n->mu);
        nap_us(1000);
        pthread_mutex_lock(&n->mu);
    }
    bool ok = n->have[e] == token;
    if (ok) *out = n->stats[e];
    pthread_mutex_unlock(&n->mu);
    return ok;
}

/* ---- completions, read on the proxy actor's thread ---------------------------------- */

typedef struct scan_ctx { proxy_node *n; uint32_t done; } scan_ctx;

static void scan(void *arg) {
    scan_ctx *c = arg;
    proxy_node *n = c->n;
    for (uint32_t i = 0; i < n->n_inflight;) {
        uint32_t id = n->inflight[i];
        const kv_proxy_req *q = kv_proxy_slot(n->proxy, id);
        if (q->used && q->id == id && q->outcome != KV_OUT_PENDING) {
            n->rec[id].outcome = q->outcome;
            n->rec[id].submit_ns = q->submit_ns;
            n->rec[id].done_ns = q->done_ns;
            n->inflight[i] = n->inflight[--n->n_inflight];
            c->done++;
        } else {
            i++;
        }
    }
}

/* ---- driving -------------------------------------------------------------------------- */

static kv_status submit(proxy_node *n, const kvn_opts *o, uint32_t id) {
    uint64_t r = mix(o->seed * 0x9e3779b97f4a7c15ull + id);
    kv_m_proxy_submit s;
    memset(&s, 0, sizeof s);
    uint32_t span = o->prompt_max > o->prompt_min ? o->prompt_max - o->prompt_min + 1 : 1;
    s.spec.id = id;
    s.spec.prompt_len = o->prompt_min + (uint32_t)(r % span);
    s.spec.max_tokens = o->decode_tokens;
    s.spec.tokens = (kv_tokens){.token_seed = mix(r), .prefix_group = 0, .prefix_len = 0};
    s.p_engine = 0;
    s.d_engine = 1;
    s.sequential = o->sequential ? 1 : 0;
    req_rec *q = &n->rec[id];
    q->prompt_len = s.spec.prompt_len;
    double u = (double)(mix(r ^ 0xab) >> 11) / 9007199254740992.0;
    if (u < o->abort_frac) q->abort_at_ns = kvp_mono_ns() + mix(r ^ 0xcd) % ((uint64_t)o->abort_max_us * 1000u + 1u) + 1u;
    n->inflight[n->n_inflight++] = id;
    return post_retry(n, n->proxy->actor, KV_M_PROXY_SUBMIT, &s, sizeof s);
}

static void post_due_aborts(proxy_node *n) {
    uint64_t now = kvp_mono_ns();
    for (uint32_t i = 0; i < n->n_inflight; i++) {
        req_rec *q = &n->rec[n->inflight[i]];
        if (!q->abort_at_ns || q->abort_sent || now < q->abort_at_ns) continue;
        kv_m_abort a = {.id = n->inflight[i]};
        q->abort_sent = post_retry(n, n->proxy->actor, KV_M_PROXY_ABORT, &a, sizeof a) == KV_OK;
    }
}

/* Returns false if the run stalled. */
static bool drive(proxy_node *n, const kvn_opts *o, uint64_t *elapsed_ns) {
    uint32_t next = 0, done = 0, window = o->window < WINDOW_MAX ? o->window : WINDOW_MAX;
    uint64_t t0 = kvp_mono_ns(), last_progress = t0;
    uint32_t report_every = o->requests >= 10 ? o->requests / 10 : 1, next_report = report_every;
    long nap = 50; /* us: 50 .. 800 */
    while (done < o->requests) {
        while (next < o->requests && n->n_inflight < window)
            if (submit(n, o, next++) != KV_OK) fprintf(stderr, "[proxy] submit %u failed\n", next - 1);
        post_due_aborts(n);
        scan_ctx c = {n, 0};
        if (kvp_rt_call(n->rt, n->proxy->actor, scan, &c) != KV_OK) return false;
        done += c.done;
        uint64_t now = kvp_mono_ns();
        if (c.done) { /* a scan is a call on the proxy actor's thread: back off while nothing ends */
            last_progress = now;
            nap = 50;
        } else {
            nap_us(nap);
            nap = nap * 2 < 800 ? nap * 2 : 800;
        }
        if (done >= next_report) {
            fprintf(stderr, "[proxy] progress %u/%u done\n", done, o->requests);
            next_report += report_every;
        }
        if (now - last_progress > (uint64_t)o->stall_ms * 1000000u) {
            fprintf(stderr, "[proxy] STALLED: %u requests without an outcome for %u ms:", n->n_inflight, o->stall_ms);
            for (uint32_t i = 0; i < n->n_inflight && i < 16; i++) fprintf(stderr, " %u", n->inflight[i]);
            fputc('\n', stderr);
            *elapsed_ns = now - t0;
            return false;
        }
    }
    *elapsed_ns = kvp_mono_ns() - t0;
    return true;
}

/* ---- reporting ------------------------------------------------------------------------- */

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

typedef struct summary {
    uint32_t ok, error, aborted, pending;
    uint64_t kv_bytes;
    uint64_t block_bytes; /* one block of one group, all ranks */
    double p50_ms, p90_ms, p99_ms, max_ms, req_s, gbps, elapsed_s;
} summary;

static double pct(const uint64_t *v, uint32_t n, double p) {
    if (!n) return 0;
    uint32_t i = (uint32_t)ceil(p * n) - 1u;
    return (double)v[i < n ? i : n - 1] / 1e6;
}

static void summarize(const proxy_node *n, const kvn_opts *o, uint64_t elapsed_ns, const kvn_stats *d, summary *s) {
    memset(s, 0, sizeof *s);
    uint64_t *lat = calloc(o->requests ? o->requests : 1, sizeof *lat);
    uint32_t nl = 0;
    uint32_t bs = d ? d->block_size : o->block_size;
    uint64_t block_bytes = (uint64_t)(d ? d->head_bytes : o->head_bytes) * KV_HEADS * (d ? d->n_groups : o->groups);
    s->block_bytes = (uint64_t)(d ? d->head_bytes : o->head_bytes) * KV_HEADS;
    for (uint32_t i = 0; i < o->requests; i++) {
        const req_rec *q = &n->rec[i];
        switch (q->outcome) {
        case KV_OUT_OK:
            s->ok++;
            s->kv_bytes += (uint64_t)kv_cdiv(q->prompt_len, bs) * block_bytes;
            if (lat) lat[nl++] = q->done_ns - q->submit_ns;
            break;
        case KV_OUT_ERROR: s->error++; break;
        case KV_OUT_ABORTED: s->aborted++; break;
        default: s->pending++;
        }
    }
    if (lat) {
        qsort(lat, nl, sizeof *lat, cmp_u64);
        s->p50_ms = pct(lat, nl, 0.50);
        s->p90_ms = pct(lat, nl, 0.90);
        s->p99_ms = pct(lat, nl, 0.99);
        s->max_ms = nl ? (double)lat[nl - 1] / 1e6 : 0;
    }
    free(lat);
    s->elapsed_s = (double)elapsed_ns / 1e9;
    s->req_s = s->elapsed_s > 0 ? (double)o->requests / s->elapsed_s : 0;
    s->gbps = s->elapsed_s > 0 ? (double)s->kv_bytes / s->elapsed_s / 1e9 : 0;
}

static bool pools_clean(const kvn_stats *s) {
    if (s->live_reqs || s->conn_state) return false;
    for (uint32_t g = 0; g < s->n_groups; g++)
        if (s->pool[g].owned || s->pool[g].pinned || s->pool[g].inflight ||
            s->pool[g].free + s->pool[g].cached != s->pool[g].capacity)
            return false;
    return true;
}

static void json_engine(FILE *f, uint32_t e, bool up, const kvn_stats *s) {
    fprintf(f, "    {\"engine\": %u, \"role\": \"%s\", \"reachable\": %s", e, e == 0 ? "P" : "D", up ? "true" : "false");
    if (up) {
        const kv_pool_report *r = &s->pool[0];
        fprintf(f, ", \"capacity\": %u, \"free\": %u, \"cached\": %u, \"owned\": %u, \"pinned\": %u, \"inflight\": %u, "
                   "\"live\": %u, \"conn_state\": %u, \"clean\": %s, \"load_errors\": %llu, \"errors\": %llu, "
                   "\"finished_recving\": %llu, \"finished_sending\": %llu, \"verified_blocks\": %llu, "
                   "\"violations\": %llu, \"mailbox_full\": %llu",
                r->capacity, r->free, r->cached, r->owned, r->pinned, r->inflight, s->live_reqs, s->conn_state,
                pools_clean(s) ? "true" : "false", (unsigned long long)s->st.load_errors,
                (unsigned long long)s->st.errors, (unsigned long long)s->st.finished_recving,
                (unsigned long long)s->st.finished_sending, (unsigned long long)s->verified_blocks,
                (unsigned long long)s->violations, (unsigned long long)s->rt.full);
    }
    fputs("}", f);
}

static void write_json(const char *path, const kvn_opts *o, const summary *s, bool stalled, const bool *up,
                       const kvn_stats *st) {
    FILE *f = fopen(path, "w");
    if (!f) return;
    fprintf(f, "{\n  \"requests\": %u, \"ok\": %u, \"error\": %u, \"aborted\": %u, \"pending\": %u, \"stalled\": %s,\n"
               "  \"elapsed_s\": %.4f, \"req_per_s\": %.1f, \"kv_bytes\": %llu, \"kv_gbps\": %.4f, \"block_bytes\": %llu,\n"
               "  \"p50_ms\": %.3f, \"p90_ms\": %.3f, \"p99_ms\": %.3f, \"max_ms\": %.3f,\n  \"engines\": [\n",
            o->requests, s->ok, s->error, s->aborted, s->pending, stalled ? "true" : "false", s->elapsed_s, s->req_s,
            (unsigned long long)s->kv_bytes, s->gbps, (unsigned long long)s->block_bytes, s->p50_ms, s->p90_ms, s->p99_ms, s->max_ms);
    for (uint32_t e = 0; e < N_ENGINES; e++) {
        json_engine(f, e, up[e], &st[e]);
        fputs(e + 1 < N_ENGINES ? ",\n" : "\n", f);
    }
    fputs("  ]\n}\n", f);
    fclose(f);
}

/* Waits (bounded) until every reachable engine's pools drain; takes the
 * last stats of each. */
static void quiesce(proxy_node *n, const kvn_opts *o, bool *up, kvn_stats *st) {
    uint64_t until = kvp_mono_ns() + (uint64_t)o->quiesce_ms * 1000000u;
    uint32_t token = 1;
    for (;;) {
        bool all = true;
        for (uint32_t e = 0; e < N_ENGINES; e++) {
            up[e] = engine_stats(n, e, token++, 5000000000ull, &st[e]);
            if (up[e] && !pools_clean(&st[e])) all = false;
        }
        if (all || kvp_mono_ns() >= until) return;
        nap_us(50000);
    }
}

/* ---- the process ------------------------------------------------------------------------ */

static kv_status build(proxy_node *n, const kvn_opts *o) {
    kv_rt *rt = kvp_rt_iface(n->rt);
    kv_status st = kv_proxy_new(&n->pe.env, rt, 0, KV_PROXY_REQS_MAX, &n->proxy);
    if (st == KV_OK) st = kv_bootstrap_new(&n->pe.env, rt, 0, &n->boot);
    if (st == KV_OK) st = kv_rt_spawn(rt, "proxy.drv", 0, drv_handle, n, 1u << 16, &n->drv);
    if (st != KV_OK) return st;
    snprintf(n->proxy->bootstrap_addr.s, sizeof n->proxy->bootstrap_addr.s, "%s", o->listen);
    char host[KV_ADDR_MAX];
    const char *colon = strrchr(o->listen, ':');
    if (!colon || (size_t)(colon - o->listen) >= sizeof host) return KV_EINVAL;
    memcpy(host, o->listen, (size_t)(colon - o->listen));
    host[colon - o->listen] = '\0';
    uint16_t port = 0;
    st = kvp_rt_listen(n->rt, host, (uint16_t)atoi(colon + 1), &port);
    if (st != KV_OK) return st;
    fprintf(stderr, "[proxy] bridge listening on %s:%u\n", host, port);
    if (o->port_file) {
        char tmp[512];
        snprintf(tmp, sizeof tmp, "%s.tmp", o->port_file);
        FILE *f = fopen(tmp, "w");
        if (!f) return KV_EIO;
        fprintf(f, "%u\n", port);
        fclose(f);
        if (rename(tmp, o->port_file) != 0) return KV_EIO;
    }
    st = kvp_rt_start(n->rt);
    static const char *const sched[N_ENGINES] = {"P0.sched", "D1.sched"};
    static const char *const admin[N_ENGINES] = {"P0.admin", "D1.admin"};
    for (uint32_t e = 0; e < N_ENGINES && st == KV_OK; e++) {
        st = kvp_rt_lookup(n->rt, admin[e], LOOKUP_NS, &n->admin[e]); /* published after the engine is built */
        if (st == KV_OK) st = kvp_rt_lookup(n->rt, sched[e], LOOKUP_NS, &n->sched[e]);
        if (st != KV_OK) fprintf(stderr, "[proxy] engine %s never showed up\n", sched[e]);
    }
    /* Read by the proxy actor only when it handles a SUBMIT, which is posted
     * after this (the mailbox lock orders the write before that read). */
    for (uint32_t e = 0; e < N_ENGINES && st == KV_OK; e++) n->proxy->engine_actor[e] = n->sched[e];
    return st;
}

int kvn_run_proxy(const kvn_opts *o) {
    static proxy_node n;
    kvp_env_cfg ec = {.seed = o->seed, .level = o->log_level, .tag = "proxy", .keep_going = false};
    kvp_env_init(&n.pe, &ec);
    kvp_rt_cfg rc = {.proc = 0, .abi = kvn_abi()};
    if (kvp_rt_new(&n.pe.env, &rc, &n.rt) != KV_OK) return 2;
    kvp_env_set_namer(&n.pe, namer, n.rt);
    pthread_mutex_init(&n.mu, NULL);
    pthread_cond_init(&n.cv, NULL);
    n.rec = calloc(o->requests ? o->requests : 1, sizeof *n.rec);
    if (!n.rec || build(&n, o) != KV_OK) {
        fprintf(stderr, "[proxy] start-up failed\n");
        kvp_rt_free(n.rt);
        return 1;
    }
    fprintf(stderr, "[proxy] P and D up; driving %u requests (window %u, abort %.2f)\n", o->requests, o->window,
            o->abort_frac);
    uint64_t elapsed = 0;
    bool ok_run = drive(&n, o, &elapsed);
    bool up[N_ENGINES];
    kvn_stats st[N_ENGINES];
    memset(st, 0, sizeof st);
    quiesce(&n, o, up, st);
    summary s;
    summarize(&n, o, elapsed, up[1] ? &st[1] : NULL, &s);
    printf("kvnode proxy: %u requests in %.3f s: ok %u, error %u, aborted %u, pending %u%s\n", o->requests,
           s.elapsed_s, s.ok, s.error, s.aborted, s.pending, ok_run ? "" : "  (STALLED)");
    printf("  requests/s %.1f   KV moved %.3f GB (%.3f GB/s, %llu B blocks)   latency ms p50 %.3f p90 %.3f p99 %.3f max %.3f\n",
           s.req_s, (double)s.kv_bytes / 1e9, s.gbps, (unsigned long long)s.block_bytes, s.p50_ms, s.p90_ms, s.p99_ms, s.max_ms);
    for (uint32_t e = 0; e < N_ENGINES; e++) {
        char line[1024];
        if (!up[e]) {
            printf("  %c%u: unreachable (process gone)\n", e == 0 ? 'P' : 'D', e);
            continue;
        }
        kvn_stats_line(&st[e], line, sizeof line);
        printf("  %s  pools %s\n", line, pools_clean(&st[e]) ? "clean" : "NOT CLEAN");
    }
    fflush(stdout);
    if (o->json) write_json(o->json, o, &s, !ok_run, up, st);
    if (!o->no_shutdown)
        for (uint32_t e = 0; e < N_ENGINES; e++) {
            if (!up[e]) continue;
            ask_ctx a = {&n, n.admin[e], KVN_M_SHUTDOWN, 0, KV_OK};
            kvp_rt_call(n.rt, n.drv, ask_on_drv, &a);
        }
    nap_us(100000); /* let the SHUTDOWN frames leave before the links close */
    kvp_rt_stop(n.rt);
    kvp_rt_free(n.rt);
    free(n.rec);
    return ok_run && s.pending == 0 ? 0 : 1;
}
