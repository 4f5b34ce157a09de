/* kvsim shrink — delta-debug a violating scenario to a minimal one with
 * the same signature (replay/shrink.h), write it as .kvs and, for a
 * database case, store it as the case's minimized scenario. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apps/kvsim/kvsim.h"
#include "replay/db.h"
#include "replay/input.h"
#include "replay/shrink.h"

typedef struct shrink_opts {
    const char *spec, *out;
    replay_load_opts load;
    replay_shrink_opts shrink;
    int no_store;
} shrink_opts;

static const int accepts[] = {KO_OUT, KO_BUG, KO_MAX_RUNS, KO_FUZZ, KO_NO_BLAME, KO_NO_STORE, KO_END};

static int take(const kvsim_getopt *g, int id, shrink_opts *o) {
    uint64_t n;
    switch (id) {
    case KO_BUG:
        return kvsim_take_bug("shrink", g->arg, &o->load.bugs);
    case KO_OUT:
        o->out = g->arg;
        return 0;
    case KO_MAX_RUNS:
        if (kvsim_opt_num(g, 1, 1000000, &n))
            return -1;
        o->shrink.max_runs = (uint32_t)n;
        return 0;
    case KO_FUZZ:
        o->load.fuzz = true;
        return 0;
    case KO_NO_BLAME:
        o->shrink.keep_blame = false;
        return 0;
    case KO_NO_STORE:
        o->no_store = 1;
        return 0;
    default:
        return -1;
    }
}

static int parse(int argc, char **argv, shrink_opts *o) {
    memset(o, 0, sizeof *o);
    o->shrink.keep_blame = true;
    kvsim_getopt g;
    kvsim_getopt_init(&g, "shrink", accepts, argc, argv);
    int id;
    while ((id = kvsim_getopt_next(&g)) > 0)
        if (take(&g, id, o))
            return -1;
    if (id < 0)
        return id;
    if (kvsim_max_pos(&g, 1))
        return -1;
    if (!g.n_pos)
        return fprintf(stderr, "kvsim shrink: give FILE.kvs, FILE or db:FILE:ID\n"), -1;
    o->spec = g.pos[0];
    return 0;
}

/* f: stdout opened before anything was printed (-o -), else NULL. */
static int write_kvs(FILE *f, const char *path, const char *from, const sim_scenario *sc,
                     const sim_result *r, const replay_shrink_stats *st) {
    static char text[SIM_SCENARIO_TEXT_MAX];
    size_t n = 0;
    if (sim_scenario_to_text(sc, text, sizeof text, &n) != KV_OK)
        return fprintf(stderr, "kvsim shrink: the result is outside the text format\n"), EXIT_SIM;
    if (!f)
        f = fopen(path, "w");
    if (!f)
        return fprintf(stderr, "kvsim shrink: -o: cannot write %s\n", path), EXIT_BAD_INPUT;
    fprintf(f, "# shrunk by kvsim shrink from %s: directives %u -> %u in %u runs\n", from,
            st->directives_before, st->directives_after, st->runs);
    fprintf(f, "# signature %s\n# trace-hash %016" PRIx64 "\n", st->signature, r->trace_hash);
    fwrite(text, 1, n, f);
    return fclose(f) ? (fprintf(stderr, "kvsim shrink: cannot write %s\n", path), EXIT_BAD_INPUT)
                     : EXIT_CLEAN;
}

static int store(const replay_input *in, const sim_scenario *min, const sim_result *r) {
    replay_db *db;
    replay_err err = {0};
    kv_status s = replay_db_open(in->db_path, REPLAY_DB_WRITE, &db, &err);
    if (s == KV_OK)
        s = replay_db_set_minimized(db, in->info.id, min, r->trace_hash, &err);
    replay_db_close(db);
    if (s != KV_OK)
        return kvsim_db_fail("shrink", &err);
    printf("stored as the minimized scenario of case %" PRId64 " in %s\n", in->info.id,
           in->db_path);
    return EXIT_CLEAN;
}

/* The command that replays the result: the written .kvs (its 'bugs' line
 * has the switches), else the case's stored minimized scenario. */
static void reproduce(const replay_input *in, const char *out, bool stored) {
    kv_cmdline c;
    char spec[1100];
    kv_cmdline_init(&c, kvsim_prog);
    kv_cmdline_add(&c, "replay");
    if (out && !kv_cli_is_stdout(out)) {
        kv_cmdline_add(&c, out);
    } else if (stored) {
        snprintf(spec, sizeof spec, "db:%s:%" PRId64, in->db_path, in->info.id);
        kv_cmdline_add(&c, spec);
        kv_cmdline_add(&c, "--min");
    } else {
        return;
    }
    kvsim_print_reproduce(&c);
}

static int cmd_shrink(int argc, char **argv) {
    shrink_opts o;
    int pr = parse(argc, argv, &o);
    if (pr == -2)
        return EXIT_CLEAN;
    if (pr)
        return EXIT_USAGE;
    /* -o -: stdout is the .kvs alone from here on */
    FILE *out = kv_cli_is_stdout(o.out) ? kv_cli_open_out(o.out, "w") : NULL;
    if (kv_cli_is_stdout(o.out) && !out)
        return fprintf(stderr, "kvsim shrink: -o: cannot write to stdout\n"), EXIT_BAD_INPUT;
    static replay_input in;
    static sim_scenario min;
    replay_err err = {0};
    if (replay_input_load(o.spec, &o.load, &in, &err) != KV_OK)
        return kvsim_db_fail("shrink", &err);
    if (!in.from_db && !o.out)
        return fprintf(stderr, "kvsim shrink: give -o OUT.kvs\n"), EXIT_USAGE;
    if (!sim_scenario_valid(&in.sc))
        return fprintf(stderr, "kvsim shrink: %s: scenario outside the format's ranges\n", o.spec),
               EXIT_BAD_INPUT;
    sim_world *w;
    if (sim_world_new(&w) != KV_OK)
        return fprintf(stderr, "kvsim: out of memory\n"), EXIT_SIM;
    sim_result r;
    replay_shrink_stats st;
    kv_status s = replay_shrink(w, &in.sc, &o.shrink, &min, &r, &st);
    sim_world_free(w);
    if (s == KV_ENOENT)
        return fprintf(stderr, "kvsim shrink: %s runs clean: nothing to shrink\n", o.spec),
               EXIT_BAD_INPUT;
    if (s != KV_OK)
        return fprintf(stderr, "kvsim shrink: scenario rejected: %s\n", kv_status_str(s)),
               EXIT_BAD_INPUT;
    if (in.from_db && strcmp(st.signature, in.signature))
        fprintf(stderr,
                "kvsim shrink: note: case %" PRId64 " now violates as '%s', recorded '%s'\n",
                in.info.id, st.signature, in.signature);
    printf("signature %s\n", st.signature);
    printf("directives %u -> %u, choice bytes %u -> %u, %u runs (%u kept)%s%s\n",
           st.directives_before, st.directives_after, st.choice_before, st.choice_after, st.runs,
           st.steps, st.blame ? ", each step clean with the bug switches off" : "",
           st.budget_hit ? ", stopped by --max-runs" : "");
    kvsim_print_violation(&r);
    int rc = EXIT_CLEAN;
    if (o.out)
        rc = write_kvs(out, o.out, o.spec, &min, &r, &st);
    if (rc == EXIT_CLEAN && o.out)
        printf("wrote %s\n", kv_cli_is_stdout(o.out) ? "the scenario to stdout" : o.out);
    bool stored = rc == EXIT_CLEAN && in.from_db && !o.no_store;
    if (stored)
        rc = store(&in, &min, &r);
    if (rc == EXIT_CLEAN)
        reproduce(&in, o.out, stored);
    return rc;
}

const kvsim_cmd kvsim_cmd_shrink = {
    "shrink",
    "kvsim shrink (FILE.kvs | FILE | db:DB:ID) [-o OUT.kvs] [--bug NAME]... [--fuzz] [--max-runs "
    "N] [--no-blame] [--no-store]\n"
    "  Delta debugging over the fault plan, the workload, the KV groups, the\n"
    "  topology and the choice stream, down to a scenario that still violates\n"
    "  with the same signature; prints 'directives N -> M'. When the input's bug\n"
    "  switches are on and it runs clean without them, every step must keep\n"
    "  that (--no-blame drops the check). -o writes the result as .kvs (with\n"
    "  '# signature' and '# trace-hash' lines); a database case also gets it\n"
    "  stored as its minimized scenario unless --no-store. At most --max-runs\n"
    "  simulator runs (default 4000). --fuzz and --bug as for kvsim replay.\n"
    "  -o - writes the .kvs to stdout (the rest of the output to stderr).\n"
    "  Exit: 0 done, 3 the input runs clean or is bad, 4 usage, 6-8 database errors.\n",
    cmd_shrink};
