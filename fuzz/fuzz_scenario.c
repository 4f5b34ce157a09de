/* fuzz/fuzz_scenario.c — bytes -> scenario (the total binary decoder) ->
 * simulator run; abort() with the violation and the scenario as .kvs when an
 * invariant breaks. KVCONN_BUG=<switch> fuzzes with a seed bug switched on.
 * libFuzzer entry point; AFL++ builds the same file. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "fuzz/fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static sim_world *w;
    static sim_scenario sc;
    static uint32_t bugs;
    static int ready;
    if (!ready) {
        if (sim_world_new(&w) != KV_OK) abort();
        bugs = fuzz_bugs_from_env();
        ready = 1;
    }
    sim_scenario_from_bytes(data, size, &sc);
    fuzz_prepare(&sc.cfg, bugs);
    sim_result r;
    if (sim_world_run(w, &sc.cfg, NULL, &r) != KV_OK || !r.violated) return 0;
    fprintf(stderr, "VIOLATION %s at event %llu, t=%llu ns, actor %s, request %d: %s\n", kv_inv_name(r.inv),
            (unsigned long long)r.event, (unsigned long long)r.at_ns, r.actor_name, (int)r.req, r.detail);
    static char text[SIM_SCENARIO_TEXT_MAX];
    size_t n = 0;
    sc.cfg.bugs = 0; /* the switch is the environment's, not the scenario's */
    if (sim_scenario_to_text(&sc, text, sizeof text, &n) == KV_OK) fwrite(text, 1, n, stderr);
    abort();
}
