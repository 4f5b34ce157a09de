/* replay/check.h — does a case still do what the database recorded?
 *
 * A replay is compared with what was recorded: the same signature and
 * trace hash is SAME; the same signature with another hash is DRIFT (the
 * simulator changed since the hash was recorded); another violation is
 * OTHER; a clean run is GONE.
 *
 * For `kvsim db verify`: an open case has regressed when it is not SAME
 * (its repro no longer works as recorded); a fixed case came back when it
 * violates at all. */
#ifndef KVCONN_REPLAY_CHECK_H
#define KVCONN_REPLAY_CHECK_H

#include <stdbool.h>
#include <stdint.h>

#include "replay/db.h"
#include "sim/world.h"

typedef enum replay_outcome {
    REPLAY_SAME,
    REPLAY_DRIFT,
    REPLAY_OTHER,
    REPLAY_GONE,
    REPLAY_SIM_ERROR, /* the simulator rejected it or ran out of a resource */
} replay_outcome;
const char *replay_outcome_name(replay_outcome o);

/* r against an expectation; have_sig / have_hash false: not compared. */
replay_outcome replay_compare(bool have_sig, const char *sig, bool have_hash, uint64_t hash,
                              const sim_result *r);

typedef struct replay_case_check {
    replay_outcome outcome;
    sim_result r;
    bool have_min;
    replay_outcome min_outcome;
    sim_result min_r;
    bool regressed; /* open and (outcome or min_outcome) not SAME */
    bool came_back; /* fixed and (scenario or minimized) violates */
} replay_case_check;

/* Runs c's scenario (and its minimized one) and judges them. */
kv_status replay_check_case(sim_world *w, const replay_case *c, replay_case_check *out);

#endif
