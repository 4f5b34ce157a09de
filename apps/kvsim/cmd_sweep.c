/* kvsim sweep — generated scenarios over a seed range, in N processes. */
/* MAP_ANONYMOUS (the --jobs progress counters) is not in POSIX 2008 */
#define _DEFAULT_SOURCE
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "apps/kvsim/kvsim.h"
#include "sim/gen.h"
#include "sim/scenario.h"
#include "sim/sweep.h"
#include "replay/db.h"
#include "replay/finding.h"
#include "util/json.h"

/* The progress bar: on stderr, only when stderr is a terminal and stdout is
 * not JSON; one line redrawn in place (done/total, rate, ETA, violations so
 * far). With --jobs N the parent draws it from the counters the children
 * publish in shared memory. */
typedef struct progress_ctx {
    int tty;
    double t0, last;
    bool line_open;            /* a bar is on the line, not yet ended by a newline */
    volatile uint64_t *shared; /* --jobs child: [0] done, [1] violations of this job; NULL otherwise */
} progress_ctx;

static void progress_draw(progress_ctx *p, uint64_t done, uint64_t total, uint64_t violations) {
    double now = kvsim_wall_s(), el = now - p->t0;
    if (done != total && now - p->last < 0.2) return;
    p->last = now;
    int width = 30, fill = total ? (int)((double)done / (double)total * width) : width;
    double rate = el > 0 ? (double)done / el : 0;
    fprintf(stderr, "\r[%.*s%*s] %" PRIu64 "/%" PRIu64 "  %.0f runs/s  ", fill,
            "==============================", width - fill, "", done, total, rate);
    if (done == total) fprintf(stderr, "%.1f s", el);
    else if (rate > 0) fprintf(stderr, "ETA %.0f s", (double)(total - done) / rate);
    else fputs("ETA ?", stderr);
    fprintf(stderr, "  violations %" PRIu64 "   ", violations);
    p->line_open = done != total;
    if (done == total) fputc('\n', stderr);
}

static void progress(void *ctx, uint64_t done, uint64_t total, const sim_sweep *s) {
    progress_ctx *p = ctx;
    if (p->shared) {
        p->shared[0] = s->runs; /* this job's runs: the parent sums them */
        p->shared[1] = s->violations;
        return;
    }
    if (p->tty) progress_draw(p, done, total, s->violations);
}

/* The one command that reruns a sweep's seed: the generator (--workload),
 * the bug switches and the block memory (--kvmem) make the run; --jobs,
 * --shard, --stop and --db do not. */
static void reproduce(const kvsim_opts *o, uint64_t seed, kv_cmdline *c) {
    char num[24];
    snprintf(num, sizeof num, "%" PRIu64, seed);
    kv_cmdline_init(c, kvsim_prog);
    kv_cmdline_add(c, "run");
    kv_cmdline_add(c, "--seed");
    kv_cmdline_add(c, num);
    if (o->workload && strcmp(o->workload, "faults")) {
        kv_cmdline_add(c, "--workload");
        kv_cmdline_add(c, o->workload);
    }
    kvsim_cmdline_bugs(c, o->bugs);
    if (o->staged) {
        kv_cmdline_add(c, "--kvmem");
        kv_cmdline_add(c, "staged");
    }
}

static void sweep_table(const sim_sweep *s, double secs, const kvsim_opts *o) {
    const char *workload = o->workload;
    if (workload) printf("workload %s\n", workload);
    printf("runs %" PRIu64 "   violations %" PRIu64 "   simulator errors %" PRIu64 "   wall %.2f s\n", s->runs,
           s->violations, s->sim_errors, secs);
    printf("events %" PRIu64 " (%.0f events/s)   request lifecycles %" PRIu64 " (%.0f/s)\n", s->events,
           (double)s->events / secs, s->requests, (double)s->requests / secs);
    printf("connectors (runs by P's configuration):");
    for (uint32_t k = 1; k < KV_CONN_KIND_COUNT; k++) printf(" %s %" PRIu64, kv_conn_kind_name(k), s->conn_runs[k]);
    printf("\nstore jobs: %" PRIu64 " saves, %" PRIu64 " loads   rejected speculative loads %" PRIu64
           "   requests turned away %" PRIu64 "\n\n",
           s->store_saves, s->store_loads, s->rejected_loads, s->turned_away);
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
    printf("\nreach (rare combinations; docs/oracles.md)\n");
    for (uint32_t k = 0; k < SIM_R_COUNT; k++) printf("%-48s %12" PRIu64 "\n", sim_reach_name(k), s->reach[k]);
    if (s->first_violation_seed != UINT64_MAX) {
        kv_cmdline c;
        reproduce(o, s->first_violation_seed, &c);
        printf("\nfirst violation: seed %" PRIu64 "\n", s->first_violation_seed);
        kvsim_print_violation(&s->first);
        kvsim_print_reproduce(&c);
    }
}

/* --json: one kvconn.sweep document (docs/sweep-json.md). It names the
 * build and the parameters that made it, so shard outputs from several
 * machines can be checked against each other and combined (kvsim report). */
static void json_params(kv_json *j, const kvsim_opts *o) {
    kv_json_kobj(j, "params");
    kv_json_kstr(j, "workload", o->workload ? o->workload : "faults");
    kv_json_ku64(j, "first_seed", o->from);
    kv_json_ku64(j, "last_seed", o->to);
    kv_json_karr(j, "bugs");
    for (uint32_t b = 1; b; b <<= 1)
        if ((o->bugs & b) && strcmp(kv_bug_name(b), "?")) kv_json_str(j, kv_bug_name(b));
    kv_json_end(j);
    kv_json_kstr(j, "kvmem", o->staged ? "staged" : "host");
    kv_json_ku64(j, "shard_i", o->shard_i);
    kv_json_ku64(j, "shard_n", o->shard_n);
    kv_json_ku64(j, "jobs", o->jobs);
    kv_json_kbool(j, "stop", o->stop);
    kv_json_end(j);
}

static void json_totals(kv_json *j, const sim_sweep *s, double secs) {
    kv_json_kobj(j, "totals");
    kv_json_ku64(j, "runs", s->runs);
    kv_json_ku64(j, "violations", s->violations);
    kv_json_ku64(j, "sim_errors", s->sim_errors);
    kv_json_kf64(j, "wall_s", secs, 3);
    kv_json_ku64(j, "events", s->events);
    kv_json_kf64(j, "events_per_s", (double)s->events / secs, 0);
    kv_json_ku64(j, "requests", s->requests);
    kv_json_kf64(j, "requests_per_s", (double)s->requests / secs, 0);
    kv_json_ku64(j, "store_saves", s->store_saves);
    kv_json_ku64(j, "store_loads", s->store_loads);
    kv_json_ku64(j, "rejected_loads", s->rejected_loads);
    kv_json_ku64(j, "turned_away", s->turned_away);
    kv_json_end(j);
}

/* The fault kind x request phase table as the text table prints it: the
 * column names once, then one named row per fault kind. */
static void json_fault_phase(kv_json *j, const sim_sweep *s) {
    kv_json_kobj(j, "fault_phase");
    kv_json_karr(j, "phases");
    for (uint32_t p = 0; p < KV_PH_COUNT; p++) kv_json_str(j, kv_phase_name((kv_phase)p));
    kv_json_end(j);
    kv_json_karr(j, "rows");
    for (uint32_t k = 1; k < SIM_F_KIND_COUNT; k++) {
        kv_json_nl(j);
        kv_json_obj(j);
        kv_json_kstr(j, "kind", sim_fault_name(k));
        kv_json_karr(j, "counts");
        for (uint32_t p = 0; p < KV_PH_COUNT; p++) kv_json_u64(j, s->fault_phase[k][p]);
        kv_json_end(j);
        kv_json_end(j);
    }
    kv_json_end(j);
    kv_json_end(j);
}

static void json_first(kv_json *j, const sim_sweep *s, const kvsim_opts *o) {
    kv_json_key(j, "first_violation");
    if (s->first_violation_seed == UINT64_MAX) {
        kv_json_null(j);
        return;
    }
    const sim_result *r = &s->first;
    kv_cmdline c;
    reproduce(o, s->first_violation_seed, &c);
    kv_json_obj(j);
    kv_json_ku64(j, "seed", s->first_violation_seed);
    kv_json_kstr(j, "invariant", kv_inv_name(r->inv));
    kv_json_kstr(j, "detail", r->detail);
    kv_json_ku64(j, "event", r->event);
    kv_json_ku64(j, "at_ns", r->at_ns);
    kv_json_kstr(j, "actor", r->actor_name);
    /* as the table prints them: UINT32_MAX (none) reads -1 */
    kv_json_ki64(j, "engine", (int64_t)(int32_t)r->engine);
    kv_json_ki64(j, "request", (int64_t)(int32_t)r->req);
    kv_json_kstr(j, "reproduce", c.s);
    kv_json_end(j);
}

static int sweep_json(const sim_sweep *s, double secs, const kvsim_opts *o) {
    kv_json j;
    kv_cli_build b = kv_cli_build_info();
    kv_json_init(&j, stdout);
    kv_json_obj(&j);
    kv_json_kstr(&j, "schema", "kvconn.sweep");
    kv_json_ku64(&j, "schema_version", 1);
    kv_json_kobj(&j, "kvsim");
    kv_json_kstr(&j, "version", b.version);
    kv_json_kstr(&j, "commit", b.commit);
    kv_json_kstr(&j, "build", b.build);
    kv_json_end(&j);
    kv_json_nl(&j);
    json_params(&j, o);
    kv_json_nl(&j);
    json_totals(&j, s, secs);
    kv_json_nl(&j);
    kv_json_kobj(&j, "invariants");
    for (uint32_t i = 0; i < KV_INV_COUNT; i++) {
        kv_json_kobj(&j, kv_inv_name((kv_inv)i));
        kv_json_ku64(&j, "violations", s->by_inv[i]);
        kv_json_ku64(&j, "armed", s->armed[i]);
        kv_json_key(&j, "first_seed");
        if (s->by_inv[i]) kv_json_u64(&j, s->first_seed[i]);
        else kv_json_null(&j);
        kv_json_end(&j);
    }
    kv_json_end(&j);
    kv_json_nl(&j);
    kv_json_kobj(&j, "connectors");
    for (uint32_t k = 1; k < KV_CONN_KIND_COUNT; k++) kv_json_ku64(&j, kv_conn_kind_name(k), s->conn_runs[k]);
    kv_json_end(&j);
    kv_json_nl(&j);
    json_fault_phase(&j, s);
    kv_json_nl(&j);
    kv_json_kobj(&j, "reach");
    for (uint32_t k = 0; k < SIM_R_COUNT; k++) kv_json_ku64(&j, sim_reach_name(k), s->reach[k]);
    kv_json_end(&j);
    kv_json_nl(&j);
    json_first(&j, s, o);
    kv_json_end(&j);
    fputc('\n', stdout);
    if (kv_json_done(&j)) return fprintf(stderr, "kvsim sweep: --json: cannot write the document\n"), EXIT_BAD_INPUT;
    return EXIT_CLEAN;
}

/* --db FILE: every violation recorded as it happens, one transaction each,
 * by the process that found it (each --jobs child opens its own
 * connection). The run row is made before and finished after the sweep. */
typedef struct db_sink {
    const char *path;         /* NULL: no --db */
    const kvsim_opts *o;      /* for the reproduce line of a finding the database cannot hold */
    int64_t run;
    replay_db *db;            /* opened at the first finding, in the finding process */
    sim_world *w;             /* replay_fit's re-run */
    uint64_t recorded, new_cases;
    bool failed;              /* a write failed: the first error was printed, the rest skipped */
    replay_err err;
} db_sink;

static void record_finding(void *ctx, uint64_t seed, const sim_world_cfg *cfg, const sim_result *r) {
    db_sink *k = ctx;
    if (k->failed) return;
    kv_status st = KV_OK;
    if (!k->db) {
        st = replay_db_open(k->path, REPLAY_DB_WRITE, &k->db, &k->err);
        if (st == KV_OK && sim_world_new(&k->w) != KV_OK) st = replay_fail(&k->err, REPLAY_E_IO, "out of memory");
    }
    replay_source src = {.origin = REPLAY_ORIGIN_SWEEP, .have_seed = true, .seed = seed};
    replay_recorded rec = {0};
    replay_fit_how how = REPLAY_FIT_SAME;
    if (st == KV_OK) st = replay_record_run(k->db, k->run, k->w, cfg, r, &src, &rec, &how, &k->err);
    if (st != KV_OK) {
        k->failed = true;
        fprintf(stderr, "kvsim sweep: --db %s: %s\n", k->path, k->err.msg);
        return;
    }
    k->recorded += how != REPLAY_FIT_LOST;
    k->new_cases += rec.is_new;
    if (how == REPLAY_FIT_LOST) { /* never silent: the seed still reproduces it */
        kv_cmdline c;
        reproduce(k->o, seed, &c);
        fprintf(stderr,
                "kvsim sweep: --db %s: seed %" PRIu64 ": %s not recorded: its scenario is outside the format's "
                "ranges and the nearest one inside does not violate; reproduce: %s\n",
                k->path, seed, kv_inv_name(r->inv), c.s);
    }
}

static void sink_close(db_sink *k) {
    replay_db_close(k->db);
    sim_world_free(k->w);
    k->db = NULL;
    k->w = NULL;
}

static kv_status sweep_one(const kvsim_opts *o, uint32_t si, uint32_t sn, progress_ctx *pc, db_sink *k, sim_sweep *s) {
    sim_world *w;
    if (sim_world_new(&w) != KV_OK) return KV_ENOMEM;
    sim_world_set_kvmem(w, o->kvmem);
    sim_sweep_hooks h = {.progress = pc ? progress : NULL, .progress_ctx = pc,
                         .finding = k && k->path ? record_finding : NULL, .finding_ctx = k, .gen = o->gen};
    kv_status st = sim_sweep_run_hooks(w, o->from, o->to, o->bugs, o->stop, si, sn, &h, s);
    sim_world_free(w);
    if (k) sink_close(k);
    return st;
}

static void sweep_merge(sim_sweep *into, const sim_sweep *s) {
    into->runs += s->runs;
    into->violations += s->violations;
    into->sim_errors += s->sim_errors;
    into->events += s->events;
    into->requests += s->requests;
    into->rejected_loads += s->rejected_loads;
    into->turned_away += s->turned_away;
    into->store_saves += s->store_saves;
    into->store_loads += s->store_loads;
    for (uint32_t k = 0; k < KV_CONN_KIND_COUNT; k++) into->conn_runs[k] += s->conn_runs[k];
    for (uint32_t i = 0; i < KV_INV_COUNT; i++) {
        if (s->by_inv[i] && (!into->by_inv[i] || s->first_seed[i] < into->first_seed[i])) into->first_seed[i] = s->first_seed[i];
        into->by_inv[i] += s->by_inv[i];
        into->armed[i] += s->armed[i];
    }
    for (uint32_t k = 0; k < SIM_F_KIND_COUNT; k++)
        for (uint32_t p = 0; p < KV_PH_COUNT; p++) into->fault_phase[k][p] += s->fault_phase[k][p];
    for (uint32_t k = 0; k < SIM_R_COUNT; k++) into->reach[k] += s->reach[k];
    if (s->first_violation_seed < into->first_violation_seed) {
        into->first_violation_seed = s->first_violation_seed;
        into->first = s->first;
    }
}

/* --jobs N: the signal the parent got; forwarded to every child. */
static volatile sig_atomic_t g_signal;
static void on_signal(int sig) { g_signal = sig; }

/* Seeds of A..B that shard si/sn runs (seed % sn == si: sim/sweep.c). */
static uint64_t shard_seeds(const kvsim_opts *o, uint32_t si, uint32_t sn) {
    uint64_t first = o->from + ((uint64_t)si + sn - o->from % sn) % sn;
    if (first < o->from || first > o->to) return 0;
    return (o->to - first) / sn + 1;
}

/* --jobs N: N child processes, shard i/N each (within the --shard given),
 * results back through a pipe as the raw summary struct. The parent waits
 * on the pipes, draws the aggregated progress bar from the children's
 * shared counters, and forwards SIGINT, SIGTERM and SIGHUP to the
 * children, then dies of the same signal once they are gone, so no worker
 * is left behind. */
static kv_status sweep_jobs(const kvsim_opts *o, progress_ctx *pc, db_sink *k, sim_sweep *s) {
    int fds[64];
    pid_t pids[64];
    static const int sigs[] = {SIGINT, SIGTERM, SIGHUP};
    struct sigaction sa = {.sa_handler = on_signal}, old[3];
    sigemptyset(&sa.sa_mask);
    volatile uint64_t *shared = mmap(NULL, 64 * 2 * sizeof(uint64_t), PROT_READ | PROT_WRITE,
                                     MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (shared == MAP_FAILED) return KV_ENOMEM;
    for (int i = 0; i < 3; i++) sigaction(sigs[i], &sa, &old[i]);
    uint32_t started = 0;
    kv_status st = KV_OK;
    for (uint32_t j = 0; j < o->jobs && !g_signal; j++) {
        int p[2];
        if (pipe(p)) { st = KV_EIO; break; }
        pid_t pid = fork();
        if (pid < 0) { close(p[0]); close(p[1]); st = KV_EIO; break; }
        if (pid == 0) {
            for (int i = 0; i < 3; i++) sigaction(sigs[i], &old[i], NULL);
            close(p[0]);
            static sim_sweep mine;
            sim_sweep_init(&mine);
            progress_ctx cp = {.shared = shared + 2 * j};
            kv_status cst = sweep_one(o, o->shard_i * o->jobs + j, o->shard_n * o->jobs, &cp, k, &mine);
            ssize_t n = write(p[1], &mine, sizeof mine);
            _exit(cst == KV_OK && n == (ssize_t)sizeof mine ? (k->failed ? 2 : 0) : 1);
        }
        close(p[1]);
        fds[j] = p[0];
        pids[j] = pid;
        started++;
    }
    uint64_t total = 0;
    for (uint32_t j = 0; j < o->jobs; j++) total += shard_seeds(o, o->shard_i * o->jobs + j, o->shard_n * o->jobs);
    static sim_sweep part[64];
    size_t got[64] = {0};
    bool open_fd[64];
    for (uint32_t j = 0; j < started; j++) open_fd[j] = true;
    for (uint32_t left = started; left && !g_signal;) {
        struct pollfd pf[64];
        nfds_t n = 0;
        uint32_t which[64];
        for (uint32_t j = 0; j < started; j++)
            if (open_fd[j]) pf[n] = (struct pollfd){.fd = fds[j], .events = POLLIN}, which[n++] = j;
        int r = poll(pf, n, pc->tty ? 200 : -1);
        if (pc->tty) {
            uint64_t done = 0, viol = 0;
            for (uint32_t j = 0; j < started; j++) done += shared[2 * j], viol += shared[2 * j + 1];
            progress_draw(pc, done, total, viol);
        }
        if (r <= 0) continue; /* timeout, or EINTR (g_signal is checked above) */
        for (nfds_t i = 0; i < n; i++) {
            if (!(pf[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
            uint32_t j = which[i];
            ssize_t m = read(fds[j], (char *)&part[j] + got[j], sizeof part[j] - got[j]);
            if (m > 0) got[j] += (size_t)m;
            if (m <= 0 || got[j] == sizeof part[j]) open_fd[j] = false, left--;
        }
    }
    int sig = g_signal;
    if (pc->line_open) fputc('\n', stderr);
    for (uint32_t j = 0; j < started; j++) {
        if (sig) kill(pids[j], sig);
        close(fds[j]);
    }
    for (uint32_t j = 0; j < started; j++) {
        int wst = 0;
        while (waitpid(pids[j], &wst, 0) < 0 && errno == EINTR) {}
        if (sig) continue;
        if (got[j] == sizeof part[j] && WIFEXITED(wst) && WEXITSTATUS(wst) == 2) k->failed = true;
        if (got[j] != sizeof part[j] || !WIFEXITED(wst) || (WEXITSTATUS(wst) && WEXITSTATUS(wst) != 2)) st = KV_EIO;
        else sweep_merge(s, &part[j]);
    }
    munmap((void *)shared, 64 * 2 * sizeof(uint64_t));
    for (int i = 0; i < 3; i++) sigaction(sigs[i], &old[i], NULL);
    if (sig) {
        fprintf(stderr, "kvsim sweep: %s: stopped %u worker%s\n", strsignal(sig), started, started == 1 ? "" : "s");
        signal(sig, SIG_DFL);
        raise(sig);
    }
    if (started < o->jobs && st == KV_OK) st = KV_EIO;
    return st;
}

/* --hashes: one "seed trace-hash" line per seed, for cross-build checks. */
static int sweep_hashes(const kvsim_opts *o) {
    sim_world *w;
    if (sim_world_new(&w) != KV_OK) return EXIT_SIM;
    sim_world_set_kvmem(w, o->kvmem);
    static sim_world_cfg cfg;
    sim_result r;
    for (uint64_t seed = o->from; seed <= o->to; seed++) {
        o->gen(seed, o->bugs, &cfg);
        if (sim_world_run(w, &cfg, NULL, &r) != KV_OK) return sim_world_free(w), EXIT_BAD_INPUT;
        printf("%" PRIu64 " %016" PRIx64 "%s\n", seed, r.trace_hash, r.violated ? " violated" : "");
        if (seed == UINT64_MAX) break;
    }
    sim_world_free(w);
    return EXIT_CLEAN;
}

typedef struct run_counts_ctx {
    const db_sink *k;
    FILE *out;                /* stderr under --json, so stdout stays one JSON object */
} run_counts_ctx;

static void print_run_counts(void *ctx, const replay_run_info *r) {
    const run_counts_ctx *c = ctx;
    const db_sink *k = c->k;
    if (r->id == k->run)
        fprintf(c->out, "findings database %s: run %" PRId64 ", %" PRId64 " findings recorded, %" PRId64 " new cases\n",
                k->path, r->id, r->findings, r->new_cases);
}

/* Opens the run row (before) or closes it and prints its counts (after). */
static int sink_run(db_sink *k, int argc, char **argv, bool begin, uint64_t scenarios, bool json) {
    replay_db *db;
    replay_err err = {0};
    kv_status st = replay_db_open(k->path, REPLAY_DB_WRITE, &db, &err);
    if (st == KV_OK && begin) {
        char config[512];
        size_t n = 0;
        config[0] = 0;
        for (int i = 2; i < argc && n + 1 < sizeof config; i++)
            n += (size_t)snprintf(config + n, sizeof config - n, "%s%s", i > 2 ? " " : "", argv[i]);
        st = replay_db_run_begin(db, "kvsim sweep", config, &k->run, &err);
    } else if (st == KV_OK) {
        st = replay_db_run_end(db, k->run, scenarios, &err);
        run_counts_ctx c = {.k = k, .out = json ? stderr : stdout};
        if (st == KV_OK) st = replay_db_each_run(db, print_run_counts, &c, &err);
    }
    replay_db_close(db);
    return st == KV_OK ? EXIT_CLEAN : kvsim_db_fail("sweep", &err);
}

static const int accepts[] = {KO_SEEDS, KO_WORKLOAD, KO_BUG, KO_JOBS, KO_SHARD, KO_STOP, KO_JSON,
                              KO_HASHES, KO_DB, KO_KVMEM, KO_END};

static int cmd_sweep(int argc, char **argv) {
    kvsim_opts o;
    db_sink sink = {0};
    int pr = kvsim_parse_opts(argc, argv, "sweep", accepts, 0, &o);
    if (pr == -2) return EXIT_CLEAN;
    if (pr) return EXIT_USAGE;
    sink.path = o.db;
    sink.o = &o;
    if (!o.have_range) return fprintf(stderr, "kvsim sweep: give --seeds A..B\n"), kvsim_usage("sweep");
    if (o.hashes && sink.path) return fprintf(stderr, "kvsim sweep: --db does not go with --hashes\n"), EXIT_USAGE;
    if (o.hashes && (o.json || o.stop || o.jobs > 1 || o.shard_n > 1))
        return fprintf(stderr, "kvsim sweep: --hashes prints one line per seed, in one process: it does not go with %s\n",
                       o.json ? "--json" : o.stop ? "--stop" : o.jobs > 1 ? "--jobs" : "--shard"),
               EXIT_USAGE;
    if (o.hashes) return sweep_hashes(&o);
    int rc = sink.path ? sink_run(&sink, argc, argv, true, 0, o.json) : EXIT_CLEAN;
    if (rc) return rc;
    static sim_sweep s;
    sim_sweep_init(&s);
    progress_ctx pc = {.tty = isatty(2) && !o.json, .t0 = kvsim_wall_s()};
    kv_status st = o.jobs > 1 ? sweep_jobs(&o, &pc, &sink, &s) : sweep_one(&o, o.shard_i, o.shard_n, &pc, &sink, &s);
    double secs = kvsim_wall_s() - pc.t0;
    if (st != KV_OK) return fprintf(stderr, "kvsim sweep: %s\n", kv_status_str(st)), EXIT_BAD_INPUT;
    if (secs <= 0) secs = 1e-9;
    if (o.json && (rc = sweep_json(&s, secs, &o))) return rc;
    if (!o.json) sweep_table(&s, secs, &o);
    if (sink.path && (rc = sink_run(&sink, argc, argv, false, s.runs, o.json))) return rc;
    if (sink.failed) return fprintf(stderr, "kvsim sweep: some findings were not recorded in %s\n", sink.path), EXIT_DB_READONLY;
    if (s.first_violation_seed != UINT64_MAX) return kvsim_verdict_code(&s.first);
    return s.sim_errors ? EXIT_SIM : EXIT_CLEAN;
}

const kvsim_cmd kvsim_cmd_sweep = {
    "sweep",
    "kvsim sweep --seeds A..B [--workload faults|steady|load] [--bug NAME]... [--jobs N] [--shard I/N] [--stop] [--json]\n"
    "            [--hashes] [--db FILE] [--kvmem host|staged]\n"
    "  Runs generated scenarios for every seed in A..B; prints a summary table\n"
    "  --workload: faults (the default: random topologies, connectors and fault\n"
    "  plans), steady (P/D serving traffic without faults) or load (overload:\n"
    "  64-256 requests with up to 32 faults; sim/gen.h)\n"
    "  (or one kvconn.sweep JSON document with --json, docs/sweep-json.md;\n"
    "  --hashes prints each seed's trace hash).\n"
    "  --db FILE records every violation in the findings database FILE as it is\n"
    "  found (one transaction each, deduplicated by signature; see kvsim db).\n"
    "  --kvmem staged: every worker keeps its KV apart from the memory the\n"
    "  transport uses, as device memory with a pinned mirror would (core/kvmem.h);\n"
    "  the trace hashes must equal those of host memory (the default).\n"
    "  A violation prints the one command that reproduces the first violating\n"
    "  seed ('reproduce: ...'; first_violation.reproduce in the JSON).\n",
    cmd_sweep};
