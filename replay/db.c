/* replay/db.c — the findings database (see db.h): opening with checks that
 * change nothing, schema creation and migration, recording one finding per
 * transaction, reading cases back with their blobs checked, merging. */
#include "replay/db.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#ifndef KVCONN_GIT_COMMIT
#define KVCONN_GIT_COMMIT "unknown"
#endif

struct replay_db {
    sqlite3 *h; /* owned connection */
    char path[1024];
    bool writable;
    void (*commit_hook)(void *ctx); /* test fault injection, may be NULL */
    void *commit_ctx;               /* borrowed, passed to commit_hook */
    bool batch;                     /* inside replay_db_batch_begin: records are savepoints */
};

/* schema_steps[v] takes the schema from version v to v + 1. Append a step
 * (never edit one) and bump REPLAY_SCHEMA_VERSION to change the schema. */
static const char *const schema_steps[REPLAY_SCHEMA_VERSION] = {
    /* 0 -> 1 */
    "CREATE TABLE runs ("
    " id INTEGER PRIMARY KEY,"
    " tool TEXT NOT NULL,"
    " git_commit TEXT NOT NULL,"
    " format_version INTEGER NOT NULL,"
    " config TEXT NOT NULL,"
    " started_at INTEGER NOT NULL,"
    " ended_at INTEGER,"
    " scenarios INTEGER NOT NULL DEFAULT 0,"
    " findings INTEGER NOT NULL DEFAULT 0,"
    " new_cases INTEGER NOT NULL DEFAULT 0);"
    "CREATE TABLE cases ("
    " id INTEGER PRIMARY KEY,"
    " signature TEXT NOT NULL UNIQUE,"
    " sig_short TEXT NOT NULL,"
    " invariant TEXT NOT NULL,"
    " detail TEXT NOT NULL,"
    " origin TEXT NOT NULL CHECK (origin IN ('sweep','fuzz','manual','import')),"
    " status TEXT NOT NULL DEFAULT 'open' CHECK (status IN ('open','fixed')),"
    " first_seen INTEGER NOT NULL,"
    " last_seen INTEGER NOT NULL,"
    " hits INTEGER NOT NULL DEFAULT 1,"
    " first_run INTEGER REFERENCES runs(id),"
    " last_run INTEGER REFERENCES runs(id),"
    " format_version INTEGER NOT NULL,"
    " scenario BLOB NOT NULL,"
    " scenario_len INTEGER NOT NULL,"
    " scenario_hash TEXT NOT NULL,"
    " scenario_text TEXT NOT NULL,"
    " directives INTEGER NOT NULL,"
    " input BLOB,"
    " seed INTEGER,"
    " trace_hash TEXT NOT NULL,"
    " git_commit TEXT NOT NULL,"
    " min_scenario BLOB,"
    " min_len INTEGER,"
    " min_hash TEXT,"
    " min_text TEXT,"
    " min_directives INTEGER,"
    " min_trace_hash TEXT);"
    "CREATE TABLE hits ("
    " id INTEGER PRIMARY KEY,"
    " case_id INTEGER NOT NULL REFERENCES cases(id),"
    " run_id INTEGER REFERENCES runs(id),"
    " seen_at INTEGER NOT NULL,"
    " seed INTEGER,"
    " input_hash TEXT NOT NULL,"
    " source TEXT);"
    "CREATE INDEX hits_by_input ON hits(input_hash);"
    "CREATE INDEX hits_by_case ON hits(case_id);"
    "CREATE INDEX hits_by_run ON hits(run_id);"
    "CREATE INDEX cases_by_first_run ON cases(first_run);",
};

static const char *const origin_names[REPLAY_ORIGIN_COUNT] = {
    [REPLAY_ORIGIN_SWEEP] = "sweep",
    [REPLAY_ORIGIN_FUZZ] = "fuzz",
    [REPLAY_ORIGIN_MANUAL] = "manual",
    [REPLAY_ORIGIN_IMPORT] = "import",
};

const char *replay_origin_name(replay_origin o) {
    return (unsigned)o < REPLAY_ORIGIN_COUNT ? origin_names[o] : "?";
}

const char *replay_build_commit(void) {
    return KVCONN_GIT_COMMIT;
}

const char *replay_db_path(const replay_db *db) {
    return db->path;
}

/* ---- errors -------------------------------------------------------------------- */

static kv_status kind_status(replay_err_kind k) {
    switch (k) {
    case REPLAY_E_NONE:
        return KV_OK;
    case REPLAY_E_CORRUPT:
        return KV_EPROTO;
    case REPLAY_E_VERSION:
        return KV_EVERSION;
    case REPLAY_E_FORMAT:
        return KV_EVERSION;
    case REPLAY_E_READONLY:
        return KV_EIO;
    case REPLAY_E_BAD_CASE:
        return KV_EPROTO;
    case REPLAY_E_NOT_FOUND:
        return KV_ENOENT;
    case REPLAY_E_BAD_INPUT:
        return KV_EINVAL;
    case REPLAY_E_IO:
        return KV_EIO;
    }
    return KV_EIO;
}

kv_status replay_fail(replay_err *err, replay_err_kind kind, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    err->kind = kind;
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
    return kind_status(kind);
}

static replay_err_kind sqlite_kind(int rc, bool writing) {
    switch (rc & 0xff) {
    case SQLITE_NOTADB:
    case SQLITE_CORRUPT:
    case SQLITE_FORMAT:
        return REPLAY_E_CORRUPT;
    case SQLITE_READONLY:
    case SQLITE_FULL: /* a full disk: this file cannot be written now (it is not damaged) */
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
    case SQLITE_PERM:
        return REPLAY_E_READONLY;
    case SQLITE_CANTOPEN:
        return writing ? REPLAY_E_READONLY : REPLAY_E_NOT_FOUND;
    case SQLITE_IOERR: /* writing: a full or failing disk (the WAL's files cannot grow) */
        return writing ? REPLAY_E_READONLY : REPLAY_E_IO;
    default:
        return REPLAY_E_IO;
    }
}

static const char *kind_words(replay_err_kind k) {
    switch (k) {
    case REPLAY_E_CORRUPT:
        return "not a readable findings database";
    case REPLAY_E_READONLY:
        return "cannot be written";
    case REPLAY_E_NONE:
    case REPLAY_E_VERSION:
    case REPLAY_E_BAD_CASE:
    case REPLAY_E_FORMAT:
    case REPLAY_E_NOT_FOUND:
    case REPLAY_E_BAD_INPUT:
    case REPLAY_E_IO:
        break;
    }
    return "database error";
}

/* A SQLite failure while doing `what`. */
static kv_status sql_fail(replay_db *db, int rc, const char *what, replay_err *err) {
    replay_err_kind k = sqlite_kind(rc, db->writable);
    const char *msg = db->h ? sqlite3_errmsg(db->h) : sqlite3_errstr(rc);
    if (k == REPLAY_E_CORRUPT)
        return replay_fail(err, k, "%s: damaged, or not a SQLite database at all (sqlite: %s)",
                           db->path, msg);
    return replay_fail(err, k, "%s: %s (%s): %s", db->path, kind_words(k), what, msg);
}

/* ---- small statement helpers --------------------------------------------------- */

static kv_status exec(replay_db *db, const char *sql, replay_err *err) {
    int rc = sqlite3_exec(db->h, sql, NULL, NULL, NULL);
    return rc == SQLITE_OK ? KV_OK : sql_fail(db, rc, sql, err);
}

static kv_status prepare(replay_db *db, const char *sql, sqlite3_stmt **st, replay_err *err) {
    int rc = sqlite3_prepare_v2(db->h, sql, -1, st, NULL);
    return rc == SQLITE_OK ? KV_OK : sql_fail(db, rc, sql, err);
}

/* Runs a statement with one integer column and one row (PRAGMA x, count). */
static kv_status query_i64(replay_db *db, const char *sql, int64_t *out, replay_err *err) {
    sqlite3_stmt *st;
    kv_status s = prepare(db, sql, &st, err);
    if (s != KV_OK)
        return s;
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW)
        *out = sqlite3_column_int64(st, 0);
    else if (rc == SQLITE_DONE)
        *out = 0;
    sqlite3_finalize(st);
    return rc == SQLITE_ROW || rc == SQLITE_DONE ? KV_OK : sql_fail(db, rc, sql, err);
}

/* Steps a statement that returns no rows, then finalizes it. */
static kv_status step_done(replay_db *db, sqlite3_stmt *st, const char *what, replay_err *err) {
    int rc = sqlite3_step(st);
    sqlite3_finalize(st);
    return rc == SQLITE_DONE ? KV_OK : sql_fail(db, rc, what, err);
}

static void rollback(replay_db *db) {
    sqlite3_exec(db->h, "ROLLBACK", NULL, NULL, NULL);
}

/* One record's transaction: its own IMMEDIATE transaction, or inside a
 * batch a savepoint of the batch's (undone alone when the record fails). */
static kv_status record_begin(replay_db *db, replay_err *err) {
    return exec(db, db->batch ? "SAVEPOINT record" : "BEGIN IMMEDIATE", err);
}
static kv_status record_commit(replay_db *db, replay_err *err) {
    return exec(db, db->batch ? "RELEASE record" : "COMMIT", err);
}
static void record_rollback(replay_db *db) {
    if (db->batch)
        sqlite3_exec(db->h, "ROLLBACK TO record; RELEASE record", NULL, NULL, NULL);
    else
        rollback(db);
}

static void hex16(uint64_t v, char out[17]) {
    snprintf(out, 17, "%016" PRIx64, v);
}

static uint64_t parse_hex(const unsigned char *s) {
    return s ? strtoull((const char *)s, NULL, 16) : 0;
}

static void copy_col(sqlite3_stmt *st, int col, char *dst, size_t cap) {
    const unsigned char *t = sqlite3_column_text(st, col);
    snprintf(dst, cap, "%s", t ? (const char *)t : "");
}

/* ---- opening --------------------------------------------------------------------- */

/* Read-only checks: a SQLite file, ours (or empty), a schema version we
 * know. *out_version: 0 for an empty database. Changes nothing. */
static kv_status check_file(replay_db *db, int64_t *out_version, replay_err *err) {
    /* One statement, so one read transaction: three separate reads could
     * straddle another writer's schema commit and see "no tables, no
     * application id, a version" (a fresh file taken for a foreign one). */
    static const char sql[] = "SELECT (SELECT count(*) FROM sqlite_schema), "
                              "(SELECT application_id FROM pragma_application_id), "
                              "(SELECT user_version FROM pragma_user_version)";
    int64_t tables = 0, app = 0, version = 0;
    sqlite3_stmt *st;
    kv_status s = prepare(db, sql, &st, err);
    if (s != KV_OK)
        return s;
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        tables = sqlite3_column_int64(st, 0);
        app = sqlite3_column_int64(st, 1);
        version = sqlite3_column_int64(st, 2);
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_ROW)
        return sql_fail(db, rc, sql, err);
    if (tables == 0 && app == 0 && version == 0) {
        *out_version = 0;
        if (!db->writable)
            return replay_fail(err, REPLAY_E_CORRUPT,
                               "%s: empty database: not a findings database yet (nothing recorded)",
                               db->path);
        return KV_OK;
    }
    if (app != REPLAY_APP_ID)
        return replay_fail(
            err, REPLAY_E_CORRUPT,
            "%s: not a kvconn findings database (a SQLite database with application_id 0x%08" PRIx64
            " and %" PRId64 " schema objects; ours have application_id 0x%08x)",
            db->path, (uint64_t)(uint32_t)app, tables, (unsigned)REPLAY_APP_ID);
    if (version < 1 || version > REPLAY_SCHEMA_VERSION)
        return replay_fail(err, REPLAY_E_VERSION,
                           "%s: findings database schema version %" PRId64
                           " is %s; this kvsim (commit %s) reads versions 1..%d",
                           db->path, version,
                           version > REPLAY_SCHEMA_VERSION ? "newer than this build knows"
                                                           : "not a valid version",
                           replay_build_commit(), REPLAY_SCHEMA_VERSION);
    if (version < REPLAY_SCHEMA_VERSION && !db->writable)
        return replay_fail(err, REPLAY_E_VERSION,
                           "%s: findings database schema version %" PRId64
                           " needs migrating to %d: run any writing command "
                           "(e.g. kvsim db --db %s migrate) on a writable copy",
                           db->path, version, REPLAY_SCHEMA_VERSION, db->path);
    *out_version = version;
    return KV_OK;
}

/* Creates or migrates the schema in one IMMEDIATE transaction, re-reading
 * the version under the lock (another writer may have done it already). */
static kv_status migrate(replay_db *db, replay_err *err) {
    kv_status s = exec(db, "BEGIN IMMEDIATE", err);
    if (s != KV_OK)
        return s;
    int64_t version = 0;
    s = check_file(db, &version, err);
    for (int64_t v = version; s == KV_OK && v < REPLAY_SCHEMA_VERSION; v++)
        s = exec(db, schema_steps[v], err);
    if (s == KV_OK && version < REPLAY_SCHEMA_VERSION) {
        char sql[96];
        snprintf(sql, sizeof sql, "PRAGMA application_id = %d; PRAGMA user_version = %d",
                 REPLAY_APP_ID, REPLAY_SCHEMA_VERSION);
        s = exec(db, sql, err);
    }
    if (s == KV_OK)
        s = exec(db, "COMMIT", err);
    if (s != KV_OK)
        rollback(db);
    return s;
}

/* A write mode open refuses a file without any write permission bit (even
 * for root, who the OS would let write it) or one the OS will not let us
 * write, before SQLite touches it. */
static kv_status check_writable(const char *path, replay_err *err) {
    struct stat sb;
    if (stat(path, &sb) != 0)
        return KV_OK; /* created by the open */
    if (!S_ISREG(sb.st_mode))
        return replay_fail(err, REPLAY_E_CORRUPT, "%s: not a regular file", path);
    if (!(sb.st_mode & 0222))
        return replay_fail(err, REPLAY_E_READONLY,
                           "%s: the file is read-only (mode %04o); nothing was written", path,
                           (unsigned)(sb.st_mode & 07777));
    if (access(path, W_OK) != 0)
        return replay_fail(err, REPLAY_E_READONLY,
                           "%s: cannot be written (%s); nothing was written", path,
                           strerror(errno));
    return KV_OK;
}

kv_status replay_db_open(const char *path, replay_open_mode mode, replay_db **out,
                         replay_err *err) {
    *out = NULL;
    err->kind = REPLAY_E_NONE;
    err->msg[0] = 0;
    bool writing = mode == REPLAY_DB_WRITE;
    struct stat sb;
    if (strlen(path) >= sizeof((replay_db *)0)->path)
        return replay_fail(err, REPLAY_E_IO, "%.64s...: path too long", path);
    if (!writing && stat(path, &sb) != 0)
        return replay_fail(err, REPLAY_E_NOT_FOUND, "%s: no such database (%s)", path,
                           strerror(errno));
    if (!writing && !S_ISREG(sb.st_mode))
        return replay_fail(err, REPLAY_E_CORRUPT, "%s: not a regular file", path);
    if (writing) {
        kv_status s = check_writable(path, err);
        if (s != KV_OK)
            return s;
    }
    replay_db *db = calloc(1, sizeof *db);
    if (!db)
        return replay_fail(err, REPLAY_E_IO, "%s: out of memory", path);
    snprintf(db->path, sizeof db->path, "%s", path);
    db->writable = writing;
    int flags = (writing ? SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE : SQLITE_OPEN_READONLY) |
                SQLITE_OPEN_URI;
    int rc = sqlite3_open_v2(path, &db->h, flags, NULL);
    kv_status s = KV_OK;
    if (rc != SQLITE_OK)
        s = sql_fail(db, rc, "open", err);
    if (s == KV_OK) {
        sqlite3_extended_result_codes(db->h, 1);
        sqlite3_busy_timeout(db->h, REPLAY_BUSY_MS);
        int64_t version = 0;
        s = check_file(db, &version, err);
        /* A writer checks the whole file's structure first: SQLite writes
         * into a damaged b-tree without noticing when the pages it touches
         * look sane, and the damage then spreads. O(file size), once per
         * writing process. */
        if (s == KV_OK && writing && version > 0)
            s = replay_db_check(db, err);
        if (s != KV_OK && err->kind == REPLAY_E_CORRUPT && writing)
            snprintf(err->msg + strlen(err->msg), sizeof err->msg - strlen(err->msg), "; nothing was written");
    }
    /* Only a file that passed the checks is changed: WAL mode, then schema. */
    if (s == KV_OK && writing) {
        sqlite3_stmt *st;
        s = prepare(db, "PRAGMA journal_mode = WAL", &st, err);
        if (s == KV_OK) {
            /* Switching a fresh file to WAL while another writer does the
             * same can answer BUSY without calling the busy handler: wait
             * here, as the busy timeout would. */
            for (int waited = 0;; waited += 5) {
                rc = sqlite3_step(st);
                if (((rc & 0xff) != SQLITE_BUSY && (rc & 0xff) != SQLITE_LOCKED) || waited >= REPLAY_BUSY_MS) break;
                sqlite3_reset(st);
                sqlite3_sleep(5);
            }
            const unsigned char *m = rc == SQLITE_ROW ? sqlite3_column_text(st, 0) : NULL;
            bool wal = m && !strcmp((const char *)m, "wal");
            sqlite3_finalize(st);
            if (rc != SQLITE_ROW)
                s = sql_fail(db, rc, "PRAGMA journal_mode = WAL", err);
            else if (!wal)
                s = replay_fail(err, REPLAY_E_IO, "%s: cannot switch to WAL mode (journal mode %s)",
                                path, m ? (const char *)m : "?");
        }
        if (s == KV_OK)
            s = exec(db, "PRAGMA synchronous = NORMAL", err);
        if (s == KV_OK)
            s = migrate(db, err);
    }
    if (s == KV_OK)
        s = exec(db, "PRAGMA foreign_keys = ON", err);
    if (s != KV_OK) {
        replay_db_close(db);
        return s;
    }
    *out = db;
    return KV_OK;
}

void replay_db_close(replay_db *db) {
    if (!db)
        return;
    sqlite3_close(db->h);
    free(db);
}

void replay_db_set_commit_hook(replay_db *db, void (*fn)(void *ctx), void *ctx) {
    db->commit_hook = fn;
    db->commit_ctx = ctx;
}

/* ---- runs ------------------------------------------------------------------------ */

kv_status replay_db_run_begin(replay_db *db, const char *tool, const char *config, int64_t *out_run,
                              replay_err *err) {
    sqlite3_stmt *st;
    kv_status s = prepare(db,
                          "INSERT INTO runs (tool, git_commit, format_version, config, started_at) "
                          "VALUES (?,?,?,?,?)",
                          &st, err);
    if (s != KV_OK)
        return s;
    sqlite3_bind_text(st, 1, tool, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(st, 2, replay_build_commit(), -1, SQLITE_STATIC);
    sqlite3_bind_int(st, 3, (int)SIM_SCENARIO_VERSION);
    sqlite3_bind_text(st, 4, config ? config : "", -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(st, 5, (sqlite3_int64)time(NULL));
    s = step_done(db, st, "recording the run", err);
    if (s == KV_OK)
        *out_run = sqlite3_last_insert_rowid(db->h);
    return s;
}

kv_status replay_db_run_end(replay_db *db, int64_t run, uint64_t scenarios, replay_err *err) {
    sqlite3_stmt *st;
    kv_status s =
        prepare(db,
                "UPDATE runs SET ended_at = ?1, scenarios = ?2,"
                " findings = (SELECT count(*) FROM hits WHERE run_id = ?3),"
                " new_cases = (SELECT count(*) FROM cases WHERE first_run = ?3) WHERE id = ?3",
                &st, err);
    if (s != KV_OK)
        return s;
    sqlite3_bind_int64(st, 1, (sqlite3_int64)time(NULL));
    sqlite3_bind_int64(st, 2, (sqlite3_int64)scenarios);
    sqlite3_bind_int64(st, 3, run);
    return step_done(db, st, "ending the run", err);
}

void replay_violation_text(const sim_result *r, char *out, size_t cap) {
    snprintf(out, cap, "%s at event %" PRIu64 ", t=%" PRIu64 " ns, actor %s, engine %d, request %d: %s",
             kv_inv_name(r->inv), r->event, r->at_ns, r->actor_name, (int)r->engine, (int)r->req, r->detail);
}

/* ---- batches ---------------------------------------------------------------------- */

kv_status replay_db_batch_begin(replay_db *db, replay_err *err) {
    kv_status s = exec(db, "BEGIN IMMEDIATE", err);
    if (s == KV_OK)
        db->batch = true;
    return s;
}

kv_status replay_db_batch_commit(replay_db *db, replay_err *err) {
    kv_status s = exec(db, "COMMIT", err);
    if (s != KV_OK)
        rollback(db);
    db->batch = false;
    return s;
}

void replay_db_batch_rollback(replay_db *db) {
    if (db->batch)
        rollback(db);
    db->batch = false;
}

/* ---- recording ------------------------------------------------------------------- */

/* Canonical bytes and text of a valid scenario, in static scratch (one
 * thread). */
typedef struct encoded {
    uint8_t bytes[SIM_SCENARIO_BYTES_MAX];
    size_t n_bytes;
    char text[SIM_SCENARIO_TEXT_MAX];
    size_t n_text;
    char hash[17];
} encoded;

static kv_status encode(const sim_scenario *sc, encoded *e, replay_err *err) {
    if (!sim_scenario_valid(sc) ||
        sim_scenario_to_bytes(sc, e->bytes, sizeof e->bytes, &e->n_bytes) != KV_OK ||
        sim_scenario_to_text(sc, e->text, sizeof e->text, &e->n_text) != KV_OK)
        return replay_fail(err, REPLAY_E_BAD_CASE,
                           "scenario outside the format's ranges: cannot be recorded");
    hex16(replay_fnv64(e->bytes, e->n_bytes), e->hash);
    return KV_OK;
}

/* Inside the transaction: 1 if a hits row has this input hash. */
static kv_status input_seen(replay_db *db, const char *input_hash, bool *out, replay_err *err) {
    sqlite3_stmt *st;
    kv_status s = prepare(db, "SELECT 1 FROM hits WHERE input_hash = ? LIMIT 1", &st, err);
    if (s != KV_OK)
        return s;
    sqlite3_bind_text(st, 1, input_hash, -1, SQLITE_STATIC);
    int rc = sqlite3_step(st);
    sqlite3_finalize(st);
    *out = rc == SQLITE_ROW;
    return rc == SQLITE_ROW || rc == SQLITE_DONE ? KV_OK
                                                 : sql_fail(db, rc, "looking up the input", err);
}

static kv_status find_case(replay_db *db, const char *sig, int64_t *out_id, replay_err *err) {
    sqlite3_stmt *st;
    kv_status s = prepare(db, "SELECT id FROM cases WHERE signature = ?", &st, err);
    if (s != KV_OK)
        return s;
    sqlite3_bind_text(st, 1, sig, -1, SQLITE_STATIC);
    int rc = sqlite3_step(st);
    *out_id = rc == SQLITE_ROW ? sqlite3_column_int64(st, 0) : 0;
    sqlite3_finalize(st);
    return rc == SQLITE_ROW || rc == SQLITE_DONE
               ? KV_OK
               : sql_fail(db, rc, "looking up the signature", err);
}

static kv_status insert_case(replay_db *db, int64_t run, const replay_finding *f, const char *sig,
                             const encoded *e, int64_t now, int64_t *out_id, replay_err *err) {
    sqlite3_stmt *st;
    kv_status s = prepare(
        db,
        "INSERT INTO cases (signature, sig_short, invariant, detail, origin, first_seen, last_seen,"
        " first_run, last_run, format_version, scenario, scenario_len, scenario_hash, "
        "scenario_text,"
        " directives, input, seed, trace_hash, git_commit)"
        " VALUES (?1,?2,?3,?4,?5,?6,?6,?7,?7,?8,?9,?10,?11,?12,?13,?14,?15,?16,?17)",
        &st, err);
    if (s != KV_OK)
        return s;
    char sig_short[13], trace[17], detail[400];
    replay_sig_short(sig, sig_short);
    hex16(f->r->trace_hash, trace);
    replay_violation_text(f->r, detail, sizeof detail);
    sqlite3_bind_text(st, 1, sig, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, sig_short, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(st, 3, kv_inv_name(f->r->inv), -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 4, detail, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(st, 5, replay_origin_name(f->origin), -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 6, now);
    if (run > 0)
        sqlite3_bind_int64(st, 7, run);
    else
        sqlite3_bind_null(st, 7);
    sqlite3_bind_int(st, 8, (int)SIM_SCENARIO_VERSION);
    sqlite3_bind_blob(st, 9, e->bytes, (int)e->n_bytes, SQLITE_STATIC);
    sqlite3_bind_int64(st, 10, (sqlite3_int64)e->n_bytes);
    sqlite3_bind_text(st, 11, e->hash, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 12, e->text, (int)e->n_text, SQLITE_STATIC);
    sqlite3_bind_int(st, 13, (int)sim_scenario_directives(f->sc));
    if (f->input)
        sqlite3_bind_blob(st, 14, f->input, (int)f->input_len, SQLITE_STATIC);
    else
        sqlite3_bind_null(st, 14);
    if (f->have_seed)
        sqlite3_bind_int64(st, 15, (sqlite3_int64)f->seed);
    else
        sqlite3_bind_null(st, 15);
    sqlite3_bind_text(st, 16, trace, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(st, 17, replay_build_commit(), -1, SQLITE_STATIC);
    s = step_done(db, st, "inserting the case", err);
    if (s == KV_OK)
        *out_id = sqlite3_last_insert_rowid(db->h);
    return s;
}

static kv_status touch_case(replay_db *db, int64_t id, int64_t run, int64_t now, replay_err *err) {
    sqlite3_stmt *st;
    kv_status s = prepare(
        db,
        "UPDATE cases SET last_seen = max(last_seen, ?1), last_run = coalesce(?2, last_run),"
        " hits = hits + 1 WHERE id = ?3",
        &st, err);
    if (s != KV_OK)
        return s;
    sqlite3_bind_int64(st, 1, now);
    if (run > 0)
        sqlite3_bind_int64(st, 2, run);
    else
        sqlite3_bind_null(st, 2);
    sqlite3_bind_int64(st, 3, id);
    return step_done(db, st, "updating the case", err);
}

static kv_status insert_hit(replay_db *db, int64_t id, int64_t run, const replay_finding *f,
                            const char *input_hash, int64_t now, replay_err *err) {
    sqlite3_stmt *st;
    kv_status s = prepare(db,
                          "INSERT INTO hits (case_id, run_id, seen_at, seed, input_hash, source) "
                          "VALUES (?,?,?,?,?,?)",
                          &st, err);
    if (s != KV_OK)
        return s;
    sqlite3_bind_int64(st, 1, id);
    if (run > 0)
        sqlite3_bind_int64(st, 2, run);
    else
        sqlite3_bind_null(st, 2);
    sqlite3_bind_int64(st, 3, now);
    if (f->have_seed)
        sqlite3_bind_int64(st, 4, (sqlite3_int64)f->seed);
    else
        sqlite3_bind_null(st, 4);
    sqlite3_bind_text(st, 5, input_hash, -1, SQLITE_STATIC);
    if (f->source)
        sqlite3_bind_text(st, 6, f->source, -1, SQLITE_TRANSIENT);
    else
        sqlite3_bind_null(st, 6);
    return step_done(db, st, "recording the hit", err);
}

kv_status replay_db_record(replay_db *db, int64_t run, const replay_finding *f,
                           replay_recorded *out, replay_err *err) {
    static encoded e;
    static char sig[REPLAY_SIG_MAX];
    char input_hash[17];
    assert(f->r->violated);
    *out = (replay_recorded){0};
    kv_status s = encode(f->sc, &e, err);
    if (s != KV_OK)
        return s;
    replay_signature(f->r, sig, sizeof sig);
    hex16(f->input ? replay_fnv64(f->input, f->input_len) : replay_fnv64(e.bytes, e.n_bytes),
          input_hash);
    int64_t now = (int64_t)time(NULL), id = 0;
    s = record_begin(db, err);
    if (s != KV_OK)
        return s;
    bool seen = false;
    if (f->skip_seen_input)
        s = input_seen(db, input_hash, &seen, err);
    if (s == KV_OK && seen) {
        record_rollback(db);
        out->seen_input = true;
        return KV_OK;
    }
    if (s == KV_OK)
        s = find_case(db, sig, &id, err);
    if (s == KV_OK && id)
        s = touch_case(db, id, run, now, err);
    else if (s == KV_OK) {
        out->is_new = true;
        s = insert_case(db, run, f, sig, &e, now, &id, err);
    }
    if (s == KV_OK)
        s = insert_hit(db, id, run, f, input_hash, now, err);
    if (s == KV_OK && db->commit_hook)
        db->commit_hook(db->commit_ctx);
    if (s == KV_OK)
        s = record_commit(db, err);
    if (s != KV_OK) {
        record_rollback(db);
        out->is_new = false;
        return s;
    }
    out->case_id = id;
    return KV_OK;
}

/* ---- reading ----------------------------------------------------------------------- */

kv_status replay_db_case_ids(replay_db *db, int64_t **out_ids, size_t *out_n, replay_err *err) {
    *out_ids = NULL;
    *out_n = 0;
    int64_t n = 0;
    kv_status s = query_i64(db, "SELECT count(*) FROM cases", &n, err);
    if (s != KV_OK)
        return s;
    int64_t *ids = calloc((size_t)n + 1, sizeof *ids);
    if (!ids)
        return replay_fail(err, REPLAY_E_IO, "%s: out of memory", db->path);
    sqlite3_stmt *st;
    s = prepare(db, "SELECT id FROM cases ORDER BY id", &st, err);
    if (s != KV_OK)
        return free(ids), s;
    size_t got = 0;
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW && got < (size_t)n)
        ids[got++] = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE && rc != SQLITE_ROW)
        return free(ids), sql_fail(db, rc, "listing cases", err);
    *out_ids = ids;
    *out_n = got;
    return KV_OK;
}

#define INFO_COLS                                                                                  \
    "id, signature, sig_short, invariant, origin, status, first_seen, last_seen, hits, "           \
    "first_run, last_run,"                                                                         \
    " format_version, trace_hash, git_commit, detail, seed, directives, min_scenario IS NOT NULL," \
    " min_directives, min_trace_hash"

static void read_info(sqlite3_stmt *st, replay_case_info *o) {
    memset(o, 0, sizeof *o);
    o->id = sqlite3_column_int64(st, 0);
    copy_col(st, 1, o->signature, sizeof o->signature);
    copy_col(st, 2, o->sig_short, sizeof o->sig_short);
    copy_col(st, 3, o->invariant, sizeof o->invariant);
    copy_col(st, 4, o->origin, sizeof o->origin);
    const unsigned char *status = sqlite3_column_text(st, 5);
    o->fixed = status && !strcmp((const char *)status, "fixed");
    o->first_seen = sqlite3_column_int64(st, 6);
    o->last_seen = sqlite3_column_int64(st, 7);
    o->hits = sqlite3_column_int64(st, 8);
    o->first_run = sqlite3_column_int64(st, 9);
    o->last_run = sqlite3_column_int64(st, 10);
    o->format_version = (uint32_t)sqlite3_column_int64(st, 11);
    o->trace_hash = parse_hex(sqlite3_column_text(st, 12));
    copy_col(st, 13, o->git_commit, sizeof o->git_commit);
    copy_col(st, 14, o->detail, sizeof o->detail);
    o->have_seed = sqlite3_column_type(st, 15) != SQLITE_NULL;
    o->seed = (uint64_t)sqlite3_column_int64(st, 15);
    o->directives = (uint32_t)sqlite3_column_int64(st, 16);
    o->have_min = sqlite3_column_int(st, 17) != 0;
    o->min_directives = (uint32_t)sqlite3_column_int64(st, 18);
    o->min_trace_hash = parse_hex(sqlite3_column_text(st, 19));
}

kv_status replay_db_case_info(replay_db *db, int64_t id, replay_case_info *out, replay_err *err) {
    sqlite3_stmt *st;
    kv_status s = prepare(db, "SELECT " INFO_COLS " FROM cases WHERE id = ?", &st, err);
    if (s != KV_OK)
        return s;
    sqlite3_bind_int64(st, 1, id);
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW)
        read_info(st, out);
    sqlite3_finalize(st);
    if (rc == SQLITE_DONE)
        return replay_fail(err, REPLAY_E_NOT_FOUND, "%s: no case %" PRId64, db->path, id);
    return rc == SQLITE_ROW ? KV_OK : sql_fail(db, rc, "reading a case", err);
}

/* Decodes one stored blob after checking it is exactly what was recorded:
 * its length and hash, its magic, a format version the decoder reads
 * (1..SIM_SCENARIO_VERSION; the binary decoder still reads older magics),
 * and, for the current version, that it is the canonical encoding. */
static kv_status decode_blob(const replay_db *db, int64_t id, const char *which,
                             uint32_t format_version, const void *blob, size_t len,
                             int64_t want_len, const unsigned char *want_hash, sim_scenario *out,
                             replay_err *err) {
    static uint8_t again[SIM_SCENARIO_BYTES_MAX];
    const uint8_t *b = blob;
    char hash[17];
    if (format_version < 1 || format_version > SIM_SCENARIO_VERSION)
        return replay_fail(err, REPLAY_E_FORMAT,
                           "%s: case %" PRId64
                           " was recorded in scenario format version %u; this kvsim (commit %s) "
                           "decodes versions 1..%u: replay it with a build that knows version %u "
                           "(kvsim db show %" PRId64 " prints its text form)",
                           db->path, id, format_version, replay_build_commit(),
                           SIM_SCENARIO_VERSION, format_version, id);
    if ((int64_t)len != want_len)
        return replay_fail(err, REPLAY_E_BAD_CASE,
                           "%s: case %" PRId64 ": %s blob is %zu bytes, recorded as %" PRId64
                           " (%s)",
                           db->path, id, which, len, want_len,
                           (int64_t)len < want_len ? "truncated" : "longer than recorded");
    hex16(replay_fnv64(b, len), hash);
    if (!want_hash || strcmp(hash, (const char *)want_hash))
        return replay_fail(
            err, REPLAY_E_BAD_CASE,
            "%s: case %" PRId64 ": %s blob hash %s differs from the recorded %s (damaged)",
            db->path, id, which, hash, want_hash ? (const char *)want_hash : "(none)");
    if (len < 4 || memcmp(b, "KVS", 3) != 0)
        return replay_fail(err, REPLAY_E_BAD_CASE,
                           "%s: case %" PRId64
                           ": %s blob does not start with the scenario magic \"KVS\"",
                           db->path, id, which);
    if (b[3] != format_version)
        return replay_fail(err, REPLAY_E_BAD_CASE,
                           "%s: case %" PRId64
                           ": %s blob is in scenario format version %u, recorded as version %u",
                           db->path, id, which, b[3], format_version);
    sim_scenario_from_bytes(b, len, out);
    if (format_version < SIM_SCENARIO_VERSION)
        return KV_OK; /* an older encoding: decoded, not canonical now */
    size_t n = 0;
    if (sim_scenario_to_bytes(out, again, sizeof again, &n) != KV_OK || n != len ||
        memcmp(again, b, len))
        return replay_fail(err, REPLAY_E_BAD_CASE,
                           "%s: case %" PRId64 ": %s blob is not a canonical scenario encoding",
                           db->path, id, which);
    return KV_OK;
}

kv_status replay_db_case_get(replay_db *db, int64_t id, replay_case *out, replay_err *err) {
    sqlite3_stmt *st;
    kv_status s = prepare(db,
                          "SELECT " INFO_COLS
                          ", scenario, scenario_len, scenario_hash, min_scenario, min_len, min_hash"
                          " FROM cases WHERE id = ?",
                          &st, err);
    if (s != KV_OK)
        return s;
    sqlite3_bind_int64(st, 1, id);
    int rc = sqlite3_step(st);
    if (rc != SQLITE_ROW) {
        sqlite3_finalize(st);
        if (rc == SQLITE_DONE)
            return replay_fail(err, REPLAY_E_NOT_FOUND, "%s: no case %" PRId64, db->path, id);
        return sql_fail(db, rc, "reading a case", err);
    }
    read_info(st, &out->info);
    const void *blob = sqlite3_column_blob(st, 20);
    size_t len = (size_t)sqlite3_column_bytes(st, 20);
    s = decode_blob(db, id, "scenario", out->info.format_version, blob, len,
                    sqlite3_column_int64(st, 21), sqlite3_column_text(st, 22), &out->sc, err);
    if (s == KV_OK && out->info.have_min) {
        blob = sqlite3_column_blob(st, 23);
        len = (size_t)sqlite3_column_bytes(st, 23);
        s = decode_blob(db, id, "minimized scenario", out->info.format_version, blob, len,
                        sqlite3_column_int64(st, 24), sqlite3_column_text(st, 25), &out->min, err);
    }
    sqlite3_finalize(st);
    return s;
}

kv_status replay_db_case_text(replay_db *db, int64_t id, bool min, char *buf, size_t cap,
                              replay_err *err) {
    sqlite3_stmt *st;
    kv_status s = prepare(db, "SELECT scenario_text, min_text FROM cases WHERE id = ?", &st, err);
    if (s != KV_OK)
        return s;
    sqlite3_bind_int64(st, 1, id);
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        int col = min && sqlite3_column_type(st, 1) != SQLITE_NULL ? 1 : 0;
        copy_col(st, col, buf, cap);
    }
    sqlite3_finalize(st);
    if (rc == SQLITE_DONE)
        return replay_fail(err, REPLAY_E_NOT_FOUND, "%s: no case %" PRId64, db->path, id);
    return rc == SQLITE_ROW ? KV_OK : sql_fail(db, rc, "reading a case", err);
}

kv_status replay_db_each_run(replay_db *db, void (*fn)(void *ctx, const replay_run_info *r),
                             void *ctx, replay_err *err) {
    sqlite3_stmt *st;
    kv_status s = prepare(
        db,
        "SELECT id, tool, git_commit, format_version, config, started_at, coalesce(ended_at, 0),"
        " scenarios, findings, new_cases FROM runs ORDER BY id",
        &st, err);
    if (s != KV_OK)
        return s;
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        replay_run_info r;
        memset(&r, 0, sizeof r);
        r.id = sqlite3_column_int64(st, 0);
        copy_col(st, 1, r.tool, sizeof r.tool);
        copy_col(st, 2, r.git_commit, sizeof r.git_commit);
        r.format_version = (uint32_t)sqlite3_column_int64(st, 3);
        copy_col(st, 4, r.config, sizeof r.config);
        r.started_at = sqlite3_column_int64(st, 5);
        r.ended_at = sqlite3_column_int64(st, 6);
        r.scenarios = sqlite3_column_int64(st, 7);
        r.findings = sqlite3_column_int64(st, 8);
        r.new_cases = sqlite3_column_int64(st, 9);
        fn(ctx, &r);
    }
    sqlite3_finalize(st);
    return rc == SQLITE_DONE ? KV_OK : sql_fail(db, rc, "listing runs", err);
}

kv_status replay_db_case_runs(replay_db *db, int64_t id,
                              void (*fn)(void *ctx, const replay_case_run *r), void *ctx,
                              replay_err *err) {
    sqlite3_stmt *st;
    kv_status s = prepare(db,
                          "SELECT coalesce(run_id, 0), count(*), min(seen_at), max(seen_at),"
                          " count(seed), min(seed) FROM hits WHERE case_id = ?"
                          " GROUP BY run_id ORDER BY run_id",
                          &st, err);
    if (s != KV_OK)
        return s;
    sqlite3_bind_int64(st, 1, id);
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        replay_case_run r = {
            .run = sqlite3_column_int64(st, 0),
            .hits = sqlite3_column_int64(st, 1),
            .first_at = sqlite3_column_int64(st, 2),
            .last_at = sqlite3_column_int64(st, 3),
            .have_seed = sqlite3_column_int64(st, 4) > 0,
            .first_seed = (uint64_t)sqlite3_column_int64(st, 5),
        };
        fn(ctx, &r);
    }
    sqlite3_finalize(st);
    return rc == SQLITE_DONE ? KV_OK : sql_fail(db, rc, "listing a case's runs", err);
}

kv_status replay_db_check(replay_db *db, replay_err *err) {
    sqlite3_stmt *st;
    kv_status s = prepare(db, "PRAGMA quick_check", &st, err);
    if (s != KV_OK)
        return s;
    int rc = sqlite3_step(st);
    char first[256] = "";
    if (rc == SQLITE_ROW)
        copy_col(st, 0, first, sizeof first);
    sqlite3_finalize(st);
    if (rc != SQLITE_ROW)
        return sql_fail(db, rc, "PRAGMA quick_check", err);
    if (strcmp(first, "ok")) {
        /* one line: the first problem SQLite names ("*** in database main ***" is a heading) */
        const char *p = first;
        if (!strncmp(p, "*** ", 4) && strchr(p, '\n'))
            p = strchr(p, '\n') + 1;
        size_t n = strcspn(p, "\n");
        return replay_fail(err, REPLAY_E_CORRUPT, "%s: damaged: %.*s%s", db->path, (int)n, p,
                           p[n] ? " (and more)" : "");
    }
    return KV_OK;
}

/* ---- updating -------------------------------------------------------------------- */

static kv_status changed_one(replay_db *db, sqlite3_stmt *st, int64_t id, const char *what,
                             replay_err *err) {
    kv_status s = step_done(db, st, what, err);
    if (s == KV_OK && sqlite3_changes(db->h) == 0)
        return replay_fail(err, REPLAY_E_NOT_FOUND, "%s: no case %" PRId64, db->path, id);
    return s;
}

kv_status replay_db_set_minimized(replay_db *db, int64_t id, const sim_scenario *min,
                                  uint64_t trace_hash, replay_err *err) {
    static encoded e;
    kv_status s = encode(min, &e, err);
    if (s != KV_OK)
        return s;
    sqlite3_stmt *st;
    s = prepare(db,
                "UPDATE cases SET min_scenario = ?, min_len = ?, min_hash = ?, min_text = ?, "
                "min_directives = ?,"
                " min_trace_hash = ? WHERE id = ?",
                &st, err);
    if (s != KV_OK)
        return s;
    char trace[17];
    hex16(trace_hash, trace);
    sqlite3_bind_blob(st, 1, e.bytes, (int)e.n_bytes, SQLITE_STATIC);
    sqlite3_bind_int64(st, 2, (sqlite3_int64)e.n_bytes);
    sqlite3_bind_text(st, 3, e.hash, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 4, e.text, (int)e.n_text, SQLITE_STATIC);
    sqlite3_bind_int(st, 5, (int)sim_scenario_directives(min));
    sqlite3_bind_text(st, 6, trace, -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(st, 7, id);
    return changed_one(db, st, id, "storing the minimized scenario", err);
}

kv_status replay_db_set_status(replay_db *db, int64_t id, bool fixed, replay_err *err) {
    sqlite3_stmt *st;
    kv_status s = prepare(db, "UPDATE cases SET status = ? WHERE id = ?", &st, err);
    if (s != KV_OK)
        return s;
    sqlite3_bind_text(st, 1, fixed ? "fixed" : "open", -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 2, id);
    return changed_one(db, st, id, "setting the status", err);
}

kv_status replay_db_set_trace_hash(replay_db *db, int64_t id, uint64_t trace_hash, bool have_min,
                                   uint64_t min_trace_hash, replay_err *err) {
    sqlite3_stmt *st;
    kv_status s =
        prepare(db,
                "UPDATE cases SET trace_hash = ?, git_commit = ?,"
                " min_trace_hash = CASE WHEN ?3 THEN ?4 ELSE min_trace_hash END WHERE id = ?5",
                &st, err);
    if (s != KV_OK)
        return s;
    char trace[17], min_trace[17];
    hex16(trace_hash, trace);
    hex16(min_trace_hash, min_trace);
    sqlite3_bind_text(st, 1, trace, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(st, 2, replay_build_commit(), -1, SQLITE_STATIC);
    sqlite3_bind_int(st, 3, have_min);
    sqlite3_bind_text(st, 4, min_trace, -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(st, 5, id);
    return changed_one(db, st, id, "recording the trace hash", err);
}

/* ---- merging ----------------------------------------------------------------------- */

/* Binds columns 1..n of row (a src.runs row) to parameters 1..n of st and
 * steps it. */
static int step_with_run(sqlite3_stmt *st, sqlite3_stmt *row, int n) {
    sqlite3_reset(st);
    for (int c = 1; c <= n; c++)
        sqlite3_bind_value(st, c, sqlite3_column_value(row, c));
    return sqlite3_step(st);
}

/* src's runs into main, each matched to an identical run already there or
 * inserted with a new id; temp.runmap(src, dst) holds the mapping. */
static kv_status merge_runs(replay_db *db, replay_merge_stats *out, replay_err *err) {
    sqlite3_stmt *each = NULL, *match = NULL, *ins = NULL, *map = NULL;
    kv_status s =
        exec(db, "CREATE TEMP TABLE runmap (src INTEGER PRIMARY KEY, dst INTEGER NOT NULL)", err);
    if (s == KV_OK)
        s = prepare(db,
                    "SELECT id, tool, git_commit, format_version, config, started_at, ended_at, "
                    "scenarios, findings,"
                    " new_cases FROM src.runs ORDER BY id",
                    &each, err);
    if (s == KV_OK)
        s = prepare(
            db,
            "SELECT id FROM main.runs WHERE tool = ?1 AND git_commit = ?2 AND format_version = ?3"
            " AND config = ?4 AND started_at = ?5",
            &match, err);
    if (s == KV_OK)
        s = prepare(
            db,
            "INSERT INTO main.runs (tool, git_commit, format_version, config, started_at, ended_at,"
            " scenarios, findings, new_cases) VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9)",
            &ins, err);
    if (s == KV_OK)
        s = prepare(db, "INSERT INTO temp.runmap (src, dst) VALUES (?1, ?2)", &map, err);
    int rc = SQLITE_DONE;
    while (s == KV_OK && (rc = sqlite3_step(each)) == SQLITE_ROW) {
        int64_t dst = 0;
        int r2 = step_with_run(match, each, 5);
        if (r2 == SQLITE_ROW)
            dst = sqlite3_column_int64(match, 0);
        else if (r2 == SQLITE_DONE && (r2 = step_with_run(ins, each, 9)) == SQLITE_DONE) {
            dst = sqlite3_last_insert_rowid(db->h);
            out->runs++;
        }
        if (!dst) {
            s = sql_fail(db, r2, "copying a run", err);
            break;
        }
        sqlite3_reset(map);
        sqlite3_bind_int64(map, 1, sqlite3_column_int64(each, 0));
        sqlite3_bind_int64(map, 2, dst);
        if ((r2 = sqlite3_step(map)) != SQLITE_DONE)
            s = sql_fail(db, r2, "mapping a run", err);
    }
    if (s == KV_OK && rc != SQLITE_DONE)
        s = sql_fail(db, rc, "reading the source runs", err);
    sqlite3_finalize(each);
    sqlite3_finalize(match);
    sqlite3_finalize(ins);
    sqlite3_finalize(map);
    return s;
}

static const char merge_cases_sql[] =
    "INSERT INTO main.cases (signature, sig_short, invariant, detail, origin, status, first_seen, "
    "last_seen, hits,"
    " first_run, last_run, format_version, scenario, scenario_len, scenario_hash, scenario_text, "
    "directives, input,"
    " seed, trace_hash, git_commit, min_scenario, min_len, min_hash, min_text, min_directives, "
    "min_trace_hash)"
    " SELECT s.signature, s.sig_short, s.invariant, s.detail, s.origin, s.status, s.first_seen, "
    "s.last_seen, 0,"
    " (SELECT dst FROM temp.runmap WHERE src = s.first_run), (SELECT dst FROM temp.runmap WHERE "
    "src = s.last_run),"
    " s.format_version, s.scenario, s.scenario_len, s.scenario_hash, s.scenario_text, "
    "s.directives, s.input, s.seed,"
    " s.trace_hash, s.git_commit, s.min_scenario, s.min_len, s.min_hash, s.min_text, "
    "s.min_directives,"
    " s.min_trace_hash FROM src.cases s WHERE NOT EXISTS (SELECT 1 FROM main.cases m WHERE "
    "m.signature = s.signature);"
    "UPDATE main.cases AS m SET first_seen = min(m.first_seen, s.first_seen),"
    " last_run = CASE WHEN s.last_seen > m.last_seen THEN (SELECT dst FROM temp.runmap WHERE src = "
    "s.last_run)"
    " ELSE m.last_run END,"
    " last_seen = max(m.last_seen, s.last_seen),"
    " min_len = CASE WHEN m.min_scenario IS NULL THEN s.min_len ELSE m.min_len END,"
    " min_hash = CASE WHEN m.min_scenario IS NULL THEN s.min_hash ELSE m.min_hash END,"
    " min_text = CASE WHEN m.min_scenario IS NULL THEN s.min_text ELSE m.min_text END,"
    " min_directives = CASE WHEN m.min_scenario IS NULL THEN s.min_directives ELSE "
    "m.min_directives END,"
    " min_trace_hash = CASE WHEN m.min_scenario IS NULL THEN s.min_trace_hash ELSE "
    "m.min_trace_hash END,"
    " min_scenario = coalesce(m.min_scenario, s.min_scenario)"
    " FROM src.cases AS s WHERE s.signature = m.signature;";

static const char merge_hits_sql[] =
    "INSERT INTO main.hits (case_id, run_id, seen_at, seed, input_hash, source)"
    " SELECT m.id, (SELECT dst FROM temp.runmap WHERE src = h.run_id), h.seen_at, h.seed, "
    "h.input_hash, h.source"
    " FROM src.hits h JOIN src.cases s ON s.id = h.case_id JOIN main.cases m ON m.signature = "
    "s.signature"
    " WHERE NOT EXISTS (SELECT 1 FROM main.hits x WHERE x.case_id = m.id AND x.seen_at = h.seen_at "
    "AND"
    " x.input_hash = h.input_hash AND x.seed IS h.seed AND x.source IS h.source);";

static kv_status merge_body(replay_db *db, replay_merge_stats *out, replay_err *err) {
    int64_t known = 0, before = 0, after = 0, hits0 = 0, hits1 = 0;
    kv_status s = merge_runs(db, out, err);
    if (s == KV_OK)
        s = query_i64(
            db, "SELECT count(*) FROM src.cases s JOIN main.cases m ON m.signature = s.signature",
            &known, err);
    if (s == KV_OK)
        s = query_i64(db, "SELECT count(*) FROM main.cases", &before, err);
    if (s == KV_OK)
        s = query_i64(db, "SELECT count(*) FROM main.hits", &hits0, err);
    if (s == KV_OK)
        s = exec(db, merge_cases_sql, err);
    if (s == KV_OK)
        s = exec(db, merge_hits_sql, err);
    if (s == KV_OK)
        s = exec(db,
                 "UPDATE main.cases SET hits = (SELECT count(*) FROM main.hits h WHERE h.case_id = "
                 "cases.id)"
                 " WHERE signature IN (SELECT signature FROM src.cases);",
                 err);
    if (s == KV_OK)
        s = query_i64(db, "SELECT count(*) FROM main.cases", &after, err);
    if (s == KV_OK)
        s = query_i64(db, "SELECT count(*) FROM main.hits", &hits1, err);
    out->new_cases = (uint64_t)(after - before);
    out->merged_cases = (uint64_t)known;
    out->hits = (uint64_t)(hits1 - hits0);
    return s;
}

/* src_path as a read-only URI (file:PATH?mode=ro), '%', '?' and '#' escaped. */
static kv_status ro_uri(const char *path, char *buf, size_t cap, replay_err *err) {
    size_t n = (size_t)snprintf(buf, cap, "file:");
    for (const char *p = path; *p && n + 4 < cap; p++) {
        if (*p == '%' || *p == '?' || *p == '#')
            n += (size_t)snprintf(buf + n, cap - n, "%%%02X", (unsigned char)*p);
        else
            buf[n++] = *p;
    }
    if (n + 9 >= cap)
        return replay_fail(err, REPLAY_E_IO, "%s: path too long", path);
    snprintf(buf + n, cap - n, "?mode=ro");
    return KV_OK;
}

kv_status replay_db_merge(replay_db *db, const char *src_path, replay_merge_stats *out,
                          replay_err *err) {
    *out = (replay_merge_stats){0};
    struct stat a, b;
    if (stat(db->path, &a) == 0 && stat(src_path, &b) == 0 && a.st_dev == b.st_dev &&
        a.st_ino == b.st_ino)
        return replay_fail(err, REPLAY_E_IO, "%s: cannot merge a database into itself", src_path);
    replay_db *src;
    kv_status s =
        replay_db_open(src_path, REPLAY_DB_READ, &src, err); /* the same checks as any open */
    if (s != KV_OK)
        return s;
    replay_db_close(src);
    char uri[2200];
    s = ro_uri(src_path, uri, sizeof uri, err);
    if (s != KV_OK)
        return s;
    sqlite3_stmt *st;
    s = prepare(db, "ATTACH DATABASE ? AS src", &st, err);
    if (s != KV_OK)
        return s;
    sqlite3_bind_text(st, 1, uri, -1, SQLITE_STATIC);
    s = step_done(db, st, "attaching the source database", err);
    if (s != KV_OK)
        return s;
    s = exec(db, "BEGIN IMMEDIATE", err);
    if (s == KV_OK) {
        s = merge_body(db, out, err);
        if (s == KV_OK)
            s = exec(db, "DROP TABLE temp.runmap; COMMIT", err);
        if (s != KV_OK)
            rollback(db);
    }
    sqlite3_exec(db->h, "DROP TABLE IF EXISTS temp.runmap", NULL, NULL, NULL);
    sqlite3_exec(db->h, "DETACH DATABASE src", NULL, NULL, NULL);
    return s;
}
