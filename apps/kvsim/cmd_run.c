/* kvsim run — one scenario, from a seed or a .kvs file. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "apps/kvsim/kvsim.h"
#include "sim/gen.h"
#include "sim/scenario.h"

static int cmd_run(int argc, char **argv) {
    kvsim_opts o;
    int pr = kvsim_parse_opts(argc, argv, "run", &o);
    if (pr == -2) return EXIT_CLEAN;
    if (pr) return EXIT_USAGE;
    if (!o.have_seed && !o.file) return fprintf(stderr, "kvsim run: give --seed N, FILE.kvs or a binary scenario FILE\n"), kvsim_usage("run");
    static sim_scenario sc;
    static sim_world_cfg cfg;
    if (o.file) {
        if (kvsim_load_scenario(o.file, &sc)) return EXIT_BAD_INPUT;
        sc.cfg.bugs |= o.bugs;
        cfg = sc.cfg;
        o.seed = cfg.seed;
    } else {
        o.gen(o.seed, o.bugs, &cfg);
    }
    sim_world *w;
    if (sim_world_new(&w) != KV_OK) return fprintf(stderr, "kvsim: out of memory\n"), EXIT_SIM;
    sim_world_set_kvmem(w, o.kvmem);
    sim_result r;
    FILE *json = NULL;
    if (o.trace_json && !(json = fopen(o.trace_json, "w"))) {
        fprintf(stderr, "kvsim run: cannot write %s\n", o.trace_json);
        sim_world_free(w);
        return EXIT_BAD_INPUT;
    }
    sim_world_set_json(w, json);
    kv_status st = sim_world_run(w, &cfg, o.trace ? stdout : NULL, &r);
    if (json) fclose(json);
    if (st != KV_OK) {
        fprintf(stderr, "kvsim run: scenario rejected: %s\n", kv_status_str(st));
        sim_world_free(w);
        return EXIT_BAD_INPUT;
    }
    printf("%s%s seed %" PRIu64 ": %" PRIu64 " events, %" PRIu64 " ok / %" PRIu64 " error / %" PRIu64 " aborted, virtual %.3f s\n",
           o.file ? o.file : "", o.file ? "," : "", o.seed, r.events, r.requests_ok, r.requests_error, r.requests_aborted, (double)r.end_ns / 1e9);
    if (o.trace_hash) printf("trace hash %016" PRIx64 "\n", r.trace_hash);
    if (r.violated) {
        kvsim_print_violation(&r);
        printf("scenario:\n");
        kvsim_print_cfg(&cfg);
    } else if (r.sim_error != KV_OK) {
        printf("simulator resource exhausted: %s\n", kv_status_str(r.sim_error));
    } else {
        printf("clean\n");
    }
    sim_world_free(w);
    return kvsim_verdict_code(&r);
}

const kvsim_cmd kvsim_cmd_run = {
    "run",
    "kvsim run (--seed N [--workload faults|steady|load] | FILE.kvs | FILE) [--bug NAME]... [--trace] [--trace-json FILE] [--trace-hash]\n"
    "         [--kvmem host|staged]\n"
    "  Runs one scenario (generated from a seed, a .kvs text file, or any other\n"
    "  file as a binary scenario, taken as it decodes) and reports the checker's\n"
    "  verdict; on a violation prints the scenario as .kvs text. A fuzz_scenario\n"
    "  input (crash-*, corpus/fuzz_scenario/*) runs as the fuzzer ran it, with its\n"
    "  derived liveness bound, under kvsim replay --fuzz FILE.\n",
    cmd_run};
