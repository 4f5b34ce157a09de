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

static int parse(int argc, char **argv, shrink_opts *o) {
    memset(o, 0, sizeof *o);
    o->shrink.keep_blame = true;
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h"))
            return kvsim_usage("shrink"), -2;
        if (!strcmp(a, "--bug")) {
            if (kvsim_take_bug("shrink", v, &o->load.bugs)) return -1;
            i++;
        } else if (!strcmp(a, "-o")) {
            if (!v)
                return fprintf(stderr, "kvsim shrink: -o needs a file name\n"), -1;
            o->out = v;
            i++;
        } else if (!strcmp(a, "--max-runs")) {
            uint64_t n;
            if (kvsim_parse_u64(v, &n) || n < 1 || n > 1000000)
                return fprintf(stderr, "kvsim shrink: --max-runs needs 1..1000000, got '%s'\n",
                               v ? v : ""),
                       -1;
            o->shrink.max_runs = (uint32_t)n;
            i++;
        } else if (!strcmp(a, "--fuzz"))
            o->load.fuzz = true;
        else if (!strcmp(a, "--no-blame"))
            o->shrink.keep_blame = false;
        else if (!strcmp(a, "--no-store"))
            o->no_store = 1;
        else if (a[0] != '-' && !o->spec)
            o->spec = a;
        else
            return fprintf(stderr, "kvsim shrink: unknown option '%s' (try --help)\n", a), -1;
    }
    if (!o->spec)
        return fprintf(stderr, "kvsim shrink: give FILE.kvs, FILE or db:FILE:ID\n"), -1;
    return 0;
}

static int write_kvs(const char *path, const char *from, const sim_scenario *sc,
                     const sim_result *r, const replay_shrink_stats *st) {
    static char text[SIM_SCENARIO_TEXT_MAX];
    size_t n = 0;
    if (sim_scenario_to_text(sc, text, sizeof text, &n) != KV_OK)
        return fprintf(stderr, "kvsim shrink: the result is outside the text format\n"), EXIT_SIM;
    FILE *f = fopen(path, "w");
    if (!f)
        return fprintf(stderr, "kvsim shrink: cannot write %s\n", path), EXIT_BAD_INPUT;
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

static int cmd_shrink(int argc, char **argv) {
    shrink_opts o;
    int pr = parse(argc, argv, &o);
    if (pr == -2)
        return EXIT_CLEAN;
    if (pr)
        return EXIT_USAGE;
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
        rc = write_kvs(o.out, o.spec, &min, &r, &st);
    if (rc == EXIT_CLEAN && o.out)
        printf("wrote %s\n", o.out);
    if (rc == EXIT_CLEAN && in.from_db && !o.no_store)
        rc = store(&in, &min, &r);
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
    "  Exit: 0 done, 3 the input runs clean or is bad, 4 usage, 6-8 database errors.\n",
    cmd_shrink};
