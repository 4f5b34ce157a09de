/* transport/posix/posix_env.c — the production kv_env; see posix_env.h. */
#include "transport/posix/posix_env.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "kvconn/actor.h"
#include "util/huge.h"

static _Thread_local uint32_t tl_actor = KV_ACTOR_NONE;

void kvp_env_set_actor(uint32_t actor) { tl_actor = actor; }
uint32_t kvp_env_actor(void) { return tl_actor; }

void kvp_thread_name(const char *name) {
    char b[16];
    snprintf(b, sizeof b, "%s", name);
    (void)prctl(PR_SET_NAME, (unsigned long)(uintptr_t)b, 0ul, 0ul, 0ul);
}

uint64_t kvp_mono_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t e_now(void *ctx) {
    (void)ctx;
    return kvp_mono_ns();
}

/* Big allocations (the KV block pools, the transport's slabs) are their
 * own 2 MiB-aligned anonymous mappings, advised as transparent huge pages:
 * fewer TLB misses and page faults on the data path (the kernel's socket
 * copies walk these pages too). Zeroed by the kernel, faulted on first use.
 * A small process-wide table remembers them so that release unmaps them. */
#define HUGE_MIN (4u << 20)
#define HUGE_MAX 256u

static pthread_mutex_t huge_mu = PTHREAD_MUTEX_INITIALIZER;
static struct { void *p; size_t n; } huge[HUGE_MAX];

static void *huge_alloc(size_t n) {
    size_t len = 0;
    void *p = kv_huge_map(n, &len);
    if (!p) return NULL;
    pthread_mutex_lock(&huge_mu);
    uint32_t i = 0;
    while (i < HUGE_MAX && huge[i].p) i++;
    if (i < HUGE_MAX) {
        huge[i].p = p;
        huge[i].n = len;
    }
    pthread_mutex_unlock(&huge_mu);
    if (i == HUGE_MAX) { /* table full: unmapped again, the caller gets calloc */
        kv_huge_unmap(p, len);
        return NULL;
    }
    return p;
}

static bool huge_release(void *p) {
    size_t n = 0;
    pthread_mutex_lock(&huge_mu);
    for (uint32_t i = 0; i < HUGE_MAX && !n; i++)
        if (huge[i].p == p) {
            n = huge[i].n;
            huge[i].p = NULL;
        }
    pthread_mutex_unlock(&huge_mu);
    if (n) kv_huge_unmap(p, n);
    return n != 0;
}

static void *e_alloc(void *ctx, size_t n) {
    (void)ctx;
    void *p = n >= HUGE_MIN ? huge_alloc(n) : NULL;
    return p ? p : calloc(1, n ? n : 1);
}

static void e_release(void *ctx, void *p) {
    (void)ctx;
    if (p && !huge_release(p)) free(p);
}

static uint64_t splitmix(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t e_random(void *ctx) {
    kvp_env *pe = ctx;
    uint64_t v;
    if (pe->kernel_random) {
        ssize_t n;
        while ((n = getrandom(&v, sizeof v, 0)) < 0 && errno == EINTR) {
        }
        if (n == (ssize_t)sizeof v) return v;
    }
    /* seeded (tests), or a kernel without getrandom(2): the counter */
    return splitmix(atomic_fetch_add_explicit(&pe->rng, 0x9e3779b97f4a7c15ull, memory_order_relaxed));
}

static const char *level_name(kv_log_level l) {
    switch (l) {
    case KV_LOG_DEBUG: return "DEBUG";
    case KV_LOG_INFO: return "INFO";
    case KV_LOG_WARN: return "WARN";
    case KV_LOG_ERROR: return "ERROR";
    }
    return "?";
}

static void actor_label(const kvp_env *pe, char *out, size_t cap) {
    uint32_t a = tl_actor;
    const char *n = (a != KV_ACTOR_NONE && pe->namer) ? pe->namer(pe->namer_ctx, a) : NULL;
    if (n) snprintf(out, cap, "%s", n);
    else if (a == KV_ACTOR_NONE) snprintf(out, cap, "main");
    else snprintf(out, cap, "actor %#x", a);
}

/* One write(2) per line: concurrent lines never interleave. */
static void write_line(const char *buf, size_t n) {
    while (n > 0) {
        ssize_t w = write(STDERR_FILENO, buf, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return;
        buf += w;
        n -= (size_t)w;
    }
}

KV_FMT_VA(3) static void e_log(void *ctx, kv_log_level lvl, const char *fmt, va_list ap) {
    kvp_env *pe = ctx;
    if (lvl < pe->cfg.level) return;
    char line[1024], who[40];
    actor_label(pe, who, sizeof who);
    int h = snprintf(line, sizeof line, "[%s %s] %s ", pe->tag, who, level_name(lvl));
    if (h < 0) return;
    size_t n = (size_t)h < sizeof line ? (size_t)h : sizeof line - 1;
    int b = vsnprintf(line + n, sizeof line - n, fmt, ap);
    if (b > 0) n += (size_t)b < sizeof line - n ? (size_t)b : sizeof line - n - 1;
    if (n >= sizeof line - 1) n = sizeof line - 2;
    line[n++] = '\n';
    write_line(line, n);
}

static void e_violation(void *ctx, const kv_violation *v) {
    kvp_env *pe = ctx;
    atomic_fetch_add(&pe->violations, 1);
    char line[512], who[40];
    actor_label(pe, who, sizeof who);
    int n = snprintf(line, sizeof line, "[%s %s] VIOLATION %s engine %d req %d: %s\n", pe->tag, who,
                     kv_inv_name(v->inv), (int)v->engine, (int)v->req, v->detail ? v->detail : "");
    if (n > 0) write_line(line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
    if (!pe->cfg.keep_going) abort(); /* production: a broken invariant is not survivable */
}

static uint32_t e_actor(void *ctx) {
    (void)ctx;
    return tl_actor;
}

kv_status kvp_env_init(kvp_env *pe, const kvp_env_cfg *cfg) {
    if (!pe || !cfg) return KV_EINVAL;
    memset(pe, 0, sizeof *pe);
    pe->cfg = *cfg;
    snprintf(pe->tag, sizeof pe->tag, "%s", cfg->tag ? cfg->tag : "kvconn");
    pe->seed = cfg->seed;
    pe->kernel_random = cfg->seed == 0;
    if (pe->seed == 0 && getrandom(&pe->seed, sizeof pe->seed, 0) != (ssize_t)sizeof pe->seed)
        pe->seed = kvp_mono_ns() ^ ((uint64_t)getpid() << 32);
    atomic_init(&pe->rng, pe->seed);
    atomic_init(&pe->violations, 0);
    pe->env = (kv_env){.size = sizeof(kv_env), .ctx = pe, .now_ns = e_now, .alloc = e_alloc,
                       .release = e_release, .random_u64 = e_random, .log = e_log,
                       .violation = e_violation, .current_actor = e_actor};
    return KV_OK;
}

void kvp_env_set_namer(kvp_env *pe, kvp_actor_namer fn, void *ctx) {
    pe->namer = fn;
    pe->namer_ctx = ctx;
}

uint64_t kvp_env_violations(const kvp_env *pe) { return atomic_load(&pe->violations); }
