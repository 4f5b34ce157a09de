/* apps/kvnode/proxy_node.c — the proxy process: the core's proxy and
 * bootstrap actors, a "proxy.drv" actor that collects engine stats, and the
 * driver (main thread) that submits requests, aborts a fraction of them at
 * random moments, is told of completions by a hook on the proxy actor's own
 * thread, and reports.
 *
 * Engines: --prefills N P engines (indices 0..N-1, "P<i>.sched") and
 * --decodes M D engines (indices N..N+M-1, "D<i>.sched"); engine i is
 * process 1 + i and dials the proxy. Request k goes to P (k mod N) and to
 * D N + (k div N) mod M: each side round-robin, and every (P, D) pair used.
 *
 * Driver loop (bounded: every wait has a limit; a run with no completion
 * for --stall-ms is reported as stuck):
 *   fill the window -> post due aborts -> wait for completions
 * The wait is on a condition variable: after each REQ_DONE or PROXY_ABORT
 * the proxy actor handles, a hook on its thread (kvp_rt_set_after) looks at
 * that request's slot and, once it has an outcome, queues (id, outcome,
 * times) for the driver and signals it. The driver sleeps until then, until
 * its next abort is due, or 10 ms (stall check). (It used to poll the proxy
 * actor with a call every 50..800 us: two thread wake-ups per poll, about
 * 5% of the CPU of a run on two cores.) */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "apps/kvnode/kvnode.h"
#include "util/json.h"
#include "core/bootstrap.h"
#include "core/proxy.h"

#define N_ENGINES KV_ENGINES_MAX /* engines 0..n_p-1 = P, n_p..n_eng-1 = D */
#define WINDOW_MAX 256u
#define LOOKUP_NS 60000000000ull

typedef struct req_rec {
    uint8_t outcome;       /* kv_proxy_outcome */
    uint32_t prompt_len;
    uint64_t submit_ns, done_ns;
    uint64_t abort_at_ns;  /* 0: none */
    bool abort_sent;
} req_rec;

typedef struct req_done {
    uint32_t id;
    uint8_t outcome;
    uint64_t submit_ns, done_ns;
} req_done;

typedef struct proxy_node {
    kvp_env pe;
    kvp_rt *rt;
    kv_proxy *proxy;
    kv_bootstrap *boot;
    uint32_t drv;
    uint32_t n_p, n_d, n_eng;  /* P engines, D engines, both */
    uint32_t sched[N_ENGINES], admin[N_ENGINES];
    pthread_mutex_t mu;    /* guards stats, have */
    pthread_cond_t cv;
    kvn_stats stats[N_ENGINES];
    uint32_t have[N_ENGINES]; /* token of the last reply */
    req_rec *rec;          /* [requests]; owned; the driver's */
    uint32_t inflight[WINDOW_MAX], n_inflight;
    /* completions, from the proxy actor's thread to the driver */
    uint32_t n_requests;
    bool down[N_ENGINES];      /* main thread: the engine's link was lost (watch_engines) */
    uint8_t *reported;     /* [requests]; owned; the proxy actor's thread only */
    pthread_mutex_t cmu;   /* guards cq, n_cq */
    pthread_cond_t ccv;    /* CLOCK_MONOTONIC; signalled when cq grows */
    req_done cq[WINDOW_MAX];
    uint32_t n_cq;
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
    return kvn_post_retry(n->rt, to, kind, p, len);
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

/* ---- completions, seen on the proxy actor's thread ---------------------------------- */

/* After each message the proxy actor handled: a REQ_DONE or an ABORT may
 * have ended its request (the core's proxy stamps the outcome and done_ns);
 * report each request once. Only requests in flight can end, so cq (the
 * window's size) never overflows. */
static void report_if_ended(proxy_node *n, uint32_t id) {
    if (id >= n->n_requests || n->reported[id]) return;
    const kv_proxy_req *q = kv_proxy_slot(n->proxy, id);
    if (!q->used || q->id != id || q->outcome == KV_OUT_PENDING) return;
    n->reported[id] = 1;
    pthread_mutex_lock(&n->cmu);
    if (n->n_cq < WINDOW_MAX)
        n->cq[n->n_cq++] = (req_done){.id = id, .outcome = q->outcome, .submit_ns = q->submit_ns, .done_ns = q->done_ns};
    pthread_cond_signal(&n->ccv);
    pthread_mutex_unlock(&n->cmu);
}

static void after_proxy(void *arg, const kv_msg *m) {
    proxy_node *n = arg;
    uint32_t id;
    if (m->kind == KV_M_PROXY_ENGINE_DOWN || m->kind == KV_M_PROXY_SUBMIT) {
        /* an engine's loss fails what it held at once; a submit to a lost
         * engine fails at once: look for every request that just ended */
        for (uint32_t i = 0; i < n->n_requests; i++) report_if_ended(n, i);
        return;
    }
    if (m->kind == KV_M_REQ_DONE && m->len >= sizeof(kv_m_req_done)) {
        kv_m_req_done d;
        memcpy(&d, m->payload, sizeof d);
        id = d.id;
    } else if (m->kind == KV_M_PROXY_ABORT && m->len >= sizeof(kv_m_abort)) {
        kv_m_abort a;
        memcpy(&a, m->payload, sizeof a);
        id = a.id;
    } else {
        return;
    }
    report_if_ended(n, id);
}

/* Waits until a completion is queued or until `until_ns`; takes what is
 * queued into the records. Returns how many requests ended; *honest, how
 * many of them ended ok or aborted (not in error). */
static uint32_t take_completions(proxy_node *n, uint64_t until_ns, uint32_t *honest) {
    req_done got[WINDOW_MAX];
    uint32_t k;
    pthread_mutex_lock(&n->cmu);
    while (!n->n_cq && kvp_mono_ns() < until_ns) {
        struct timespec ts = {.tv_sec = (time_t)(until_ns / 1000000000ull), .tv_nsec = (long)(until_ns % 1000000000ull)};
        pthread_cond_timedwait(&n->ccv, &n->cmu, &ts);
    }
    k = n->n_cq;
    memcpy(got, n->cq, k * sizeof got[0]);
    n->n_cq = 0;
    pthread_mutex_unlock(&n->cmu);
    *honest = 0;
    for (uint32_t c = 0; c < k; c++) {
        req_rec *r = &n->rec[got[c].id];
        *honest += got[c].outcome != KV_OUT_ERROR;
        r->outcome = got[c].outcome;
        r->submit_ns = got[c].submit_ns;
        r->done_ns = got[c].done_ns;
        for (uint32_t i = 0; i < n->n_inflight; i++)
            if (n->inflight[i] == got[c].id) {
                n->inflight[i] = n->inflight[--n->n_inflight];
                break;
            }
    }
    return k;
}

/* ---- driving -------------------------------------------------------------------------- */

/* Round-robin over engines first..first+count-1, from the k-th on, past the
 * ones that are down; with all of them down the k-th (the request then fails
 * at once: core/proxy.c). */
static uint32_t pick(const proxy_node *n, uint32_t first, uint32_t count, uint32_t k) {
    for (uint32_t i = 0; i < count; i++) {
        uint32_t e = first + (k + i) % count;
        if (!n->down[e]) return e;
    }
    return first + k % count;
}

static kv_status submit(proxy_node *n, const kvn_opts *o, uint32_t id) {
    uint64_t r = mix(o->seed * 0x9e3779b97f4a7c15ull + id);
    kv_m_proxy_submit s;
    memset(&s, 0, sizeof s);
    uint32_t span = o->prompt_max > o->prompt_min ? o->prompt_max - o->prompt_min + 1 : 1;
    s.spec.id = id;
    s.spec.prompt_len = o->prompt_min + (uint32_t)(r % span);
    s.spec.max_tokens = o->decode_tokens;
    s.spec.tokens = (kv_tokens){.token_seed = mix(r), .prefix_group = 0, .prefix_len = 0};
    s.p_engine = pick(n, 0, n->n_p, id);
    s.d_engine = pick(n, n->n_p, n->n_d, id / n->n_p);
    s.sequential = o->sequential ? 1 : 0;
    req_rec *q = &n->rec[id];
    q->prompt_len = s.spec.prompt_len;
    double u = (double)(mix(r ^ 0xab) >> 11) / 9007199254740992.0;
    if (u < o->abort_frac) q->abort_at_ns = kvp_mono_ns() + mix(r ^ 0xcd) % ((uint64_t)o->abort_max_us * 1000u + 1u) + 1u;
    n->inflight[n->n_inflight++] = id;
    return post_retry(n, n->proxy->actor, KV_M_PROXY_SUBMIT, &s, sizeof s);
}

/* Posts the aborts that are due; returns when the next one is (UINT64_MAX: none). */
static uint64_t post_due_aborts(proxy_node *n) {
    uint64_t now = kvp_mono_ns(), next = UINT64_MAX;
    for (uint32_t i = 0; i < n->n_inflight; i++) {
        req_rec *q = &n->rec[n->inflight[i]];
        if (!q->abort_at_ns || q->abort_sent) continue;
        if (now < q->abort_at_ns) {
            if (q->abort_at_ns < next) next = q->abort_at_ns;
            continue;
        }
        kv_m_abort a = {.id = n->inflight[i]};
        q->abort_sent = post_retry(n, n->proxy->actor, KV_M_PROXY_ABORT, &a, sizeof a) == KV_OK;
        if (!q->abort_sent && now + 1000000u < next) next = now + 1000000u; /* retry in 1 ms */
    }
    return next;
}

static char role_of(const proxy_node *n, uint32_t e) { return e < n->n_p ? 'P' : 'D'; }

/* A new process in a down engine's place (linked, built, published): the
 * proxy dispatches to it again (ENGINE_UP with its scheduler actor). */
static void take_back(proxy_node *n, uint32_t e) {
    char sched[KVP_NAME_MAX], admin[KVP_NAME_MAX];
    uint32_t s = 0, a = 0;
    snprintf(sched, sizeof sched, "%c%u.sched", role_of(n, e), e);
    snprintf(admin, sizeof admin, "%c%u.admin", role_of(n, e), e);
    if (kvp_rt_lookup(n->rt, admin, 0, &a) != KV_OK || kvp_rt_lookup(n->rt, sched, 0, &s) != KV_OK) return;
    kv_m_proxy_engine u = {.engine = e, .sched_actor = s};
    if (post_retry(n, n->proxy->actor, KV_M_PROXY_ENGINE_UP, &u, sizeof u) != KV_OK) return;
    n->admin[e] = a;
    n->sched[e] = s;
    n->down[e] = false;
    fprintf(stderr, "[proxy] engine %c%u is back (a new process linked): dispatching to it again\n", role_of(n, e), e);
}

/* An engine whose link is gone (its process died, or the connection broke)
 * is down: the proxy fails what it had sent there (core/proxy.c,
 * ENGINE_DOWN), sends later requests to the side's other engines (or fails
 * them at once when there is none), and takes the engine back when a new
 * process registers in its place. Checked every pass of the driver loop (at
 * most 10 ms apart). */
static void watch_engines(proxy_node *n) {
    for (uint32_t e = 0; e < n->n_eng; e++) {
        if (n->down[e] && kvp_rt_link_up(n->rt, 1 + e)) take_back(n, e);
        if (n->down[e] || kvp_rt_link_up(n->rt, 1 + e)) continue;
        n->down[e] = true;
        fprintf(stderr, "[proxy] engine %c%u is gone (its link closed): failing its requests\n", role_of(n, e), e);
        kv_m_proxy_engine d = {.engine = e};
        if (post_retry(n, n->proxy->actor, KV_M_PROXY_ENGINE_DOWN, &d, sizeof d) != KV_OK)
            fprintf(stderr, "[proxy] engine %c%u: ENGINE_DOWN could not be posted\n", role_of(n, e), e);
    }
}

/* Returns false if the run stalled. */
static bool drive(proxy_node *n, const kvn_opts *o, uint64_t *elapsed_ns) {
    uint32_t next = 0, done = 0, window = o->window < WINDOW_MAX ? o->window : WINDOW_MAX;
    uint64_t t0 = kvp_mono_ns(), last_progress = t0;
    uint32_t report_every = o->requests >= 10 ? o->requests / 10 : 1, next_report = report_every;
    while (done < o->requests) {
        while (next < o->requests && n->n_inflight < window)
            if (submit(n, o, next++) != KV_OK) fprintf(stderr, "[proxy] submit %u failed\n", next - 1);
        watch_engines(n);
        uint64_t abort_at = post_due_aborts(n), until = kvp_mono_ns() + 10000000u;
        uint32_t honest = 0, got = take_completions(n, abort_at < until ? abort_at : until, &honest);
        done += got;
        uint64_t now = kvp_mono_ns();
        /* progress is a request that ends ok or aborted: a run whose every
         * request fails slowly (a crawl) is as stuck as one where none ends */
        if (honest) last_progress = now;
        if (done >= next_report) {
            fprintf(stderr, "[proxy] progress %u/%u done\n", done, o->requests);
            next_report += report_every;
        }
        if (now - last_progress > (uint64_t)o->stall_ms * 1000000u) {
            fprintf(stderr, "[proxy] STALLED: no request ended ok for %u ms; %u without an outcome:", o->stall_ms,
                    n->n_inflight);
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
        if (!kvn_pool_clean(&s->pool[g])) return false;
    return true;
}


static void json_engine(kv_json *j, const proxy_node *n, uint32_t e, bool up, const kvn_stats *s) {
    char role[2] = {role_of(n, e), 0};
    kv_json_obj(j);
    kv_json_ku64(j, "engine", e);
    kv_json_kstr(j, "role", role);
    kv_json_kbool(j, "reachable", up);
    if (up) {
        const kv_pool_report *r = &s->pool[0];
        kv_json_ku64(j, "capacity", r->capacity);
        kv_json_ku64(j, "free", r->free);
        kv_json_ku64(j, "cached", r->cached);
        kv_json_ku64(j, "owned", r->owned);
        kv_json_ku64(j, "pinned", r->pinned);
        kv_json_ku64(j, "inflight", r->inflight);
        kv_json_ku64(j, "live", s->live_reqs);
        kv_json_ku64(j, "conn_state", s->conn_state);
        kv_json_kbool(j, "clean", pools_clean(s));
        kv_json_ku64(j, "load_errors", s->st.load_errors);
        kv_json_ku64(j, "errors", s->st.errors);
        kv_json_ku64(j, "finished_recving", s->st.finished_recving);
        kv_json_ku64(j, "finished_sending", s->st.finished_sending);
        kv_json_ku64(j, "verified_blocks", s->verified_blocks);
        kv_json_ku64(j, "violations", s->violations);
        kv_json_ku64(j, "mailbox_full", s->rt.full);
        kv_json_ku64(j, "finished", s->st.finished);
        kv_json_ku64(j, "turned_away", s->st.turned_away);
        kv_json_ku64(j, "drafts", s->st.drafts);
        kv_json_ku64(j, "drafts_accepted", s->st.drafts_accepted);
    }
    kv_json_end(j);
}

static void write_json(const char *path, const proxy_node *n, const kvn_opts *o, const summary *s, bool stalled,
                       const bool *up, const kvn_stats *st) {
    FILE *f = kvn_json_open(o);
    if (!f) {
        fprintf(stderr, "[proxy] --json: cannot write %s\n", path);
        return;
    }
    kv_json j;
    kv_json_init(&j, f);
    kv_json_obj(&j);
    kv_json_ku64(&j, "requests", o->requests);
    kv_json_ku64(&j, "ok", s->ok);
    kv_json_ku64(&j, "error", s->error);
    kv_json_ku64(&j, "aborted", s->aborted);
    kv_json_ku64(&j, "pending", s->pending);
    kv_json_kbool(&j, "stalled", stalled);
    kv_json_kf64(&j, "elapsed_s", s->elapsed_s, 4);
    kv_json_kf64(&j, "req_per_s", s->req_s, 1);
    kv_json_ku64(&j, "kv_bytes", s->kv_bytes);
    kv_json_kf64(&j, "kv_gbps", s->gbps, 4);
    kv_json_ku64(&j, "block_bytes", s->block_bytes);
    kv_json_kf64(&j, "p50_ms", s->p50_ms, 3);
    kv_json_kf64(&j, "p90_ms", s->p90_ms, 3);
    kv_json_kf64(&j, "p99_ms", s->p99_ms, 3);
    kv_json_kf64(&j, "max_ms", s->max_ms, 3);
    kv_json_ku64(&j, "prefills", n->n_p);
    kv_json_ku64(&j, "decodes", n->n_d);
    kv_json_karr(&j, "engines");
    for (uint32_t e = 0; e < n->n_eng; e++) {
        kv_json_nl(&j);
        json_engine(&j, n, e, up[e], &st[e]);
    }
    kv_json_end(&j);
    kv_json_end(&j);
    kv_json_nl(&j);
    if (kv_json_done(&j)) fprintf(stderr, "[proxy] --json: writing %s failed\n", path);
    fclose(f);
}

/* Waits (bounded) until every reachable engine's pools drain; takes the
 * last stats of each. */
static void quiesce(proxy_node *n, const kvn_opts *o, bool *up, kvn_stats *st) {
    uint64_t until = kvp_mono_ns() + (uint64_t)o->quiesce_ms * 1000000u;
    uint32_t token = 1;
    for (;;) {
        bool all = true;
        for (uint32_t e = 0; e < n->n_eng; e++) {
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
    if (st == KV_OK) st = kvp_rt_set_after(n->rt, n->proxy->actor, after_proxy, n);
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
    if (o->port_file && !kvn_write_port_file(o->port_file, port)) return KV_EIO;
    st = kvp_rt_start(n->rt);
    for (uint32_t e = 0; e < n->n_eng && st == KV_OK; e++) {
        char sched[KVP_NAME_MAX], admin[KVP_NAME_MAX];
        snprintf(sched, sizeof sched, "%c%u.sched", role_of(n, e), e);
        snprintf(admin, sizeof admin, "%c%u.admin", role_of(n, e), e);
        st = kvp_rt_lookup(n->rt, admin, LOOKUP_NS, &n->admin[e]); /* published after the engine is built */
        if (st == KV_OK) st = kvp_rt_lookup(n->rt, sched, LOOKUP_NS, &n->sched[e]);
        if (st != KV_OK) fprintf(stderr, "[proxy] engine %s never showed up (start it with --index %u)\n", sched, e);
    }
    /* Read by the proxy actor only when it handles a SUBMIT, which is posted
     * after this (the mailbox lock orders the write before that read). */
    for (uint32_t e = 0; e < n->n_eng && st == KV_OK; e++) n->proxy->engine_actor[e] = n->sched[e];
    return st;
}

int kvn_run_proxy(const kvn_opts *o) {
    static proxy_node n;
    /* seed 0: transfer ids from the kernel's generator (--seed drives the
     * traffic only, never the ids) */
    kvp_env_cfg ec = {.seed = 0, .level = o->log_level, .tag = "proxy", .keep_going = false};
    kvp_env_init(&n.pe, &ec);
    kvp_rt_cfg rc = {.proc = 0, .abi = kvn_abi()};
    if (kvp_rt_new(&n.pe.env, &rc, &n.rt) != KV_OK || kvn_secure_rt(o, n.rt) != KV_OK) return EXIT_SIM;
    kvp_env_set_namer(&n.pe, namer, n.rt);
    kvp_rt_set_waiting(n.rt, kvn_say_waiting, (void *)"proxy");
    kvp_rt_set_remote_filter(n.rt, kvn_remote_ok, NULL);
    pthread_mutex_init(&n.mu, NULL);
    pthread_cond_init(&n.cv, NULL);
    n.n_p = o->prefills;
    n.n_d = o->decodes;
    n.n_eng = n.n_p + n.n_d;
    n.rec = calloc(o->requests ? o->requests : 1, sizeof *n.rec);
    n.reported = calloc(o->requests ? o->requests : 1, 1);
    n.n_requests = o->requests;
    pthread_mutex_init(&n.cmu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&n.ccv, &ca);
    pthread_condattr_destroy(&ca);
    if (!n.rec || !n.reported || build(&n, o) != KV_OK) {
        fprintf(stderr, "[proxy] start-up failed\n");
        kvp_rt_free(n.rt);
        return EXIT_SIM;
    }
    fprintf(stderr, "[proxy] %u P + %u D up; driving %u requests (window %u, abort %.2f)\n", n.n_p, n.n_d, o->requests,
            o->window, o->abort_frac);
    uint64_t elapsed = 0;
    bool ok_run = drive(&n, o, &elapsed);
    bool up[N_ENGINES];
    kvn_stats st[N_ENGINES];
    memset(st, 0, sizeof st);
    quiesce(&n, o, up, st);
    summary s;
    const kvn_stats *d0 = NULL; /* block geometry: the first reachable D */
    for (uint32_t e = n.n_p; e < n.n_eng && !d0; e++)
        if (up[e]) d0 = &st[e];
    summarize(&n, o, elapsed, d0, &s);
    printf("kvnode proxy: %u requests in %.3f s: ok %u, error %u, aborted %u, pending %u%s\n", o->requests,
           s.elapsed_s, s.ok, s.error, s.aborted, s.pending, ok_run ? "" : "  (STALLED)");
    printf("  requests/s %.1f   KV moved %.3f GB (%.3f GB/s, %llu B blocks)   latency ms p50 %.3f p90 %.3f p99 %.3f max %.3f\n",
           s.req_s, (double)s.kv_bytes / 1e9, s.gbps, (unsigned long long)s.block_bytes, s.p50_ms, s.p90_ms, s.p99_ms, s.max_ms);
    for (uint32_t e = 0; e < n.n_eng; e++) {
        char line[1024];
        if (!up[e]) {
            printf("  %c%u: unreachable (process gone)\n", role_of(&n, e), e);
            continue;
        }
        kvn_stats_line(&st[e], line, sizeof line);
        printf("  %s  pools %s\n", line, pools_clean(&st[e]) ? "clean" : "NOT CLEAN");
    }
    fflush(stdout);
    if (o->json) write_json(o->json, &n, o, &s, !ok_run, up, st);
    if (!o->no_shutdown)
        for (uint32_t e = 0; e < n.n_eng; e++) {
            if (!up[e]) continue;
            ask_ctx a = {&n, n.admin[e], KVN_M_SHUTDOWN, 0, KV_OK};
            kvp_rt_call(n.rt, n.drv, ask_on_drv, &a);
        }
    nap_us(100000); /* let the SHUTDOWN frames leave before the links close */
    kvp_rt_stop(n.rt);
    kvp_rt_free(n.rt);
    free(n.rec);
    free(n.reported);
    return ok_run && s.pending == 0 ? EXIT_CLEAN : EXIT_LIVENESS; /* requests that did not end */
}
