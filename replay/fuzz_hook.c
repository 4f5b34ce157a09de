/* replay/fuzz_hook.c — see fuzz_hook.h. */
#include "replay/fuzz_hook.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "replay/db.h"
#include "replay/finding.h"

void replay_fuzz_record(const char *target, const uint8_t *data, size_t size,
                        const sim_world_cfg *cfg, const sim_result *r) {
    static replay_db *db; /* process lifetime */
    static sim_world *w;  /* for replay_fit's re-run */
    static int64_t run;
    const char *path = getenv("KVCONN_DB");
    if (!path || !*path || !r->violated)
        return;
    replay_err err = {0};
    kv_status s = KV_OK;
    if (!db) {
        const char *bug = getenv("KVCONN_BUG");
        char config[128];
        snprintf(config, sizeof config, "KVCONN_BUG=%s", bug ? bug : "");
        s = replay_db_open(path, REPLAY_DB_WRITE, &db, &err);
        if (s == KV_OK)
            s = replay_db_run_begin(db, target, config, &run, &err);
        if (s == KV_OK && sim_world_new(&w) != KV_OK)
            s = replay_fail(&err, REPLAY_E_IO, "out of memory");
    }
    replay_recorded rec = {0};
    replay_fit_how how = REPLAY_FIT_SAME;
    /* re-running an artifact (fuzz_scenario crash-*) is not a new finding */
    replay_source src = {.origin = REPLAY_ORIGIN_FUZZ,
                         .input = data,
                         .input_len = size,
                         .source = target,
                         .skip_seen_input = true};
    if (s == KV_OK)
        s = replay_record_run(db, run, w, cfg, r, &src, &rec, &how, &err);
    if (s == KV_OK)
        s = replay_db_run_end(db, run, 0, &err);
    if (s != KV_OK)
        fprintf(stderr, "KVCONN_DB=%s: finding not recorded: %s\n", path, err.msg);
    else if (how == REPLAY_FIT_LOST)
        fprintf(stderr,
                "KVCONN_DB=%s: finding not recorded: it violates only with a liveness bound over "
                SIM_STR(SIM_LIVE_BOUND_MAX_S) " s\n",
                path);
    else if (rec.seen_input)
        fprintf(stderr, "KVCONN_DB=%s: this input is already recorded\n", path);
    else
        fprintf(stderr, "KVCONN_DB=%s: case %" PRId64 " (%s)\n", path, rec.case_id,
                rec.is_new ? "new" : "seen before");
}
