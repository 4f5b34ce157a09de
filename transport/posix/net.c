/* transport/posix/net.c — locked kvt + progress thread; see net.h. */
#include "transport/posix/net.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kvconn/limits.h"
#include "transport/posix/posix_env.h"

#define NET_EV_MAX 64u                                 /* events per inner poll */
#define NET_MSG_MAX ((uint32_t)sizeof(kvt_event) + KV_WIRE_MAX) /* one posted event */
#define NET_FDS_MAX 256u
#define NET_POST_RETRY_NS 50000ull

struct kvp_net {
    kvt self;                 /* the locked view; impl = this */
    const kv_env *env;        /* borrowed */
    kvp_net_cfg cfg;
    pthread_mutex_t mu;       /* serialises every inner call */
    pthread_cond_t polled;    /* broadcast after every inner poll (send rings drained) */
    pthread_t thread;
    bool running;
    _Atomic bool quit;
    _Atomic bool sleeping;    /* the progress thread is (about to be) in poll(2) */
    int wake_rd, wake_wr;
    kvt_event ev[NET_EV_MAX];
    uint32_t ev_len[NET_EV_MAX];
    uint8_t *stage;           /* [NET_EV_MAX * NET_MSG_MAX]: events as posted; owned */
    struct pollfd pfd[NET_FDS_MAX + 1];
    _Atomic uint64_t c_polls, c_events, c_sleeps, c_retries, c_full_waits, c_full_fails;
};

static kvp_net *N(kvt *t) { return (kvp_net *)t->impl; }

static void wake(kvp_net *n) {
    if (!atomic_load_explicit(&n->sleeping, memory_order_acquire)) return;
    uint8_t one = 1;
    (void)!write(n->wake_wr, &one, 1);
}

/* ---- locked ops --------------------------------------------------------------- */

static kv_status l_reg(kvt *t, void *b, uint64_t len, kvt_mem_kind k, kvt_region *o) {
    kvp_net *n = N(t);
    pthread_mutex_lock(&n->mu);
    kv_status st = kvt_reg(n->cfg.inner, b, len, k, o);
    pthread_mutex_unlock(&n->mu);
    return st;
}

static kv_status l_dereg(kvt *t, kvt_region r) {
    kvp_net *n = N(t);
    pthread_mutex_lock(&n->mu);
    kv_status st = kvt_dereg(n->cfg.inner, r);
    pthread_mutex_unlock(&n->mu);
    return st;
}

static kv_status l_export(kvt *t, kvt_region r, kvt_desc *o) {
    kvp_net *n = N(t);
    pthread_mutex_lock(&n->mu);
    kv_status st = kvt_export_desc(n->cfg.inner, r, o);
    pthread_mutex_unlock(&n->mu);
    return st;
}

static kv_status l_grant(kvt *t, kvt_region r, kvt_ep ep, kvt_peer p, uint64_t off, uint64_t len, uint32_t *id,
                         kvt_desc *d) {
    kvp_net *n = N(t);
    pthread_mutex_lock(&n->mu);
    kv_status st = kvt_grant(n->cfg.inner, r, ep, p, off, len, id, d);
    pthread_mutex_unlock(&n->mu);
    return st;
}

static kv_status l_revoke(kvt *t, uint32_t id) {
    kvp_net *n = N(t);
    pthread_mutex_lock(&n->mu);
    kv_status st = kvt_revoke(n->cfg.inner, id);
    pthread_mutex_unlock(&n->mu);
    return st;
}

static kv_status l_ep_open(kvt *t, uint32_t owner, kvt_ep *o, kvt_addr *a) {
    kvp_net *n = N(t);
    pthread_mutex_lock(&n->mu);
    kv_status st = kvt_ep_open(n->cfg.inner, owner, o, a);
    pthread_mutex_unlock(&n->mu);
    wake(n);
    return st;
}

static kv_status l_connect(kvt *t, kvt_ep ep, const kvt_addr *a, kvt_peer *o) {
    kvp_net *n = N(t);
    pthread_mutex_lock(&n->mu);
    kv_status st = kvt_connect(n->cfg.inner, ep, a, o);
    pthread_mutex_unlock(&n->mu);
    wake(n);
    return st;
}

/* A full send ring or batch table is back-pressure, not a failure: the
 * caller (an actor's thread) waits for the progress thread to drain it, as
 * a transfer engine's submit queues. Bounded by cfg.full_wait_ns, after which
 * KV_EFULL goes back to the caller. Caller holds n->mu. */
static void wait_drained(kvp_net *n, uint64_t until_ns) {
    uint64_t now = kvp_mono_ns();
    uint64_t at = now + 1000000u < until_ns ? now + 1000000u : until_ns;
    struct timespec ts = {.tv_sec = (time_t)(at / 1000000000ull), .tv_nsec = (long)(at % 1000000000ull)};
    uint8_t one = 1;
    (void)!write(n->wake_wr, &one, 1);
    pthread_cond_timedwait(&n->polled, &n->mu, &ts);
}

static kv_status l_submit(kvt *t, kvt_ep ep, kvt_peer p, const kvt_write *w, uint32_t cnt, uint64_t tag,
                          uint64_t deadline_ns) {
    kvp_net *n = N(t);
    uint64_t until = 0;
    pthread_mutex_lock(&n->mu);
    kv_status st = kvt_submit(n->cfg.inner, ep, p, w, cnt, tag, deadline_ns);
    while (st == KV_EFULL && !atomic_load(&n->quit)) {
        if (!until) until = kvp_mono_ns() + n->cfg.full_wait_ns;
        if (kvp_mono_ns() >= until) break;
        atomic_fetch_add_explicit(&n->c_full_waits, 1, memory_order_relaxed);
        wait_drained(n, until);
        st = kvt_submit(n->cfg.inner, ep, p, w, cnt, tag, deadline_ns);
    }
    pthread_mutex_unlock(&n->mu);
    if (st == KV_EFULL) {
        atomic_fetch_add(&n->c_full_fails, 1);
        kv_logf(n->env, KV_LOG_WARN, "net: submit still full after %llu ms", (unsigned long long)(n->cfg.full_wait_ns / 1000000u));
    }
    wake(n);
    return st;
}

static kv_status l_send_ctrl(kvt *t, kvt_ep ep, kvt_peer p, const void *b, uint32_t len) {
    kvp_net *n = N(t);
    uint64_t until = 0;
    pthread_mutex_lock(&n->mu);
    kv_status st = kvt_send_ctrl(n->cfg.inner, ep, p, b, len);
    while (st == KV_EFULL && !atomic_load(&n->quit)) {
        if (!until) until = kvp_mono_ns() + n->cfg.full_wait_ns;
        if (kvp_mono_ns() >= until) break;
        atomic_fetch_add_explicit(&n->c_full_waits, 1, memory_order_relaxed);
        wait_drained(n, until);
        st = kvt_send_ctrl(n->cfg.inner, ep, p, b, len);
    }
    pthread_mutex_unlock(&n->mu);
    if (st == KV_EFULL) {
        atomic_fetch_add(&n->c_full_fails, 1);
        kv_logf(n->env, KV_LOG_WARN, "net: send_ctrl still full after %llu ms", (unsigned long long)(n->cfg.full_wait_ns / 1000000u));
    }
    wake(n);
    return st;
}

/* Only the progress thread polls the inner backend. */
static kv_status l_poll(kvt *t, kvt_event *o, uint32_t max, uint32_t *out_n) {
    (void)t;
    (void)o;
    (void)max;
    if (out_n) *out_n = 0;
    return KV_ENOSYS;
}

static void l_close(kvt *t) { kvp_net_free(N(t)); }

static const kvt_ops locked_ops = {
    .size = sizeof(kvt_ops), .name = "locked", .reg = l_reg, .dereg = l_dereg, .export_desc = l_export,
    .ep_open = l_ep_open, .connect = l_connect, .submit = l_submit, .send_ctrl = l_send_ctrl,
    .poll = l_poll, .close = l_close, .grant = l_grant, .revoke = l_revoke};

/* ---- progress ---------------------------------------------------------------------- */

/* One inner poll; events copied to the stage. Returns the count. */
static uint32_t poll_once(kvp_net *n) {
    uint32_t cnt = 0;
    pthread_mutex_lock(&n->mu);
    kv_status st = kvt_poll(n->cfg.inner, n->ev, NET_EV_MAX, &cnt);
    if (st != KV_OK) cnt = 0;
    for (uint32_t i = 0; i < cnt; i++) {
        uint8_t *m = n->stage + (size_t)i * NET_MSG_MAX;
        uint32_t len = (uint32_t)sizeof(kvt_event);
        memcpy(m, &n->ev[i], sizeof(kvt_event));
        const uint8_t *bytes = NULL;
        if (n->ev[i].kind == KVT_EV_CTRL && n->ev[i].len <= KV_WIRE_MAX && n->cfg.event_data &&
            n->cfg.event_data(n->cfg.inner, i, &bytes) == KV_OK) {
            memcpy(m + len, bytes, n->ev[i].len);
            len += n->ev[i].len;
        }
        n->ev_len[i] = len;
    }
    pthread_cond_broadcast(&n->polled);
    pthread_mutex_unlock(&n->mu);
    atomic_fetch_add_explicit(&n->c_polls, 1, memory_order_relaxed);
    return cnt;
}

static void deliver(kvp_net *n, uint32_t cnt) {
    kv_rt *rt = kvp_rt_iface(n->cfg.rt);
    for (uint32_t i = 0; i < cnt; i++) {
        const uint8_t *m = n->stage + (size_t)i * NET_MSG_MAX;
        for (;;) {
            kv_status st = kv_rt_post(rt, n->ev[i].owner, KVT_MSG_EVENT, m, n->ev_len[i]);
            if (st != KV_EFULL || atomic_load(&n->quit)) {
                if (st != KV_OK && st != KV_EFULL)
                    kv_logf(n->env, KV_LOG_ERROR, "net: event for actor %#x lost: %s", n->ev[i].owner,
                            kv_status_str(st));
                break;
            }
            atomic_fetch_add_explicit(&n->c_retries, 1, memory_order_relaxed);
            struct timespec ts = {.tv_sec = 0, .tv_nsec = (long)NET_POST_RETRY_NS};
            nanosleep(&ts, NULL);
        }
    }
    atomic_fetch_add_explicit(&n->c_events, cnt, memory_order_relaxed);
}

static void idle_wait(kvp_net *n) {
    uint32_t k = 0;
    atomic_store_explicit(&n->sleeping, true, memory_order_release); /* ops from now on wake us */
    pthread_mutex_lock(&n->mu);
    if (n->cfg.pollfds) (void)n->cfg.pollfds(n->cfg.inner, n->pfd + 1, NET_FDS_MAX, &k);
    pthread_mutex_unlock(&n->mu);
    n->pfd[0] = (struct pollfd){.fd = n->wake_rd, .events = POLLIN};
    int ms = (int)((n->cfg.idle_wait_ns + 999999u) / 1000000u);
    (void)poll(n->pfd, (nfds_t)k + 1, ms);
    atomic_store_explicit(&n->sleeping, false, memory_order_release);
    if (n->pfd[0].revents & POLLIN) {
        uint8_t junk[64];
        while (read(n->wake_rd, junk, sizeof junk) > 0) {}
    }
    atomic_fetch_add_explicit(&n->c_sleeps, 1, memory_order_relaxed);
}

static void *progress_main(void *arg) {
    kvp_net *n = arg;
    kvp_thread_name("net.progress");
    while (!atomic_load(&n->quit)) {
        uint32_t cnt = poll_once(n);
        deliver(n, cnt);
        if (cnt == 0) idle_wait(n);
    }
    return NULL;
}

/* ---- lifetime ------------------------------------------------------------------------ */

kv_status kvp_net_new(const kv_env *env, const kvp_net_cfg *cfg, kvp_net **out) {
    if (!env || !cfg || !cfg->inner || !cfg->rt || !out) return KV_EINVAL;
    kvp_net *n = kv_alloc(env, sizeof *n);
    if (!n) return KV_ENOMEM;
    memset(n, 0, sizeof *n);
    n->env = env;
    n->cfg = *cfg;
    if (!n->cfg.idle_wait_ns) n->cfg.idle_wait_ns = 2000000u;
    if (!n->cfg.full_wait_ns) n->cfg.full_wait_ns = 2000000000ull;
    n->stage = kv_alloc(env, (size_t)NET_EV_MAX * NET_MSG_MAX);
    int p[2] = {-1, -1};
    if (!n->stage || pipe(p) != 0) {
        kv_release(env, n->stage);
        kv_release(env, n);
        return KV_ENOMEM;
    }
    for (int i = 0; i < 2; i++) (void)fcntl(p[i], F_SETFL, fcntl(p[i], F_GETFL, 0) | O_NONBLOCK);
    n->wake_rd = p[0];
    n->wake_wr = p[1];
    pthread_mutex_init(&n->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&n->polled, &ca);
    pthread_condattr_destroy(&ca);
    atomic_init(&n->quit, false);
    atomic_init(&n->sleeping, false);
    n->self = (kvt){.ops = &locked_ops, .impl = n};
    *out = n;
    return KV_OK;
}

kvt *kvp_net_kvt(kvp_net *n) { return &n->self; }

kv_status kvp_net_start(kvp_net *n) {
    if (n->running) return KV_OK;
    atomic_store(&n->quit, false);
    if (pthread_create(&n->thread, NULL, progress_main, n) != 0) return KV_ENOMEM;
    n->running = true;
    return KV_OK;
}

void kvp_net_stop(kvp_net *n) {
    if (!n || !n->running) return;
    atomic_store(&n->quit, true);
    uint8_t one = 1;
    (void)!write(n->wake_wr, &one, 1);
    pthread_join(n->thread, NULL);
    n->running = false;
}

void kvp_net_free(kvp_net *n) {
    if (!n) return;
    kvp_net_stop(n);
    n->cfg.inner->ops->close(n->cfg.inner);
    close(n->wake_rd);
    close(n->wake_wr);
    pthread_mutex_destroy(&n->mu);
    pthread_cond_destroy(&n->polled);
    kv_release(n->env, n->stage);
    kv_release(n->env, n);
}

void kvp_net_counters_get(kvp_net *n, kvp_net_counters *out) {
    *out = (kvp_net_counters){.polls = atomic_load(&n->c_polls), .events = atomic_load(&n->c_events),
                              .sleeps = atomic_load(&n->c_sleeps), .post_retries = atomic_load(&n->c_retries),
                              .full_waits = atomic_load(&n->c_full_waits), .full_fails = atomic_load(&n->c_full_fails)};
}
