/* replay/import.h — fuzzer findings into the database: libFuzzer crash-*
 * artifacts and AFL++ crashes/ directories.
 *
 * A path that is a file is imported as one input. A directory is walked
 * (sorted, at most REPLAY_IMPORT_DEPTH levels, symlinks not followed):
 * files named crash-* anywhere, and every file inside a directory named
 * "crashes" except AFL++'s README.txt, are inputs; other files are ignored.
 * Each input is a fuzz_scenario input: decoded and prepared as the target
 * prepares it (fuzz_prepare, with bugs as KVCONN_BUG was), run, and if it
 * violates, recorded with origin "import" (replay_record_run). An input
 * already in the database (same bytes) is skipped. */
#ifndef KVCONN_REPLAY_IMPORT_H
#define KVCONN_REPLAY_IMPORT_H

#include <stdint.h>

#include "replay/db.h"
#include "sim/world.h"

#define REPLAY_IMPORT_DEPTH 6

typedef enum replay_import_what {
    REPLAY_IMPORT_NEW,       /* a new case */
    REPLAY_IMPORT_SEEN,      /* a new hit of a known case */
    REPLAY_IMPORT_DUPLICATE, /* these bytes were imported before */
    REPLAY_IMPORT_CLEAN,     /* runs clean: not a finding (wrong bug switch?) */
    REPLAY_IMPORT_LOST,      /* violates only with a liveness bound past the format's (SIM_LIVE_BOUND_MAX_S) */
    REPLAY_IMPORT_SIM_ERROR, /* the simulator rejected it */
} replay_import_what;

typedef struct replay_import_stats {
    uint64_t inputs;
    uint64_t by_what[REPLAY_IMPORT_SIM_ERROR + 1];
} replay_import_stats;

/* Called once per input (case_id 0 unless NEW or SEEN); r is its run. */
typedef void (*replay_import_note)(void *ctx, const char *path, replay_import_what what,
                                   int64_t case_id, const sim_result *r);

kv_status replay_import(replay_db *db, int64_t run, sim_world *w, const char *path, uint32_t bugs,
                        replay_import_note note, void *ctx, replay_import_stats *st,
                        replay_err *err);

#endif
