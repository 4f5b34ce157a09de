/* kvsim run — one scenario, from a seed or a file. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "apps/kvsim/kvsim.h"
#include "replay/input.h"
#include "sim/gen.h"
#include "sim/scenario.h"

static const int accepts[] = {KO_SEED, KO_WORKLOAD, KO_BUG, KO_TRACE, KO_TRACE_JSON, KO_TRACE_HASH, KO_KVMEM, KO_END};

/* FILE as kvsim replay loads it: a fuzz_scenario input is prepared as the
 * fuzz target prepares it (--bug standing for the fuzzer's KVCONN_BUG), any
 * other file taken as it decodes with --bug added. */
static int load_file(const kvsim_opts *o, sim_world_cfg *cfg) {
    static replay_input in;
    replay_err err = {0};
    replay_load_opts lo = {.bugs = o->bugs, .fuzz = kvsim_is_fuzz_input(o->file)};
    if (lo.fuzz)
        fprintf(stderr,
                "kvsim run: %s is a fuzz_scenario input (a fuzzer artifact, or no binary scenario header):\n"
                "  running it as the fuzz target ran it, as kvsim replay --fuzz does; --bug stands for the\n"
                "  fuzzer's KVCONN_BUG (none given: every switch off)\n",
                o->file);
    if (replay_input_load(o->file, &lo, &in, &err) != KV_OK) return fprintf(stderr, "%s\n", err.msg), -1;
    *cfg = in.sc.cfg;
    return 0;
}

/* The command that gives this run again. */
static void reproduce(const kvsim_opts *o) {
    kv_cmdline c;
    kv_cmdline_init(&c, kvsim_prog);
    kv_cmdline_add(&c, "run");
    if (o->file) {
        kv_cmdline_add(&c, o->file);
    } else {
        char seed[24];
        snprintf(seed, sizeof seed, "%" PRIu64, o->seed);
        kv_cmdline_add(&c, "--seed");
        kv_cmdline_add(&c, seed);
        if (o->workload && strcmp(o->workload, "faults")) {
            kv_cmdline_add(&c, "--workload");
            kv_cmdline_add(&c, o->workload);
        }
    }
    kvsim_cmdline_bugs(&c, o->bugs);
    if (o->staged) {
        kv_cmdline_add(&c, "--kvmem");
        kv_cmdline_add(&c, "staged");
    }
    kvsim_print_reproduce(&c);
}

/* A corpus file ('bugs none', '# expect-bug NAME INV') ran clean without
 * --bug: say how to run it with its switch. */
static void expect_note(const kvsim_opts *o) {
    kvsim_expect e[8];
    int n = o->file && !o->bugs ? kvsim_read_expect_bugs(o->file, e, 8) : 0;
    for (int i = 0; i < n; i++)
        fprintf(stderr,
                "kvsim run: note: %s:%u expects %s with bug switch %s: kvsim replay %s applies it (or add --bug %s)\n",
                o->file, e[i].line, e[i].inv, kv_bug_name(e[i].bug), o->file, kv_bug_name(e[i].bug));
}

static int check_opts(const kvsim_opts *o) {
    if (!o->have_seed && !o->file)
        return fprintf(stderr, "kvsim run: give --seed N, FILE.kvs or a binary scenario FILE\n"), kvsim_usage("run");
    if (o->have_seed && o->file)
        return fprintf(stderr, "kvsim run: give --seed N or a FILE, not both (got --seed and '%s')\n", o->file),
               EXIT_USAGE;
    if (o->workload && o->file)
        return fprintf(stderr, "kvsim run: --workload applies to --seed only (the file '%s' is the scenario)\n",
                       o->file),
               EXIT_USAGE;
    return EXIT_CLEAN;
}

static void print_verdict(const kvsim_opts *o, const sim_world_cfg *cfg, const sim_result *r) {
    printf("%s%s seed %" PRIu64 ": %" PRIu64 " events, %" PRIu64 " ok / %" PRIu64 " error / %" PRIu64
           " aborted, virtual %.3f s\n",
           o->file ? o->file : "", o->file ? "," : "", o->seed, r->events, r->requests_ok, r->requests_error,
           r->requests_aborted, (double)r->end_ns / 1e9);
    if (o->trace_hash) printf("trace hash %016" PRIx64 "\n", r->trace_hash);
    if (r->violated) {
        kvsim_print_violation(r);
        reproduce(o);
        printf("scenario:\n");
        kvsim_print_cfg(cfg);
    } else if (r->sim_error != KV_OK) {
        printf("simulator resource exhausted: %s\n", kv_status_str(r->sim_error));
    } else {
        printf("clean\n");
        expect_note(o);
    }
}

static int cmd_run(int argc, char **argv) {
    kvsim_opts o;
    int pr = kvsim_parse_opts(argc, argv, "run", accepts, 1, &o);
    if (pr == -2) return EXIT_CLEAN;
    if (pr) return EXIT_USAGE;
    int rc = check_opts(&o);
    if (rc) return rc;
    static sim_world_cfg cfg;
    if (o.file) {
        if (load_file(&o, &cfg)) return EXIT_BAD_INPUT;
        o.seed = cfg.seed;
    } else {
        o.gen(o.seed, o.bugs, &cfg);
    }
    sim_world *w;
    if (sim_world_new(&w) != KV_OK) return fprintf(stderr, "kvsim: out of memory\n"), EXIT_SIM;
    sim_world_set_kvmem(w, o.kvmem);
    sim_result r;
    FILE *json = NULL;
    if (o.trace_json && !(json = kv_cli_open_out(o.trace_json, "w"))) {
        fprintf(stderr, "kvsim run: --trace-json: cannot write %s\n", o.trace_json);
        sim_world_free(w);
        return EXIT_BAD_INPUT;
    }
    sim_world_set_json(w, json);
    kv_status st = sim_world_run(w, &cfg, o.trace ? stdout : NULL, &r);
    if (json) fclose(json);
    sim_world_free(w);
    if (st != KV_OK) return fprintf(stderr, "kvsim run: scenario rejected: %s\n", kv_status_str(st)), EXIT_BAD_INPUT;
    print_verdict(&o, &cfg, &r);
    return kvsim_verdict_code(&r);
}

const kvsim_cmd kvsim_cmd_run = {
    "run",
    "kvsim run (--seed N [--workload faults|steady|load] | FILE.kvs | FILE) [--bug NAME]... [--trace] [--trace-json FILE]\n"
    "         [--trace-hash] [--kvmem host|staged]\n"
    "  Runs one scenario (generated from a seed, a .kvs text file, or any other\n"
    "  file as a binary scenario, taken as it decodes) and reports the checker's\n"
    "  verdict; on a violation prints the command that reproduces it and the\n"
    "  scenario as .kvs text. A fuzz_scenario input (crash-*, AFL++ id:*, or a\n"
    "  file without the binary scenario header) runs as the fuzzer ran it, with\n"
    "  its derived liveness bound, as under kvsim replay --fuzz FILE (said on\n"
    "  stderr). --trace-json - writes the Chrome trace JSON to stdout.\n",
    cmd_run};
