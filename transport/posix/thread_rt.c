/* transport/posix/thread_rt.c — threaded actor runtime; see thread_rt.h.
 *
 * Lock order (never taken the other way round):
 *   timer lock (tmu) -> actor mailbox lock (mu) ; tmu -> bridge lock (br.mu)
 *   world lock (wmu) is taken alone.
 * An actor's own mailbox lock is held only to pop one message; handlers run
 * with no runtime lock held. */
#include "transport/posix/rt_impl.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kvconn/limits.h"
#include "transport/posix/posix_env.h"

#define K_CALL 0x7e100001u /* payload: struct call* (runtime-internal) */
#define K_PARK 0x7e100002u /* park until the stop-the-world ends */
#define TIMER_INLINE 64u
#define TIMER_RETRY_NS 1000000ull
#define PARK_POST_TRIES 100000u

typedef struct mbox_hdr {
    uint32_t kind, src, len;
} mbox_hdr;

typedef struct kvp_timer {
    uint64_t at_ns, seq;
    uint32_t to, kind, src, len;
    uint32_t big;              /* big slot, or KVP_NONE when inline */
    uint8_t inl[TIMER_INLINE];
} kvp_timer;

typedef struct call {
    kvp_call_fn fn;
    void *arg;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool done;
    kv_status st;
} call;

static uint32_t align4(uint32_t n) { return (n + 3u) & ~3u; }

static void abs_deadline(struct timespec *ts, uint64_t at_ns) {
    ts->tv_sec = (time_t)(at_ns / 1000000000ull);
    ts->tv_nsec = (long)(at_ns % 1000000000ull);
}

static void cond_init_mono(pthread_cond_t *cv) {
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(cv, &ca);
    pthread_condattr_destroy(&ca);
}

static void sleep_ns(uint64_t ns) {
    struct timespec ts = {.tv_sec = (time_t)(ns / 1000000000ull), .tv_nsec = (long)(ns % 1000000000ull)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {}
}

/* ---- mailboxes ------------------------------------------------------------------ */

static void ring_write(kvp_actor *a, uint32_t at, const void *src, uint32_t n) {
    uint32_t first = a->cap - at < n ? a->cap - at : n;
    memcpy(a->ring + at, src, first);
    memcpy(a->ring, (const uint8_t *)src + first, n - first);
}

static void ring_read(const kvp_actor *a, uint32_t at, void *dst, uint32_t n) {
    uint32_t first = a->cap - at < n ? a->cap - at : n;
    memcpy(dst, a->ring + at, first);
    memcpy((uint8_t *)dst + first, a->ring, n - first);
}

static kvp_actor *local_actor(kvp_rt *rt, uint32_t id) {
    if (KVP_ACTOR_PROC(id) != rt->cfg.proc) return NULL;
    uint32_t i = KVP_ACTOR_INDEX(id);
    return i < atomic_load_explicit(&rt->n_actors, memory_order_acquire) ? &rt->actor[i] : NULL;
}

kv_status kvp_mbox_push(kvp_rt *rt, uint32_t to, uint32_t kind, uint32_t src, const void *p, uint32_t len) {
    kvp_actor *a = local_actor(rt, to);
    if (!a || len > KV_MSG_PAYLOAD_MAX || (len && !p)) return KV_EINVAL;
    uint32_t need = (uint32_t)sizeof(mbox_hdr) + align4(len);
    pthread_mutex_lock(&a->mu);
    if (a->quit || a->used + need > a->cap) {
        pthread_mutex_unlock(&a->mu);
        atomic_fetch_add_explicit(&rt->c_full, 1, memory_order_relaxed);
        return a->quit ? KV_ECANCELED : KV_EFULL;
    }
    mbox_hdr h = {kind, src, len};
    uint32_t tail = (a->head + a->used) % a->cap;
    ring_write(a, tail, &h, sizeof h);
    if (len) ring_write(a, (tail + (uint32_t)sizeof h) % a->cap, p, len);
    a->used += need;
    a->n_msgs++;
    pthread_cond_signal(&a->cv);
    pthread_mutex_unlock(&a->mu);
    return KV_OK;
}

/* Pops one message into a->payload; false when the actor must quit. */
static bool mbox_pop(kvp_actor *a, kv_msg *m) {
    pthread_mutex_lock(&a->mu);
    while (!a->n_msgs && !a->quit) pthread_cond_wait(&a->cv, &a->mu);
    if (a->quit) {
        pthread_mutex_unlock(&a->mu);
        return false;
    }
    mbox_hdr h;
    ring_read(a, a->head, &h, sizeof h);
    if (h.len) ring_read(a, (a->head + (uint32_t)sizeof h) % a->cap, a->payload, h.len);
    uint32_t used = (uint32_t)sizeof h + align4(h.len);
    a->head = (a->head + used) % a->cap;
    a->used -= used;
    a->n_msgs--;
    pthread_mutex_unlock(&a->mu);
    *m = (kv_msg){.kind = h.kind, .src = h.src, .len = h.len, .payload = a->payload};
    return true;
}

static kv_status route(kvp_rt *rt, uint32_t to, uint32_t kind, uint32_t src, const void *p, uint32_t len) {
    if (KVP_ACTOR_PROC(to) == rt->cfg.proc) return kvp_mbox_push(rt, to, kind, src, p, len);
    return kvp_bridge_post(rt, to, kind, src, p, len);
}

/* ---- actor threads ------------------------------------------------------------- */

static void finish_call(call *c, kv_status st) {
    pthread_mutex_lock(&c->mu);
    c->st = st;
    c->done = true;
    pthread_cond_signal(&c->cv);
    pthread_mutex_unlock(&c->mu);
}

static void park(kvp_rt *rt) {
    pthread_mutex_lock(&rt->wmu);
    uint64_t gen = rt->world_gen;
    rt->parked++;
    pthread_cond_broadcast(&rt->wcv);
    while (rt->world_gen == gen) pthread_cond_wait(&rt->wcv, &rt->wmu);
    pthread_mutex_unlock(&rt->wmu);
}

/* Quitting: pending calls fail instead of leaving their callers waiting. */
static void cancel_pending_calls(kvp_actor *a) {
    pthread_mutex_lock(&a->mu);
    while (a->n_msgs) {
        mbox_hdr h;
        ring_read(a, a->head, &h, sizeof h);
        if (h.kind == K_CALL && h.len == sizeof(call *)) {
            call *c;
            ring_read(a, (a->head + (uint32_t)sizeof h) % a->cap, &c, sizeof c);
            finish_call(c, KV_ECANCELED);
        }
        uint32_t used = (uint32_t)sizeof h + align4(h.len);
        a->head = (a->head + used) % a->cap;
        a->used -= used;
        a->n_msgs--;
    }
    pthread_mutex_unlock(&a->mu);
}

static void *actor_main(void *arg) {
    kvp_actor *a = arg;
    kvp_rt *rt = a->rt;
    kv_msg m;
    kvp_env_set_actor(a->id);
    kvp_thread_name(a->name);
    while (mbox_pop(a, &m)) {
        if (m.kind == K_CALL) {
            call *c;
            memcpy(&c, m.payload, sizeof c);
            c->fn(c->arg);
            finish_call(c, KV_OK);
            continue;
        }
        if (m.kind == K_PARK) {
            park(rt);
            continue;
        }
        uint32_t was = atomic_fetch_add(&a->in_handler, 1);
        if (was != 0) { /* two threads in one actor: the runtime is broken */
            kv_logf(rt->env, KV_LOG_ERROR, "thread_rt: actor %s entered twice", a->name);
            abort();
        }
        a->fn(a->self, &m);
        if (a->after) a->after(a->after_arg, &m);
        atomic_fetch_sub(&a->in_handler, 1);
        atomic_fetch_add_explicit(&rt->c_handled, 1, memory_order_relaxed);
    }
    cancel_pending_calls(a);
    kvp_env_set_actor(KV_ACTOR_NONE);
    return NULL;
}

static kv_status start_actor(kvp_rt *rt, kvp_actor *a) {
    a->rt = rt;
    if (pthread_create(&a->thread, NULL, actor_main, a) != 0) return KV_ENOMEM;
    a->started = true;
    return KV_OK;
}

/* ---- timers ---------------------------------------------------------------------- */

static bool t_less(const kvp_timer *a, const kvp_timer *b) {
    return a->at_ns < b->at_ns || (a->at_ns == b->at_ns && a->seq < b->seq);
}

static void t_swap(kvp_timer *h, uint32_t i, uint32_t j) {
    kvp_timer t = h[i];
    h[i] = h[j];
    h[j] = t;
}

static void t_up(kvp_rt *rt, uint32_t i) {
    while (i > 0 && t_less(&rt->heap[i], &rt->heap[(i - 1) / 2])) {
        t_swap(rt->heap, i, (i - 1) / 2);
        i = (i - 1) / 2;
    }
}

static void t_down(kvp_rt *rt, uint32_t i) {
    for (;;) {
        uint32_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < rt->n_timers && t_less(&rt->heap[l], &rt->heap[m])) m = l;
        if (r < rt->n_timers && t_less(&rt->heap[r], &rt->heap[m])) m = r;
        if (m == i) return;
        t_swap(rt->heap, i, m);
        i = m;
    }
}

static const void *t_payload(const kvp_rt *rt, const kvp_timer *t) {
    return t->big == KVP_NONE ? (const void *)t->inl : rt->big + (size_t)t->big * KV_MSG_PAYLOAD_MAX;
}

/* Delivers due timers; returns the earliest pending time (UINT64_MAX: none).
 * Caller holds tmu. */
static uint64_t t_fire_due(kvp_rt *rt) {
    bool warned = false;
    while (rt->n_timers) {
        kvp_timer *t = &rt->heap[0];
        uint64_t now = kvp_mono_ns();
        if (t->at_ns > now) return t->at_ns;
        kv_status st = route(rt, t->to, t->kind, t->src, t_payload(rt, t), t->len);
        if (st == KV_EFULL) { /* never drop a timer: try again shortly */
            atomic_fetch_add_explicit(&rt->c_timer_retries, 1, memory_order_relaxed);
            if (!warned) kv_logf(rt->env, KV_LOG_WARN, "thread_rt: timer for %s delayed: mailbox full",
                                 kvp_rt_actor_name(rt, t->to));
            warned = true;
            t->at_ns = now + TIMER_RETRY_NS;
            t->seq = rt->tseq++;
            t_down(rt, 0);
            continue;
        }
        if (t->big != KVP_NONE) rt->big_free[rt->n_big_free++] = t->big;
        rt->heap[0] = rt->heap[--rt->n_timers];
        t_down(rt, 0);
    }
    return UINT64_MAX;
}

static void *timer_main(void *arg) {
    kvp_rt *rt = arg;
    kvp_thread_name("timers");
    pthread_mutex_lock(&rt->tmu);
    while (!rt->tquit) {
        uint64_t next = t_fire_due(rt);
        if (next == UINT64_MAX) {
            pthread_cond_wait(&rt->tcv, &rt->tmu);
        } else {
            struct timespec ts;
            abs_deadline(&ts, next);
            pthread_cond_timedwait(&rt->tcv, &rt->tmu, &ts);
        }
    }
    pthread_mutex_unlock(&rt->tmu);
    return NULL;
}

/* ---- kv_rt ops ------------------------------------------------------------------- */

static kv_status rt_spawn(kv_rt *iface, const char *name, uint32_t node, kv_actor_fn fn, void *self,
                          uint32_t mailbox_bytes, uint32_t *out_id) {
    kvp_rt *rt = iface->impl;
    (void)node; /* the process is the node that matters here; ranks share it */
    if (!fn || !out_id || mailbox_bytes < 64) return KV_EINVAL;
    pthread_mutex_lock(&rt->mu);
    uint32_t i = atomic_load(&rt->n_actors);
    if (i >= KVP_ACTORS_MAX) {
        pthread_mutex_unlock(&rt->mu);
        return KV_ENOMEM;
    }
    kvp_actor *a = &rt->actor[i];
    a->ring = kv_alloc(rt->env, mailbox_bytes);
    a->payload = kv_alloc(rt->env, KV_MSG_PAYLOAD_MAX);
    if (!a->ring || !a->payload) {
        kv_release(rt->env, a->ring);
        kv_release(rt->env, a->payload);
        a->ring = a->payload = NULL;
        pthread_mutex_unlock(&rt->mu);
        return KV_ENOMEM;
    }
    snprintf(a->name, sizeof a->name, "%s", name ? name : "actor");
    a->rt = rt;
    a->id = KVP_ACTOR_ID(rt->cfg.proc, i);
    a->fn = fn;
    a->self = self;
    a->cap = mailbox_bytes;
    pthread_mutex_init(&a->mu, NULL);
    pthread_cond_init(&a->cv, NULL);
    atomic_init(&a->in_handler, 0);
    atomic_store_explicit(&rt->n_actors, i + 1, memory_order_release);
    kv_status st = rt->started ? start_actor(rt, a) : KV_OK;
    pthread_mutex_unlock(&rt->mu);
    *out_id = a->id;
    return st;
}

static kv_status rt_post(kv_rt *iface, uint32_t to, uint32_t kind, const void *p, uint32_t len) {
    kvp_rt *rt = iface->impl;
    if (len > KV_MSG_PAYLOAD_MAX || (len && !p)) return KV_EINVAL;
    return route(rt, to, kind, kvp_env_actor(), p, len);
}

static kv_status rt_post_at(kv_rt *iface, uint32_t to, uint64_t at_ns, uint32_t kind, const void *p,
                            uint32_t len) {
    kvp_rt *rt = iface->impl;
    if (len > KV_MSG_PAYLOAD_MAX || (len && !p)) return KV_EINVAL;
    uint32_t src = kvp_env_actor();
    if (at_ns <= kvp_mono_ns()) { /* due already: a plain post keeps it FIFO with others */
        kv_status st = route(rt, to, kind, src, p, len);
        if (st != KV_EFULL) return st;
    }
    pthread_mutex_lock(&rt->tmu);
    kv_status st = KV_OK;
    if (rt->n_timers >= rt->cfg.timers_max || (len > TIMER_INLINE && rt->n_big_free == 0)) {
        st = KV_EFULL;
    } else {
        kvp_timer *t = &rt->heap[rt->n_timers];
        *t = (kvp_timer){.at_ns = at_ns, .seq = rt->tseq++, .to = to, .kind = kind, .src = src, .len = len,
                         .big = KVP_NONE};
        if (len > TIMER_INLINE) t->big = rt->big_free[--rt->n_big_free];
        if (len) memcpy((void *)t_payload(rt, t), p, len);
        t_up(rt, rt->n_timers++);
        pthread_cond_signal(&rt->tcv);
    }
    pthread_mutex_unlock(&rt->tmu);
    if (st != KV_OK) {
        atomic_fetch_add_explicit(&rt->c_full, 1, memory_order_relaxed);
        kv_logf(rt->env, KV_LOG_ERROR, "thread_rt: timer table full (%u)", rt->cfg.timers_max);
    }
    return st;
}

static const kv_rt_ops thread_rt_ops = {
    .size = sizeof(kv_rt_ops), .spawn = rt_spawn, .post = rt_post, .post_at = rt_post_at};

/* ---- lifetime ---------------------------------------------------------------------- */

kv_status kvp_rt_new(const kv_env *env, const kvp_rt_cfg *cfg, kvp_rt **out) {
    if (!env || !cfg || !out || cfg->proc >= KVP_PROCS_MAX) return KV_EINVAL;
    kvp_rt *rt = kv_alloc(env, sizeof *rt);
    if (!rt) return KV_ENOMEM;
    memset(rt, 0, sizeof *rt);
    rt->env = env;
    rt->cfg = *cfg;
    if (!rt->cfg.timers_max) rt->cfg.timers_max = 4096;
    if (!rt->cfg.timer_big_max) rt->cfg.timer_big_max = 64;
    rt->heap = kv_alloc(env, sizeof(kvp_timer) * rt->cfg.timers_max);
    rt->big = kv_alloc(env, (size_t)rt->cfg.timer_big_max * KV_MSG_PAYLOAD_MAX);
    rt->big_free = kv_alloc(env, sizeof(uint32_t) * rt->cfg.timer_big_max);
    if (!rt->heap || !rt->big || !rt->big_free) {
        kv_release(env, rt->heap);
        kv_release(env, rt->big);
        kv_release(env, rt->big_free);
        kv_release(env, rt);
        return KV_ENOMEM;
    }
    for (uint32_t i = 0; i < rt->cfg.timer_big_max; i++) rt->big_free[i] = i;
    rt->n_big_free = rt->cfg.timer_big_max;
    atomic_init(&rt->n_actors, 0);
    pthread_mutex_init(&rt->mu, NULL);
    pthread_mutex_init(&rt->tmu, NULL);
    cond_init_mono(&rt->tcv);
    pthread_mutex_init(&rt->wmu, NULL);
    pthread_cond_init(&rt->wcv, NULL);
    pthread_mutex_init(&rt->world_serial, NULL);
    rt->iface = (kv_rt){.ops = &thread_rt_ops, .env = env, .impl = rt};
    kvp_bridge_init(rt);
    *out = rt;
    return KV_OK;
}

kv_rt *kvp_rt_iface(kvp_rt *rt) { return &rt->iface; }

kv_status kvp_rt_start(kvp_rt *rt) {
    kv_status st = KV_OK;
    pthread_mutex_lock(&rt->mu);
    if (!rt->started) {
        rt->started = true;
        if (pthread_create(&rt->tthread, NULL, timer_main, rt) == 0) rt->trunning = true;
        else st = KV_ENOMEM;
        uint32_t n = atomic_load(&rt->n_actors);
        for (uint32_t i = 0; i < n && st == KV_OK; i++) st = start_actor(rt, &rt->actor[i]);
    }
    pthread_mutex_unlock(&rt->mu);
    return st;
}

void kvp_rt_stop(kvp_rt *rt) {
    if (!rt) return;
    kvp_bridge_stop(rt);
    pthread_mutex_lock(&rt->tmu);
    rt->tquit = true;
    pthread_cond_signal(&rt->tcv);
    pthread_mutex_unlock(&rt->tmu);
    if (rt->trunning) pthread_join(rt->tthread, NULL);
    rt->trunning = false;
    uint32_t n = atomic_load(&rt->n_actors);
    for (uint32_t i = 0; i < n; i++) {
        kvp_actor *a = &rt->actor[i];
        pthread_mutex_lock(&a->mu);
        a->quit = true;
        pthread_cond_signal(&a->cv);
        pthread_mutex_unlock(&a->mu);
    }
    for (uint32_t i = 0; i < n; i++) {
        if (rt->actor[i].started) pthread_join(rt->actor[i].thread, NULL);
        rt->actor[i].started = false;
    }
}

void kvp_rt_free(kvp_rt *rt) {
    if (!rt) return;
    kvp_rt_stop(rt);
    kvp_bridge_deinit(rt);
    uint32_t n = atomic_load(&rt->n_actors);
    for (uint32_t i = 0; i < n; i++) {
        kv_release(rt->env, rt->actor[i].ring);
        kv_release(rt->env, rt->actor[i].payload);
        pthread_mutex_destroy(&rt->actor[i].mu);
        pthread_cond_destroy(&rt->actor[i].cv);
    }
    kv_release(rt->env, rt->heap);
    kv_release(rt->env, rt->big);
    kv_release(rt->env, rt->big_free);
    kv_release(rt->env, rt);
}

kv_status kvp_rt_set_after(kvp_rt *rt, uint32_t actor, kvp_after_fn fn, void *arg) {
    kvp_actor *a = local_actor(rt, actor);
    if (!a) return KV_EINVAL;
    pthread_mutex_lock(&rt->mu);
    kv_status st = a->started ? KV_EINVAL : KV_OK; /* the thread's creation publishes the hook */
    if (st == KV_OK) {
        a->after = fn;
        a->after_arg = arg;
    }
    pthread_mutex_unlock(&rt->mu);
    return st;
}

/* ---- calls and stop-the-world ----------------------------------------------------- */

kv_status kvp_rt_call(kvp_rt *rt, uint32_t actor, kvp_call_fn fn, void *arg) {
    kvp_actor *a = local_actor(rt, actor);
    if (!a || !fn) return KV_EINVAL;
    if (kvp_env_actor() == actor) {
        fn(arg);
        return KV_OK;
    }
    call c = {.fn = fn, .arg = arg, .done = false, .st = KV_OK};
    pthread_mutex_init(&c.mu, NULL);
    pthread_cond_init(&c.cv, NULL);
    call *cp = &c;
    kv_status st;
    for (uint32_t tries = 0; (st = kvp_mbox_push(rt, actor, K_CALL, KV_ACTOR_NONE, &cp, sizeof cp)) == KV_EFULL &&
                             tries < PARK_POST_TRIES;
         tries++)
        sleep_ns(100000);
    if (st == KV_OK) {
        pthread_mutex_lock(&c.mu);
        while (!c.done) pthread_cond_wait(&c.cv, &c.mu);
        st = c.st;
        pthread_mutex_unlock(&c.mu);
    }
    pthread_mutex_destroy(&c.mu);
    pthread_cond_destroy(&c.cv);
    return st;
}

kv_status kvp_rt_stop_world(kvp_rt *rt, kvp_call_fn fn, void *arg) {
    if (!fn) return KV_EINVAL;
    pthread_mutex_lock(&rt->world_serial);
    uint32_t me = kvp_env_actor(), want = 0;
    uint32_t n = atomic_load(&rt->n_actors);
    kv_status st = KV_OK;
    for (uint32_t i = 0; i < n && st == KV_OK; i++) {
        kvp_actor *a = &rt->actor[i];
        if (!a->started || a->id == me) continue;
        for (uint32_t tries = 0; (st = kvp_mbox_push(rt, a->id, K_PARK, KV_ACTOR_NONE, NULL, 0)) == KV_EFULL &&
                                 tries < PARK_POST_TRIES;
             tries++)
            sleep_ns(100000);
        if (st == KV_OK) want++;
    }
    pthread_mutex_lock(&rt->wmu);
    while (rt->parked < want) pthread_cond_wait(&rt->wcv, &rt->wmu);
    pthread_mutex_unlock(&rt->wmu);
    if (st == KV_OK) fn(arg); /* every other actor is between two messages */
    pthread_mutex_lock(&rt->wmu);
    rt->parked = 0;
    rt->world_gen++;
    pthread_cond_broadcast(&rt->wcv);
    pthread_mutex_unlock(&rt->wmu);
    pthread_mutex_unlock(&rt->world_serial);
    return st;
}

/* ---- names ------------------------------------------------------------------------- */

void kvp_rt_set_remote_filter(kvp_rt *rt, kvp_rt_remote_fn fn, void *ctx) {
    rt->remote_ok = fn;
    rt->remote_ctx = ctx;
}

void kvp_rt_set_waiting(kvp_rt *rt, kvp_rt_waiting_fn fn, void *ctx) {
    rt->waiting = fn;
    rt->waiting_ctx = ctx;
}

void kvp_rt_report_wait(kvp_rt *rt, const char *what, uint64_t t0, uint64_t until, uint64_t *next) {
    uint64_t now = kvp_mono_ns();
    if (!rt->waiting || now < *next) return;
    rt->waiting(rt->waiting_ctx, what, (now - t0) / 1000000u, (until - t0) / 1000000u);
    *next = now + 1000000000ull;
}

kv_status kvp_rt_lookup(kvp_rt *rt, const char *name, uint64_t timeout_ns, uint32_t *out) {
    if (!name || !out) return KV_EINVAL;
    uint32_t n = atomic_load_explicit(&rt->n_actors, memory_order_acquire);
    for (uint32_t i = 0; i < n; i++)
        if (strncmp(rt->actor[i].name, name, KVP_NAME_MAX) == 0) {
            *out = rt->actor[i].id;
            return KV_OK;
        }
    uint64_t t0 = kvp_mono_ns(), until = t0 + timeout_ns, next = t0 + 1000000000ull;
    char what[KVP_NAME_MAX + 48];
    snprintf(what, sizeof what, "actor %s (its process has not connected, or not published it yet)", name);
    struct timespec ts;
    kv_status st = KV_ENOENT;
    pthread_mutex_lock(&rt->br.mu);
    for (;;) {
        if (kvp_bridge_find_locked(rt, name, out)) {
            st = KV_OK;
            break;
        }
        if (kvp_mono_ns() >= until) break;
        kvp_rt_report_wait(rt, what, t0, until, &next);
        abs_deadline(&ts, next < until ? next : until);
        pthread_cond_timedwait(&rt->br.cv, &rt->br.mu, &ts);
    }
    pthread_mutex_unlock(&rt->br.mu);
    return st;
}

const char *kvp_rt_actor_name(kvp_rt *rt, uint32_t actor) {
    if (KVP_ACTOR_PROC(actor) != rt->cfg.proc) return actor == KV_ACTOR_NONE ? "main" : "remote";
    kvp_actor *a = local_actor(rt, actor);
    return a ? a->name : "?";
}

void kvp_rt_counters_get(kvp_rt *rt, kvp_rt_counters *out) {
    *out = (kvp_rt_counters){
        .handled = atomic_load(&rt->c_handled), .full = atomic_load(&rt->c_full),
        .unreachable = atomic_load(&rt->c_unreachable), .timer_retries = atomic_load(&rt->c_timer_retries),
        .bridge_in = atomic_load(&rt->c_in), .bridge_out = atomic_load(&rt->c_out),
        .link_losses = atomic_load(&rt->c_losses), .bridge_refused = atomic_load(&rt->c_refused),
        .bridge_auth_failed = atomic_load(&rt->c_auth_failed)};
}
