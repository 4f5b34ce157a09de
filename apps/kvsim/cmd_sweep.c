/* kvsim sweep — generated scenarios over a seed range, in N processes. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "apps/kvsim/kvsim.h"
#include "sim/gen.h"
#include "sim/scenario.h"
#include "sim/sweep.h"

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
            kvsim_wall_s() - p->t0);
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
        kvsim_print_violation(&s->first);
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

static kv_status sweep_one(const kvsim_opts *o, uint32_t si, uint32_t sn, progress_ctx *pc, sim_sweep *s) {
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
static kv_status sweep_jobs(const kvsim_opts *o, sim_sweep *s) {
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
static int sweep_hashes(const kvsim_opts *o) {
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
    kvsim_opts o;
    int pr = kvsim_parse_opts(argc, argv, "sweep", &o);
    if (pr == -2) return EXIT_CLEAN;
    if (pr) return EXIT_USAGE;
    if (!o.have_range) return fprintf(stderr, "kvsim sweep: give --seeds A..B\n"), kvsim_usage("sweep");
    if (o.hashes) return sweep_hashes(&o);
    static sim_sweep s;
    sim_sweep_init(&s);
    progress_ctx pc = {.tty = isatty(2) && !o.json && o.jobs == 1, .t0 = kvsim_wall_s()};
    kv_status st = o.jobs > 1 ? sweep_jobs(&o, &s) : sweep_one(&o, o.shard_i, o.shard_n, &pc, &s);
    double secs = kvsim_wall_s() - pc.t0;
    if (st != KV_OK) return fprintf(stderr, "kvsim sweep: %s\n", kv_status_str(st)), EXIT_BAD_INPUT;
    if (secs <= 0) secs = 1e-9;
    if (o.json) sweep_json(&s, secs);
    else sweep_table(&s, secs);
    if (s.first_violation_seed != UINT64_MAX) return kvsim_verdict_code(&s.first);
    return s.sim_errors ? EXIT_SIM : EXIT_CLEAN;
}

const kvsim_cmd kvsim_cmd_sweep = {
    "sweep",
    "kvsim sweep --seeds A..B [--bug NAME]... [--jobs N] [--shard I/N] [--stop] [--json] [--hashes]\n"
    "  Runs generated scenarios for every seed in A..B; prints a summary table\n"
    "  (or one JSON object with --json; --hashes prints each seed's trace hash).\n",
    cmd_sweep};
