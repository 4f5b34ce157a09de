/* kvsim replay — rerun one case (a .kvs file, a binary scenario or
 * fuzzer input, or a findings database row) and print its trace; the
 * recorded signature and trace hash must come back bit for bit. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "apps/kvsim/kvsim.h"
#include "replay/check.h"
#include "replay/input.h"

typedef struct replay_opts {
    const char *spec, *trace_json;
    replay_load_opts load;
    int quiet;
} replay_opts;

static int parse(int argc, char **argv, replay_opts *o) {
    memset(o, 0, sizeof *o);
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h"))
            return kvsim_usage("replay"), -2;
        if (!strcmp(a, "--bug")) {
            if (kvsim_take_bug("replay", v, &o->load.bugs)) return -1;
            i++;
        } else if (!strcmp(a, "--trace-json")) {
            if (!v)
                return fprintf(stderr, "kvsim replay: --trace-json needs a file name\n"), -1;
            o->trace_json = v;
            i++;
        } else if (!strcmp(a, "--fuzz"))
            o->load.fuzz = true;
        else if (!strcmp(a, "--min"))
            o->load.minimized = true;
        else if (!strcmp(a, "--quiet"))
            o->quiet = 1;
        else if (a[0] != '-' && !o->spec)
            o->spec = a;
        else
            return fprintf(stderr, "kvsim replay: unknown option '%s' (try --help)\n", a), -1;
    }
    if (!o->spec)
        return fprintf(stderr, "kvsim replay: give FILE.kvs, FILE or db:FILE:ID\n"), -1;
    return 0;
}

/* Prints how the replay compares with what was recorded; returns the exit
 * code (the verdict's, or EXIT_NOT_AS_RECORDED). */
static int judge(const replay_input *in, const sim_result *r) {
    replay_outcome oc =
        replay_compare(in->have_sig, in->signature, in->have_hash, in->trace_hash, r);
    printf("trace hash %016" PRIx64, r->trace_hash);
    if (in->have_hash)
        printf(" (recorded %016" PRIx64 ": %s)", in->trace_hash,
               r->trace_hash == in->trace_hash ? "same" : "DIFFERS");
    printf("\n");
    if (in->have_sig && oc != REPLAY_SAME && oc != REPLAY_DRIFT)
        printf("recorded signature: %s\n", in->signature);
    switch (oc) {
    case REPLAY_SAME:
        return kvsim_verdict_code(r);
    case REPLAY_DRIFT:
        fprintf(stderr,
                "kvsim replay: not bit-for-bit: trace hash %016" PRIx64 ", recorded %016" PRIx64,
                r->trace_hash, in->trace_hash);
        if (in->from_db)
            fprintf(stderr, " by commit %s (this build: %s)", in->info.git_commit,
                    replay_build_commit());
        fprintf(stderr, "\n");
        return EXIT_NOT_AS_RECORDED;
    case REPLAY_OTHER:
        fprintf(stderr, "kvsim replay: violates with another signature than recorded\n");
        return EXIT_NOT_AS_RECORDED;
    case REPLAY_GONE:
        fprintf(stderr, "kvsim replay: runs clean; the recorded violation is gone\n");
        return EXIT_NOT_AS_RECORDED;
    case REPLAY_SIM_ERROR:
        return EXIT_SIM;
    }
    return EXIT_SIM;
}

static int cmd_replay(int argc, char **argv) {
    replay_opts o;
    int pr = parse(argc, argv, &o);
    if (pr == -2)
        return EXIT_CLEAN;
    if (pr)
        return EXIT_USAGE;
    static replay_input in;
    replay_err err = {0};
    if (replay_input_load(o.spec, &o.load, &in, &err) != KV_OK)
        return kvsim_db_fail("replay", &err);
    sim_world *w;
    if (sim_world_new(&w) != KV_OK)
        return fprintf(stderr, "kvsim: out of memory\n"), EXIT_SIM;
    FILE *json = NULL;
    if (o.trace_json && !(json = fopen(o.trace_json, "w"))) {
        fprintf(stderr, "kvsim replay: cannot write %s\n", o.trace_json);
        sim_world_free(w);
        return EXIT_BAD_INPUT;
    }
    sim_world_set_json(w, json);
    sim_result r;
    kv_status st = sim_world_run(w, &in.sc.cfg, o.quiet || json ? NULL : stdout, &r);
    if (json)
        fclose(json);
    sim_world_free(w);
    if (st != KV_OK)
        return fprintf(stderr, "kvsim replay: scenario rejected: %s\n", kv_status_str(st)),
               EXIT_BAD_INPUT;
    if (in.from_db)
        printf("case %" PRId64 " of %s (%s, %s)\n", in.info.id, in.db_path,
               in.info.fixed ? "fixed" : "open", in.info.origin);
    printf("%s: %" PRIu64 " events, %" PRIu64 " ok / %" PRIu64 " error / %" PRIu64
           " aborted, virtual %.3f s\n",
           o.spec, r.events, r.requests_ok, r.requests_error, r.requests_aborted,
           (double)r.end_ns / 1e9);
    if (r.violated)
        kvsim_print_violation(&r);
    else if (r.sim_error != KV_OK)
        printf("simulator resource exhausted: %s\n", kv_status_str(r.sim_error));
    else
        printf("clean\n");
    return judge(&in, &r);
}

const kvsim_cmd kvsim_cmd_replay = {
    "replay",
    "kvsim replay (FILE.kvs | FILE | db:DB:ID) [--min] [--bug NAME]... [--fuzz] [--trace-json "
    "OUT.json] [--quiet]\n"
    "  Reruns one case and prints its text trace (one line per event; with\n"
    "  --trace-json the Chrome trace JSON goes to OUT.json instead; --quiet: no\n"
    "  trace), then the verdict and the trace hash. A database case (db:DB:ID,\n"
    "  --min for its minimized scenario), or a .kvs with '# signature' and\n"
    "  '# trace-hash' lines (kvsim db export writes them), must give the same\n"
    "  signature and trace hash as recorded. FILE without .kvs is a binary\n"
    "  scenario; --fuzz reads it as a fuzz_scenario input (crash-*), prepared\n"
    "  as the target prepares it, with --bug as the fuzzer's KVCONN_BUG.\n"
    "  Exit: the verdict (0 clean, 1 safety, 2 liveness), 10 when it does not\n"
    "  reproduce as recorded, 3 bad input or damaged case, 6/7 database errors.\n",
    cmd_replay};
