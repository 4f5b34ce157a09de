/* replay/finding.c — see finding.h. */
#include "replay/finding.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

static void copy_cfg(const sim_world_cfg *cfg, sim_scenario *out) {
    sim_scenario_init(out);
    size_t n = cfg->choice && cfg->choice_len ? cfg->choice_len : 0;
    if (n > SIM_CHOICE_MAX)
        n = SIM_CHOICE_MAX;
    out->cfg = *cfg;
    if (n)
        memcpy(out->choice, cfg->choice, n);
    out->cfg.choice = out->choice;
    out->cfg.choice_len = n;
}

kv_status replay_fit(sim_world *w, const sim_world_cfg *cfg, const sim_result *r, sim_scenario *out,
                     sim_result *out_r, replay_fit_how *how) {
    copy_cfg(cfg, out);
    if (cfg->choice_len <= SIM_CHOICE_MAX && sim_scenario_valid(out)) {
        *out_r = *r;
        *how = REPLAY_FIT_SAME;
        return KV_OK;
    }
    if (out->cfg.live_bound_ns > SIM_LIVE_BOUND_MAX_NS)
        out->cfg.live_bound_ns = SIM_LIVE_BOUND_MAX_NS;
    sim_scenario_clamp(out);
    kv_status st = sim_world_run(w, &out->cfg, NULL, out_r);
    if (st != KV_OK)
        return st;
    char want[REPLAY_SIG_MAX], got[REPLAY_SIG_MAX];
    replay_signature(r, want, sizeof want);
    if (out_r->violated)
        replay_signature(out_r, got, sizeof got);
    *how = out_r->violated && !strcmp(want, got) ? REPLAY_FIT_CAPPED : REPLAY_FIT_LOST;
    return KV_OK;
}

kv_status replay_record_run(replay_db *db, int64_t run, sim_world *w, const sim_world_cfg *cfg,
                            const sim_result *r, const replay_source *src, replay_recorded *out,
                            replay_fit_how *how, replay_err *err) {
    static sim_scenario sc;
    static sim_result fr;
    *out = (replay_recorded){0};
    kv_status st = replay_fit(w, cfg, r, &sc, &fr, how);
    if (st != KV_OK)
        return replay_fail(err, REPLAY_E_BAD_INPUT, "the scenario cannot be re-run: %s",
                           kv_status_str(st));
    if (*how == REPLAY_FIT_LOST)
        return KV_OK;
    char seed_src[40];
    const char *where = src->source;
    if (!where && src->have_seed) {
        snprintf(seed_src, sizeof seed_src, "seed %" PRIu64, src->seed);
        where = seed_src;
    }
    replay_finding f = {.origin = src->origin,
                        .sc = &sc,
                        .r = &fr,
                        .input = src->input,
                        .input_len = src->input_len,
                        .have_seed = src->have_seed,
                        .seed = src->seed,
                        .source = where,
                        .skip_seen_input = src->skip_seen_input};
    return replay_db_record(db, run, &f, out, err);
}
