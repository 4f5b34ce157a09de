/* fuzz/fuzz_common.h — what the scenario fuzz targets share: turning a
 * decoded scenario into a run a fuzzer can afford, with the bug switch from
 * KVCONN_BUG. Header-only so each target stays one file. */
#ifndef KVCONN_FUZZ_COMMON_H
#define KVCONN_FUZZ_COMMON_H

#include <stdio.h>
#include <stdlib.h>

#include "sim/gen.h"
#include "sim/scenario.h"
#include "sim/world.h"

/* Searchable (sim/gen.h) and the bug switch from the environment only. */
static inline void fuzz_prepare(sim_world_cfg *c, uint32_t bugs) {
    sim_cfg_searchable(c);
    c->bugs = bugs;
}

static inline uint32_t fuzz_bugs_from_env(void) {
    const char *b = getenv("KVCONN_BUG");
    if (!b || !*b) return 0;
    uint32_t bit = kv_bug_parse(b);
    if (!bit) {
        fprintf(stderr, "KVCONN_BUG=%s: unknown bug switch\n", b);
        abort();
    }
    return bit;
}

#endif
