/* sim/sweep.h — runs generated scenarios over a seed range and aggregates
 * what the checker saw: violations per invariant (with the first seed of
 * each), armed counts, fault-kind x request-phase coverage, totals. */
#ifndef KVCONN_SIM_SWEEP_H
#define KVCONN_SIM_SWEEP_H

#include <stdint.h>

#include "sim/gen.h"
#include "sim/world.h"

typedef struct sim_sweep {
    uint64_t runs, violations, sim_errors;
    uint64_t by_inv[KV_INV_COUNT];
    uint64_t first_seed[KV_INV_COUNT];   /* valid where by_inv > 0 */
    uint64_t armed[KV_INV_COUNT];
    uint64_t fault_phase[SIM_F_KIND_COUNT][KV_PH_COUNT];
    uint64_t reach[SIM_R_COUNT];         /* rare combinations reached (sim_reach) */
    uint64_t events, requests;
    uint64_t rejected_loads, store_saves, store_loads; /* store / MultiConnector traffic */
    uint64_t turned_away; /* requests engines refused on arrival */
    uint64_t conn_runs[KV_CONN_KIND_COUNT];             /* runs whose P engines used each configuration */
    uint64_t first_violation_seed;       /* UINT64_MAX if none */
    sim_result first;                    /* the first violation's result */
} sim_sweep;

/* Progress callback (may be NULL): called after each run. */
typedef void (*sim_sweep_progress)(void *ctx, uint64_t done, uint64_t total, const sim_sweep *s);

/* Per-finding callback (may be NULL): called right after each run that
 * violated, with the seed, the generated config that ran and its result
 * (all borrowed for the call). */
typedef void (*sim_sweep_finding)(void *ctx, uint64_t seed, const sim_world_cfg *cfg, const sim_result *r);

typedef struct sim_sweep_hooks {
    sim_sweep_progress progress;
    void *progress_ctx;
    sim_sweep_finding finding;
    void *finding_ctx;
    sim_gen_fn gen;                      /* the workload; NULL: sim_gen */
} sim_sweep_hooks;

void sim_sweep_init(sim_sweep *s);
/* Runs seeds [from, to] (inclusive) with the bug mask; stops at the first
 * violation when stop_at_first. Seeds congruent to shard_i mod shard_n only. */
kv_status sim_sweep_run(sim_world *w, uint64_t from, uint64_t to, uint32_t bugs, bool stop_at_first,
                        uint32_t shard_i, uint32_t shard_n, sim_sweep_progress cb, void *ctx,
                        sim_sweep *out);
/* The same with both callbacks (hooks may be NULL). */
kv_status sim_sweep_run_hooks(sim_world *w, uint64_t from, uint64_t to, uint32_t bugs, bool stop_at_first,
                              uint32_t shard_i, uint32_t shard_n, const sim_sweep_hooks *hooks, sim_sweep *out);

#endif
