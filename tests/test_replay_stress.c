/* tests/test_replay_stress.c — the findings database under the load the
 * sweeps and fuzzers put on it: four writer processes recording 1,000
 * findings each at once (every row lands, no "database is locked"), and
 * writers killed with SIGKILL, inside a transaction and at arbitrary
 * points (the file passes integrity_check and every committed finding is
 * there). */
#include <criterion/criterion.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "replay/db.h"

#define WRITERS 4
#define PER_WRITER 1000

static char dir[64], db_path[128];

static void setup(void) {
    snprintf(dir, sizeof dir, "/tmp/kvconn-stress-XXXXXX");
    cr_assert_not_null(mkdtemp(dir));
    snprintf(db_path, sizeof db_path, "%s/stress.db", dir);
}

static void teardown(void) {
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    cr_assert_eq(system(cmd), 0);
}

TestSuite(replay_stress, .init = setup, .fini = teardown, .timeout = 240);

/* Finding number i of writer k: its own signature (numbers in the detail
 * are normalised away, so the identity is spelled in letters). */
static void finding(int k, int i, sim_result *r) {
    memset(r, 0, sizeof *r);
    r->violated = true;
    r->inv = KV_INV_DATA;
    snprintf(r->actor_name, sizeof r->actor_name, "D0.w0.main");
    snprintf(r->detail, sizeof r->detail, "writer %c finding %c%c%c", 'a' + k, 'a' + i / 676,
             'a' + i / 26 % 26, 'a' + i % 26);
    r->trace_hash = (uint64_t)(k * 100000 + i);
}

/* Records findings [0, n) of writer k, one transaction each; writes one
 * byte to report_fd after each commit. Exit status: 0 ok, 1 an error
 * (printed). */
static int writer(int k, int n, int report_fd, void (*hook)(void *), void *hook_ctx) {
    static sim_scenario sc;
    sim_scenario_init(&sc);
    replay_db *db;
    replay_err err = {0};
    if (replay_db_open(db_path, REPLAY_DB_WRITE, &db, &err) != KV_OK) {
        fprintf(stderr, "writer %d: %s\n", k, err.msg);
        return 1;
    }
    replay_db_set_commit_hook(db, hook, hook_ctx);
    int64_t run = 0;
    if (replay_db_run_begin(db, "stress", "writer", &run, &err) != KV_OK)
        return fprintf(stderr, "%s\n", err.msg), 1;
    for (int i = 0; i < n; i++) {
        sim_result r;
        finding(k, i, &r);
        replay_finding f = {.origin = REPLAY_ORIGIN_FUZZ, .sc = &sc, .r = &r};
        replay_recorded rec;
        if (replay_db_record(db, run, &f, &rec, &err) != KV_OK) {
            fprintf(stderr, "writer %d finding %d: %s\n", k, i, err.msg);
            return 1;
        }
        if (report_fd >= 0 && write(report_fd, "c", 1) != 1)
            return 1;
    }
    replay_db_close(db);
    return 0;
}

static int64_t count(sqlite3 *h, const char *sql) {
    sqlite3_stmt *st;
    cr_assert_eq(sqlite3_prepare_v2(h, sql, -1, &st, NULL), SQLITE_OK, "%s: %s", sql,
                 sqlite3_errmsg(h));
    cr_assert_eq(sqlite3_step(st), SQLITE_ROW);
    int64_t v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return v;
}

static void expect_intact(sqlite3 *h) {
    sqlite3_stmt *st;
    cr_assert_eq(sqlite3_prepare_v2(h, "PRAGMA integrity_check", -1, &st, NULL), SQLITE_OK);
    cr_assert_eq(sqlite3_step(st), SQLITE_ROW);
    cr_assert_str_eq((const char *)sqlite3_column_text(st, 0), "ok");
    sqlite3_finalize(st);
}

static sqlite3 *open_raw(void) {
    sqlite3 *h;
    cr_assert_eq(sqlite3_open(db_path, &h), SQLITE_OK);
    sqlite3_busy_timeout(h, 10000);
    return h;
}

/* n writer processes, writer k recording per findings, released together
 * (the parent closes a pipe they wait on) so that they open the file at
 * the same moment; each must exit 0. */
static void run_writers(int n, int per, const char *what) {
    int go[2];
    cr_assert_eq(pipe(go), 0);
    pid_t pid[8];
    cr_assert_leq(n, 8);
    for (int k = 0; k < n; k++) {
        pid[k] = fork();
        cr_assert_geq(pid[k], 0);
        if (pid[k] == 0) {
            close(go[1]);
            char b;
            if (read(go[0], &b, 1) != 0) _exit(3); /* EOF: released */
            _exit(writer(k, per, -1, NULL, NULL));
        }
    }
    close(go[0]);
    close(go[1]);
    for (int k = 0; k < n; k++) {
        int st = 0;
        cr_assert_eq(waitpid(pid[k], &st, 0), pid[k]);
        cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s: writer %d failed (status %d)", what, k, st);
    }
}

Test(replay_stress, four_writers_a_thousand_findings_each_all_land) {
    /* every writer starts on the same missing file: the schema race too */
    run_writers(WRITERS, PER_WRITER, "four writers");
    sqlite3 *h = open_raw();
    expect_intact(h);
    cr_assert_eq(count(h, "SELECT count(*) FROM cases"), WRITERS * PER_WRITER);
    cr_assert_eq(count(h, "SELECT count(*) FROM hits"), WRITERS * PER_WRITER);
    cr_assert_eq(count(h, "SELECT count(DISTINCT signature) FROM cases"), WRITERS * PER_WRITER);
    cr_assert_eq(count(h, "SELECT count(*) FROM runs"), WRITERS);
    sqlite3_close(h);
}

/* The commit hook of the writer to be killed: at the chosen finding it
 * tells the parent (a '!' instead of the per-commit 'c') and waits to die,
 * its transaction open. */
typedef struct stall_ctx {
    int calls, at, fd;
} stall_ctx;

static void stall(void *ctx) {
    stall_ctx *s = ctx;
    if (++s->calls != s->at)
        return;
    if (write(s->fd, "!", 1) != 1)
        _exit(3);
    for (;;)
        pause();
}

/* Reads reports until '!' (or EOF); returns the commits seen before. */
static int commits_until_stall(int fd, bool *stalled) {
    int commits = 0;
    char c;
    *stalled = false;
    while (read(fd, &c, 1) == 1) {
        if (c == '!')
            return *stalled = true, commits;
        commits++;
    }
    return commits;
}

Test(replay_stress, a_writer_killed_inside_a_transaction_loses_only_that_finding) {
    int p[2];
    cr_assert_eq(pipe(p), 0);
    stall_ctx s = {.at = 301, .fd = p[1]};
    pid_t victim = fork();
    if (victim == 0) {
        close(p[0]);
        _exit(writer(0, PER_WRITER, p[1], stall, &s));
    }
    pid_t other = fork(); /* a writer alongside, which must not be disturbed */
    if (other == 0) {
        close(p[0]);
        _exit(writer(1, 500, -1, NULL, NULL));
    }
    close(p[1]);
    bool stalled;
    int committed = commits_until_stall(p[0], &stalled);
    cr_assert(stalled, "the writer never reached its 301st transaction (%d commits)", committed);
    cr_assert_eq(committed, 300);
    cr_assert_eq(kill(victim, SIGKILL), 0);
    int st = 0;
    waitpid(victim, &st, 0);
    cr_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
    waitpid(other, &st, 0);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the other writer failed after the kill");
    close(p[0]);
    sqlite3 *h = open_raw();
    expect_intact(h);
    cr_assert_eq(count(h, "SELECT count(*) FROM cases WHERE detail LIKE '%writer a %'"), 300,
                 "every committed finding and nothing of the open transaction");
    cr_assert_eq(count(h, "SELECT count(*) FROM hits h JOIN cases c ON c.id = h.case_id WHERE "
                          "c.detail LIKE '%writer a %'"),
                 300);
    cr_assert_eq(count(h, "SELECT count(*) FROM cases WHERE detail LIKE '%writer b %'"), 500);
    sqlite3_close(h);
    /* and the next writer carries on where the killed one stopped */
    cr_assert_eq(writer(2, 10, -1, NULL, NULL), 0);
}

Test(replay_stress, writers_killed_at_arbitrary_points_keep_every_committed_row) {
    int expected_min = 0;
    for (int round = 0; round < 4; round++) {
        int p[2];
        cr_assert_eq(pipe(p), 0);
        pid_t victim = fork();
        if (victim == 0) {
            close(p[0]);
            _exit(writer(3 + round, PER_WRITER, p[1], NULL, NULL));
        }
        close(p[1]);
        /* kill it after 50 + 60 * round reported commits: wherever it is then */
        int want = 50 + 60 * round, seen = 0;
        char c;
        while (seen < want && read(p[0], &c, 1) == 1)
            seen++;
        cr_assert_eq(seen, want);
        cr_assert_eq(kill(victim, SIGKILL), 0);
        while (read(p[0], &c, 1) == 1)
            seen++; /* commits reported before the signal landed */
        close(p[0]);
        int st;
        waitpid(victim, &st, 0);
        sqlite3 *h = open_raw();
        expect_intact(h);
        char sql[128];
        snprintf(sql, sizeof sql, "SELECT count(*) FROM cases WHERE detail LIKE '%%writer %c %%'",
                 'a' + 3 + round);
        int64_t rows = count(h, sql);
        /* every reported commit is there; at most one more committed
         * without its report written */
        cr_assert(rows >= seen && rows <= seen + 1, "round %d: %lld rows, %d commits reported",
                  round, (long long)rows, seen);
        expected_min += seen;
        cr_assert_geq(count(h, "SELECT count(*) FROM hits"), expected_min);
        sqlite3_close(h);
    }
}

/* Writers that open a fresh database at the same moment: each sees it
 * empty (and creates the schema under the write lock, or finds it made) or
 * complete, never half made. Three separate reads of the schema count,
 * application id and version once straddled another writer's commit and
 * took the fresh file for a foreign database. 40 rounds of 6 openers, each
 * round on a new file, released together through a pipe. */
Test(replay_stress, writers_opening_a_fresh_database_at_once_all_succeed) {
    enum { ROUNDS = 40, OPENERS = 6 };
    for (int round = 0; round < ROUNDS; round++) {
        snprintf(db_path, sizeof db_path, "%s/fresh-%d.db", dir, round);
        char what[32];
        snprintf(what, sizeof what, "round %d", round);
        run_writers(OPENERS, 1, what);
        sqlite3 *h;
        cr_assert_eq(sqlite3_open(db_path, &h), SQLITE_OK);
        cr_assert_eq(count(h, "SELECT count(*) FROM cases"), OPENERS, "round %d", round);
        sqlite3_close(h);
    }
}
