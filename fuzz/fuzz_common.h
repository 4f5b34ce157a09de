/* fuzz/fuzz_common.h — what the scenario fuzz targets share: turning a
 * decoded scenario into a run a fuzzer can afford, with the bug switch from
 * KVCONN_BUG. Header-only so each target stays one file. */
#ifndef KVCONN_FUZZ_COMMON_H
#define KVCONN_FUZZ_COMMON_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/gen.h"
#include "sim/scenario.h"
#include "sim/world.h"

/* Virtual time one request may need on its own: 64 decode steps of a few
 * ms each, with room for preemption and recompute on a small pool. */
#define FUZZ_LIVE_NS_PER_REQ 2000000000ull

/* Searchable (sim/gen.h), a liveness bound that also covers the workload's
 * own run time, and the bug switch from the environment only.
 * sim_cfg_searchable derives the bound from the timeouts alone; with the
 * 10 ms timeouts a fuzzer likes, ten long requests queued on a 24-block
 * pool outlive (10 + 15.5 ms) x 14 = 357 ms while every one of them
 * finishes, cleanly, by 1.4 s. The floor changes nothing for generated
 * scenarios (their bound is 4.5 s per request already). */
static inline void fuzz_prepare(sim_world_cfg *c, uint32_t bugs) {
    sim_cfg_searchable(c);
    uint64_t floor_ns = (uint64_t)(c->n_reqs + 4u) * FUZZ_LIVE_NS_PER_REQ;
    if (c->live_bound_ns < floor_ns) c->live_bound_ns = floor_ns;
    c->bugs = bugs;
}

/* KVCONN_BUG=<switch>[,<switch>...] (kv_bug_name's names); an unknown name
 * aborts before the first input, so a typo never fuzzes with no bug on. */
static inline uint32_t fuzz_bugs_from_env(void) {
    const char *b = getenv("KVCONN_BUG");
    uint32_t mask = 0;
    while (b && *b) {
        uint32_t bit;
        size_t n;
        const char *rest = kv_bug_list_next(b, &bit, &n);
        if (!bit) {
            fprintf(stderr, "KVCONN_BUG=%s: unknown bug switch '%.*s'\n", getenv("KVCONN_BUG"), (int)n, b);
            abort();
        }
        mask |= bit;
        b = rest;
    }
    return mask;
}

#endif
