/* replay/shrink.h — delta debugging of a violating scenario down to a
 * small one that still violates with the same signature.
 *
 * Passes, repeated until a whole round removes nothing (or the run budget
 * is spent), each candidate re-run and kept only when it violates with the
 * same signature (replay/signature.h):
 *   1. faults     ddmin (Zeller's complement steps, granularity doubling)
 *   2. requests   ddmin; abort faults follow their request (dropped with
 *                 it, renumbered otherwise)
 *   3. groups     each non-first KV group removed in turn
 *   4. topology   n_p, n_d toward 1; TP, block size, pools, policy,
 *                 prefix caching, connector kinds and store capacity to
 *                 sim_world_cfg_default's values
 *   5. requests   each field to its default (prompt 16, max 4, no prefix,
 *                 concurrent, no d_extra)
 *   6. choices    the choice stream cut to nothing, then halved, then
 *                 zeroed in eighths
 * Timeouts and the liveness bound are never touched: a shorter bound can
 * make a healthy run look stuck, and the signature alone cannot tell.
 * With keep_blame and a scenario whose bug switches are on but which runs
 * clean with them off, a candidate must also still run clean with them
 * off: the shrunk scenario stays a regression test for that switch.
 *
 * Deterministic: the same input and options give the same output. */
#ifndef KVCONN_REPLAY_SHRINK_H
#define KVCONN_REPLAY_SHRINK_H

#include <stdbool.h>
#include <stdint.h>

#include "replay/signature.h"
#include "sim/scenario.h"
#include "sim/world.h"

#define REPLAY_SHRINK_RUNS_DEFAULT 4000u

typedef struct replay_shrink_opts {
    uint32_t max_runs; /* simulator runs at most (0: REPLAY_SHRINK_RUNS_DEFAULT) */
    bool keep_blame;   /* see above */
} replay_shrink_opts;

typedef struct replay_shrink_stats {
    uint32_t runs;  /* simulator runs spent */
    uint32_t steps; /* candidates kept */
    uint32_t directives_before, directives_after;
    uint32_t choice_before, choice_after;
    bool blame;      /* keep_blame was in force */
    bool budget_hit; /* stopped by max_runs */
    char signature[REPLAY_SIG_MAX];
} replay_shrink_stats;

/* in must be valid. out: the smallest scenario found (in itself when
 * nothing could go); out_r its result. KV_ENOENT: in does not violate;
 * other statuses: the simulator rejected it. */
kv_status replay_shrink(sim_world *w, const sim_scenario *in, const replay_shrink_opts *o,
                        sim_scenario *out, sim_result *out_r, replay_shrink_stats *st);

#endif
