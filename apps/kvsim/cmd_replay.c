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

static const int accepts[] = {KO_BUG, KO_TRACE_JSON, KO_FUZZ, KO_MIN, KO_QUIET, KO_END};

static int parse(int argc, char **argv, replay_opts *o) {
    memset(o, 0, sizeof *o);
    kvsim_getopt g;
    kvsim_getopt_init(&g, "replay", accepts, argc, argv);
    int id;
    while ((id = kvsim_getopt_next(&g)) > 0) {
        if (id == KO_BUG && kvsim_take_bug("replay", g.arg, &o->load.bugs))
            return -1;
        o->trace_json = id == KO_TRACE_JSON ? g.arg : o->trace_json;
        o->load.fuzz |= id == KO_FUZZ;
        o->load.minimized |= id == KO_MIN;
        o->quiet |= id == KO_QUIET;
    }
    if (id < 0)
        return id;
    if (kvsim_max_pos(&g, 1))
        return -1;
    if (!g.n_pos)
        return fprintf(stderr, "kvsim replay: give FILE.kvs, FILE or db:FILE:ID\n"), -1;
    o->spec = g.pos[0];
    return 0;
}

/* A .kvs file's '# expect-bug NAME INV' lines (the corpus form): without
 * --bug, the first one's switch is applied and its invariant expected. */
static const kvsim_expect *take_expect(replay_opts *o, kvsim_expect *ex, int max) {
    int n = o->load.fuzz ? 0 : kvsim_read_expect_bugs(o->spec, ex, max);
    if (!n)
        return NULL;
    if (o->load.bugs) {
        fprintf(stderr, "kvsim replay: --bug given: the '# expect-bug' lines of %s are not applied\n", o->spec);
        return NULL;
    }
    o->load.bugs = ex[0].bug;
    printf("applied bug switch %s from %s:%u '# expect-bug %s %s'\n", kv_bug_name(ex[0].bug), o->spec, ex[0].line,
           kv_bug_name(ex[0].bug), ex[0].inv);
    for (int i = 1; i < n; i++)
        printf("  (%s:%u expects %s with %s: kvsim replay %s --bug %s)\n", o->spec, ex[i].line, ex[i].inv,
               kv_bug_name(ex[i].bug), o->spec, kv_bug_name(ex[i].bug));
    return &ex[0];
}

/* The verdict against the expect-bug line applied; rc the verdict so far. */
static int judge_expect(const replay_opts *o, const kvsim_expect *e, const sim_result *r, int rc) {
    if (!e || (rc != EXIT_SAFETY && rc != EXIT_LIVENESS && rc != EXIT_CLEAN))
        return rc;
    if (r->violated && !strcmp(kv_inv_name(r->inv), e->inv))
        return rc;
    fprintf(stderr, "kvsim replay: %s:%u expects %s with %s on; the run %s%s\n", o->spec, e->line, e->inv,
            kv_bug_name(e->bug), r->violated ? "violates " : "runs clean",
            r->violated ? kv_inv_name(r->inv) : "");
    return EXIT_NOT_AS_RECORDED;
}

static void reproduce(const replay_opts *o, uint32_t user_bugs) {
    kv_cmdline c;
    kv_cmdline_init(&c, kvsim_prog);
    kv_cmdline_add(&c, "replay");
    kv_cmdline_add(&c, o->spec);
    if (o->load.minimized)
        kv_cmdline_add(&c, "--min");
    if (o->load.fuzz)
        kv_cmdline_add(&c, "--fuzz");
    kvsim_cmdline_bugs(&c, user_bugs);
    kvsim_print_reproduce(&c);
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
    uint32_t user_bugs = o.load.bugs;
    kvsim_expect ex[8];
    const kvsim_expect *expect = take_expect(&o, ex, 8);
    static replay_input in;
    replay_err err = {0};
    if (replay_input_load(o.spec, &o.load, &in, &err) != KV_OK)
        return kvsim_db_fail("replay", &err);
    sim_world *w;
    if (sim_world_new(&w) != KV_OK)
        return fprintf(stderr, "kvsim: out of memory\n"), EXIT_SIM;
    FILE *json = NULL;
    if (o.trace_json && !(json = kv_cli_open_out(o.trace_json, "w"))) {
        fprintf(stderr, "kvsim replay: --trace-json: cannot write %s\n", o.trace_json);
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
    if (r.violated) {
        kvsim_print_violation(&r);
        reproduce(&o, user_bugs);
    } else if (r.sim_error != KV_OK)
        printf("simulator resource exhausted: %s\n", kv_status_str(r.sim_error));
    else
        printf("clean\n");
    return judge_expect(&o, expect, &r, judge(&in, &r));
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
    "  as the target prepares it, with --bug as the fuzzer's KVCONN_BUG. A .kvs\n"
    "  with '# expect-bug NAME INV' lines (the corpus form) replays with the\n"
    "  first one's switch on (said on the first line; --bug overrides) and must\n"
    "  violate INV. --trace-json - writes the JSON to stdout (the rest to stderr).\n"
    "  Exit: the verdict (0 clean, 1 safety, 2 liveness), 10 when it does not\n"
    "  reproduce as recorded (or expected), 3 bad input or damaged case, 4 usage,\n"
    "  6/7 database errors.\n",
    cmd_replay};
