/* kvsim selftest — proves the harness (DESIGN.md section 8). For every bug
 * switch: a sweep of generated scenarios and the fuzz_scenario fuzzer (a
 * subprocess, from an empty corpus, no repro seeds) must each find a
 * violation, and rerunning what they found here, in-process, must violate
 * the same invariant (the sweep's seed through sim_gen, the fuzzer's crash
 * input as kvsim replay --fuzz loads it: the fuzz target's own preparation).
 * With no switch on, the same budgets must find nothing. A harness that
 * cannot find a known bug is broken, whatever else it reports.
 *
 * The fuzzer runs as: KVCONN_BUG=<switch> FUZZER -seed=N -max_total_time=S
 * -len_control=0 -max_len=4096 -timeout=30 -use_counters=0 -print_final_stats=1
 * -artifact_prefix=TMP/ TMP/corpus, with KVCONN_DB unset; its output goes
 * to TMP/log, parsed for the VIOLATION line, the executed-units count and
 * the crash file. TMP is a fresh directory under $TMPDIR (or /tmp), removed
 * afterwards unless --keep.
 *
 * Exit: 0 every row passed, 1 a row failed, 3 the fuzzer cannot be run,
 * 4 usage. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "apps/kvsim/kvsim.h"
#include "util/json.h"
#include "replay/input.h"
#include "core/engine.h"
#include "sim/gen.h"
#include "sim/scenario.h"
#include "sim/sweep.h"

#define ST_PATH_MAX 1024
#define ST_BUGS_MAX 32
#define ST_FUZZ_MAX_LEN "4096"

typedef struct st_opts {
    const char *fuzzer;        /* fuzz_scenario binary */
    uint64_t budget_seeds;     /* sweep seeds 1..N */
    uint64_t fuzz_seconds;     /* fuzzer wall budget per row */
    uint64_t fuzz_seed;        /* libFuzzer -seed */
    uint32_t bug[ST_BUGS_MAX]; /* one row per switch, then the row without */
    uint32_t n_bugs;
    int json, keep;
} st_opts;

/* What one search (sweep or fuzzer) did for one row. */
typedef struct st_find {
    bool found;            /* a violation */
    bool reproduced;       /* rerun here, the same invariant */
    bool error;            /* could not run or parse: the row fails */
    char inv[32];          /* the invariant it reported */
    uint64_t count;        /* sweep: seeds run; fuzzer: inputs executed */
    double secs;
    char note[200];        /* why the row failed, if it did */
} st_find;

typedef struct st_row {
    uint32_t bug; /* 0: no switch */
    st_find sweep, fuzz;
    bool ok;
} st_row;

/* ---- options ----------------------------------------------------------------------- */

static const char *default_fuzzer(char *buf, size_t cap) {
    static const char name[] = "/fuzz_scenario";
    ssize_t n = readlink("/proc/self/exe", buf, cap - 1);
    if (n > 0) {
        buf[n] = 0;
        char *slash = strrchr(buf, '/');
        if (slash && (size_t)(slash - buf) + sizeof name <= cap) {
            memcpy(slash, name, sizeof name);
            if (access(buf, X_OK) == 0) return buf;
        }
    }
    return "build-fuzz/bin/fuzz_scenario";
}

static int parse_bugs(const char *v, st_opts *o) {
    o->n_bugs = 0;
    while (v && *v) {
        uint32_t bit;
        size_t n;
        const char *rest = kv_bug_list_next(v, &bit, &n);
        if (!bit || o->n_bugs >= ST_BUGS_MAX) return fprintf(stderr, "kvsim selftest: unknown bug switch '%.*s'\n", (int)n, v), -1;
        o->bug[o->n_bugs++] = bit;
        v = rest;
    }
    return 0;
}

static const int accepts[] = {KO_FUZZER, KO_BUGS, KO_BUDGET_SEEDS, KO_FUZZ_SECONDS, KO_FUZZ_SEED, KO_JSON, KO_KEEP, KO_END};

static int take_opt(const kvsim_getopt *g, int id, st_opts *o) {
    switch (id) {
    case KO_JSON: return o->json = 1, 0;
    case KO_KEEP: return o->keep = 1, 0;
    case KO_FUZZER: return o->fuzzer = g->arg, 0;
    case KO_BUGS: return parse_bugs(g->arg, o);
    case KO_BUDGET_SEEDS: return kvsim_opt_num(g, 1, UINT64_MAX, &o->budget_seeds);
    case KO_FUZZ_SECONDS: return kvsim_opt_num(g, 1, UINT32_MAX, &o->fuzz_seconds);
    case KO_FUZZ_SEED: return kvsim_opt_num(g, 0, UINT32_MAX, &o->fuzz_seed);
    default: return -1;
    }
}

static int parse_opts(int argc, char **argv, st_opts *o, char *fuzzer_buf, size_t cap) {
    memset(o, 0, sizeof *o);
    o->budget_seeds = 2000;
    o->fuzz_seconds = 60;
    o->fuzz_seed = 1;
    for (uint32_t b = 1; b && o->n_bugs < ST_BUGS_MAX; b <<= 1)
        if (strcmp(kv_bug_name(b), "?")) o->bug[o->n_bugs++] = b;
    kvsim_getopt g;
    kvsim_getopt_init(&g, "selftest", accepts, argc, argv);
    int id;
    while ((id = kvsim_getopt_next(&g)) > 0)
        if (take_opt(&g, id, o)) return -1;
    if (id < 0) return id;
    if (kvsim_max_pos(&g, 0)) return -1;
    if (!o->fuzzer) o->fuzzer = default_fuzzer(fuzzer_buf, cap);
    return 0;
}

/* ---- the sweep ----------------------------------------------------------------------- */

/* The first reason a search failed (later ones are consequences). */
__attribute__((format(printf, 2, 3))) static void note(st_find *f, const char *fmt, ...) {
    if (f->note[0]) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(f->note, sizeof f->note, fmt, ap);
    va_end(ap);
}

static void run_sweep(sim_world *w, const st_opts *o, uint32_t bug, st_find *f) {
    static sim_sweep s;
    static sim_world_cfg cfg;
    sim_sweep_init(&s);
    double t0 = kvsim_wall_s();
    kv_status st = sim_sweep_run(w, 1, o->budget_seeds, bug, true, 0, 1, NULL, NULL, &s);
    f->secs = kvsim_wall_s() - t0;
    f->count = s.runs;
    if (st != KV_OK) {
        f->error = true;
        note(f, "sweep failed: %s", kv_status_str(st));
        return;
    }
    f->found = s.first_violation_seed != UINT64_MAX;
    if (!f->found) return;
    f->count = s.first_violation_seed; /* seeds 1..seed were run */
    snprintf(f->inv, sizeof f->inv, "%s", kv_inv_name(s.first.inv));
    sim_result r;
    sim_gen(s.first_violation_seed, bug, &cfg);
    f->reproduced = sim_world_run(w, &cfg, NULL, &r) == KV_OK && r.violated && r.inv == s.first.inv;
    if (!f->reproduced) note(f, "sim_gen(seed) rerun did not violate the same invariant");
}

/* ---- the fuzzer ---------------------------------------------------------------------- */

/* out := a + b; -1 if it does not fit. */
static int join(char *out, size_t cap, const char *a, const char *b) {
    int n = snprintf(out, cap, "%s%s", a, b);
    return n < 0 || (size_t)n >= cap ? -1 : 0;
}

static void rm_tree(const char *path, int depth) {
    DIR *d = depth < 4 ? opendir(path) : NULL;
    struct dirent *e;
    char sub[ST_PATH_MAX];
    while (d && (e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        struct stat sb;
        int n = snprintf(sub, sizeof sub, "%s/%s", path, e->d_name);
        if (n < 0 || (size_t)n >= sizeof sub || lstat(sub, &sb)) continue;
        if (S_ISDIR(sb.st_mode)) rm_tree(sub, depth + 1);
        else unlink(sub);
    }
    if (d) closedir(d);
    rmdir(path);
}

/* Runs the fuzzer into dir; returns its wait status, or -1 if it could not
 * be started. */
static int spawn_fuzzer(const st_opts *o, const char *dir, uint32_t bug) {
    char seed[40], secs[40], prefix[ST_PATH_MAX], corpus[ST_PATH_MAX], log[ST_PATH_MAX];
    snprintf(seed, sizeof seed, "-seed=%" PRIu64, o->fuzz_seed);
    snprintf(secs, sizeof secs, "-max_total_time=%" PRIu64, o->fuzz_seconds);
    char dir_slash[ST_PATH_MAX];
    if (join(dir_slash, sizeof dir_slash, dir, "/") || join(prefix, sizeof prefix, "-artifact_prefix=", dir_slash) ||
        join(corpus, sizeof corpus, dir, "/corpus") || join(log, sizeof log, dir, "/log") || mkdir(corpus, 0700))
        return -1;
    char *args[] = {(char *)o->fuzzer, seed, secs, "-len_control=0", "-max_len=" ST_FUZZ_MAX_LEN,
                    "-timeout=30", "-use_counters=0", "-print_final_stats=1", prefix, corpus, NULL};
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0) _exit(126);
        close(fd);
        unsetenv("KVCONN_DB"); /* the selftest's findings are not findings */
        if (bug) setenv("KVCONN_BUG", kv_bug_name(bug), 1);
        else unsetenv("KVCONN_BUG");
        execv(o->fuzzer, args);
        _exit(127);
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR) return -1;
    return status;
}

/* From the log: the VIOLATION line's invariant, the executed-units count
 * and the crash file libFuzzer wrote. */
static void parse_log(const char *dir, st_find *f, char *crash, size_t cap) {
    char path[ST_PATH_MAX], line[4096];
    crash[0] = 0;
    FILE *in = join(path, sizeof path, dir, "/log") ? NULL : fopen(path, "r");
    while (in && fgets(line, sizeof line, in)) {
        const char *p;
        unsigned long long n;
        if (!f->inv[0] && sscanf(line, "VIOLATION %31s", f->inv) == 1) f->found = true;
        else if (sscanf(line, "stat::number_of_executed_units: %llu", &n) == 1) f->count = n;
        else if ((p = strstr(line, "Test unit written to ")) != NULL) {
            snprintf(crash, cap, "%s", p + strlen("Test unit written to "));
            crash[strcspn(crash, "\r\n")] = 0;
        }
    }
    if (in) fclose(in);
}

static void replay_crash(sim_world *w, const char *crash, uint32_t bug, st_find *f) {
    static replay_input in;
    replay_load_opts o = {.bugs = bug, .fuzz = true}; /* fuzz_prepare: exactly what the fuzz target ran */
    replay_err err;
    if (replay_input_load(crash, &o, &in, &err) != KV_OK) {
        note(f, "cannot read the crash input");
        return;
    }
    sim_result r;
    f->reproduced = sim_world_run(w, &in.sc.cfg, NULL, &r) == KV_OK && r.violated && !strcmp(kv_inv_name(r.inv), f->inv);
    if (!f->reproduced) note(f, "the crash input, rerun in-process, did not violate the same invariant");
}

static void run_fuzz(sim_world *w, const st_opts *o, const char *tmp, uint32_t row, uint32_t bug, st_find *f) {
    char dir[ST_PATH_MAX], crash[ST_PATH_MAX];
    char leaf[80];
    snprintf(leaf, sizeof leaf, "/%u-%s", row, bug ? kv_bug_name(bug) : "none");
    if (join(dir, sizeof dir, tmp, leaf) || mkdir(dir, 0700)) {
        f->error = true;
        note(f, "cannot create the fuzzer's directory");
        return;
    }
    double t0 = kvsim_wall_s();
    int status = spawn_fuzzer(o, dir, bug);
    f->secs = kvsim_wall_s() - t0;
    if (status < 0 || (WIFEXITED(status) && WEXITSTATUS(status) >= 126)) {
        f->error = true;
        note(f, "cannot run the fuzzer %s", o->fuzzer);
        return;
    }
    parse_log(dir, f, crash, sizeof crash);
    bool crashed = !WIFEXITED(status) || WEXITSTATUS(status) != 0 || crash[0];
    if (crashed && !f->found) {
        f->error = true;
        note(f, "the fuzzer failed without a VIOLATION line (its log: %s/log, kept with --keep)", dir);
        return;
    }
    if (f->found && !crash[0]) note(f, "a VIOLATION but no crash input written");
    else if (f->found) replay_crash(w, crash, bug, f);
}

/* ---- report -------------------------------------------------------------------------- */

static const char *row_name(const st_row *r) { return r->bug ? kv_bug_name(r->bug) : "(no switch)"; }

static void judge(st_row *r) {
    const st_find *s = &r->sweep, *f = &r->fuzz;
    if (s->error || f->error) r->ok = false;
    else if (r->bug) r->ok = s->found && s->reproduced && f->found && f->reproduced;
    else r->ok = !s->found && !f->found;
}

static void print_header(const st_opts *o) {
    printf("kvsim selftest: fuzzer %s (-seed=%" PRIu64 "), sweep budget %" PRIu64 " seeds, fuzz budget %" PRIu64 " s\n\n",
           o->fuzzer, o->fuzz_seed, o->budget_seeds, o->fuzz_seconds);
    printf("%-26s %-22s %-26s %-12s %s\n", "switch", "sweep (seeds needed)", "fuzzer (execs, seconds)", "reproduced",
           "invariant");
    printf("%-26s %-22s %-26s %-12s %s\n", "", "", "", "sweep/fuzz", "sweep / fuzzer");
}

static void print_row(const st_row *r) {
    char sw[48], fz[48], rep[24], inv[72];
    const st_find *s = &r->sweep, *f = &r->fuzz;
    if (s->error) snprintf(sw, sizeof sw, "error");
    else if (s->found) snprintf(sw, sizeof sw, "found (%" PRIu64 ")", s->count);
    else snprintf(sw, sizeof sw, "none in %" PRIu64, s->count);
    if (f->error) snprintf(fz, sizeof fz, "error");
    else if (f->found) snprintf(fz, sizeof fz, "found (%" PRIu64 ", %.1f s)", f->count, f->secs);
    else snprintf(fz, sizeof fz, "none (%" PRIu64 ", %.1f s)", f->count, f->secs);
    if (!r->bug) snprintf(rep, sizeof rep, "-");
    else snprintf(rep, sizeof rep, "%s/%s", s->reproduced ? "yes" : "NO", f->reproduced ? "yes" : "NO");
    snprintf(inv, sizeof inv, "%s%s%s", s->inv[0] ? s->inv : "-", " / ", f->inv[0] ? f->inv : "-");
    printf("%-26s %-22s %-26s %-12s %s%s\n", row_name(r), sw, fz, rep, inv, r->ok ? "" : "   FAILED");
    if (!r->ok && s->note[0]) printf("    sweep: %s\n", s->note);
    if (!r->ok && f->note[0]) printf("    fuzzer: %s\n", f->note);
    if (!r->ok && !r->bug && (s->found || f->found)) printf("    a violation with every switch off\n");
    if (!r->ok && r->bug && !(s->found && f->found) && !s->note[0] && !f->note[0])
        printf("    %s found nothing within its budget\n", !s->found ? "the sweep" : "the fuzzer");
    fflush(stdout);
}

static void json_find(kv_json *j, const char *key, const st_find *f, bool sweep) {
    kv_json_kobj(j, key);
    kv_json_kbool(j, "found", f->found);
    kv_json_kbool(j, "reproduced", f->reproduced);
    kv_json_kbool(j, "error", f->error);
    kv_json_kstr(j, "invariant", f->inv[0] ? f->inv : NULL);
    kv_json_ku64(j, sweep ? "seeds" : "execs", f->count);
    kv_json_kf64(j, "seconds", f->secs, 3);
    kv_json_kstr(j, "note", f->note);
    kv_json_end(j);
}

static void print_json(const st_opts *o, const st_row *rows, uint32_t n, bool ok) {
    kv_json j;
    kv_json_init(&j, stdout);
    kv_json_obj(&j);
    kv_json_kstr(&j, "fuzzer", o->fuzzer);
    kv_json_ku64(&j, "budget_seeds", o->budget_seeds);
    kv_json_ku64(&j, "fuzz_seconds", o->fuzz_seconds);
    kv_json_ku64(&j, "fuzz_seed", o->fuzz_seed);
    kv_json_kbool(&j, "ok", ok);
    kv_json_karr(&j, "rows");
    for (uint32_t i = 0; i < n; i++) {
        kv_json_obj(&j);
        kv_json_kstr(&j, "switch", rows[i].bug ? kv_bug_name(rows[i].bug) : NULL);
        kv_json_kbool(&j, "ok", rows[i].ok);
        json_find(&j, "sweep", &rows[i].sweep, true);
        json_find(&j, "fuzzer", &rows[i].fuzz, false);
        kv_json_end(&j);
    }
    kv_json_end(&j);
    kv_json_end(&j);
    kv_json_nl(&j);
}

static int cmd_selftest(int argc, char **argv) {
    static st_opts o;
    static char fuzzer_buf[ST_PATH_MAX];
    int pr = parse_opts(argc, argv, &o, fuzzer_buf, sizeof fuzzer_buf);
    if (pr == -2) return EXIT_CLEAN;
    if (pr) return EXIT_USAGE;
    if (access(o.fuzzer, X_OK))
        return fprintf(stderr, "kvsim selftest: no fuzzer at %s (build it: make build-fuzz; or pass --fuzzer PATH)\n", o.fuzzer),
               EXIT_BAD_INPUT;
    char tmp[ST_PATH_MAX];
    const char *base = getenv("TMPDIR");
    snprintf(tmp, sizeof tmp, "%s/kvsim-selftest-XXXXXX", base && *base ? base : "/tmp");
    if (!mkdtemp(tmp)) return fprintf(stderr, "kvsim selftest: cannot create %s\n", tmp), EXIT_BAD_INPUT;
    sim_world *w;
    if (sim_world_new(&w) != KV_OK) return rm_tree(tmp, 0), fprintf(stderr, "kvsim: out of memory\n"), EXIT_SIM;
    static st_row rows[ST_BUGS_MAX + 1];
    uint32_t n = 0;
    bool ok = true;
    if (!o.json) print_header(&o);
    for (uint32_t i = 0; i <= o.n_bugs; i++) { /* the switches, then none */
        st_row *r = &rows[n++];
        memset(r, 0, sizeof *r);
        r->bug = i < o.n_bugs ? o.bug[i] : 0;
        run_sweep(w, &o, r->bug, &r->sweep);
        run_fuzz(w, &o, tmp, i, r->bug, &r->fuzz);
        judge(r);
        ok = ok && r->ok;
        if (!o.json) print_row(r);
    }
    sim_world_free(w);
    if (o.json) print_json(&o, rows, n, ok);
    else printf("\nselftest: %s\n", ok ? "ok" : "FAILED");
    if (o.keep) fprintf(stderr, "kvsim selftest: fuzzer runs kept in %s\n", tmp);
    else rm_tree(tmp, 0);
    return ok ? EXIT_CLEAN : EXIT_SAFETY;
}

const kvsim_cmd kvsim_cmd_selftest = {
    "selftest",
    "kvsim selftest [--fuzzer PATH] [--bugs A,B] [--budget-seeds N] [--fuzz-seconds S] [--fuzz-seed N] [--json] [--keep]\n"
    "  Proves the harness: for every bug switch (default: all kvsim knows) a sweep of\n"
    "  seeds 1..N (default 2000) and the fuzz_scenario fuzzer from an empty corpus\n"
    "  (at most S seconds, default 60) must each find a violation, and rerunning what\n"
    "  they found must violate the same invariant; with no switch both must find\n"
    "  nothing. PATH defaults to fuzz_scenario beside this kvsim, else\n"
    "  build-fuzz/bin/fuzz_scenario. Prints a table (or JSON); exit 0 all rows pass,\n"
    "  1 a row failed, 3 the fuzzer cannot be run.\n",
    cmd_selftest};
