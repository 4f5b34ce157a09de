/* replay/check.c — see check.h. */
#include "replay/check.h"

#include <string.h>

const char *replay_outcome_name(replay_outcome o) {
    switch (o) {
    case REPLAY_SAME:
        return "same";
    case REPLAY_DRIFT:
        return "drift";
    case REPLAY_OTHER:
        return "other";
    case REPLAY_GONE:
        return "gone";
    case REPLAY_SIM_ERROR:
        return "sim-error";
    }
    return "?";
}

replay_outcome replay_compare(bool have_sig, const char *sig, bool have_hash, uint64_t hash,
                              const sim_result *r) {
    if (r->sim_error != KV_OK)
        return REPLAY_SIM_ERROR;
    if (!r->violated)
        return have_sig ? REPLAY_GONE
                        : (have_hash && r->trace_hash != hash ? REPLAY_DRIFT : REPLAY_SAME);
    if (have_sig) {
        char got[REPLAY_SIG_MAX];
        replay_signature(r, got, sizeof got);
        if (strcmp(got, sig))
            return REPLAY_OTHER;
    }
    return have_hash && r->trace_hash != hash ? REPLAY_DRIFT : REPLAY_SAME;
}

kv_status replay_check_case(sim_world *w, const replay_case *c, replay_case_check *out) {
    memset(out, 0, sizeof *out);
    kv_status st = sim_world_run(w, &c->sc.cfg, NULL, &out->r);
    if (st != KV_OK)
        return st;
    out->outcome = replay_compare(true, c->info.signature, true, c->info.trace_hash, &out->r);
    bool violates = out->r.violated;
    bool same = out->outcome == REPLAY_SAME;
    if (c->info.have_min) {
        out->have_min = true;
        st = sim_world_run(w, &c->min.cfg, NULL, &out->min_r);
        if (st != KV_OK)
            return st;
        out->min_outcome =
            replay_compare(true, c->info.signature, true, c->info.min_trace_hash, &out->min_r);
        violates |= out->min_r.violated;
        same &= out->min_outcome == REPLAY_SAME;
    }
    out->regressed = !c->info.fixed && !same;
    out->came_back = c->info.fixed && violates;
    return KV_OK;
}
