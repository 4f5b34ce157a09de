/* tests/test_replay.c — the findings database (replay/db.h) and the
 * violation signature (replay/signature.h): dedupe by signature, cases
 * read back exactly, every bad file refused with its own error class and
 * left unchanged, damaged and old-format cases, merge, fitting a fuzz
 * input into the format. */
#include <criterion/criterion.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "replay/check.h"
#include "replay/db.h"
#include "replay/finding.h"
#include "replay/signature.h"
#include "sim/gen.h"

static char dir[64];

static void setup(void) {
    snprintf(dir, sizeof dir, "/tmp/kvconn-replay-XXXXXX");
    cr_assert_not_null(mkdtemp(dir));
}

static void teardown(void) {
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    cr_assert_eq(system(cmd), 0);
}

TestSuite(replay, .init = setup, .fini = teardown, .timeout = 120);

static const char *path_in(const char *name) {
    static char p[4][128];
    static int k;
    k = (k + 1) % 4;
    snprintf(p[k], sizeof p[k], "%s/%s", dir, name);
    return p[k];
}

/* A violation as the checker would report it (only what the signature and
 * the recorder read). */
static sim_result fake(kv_inv inv, const char *actor, const char *detail, uint64_t hash) {
    sim_result r;
    memset(&r, 0, sizeof r);
    r.violated = true;
    r.inv = inv;
    snprintf(r.actor_name, sizeof r.actor_name, "%s", actor);
    snprintf(r.detail, sizeof r.detail, "%s", detail);
    r.trace_hash = hash;
    return r;
}

static kv_status record(replay_db *db, const sim_scenario *sc, const sim_result *r,
                        replay_recorded *out) {
    replay_err err = {0};
    replay_finding f = {.origin = REPLAY_ORIGIN_MANUAL, .sc = sc, .r = r, .source = "test"};
    kv_status s = replay_db_record(db, 0, &f, out, &err);
    cr_assert_eq(s, KV_OK, "%s", err.msg);
    return s;
}

/* Runs sql on the file directly (to damage it the way a test needs). */
static void raw_sql(const char *path, const char *sql) {
    sqlite3 *h;
    cr_assert_eq(sqlite3_open(path, &h), SQLITE_OK);
    char *msg = NULL;
    cr_assert_eq(sqlite3_exec(h, sql, NULL, NULL, &msg), SQLITE_OK, "%s: %s", sql, msg ? msg : "");
    sqlite3_close(h);
}

/* The file's bytes, for "nothing was changed" checks. */
static size_t slurp(const char *path, char *buf, size_t cap) {
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f, "%s", path);
    size_t n = fread(buf, 1, cap, f);
    fclose(f);
    return n;
}

static replay_db *open_ok(const char *path, replay_open_mode mode) {
    replay_db *db;
    replay_err err = {0};
    cr_assert_eq(replay_db_open(path, mode, &db, &err), KV_OK, "%s", err.msg);
    return db;
}

static replay_err open_fails(const char *path, replay_open_mode mode) {
    replay_db *db = NULL;
    replay_err err = {0};
    cr_assert_neq(replay_db_open(path, mode, &db, &err), KV_OK, "%s opened", path);
    cr_assert_null(db);
    cr_assert_neq(err.kind, REPLAY_E_NONE);
    cr_assert(strstr(err.msg, path), "message does not name the file: %s", err.msg);
    return err;
}

/* ---- signature --------------------------------------------------------------------- */

Test(replay, signature_drops_instance_numbers_and_keeps_the_shape) {
    char sig[REPLAY_SIG_MAX];
    sim_result r = fake(KV_INV_OWNER, "D3.w1.main",
                        "receiver pull map owned by actor 21 touched by actor 20", 1);
    replay_signature(&r, sig, sizeof sig);
    cr_assert_str_eq(sig,
                     "INV-OWNER D*.w*.main receiver pull map owned by actor # touched by actor #");
    sim_result r2 = fake(KV_INV_OWNER, "D0.w3.main",
                         "receiver pull map owned by actor 9 touched by actor 8", 2);
    char sig2[REPLAY_SIG_MAX];
    replay_signature(&r2, sig2, sizeof sig2);
    cr_assert_str_eq(sig, sig2, "other instances, same finding");
    sim_result r3 =
        fake(KV_INV_LIVE, "world", "request 3 stalled in WAITING_FOR_REMOTE_KVS at 0x1f00", 3);
    replay_signature(&r3, sig, sizeof sig);
    cr_assert_str_eq(sig, "INV-LIVE world request # stalled in WAITING_FOR_REMOTE_KVS at #");
    sim_result r4 = fake(KV_INV_LIVE, "world", "request 3 stalled in WAITING on engine 1", 3);
    replay_signature(&r4, sig2, sizeof sig2);
    cr_assert_str_neq(sig, sig2, "another stall state is another finding");
}

Test(replay, same_bug_from_different_seeds_has_one_signature) {
    sim_world *w;
    cr_assert_eq(sim_world_new(&w), KV_OK);
    static sim_world_cfg cfg;
    char first[REPLAY_SIG_MAX] = "", sig[REPLAY_SIG_MAX];
    uint32_t found = 0;
    for (uint64_t seed = 1; seed <= 400 && found < 3; seed++) {
        sim_result r;
        sim_gen(seed, KV_BUG_RECV_MAP_RACE, &cfg);
        cr_assert_eq(sim_world_run(w, &cfg, NULL, &r), KV_OK);
        if (!r.violated || r.inv != KV_INV_OWNER)
            continue;
        replay_signature(&r, sig, sizeof sig);
        if (!found++)
            snprintf(first, sizeof first, "%s", sig);
        else
            cr_assert_str_eq(sig, first, "seed %llu", (unsigned long long)seed);
    }
    cr_assert_geq(found, 2, "recv_map_race found %u times in 400 seeds", found);
    sim_world_free(w);
}

/* ---- recording and reading back ---------------------------------------------------- */

Test(replay, findings_dedupe_by_signature_and_read_back_exactly) {
    const char *p = path_in("f.db");
    replay_db *db = open_ok(p, REPLAY_DB_WRITE);
    static sim_scenario a, b;
    sim_scenario_init(&a);
    sim_gen(7, 0, &a.cfg);
    a.cfg.choice = a.choice;
    a.choice[0] = 0x5a;
    a.cfg.choice_len = 1;
    sim_scenario_init(&b);
    sim_gen(8, 0, &b.cfg);
    b.cfg.choice = b.choice;
    sim_result r1 =
        fake(KV_INV_LIVE, "world", "request 1 did not end: stalled in WAITING on engine 2", 0x1234);
    sim_result r2 =
        fake(KV_INV_LIVE, "world", "request 5 did not end: stalled in WAITING on engine 0", 0x9999);
    sim_result r3 = fake(KV_INV_DATA, "D1.w0.main", "block 3 differs", 0x42);
    replay_recorded x, y, z;
    record(db, &a, &r1, &x);
    record(db, &b, &r2, &y);
    record(db, &a, &r3, &z);
    cr_assert(x.is_new);
    cr_assert(!y.is_new, "same signature from another scenario is the same case");
    cr_assert_eq(y.case_id, x.case_id);
    cr_assert(z.is_new);
    cr_assert_neq(z.case_id, x.case_id);
    static replay_case c;
    replay_err err = {0};
    cr_assert_eq(replay_db_case_get(db, x.case_id, &c, &err), KV_OK, "%s", err.msg);
    cr_assert_eq(c.info.hits, 2);
    cr_assert(sim_scenario_equal(&c.sc, &a), "the first scenario is kept");
    cr_assert_eq(c.info.trace_hash, 0x1234);
    cr_assert_str_eq(c.info.invariant, "INV-LIVE");
    cr_assert_str_eq(c.info.origin, "manual");
    cr_assert(!c.info.fixed);
    cr_assert_eq(c.info.format_version, SIM_SCENARIO_VERSION);
    cr_assert_eq(replay_db_set_status(db, z.case_id, true, &err), KV_OK);
    cr_assert_eq(replay_db_case_info(db, z.case_id, &c.info, &err), KV_OK);
    cr_assert(c.info.fixed);
    cr_assert_eq(replay_db_case_info(db, 99, &c.info, &err), KV_ENOENT);
    cr_assert_eq(err.kind, REPLAY_E_NOT_FOUND);
    replay_db_close(db);
}

Test(replay, a_run_row_counts_its_findings) {
    replay_db *db = open_ok(path_in("runs.db"), REPLAY_DB_WRITE);
    replay_err err = {0};
    int64_t run = 0;
    cr_assert_eq(replay_db_run_begin(db, "test", "--seeds 1..2", &run, &err), KV_OK, "%s", err.msg);
    static sim_scenario sc;
    sim_scenario_init(&sc);
    sim_result r = fake(KV_INV_STRAY, "P0.w0.send", "stray 1", 5);
    replay_finding f = {
        .origin = REPLAY_ORIGIN_SWEEP, .sc = &sc, .r = &r, .have_seed = true, .seed = 2};
    replay_recorded rec;
    cr_assert_eq(replay_db_record(db, run, &f, &rec, &err), KV_OK, "%s", err.msg);
    cr_assert_eq(replay_db_record(db, run, &f, &rec, &err), KV_OK, "%s", err.msg);
    cr_assert_eq(replay_db_run_end(db, run, 2, &err), KV_OK, "%s", err.msg);
    replay_case_info i;
    cr_assert_eq(replay_db_case_info(db, rec.case_id, &i, &err), KV_OK);
    cr_assert(i.have_seed);
    cr_assert_eq(i.seed, 2);
    cr_assert_eq(i.first_run, run);
    replay_db_close(db);
    sqlite3 *h;
    sqlite3_stmt *st;
    cr_assert_eq(sqlite3_open(path_in("runs.db"), &h), SQLITE_OK);
    cr_assert_eq(
        sqlite3_prepare_v2(
            h, "SELECT scenarios, findings, new_cases, ended_at IS NOT NULL, git_commit FROM runs",
            -1, &st, NULL),
        SQLITE_OK);
    cr_assert_eq(sqlite3_step(st), SQLITE_ROW);
    cr_assert_eq(sqlite3_column_int(st, 0), 2);
    cr_assert_eq(sqlite3_column_int(st, 1), 2);
    cr_assert_eq(sqlite3_column_int(st, 2), 1);
    cr_assert_eq(sqlite3_column_int(st, 3), 1);
    cr_assert_str_eq((const char *)sqlite3_column_text(st, 4), replay_build_commit());
    sqlite3_finalize(st);
    sqlite3_close(h);
}

Test(replay, an_input_already_recorded_is_skipped_when_asked) {
    replay_db *db = open_ok(path_in("in.db"), REPLAY_DB_WRITE);
    static sim_scenario sc;
    sim_scenario_init(&sc);
    sim_result r = fake(KV_INV_LEAK, "world", "engine 0: 3 connector entries left", 5);
    uint8_t input[] = {1, 2, 3};
    replay_finding f = {.origin = REPLAY_ORIGIN_IMPORT,
                        .sc = &sc,
                        .r = &r,
                        .input = input,
                        .input_len = 3,
                        .skip_seen_input = true};
    replay_recorded a, b;
    replay_err err = {0};
    cr_assert_eq(replay_db_record(db, 0, &f, &a, &err), KV_OK);
    cr_assert_eq(replay_db_record(db, 0, &f, &b, &err), KV_OK);
    cr_assert(a.is_new && !a.seen_input);
    cr_assert(b.seen_input && !b.is_new);
    replay_case_info i;
    cr_assert_eq(replay_db_case_info(db, a.case_id, &i, &err), KV_OK);
    cr_assert_eq(i.hits, 1);
    replay_db_close(db);
}

Test(replay, a_new_database_carries_its_schema_version_and_application_id) {
    const char *p = path_in("new.db");
    replay_db_close(open_ok(p, REPLAY_DB_WRITE));
    replay_db_close(open_ok(p, REPLAY_DB_WRITE)); /* reopening migrates nothing */
    sqlite3 *h;
    sqlite3_stmt *st;
    cr_assert_eq(sqlite3_open(p, &h), SQLITE_OK);
    cr_assert_eq(sqlite3_prepare_v2(h, "PRAGMA user_version", -1, &st, NULL), SQLITE_OK);
    cr_assert_eq(sqlite3_step(st), SQLITE_ROW);
    cr_assert_eq(sqlite3_column_int(st, 0), REPLAY_SCHEMA_VERSION);
    sqlite3_finalize(st);
    cr_assert_eq(sqlite3_prepare_v2(h, "PRAGMA application_id", -1, &st, NULL), SQLITE_OK);
    cr_assert_eq(sqlite3_step(st), SQLITE_ROW);
    cr_assert_eq(sqlite3_column_int(st, 0), REPLAY_APP_ID);
    sqlite3_finalize(st);
    cr_assert_eq(sqlite3_prepare_v2(h, "PRAGMA journal_mode", -1, &st, NULL), SQLITE_OK);
    cr_assert_eq(sqlite3_step(st), SQLITE_ROW);
    cr_assert_str_eq((const char *)sqlite3_column_text(st, 0), "wal");
    sqlite3_finalize(st);
    sqlite3_close(h);
}

/* ---- bad files --------------------------------------------------------------------- */

Test(replay, a_file_that_is_not_sqlite_is_refused_and_left_alone) {
    const char *p = path_in("junk.db");
    FILE *f = fopen(p, "wb");
    for (int i = 0; i < 4096; i++)
        fputc((i * 37) & 0xff, f);
    fclose(f);
    static char before[8192], after[8192];
    size_t n0 = slurp(p, before, sizeof before);
    cr_assert_eq(open_fails(p, REPLAY_DB_WRITE).kind, REPLAY_E_CORRUPT);
    cr_assert_eq(open_fails(p, REPLAY_DB_READ).kind, REPLAY_E_CORRUPT);
    size_t n1 = slurp(p, after, sizeof after);
    cr_assert(n0 == n1 && !memcmp(before, after, n0), "the file was changed");
    cr_assert_eq(access(path_in("junk.db-wal"), F_OK), -1, "a WAL file was created");
}

Test(replay, a_damaged_header_is_refused) {
    const char *p = path_in("hdr.db");
    replay_db_close(open_ok(p, REPLAY_DB_WRITE));
    FILE *f = fopen(p, "r+b");
    cr_assert_not_null(f);
    fseek(f, 0, SEEK_SET);
    fputs("this is no longer", f); /* the 16-byte "SQLite format 3" magic */
    fclose(f);
    cr_assert_eq(open_fails(p, REPLAY_DB_READ).kind, REPLAY_E_CORRUPT);
    cr_assert_eq(open_fails(p, REPLAY_DB_WRITE).kind, REPLAY_E_CORRUPT);
}

Test(replay, another_applications_database_is_refused) {
    const char *p = path_in("other.db");
    raw_sql(p, "CREATE TABLE t(x); INSERT INTO t VALUES (1)");
    replay_err e = open_fails(p, REPLAY_DB_WRITE);
    cr_assert_eq(e.kind, REPLAY_E_CORRUPT);
    cr_assert(strstr(e.msg, "not a kvconn findings database"), "%s", e.msg);
}

Test(replay, an_unknown_schema_version_is_refused_and_left_alone) {
    const char *p = path_in("v99.db");
    replay_db_close(open_ok(p, REPLAY_DB_WRITE));
    raw_sql(p, "PRAGMA user_version = 99");
    static char before[65536], after[65536];
    size_t n0 = slurp(p, before, sizeof before);
    replay_err e = open_fails(p, REPLAY_DB_WRITE);
    cr_assert_eq(e.kind, REPLAY_E_VERSION);
    cr_assert(strstr(e.msg, "version 99"), "%s", e.msg);
    cr_assert_eq(open_fails(p, REPLAY_DB_READ).kind, REPLAY_E_VERSION);
    size_t n1 = slurp(p, after, sizeof after);
    cr_assert(n0 == n1 && !memcmp(before, after, n0), "the file was changed");
}

Test(replay, a_read_only_file_is_read_but_never_written) {
    const char *p = path_in("ro.db");
    replay_db *db = open_ok(p, REPLAY_DB_WRITE);
    static sim_scenario sc;
    sim_scenario_init(&sc);
    sim_result r = fake(KV_INV_DATA, "D0.w0.main", "block 1 differs", 1);
    replay_recorded rec;
    record(db, &sc, &r, &rec);
    replay_db_close(db);
    cr_assert_eq(chmod(p, 0444), 0);
    static char before[65536], after[65536];
    size_t n0 = slurp(p, before, sizeof before);
    replay_err e = open_fails(p, REPLAY_DB_WRITE);
    cr_assert_eq(e.kind, REPLAY_E_READONLY, "%s", e.msg);
    db = open_ok(p, REPLAY_DB_READ);
    replay_case_info i;
    replay_err err = {0};
    cr_assert_eq(replay_db_case_info(db, rec.case_id, &i, &err), KV_OK, "%s", err.msg);
    replay_db_close(db);
    size_t n1 = slurp(p, after, sizeof after);
    cr_assert(n0 == n1 && !memcmp(before, after, n0), "the file was changed");
}

Test(replay, reading_a_missing_or_empty_file_creates_nothing) {
    const char *p = path_in("none.db");
    cr_assert_eq(open_fails(p, REPLAY_DB_READ).kind, REPLAY_E_NOT_FOUND);
    cr_assert_eq(access(p, F_OK), -1, "reading created the file");
    FILE *f = fopen(p, "wb");
    fclose(f);
    cr_assert_eq(open_fails(p, REPLAY_DB_READ).kind, REPLAY_E_CORRUPT);
    replay_db_close(open_ok(p, REPLAY_DB_WRITE)); /* an empty file is a new database to a writer */
}

/* ---- damaged and old cases --------------------------------------------------------- */

static int64_t one_case(const char *p, sim_scenario *sc) {
    replay_db *db = open_ok(p, REPLAY_DB_WRITE);
    sim_scenario_init(sc);
    sim_gen(3, 0, &sc->cfg);
    sc->cfg.choice = sc->choice;
    sim_result r = fake(KV_INV_STRAY, "P0.w0.send", "stray completion for request 3", 7);
    replay_recorded rec;
    record(db, sc, &r, &rec);
    replay_db_close(db);
    return rec.case_id;
}

static replay_err get_fails(const char *p, int64_t id) {
    static replay_case c;
    replay_db *db = open_ok(p, REPLAY_DB_READ);
    replay_err err = {0};
    cr_assert_neq(replay_db_case_get(db, id, &c, &err), KV_OK, "a damaged case decoded");
    cr_assert_eq(c.info.id, id, "the header is still read");
    replay_db_close(db);
    return err;
}

Test(replay, a_truncated_blob_is_caught) {
    const char *p = path_in("trunc.db");
    static sim_scenario sc;
    int64_t id = one_case(p, &sc);
    raw_sql(p, "UPDATE cases SET scenario = substr(scenario, 1, 40)");
    replay_err e = get_fails(p, id);
    cr_assert_eq(e.kind, REPLAY_E_BAD_CASE);
    cr_assert(strstr(e.msg, "truncated") && strstr(e.msg, "case 1"), "%s", e.msg);
}

Test(replay, an_altered_blob_is_caught) {
    const char *p = path_in("alt.db");
    static sim_scenario sc;
    int64_t id = one_case(p, &sc);
    raw_sql(p,
            "UPDATE cases SET scenario = substr(scenario, 1, 10) || x'ff' || substr(scenario, 12)");
    replay_err e = get_fails(p, id);
    cr_assert_eq(e.kind, REPLAY_E_BAD_CASE);
    cr_assert(strstr(e.msg, "damaged"), "%s", e.msg);
}

Test(replay, a_case_in_an_unknown_format_version_names_it) {
    const char *p = path_in("fmt.db");
    static sim_scenario sc;
    int64_t id = one_case(p, &sc);
    raw_sql(p, "UPDATE cases SET format_version = 9");
    replay_err e = get_fails(p, id);
    cr_assert_eq(e.kind, REPLAY_E_FORMAT);
    cr_assert(strstr(e.msg, "version 9"), "%s", e.msg);
}

/* A case recorded before scenario format 2: the version 1 binary layout
 * (no conn_p / conn_d / store_capacity in the fixed part) with its magic. */
Test(replay, a_case_in_the_previous_format_still_decodes) {
    if (SIM_SCENARIO_VERSION != 2)
        cr_skip_test("the v1 layout below is written for format version 2");
    const char *p = path_in("old.db");
    static sim_scenario sc, want;
    int64_t id = one_case(p, &sc);
    static uint8_t v2[SIM_SCENARIO_BYTES_MAX], v1[SIM_SCENARIO_BYTES_MAX];
    size_t n = 0;
    sim_scenario_copy(&want, &sc);
    sim_world_cfg d;
    sim_world_cfg_default(&d);
    want.cfg.conn_p = d.conn_p; /* what a version 1 scenario means */
    want.cfg.conn_d = d.conn_d;
    want.cfg.store_capacity = d.store_capacity;
    cr_assert_eq(sim_scenario_to_bytes(&want, v2, sizeof v2, &n), KV_OK);
    memcpy(v1, v2, 4 + 60);
    v1[3] = 1;
    memcpy(v1 + 64, v2 + 68, n - 68);
    size_t n1 = n - 4;
    char sql[SIM_SCENARIO_BYTES_MAX * 2 + 256], *q = sql;
    q += sprintf(q,
                 "UPDATE cases SET format_version = 1, scenario_len = %zu, scenario_hash = "
                 "'%016llx', scenario = x'",
                 n1, (unsigned long long)replay_fnv64(v1, n1));
    for (size_t i = 0; i < n1; i++)
        q += sprintf(q, "%02x", v1[i]);
    sprintf(q, "'");
    raw_sql(p, sql);
    static replay_case c;
    replay_db *db = open_ok(p, REPLAY_DB_READ);
    replay_err err = {0};
    cr_assert_eq(replay_db_case_get(db, id, &c, &err), KV_OK, "%s", err.msg);
    cr_assert_eq(c.info.format_version, 1);
    cr_assert(sim_scenario_equal(&c.sc, &want), "the version 1 blob decodes to the same scenario");
    replay_db_close(db);
}

/* ---- merge ------------------------------------------------------------------------- */

Test(replay, merge_folds_shards_and_twice_adds_nothing) {
    const char *a = path_in("a.db"), *b = path_in("b.db");
    static sim_scenario sc;
    sim_scenario_init(&sc);
    sim_result shared = fake(KV_INV_LIVE, "world", "request 1 stalled in WAITING on engine 1", 1);
    sim_result only_b =
        fake(KV_INV_OWNER, "D0.w0.main", "map owned by actor 1 touched by actor 2", 2);
    replay_recorded rec;
    replay_db *db = open_ok(a, REPLAY_DB_WRITE);
    record(db, &sc, &shared, &rec);
    replay_db_close(db);
    db = open_ok(b, REPLAY_DB_WRITE);
    replay_err err = {0};
    int64_t run;
    cr_assert_eq(replay_db_run_begin(db, "shard", "1/2", &run, &err), KV_OK);
    replay_finding f = {.origin = REPLAY_ORIGIN_SWEEP, .sc = &sc, .r = &shared};
    cr_assert_eq(replay_db_record(db, run, &f, &rec, &err), KV_OK);
    f.r = &only_b;
    cr_assert_eq(replay_db_record(db, run, &f, &rec, &err), KV_OK);
    cr_assert_eq(replay_db_set_minimized(db, rec.case_id, &sc, 77, &err), KV_OK);
    replay_db_close(db);

    db = open_ok(a, REPLAY_DB_WRITE);
    replay_merge_stats m;
    cr_assert_eq(replay_db_merge(db, b, &m, &err), KV_OK, "%s", err.msg);
    cr_assert_eq(m.runs, 1);
    cr_assert_eq(m.new_cases, 1);
    cr_assert_eq(m.merged_cases, 1);
    cr_assert_eq(m.hits, 2);
    cr_assert_eq(replay_db_merge(db, b, &m, &err), KV_OK, "%s", err.msg);
    cr_assert_eq(
        m.runs + m.new_cases + m.hits, 0, "the second merge added %llu runs, %llu cases, %llu hits",
        (unsigned long long)m.runs, (unsigned long long)m.new_cases, (unsigned long long)m.hits);
    int64_t *ids;
    size_t n;
    cr_assert_eq(replay_db_case_ids(db, &ids, &n, &err), KV_OK);
    cr_assert_eq(n, 2);
    replay_case_info i;
    cr_assert_eq(replay_db_case_info(db, ids[0], &i, &err), KV_OK);
    cr_assert_eq(i.hits, 2, "the shared case has both hits");
    cr_assert_eq(replay_db_case_info(db, ids[1], &i, &err), KV_OK);
    cr_assert(i.have_min, "the minimized scenario came along");
    cr_assert_eq(i.min_trace_hash, 77);
    cr_assert_eq(i.first_run, 1, "run ids remapped into this database");
    free(ids);
    cr_assert_neq(replay_db_merge(db, a, &m, &err), KV_OK, "merged into itself");
    cr_assert_neq(replay_db_merge(db, path_in("missing.db"), &m, &err), KV_OK);
    cr_assert_eq(err.kind, REPLAY_E_NOT_FOUND);
    replay_db_close(db);
}

/* ---- fitting and checking ------------------------------------------------------------ */

Test(replay, a_fuzz_input_past_the_liveness_range_is_capped_and_kept) {
    sim_world *w;
    cr_assert_eq(sim_world_new(&w), KV_OK);
    static sim_world_cfg cfg;
    static sim_scenario out;
    sim_result r, fr;
    uint64_t seed = 1;
    for (; seed < 200; seed++) {
        sim_gen(seed, KV_BUG_RECV_MAP_RACE, &cfg);
        cr_assert_eq(sim_world_run(w, &cfg, NULL, &r), KV_OK);
        if (r.violated)
            break;
    }
    cr_assert(r.violated, "recv_map_race not found");
    cfg.live_bound_ns = 2 * SIM_LIVE_BOUND_MAX_NS; /* outside the format */
    cr_assert_eq(sim_world_run(w, &cfg, NULL, &r), KV_OK);
    cr_assert(r.violated);
    replay_fit_how how;
    cr_assert_eq(replay_fit(w, &cfg, &r, &out, &fr, &how), KV_OK);
    cr_assert_eq(how, REPLAY_FIT_CAPPED);
    cr_assert(sim_scenario_valid(&out));
    cr_assert_eq(out.cfg.live_bound_ns, SIM_LIVE_BOUND_MAX_NS);
    cr_assert_eq(replay_compare(false, NULL, true, fr.trace_hash, &fr), REPLAY_SAME);
    sim_world_free(w);
}

Test(replay, compare_tells_same_drift_other_and_gone) {
    sim_result r = fake(KV_INV_LIVE, "world", "request 2 stalled", 10);
    char sig[REPLAY_SIG_MAX];
    replay_signature(&r, sig, sizeof sig);
    cr_assert_eq(replay_compare(true, sig, true, 10, &r), REPLAY_SAME);
    cr_assert_eq(replay_compare(true, sig, true, 11, &r), REPLAY_DRIFT);
    cr_assert_eq(replay_compare(true, "INV-DATA x y", true, 10, &r), REPLAY_OTHER);
    r.violated = false;
    cr_assert_eq(replay_compare(true, sig, true, 10, &r), REPLAY_GONE);
}
