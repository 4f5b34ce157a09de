/* tests/mutant_main.c — the driver of an oracle's mutant test: linked with a
 * mutated copy of one core file (tools/make_mutant.py, tests/mutants/), it
 * runs what the .mut file's `run:` line names and passes only when the
 * first violation is the invariant its `expect:` line names. A check is
 * proven by a bug it catches: each mutant is a plausible bug that the check
 * exists for, made in a copy, never in the core itself.
 *
 *   mutant_NAME tests/mutants/NAME.mut
 *
 * run: steady|faults|load FROM..TO   generated seeds (stops at the first violation)
 * run: file PATH.kvs                 one scenario */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/gen.h"
#include "sim/scenario.h"
#include "sim/sweep.h"
#include "sim/world.h"

static int fail(const char *mut, const char *why) {
    fprintf(stderr, "%s: %s\n", mut, why);
    return 1;
}

int main(int argc, char **argv) {
    if (argc != 2) return fail("mutant", "usage: mutant_NAME tests/mutants/NAME.mut");
    const char *mut = argv[1];
    FILE *f = fopen(mut, "r");
    if (!f) return fail(mut, "cannot open");
    char line[512], run[512] = "", expect[512] = "";
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        if (!strncmp(line, "run: ", 5)) snprintf(run, sizeof run, "%s", line + 5);
        if (!strncmp(line, "expect: ", 8)) snprintf(expect, sizeof expect, "%s", line + 8);
    }
    fclose(f);
    sim_world *w;
    if (sim_world_new(&w) != KV_OK) return fail(mut, "no world");
    sim_result r = {0};
    char what[64], arg[200];
    uint64_t from, to;
    uint64_t runs = 0;
    if (sscanf(run, "file %199s", arg) == 1) {
        static sim_scenario sc;
        sim_parse_error err;
        if (sim_scenario_load(arg, &sc, &err) != KV_OK) return fail(mut, "cannot load its scenario");
        if (sim_world_run(w, &sc.cfg, NULL, &r) != KV_OK) return fail(mut, "the run failed");
        runs = 1;
    } else if (sscanf(run, "%63s %" SCNu64 "..%" SCNu64, what, &from, &to) == 3 && sim_workload_gen(what)) {
        sim_sweep s;
        sim_sweep_init(&s);
        sim_sweep_hooks h = {.gen = sim_workload_gen(what)};
        if (sim_sweep_run_hooks(w, from, to, 0, true, 0, 1, &h, &s) != KV_OK) return fail(mut, "the sweep failed");
        runs = s.runs;
        if (s.violations) r = s.first;
    } else {
        return fail(mut, "bad run: line");
    }
    sim_world_free(w);
    if (!r.violated) {
        fprintf(stderr, "%s: %" PRIu64 " runs of '%s' stayed clean; %s did not fire\n", mut, runs, run, expect);
        return 1;
    }
    printf("%s: %s after %" PRIu64 " runs at event %" PRIu64 ": %s\n", mut, kv_inv_name(r.inv), runs, r.event, r.detail);
    if (strcmp(kv_inv_name(r.inv), expect)) return fail(mut, "a different invariant fired first");
    return 0;
}
