/* transport/posix/posix_env.h — the production kv_env (include/kvconn/env.h).
 *
 *   now_ns        CLOCK_MONOTONIC
 *   alloc/release calloc/free (start-up only, as the core promises)
 *   random_u64    cfg.seed 0 (production): 8 bytes of getrandom(2), the
 *                 kernel's CSPRNG, per call, so values (the proxy's transfer
 *                 ids) cannot be predicted from earlier ones; cfg.seed non-zero
 *                 (tests): splitmix64 over an atomic counter from that seed,
 *                 reproducible and predictable. Both thread-safe, lock-free.
 *   log           one line per call on stderr, "[tag actor] LEVEL text",
 *                 written with a single write(2) so lines of concurrent
 *                 threads never interleave
 *   violation     logged, counted, and abort() unless cfg.keep_going
 *   current_actor a thread-local set by the runtime (kvp_env_set_actor)
 *
 * Owner: whoever embeds the kvp_env; it must outlive every user of env. */
#ifndef KVCONN_POSIX_ENV_H
#define KVCONN_POSIX_ENV_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "kvconn/env.h"
#include "kvconn/status.h"

typedef struct kvp_env_cfg {
    uint64_t seed;          /* 0: random_u64 from getrandom(2), else a reproducible stream */
    kv_log_level level;     /* lines below it are dropped */
    const char *tag;        /* process tag in each line ("P0", "proxy"); may be NULL */
    bool keep_going;        /* violations are counted, not fatal (tests) */
} kvp_env_cfg;

/* Names actors in log lines; the runtime installs it. */
typedef const char *(*kvp_actor_namer)(void *ctx, uint32_t actor);

typedef struct kvp_env {
    kv_env env;                 /* the vtable handed to the core; ctx = this */
    kvp_env_cfg cfg;
    char tag[16];               /* copy of cfg.tag */
    uint64_t seed;              /* the seed in use (logged at start) */
    _Atomic uint64_t rng;       /* splitmix64 counter */
    bool kernel_random;         /* cfg.seed was 0: random_u64 reads getrandom(2) */
    _Atomic uint64_t violations;
    kvp_actor_namer namer;      /* NULL: actors are printed by id */
    void *namer_ctx;
} kvp_env;

kv_status kvp_env_init(kvp_env *pe, const kvp_env_cfg *cfg);
void kvp_env_set_namer(kvp_env *pe, kvp_actor_namer fn, void *ctx);
/* The actor running on the calling thread (KV_ACTOR_NONE: none). */
void kvp_env_set_actor(uint32_t actor);
uint32_t kvp_env_actor(void);
uint64_t kvp_env_violations(const kvp_env *pe);
/* CLOCK_MONOTONIC in ns, for code that has no env at hand. */
uint64_t kvp_mono_ns(void);
/* Names the calling thread (15 bytes kept; shown by top -H, perf, gdb). */
void kvp_thread_name(const char *name);

#endif
