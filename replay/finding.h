/* replay/finding.h — turning a run that violated into a database case:
 * the scenario that ran, made recordable, with the result it gives.
 *
 * A case stores a valid scenario (sim/scenario.h ranges) so that its
 * binary and text forms replay exactly. Sweeps already run valid ones. A
 * fuzz input, once prepared (sim_cfg_searchable), can carry a liveness
 * bound above the format's 600 s: replay_fit caps it, re-runs, and keeps
 * the capped scenario when it still violates with the same signature (the
 * bound only matters once a run idles past it). */
#ifndef KVCONN_REPLAY_FINDING_H
#define KVCONN_REPLAY_FINDING_H

#include <stdbool.h>

#include "replay/db.h"
#include "sim/scenario.h"
#include "sim/world.h"

typedef enum replay_fit_how {
    REPLAY_FIT_SAME,   /* cfg was valid: out is cfg, out_r is r */
    REPLAY_FIT_CAPPED, /* fitted into range; re-run gives the same signature */
    REPLAY_FIT_LOST,   /* fitted, but the fitted run does not keep the signature */
} replay_fit_how;

/* cfg ran and gave r (violated). Fills out (choice bytes copied) and
 * out_r, the result of running out. w is used for the re-run. */
kv_status replay_fit(sim_world *w, const sim_world_cfg *cfg, const sim_result *r, sim_scenario *out,
                     sim_result *out_r, replay_fit_how *how);

/* What one recording call should say about where the finding came from. */
typedef struct replay_source {
    replay_origin origin;
    const uint8_t *input; /* borrowed: the input as found, or NULL */
    size_t input_len;
    bool have_seed;
    uint64_t seed;
    const char *source; /* borrowed: file name, or NULL ("seed N" is made from seed) */
    bool skip_seen_input;
} replay_source;

/* replay_fit, then replay_db_record (one transaction). *how tells whether
 * anything was recorded (not when REPLAY_FIT_LOST). */
kv_status replay_record_run(replay_db *db, int64_t run, sim_world *w, const sim_world_cfg *cfg,
                            const sim_result *r, const replay_source *src, replay_recorded *out,
                            replay_fit_how *how, replay_err *err);

#endif
