/* sim/check.h — the invariant checker: everything a run is checked for, in
 * one place. The world reports what happens through this narrow interface
 * and never checks anything itself; each oracle family lives in a file of
 * its own that opens with the rule it enforces:
 *
 *   sim/check_pool.c     INV-CONSERVE (every event), INV-LEAK (quiescence,
 *                        and the teardown after it)
 *   sim/check_live.c     INV-LIVE and the accounting of every request
 *   sim/check_outcome.c  INV-OUTCOME: how each request should have ended,
 *                        given the faults that touched it (docs/oracles.md)
 *   sim/check_hold.c     INV-HOLD: every hold ends within a bound of the
 *                        event that must end it
 *   sim/check_data.c     INV-DATA at a request's first token: every block
 *                        its attention reads, in every group, is there and
 *                        holds the bytes computed from its tokens
 *   sim/check_cache.c    INV-CACHE: what an engine cached is found by the
 *                        next request with the same prefix
 *   sim/check_saved.c    INV-CACHE, the store's half: what a save was
 *                        handed, and what a producer's finished requests
 *                        must have saved, is in the store at the end
 *   sim/check_grant.c    INV-GRANT: no WRITE reached a node with a wrong
 *                        key, from a peer its grant was not made to, or
 *                        outside the grant's window (the network's check)
 *
 * The core reports what it sees itself (INV-OWNER, INV-STRAY, INV-SAVE, the
 * pulled blocks' INV-DATA, SCHED-ASSERT, INV-ASSERT) through the env's
 * violation callback; the checker counts those as armed from the engines'
 * counters at the end of a run.
 *
 * A new oracle is a new file with its state in check_int.h and its calls in
 * check.c; the world does not change. Owner: the world (one checker per
 * world, reused by every run; nothing here allocates during a run). */
#ifndef KVCONN_SIM_CHECK_H
#define KVCONN_SIM_CHECK_H

#include <stdbool.h>
#include <stdint.h>

#include "core/engine.h"
#include "core/proxy.h"
#include "sim/sim_net.h"
#include "sim/sim_rt.h"
#include "sim/sim_store.h"
#include "sim/world.h"

/* What the oracles may read: the world's, borrowed for the run and read only
 * between events (no actor runs while the checker looks). */
typedef struct sim_check_view {
    const kv_env *env;        /* kv_violate goes through it */
    sim_rt *rt;               /* clock and actor names */
    kv_engine *const *eng;    /* the live process of each engine index (P first) */
    const bool *down;         /* engine i crashed and has no process now */
    uint32_t n_eng;
    const kv_proxy *proxy;
    const sim_store *store;   /* NULL when no engine uses the store */
    const sim_net *net;       /* the network: its grant check's refusals */
    const sim_world_cfg *cfg;
    sim_result *res;          /* armed counters, violation */
} sim_check_view;

typedef struct sim_check sim_check;

kv_status sim_check_new(sim_check **out);
void sim_check_free(sim_check *c);

/* A run starts: the engines of the view are built. */
void sim_check_begin(sim_check *c, const sim_check_view *v);
/* After every handled message (the runtime's hook). */
void sim_check_event(sim_check *c, uint32_t actor, const kv_msg *m);
/* A fault of the plan is being applied now (before its effect). */
void sim_check_fault(sim_check *c, const sim_fault *f);
/* Engine i's process died (before its actors are killed) / a new process
 * of engine i was started. */
void sim_check_engine_down(sim_check *c, uint32_t i);
void sim_check_engine_up(sim_check *c, uint32_t i);
/* The store's new process is up (its new actor). */
void sim_check_store_up(sim_check *c);
/* The clock is about to move to next_ns: deadlines that pass before then
 * are reported at their own time. */
void sim_check_time(sim_check *c, uint64_t next_ns);
/* The run ended: quiescence (timed_out: the liveness bound cut it). */
void sim_check_end(sim_check *c, bool timed_out);
/* After a clean end the world frees every process of the run (the dead
 * ones too) with kv_engine_free, and the bootstrap service with
 * kv_bootstrap_free. Its env records every allocation and who made it; what
 * one teardown's releases did: */
typedef struct sim_teardown_report {
    bool bootstrap;           /* the bootstrap service; else a process of engine `engine` */
    uint32_t engine;
    uint32_t process;         /* the process's number in the run, in start order */
    uint32_t allocs;          /* allocations it made */
    uint32_t left;            /* of those, not released */
    uint64_t left_bytes;
    uint32_t first_left;      /* the first left: its ordinal among allocs, and size */
    uint32_t first_left_bytes;
    uint32_t twice;           /* releases of memory released before */
    uint32_t foreign;         /* releases of an address that is no allocation's start, or another's */
} sim_teardown_report;
void sim_check_teardown(sim_check *c, const sim_teardown_report *t);

#endif
