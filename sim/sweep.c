/* sim/sweep.c — see sweep.h. */
#include "sim/sweep.h"

#include <string.h>

#include "sim/gen.h"

void sim_sweep_init(sim_sweep *s) {
    memset(s, 0, sizeof *s);
    s->first_violation_seed = UINT64_MAX;
}

static void absorb(sim_sweep *s, uint64_t seed, const sim_result *r) {
    s->runs++;
    s->events += r->events;
    s->requests += r->requests_ok + r->requests_error + r->requests_aborted;
    s->rejected_loads += r->rejected_loads;
    s->turned_away += r->turned_away;
    s->store_saves += r->store_saves;
    s->store_loads += r->store_loads;
    for (uint32_t i = 0; i < KV_INV_COUNT; i++) s->armed[i] += r->armed[i];
    for (uint32_t k = 0; k < SIM_F_KIND_COUNT; k++)
        for (uint32_t p = 0; p < KV_PH_COUNT; p++) s->fault_phase[k][p] += r->fault_phase[k][p];
    for (uint32_t k = 0; k < SIM_R_COUNT; k++) s->reach[k] += r->reach[k];
    if (r->sim_error != KV_OK) s->sim_errors++;
    if (!r->violated) return;
    s->violations++;
    if (!s->by_inv[r->inv]++) s->first_seed[r->inv] = seed;
    if (s->first_violation_seed == UINT64_MAX) {
        s->first_violation_seed = seed;
        s->first = *r;
    }
}

kv_status sim_sweep_run_hooks(sim_world *w, uint64_t from, uint64_t to, uint32_t bugs, bool stop_at_first,
                              uint32_t shard_i, uint32_t shard_n, const sim_sweep_hooks *hooks, sim_sweep *out) {
    static sim_world_cfg cfg;
    static const sim_sweep_hooks none;
    sim_result r;
    if (!hooks) hooks = &none;
    if (shard_n == 0 || shard_i >= shard_n || to < from) return KV_EINVAL;
    uint64_t total = to - from + 1, done = 0;
    for (uint64_t seed = from; seed <= to; seed++) {
        done++;
        if (seed % shard_n != shard_i) continue;
        (hooks->gen ? hooks->gen : sim_gen)(seed, bugs, &cfg);
        kv_status st = sim_world_run(w, &cfg, NULL, &r);
        if (st != KV_OK) return st;
        absorb(out, seed, &r);
        if (cfg.conn_p < KV_CONN_KIND_COUNT) out->conn_runs[cfg.conn_p]++;
        if (r.violated && hooks->finding) hooks->finding(hooks->finding_ctx, seed, &cfg, &r);
        if (hooks->progress) hooks->progress(hooks->progress_ctx, done, total, out);
        if (stop_at_first && r.violated) break;
        if (seed == UINT64_MAX) break;
    }
    return KV_OK;
}

kv_status sim_sweep_run(sim_world *w, uint64_t from, uint64_t to, uint32_t bugs, bool stop_at_first,
                        uint32_t shard_i, uint32_t shard_n, sim_sweep_progress cb, void *ctx,
                        sim_sweep *out) {
    sim_sweep_hooks h = {.progress = cb, .progress_ctx = ctx};
    return sim_sweep_run_hooks(w, from, to, bugs, stop_at_first, shard_i, shard_n, &h, out);
}
