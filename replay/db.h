/* replay/db.h — the findings database: one SQLite file (default
 * kvconn-findings.db) that sweeps, fuzzers and imports write their
 * violations into, deduplicated by signature (replay/signature.h).
 *
 * Schema (version REPLAY_SCHEMA_VERSION in PRAGMA user_version, the file
 * marked by PRAGMA application_id REPLAY_APP_ID):
 *   runs   one row per tool invocation that records: tool, git commit of the
 *          build, scenario format version, config (its command line or
 *          environment), started/ended (unix s; ended NULL while running or
 *          when killed), scenarios run, findings, new cases.
 *   cases  one row per signature: the canonical binary scenario (with its
 *          length and FNV-1a hash, so a damaged blob is caught), its text
 *          form, the input as found (fuzzer bytes, else NULL), origin
 *          (sweep/fuzz/manual/import), first/last seen, hits, first/last run,
 *          the invariant and first violation's detail, the trace hash and the
 *          commit that recorded it, the scenario format version, the sweep
 *          seed, the minimized scenario (same checks) and status open/fixed.
 *   hits   one row per finding recorded: case, run, time, seed, input hash,
 *          source (file or "seed N"); import skips inputs already in hits.
 * The schema is created by the first writer and migrated by any writer:
 * schema_steps[v] takes version v to v + 1 inside one transaction.
 *
 * Concurrency: WAL mode, synchronous=NORMAL (a committed transaction
 * survives the process being killed), busy timeout REPLAY_BUSY_MS, and
 * every write is one BEGIN IMMEDIATE transaction (one finding, one
 * transaction), so writers queue on the lock instead of failing.
 *
 * Errors: every failing call returns a kv_status and fills *err with a
 * class (replay_err_kind, which the CLI maps to an exit code) and a message
 * that names the file, the case and what was wrong. Opening checks a file
 * before changing anything in it: a file that is not a SQLite database, is
 * damaged, belongs to another application, has a schema version this build
 * does not know, or is read-only (no write bit, or the OS refuses) is left
 * exactly as it was.
 *
 * Ownership: a replay_db owns its sqlite3 connection; one thread; never
 * carried across fork() (open one in each process). */
#ifndef KVCONN_REPLAY_DB_H
#define KVCONN_REPLAY_DB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kvconn/status.h"
#include "replay/signature.h"
#include "sim/scenario.h"

#define REPLAY_SCHEMA_VERSION 1
#define REPLAY_APP_ID 0x4b564442 /* "KVDB" */
#define REPLAY_BUSY_MS 60000
#define REPLAY_DB_DEFAULT "kvconn-findings.db"

typedef enum replay_err_kind {
    REPLAY_E_NONE = 0,
    REPLAY_E_CORRUPT,   /* not a SQLite file, damaged, or not a findings database */
    REPLAY_E_VERSION,   /* database schema version not understood */
    REPLAY_E_READONLY,  /* cannot be written: read-only file or directory, or locked too long */
    REPLAY_E_BAD_CASE,  /* a stored case is damaged (truncated or altered blob) */
    REPLAY_E_FORMAT,    /* a case in a scenario format version this build does not decode */
    REPLAY_E_NOT_FOUND, /* no such database file or case */
    REPLAY_E_BAD_INPUT, /* an input file (.kvs, binary scenario) that cannot be used */
    REPLAY_E_IO,        /* any other SQLite or file error */
} replay_err_kind;

typedef struct replay_err {
    replay_err_kind kind;
    char msg[512];
} replay_err;

/* Fills *err (kind and printf-style message) and returns the kv_status of
 * that kind; every replay/ module reports errors through it. */
#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
kv_status
replay_fail(replay_err *err, replay_err_kind kind, const char *fmt, ...);

typedef enum replay_origin {
    REPLAY_ORIGIN_SWEEP,
    REPLAY_ORIGIN_FUZZ,
    REPLAY_ORIGIN_MANUAL,
    REPLAY_ORIGIN_IMPORT,
    REPLAY_ORIGIN_COUNT
} replay_origin;
const char *replay_origin_name(replay_origin o);

typedef enum replay_open_mode {
    REPLAY_DB_READ,  /* must exist; never written */
    REPLAY_DB_WRITE, /* created if missing; schema created or migrated */
} replay_open_mode;

typedef struct replay_db replay_db;

/* The commit this library was built from ("unknown" outside a checkout). */
const char *replay_build_commit(void);

kv_status replay_db_open(const char *path, replay_open_mode mode, replay_db **out, replay_err *err);
void replay_db_close(replay_db *db); /* NULL-safe */
const char *replay_db_path(const replay_db *db);

/* ---- runs -------------------------------------------------------------------- */

kv_status replay_db_run_begin(replay_db *db, const char *tool, const char *config, int64_t *out_run,
                              replay_err *err);
/* Sets ended, scenarios, and findings / new cases counted from the tables. */
kv_status replay_db_run_end(replay_db *db, int64_t run, uint64_t scenarios, replay_err *err);

/* The one-line description of a violation the cases table keeps (its
 * detail column): "INV at event N, t=T ns, actor A, engine E, request R:
 * detail". */
void replay_violation_text(const sim_result *r, char *out, size_t cap);

/* ---- batches ---------------------------------------------------------------- */

/* All or nothing: between batch_begin and batch_commit every write (a run
 * row, its records) is one IMMEDIATE transaction, and batch_rollback undoes
 * all of it; a record that fails inside a batch is undone alone (a
 * savepoint) and the caller decides. The write lock is held throughout:
 * other writers wait for it (busy timeout) or fail with "locked". A
 * process that dies inside a batch leaves nothing of it. Used by
 * `kvsim db import`, so a failed import leaves no run behind. */
kv_status replay_db_batch_begin(replay_db *db, replay_err *err);
kv_status replay_db_batch_commit(replay_db *db, replay_err *err);
void replay_db_batch_rollback(replay_db *db); /* no-op outside a batch */

/* ---- recording --------------------------------------------------------------- */

typedef struct replay_finding {
    replay_origin origin;
    const sim_scenario *sc; /* valid (sim_scenario_valid): exactly what ran; borrowed */
    const sim_result *r;    /* its result, r->violated; borrowed */
    const uint8_t
        *input; /* borrowed: the input as found (fuzzer bytes); NULL: the scenario itself */
    size_t input_len;
    bool have_seed;
    uint64_t seed;        /* sweep seed */
    const char *source;   /* borrowed: file name or "seed N" for the hits table; may be NULL */
    bool skip_seen_input; /* an input already in hits is not recorded again */
} replay_finding;

typedef struct replay_recorded {
    int64_t case_id;
    bool is_new;     /* a new signature: a new case row */
    bool seen_input; /* skip_seen_input and the input was there: nothing written */
} replay_recorded;

/* One transaction: the case row (inserted, or last seen / hits updated) and
 * a hits row. */
kv_status replay_db_record(replay_db *db, int64_t run, const replay_finding *f,
                           replay_recorded *out, replay_err *err);

/* Test hook: called inside each recording transaction just before COMMIT
 * (fault injection: a test kills the process there). NULL turns it off. */
void replay_db_set_commit_hook(replay_db *db, void (*fn)(void *ctx), void *ctx);

/* ---- reading ----------------------------------------------------------------- */

typedef struct replay_case_info {
    int64_t id;
    char signature[REPLAY_SIG_MAX];
    char sig_short[13];
    char invariant[32];
    char origin[16];
    bool fixed; /* status 'fixed' (else 'open') */
    int64_t first_seen, last_seen, hits, first_run, last_run;
    uint32_t format_version;
    uint64_t trace_hash;
    char git_commit[48]; /* build that recorded trace_hash */
    char detail[400];    /* the first violation, as printed */
    bool have_seed;
    uint64_t seed;
    uint32_t directives;
    bool have_min;
    uint32_t min_directives;
    uint64_t min_trace_hash;
} replay_case_info;

typedef struct replay_case {
    replay_case_info info;
    sim_scenario sc;  /* decoded and checked */
    sim_scenario min; /* valid when info.have_min */
} replay_case;

/* Ids of every case, ascending, into a heap array the caller frees. */
kv_status replay_db_case_ids(replay_db *db, int64_t **out_ids, size_t *out_n, replay_err *err);
/* The header fields only (no blob checks). REPLAY_E_NOT_FOUND: no such id. */
kv_status replay_db_case_info(replay_db *db, int64_t id, replay_case_info *out, replay_err *err);
/* Header and decoded scenarios. The blobs are checked: a scenario format
 * version this build decodes (1..SIM_SCENARIO_VERSION: older versions
 * still decode; REPLAY_E_FORMAT names the version otherwise), then the
 * recorded length and hash, the magic, and for the current version the
 * canonical encoding (REPLAY_E_BAD_CASE). On such an error out->info is
 * still filled. */
kv_status replay_db_case_get(replay_db *db, int64_t id, replay_case *out, replay_err *err);
/* The stored text form (minimized when min and there is one) into buf. */
kv_status replay_db_case_text(replay_db *db, int64_t id, bool min, char *buf, size_t cap,
                              replay_err *err);

typedef struct replay_run_info {
    int64_t id;
    char tool[64];
    char git_commit[48];
    uint32_t format_version;
    char config[256];
    int64_t started_at, ended_at; /* ended_at 0: not ended */
    int64_t scenarios, findings, new_cases;
} replay_run_info;

/* Calls fn for every run, ascending. */
kv_status replay_db_each_run(replay_db *db, void (*fn)(void *ctx, const replay_run_info *r),
                             void *ctx, replay_err *err);

/* The runs that recorded hits of one case, ascending by run id: per run the
 * number of hits, the first and last time (unix s) and the smallest seed
 * (sweep hits; have_seed false when none had one). run 0: hits without a run. */
typedef struct replay_case_run {
    int64_t run, hits, first_at, last_at;
    bool have_seed;
    uint64_t first_seed;
} replay_case_run;
kv_status replay_db_case_runs(replay_db *db, int64_t id,
                              void (*fn)(void *ctx, const replay_case_run *r), void *ctx,
                              replay_err *err);

/* PRAGMA quick_check: REPLAY_E_CORRUPT with its first message unless ok. */
kv_status replay_db_check(replay_db *db, replay_err *err);

/* ---- updating ---------------------------------------------------------------- */

kv_status replay_db_set_minimized(replay_db *db, int64_t id, const sim_scenario *min,
                                  uint64_t trace_hash, replay_err *err);
kv_status replay_db_set_status(replay_db *db, int64_t id, bool fixed, replay_err *err);
/* Records a new trace hash for the case (and its minimized scenario when
 * have_min), with this build's commit. */
kv_status replay_db_set_trace_hash(replay_db *db, int64_t id, uint64_t trace_hash, bool have_min,
                                   uint64_t min_trace_hash, replay_err *err);

typedef struct replay_merge_stats {
    uint64_t runs, new_cases, merged_cases, hits;
} replay_merge_stats;

/* Folds the database at src_path (opened read-only and checked like any
 * other) into db in one transaction: its runs get new ids, its cases are
 * matched by signature (new ones inserted; known ones get the earlier
 * first_seen, the later last_seen, a minimized scenario if db has none),
 * its hits rows are added unless an identical one is there, and hits
 * counts are recomputed. Merging the same file twice adds no hits. */
kv_status replay_db_merge(replay_db *db, const char *src_path, replay_merge_stats *out,
                          replay_err *err);

#endif
