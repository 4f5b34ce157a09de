/* apps/kvsim — the simulator's command line.
 *
 *   kvsim run (--seed N | FILE.kvs) [--bug NAME]... [--trace] [--trace-hash]
 *   kvsim sweep --seeds A..B [--bug NAME]... [--jobs N] [--shard I/N] [--json] [--stop] [--hashes]
 *   kvsim gen --seed N
 *
 * Exit codes: 0 clean, 1 safety violation, 2 liveness violation, 3 bad input,
 * 4 usage error, 5 simulator resource exhausted. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sim/gen.h"
#include "sim/scenario.h"
#include "sim/sweep.h"

enum { EXIT_CLEAN = 0, EXIT_SAFETY = 1, EXIT_LIVENESS = 2, EXIT_BAD_INPUT = 3, EXIT_USAGE = 4, EXIT_SIM = 5 };

static int usage(const char *cmd) {
    FILE *o = stderr;
    if (!cmd || !strcmp(cmd, "run"))
        fprintf(o, "kvsim run (--seed N | FILE.kvs) [--bug NAME]... [--trace] [--trace-json FILE] [--trace-hash]\n"
                   "  Runs one scenario (generated from a seed, or a .kvs file) and reports the\n"
                   "  checker's verdict; on a violation prints the scenario as .kvs text.\n");
    if (!cmd || !strcmp(cmd, "sweep"))
        fprintf(o, "kvsim sweep --seeds A..B [--bug NAME]... [--jobs N] [--shard I/N] [--stop] [--json] [--hashes]\n"
                   "  Runs generated scenarios for every seed in A..B; prints a summary table\n"
                   "  (or one JSON object with --json; --hashes prints each seed's trace hash).\n");
    if (!cmd || !strcmp(cmd, "gen"))
        fprintf(o, "kvsim gen --seed N [--bug NAME]...\n  Prints the generated scenario as .kvs text.\n");
    if (!cmd)
        fprintf(o, "bugs: err_early_return recv_map_race empty_pull_completion\n"
                   "exit: 0 clean, 1 safety violation, 2 liveness violation, 3 bad input, 4 usage, 5 simulator resource\n");
    return EXIT_USAGE;
}

static double wall_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int parse_u64(const char *s, uint64_t *out) {
    char *end;
    if (!s || !*s) return -1;
    unsigned long long v = strtoull(s, &end, 10);
    if (*end) return -1;
    *out = v;
    return 0;
}

typedef struct opts {
    uint64_t seed, from, to;
    int have_seed, have_range, trace, trace_hash, json, stop, hashes;
    const char *trace_json;
    const char *file;
    uint32_t bugs, shard_i, shard_n, jobs;
} opts;

static int parse_opts(int argc, char **argv, const char *cmd, opts *o) {
    memset(o, 0, sizeof *o);
    o->shard_n = 1;
    o->jobs = 1;
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) return usage(cmd), -2;
        if (!strcmp(a, "--seed")) {
            if (parse_u64(v, &o->seed)) return fprintf(stderr, "kvsim %s: --seed needs a number, got '%s'\n", cmd, v ? v : ""), -1;
            o->have_seed = 1;
            i++;
        } else if (!strcmp(a, "--seeds")) {
            const char *dots = v ? strstr(v, "..") : NULL;
            char lo[32];
            if (!dots || (size_t)(dots - v) >= sizeof lo) return fprintf(stderr, "kvsim %s: --seeds needs A..B, got '%s'\n", cmd, v ? v : ""), -1;
            memcpy(lo, v, (size_t)(dots - v));
            lo[dots - v] = 0;
            if (parse_u64(lo, &o->from) || parse_u64(dots + 2, &o->to) || o->to < o->from)
                return fprintf(stderr, "kvsim %s: --seeds needs A..B with A <= B, got '%s'\n", cmd, v), -1;
            o->have_range = 1;
            i++;
        } else if (!strcmp(a, "--bug")) {
            uint32_t b = v ? kv_bug_parse(v) : 0;
            if (!b) return fprintf(stderr, "kvsim %s: unknown bug switch '%s'\n", cmd, v ? v : ""), -1;
            o->bugs |= b;
            i++;
        } else if (!strcmp(a, "--shard")) {
            unsigned si, sn;
            if (!v || sscanf(v, "%u/%u", &si, &sn) != 2 || !sn || si >= sn)
                return fprintf(stderr, "kvsim %s: --shard needs I/N with I < N, got '%s'\n", cmd, v ? v : ""), -1;
            o->shard_i = si;
            o->shard_n = sn;
            i++;
        } else if (!strcmp(a, "--jobs")) {
            uint64_t j;
            if (parse_u64(v, &j) || j < 1 || j > 64) return fprintf(stderr, "kvsim %s: --jobs needs 1..64, got '%s'\n", cmd, v ? v : ""), -1;
            o->jobs = (uint32_t)j;
            i++;
        } else if (!strcmp(a, "--trace-json")) {
            if (!v) return fprintf(stderr, "kvsim %s: --trace-json needs a file name\n", cmd), -1;
            o->trace_json = v;
            i++;
        } else if (!strcmp(a, "--hashes")) o->hashes = 1;
        else if (!strcmp(a, "--trace")) o->trace = 1;
        else if (!strcmp(a, "--trace-hash")) o->trace_hash = 1;
        else if (!strcmp(a, "--json")) o->json = 1;
        else if (!strcmp(a, "--stop")) o->stop = 1;
        else if (a[0] != '-' && !o->file) o->file = a;
        else return fprintf(stderr, "kvsim %s: unknown option '%s' (try --help)\n", cmd, a), -1;
    }
    return 0;
}

static int verdict_code(const sim_result *r) {
    if (r->sim_error != KV_OK) return EXIT_SIM;
    if (!r->violated) return EXIT_CLEAN;
    return r->inv == KV_INV_LIVE || r->inv == KV_INV_LEAK ? EXIT_LIVENESS : EXIT_SAFETY;
}

static void print_cfg(const sim_world_cfg *c) {
    static sim_scenario sc;
    static char text[SIM_SCENARIO_TEXT_MAX];
    size_t n = 0;
    sim_scenario_init(&sc);
    const uint8_t *choice = c->choice;
    size_t clen = c->choice_len < SIM_CHOICE_MAX ? c->choice_len : SIM_CHOICE_MAX;
    sc.cfg = *c;
    if (clen) memcpy(sc.choice, choice, clen);
    sc.cfg.choice = sc.choice;
    sc.cfg.choice_len = clen;
    if (sim_scenario_to_text(&sc, text, sizeof text, &n) == KV_OK) fwrite(text, 1, n, stdout);
    else printf("# (scenario outside the text format's ranges)\n");
}

static void print_violation(const sim_result *r) {
    printf("VIOLATION %s at event %" PRIu64 ", t=%" PRIu64 " ns, actor %s, engine %d, request %d\n  %s\n",
           kv_inv_name(r->inv), r->event, r->at_ns, r->actor_name, (int)r->engine, (int)r->req, r->detail);
}

static int cmd_run(int argc, char **argv) {
    opts o;
    int pr = parse_opts(argc, argv, "run", &o);
    if (pr == -2) return EXIT_CLEAN;
    if (pr) return EXIT_USAGE;
    if (!o.have_seed && !o.file) return fprintf(stderr, "kvsim run: give --seed N or FILE.kvs\n"), usage("run");
    static sim_scenario sc;
    static sim_world_cfg cfg;
    if (o.file) {
        sim_parse_error err;
        kv_status ps = sim_scenario_load(o.file, &sc, &err);
        if (ps != KV_OK) {
            if (err.line) fprintf(stderr, "%s:%u:%u: %s\n", err.file, err.line, err.col, err.msg);
            else fprintf(stderr, "%s: %s\n", err.file[0] ? err.file : o.file, err.msg);
            return EXIT_BAD_INPUT;
        }
        sc.cfg.bugs |= o.bugs;
        cfg = sc.cfg;
        o.seed = cfg.seed;
    } else {
        sim_gen(o.seed, o.bugs, &cfg);
    }
    sim_world *w;
    if (sim_world_new(&w) != KV_OK) return fprintf(stderr, "kvsim: out of memory\n"), EXIT_SIM;
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
        print_violation(&r);
        printf("scenario:\n");
        print_cfg(&cfg);
    } else if (r.sim_error != KV_OK) {
        printf("simulator resource exhausted: %s\n", kv_status_str(r.sim_error));
    } else {
        printf("clean\n");
    }
    sim_world_free(w);
    return verdict_code(&r);
}

typedef struct progress_ctx {
    int tty;
    double t0;
} progress_ctx;

static void progress(void *ctx, uint64_t done, uint64_t total, const sim_sweep *s) {
    progress_ctx *p = ctx;
    if (!p->tty || (done % 64 && done != total)) return;
    int width = 40, fill = (int)((double)done / (double)total * width);
    fprintf(stderr, "\r[%.*s%*s] %" PRIu64 "/%" PRIu64 "  violations %" PRIu64 "  %.1f s", fill,
            "========================================", width - fill, "", done, total, s->violations,
            wall_s() - p->t0);
    if (done == total) fputc('\n', stderr);
}

static void sweep_table(const sim_sweep *s, double secs) {
    printf("runs %" PRIu64 "   violations %" PRIu64 "   simulator errors %" PRIu64 "   wall %.2f s\n", s->runs,
           s->violations, s->sim_errors, secs);
    printf("events %" PRIu64 " (%.0f events/s)   request lifecycles %" PRIu64 " (%.0f/s)\n\n", s->events,
           (double)s->events / secs, s->requests, (double)s->requests / secs);
    printf("%-14s %12s %14s %s\n", "invariant", "violations", "armed", "first seed");
    for (uint32_t i = 0; i < KV_INV_COUNT; i++) {
        printf("%-14s %12" PRIu64 " %14" PRIu64 " ", kv_inv_name((kv_inv)i), s->by_inv[i], s->armed[i]);
        if (s->by_inv[i]) printf("%" PRIu64, s->first_seed[i]);
        printf("\n");
    }
    printf("\nfault kind x request phase (times a fault hit a request in that phase; non-abort faults under 'done')\n%-18s", "");
    for (uint32_t p = 0; p < KV_PH_COUNT; p++) printf(" %12s", kv_phase_name((kv_phase)p));
    printf("\n");
    for (uint32_t k = 1; k < SIM_F_KIND_COUNT; k++) {
        printf("%-18s", sim_fault_name(k));
        for (uint32_t p = 0; p < KV_PH_COUNT; p++) printf(" %12" PRIu64, s->fault_phase[k][p]);
        printf("\n");
    }
    if (s->first_violation_seed != UINT64_MAX) {
        printf("\nfirst violation: seed %" PRIu64 " (reproduce: kvsim run --seed %" PRIu64 "%s)\n", s->first_violation_seed,
               s->first_violation_seed, "");
        print_violation(&s->first);
    }
}

static void sweep_json(const sim_sweep *s, double secs) {
    printf("{\"runs\":%" PRIu64 ",\"violations\":%" PRIu64 ",\"sim_errors\":%" PRIu64 ",\"wall_s\":%.3f,"
           "\"events\":%" PRIu64 ",\"events_per_s\":%.0f,\"requests\":%" PRIu64 ",\"requests_per_s\":%.0f,\"by_invariant\":{",
           s->runs, s->violations, s->sim_errors, secs, s->events, (double)s->events / secs, s->requests,
           (double)s->requests / secs);
    for (uint32_t i = 0; i < KV_INV_COUNT; i++)
        printf("%s\"%s\":{\"violations\":%" PRIu64 ",\"armed\":%" PRIu64 "}", i ? "," : "", kv_inv_name((kv_inv)i),
               s->by_inv[i], s->armed[i]);
    printf("},\"first_violation_seed\":");
    if (s->first_violation_seed == UINT64_MAX) printf("null");
    else printf("%" PRIu64, s->first_violation_seed);
    printf("}\n");
}

static kv_status sweep_one(const opts *o, uint32_t si, uint32_t sn, progress_ctx *pc, sim_sweep *s) {
    sim_world *w;
    if (sim_world_new(&w) != KV_OK) return KV_ENOMEM;
    kv_status st = sim_sweep_run(w, o->from, o->to, o->bugs, o->stop, si, sn, pc ? progress : NULL, pc, s);
    sim_world_free(w);
    return st;
}

static void sweep_merge(sim_sweep *into, const sim_sweep *s) {
    into->runs += s->runs;
    into->violations += s->violations;
    into->sim_errors += s->sim_errors;
    into->events += s->events;
    into->requests += s->requests;
    for (uint32_t i = 0; i < KV_INV_COUNT; i++) {
        if (s->by_inv[i] && (!into->by_inv[i] || s->first_seed[i] < into->first_seed[i])) into->first_seed[i] = s->first_seed[i];
        into->by_inv[i] += s->by_inv[i];
        into->armed[i] += s->armed[i];
    }
    for (uint32_t k = 0; k < SIM_F_KIND_COUNT; k++)
        for (uint32_t p = 0; p < KV_PH_COUNT; p++) into->fault_phase[k][p] += s->fault_phase[k][p];
    if (s->first_violation_seed < into->first_violation_seed) {
        into->first_violation_seed = s->first_violation_seed;
        into->first = s->first;
    }
}

/* --jobs N: N child processes, shard i/N each (within the --shard given),
 * results back through a pipe as the raw summary struct. */
static kv_status sweep_jobs(const opts *o, sim_sweep *s) {
    int fds[64];
    pid_t pids[64];
    for (uint32_t j = 0; j < o->jobs; j++) {
        int p[2];
        if (pipe(p)) return KV_EIO;
        pid_t pid = fork();
        if (pid < 0) return KV_EIO;
        if (pid == 0) {
            close(p[0]);
            static sim_sweep mine;
            sim_sweep_init(&mine);
            kv_status st = sweep_one(o, o->shard_i * o->jobs + j, o->shard_n * o->jobs, NULL, &mine);
            ssize_t n = write(p[1], &mine, sizeof mine);
            _exit(st == KV_OK && n == (ssize_t)sizeof mine ? 0 : 1);
        }
        close(p[1]);
        fds[j] = p[0];
        pids[j] = pid;
    }
    kv_status st = KV_OK;
    for (uint32_t j = 0; j < o->jobs; j++) {
        static sim_sweep part;
        size_t got = 0;
        while (got < sizeof part) {
            ssize_t n = read(fds[j], (char *)&part + got, sizeof part - got);
            if (n <= 0) break;
            got += (size_t)n;
        }
        close(fds[j]);
        int wst = 0;
        waitpid(pids[j], &wst, 0);
        if (got != sizeof part || !WIFEXITED(wst) || WEXITSTATUS(wst)) st = KV_EIO;
        else sweep_merge(s, &part);
    }
    return st;
}

/* --hashes: one "seed trace-hash" line per seed, for cross-build checks. */
static int sweep_hashes(const opts *o) {
    sim_world *w;
    if (sim_world_new(&w) != KV_OK) return EXIT_SIM;
    static sim_world_cfg cfg;
    sim_result r;
    for (uint64_t seed = o->from; seed <= o->to; seed++) {
        sim_gen(seed, o->bugs, &cfg);
        if (sim_world_run(w, &cfg, NULL, &r) != KV_OK) return sim_world_free(w), EXIT_BAD_INPUT;
        printf("%" PRIu64 " %016" PRIx64 "%s\n", seed, r.trace_hash, r.violated ? " violated" : "");
        if (seed == UINT64_MAX) break;
    }
    sim_world_free(w);
    return EXIT_CLEAN;
}

static int cmd_sweep(int argc, char **argv) {
    opts o;
    int pr = parse_opts(argc, argv, "sweep", &o);
    if (pr == -2) return EXIT_CLEAN;
    if (pr) return EXIT_USAGE;
    if (!o.have_range) return fprintf(stderr, "kvsim sweep: give --seeds A..B\n"), usage("sweep");
    if (o.hashes) return sweep_hashes(&o);
    static sim_sweep s;
    sim_sweep_init(&s);
    progress_ctx pc = {.tty = isatty(2) && !o.json && o.jobs == 1, .t0 = wall_s()};
    kv_status st = o.jobs > 1 ? sweep_jobs(&o, &s) : sweep_one(&o, o.shard_i, o.shard_n, &pc, &s);
    double secs = wall_s() - pc.t0;
    if (st != KV_OK) return fprintf(stderr, "kvsim sweep: %s\n", kv_status_str(st)), EXIT_BAD_INPUT;
    if (secs <= 0) secs = 1e-9;
    if (o.json) sweep_json(&s, secs);
    else sweep_table(&s, secs);
    if (s.first_violation_seed != UINT64_MAX) return verdict_code(&s.first);
    return s.sim_errors ? EXIT_SIM : EXIT_CLEAN;
}

static int cmd_gen(int argc, char **argv) {
    opts o;
    int pr = parse_opts(argc, argv, "gen", &o);
    if (pr == -2) return EXIT_CLEAN;
    if (pr) return EXIT_USAGE;
    if (!o.have_seed) return fprintf(stderr, "kvsim gen: give --seed N\n"), usage("gen");
    static sim_world_cfg cfg;
    sim_gen(o.seed, o.bugs, &cfg);
    print_cfg(&cfg);
    return EXIT_CLEAN;
}

int main(int argc, char **argv) {
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(NULL);
        return argc < 2 ? EXIT_USAGE : EXIT_CLEAN;
    }
    if (!strcmp(argv[1], "run")) return cmd_run(argc, argv);
    if (!strcmp(argv[1], "sweep")) return cmd_sweep(argc, argv);
    if (!strcmp(argv[1], "gen")) return cmd_gen(argc, argv);
    fprintf(stderr, "kvsim: unknown command '%s'\n", argv[1]);
    return usage(NULL);
}
