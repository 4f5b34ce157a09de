/* replay/shrink.c — see shrink.h. */
#include "replay/shrink.h"

#include <stdlib.h>
#include <string.h>

#define KEEP_MAX (SIM_REQS_MAX > SIM_FAULTS_MAX ? SIM_REQS_MAX : SIM_FAULTS_MAX)

typedef struct shrinker {
    sim_world *w;            /* borrowed */
    replay_shrink_stats *st; /* borrowed */
    uint32_t max_runs;
    sim_scenario cur; /* smallest so far; always violates with st->signature */
    sim_result cur_r;
    sim_scenario cand; /* the candidate being tried */
    sim_result r;
    bool keep[KEEP_MAX];
} shrinker;

/* ---- the test ---------------------------------------------------------------------- */

static bool same_violation(shrinker *s, const sim_scenario *sc, sim_result *r) {
    if (s->st->runs >= s->max_runs) {
        s->st->budget_hit = true;
        return false;
    }
    s->st->runs++;
    if (sim_world_run(s->w, &sc->cfg, NULL, r) != KV_OK || !r->violated)
        return false;
    char sig[REPLAY_SIG_MAX];
    replay_signature(r, sig, sizeof sig);
    return !strcmp(sig, s->st->signature);
}

static bool clean_without_bugs(shrinker *s, sim_scenario *sc) {
    sim_result r;
    uint32_t bugs = sc->cfg.bugs;
    if (s->st->runs >= s->max_runs)
        return s->st->budget_hit = true, false;
    s->st->runs++;
    sc->cfg.bugs = 0;
    kv_status st = sim_world_run(s->w, &sc->cfg, NULL, &r);
    sc->cfg.bugs = bugs;
    return st == KV_OK && !r.violated && r.sim_error == KV_OK;
}

/* Clamps s->cand and keeps it when it differs from cur and still violates
 * the same way (and, under blame, runs clean without the switches). */
static bool try_cand(shrinker *s) {
    sim_scenario_clamp(&s->cand);
    if (sim_scenario_equal(&s->cand, &s->cur))
        return false;
    if (!same_violation(s, &s->cand, &s->r))
        return false;
    if (s->st->blame && !clean_without_bugs(s, &s->cand))
        return false;
    sim_scenario_copy(&s->cur, &s->cand);
    s->cur_r = s->r;
    s->st->steps++;
    return true;
}

static void begin_cand(shrinker *s) {
    sim_scenario_copy(&s->cand, &s->cur);
}

/* ---- ddmin over faults and requests -------------------------------------------------- */

typedef uint32_t (*count_fn)(const sim_scenario *sc);
typedef void (*drop_fn)(sim_scenario *sc, const bool *keep);

static uint32_t count_faults(const sim_scenario *sc) {
    return sc->cfg.n_faults;
}
static uint32_t count_reqs(const sim_scenario *sc) {
    return sc->cfg.n_reqs;
}

static void drop_faults(sim_scenario *sc, const bool *keep) {
    uint32_t j = 0;
    for (uint32_t i = 0; i < sc->cfg.n_faults; i++)
        if (keep[i])
            sc->cfg.fault[j++] = sc->cfg.fault[i];
    sc->cfg.n_faults = j;
}

/* Requests compacted; an abort follows its request (the world reads its
 * target modulo n_reqs) or goes with it. */
static void drop_reqs(sim_scenario *sc, const bool *keep) {
    sim_world_cfg *c = &sc->cfg;
    uint32_t n = c->n_reqs, map[SIM_REQS_MAX], j = 0;
    for (uint32_t i = 0; i < n; i++) {
        map[i] = keep[i] ? j : UINT32_MAX;
        if (keep[i])
            c->req[j++] = c->req[i];
    }
    c->n_reqs = j;
    uint32_t k = 0;
    for (uint32_t i = 0; i < c->n_faults; i++) {
        sim_fault f = c->fault[i];
        if (f.kind == SIM_F_ABORT && n) {
            uint32_t to = map[f.target % n];
            if (to == UINT32_MAX || j == 0)
                continue;
            f.target = to;
        }
        c->fault[k++] = f;
    }
    c->n_faults = k;
}

/* Complement-only ddmin: remove one of g chunks; on success coarsen, else
 * refine until chunks are single elements. */
static bool ddmin(shrinker *s, count_fn count, drop_fn drop) {
    bool progress = false;
    uint32_t n = count(&s->cur), g = 2;
    while (n > 0 && !s->st->budget_hit) {
        if (g > n)
            g = n;
        uint32_t chunk = (n + g - 1) / g;
        bool removed = false;
        for (uint32_t start = 0; start < n && !removed; start += chunk) {
            for (uint32_t i = 0; i < n; i++)
                s->keep[i] = i < start || i >= start + chunk;
            begin_cand(s);
            drop(&s->cand, s->keep);
            removed = try_cand(s);
        }
        if (removed) {
            progress = true;
            n = count(&s->cur);
            g = g > 2 ? g - 1 : 2;
        } else if (g >= n) {
            break;
        } else {
            g = g * 2 < n ? g * 2 : n;
        }
    }
    return progress;
}

/* ---- groups and topology ------------------------------------------------------------- */

static bool shrink_groups(shrinker *s) {
    bool progress = false;
    for (uint32_t g = s->cur.cfg.n_groups; g-- > 1 && !s->st->budget_hit;) {
        begin_cand(s);
        sim_world_cfg *c = &s->cand.cfg;
        for (uint32_t k = g; k + 1 < c->n_groups; k++)
            c->group[k] = c->group[k + 1];
        c->n_groups--;
        progress |= try_cand(s);
    }
    return progress;
}

/* The engine count of one side: P (0) or D (1). */
static uint32_t *side_count(sim_world_cfg *c, int side) {
    return side ? &c->n_d : &c->n_p;
}

/* Tries each engine count below the current one, smallest first. */
static bool lower_count(shrinker *s, int side) {
    uint32_t now = *side_count(&s->cur.cfg, side);
    for (uint32_t v = 1; v < now && !s->st->budget_hit; v++) {
        begin_cand(s);
        *side_count(&s->cand.cfg, side) = v;
        if (try_cand(s))
            return true;
    }
    return false;
}

static bool shrink_topology(shrinker *s) {
    sim_world_cfg d;
    sim_world_cfg_default(&d);
    bool progress = lower_count(s, 0);
    progress |= lower_count(s, 1);
    for (int knob = 0; knob < 10 && !s->st->budget_hit; knob++) {
        begin_cand(s);
        sim_world_cfg *c = &s->cand.cfg;
        switch (knob) {
        case 0:
            c->tp_p = d.tp_p;
            break;
        case 1:
            c->tp_d = d.tp_d;
            break;
        case 2:
            c->block_size = d.block_size;
            break;
        case 3:
            c->pool_blocks_p = d.pool_blocks_p;
            break;
        case 4:
            c->pool_blocks_d = d.pool_blocks_d;
            break;
        case 5:
            c->policy = d.policy;
            break;
        case 6:
            c->prefix_caching = d.prefix_caching;
            break;
        case 7:
            c->conn_p = d.conn_p;
            break;
        case 8:
            c->conn_d = d.conn_d;
            break;
        default:
            c->store_capacity = d.store_capacity;
            break;
        }
        progress |= try_cand(s);
    }
    return progress;
}

/* ---- request fields ---------------------------------------------------------------- */

static bool shrink_req_fields(shrinker *s) {
    bool progress = false;
    for (uint32_t i = 0; i < s->cur.cfg.n_reqs && !s->st->budget_hit; i++) {
        for (int field = 0; field < 5 && !s->st->budget_hit; field++) {
            begin_cand(s);
            sim_req_plan *q = &s->cand.cfg.req[i];
            switch (field) {
            case 0:
                q->prefix_group = 0, q->prefix_len = 0;
                break;
            case 1:
                q->sequential = 0;
                break;
            case 2:
                q->d_extra_tokens = 0;
                break;
            case 3:
                q->max_tokens = 4;
                break;
            default:
                q->prompt_len = 16;
                if (q->prefix_len > 16)
                    q->prefix_len = 16;
                break;
            }
            progress |= try_cand(s);
        }
    }
    return progress;
}

/* ---- the choice stream ------------------------------------------------------------- */

static bool shrink_choice(shrinker *s) {
    bool progress = false;
    if (!s->cur.cfg.choice_len)
        return false;
    begin_cand(s);
    s->cand.cfg.choice_len = 0;
    if (try_cand(s))
        return true;
    while (s->cur.cfg.choice_len > 1 && !s->st->budget_hit) {
        begin_cand(s);
        s->cand.cfg.choice_len /= 2;
        if (!try_cand(s))
            break;
        progress = true;
    }
    size_t n = s->cur.cfg.choice_len, chunk = n / 8 ? n / 8 : 1;
    for (size_t at = 0; at < n && !s->st->budget_hit; at += chunk) {
        size_t len = at + chunk <= n ? chunk : n - at;
        bool zero = true;
        for (size_t i = 0; i < len; i++)
            zero &= s->cur.choice[at + i] == 0;
        if (zero)
            continue;
        begin_cand(s);
        memset(s->cand.choice + at, 0, len);
        progress |= try_cand(s);
    }
    return progress;
}

/* ---- driver ---------------------------------------------------------------------------- */

kv_status replay_shrink(sim_world *w, const sim_scenario *in, const replay_shrink_opts *o,
                        sim_scenario *out, sim_result *out_r, replay_shrink_stats *st) {
    memset(st, 0, sizeof *st);
    shrinker *s = calloc(1, sizeof *s);
    if (!s)
        return KV_ENOMEM;
    s->w = w;
    s->st = st;
    s->max_runs = o->max_runs ? o->max_runs : REPLAY_SHRINK_RUNS_DEFAULT;
    sim_scenario_copy(&s->cur, in);
    st->directives_before = sim_scenario_directives(in);
    st->choice_before = (uint32_t)in->cfg.choice_len;
    st->runs = 1;
    kv_status rc = sim_world_run(w, &s->cur.cfg, NULL, &s->cur_r);
    if (rc == KV_OK && !s->cur_r.violated)
        rc = KV_ENOENT;
    if (rc == KV_OK) {
        replay_signature(&s->cur_r, st->signature, sizeof st->signature);
        st->blame = o->keep_blame && in->cfg.bugs && clean_without_bugs(s, &s->cur);
        bool progress = true;
        while (progress && !st->budget_hit) {
            progress = ddmin(s, count_faults, drop_faults);
            progress |= ddmin(s, count_reqs, drop_reqs);
            progress |= shrink_groups(s);
            progress |= shrink_topology(s);
            progress |= shrink_req_fields(s);
            progress |= shrink_choice(s);
        }
        sim_scenario_copy(out, &s->cur);
        *out_r = s->cur_r;
        st->directives_after = sim_scenario_directives(out);
        st->choice_after = (uint32_t)out->cfg.choice_len;
    }
    free(s);
    return rc;
}
