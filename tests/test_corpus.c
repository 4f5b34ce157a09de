/* tests/test_corpus.c — replays every scenario in corpus/scenarios/ (the
 * regression corpus) and corpus/conformance/ (one scenario per applicable
 * test of vLLM's connector suites, docs/conformance.md): each must run clean
 * with every bug switch off, its trace hash is stable (and the same with a
 * text trace on), every "# expect ..." line must hold for the run's outcome
 * (docs/kvs-format.md, "Comment lines that tools read"), and for each
 * "# expect-bug NAME INVARIANT" line it must violate that invariant with the
 * switch on. An "# expect" line of an unknown kind fails the file. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sim/scenario.h"
#include "sim/world.h"

#define CORPUS "corpus/scenarios"
#define CONFORMANCE "corpus/conformance"

static kv_inv inv_by_name(const char *n) {
    for (uint32_t i = 0; i < KV_INV_COUNT; i++)
        if (!strcmp(kv_inv_name((kv_inv)i), n)) return (kv_inv)i;
    return KV_INV_COUNT;
}

/* What one clean run exposes to "# expect" lines. */
typedef struct run_view {
    const sim_world *w;
    const sim_scenario *sc;
    const sim_result *r;
    const char *trace;   /* the run's text trace (NUL-ended) */
} run_view;

/* An engine counter summed over every engine of the run (the process in
 * each engine's place at the end). */
static uint64_t engine_sum(const run_view *v, size_t off) {
    uint64_t sum = 0;
    for (uint32_t i = 0; i < v->sc->cfg.n_p + v->sc->cfg.n_d; i++) {
        const kv_engine *e = sim_world_engine(v->w, i);
        if (e) sum += *(const uint64_t *)((const char *)&e->stats + off);
    }
    return sum;
}

#define ENG(field) {#field, offsetof(kv_engine_stats, field), NULL}
typedef uint64_t (*res_get)(const sim_result *r);
static uint64_t g_ok(const sim_result *r) { return r->requests_ok; }
static uint64_t g_err(const sim_result *r) { return r->requests_error; }
static uint64_t g_abort(const sim_result *r) { return r->requests_aborted; }
static uint64_t g_rej(const sim_result *r) { return r->rejected_loads; }
static uint64_t g_away(const sim_result *r) { return r->turned_away; }
static uint64_t g_saves(const sim_result *r) { return r->store_saves; }
static uint64_t g_loads(const sim_result *r) { return r->store_loads; }
static uint64_t g_puts(const sim_result *r) { return r->store.puts; }
static uint64_t g_put_keys(const sim_result *r) { return r->store.put_keys; }
static uint64_t g_gets(const sim_result *r) { return r->store.gets; }
static uint64_t g_hits(const sim_result *r) { return r->store.get_hits; }
static uint64_t g_miss(const sim_result *r) { return r->store.get_misses; }
static uint64_t g_sfail(const sim_result *r) { return r->store.failures; }
static uint64_t g_evict(const sim_result *r) { return r->store.evictions; }
static uint64_t g_exists(const sim_result *r) { return r->store.exists; }

static const struct counter {
    const char *name;
    size_t eng_off;      /* engine counter (when get is NULL) */
    res_get get;         /* run-result counter */
} counters[] = {
    {"ok", 0, g_ok},
    {"errors", 0, g_err},
    {"aborted", 0, g_abort},
    ENG(finished_recving),
    ENG(finished_sending),
    ENG(load_errors),
    ENG(recomputes),
    ENG(preemptions),
    ENG(prefix_hit_tokens),
    ENG(aborts_after_recv),
    ENG(resumed_hits),
    ENG(drafts),
    ENG(drafts_accepted),
    {"rejected_loads", 0, g_rej},
    {"turned_away", 0, g_away},
    {"store_saves", 0, g_saves},
    {"store_loads", 0, g_loads},
    {"store_puts", 0, g_puts},
    {"store_put_keys", 0, g_put_keys},
    {"store_gets", 0, g_gets},
    {"store_get_hits", 0, g_hits},
    {"store_get_misses", 0, g_miss},
    {"store_failures", 0, g_sfail},
    {"store_evictions", 0, g_evict},
    {"store_exists", 0, g_exists},
};

static const char *outcome_name(uint8_t o) {
    switch (o) {
    case KV_OUT_OK: return "ok";
    case KV_OUT_ERROR: return "error";
    case KV_OUT_ABORTED: return "aborted";
    default: return "pending";
    }
}

/* Reads a request index token; false (and why) when it is not one. */
static bool req_index(const run_view *v, const char *tok, uint32_t *out, char *why, size_t n) {
    char *end;
    unsigned long id = tok ? strtoul(tok, &end, 10) : 0;
    if (!tok || !*tok || *end) {
        snprintf(why, n, "expected a request index, got '%s'", tok ? tok : "");
        return false;
    }
    if (id >= v->sc->cfg.n_reqs) {
        snprintf(why, n, "request %lu does not exist (the scenario has %u)", id, v->sc->cfg.n_reqs);
        return false;
    }
    *out = (uint32_t)id;
    return true;
}

/* Checks one "# expect" line's text (after "# expect "). Returns false with
 * why filled when the line is malformed or does not hold. */
static bool check_expect(const run_view *v, const char *text, char *why, size_t n) {
    char buf[512];
    snprintf(buf, sizeof buf, "%.500s", text);
    buf[strcspn(buf, "\r\n")] = 0;
    if (!strncmp(buf, "log ", 4)) {
        const char *want = buf + 4;
        while (*want == ' ') want++;
        if (!*want) {
            snprintf(why, n, "'expect log' needs a text");
            return false;
        }
        if (!strstr(v->trace, want)) {
            snprintf(why, n, "the trace has no line containing \"%.200s\"", want);
            return false;
        }
        return true;
    }
    char *save = NULL;
    const char *kind = strtok_r(buf, " \t", &save);
    if (!kind) {
        snprintf(why, n, "empty expect line");
        return false;
    }
    if (!strcmp(kind, "clean")) { /* the caller has already required it */
        if (strtok_r(NULL, " \t", &save)) {
            snprintf(why, n, "'expect clean' takes no arguments");
            return false;
        }
        return true;
    }
    if (!strcmp(kind, "req")) {
        uint32_t id;
        if (!req_index(v, strtok_r(NULL, " \t", &save), &id, why, n)) return false;
        const char *want = strtok_r(NULL, " \t", &save);
        if (!want || (strcmp(want, "ok") && strcmp(want, "error") && strcmp(want, "aborted"))) {
            snprintf(why, n, "'expect req %u' needs ok, error or aborted, got '%s'", id, want ? want : "");
            return false;
        }
        if (strtok_r(NULL, " \t", &save)) {
            snprintf(why, n, "extra text after 'expect req %u %s'", id, want);
            return false;
        }
        const kv_proxy_req *q = kv_proxy_slot(sim_world_proxy(v->w), id);
        const char *got = q && q->used && q->id == id ? outcome_name(q->outcome) : "never submitted";
        if (strcmp(got, want)) {
            snprintf(why, n, "request %u ended %s, expected %s", id, got, want);
            return false;
        }
        return true;
    }
    if (!strcmp(kind, "order")) {
        uint32_t prev = UINT32_MAX, id, count = 0;
        const char *tok;
        while ((tok = strtok_r(NULL, " \t", &save))) {
            if (!req_index(v, tok, &id, why, n)) return false;
            const kv_proxy_req *q = kv_proxy_slot(sim_world_proxy(v->w), id);
            if (!q || !q->used || q->id != id || q->outcome == KV_OUT_PENDING) {
                snprintf(why, n, "request %u never ended", id);
                return false;
            }
            if (prev != UINT32_MAX) {
                const kv_proxy_req *p = kv_proxy_slot(sim_world_proxy(v->w), prev);
                if (p->done_ns > q->done_ns) {
                    snprintf(why, n, "request %u ended at %" PRIu64 " ns, after request %u (%" PRIu64 " ns)", prev,
                             p->done_ns, id, q->done_ns);
                    return false;
                }
            }
            prev = id;
            count++;
        }
        if (count < 2) {
            snprintf(why, n, "'expect order' needs two or more request indices");
            return false;
        }
        return true;
    }
    for (size_t i = 0; i < sizeof counters / sizeof counters[0]; i++) {
        if (strcmp(kind, counters[i].name)) continue;
        const char *val = strtok_r(NULL, " \t", &save);
        if (!val) {
            snprintf(why, n, "'expect %s' needs a value (N, >=N or <=N)", kind);
            return false;
        }
        int op = 0; /* 0: ==, 1: >=, -1: <= */
        if (!strncmp(val, ">=", 2)) op = 1, val += 2;
        else if (!strncmp(val, "<=", 2)) op = -1, val += 2;
        char *end;
        unsigned long long want = strtoull(val, &end, 10);
        if (!*val || *end || strtok_r(NULL, " \t", &save)) {
            snprintf(why, n, "'expect %s' needs N, >=N or <=N (a decimal count)", kind);
            return false;
        }
        uint64_t got = counters[i].get ? counters[i].get(v->r) : engine_sum(v, counters[i].eng_off);
        bool holds = op == 0 ? got == want : op > 0 ? got >= want : got <= want;
        if (!holds) {
            snprintf(why, n, "%s is %" PRIu64 ", expected %s%llu", kind, got, op == 0 ? "" : op > 0 ? ">=" : "<=",
                     want);
            return false;
        }
        return true;
    }
    snprintf(why, n, "unknown expect kind '%s'", kind);
    return false;
}

/* Runs path clean and checks its "# expect" lines; returns false with
 * msg ("FILE:LINE: what differed") at the first that does not hold.
 * *n_expects counts the lines checked. */
static bool replay_expects(sim_world *w, const char *path, sim_scenario *sc, char *msg, size_t n,
                           uint32_t *n_expects) {
    sim_result r, traced;
    cr_assert_eq(sim_world_run(w, &sc->cfg, NULL, &r), KV_OK, "%s", path);
    if (r.violated || r.sim_error != KV_OK) {
        snprintf(msg, n, "%s: not clean: %s: %s (sim error %d)", path, r.violated ? kv_inv_name(r.inv) : "-",
                 r.violated ? r.detail : "-", (int)r.sim_error);
        return false;
    }
    char *trace = NULL;
    size_t trace_len = 0;
    FILE *tf = open_memstream(&trace, &trace_len);
    cr_assert_not_null(tf);
    cr_assert_eq(sim_world_run(w, &sc->cfg, tf, &traced), KV_OK, "%s", path);
    fclose(tf);
    if (traced.trace_hash != r.trace_hash) {
        snprintf(msg, n, "%s: replay is not bit-for-bit (or a text trace changes it)", path);
        free(trace);
        return false;
    }
    run_view v = {w, sc, &traced, trace};
    if (getenv("KVCONN_EXPECT_DUMP")) { /* for writing expectations: every counter, every outcome */
        fprintf(stderr, "%s:", path);
        for (size_t i = 0; i < sizeof counters / sizeof counters[0]; i++)
            fprintf(stderr, " %s=%" PRIu64, counters[i].name,
                    counters[i].get ? counters[i].get(&traced) : engine_sum(&v, counters[i].eng_off));
        for (uint32_t id = 0; id < sc->cfg.n_reqs; id++)
            fprintf(stderr, " req%u=%s@%" PRIu64, id, outcome_name(kv_proxy_slot(sim_world_proxy(w), id)->outcome),
                    kv_proxy_slot(sim_world_proxy(w), id)->done_ns);
        fputc('\n', stderr);
    }
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f, "%s", path);
    char line[600], why[400];
    unsigned lineno = 0;
    bool ok = true;
    while (ok && fgets(line, sizeof line, f)) {
        lineno++;
        if (strncmp(line, "# expect", 8)) continue;
        const char *rest = line + 8;
        if (*rest == '-') {
            if (strncmp(rest, "-bug ", 5)) {
                snprintf(msg, n, "%s:%u: unknown directive '# expect%.*s'", path, lineno, (int)strcspn(rest, " \t\r\n"),
                         rest);
                ok = false;
            }
            continue; /* expect-bug: the caller checks it */
        }
        if (*rest != ' ' && *rest != '\t') {
            snprintf(msg, n, "%s:%u: malformed expect line", path, lineno);
            ok = false;
            continue;
        }
        if (!check_expect(&v, rest + 1, why, sizeof why)) {
            snprintf(msg, n, "%s:%u: %s", path, lineno, why);
            ok = false;
        }
        (*n_expects)++;
    }
    fclose(f);
    free(trace);
    return ok;
}

static void replay_file(sim_world *w, const char *path, uint32_t *n_bug_checks, uint32_t *n_expects) {
    static sim_scenario sc;
    sim_parse_error err;
    kv_status st = sim_scenario_load(path, &sc, &err);
    cr_assert_eq(st, KV_OK, "%s:%u:%u: %s", path, err.line, err.col, err.msg);
    cr_assert_eq(sc.cfg.bugs, 0, "%s: corpus files keep 'bugs none'; switches come from expect-bug", path);
    char msg[1024];
    bool ok = replay_expects(w, path, &sc, msg, sizeof msg, n_expects);
    cr_assert(ok, "%s", msg);
    sim_result r;
    FILE *f = fopen(path, "r");
    char line[512];
    while (f && fgets(line, sizeof line, f)) {
        char bug[64], inv[32];
        if (sscanf(line, "# expect-bug %63s %31s", bug, inv) != 2) continue;
        uint32_t bit = kv_bug_parse(bug);
        kv_inv want = inv_by_name(inv);
        cr_assert_neq(bit, 0, "%s: unknown bug %s", path, bug);
        cr_assert_neq(want, KV_INV_COUNT, "%s: unknown invariant %s", path, inv);
        sc.cfg.bugs = bit;
        cr_assert_eq(sim_world_run(w, &sc.cfg, NULL, &r), KV_OK);
        cr_assert(r.violated, "%s: clean with %s on", path, bug);
        cr_assert_eq(r.inv, want, "%s with %s: %s instead of %s (%s)", path, bug, kv_inv_name(r.inv), inv, r.detail);
        sc.cfg.bugs = 0;
        (*n_bug_checks)++;
    }
    if (f) fclose(f);
}

/* Replays every .kvs of dir; returns how many. */
static uint32_t replay_dir(const char *dir, uint32_t *bug_checks, uint32_t *expects, bool cite) {
    sim_world *w;
    cr_assert_eq(sim_world_new(&w), KV_OK);
    DIR *d = opendir(dir);
    cr_assert_not_null(d, "cannot open %s (tests run from the repository root)", dir);
    struct dirent *e;
    uint32_t files = 0;
    char path[512];
    while ((e = readdir(d))) {
        size_t n = strlen(e->d_name);
        if (n < 5 || strcmp(e->d_name + n - 4, ".kvs")) continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        uint32_t before = *expects;
        replay_file(w, path, bug_checks, expects);
        if (cite) {
            /* a conformance scenario names the vLLM test it stands for and
             * checks more of the outcome than "clean" */
            FILE *f = fopen(path, "r");
            char line[512];
            bool cited = false;
            while (f && fgets(line, sizeof line, f))
                if (!strncmp(line, "# vllm-test ", 12)) cited = true;
            if (f) fclose(f);
            cr_assert(cited, "%s: no '# vllm-test FILE::NAME' line", path);
            cr_assert_geq(*expects - before, 2, "%s: a conformance scenario needs outcome expectations", path);
        }
        files++;
    }
    closedir(d);
    sim_world_free(w);
    return files;
}

Test(corpus, every_scenario_replays_as_recorded, .timeout = 300) {
    uint32_t bug_checks = 0, expects = 0;
    uint32_t files = replay_dir(CORPUS, &bug_checks, &expects, false);
    cr_assert_geq(files, 11, "corpus has %u scenarios", files);
    cr_assert_geq(bug_checks, 5, "every seed bug has a scenario (%u checks)", bug_checks);
}

Test(corpus, conformance_scenarios_meet_their_expectations, .timeout = 300) {
    uint32_t bug_checks = 0, expects = 0;
    uint32_t files = replay_dir(CONFORMANCE, &bug_checks, &expects, true);
    cr_assert_geq(files, 10, "conformance corpus has %u scenarios", files);
}

/* Writes TEXT as a scenario file, replays its expectations, removes it:
 * true when they all held; msg says what differed, path is the file it
 * was written to, n counts the expect lines checked. */
static bool expects_of(const char *text, char *path, char *msg, size_t cap, uint32_t *n) {
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    FILE *f = fdopen(fd, "w");
    cr_assert_not_null(f);
    fputs(text, f);
    fclose(f);
    static sim_scenario sc;
    sim_parse_error err;
    cr_assert_eq(sim_scenario_load(path, &sc, &err), KV_OK, "%s", err.msg);
    sim_world *w;
    cr_assert_eq(sim_world_new(&w), KV_OK);
    bool ok = replay_expects(w, path, &sc, msg, cap, n);
    sim_world_free(w);
    unlink(path);
    return ok;
}

/* A wrong or unknown expectation fails, and the message names the file, the
 * line and what differed. */
static void expect_fails(const char *expect_line, const char *needle) {
    char path[] = "/tmp/kvconn-expect-XXXXXX", text[512], msg[1024] = "";
    snprintf(text, sizeof text,
             "# negative test\nkvs 6\nseed 3\ntopology p=1 d=1\nreq at=1000000 prompt=40 max=4 seq=1\n"
             "# expect clean\n%s\n",
             expect_line);
    uint32_t n = 0;
    cr_assert(!expects_of(text, path, msg, sizeof msg, &n), "'%s' passed", expect_line);
    cr_assert(strstr(msg, path) && strstr(msg, ":7: "), "message does not name the file and line 7: %s", msg);
    cr_assert(strstr(msg, needle), "message '%s' lacks '%s'", msg, needle);
}

Test(corpus, wrong_expectations_fail) {
    expect_fails("# expect req 0 error", "request 0 ended ok, expected error");
    expect_fails("# expect req 1 ok", "request 1 does not exist");
    expect_fails("# expect ok 2", "ok is 1, expected 2");
    expect_fails("# expect load_errors >=1", "load_errors is 0, expected >=1");
    expect_fails("# expect finished_recving <=0", "finished_recving is 1, expected <=0");
    expect_fails("# expect log Timeout waiting for P side ready.", "no line containing");
    expect_fails("# expect order 0", "two or more");
    expect_fails("# expect pulsl 1", "unknown expect kind 'pulsl'");
    expect_fails("# expect-bgu err_early_return INV-LIVE", "unknown directive '# expect-bgu'");
    expect_fails("# expectclean", "malformed expect line");
    expect_fails("# expect clean please", "takes no arguments");
}

/* The same scenario with right expectations passes (the negative test's
 * control). */
Test(corpus, right_expectations_pass) {
    char path[] = "/tmp/kvconn-expect-XXXXXX", msg[1024] = "";
    uint32_t n = 0;
    bool ok = expects_of("kvs 6\nseed 3\ntopology p=1 d=1\nreq at=1000000 prompt=40 max=4 seq=1\n# expect clean\n"
                         "# expect req 0 ok\n# expect ok 1\n# expect errors 0\n# expect finished_recving 1\n"
                         "# expect finished_sending >=1\n# expect load_errors <=0\n",
                         path, msg, sizeof msg, &n);
    cr_assert(ok, "%s", msg);
    cr_assert_eq(n, 7);
}
