/* kvconn/env.h — the environment vtable.
 *
 * core/ may not call malloc, time, rand, threads or sockets. Everything it
 * needs from the world comes through this table, so the same core runs inside
 * the deterministic simulator (virtual clock, seeded PRNG, arena) and in
 * production (CLOCK_MONOTONIC, libc heap, real threads).
 *
 * Allocation happens only at start-up (pools are sized from limits.h); the
 * hot path never calls alloc. */
#ifndef KVCONN_ENV_H
#define KVCONN_ENV_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Marks a function taking (fmt, va_list) at argument i, for -Wformat=2. */
#if defined(__GNUC__)
#define KV_FMT_VA(i) __attribute__((format(printf, i, 0)))
#else
#define KV_FMT_VA(i)
#endif

typedef enum kv_log_level { KV_LOG_DEBUG, KV_LOG_INFO, KV_LOG_WARN, KV_LOG_ERROR } kv_log_level;

/* Invariants of DESIGN.md section 7 plus the engine scheduler's own
 * assertions. The core reports what it detects itself (owner checks,
 * scheduler asserts); the simulator's checker reports the rest. */
typedef enum kv_inv {
    KV_INV_CONSERVE,
    KV_INV_LEAK,
    KV_INV_STRAY,
    KV_INV_LIVE,
    KV_INV_OWNER,
    KV_INV_SAVE,
    KV_INV_DATA,
    KV_INV_SCHED_ASSERT,
    KV_INV_OUTCOME,  /* a request ended otherwise than the faults that touched it allow */
    KV_INV_HOLD,     /* a resource was held past the bound after the event that must end it */
    KV_INV_ASSERT,   /* an assertion inside the core failed */
    KV_INV_CACHE,    /* a prefix an engine had cached was not found by a later request */
    KV_INV_GRANT,    /* a WRITE with a wrong key, from another peer or outside its grant's window */
    KV_INV_COUNT
} kv_inv;

const char *kv_inv_name(kv_inv inv);

/* What the core knows about a violation when it sees one. */
typedef struct kv_violation {
    kv_inv inv;          /* which invariant */
    uint32_t actor;      /* actor running when it was seen */
    uint32_t engine;     /* engine index, or UINT32_MAX */
    uint32_t req;        /* request id, or UINT32_MAX */
    const char *detail;  /* static or env-owned text; valid during the call */
} kv_violation;

typedef struct kv_env kv_env;

struct kv_env {
    size_t size; /* sizeof(kv_env); first so the table can grow */
    void *ctx;   /* backend state; owned by whoever built the env */
    /* Monotonic time in nanoseconds (virtual in the simulator). */
    uint64_t (*now_ns)(void *ctx);
    /* Start-up allocation, zeroed. NULL on exhaustion. */
    void *(*alloc)(void *ctx, size_t bytes);
    /* NULL-safe. The simulator's arena ignores it (it rewinds per run). */
    void (*release)(void *ctx, void *ptr);
    /* Deterministic in the simulator (one seed, sub-seeded per consumer). */
    uint64_t (*random_u64)(void *ctx);
    void (*log)(void *ctx, kv_log_level level, const char *fmt, va_list ap);
    /* A violation detected by the core. Production aborts; the simulator
     * records it and stops the run at the end of the current event. */
    void (*violation)(void *ctx, const kv_violation *v);
    /* The actor now running on this thread (for owner checks). */
    uint32_t (*current_actor)(void *ctx);
    /* Start-up allocation whose bytes are unspecified: scratch its owner
     * always writes before it reads (codec messages, encode buffers). May be
     * NULL (then alloc serves it); the simulator does not zero it per run. */
    void *(*alloc_scratch)(void *ctx, size_t bytes);
};

static inline uint64_t kv_now_ns(const kv_env *e) { return e->now_ns(e->ctx); }
static inline void *kv_alloc(const kv_env *e, size_t n) { return e->alloc(e->ctx, n); }
static inline void *kv_alloc_scratch(const kv_env *e, size_t n) {
    bool has = e->size >= offsetof(kv_env, alloc_scratch) + sizeof e->alloc_scratch && e->alloc_scratch;
    return has ? e->alloc_scratch(e->ctx, n) : e->alloc(e->ctx, n);
}
static inline void kv_release(const kv_env *e, void *p) { e->release(e->ctx, p); }
static inline uint64_t kv_random_u64(const kv_env *e) { return e->random_u64(e->ctx); }
static inline uint32_t kv_current_actor(const kv_env *e) { return e->current_actor(e->ctx); }

#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
void kv_logf(const kv_env *e, kv_log_level level, const char *fmt, ...);

/* Report a violation; formats detail into a bounded buffer. */
#if defined(__GNUC__)
__attribute__((format(printf, 5, 6)))
#endif
void kv_violate(const kv_env *e, kv_inv inv, uint32_t engine, uint32_t req, const char *fmt, ...);

#endif
