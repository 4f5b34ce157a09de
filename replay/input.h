/* replay/input.h — what `kvsim replay` and `kvsim shrink` accept, loaded
 * into one scenario plus what was recorded about it:
 *
 *   db:FILE:ID    case ID of the findings database FILE (read-only); the
 *                 recorded signature and trace hash come with it
 *   NAME.kvs      text scenario; "# signature TEXT" and "# trace-hash HEX"
 *                 comment lines (kvsim db export writes them) are recorded
 *                 expectations too
 *   any other     binary scenario: the canonical encoding (kvsim db export
 *                 --bin), or with fuzz set a fuzz_scenario input (a libFuzzer
 *                 crash-* or AFL++ crashes/ file), prepared exactly as the
 *                 fuzz target prepares it (fuzz_prepare) */
#ifndef KVCONN_REPLAY_INPUT_H
#define KVCONN_REPLAY_INPUT_H

#include <stdbool.h>
#include <stdint.h>

#include "replay/db.h"
#include "sim/scenario.h"

typedef struct replay_load_opts {
    uint32_t bugs;  /* OR'd into the scenario (the fuzzer's KVCONN_BUG for --fuzz) */
    bool fuzz;      /* binary file: a fuzz_scenario input */
    bool minimized; /* db case: its minimized scenario (error if none) */
} replay_load_opts;

typedef struct replay_input {
    sim_scenario sc;
    bool have_sig;
    char signature[REPLAY_SIG_MAX];
    bool have_hash;
    uint64_t trace_hash;
    bool from_db;
    char db_path[1024];
    replay_case_info info; /* when from_db */
} replay_input;

/* Splits "db:FILE:ID" (the last ':' ends FILE). False when spec does not
 * start with "db:"; *ok tells whether the rest parsed. */
bool replay_parse_db_spec(const char *spec, char *path, size_t cap, int64_t *id, bool *ok);

kv_status replay_input_load(const char *spec, const replay_load_opts *o, replay_input *out,
                            replay_err *err);

/* Reads a whole file of at most cap bytes into buf. REPLAY_E_NOT_FOUND,
 * REPLAY_E_BAD_INPUT (too large) or REPLAY_E_IO. */
kv_status replay_read_file(const char *path, uint8_t *buf, size_t cap, size_t *out_len,
                           replay_err *err);

#endif
