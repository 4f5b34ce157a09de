/* kvsim db — the findings database (replay/db.h) from the command line:
 * import, add, list, show, verify, merge, export, mark, migrate. Each
 * action is one function below; cmd_db dispatches on the action name. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "apps/kvsim/kvsim.h"
#include "replay/check.h"
#include "replay/db.h"
#include "replay/finding.h"
#include "replay/import.h"
#include "replay/input.h"

int kvsim_db_fail(const char *cmd, const replay_err *e) {
    fprintf(stderr, "kvsim %s: %s\n", cmd, e->msg[0] ? e->msg : "database error");
    switch (e->kind) {
    case REPLAY_E_CORRUPT:
        return EXIT_DB_CORRUPT;
    case REPLAY_E_VERSION:
        return EXIT_DB_VERSION;
    case REPLAY_E_READONLY:
        return EXIT_DB_READONLY;
    case REPLAY_E_IO:
        return EXIT_DB_CORRUPT;
    case REPLAY_E_NONE:
    case REPLAY_E_BAD_CASE:
    case REPLAY_E_FORMAT:
    case REPLAY_E_NOT_FOUND:
    case REPLAY_E_BAD_INPUT:
        return EXIT_BAD_INPUT;
    }
    return EXIT_BAD_INPUT;
}

typedef struct db_opts {
    const char *db; /* --db, else $KVCONN_DB, else REPLAY_DB_DEFAULT */
    const char *action;
    const char *args[KVSIM_POS_MAX]; /* positional arguments after the action */
    int n_args;
    uint32_t bugs;
    int fuzz, runs, mark_fixed, rehash, original, corpus, min;
    uint64_t seen; /* the action-specific options given (bit id - KO_SEED), for the check */
} db_opts;

static const int accepts[] = {KO_DB, KO_BUG, KO_FUZZ, KO_RUNS, KO_MARK_FIXED, KO_REHASH, KO_ORIGINAL,
                              KO_CORPUS, KO_MIN, KO_END};

_Static_assert(KO_VERSION - KO_SEED < 64, "db_opts.seen holds the long-only options");

/* Which of those options each action takes (--db goes with all). */
static const struct {
    const char *action;
    int opts[4];
} action_opts[] = {
    {"import", {KO_BUG, KO_END}},
    {"add", {KO_BUG, KO_FUZZ, KO_END}},
    {"list", {KO_RUNS, KO_END}},
    {"show", {KO_MIN, KO_END}},
    {"verify", {KO_MARK_FIXED, KO_REHASH, KO_END}},
    {"merge", {KO_END}},
    {"export", {KO_ORIGINAL, KO_CORPUS, KO_END}},
    {"mark", {KO_END}},
    {"migrate", {KO_END}},
};

static int take(const kvsim_getopt *g, int id, db_opts *o) {
    if (id == KO_DB) {
        o->db = g->arg;
        return 0;
    }
    o->seen |= 1ull << (id - KO_SEED);
    if (id == KO_BUG)
        return kvsim_take_bug("db", g->arg, &o->bugs);
    o->fuzz |= id == KO_FUZZ;
    o->runs |= id == KO_RUNS;
    o->mark_fixed |= id == KO_MARK_FIXED;
    o->rehash |= id == KO_REHASH;
    o->original |= id == KO_ORIGINAL;
    o->corpus |= id == KO_CORPUS;
    o->min |= id == KO_MIN;
    return 0;
}

/* Every option given applies to the action. */
static int check_action(const db_opts *o) {
    for (size_t a = 0; a < sizeof action_opts / sizeof action_opts[0]; a++) {
        if (strcmp(o->action, action_opts[a].action))
            continue;
        for (int id = KO_SEED; id < KO_VERSION; id++)
            if ((o->seen >> (id - KO_SEED) & 1) && !kvsim_accepts(action_opts[a].opts, id))
                return fprintf(stderr, "kvsim db %s: %s does not apply to 'kvsim db %s' (try kvsim db --help)\n",
                               o->action, kvsim_opt_name(id), o->action),
                       -1;
        return 0;
    }
    return fprintf(stderr, "kvsim db: unknown action '%s' (try kvsim db --help)\n", o->action), -1;
}

static int parse(int argc, char **argv, db_opts *o) {
    memset(o, 0, sizeof *o);
    const char *env = getenv("KVCONN_DB");
    o->db = env && *env ? env : REPLAY_DB_DEFAULT;
    kvsim_getopt g;
    kvsim_getopt_init(&g, "db", accepts, argc, argv);
    int id;
    while ((id = kvsim_getopt_next(&g)) > 0)
        if (take(&g, id, o))
            return -1;
    if (id < 0)
        return id;
    if (!g.n_pos)
        return fprintf(stderr, "kvsim db: give an action (try kvsim db --help)\n"), -1;
    o->action = g.pos[0];
    for (int i = 1; i < g.n_pos; i++)
        o->args[o->n_args++] = g.pos[i];
    return check_action(o);
}

static int want_args(const db_opts *o, int lo, int hi, const char *synopsis) {
    if (o->n_args >= lo && o->n_args <= hi)
        return 0;
    fprintf(stderr, "kvsim db %s: usage: kvsim db [--db FILE] %s\n", o->action, synopsis);
    return -1;
}

static int parse_id(const char *s, int64_t *id) {
    uint64_t v;
    if (kv_cli_u64(s, 1, INT64_MAX, &v))
        return fprintf(stderr, "kvsim db: '%s' is not a case id (a number in 1..%" PRId64 ")\n", s, INT64_MAX), -1;
    *id = (int64_t)v;
    return 0;
}

static void fmt_time(int64_t t, char out[24]) {
    struct tm tm;
    time_t tt = (time_t)t;
    if (!t || !gmtime_r(&tt, &tm))
        snprintf(out, 24, "-");
    else
        strftime(out, 24, "%Y-%m-%d %H:%M:%SZ", &tm);
}

static int open_db(const db_opts *o, replay_open_mode mode, replay_db **db) {
    replay_err err = {0};
    if (replay_db_open(o->db, mode, db, &err) != KV_OK)
        return kvsim_db_fail("db", &err);
    return EXIT_CLEAN;
}

/* The command line as the runs table's config. */
static void join_args(int argc, char **argv, char *buf, size_t cap) {
    size_t n = 0;
    buf[0] = 0;
    for (int i = 1; i < argc && n + 1 < cap; i++)
        n += (size_t)snprintf(buf + n, cap - n, "%s%s", i > 1 ? " " : "", argv[i]);
}

/* "reproduce: kvsim replay db:DB:ID [--min]" */
static void print_reproduce(const db_opts *o, int64_t id, bool min) {
    char spec[1100];
    kv_cmdline c;
    snprintf(spec, sizeof spec, "db:%s:%" PRId64, o->db, id);
    kv_cmdline_init(&c, kvsim_prog);
    kv_cmdline_add(&c, "replay");
    kv_cmdline_add(&c, spec);
    if (min)
        kv_cmdline_add(&c, "--min");
    kvsim_print_reproduce(&c);
}

/* ---- import / add ---------------------------------------------------------------------- */

static const char *const import_words[] = {
    [REPLAY_IMPORT_NEW] = "new case",
    [REPLAY_IMPORT_SEEN] = "known case",
    [REPLAY_IMPORT_DUPLICATE] = "already imported",
    [REPLAY_IMPORT_CLEAN] =
        "runs clean (not recorded; was the fuzzer run with a KVCONN_BUG? pass --bug)",
    [REPLAY_IMPORT_LOST] = "violates only with a liveness bound over " SIM_STR(SIM_LIVE_BOUND_MAX_S) " s (not recorded)",
    [REPLAY_IMPORT_SIM_ERROR] = "simulator error (not recorded)",
};

static void import_note(void *ctx, const char *path, replay_import_what what, int64_t id,
                        const sim_result *r) {
    const db_opts *o = ctx;
    printf("%-60s %s", path, import_words[what]);
    if (id)
        printf(" %" PRId64 ": %s %s", id, kv_inv_name(r->inv), r->detail);
    printf("\n");
    if (id && (what == REPLAY_IMPORT_NEW || what == REPLAY_IMPORT_SEEN))
        print_reproduce(o, id, false);
}

static int db_import(const db_opts *o, int argc, char **argv) {
    if (want_args(o, 1, 64, "import PATH... [--bug NAME]..."))
        return EXIT_USAGE;
    replay_db *db;
    int rc = open_db(o, REPLAY_DB_WRITE, &db);
    if (rc)
        return rc;
    sim_world *w;
    if (sim_world_new(&w) != KV_OK)
        return replay_db_close(db), EXIT_SIM;
    char config[512];
    join_args(argc, argv, config, sizeof config);
    replay_err err = {0};
    int64_t run = 0;
    replay_import_stats st = {0};
    /* one batch: an import that fails part way leaves neither its run nor
     * any of its cases (the lines printed so far say what was read) */
    kv_status s = replay_db_batch_begin(db, &err);
    if (s == KV_OK)
        s = replay_db_run_begin(db, "kvsim db import", config, &run, &err);
    for (int i = 0; s == KV_OK && i < o->n_args; i++)
        s = replay_import(db, run, w, o->args[i], o->bugs, import_note, (void *)o, &st, &err);
    if (s == KV_OK)
        s = replay_db_run_end(db, run, st.inputs, &err);
    if (s == KV_OK)
        s = replay_db_batch_commit(db, &err);
    else
        replay_db_batch_rollback(db);
    sim_world_free(w);
    replay_db_close(db);
    if (s != KV_OK) {
        int rc_fail = kvsim_db_fail("db import", &err);
        fprintf(stderr, "kvsim db import: nothing was recorded (the import was rolled back)\n");
        return rc_fail;
    }
    printf("%" PRIu64 " inputs: %" PRIu64 " new cases, %" PRIu64 " known, %" PRIu64
           " already imported, %" PRIu64 " clean, %" PRIu64 " not recordable\n",
           st.inputs, st.by_what[REPLAY_IMPORT_NEW], st.by_what[REPLAY_IMPORT_SEEN],
           st.by_what[REPLAY_IMPORT_DUPLICATE], st.by_what[REPLAY_IMPORT_CLEAN],
           st.by_what[REPLAY_IMPORT_LOST] + st.by_what[REPLAY_IMPORT_SIM_ERROR]);
    return st.inputs ? EXIT_CLEAN
                     : (fprintf(stderr, "kvsim db import: no inputs found\n"), EXIT_BAD_INPUT);
}

static int db_add(const db_opts *o, int argc, char **argv) {
    if (want_args(o, 1, 1, "add FILE [--bug NAME]... [--fuzz]"))
        return EXIT_USAGE;
    static replay_input in;
    replay_err err = {0};
    replay_load_opts lo = {.bugs = o->bugs, .fuzz = o->fuzz};
    if (replay_input_load(o->args[0], &lo, &in, &err) != KV_OK)
        return kvsim_db_fail("db add", &err);
    sim_world *w;
    if (sim_world_new(&w) != KV_OK)
        return EXIT_SIM;
    sim_result r;
    if (sim_world_run(w, &in.sc.cfg, NULL, &r) != KV_OK || !r.violated) {
        sim_world_free(w);
        return fprintf(stderr, "kvsim db add: %s does not violate: nothing to record\n",
                       o->args[0]),
               EXIT_BAD_INPUT;
    }
    replay_db *db;
    int rc = open_db(o, REPLAY_DB_WRITE, &db);
    if (rc)
        return sim_world_free(w), rc;
    char config[512];
    join_args(argc, argv, config, sizeof config);
    int64_t run = 0;
    replay_recorded rec = {0};
    replay_fit_how how = REPLAY_FIT_SAME;
    replay_source src = {.origin = REPLAY_ORIGIN_MANUAL, .source = o->args[0]};
    kv_status s = replay_db_run_begin(db, "kvsim db add", config, &run, &err);
    if (s == KV_OK)
        s = replay_record_run(db, run, w, &in.sc.cfg, &r, &src, &rec, &how, &err);
    if (s == KV_OK)
        s = replay_db_run_end(db, run, 1, &err);
    sim_world_free(w);
    replay_db_close(db);
    if (s != KV_OK)
        return kvsim_db_fail("db add", &err);
    if (how == REPLAY_FIT_LOST)
        return fprintf(stderr, "kvsim db add: not recordable in the scenario format\n"),
               EXIT_BAD_INPUT;
    printf("case %" PRId64 " (%s): %s %s\n", rec.case_id, rec.is_new ? "new" : "known",
           kv_inv_name(r.inv), r.detail);
    print_reproduce(o, rec.case_id, false);
    return EXIT_CLEAN;
}

/* ---- list / show -------------------------------------------------------------------------- */

static void print_run(void *ctx, const replay_run_info *r) {
    (void)ctx;
    char start[24], end[24];
    fmt_time(r->started_at, start);
    fmt_time(r->ended_at, end);
    printf("%5" PRId64 "  %-16s %-12s v%u  %s .. %s  scenarios %" PRId64 "  findings %" PRId64
           "  new %" PRId64 "  %s\n",
           r->id, r->tool, r->git_commit, r->format_version, start, end, r->scenarios, r->findings,
           r->new_cases, r->config);
}

static int db_list(const db_opts *o) {
    if (want_args(o, 0, 0, "list [--runs]"))
        return EXIT_USAGE;
    replay_db *db;
    int rc = open_db(o, REPLAY_DB_READ, &db);
    if (rc)
        return rc;
    replay_err err = {0};
    kv_status s = KV_OK;
    if (o->runs) {
        printf("%5s  %-16s %-12s fmt %-41s %s\n", "run", "tool", "commit", "started .. ended",
               "counts / config");
        s = replay_db_each_run(db, print_run, NULL, &err);
        replay_db_close(db);
        return s == KV_OK ? EXIT_CLEAN : kvsim_db_fail("db list", &err);
    }
    int64_t *ids = NULL;
    size_t n = 0;
    s = replay_db_case_ids(db, &ids, &n, &err);
    if (s == KV_OK)
        printf("%5s  %-6s %-7s %6s  %-13s %-9s %-20s %-12s %s\n", "id", "status", "origin", "hits",
               "invariant", "dirs", "last seen", "sig", "signature");
    for (size_t i = 0; s == KV_OK && i < n; i++) {
        replay_case_info c;
        s = replay_db_case_info(db, ids[i], &c, &err);
        if (s != KV_OK)
            break;
        char last[24], dirs[16];
        fmt_time(c.last_seen, last);
        if (c.have_min)
            snprintf(dirs, sizeof dirs, "%u->%u", c.directives, c.min_directives);
        else
            snprintf(dirs, sizeof dirs, "%u", c.directives);
        printf("%5" PRId64 "  %-6s %-7s %6" PRId64 "  %-13s %-9s %-20s %-12s %s\n", c.id,
               c.fixed ? "fixed" : "open", c.origin, c.hits, c.invariant, dirs, last, c.sig_short,
               c.signature);
    }
    if (s == KV_OK)
        printf("%zu cases in %s\n", n, o->db);
    free(ids);
    replay_db_close(db);
    return s == KV_OK ? EXIT_CLEAN : kvsim_db_fail("db list", &err);
}

static void show_info(const replay_case_info *i) {
    char first[24], last[24];
    fmt_time(i->first_seen, first);
    fmt_time(i->last_seen, last);
    printf("case %" PRId64 " (%s)\n  signature   %s\n  sig hash    %s\n  first       %s\n", i->id,
           i->fixed ? "fixed" : "open", i->signature, i->sig_short, i->detail);
    printf("  origin      %s, first seen %s (run %" PRId64 "), last seen %s (run %" PRId64 "), %" PRId64
           " hits\n",
           i->origin, first, i->first_run, last, i->last_run, i->hits);
    printf("  recorded    scenario format v%u, trace hash %016" PRIx64 " by commit %s",
           i->format_version, i->trace_hash, i->git_commit);
    if (i->have_seed)
        printf(", sweep seed %" PRIu64, i->seed);
    printf("\n  directives  %u", i->directives);
    if (i->have_min)
        printf(", minimized %u (trace hash %016" PRIx64 ")", i->min_directives, i->min_trace_hash);
    printf("\n");
}

/* show ID --min: the minimized scenario alone, as a .kvs that kvsim replay
 * checks (its '#' lines name the case, the signature and the trace hash). */
static kv_status show_min(const db_opts *o, replay_db *db, const replay_case_info *i, replay_err *err) {
    static char text[SIM_SCENARIO_TEXT_MAX];
    if (!i->have_min)
        return replay_fail(err, REPLAY_E_NOT_FOUND,
                           "case %" PRId64 " of %s has no minimized scenario (kvsim shrink db:%s:%" PRId64 ")",
                           i->id, o->db, o->db, i->id);
    kv_status s = replay_db_case_text(db, i->id, true, text, sizeof text, err);
    if (s != KV_OK)
        return s;
    printf("# case %" PRId64 " of %s (%s, %s): minimized scenario, directives %u -> %u\n", i->id, o->db,
           i->fixed ? "fixed" : "open", i->origin, i->directives, i->min_directives);
    printf("# signature %s\n# trace-hash %016" PRIx64 "\n# ", i->signature, i->min_trace_hash);
    print_reproduce(o, i->id, true);
    fputs(text, stdout);
    return KV_OK;
}

static int db_show(const db_opts *o) {
    int64_t id;
    if (want_args(o, 1, 1, "show ID [--min]") || parse_id(o->args[0], &id))
        return EXIT_USAGE;
    replay_db *db;
    int rc = open_db(o, REPLAY_DB_READ, &db);
    if (rc)
        return rc;
    static char text[SIM_SCENARIO_TEXT_MAX];
    static replay_case c;
    replay_err err = {0};
    kv_status s = replay_db_case_info(db, id, &c.info, &err);
    const replay_case_info *i = &c.info;
    if (s == KV_OK && o->min) {
        s = show_min(o, db, i, &err);
        replay_db_close(db);
        return s == KV_OK ? EXIT_CLEAN : kvsim_db_fail("db show", &err);
    }
    if (s == KV_OK) {
        show_info(i);
        /* the blobs are checked, but the stored text is shown either way */
        replay_err blob = {0};
        if (replay_db_case_get(db, id, &c, &blob) != KV_OK)
            printf("  DAMAGED     %s\n", blob.msg);
        print_reproduce(o, id, false);
        if (i->have_min)
            print_reproduce(o, id, true);
    }
    for (int min = 0; s == KV_OK && min < 1 + (int)i->have_min; min++) {
        s = replay_db_case_text(db, id, min, text, sizeof text, &err);
        if (s == KV_OK)
            printf("%s:\n%s", min ? "minimized scenario" : "scenario", text);
    }
    replay_db_close(db);
    return s == KV_OK ? EXIT_CLEAN : kvsim_db_fail("db show", &err);
}

/* ---- verify ---------------------------------------------------------------------------------- */

typedef struct verify_tally {
    uint32_t cases, same, drift, other, gone, sim_error, regressed, came_back, unreadable, marked,
        rehashed;
} verify_tally;

static void tally_outcome(verify_tally *t, replay_outcome oc) {
    switch (oc) {
    case REPLAY_SAME:
        t->same++;
        break;
    case REPLAY_DRIFT:
        t->drift++;
        break;
    case REPLAY_OTHER:
        t->other++;
        break;
    case REPLAY_GONE:
        t->gone++;
        break;
    case REPLAY_SIM_ERROR:
        t->sim_error++;
        break;
    }
}

/* Applies --mark-fixed / --rehash to one checked case; true when the case
 * is settled by it (no longer a regression). */
static bool verify_update(const db_opts *o, replay_db *db, const replay_case *c,
                          const replay_case_check *k, verify_tally *t, replay_err *err,
                          kv_status *s) {
    bool min_gone = !k->have_min || k->min_outcome == REPLAY_GONE;
    bool min_drift =
        !k->have_min || k->min_outcome == REPLAY_DRIFT || k->min_outcome == REPLAY_SAME;
    if (o->mark_fixed && k->outcome == REPLAY_GONE && min_gone) {
        *s = replay_db_set_status(db, c->info.id, true, err);
        t->marked++;
        return true;
    }
    if (o->rehash && (k->outcome == REPLAY_DRIFT || k->outcome == REPLAY_SAME) && min_drift) {
        *s = replay_db_set_trace_hash(db, c->info.id, k->r.trace_hash, k->have_min,
                                      k->min_r.trace_hash, err);
        t->rehashed++;
        return true;
    }
    return false;
}

static kv_status verify_one(const db_opts *o, replay_db *db, sim_world *w, int64_t id,
                            verify_tally *t, replay_err *err) {
    static replay_case c;
    replay_case_check k;
    replay_err bad = {0};
    t->cases++;
    kv_status s = replay_db_case_get(db, id, &c, &bad);
    if (s != KV_OK && bad.kind != REPLAY_E_BAD_CASE && bad.kind != REPLAY_E_FORMAT)
        return *err = bad, s;
    if (s != KV_OK) {
        t->unreadable++;
        printf("%5" PRId64 "  %-6s UNREADABLE  %s\n", id, c.info.fixed ? "fixed" : "open", bad.msg);
        return KV_OK;
    }
    if (replay_check_case(w, &c, &k) != KV_OK) {
        t->unreadable++;
        printf("%5" PRId64 "  %-6s REJECTED by the simulator\n", id,
               c.info.fixed ? "fixed" : "open");
        return KV_OK;
    }
    tally_outcome(t, k.outcome);
    s = KV_OK;
    bool settled = k.regressed && verify_update(o, db, &c, &k, t, err, &s);
    const char *verdict = k.came_back    ? "CAME BACK"
                          : !k.regressed ? "ok"
                          : settled      ? "updated"
                                         : "REGRESSED";
    if (k.came_back)
        t->came_back++;
    else if (k.regressed && !settled)
        t->regressed++;
    printf("%5" PRId64 "  %-6s %-10s %-6s", id, c.info.fixed ? "fixed" : "open", verdict,
           replay_outcome_name(k.outcome));
    if (k.have_min)
        printf(" min %-6s", replay_outcome_name(k.min_outcome));
    printf("  %s", c.info.signature);
    if (k.outcome == REPLAY_OTHER || (k.came_back && k.r.violated))
        printf("\n         now: %s %s", kv_inv_name(k.r.inv), k.r.detail);
    printf("\n");
    if (k.came_back || (k.regressed && !settled))
        print_reproduce(o, id, false);
    return s;
}

static int db_verify(const db_opts *o) {
    if (want_args(o, 0, 0, "verify [--mark-fixed] [--rehash]"))
        return EXIT_USAGE;
    replay_db *db;
    int rc = open_db(o, o->mark_fixed || o->rehash ? REPLAY_DB_WRITE : REPLAY_DB_READ, &db);
    if (rc)
        return rc;
    replay_err err = {0};
    int64_t *ids = NULL;
    size_t n = 0;
    verify_tally t = {0};
    kv_status s = replay_db_check(db, &err);
    if (s == KV_OK)
        s = replay_db_case_ids(db, &ids, &n, &err);
    sim_world *w = NULL;
    if (s == KV_OK && sim_world_new(&w) != KV_OK)
        s = replay_fail(&err, REPLAY_E_IO, "out of memory");
    for (size_t i = 0; s == KV_OK && i < n; i++)
        s = verify_one(o, db, w, ids[i], &t, &err);
    sim_world_free(w);
    free(ids);
    replay_db_close(db);
    if (s != KV_OK)
        return kvsim_db_fail("db verify", &err);
    printf("%u cases: %u same, %u drift, %u other, %u gone, %u simulator errors, %u unreadable; "
           "%u open regressed, %u fixed came back, %u marked fixed, %u rehashed\n",
           t.cases, t.same, t.drift, t.other, t.gone, t.sim_error, t.unreadable, t.regressed,
           t.came_back, t.marked, t.rehashed);
    if (t.came_back)
        return EXIT_CAME_BACK;
    if (t.regressed)
        return EXIT_NOT_AS_RECORDED;
    return t.unreadable ? EXIT_BAD_INPUT : EXIT_CLEAN;
}

/* ---- merge / mark / migrate --------------------------------------------------------------------
 */

static int db_merge(const db_opts *o) {
    if (want_args(o, 1, 64, "merge SRC.db..."))
        return EXIT_USAGE;
    replay_db *db;
    int rc = open_db(o, REPLAY_DB_WRITE, &db);
    if (rc)
        return rc;
    replay_err err = {0};
    kv_status s = KV_OK;
    for (int i = 0; s == KV_OK && i < o->n_args; i++) {
        replay_merge_stats m;
        s = replay_db_merge(db, o->args[i], &m, &err);
        if (s == KV_OK)
            printf("%s: %" PRIu64 " runs, %" PRIu64 " new cases, %" PRIu64 " known cases, %" PRIu64
                   " hits added\n",
                   o->args[i], m.runs, m.new_cases, m.merged_cases, m.hits);
    }
    replay_db_close(db);
    return s == KV_OK ? EXIT_CLEAN : kvsim_db_fail("db merge", &err);
}

static int db_mark(const db_opts *o) {
    int64_t id;
    if (want_args(o, 2, 2, "mark ID open|fixed") || parse_id(o->args[0], &id))
        return EXIT_USAGE;
    bool fixed = !strcmp(o->args[1], "fixed");
    if (!fixed && strcmp(o->args[1], "open"))
        return fprintf(stderr, "kvsim db mark: status is open or fixed\n"), EXIT_USAGE;
    replay_db *db;
    int rc = open_db(o, REPLAY_DB_WRITE, &db);
    if (rc)
        return rc;
    replay_err err = {0};
    kv_status s = replay_db_set_status(db, id, fixed, &err);
    replay_db_close(db);
    if (s != KV_OK)
        return kvsim_db_fail("db mark", &err);
    printf("case %" PRId64 ": %s\n", id, o->args[1]);
    return EXIT_CLEAN;
}

static int db_migrate(const db_opts *o) {
    if (want_args(o, 0, 0, "migrate"))
        return EXIT_USAGE;
    replay_db *db;
    int rc = open_db(o, REPLAY_DB_WRITE, &db);
    if (rc)
        return rc;
    replay_db_close(db);
    printf("%s: schema version %d\n", o->db, REPLAY_SCHEMA_VERSION);
    return EXIT_CLEAN;
}

/* ---- export -------------------------------------------------------------------------------------
 */

/* The corpus rules of tests/test_corpus.c: clean with every switch off,
 * and the recorded invariant with each switch of the case on. */
static int corpus_check(const sim_scenario *sc, const replay_case_info *c) {
    static sim_scenario off;
    sim_world *w;
    sim_result r;
    if (sim_world_new(&w) != KV_OK)
        return EXIT_SIM;
    sim_scenario_copy(&off, sc);
    off.cfg.bugs = 0;
    int rc = EXIT_CLEAN;
    if (sim_world_run(w, &off.cfg, NULL, &r) != KV_OK || r.violated || r.sim_error != KV_OK) {
        fprintf(stderr,
                "kvsim db export: case %" PRId64
                " %s with every bug switch off: a corpus file must run clean "
                "(fix the bug first)\n",
                c->id, r.violated ? "still violates" : "does not run");
        if (r.violated)
            kvsim_print_violation(&r);
        rc = EXIT_NOT_AS_RECORDED;
    }
    for (uint32_t b = 1; rc == EXIT_CLEAN && b && b <= sc->cfg.bugs; b <<= 1) {
        if (!(sc->cfg.bugs & b))
            continue;
        off.cfg.bugs = b;
        if (sim_world_run(w, &off.cfg, NULL, &r) != KV_OK || !r.violated ||
            strcmp(kv_inv_name(r.inv), c->invariant)) {
            fprintf(stderr,
                    "kvsim db export: with only %s on, case %" PRId64 " does not violate %s\n",
                    kv_bug_name(b), c->id, c->invariant);
            rc = EXIT_NOT_AS_RECORDED;
        }
    }
    sim_world_free(w);
    return rc;
}

/* The violation the minimized scenario gives (with its switches), for its
 * export header; "did not violate" when it does not. */
static void min_violation(const sim_scenario *sc, char *out, size_t cap) {
    sim_world *w;
    sim_result r;
    snprintf(out, cap, "did not violate when exported");
    if (sim_world_new(&w) != KV_OK)
        return;
    if (sim_world_run(w, &sc->cfg, NULL, &r) == KV_OK && r.violated)
        replay_violation_text(&r, out, cap);
    sim_world_free(w);
}

static int write_export(const db_opts *o, const char *path, const replay_case *c,
                        const sim_scenario *sc, bool min) {
    static char text[SIM_SCENARIO_TEXT_MAX];
    static uint8_t bytes[SIM_SCENARIO_BYTES_MAX];
    static sim_scenario out;
    size_t n = strlen(path), len = 0;
    bool kvs = (n >= 4 && !strcmp(path + n - 4, ".kvs")) || kv_cli_is_stdout(path);
    sim_scenario_copy(&out, sc);
    if (o->corpus)
        out.cfg.bugs = 0;
    if ((kvs ? sim_scenario_to_text(&out, text, sizeof text, &len)
             : sim_scenario_to_bytes(&out, bytes, sizeof bytes, &len)) != KV_OK)
        return fprintf(stderr, "kvsim db export: case %" PRId64 " cannot be encoded\n", c->info.id),
               EXIT_SIM;
    FILE *f = kv_cli_open_out(path, kvs ? "w" : "wb");
    if (!f)
        return fprintf(stderr, "kvsim db export: cannot write %s\n", path), EXIT_BAD_INPUT;
    if (kvs) {
        char first[24];
        fmt_time(c->info.first_seen, first);
        if (min) { /* the header describes what this file does: the shrunk run */
            char shrunk[400];
            min_violation(sc, shrunk, sizeof shrunk);
            fprintf(f, "# case %" PRId64 " of %s (%s, first seen %s), minimized: %s\n", c->info.id, o->db,
                    c->info.origin, first, shrunk);
            fprintf(f, "# minimized: directives %u -> %u; the original: %s\n", c->info.directives,
                    c->info.min_directives, c->info.detail);
        } else {
            fprintf(f, "# case %" PRId64 " of %s (%s, first seen %s): %s\n", c->info.id, o->db,
                    c->info.origin, first, c->info.detail);
        }
        fprintf(f, "# signature %s\n", c->info.signature);
        if (o->corpus) {
            for (uint32_t b = 1; b && b <= sc->cfg.bugs; b <<= 1)
                if (sc->cfg.bugs & b)
                    fprintf(f, "# expect-bug %s %s\n", kv_bug_name(b), c->info.invariant);
        } else {
            fprintf(f, "# trace-hash %016" PRIx64 "\n",
                    min ? c->info.min_trace_hash : c->info.trace_hash);
        }
        fwrite(text, 1, len, f);
    } else {
        fwrite(bytes, 1, len, f);
    }
    if (fclose(f))
        return fprintf(stderr, "kvsim db export: cannot write %s\n", path), EXIT_BAD_INPUT;
    printf("case %" PRId64 " (%s scenario, %u directives) -> %s\n", c->info.id,
           min ? "minimized" : "original", sim_scenario_directives(sc), kv_cli_is_stdout(path) ? "stdout" : path);
    return EXIT_CLEAN;
}

/* A directory as the export target: DIR/ORIGIN-WHAT-SIG.kvs, WHAT the bug
 * switches (or the invariant when none), SIG the signature's short hash. */
static const char *export_path(const char *target, const replay_case *c, const sim_scenario *sc,
                               char *buf, size_t cap) {
    struct stat sb;
    size_t n = strlen(target);
    if (kv_cli_is_stdout(target) ||
        (!(n && target[n - 1] == '/') && !(stat(target, &sb) == 0 && S_ISDIR(sb.st_mode))))
        return target;
    char what[128] = "";
    size_t w = 0;
    for (uint32_t b = 1; b && b <= sc->cfg.bugs; b <<= 1)
        if (sc->cfg.bugs & b)
            w += (size_t)snprintf(what + w, sizeof what - w, "%s%s", w ? "+" : "", kv_bug_name(b));
    if (!w)
        snprintf(what, sizeof what, "%s", c->info.invariant);
    snprintf(buf, cap, "%s%s%s-%s-%s.kvs", target, target[n - 1] == '/' ? "" : "/", c->info.origin,
             what, c->info.sig_short);
    return buf;
}

static int db_export(const db_opts *o) {
    int64_t id;
    if (want_args(o, 2, 2, "export ID FILE.kvs|FILE|DIR/ [--original] [--corpus]") ||
        parse_id(o->args[0], &id))
        return EXIT_USAGE;
    replay_db *db;
    int rc = open_db(o, REPLAY_DB_READ, &db);
    if (rc)
        return rc;
    static replay_case c;
    replay_err err = {0};
    kv_status s = replay_db_case_get(db, id, &c, &err);
    replay_db_close(db);
    if (s != KV_OK)
        return kvsim_db_fail("db export", &err);
    bool min = c.info.have_min && !o->original;
    const sim_scenario *sc = min ? &c.min : &c.sc;
    if (o->corpus && (rc = corpus_check(sc, &c.info)))
        return rc;
    char path[1024];
    return write_export(o, export_path(o->args[1], &c, sc, path, sizeof path), &c, sc, min);
}

/* ---- dispatch
 * ------------------------------------------------------------------------------------- */

static int cmd_db(int argc, char **argv) {
    db_opts o;
    int pr = parse(argc, argv, &o);
    if (pr == -2)
        return EXIT_CLEAN;
    if (pr)
        return EXIT_USAGE;
    const char *a = o.action;
    if (!strcmp(a, "import"))
        return db_import(&o, argc, argv);
    if (!strcmp(a, "add"))
        return db_add(&o, argc, argv);
    if (!strcmp(a, "list"))
        return db_list(&o);
    if (!strcmp(a, "show"))
        return db_show(&o);
    if (!strcmp(a, "verify"))
        return db_verify(&o);
    if (!strcmp(a, "merge"))
        return db_merge(&o);
    if (!strcmp(a, "export"))
        return db_export(&o);
    if (!strcmp(a, "mark"))
        return db_mark(&o);
    if (!strcmp(a, "migrate"))
        return db_migrate(&o);
    fprintf(stderr, "kvsim db: unknown action '%s' (try --help)\n", a);
    return EXIT_USAGE;
}

const kvsim_cmd kvsim_cmd_db = {
    "db",
    "kvsim db [--db FILE] ACTION ...   (FILE: --db, else $KVCONN_DB, else kvconn-findings.db)\n"
    "  import PATH... [--bug NAME]...  libFuzzer crash-* files and AFL++ crashes/ directories\n"
    "                                  (fuzz_scenario inputs; --bug as the fuzzer's KVCONN_BUG)\n"
    "  add FILE [--bug NAME]... [--fuzz]  record a .kvs or binary scenario by hand (origin "
    "manual)\n"
    "  list [--runs]                   cases (id, status, origin, hits, invariant, directives,\n"
    "                                  signature), or the runs that recorded them\n"
    "  show ID [--min]                 one case: what, where from, trace hash, the command that\n"
    "                                  replays it, scenario text; --min: the minimized scenario\n"
    "                                  alone, as a .kvs to save and replay (kvsim shrink makes it)\n"
    "  verify [--mark-fixed] [--rehash]  rerun every case; exit 9 if a case marked fixed\n"
    "                                  violates again (came back), else 10 if an open case\n"
    "                                  no longer gives its recorded signature and trace hash\n"
    "                                  (regressed), else 3 if a case is unreadable, else 0.\n"
    "                                  --mark-fixed marks open cases that run clean as fixed;\n"
    "                                  --rehash records the new trace hash of drifted cases\n"
    "  merge SRC.db...                 fold other databases (sweep shards) into FILE\n"
    "  export ID FILE.kvs|FILE|DIR/|- [--original] [--corpus]  the minimized scenario (else\n"
    "                                  the original) as .kvs text (- : to stdout), any other name binary; a\n"
    "                                  directory gets DIR/ORIGIN-BUG-SIG.kvs; --corpus\n"
    "                                  writes 'bugs none' + '# expect-bug' lines and checks the\n"
    "                                  corpus rules (clean with switches off) first\n"
    "  mark ID open|fixed              set a case's status\n"
    "  migrate                         create or migrate the schema\n"
    "  Options other than --db go with the actions listed with them.\n"
    "  Exit: 0 ok, 3 bad input or damaged case, 4 usage, 6 corrupt or not a findings\n"
    "  database, 7 schema version not understood, 8 database cannot be written; verify as above.\n",
    cmd_db};
