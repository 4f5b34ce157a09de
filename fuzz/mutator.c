/* fuzz/mutator.c — structure-aware scenario mutations (see mutator.h).
 *
 * Values are drawn where bugs live: small worlds and pools more often than
 * large ones (they are also cheaper to run), faults timed a few hundred
 * microseconds to tens of milliseconds after a request arrives (inside its
 * P queue, prefill, pull or decode), requests arriving together. Every
 * value stays inside the scenario format's ranges; sim_scenario_clamp runs
 * after each mutation anyway, so a topology change that orphans a request's
 * engine index folds it back into range the way the decoder would.
 *
 * Fault kinds are handled by name-independent rules (target and arg drawn
 * per the kind's meaning in sim/world.h, small values for kinds added
 * later), so a new fault kind is mutated from the day it exists. */
#include "fuzz/mutator.h"

#include <string.h>

#include "sim/choice.h"

#define NS_US 1000ull
#define NS_MS 1000000ull
#define NS_S 1000000000ull
#define AT_MAX_NS (60ull * NS_S)
#define TIMEOUT_MIN_NS NS_MS
#define TIMEOUT_MAX_NS (600ull * NS_S)
#define SIDE_MAX 4u
#define POOL_MIN 8u
#define POOL_MAX 1024u
#define PROMPT_MAX 512u
#define MAX_TOKENS_MAX 64u
#define PREFIX_GROUPS 8u
#define D_EXTRA_MAX 128u
#define WINDOW_MAX 1024u
#define STORE_MIN 16u
#define STORE_MAX 4096u
#define U16_SPAN 65536u
#define TRIES 8
_Static_assert(FUZZ_REQS_SOFT <= SIM_REQS_MAX, "the request cap is inside the format's range");

static const uint32_t tp_set[3] = {1, 2, 4};
static const uint32_t block_set[4] = {4, 8, 16, 32};

/* Relative weights of the mutation kinds (sum 100). Requests and faults are
 * what bug reports are made of; seeds and timeouts matter less. */
static const uint8_t weight[FUZZ_MUT_COUNT] = {
    [FUZZ_MUT_REQ_INSERT] = 12, [FUZZ_MUT_REQ_DELETE] = 5,   [FUZZ_MUT_REQ_CHANGE] = 12,
    [FUZZ_MUT_FAULT_INSERT] = 14, [FUZZ_MUT_FAULT_DELETE] = 5, [FUZZ_MUT_FAULT_RETIME] = 12,
    [FUZZ_MUT_FAULT_CHANGE] = 8, [FUZZ_MUT_TOPOLOGY] = 12,    [FUZZ_MUT_GROUPS] = 5,
    [FUZZ_MUT_TIMEOUTS] = 4,     [FUZZ_MUT_CHOICE] = 8,       [FUZZ_MUT_SEED] = 3,
};

const char *fuzz_mut_name(fuzz_mut m) {
    static const char *const names[FUZZ_MUT_COUNT] = {
        [FUZZ_MUT_REQ_INSERT] = "req_insert",     [FUZZ_MUT_REQ_DELETE] = "req_delete",
        [FUZZ_MUT_REQ_CHANGE] = "req_change",     [FUZZ_MUT_FAULT_INSERT] = "fault_insert",
        [FUZZ_MUT_FAULT_DELETE] = "fault_delete", [FUZZ_MUT_FAULT_RETIME] = "fault_retime",
        [FUZZ_MUT_FAULT_CHANGE] = "fault_change", [FUZZ_MUT_TOPOLOGY] = "topology",
        [FUZZ_MUT_GROUPS] = "groups",             [FUZZ_MUT_TIMEOUTS] = "timeouts",
        [FUZZ_MUT_CHOICE] = "choice",             [FUZZ_MUT_SEED] = "seed",
    };
    return (unsigned)m < FUZZ_MUT_COUNT ? names[m] : "?";
}

/* ---- randomness ---------------------------------------------------------------- */

void fuzz_rng_init(fuzz_rng *r, uint64_t seed) { r->s = sim_mix64(seed ^ 0x6d7574617465ull); }

uint64_t fuzz_rng_next(fuzz_rng *r) {
    r->s += 0x9e3779b97f4a7c15ull;
    return sim_mix64(r->s);
}

uint32_t fuzz_rng_below(fuzz_rng *r, uint32_t n) { return n ? (uint32_t)(fuzz_rng_next(r) % n) : 0; }

static uint64_t below64(fuzz_rng *r, uint64_t n) { return n ? fuzz_rng_next(r) % n : 0; }

static bool coin(fuzz_rng *r, uint32_t one_in) { return fuzz_rng_below(r, one_in) == 0; }

/* lo..hi, small values more likely: a random bit width first, then a value
 * below 2^width (8..1024 gives 8..15 almost half the time, 512..1024 about
 * one time in 22). */
static uint32_t small_in(fuzz_rng *r, uint32_t lo, uint32_t hi) {
    uint32_t span = hi - lo, bits = 0;
    while (bits < 31 && (1u << bits) <= span) bits++;
    uint32_t w = fuzz_rng_below(r, bits + 1u);
    uint32_t cap = w >= 31 ? span : ((1u << w) - 1u < span ? (1u << w) - 1u : span);
    return lo + fuzz_rng_below(r, cap + 1u);
}

static uint64_t min_u64(uint64_t a, uint64_t b) { return a < b ? a : b; }

/* A delta at one of six scales, 0 .. 99 units of 1 us .. 1 s. */
static uint64_t delta_ns(fuzz_rng *r) {
    static const uint64_t scale[6] = {NS_US, 100 * NS_US, NS_MS, 10 * NS_MS, 100 * NS_MS, NS_S};
    return fuzz_rng_below(r, 100) * scale[fuzz_rng_below(r, 6)];
}

/* A request's arrival (most of the time) or 0: where a fault matters. */
static uint64_t anchor_ns(const sim_world_cfg *c, fuzz_rng *r) {
    if (!c->n_reqs || coin(r, 5)) return 0;
    return c->req[fuzz_rng_below(r, c->n_reqs)].at_ns;
}

/* ---- requests -------------------------------------------------------------------- */

static uint64_t req_time(const sim_world_cfg *c, fuzz_rng *r) {
    switch (fuzz_rng_below(r, 4)) {
    case 0: return 0;
    case 1: return anchor_ns(c, r); /* together with another request */
    case 2: return min_u64(anchor_ns(c, r) + delta_ns(r), AT_MAX_NS);
    default: return (uint64_t)fuzz_rng_below(r, 200) * 100 * NS_US; /* 0..20 ms */
    }
}

static uint32_t prompt_len(const sim_world_cfg *c, fuzz_rng *r) {
    uint32_t bs = c->block_size;
    switch (fuzz_rng_below(r, 3)) {
    case 0: return bs * (1u + fuzz_rng_below(r, 8)); /* exactly full blocks */
    case 1: return bs * fuzz_rng_below(r, 8) + 1u;   /* one token into a block */
    default: return small_in(r, 1, PROMPT_MAX);
    }
}

static void req_field(sim_req_plan *q, const sim_world_cfg *c, uint32_t field, fuzz_rng *r) {
    switch (field) {
    case 0: q->at_ns = req_time(c, r); break;
    case 1: q->p_engine = fuzz_rng_below(r, c->n_p); break;
    case 2: q->d_engine = fuzz_rng_below(r, c->n_d); break;
    case 3: q->prompt_len = prompt_len(c, r); break;
    case 4: q->max_tokens = small_in(r, 1, MAX_TOKENS_MAX); break;
    case 5:
        q->prefix_group = fuzz_rng_below(r, PREFIX_GROUPS);
        q->prefix_len = coin(r, 3) ? q->prompt_len : fuzz_rng_below(r, q->prompt_len + 1u);
        break;
    case 6: q->sequential = (uint8_t)!q->sequential; break;
    default: q->d_extra_tokens = coin(r, 2) ? 0 : small_in(r, 1, D_EXTRA_MAX); break;
    }
}
enum { REQ_FIELDS = 8 };

static void req_new(sim_req_plan *q, const sim_world_cfg *c, fuzz_rng *r) {
    memset(q, 0, sizeof *q);
    q->at_ns = req_time(c, r);
    q->p_engine = fuzz_rng_below(r, c->n_p);
    q->d_engine = fuzz_rng_below(r, c->n_d);
    q->prompt_len = prompt_len(c, r);
    q->max_tokens = small_in(r, 1, 16);
    if (coin(r, 3)) req_field(q, c, 5, r);
    q->sequential = (uint8_t)coin(r, 2);
    if (coin(r, 8)) req_field(q, c, 7, r);
}

static bool mut_req_insert(sim_scenario *s, fuzz_rng *r) {
    sim_world_cfg *c = &s->cfg;
    if (c->n_reqs >= SIM_REQS_MAX) return false;
    uint32_t at = fuzz_rng_below(r, c->n_reqs + 1u);
    memmove(&c->req[at + 1], &c->req[at], (c->n_reqs - at) * sizeof c->req[0]);
    req_new(&c->req[at], c, r);
    c->n_reqs++;
    return true;
}

static bool mut_req_delete(sim_scenario *s, fuzz_rng *r) {
    sim_world_cfg *c = &s->cfg;
    if (!c->n_reqs) return false;
    uint32_t at = fuzz_rng_below(r, c->n_reqs);
    memmove(&c->req[at], &c->req[at + 1], (c->n_reqs - at - 1u) * sizeof c->req[0]);
    c->n_reqs--;
    return true;
}

static bool mut_req_change(sim_scenario *s, fuzz_rng *r) {
    sim_world_cfg *c = &s->cfg;
    if (!c->n_reqs) return false;
    req_field(&c->req[fuzz_rng_below(r, c->n_reqs)], c, fuzz_rng_below(r, REQ_FIELDS), r);
    return true;
}

/* ---- faults ---------------------------------------------------------------------- */

/* Target and arg as sim/world.h gives them meaning for the kind. */
static void fault_target(sim_fault *f, const sim_world_cfg *c, fuzz_rng *r) {
    uint32_t k = f->kind;
    f->target = 0;
    f->arg = 0;
    if (k == SIM_F_ABORT) f->target = fuzz_rng_below(r, c->n_reqs ? c->n_reqs : 1u);
    else if (k == SIM_F_SENDER_EXCEPTION || k == SIM_F_SENDER_ERR_REQ || k == SIM_F_SENDER_DROP_RESP ||
             k == SIM_F_TE_ERROR)
        f->target = fuzz_rng_below(r, c->n_p);
    else if (k == SIM_F_BOOT_DOWN) f->arg = small_in(r, 1, 300);
    else if (k == SIM_F_NET_RESET) {
        f->target = fuzz_rng_below(r, c->n_p);
        f->arg = fuzz_rng_below(r, c->n_d);
    } else if (k == SIM_F_NET_DELAY) f->arg = small_in(r, 1, 50);
    else { /* a kind newer than this file: small values */
        f->target = fuzz_rng_below(r, 8);
        f->arg = small_in(r, 0, 300);
    }
}

static uint64_t fault_time(const sim_world_cfg *c, fuzz_rng *r) {
    return min_u64(anchor_ns(c, r) + delta_ns(r), AT_MAX_NS);
}

static bool mut_fault_insert(sim_scenario *s, fuzz_rng *r) {
    sim_world_cfg *c = &s->cfg;
    if (c->n_faults >= SIM_FAULTS_MAX) return false;
    uint32_t at = fuzz_rng_below(r, c->n_faults + 1u);
    memmove(&c->fault[at + 1], &c->fault[at], (c->n_faults - at) * sizeof c->fault[0]);
    sim_fault *f = &c->fault[at];
    f->kind = 1u + fuzz_rng_below(r, SIM_F_KIND_COUNT - 1u);
    fault_target(f, c, r);
    f->at_ns = fault_time(c, r);
    c->n_faults++;
    return true;
}

static bool mut_fault_delete(sim_scenario *s, fuzz_rng *r) {
    sim_world_cfg *c = &s->cfg;
    if (!c->n_faults) return false;
    uint32_t at = fuzz_rng_below(r, c->n_faults);
    memmove(&c->fault[at], &c->fault[at + 1], (c->n_faults - at - 1u) * sizeof c->fault[0]);
    c->n_faults--;
    return true;
}

static bool mut_fault_retime(sim_scenario *s, fuzz_rng *r) {
    sim_world_cfg *c = &s->cfg;
    if (!c->n_faults) return false;
    sim_fault *f = &c->fault[fuzz_rng_below(r, c->n_faults)];
    uint64_t d = delta_ns(r);
    if (!d) d = NS_US;
    switch (fuzz_rng_below(r, 3)) {
    case 0: f->at_ns = min_u64(f->at_ns + d, AT_MAX_NS); break;
    case 1: f->at_ns = f->at_ns > d ? f->at_ns - d : 0; break;
    default: f->at_ns = fault_time(c, r); break;
    }
    return true;
}

static bool mut_fault_change(sim_scenario *s, fuzz_rng *r) {
    sim_world_cfg *c = &s->cfg;
    if (!c->n_faults) return false;
    sim_fault *f = &c->fault[fuzz_rng_below(r, c->n_faults)];
    switch (fuzz_rng_below(r, 3)) {
    case 0:
        f->kind = 1u + fuzz_rng_below(r, SIM_F_KIND_COUNT - 1u);
        fault_target(f, c, r);
        break;
    case 1: f->target = coin(r, 4) ? fuzz_rng_below(r, U16_SPAN) : fuzz_rng_below(r, 8); break;
    default: f->arg = coin(r, 4) ? fuzz_rng_below(r, U16_SPAN) : small_in(r, 0, 300); break;
    }
    return true;
}

/* ---- world ----------------------------------------------------------------------- */

static uint32_t pool_blocks(uint32_t now, fuzz_rng *r) {
    if (coin(r, 3)) {
        uint32_t v = coin(r, 2) ? now / 2u : now * 2u;
        return v < POOL_MIN ? POOL_MIN : v > POOL_MAX ? POOL_MAX : v;
    }
    return small_in(r, POOL_MIN, POOL_MAX);
}

static bool mut_topology(sim_scenario *s, fuzz_rng *r) {
    sim_world_cfg *c = &s->cfg;
    switch (fuzz_rng_below(r, 12)) {
    case 0: c->n_p = small_in(r, 1, SIDE_MAX); break;
    case 1: c->n_d = small_in(r, 1, SIDE_MAX); break;
    case 2: c->tp_p = tp_set[fuzz_rng_below(r, 3)]; break;
    case 3: c->tp_d = tp_set[fuzz_rng_below(r, 3)]; break;
    case 4: c->block_size = block_set[fuzz_rng_below(r, 4)]; break;
    case 5: c->pool_blocks_p = pool_blocks(c->pool_blocks_p, r); break;
    case 6: c->pool_blocks_d = pool_blocks(c->pool_blocks_d, r); break;
    case 7: c->policy = (uint8_t)!c->policy; break;
    case 8: c->prefix_caching = !c->prefix_caching; break;
    case 9: c->conn_p = (uint8_t)(1u + fuzz_rng_below(r, KV_CONN_KIND_COUNT - 1u)); break;
    case 10: c->conn_d = (uint8_t)(1u + fuzz_rng_below(r, KV_CONN_KIND_COUNT - 1u)); break;
    default: c->store_capacity = small_in(r, STORE_MIN, STORE_MAX); break;
    }
    return true;
}

static void group_new(kv_group_cfg *g, fuzz_rng *r) {
    g->kind = (uint8_t)fuzz_rng_below(r, 3);
    g->window = g->kind == KV_GROUP_SLIDING ? small_in(r, 1, WINDOW_MAX) : 0;
}

static bool mut_groups(sim_scenario *s, fuzz_rng *r) {
    sim_world_cfg *c = &s->cfg;
    uint32_t what = c->n_groups > 1 ? fuzz_rng_below(r, 3) : 0;
    if (what == 0) {
        uint32_t n = 1u + fuzz_rng_below(r, KV_GROUPS_MAX);
        for (uint32_t g = c->n_groups; g < n; g++) group_new(&c->group[g], r);
        c->n_groups = n;
        return true;
    }
    kv_group_cfg *g = &c->group[1u + fuzz_rng_below(r, c->n_groups - 1u)];
    if (what == 1 || g->kind != KV_GROUP_SLIDING) group_new(g, r);
    else g->window = small_in(r, 1, WINDOW_MAX);
    return true;
}

/* sim_cfg_searchable keeps P's abort timeout in 10 ms..2 s and recomputes
 * the liveness bound, so those are the values worth drawing. */
static uint64_t timeout_ns(fuzz_rng *r) {
    static const uint64_t common[6] = {10 * NS_MS, 50 * NS_MS, 100 * NS_MS, 500 * NS_MS, NS_S, 2 * NS_S};
    if (coin(r, 2)) return common[fuzz_rng_below(r, 6)];
    if (coin(r, 8)) return TIMEOUT_MIN_NS + below64(r, TIMEOUT_MAX_NS - TIMEOUT_MIN_NS);
    return 10 * NS_MS + (uint64_t)fuzz_rng_below(r, 1990) * NS_MS;
}

static bool mut_timeouts(sim_scenario *s, fuzz_rng *r) {
    sim_world_cfg *c = &s->cfg;
    if (coin(r, 2)) c->abort_timeout_ns = timeout_ns(r);
    else c->recv_timeout_ns = coin(r, 2) ? timeout_ns(r) : c->abort_timeout_ns + delta_ns(r) + NS_MS;
    if (c->recv_timeout_ns > TIMEOUT_MAX_NS) c->recv_timeout_ns = TIMEOUT_MAX_NS;
    return true;
}

static bool mut_choice(sim_scenario *s, fuzz_rng *r) {
    sim_world_cfg *c = &s->cfg;
    size_t n = c->choice_len;
    uint32_t op = n ? fuzz_rng_below(r, 4) : 0;
    if (op == 0 && n >= SIM_CHOICE_MAX) op = 1;
    if (op == 0) { /* append a run */
        size_t k = 1u + fuzz_rng_below(r, 64);
        if (k > SIM_CHOICE_MAX - n) k = SIM_CHOICE_MAX - n;
        for (size_t i = 0; i < k; i++) s->choice[n + i] = (uint8_t)below64(r, 256);
        c->choice_len = n + k;
    } else if (op == 1) { /* set one to four bytes */
        for (uint32_t i = 0, k = 1u + fuzz_rng_below(r, 4); i < k; i++)
            s->choice[fuzz_rng_below(r, (uint32_t)n)] ^= (uint8_t)(1u + fuzz_rng_below(r, 255));
    } else if (op == 2) { /* erase a run (the bytes after it now drive earlier choices) */
        size_t at = fuzz_rng_below(r, (uint32_t)n), k = 1u + fuzz_rng_below(r, (uint32_t)(n - at));
        memmove(s->choice + at, s->choice + at + k, n - at - k);
        c->choice_len = n - k;
    } else { /* insert a byte */
        if (n >= SIM_CHOICE_MAX) n = SIM_CHOICE_MAX - 1u;
        size_t at = fuzz_rng_below(r, (uint32_t)n + 1u);
        memmove(s->choice + at + 1, s->choice + at, n - at);
        s->choice[at] = (uint8_t)below64(r, 256);
        c->choice_len = n + 1u;
    }
    return true;
}

static bool mut_seed(sim_scenario *s, fuzz_rng *r) {
    s->cfg.seed = coin(r, 2) ? s->cfg.seed + 1u : fuzz_rng_next(r);
    return true;
}

/* ---- dispatch -------------------------------------------------------------------- */

/* Field by field: the structs have padding, which copies need not keep. */
static bool req_eq(const sim_req_plan *a, const sim_req_plan *b) {
    return a->at_ns == b->at_ns && a->p_engine == b->p_engine && a->d_engine == b->d_engine &&
           a->prompt_len == b->prompt_len && a->max_tokens == b->max_tokens && a->prefix_group == b->prefix_group &&
           a->prefix_len == b->prefix_len && a->sequential == b->sequential && a->d_extra_tokens == b->d_extra_tokens;
}

static bool fault_eq(const sim_fault *a, const sim_fault *b) {
    return a->at_ns == b->at_ns && a->kind == b->kind && a->target == b->target && a->arg == b->arg;
}

static bool reqs_differ(const sim_world_cfg *a, const sim_world_cfg *b) {
    for (uint32_t i = 0; i < a->n_reqs; i++)
        if (!req_eq(&a->req[i], &b->req[i])) return true;
    return false;
}

static bool faults_differ(const sim_world_cfg *a, const sim_world_cfg *b) {
    for (uint32_t i = 0; i < a->n_faults; i++)
        if (!fault_eq(&a->fault[i], &b->fault[i])) return true;
    return false;
}

static bool groups_differ(const sim_world_cfg *a, const sim_world_cfg *b) {
    if (a->n_groups != b->n_groups) return true;
    for (uint32_t g = 0; g < a->n_groups; g++)
        if (a->group[g].kind != b->group[g].kind || a->group[g].window != b->group[g].window) return true;
    return false;
}

/* Did mutation m change the field it names (after clamping)? */
static bool changed(fuzz_mut m, const sim_scenario *was, const sim_scenario *now) {
    const sim_world_cfg *a = &was->cfg, *b = &now->cfg;
    switch (m) {
    case FUZZ_MUT_REQ_INSERT: return b->n_reqs == a->n_reqs + 1u;
    case FUZZ_MUT_REQ_DELETE: return b->n_reqs + 1u == a->n_reqs;
    case FUZZ_MUT_REQ_CHANGE: return b->n_reqs == a->n_reqs && reqs_differ(a, b);
    case FUZZ_MUT_FAULT_INSERT: return b->n_faults == a->n_faults + 1u;
    case FUZZ_MUT_FAULT_DELETE: return b->n_faults + 1u == a->n_faults;
    case FUZZ_MUT_FAULT_RETIME:
    case FUZZ_MUT_FAULT_CHANGE:
        return b->n_faults == a->n_faults && faults_differ(a, b);
    case FUZZ_MUT_TOPOLOGY:
        return a->n_p != b->n_p || a->n_d != b->n_d || a->tp_p != b->tp_p || a->tp_d != b->tp_d ||
               a->block_size != b->block_size || a->pool_blocks_p != b->pool_blocks_p ||
               a->pool_blocks_d != b->pool_blocks_d || a->policy != b->policy ||
               a->prefix_caching != b->prefix_caching || a->conn_p != b->conn_p || a->conn_d != b->conn_d ||
               a->store_capacity != b->store_capacity;
    case FUZZ_MUT_GROUPS:
        return groups_differ(a, b);
    case FUZZ_MUT_TIMEOUTS:
        return a->abort_timeout_ns != b->abort_timeout_ns || a->recv_timeout_ns != b->recv_timeout_ns;
    case FUZZ_MUT_CHOICE:
        return a->choice_len != b->choice_len || memcmp(was->choice, now->choice, a->choice_len);
    case FUZZ_MUT_SEED: return a->seed != b->seed;
    case FUZZ_MUT_COUNT: break;
    }
    return false;
}

static bool apply(sim_scenario *s, fuzz_mut m, fuzz_rng *r) {
    switch (m) {
    case FUZZ_MUT_REQ_INSERT: return mut_req_insert(s, r);
    case FUZZ_MUT_REQ_DELETE: return mut_req_delete(s, r);
    case FUZZ_MUT_REQ_CHANGE: return mut_req_change(s, r);
    case FUZZ_MUT_FAULT_INSERT: return mut_fault_insert(s, r);
    case FUZZ_MUT_FAULT_DELETE: return mut_fault_delete(s, r);
    case FUZZ_MUT_FAULT_RETIME: return mut_fault_retime(s, r);
    case FUZZ_MUT_FAULT_CHANGE: return mut_fault_change(s, r);
    case FUZZ_MUT_TOPOLOGY: return mut_topology(s, r);
    case FUZZ_MUT_GROUPS: return mut_groups(s, r);
    case FUZZ_MUT_TIMEOUTS: return mut_timeouts(s, r);
    case FUZZ_MUT_CHOICE: return mut_choice(s, r);
    case FUZZ_MUT_SEED: return mut_seed(s, r);
    case FUZZ_MUT_COUNT: break;
    }
    return false;
}

bool fuzz_mutate_scenario(sim_scenario *s, fuzz_mut m, fuzz_rng *r) {
    if ((unsigned)m >= FUZZ_MUT_COUNT) return false;
    sim_scenario was;
    sim_scenario_copy(&was, s);
    /* A draw can land on the value already there (or one clamping folds
     * back); retry from the original a few times. */
    for (int t = 0; t < TRIES; t++) {
        if (!apply(s, m, r)) return false;
        sim_scenario_clamp(s);
        if (changed(m, &was, s)) return true;
        sim_scenario_copy(s, &was);
    }
    return false;
}

static fuzz_mut pick_kind(fuzz_rng *r, const sim_scenario *s) {
    uint32_t x = fuzz_rng_below(r, 100);
    fuzz_mut k = FUZZ_MUT_REQ_INSERT;
    for (uint32_t m = 0; m < FUZZ_MUT_COUNT; m++) {
        if (x < weight[m]) {
            k = (fuzz_mut)m;
            break;
        }
        x -= weight[m];
    }
    if (k == FUZZ_MUT_REQ_INSERT && s->cfg.n_reqs >= FUZZ_REQS_SOFT) k = FUZZ_MUT_REQ_DELETE;
    return k;
}

void fuzz_splice_faults(sim_scenario *dst, const sim_scenario *a, const sim_scenario *b, fuzz_rng *r) {
    uint32_t i = fuzz_rng_below(r, a->cfg.n_faults + 1u), j = fuzz_rng_below(r, b->cfg.n_faults + 1u);
    if (dst != a) sim_scenario_copy(dst, a);
    uint32_t n = i;
    for (uint32_t k = j; k < b->cfg.n_faults && n < SIM_FAULTS_MAX; k++) dst->cfg.fault[n++] = b->cfg.fault[k];
    dst->cfg.n_faults = n;
    sim_scenario_clamp(dst);
}

/* a's requests up to a cut, then b's from another. */
static void splice_reqs(sim_scenario *a, const sim_scenario *b, fuzz_rng *r) {
    uint32_t i = fuzz_rng_below(r, a->cfg.n_reqs + 1u), j = fuzz_rng_below(r, b->cfg.n_reqs + 1u);
    uint32_t n = i, cap = a->cfg.n_reqs > FUZZ_REQS_SOFT ? a->cfg.n_reqs : FUZZ_REQS_SOFT;
    for (uint32_t k = j; k < b->cfg.n_reqs && n < cap; k++) a->cfg.req[n++] = b->cfg.req[k];
    a->cfg.n_reqs = n;
}

static void take_topology(sim_world_cfg *a, const sim_world_cfg *b) {
    a->n_p = b->n_p;
    a->n_d = b->n_d;
    a->tp_p = b->tp_p;
    a->tp_d = b->tp_d;
    a->block_size = b->block_size;
    a->pool_blocks_p = b->pool_blocks_p;
    a->pool_blocks_d = b->pool_blocks_d;
    a->policy = b->policy;
    a->prefix_caching = b->prefix_caching;
    a->conn_p = b->conn_p;
    a->conn_d = b->conn_d;
    a->store_capacity = b->store_capacity;
    a->n_groups = b->n_groups;
    memcpy(a->group, b->group, sizeof a->group);
}

/* ---- size ------------------------------------------------------------------------ */

#define MAGIC_BYTES 4u
#define EMPTY_BYTES (MAGIC_BYTES + SIM_SCENARIO_FIXED_BYTES + 2u + 1u)

size_t fuzz_encoded_size(const sim_scenario *s) {
    return EMPTY_BYTES + (size_t)s->cfg.n_reqs * SIM_SCENARIO_REQ_BYTES +
           (size_t)s->cfg.n_faults * SIM_SCENARIO_FAULT_BYTES + s->cfg.choice_len;
}

void fuzz_fit(sim_scenario *s, size_t max_size) {
    sim_world_cfg *c = &s->cfg;
    size_t n = fuzz_encoded_size(s);
    if (n > max_size) {
        size_t cut = n - max_size < c->choice_len ? n - max_size : c->choice_len;
        c->choice_len -= cut;
        n -= cut;
    }
    for (; n > max_size && c->n_faults; n -= SIM_SCENARIO_FAULT_BYTES) c->n_faults--;
    for (; n > max_size && c->n_reqs; n -= SIM_SCENARIO_REQ_BYTES) c->n_reqs--;
    sim_scenario_clamp(s);
}

/* ---- libFuzzer entry points ------------------------------------------------------ */

/* The fallback when no byte mutator is given: flip, set, insert or erase
 * one byte. */
static size_t bytes_builtin(uint8_t *data, size_t size, size_t max_size, fuzz_rng *r) {
    uint32_t op = fuzz_rng_below(r, 4);
    if (!size) op = 2;
    if (op == 2 && size >= max_size) op = 1;
    if (op == 2 && !max_size) return 0;
    size_t at = fuzz_rng_below(r, (uint32_t)size + (op == 2 ? 1u : 0u));
    switch (op) {
    case 0: data[at] ^= (uint8_t)(1u << fuzz_rng_below(r, 8)); return size;
    case 1: data[at] = (uint8_t)below64(r, 256); return size;
    case 2:
        memmove(data + at + 1, data + at, size - at);
        data[at] = (uint8_t)below64(r, 256);
        return size + 1u;
    default: memmove(data + at, data + at + 1, size - at - 1u); return size - 1u;
    }
}

static size_t encode_fit(sim_scenario *s, uint8_t *out, size_t max_out) {
    fuzz_fit(s, max_out);
    size_t n = 0;
    if (sim_scenario_to_bytes(s, out, max_out, &n) != KV_OK) return 0;
    return n;
}

size_t fuzz_mutate(fuzz_mutator *m, uint8_t *data, size_t size, size_t max_size, uint32_t seed,
                   fuzz_byte_mutator bytes, fuzz_mut_report *report) {
    fuzz_mut_report rep = {0};
    fuzz_rng r;
    fuzz_rng_init(&r, seed);
    size_t out = 0;
    if (!coin(&r, 10) && max_size >= EMPTY_BYTES) {
        sim_scenario_from_bytes(data, size, &m->a);
        uint32_t want = coin(&r, 4) ? 2u + fuzz_rng_below(&r, 3) : 1u;
        for (uint32_t i = 0; i < want; i++)
            for (int t = 0; t < TRIES; t++) {
                fuzz_mut k = pick_kind(&r, &m->a);
                if (!fuzz_mutate_scenario(&m->a, k, &r)) continue;
                if (rep.n < sizeof rep.kind / sizeof rep.kind[0]) rep.kind[rep.n] = k;
                rep.n++;
                break;
            }
        if (rep.n) out = encode_fit(&m->a, data, max_size);
    }
    if (!out) {
        rep = (fuzz_mut_report){.bytes = true};
        out = bytes ? bytes(data, size, max_size) : bytes_builtin(data, size, max_size, &r);
    }
    if (report) *report = rep;
    return out;
}

size_t fuzz_crossover(fuzz_mutator *m, const uint8_t *d1, size_t s1, const uint8_t *d2, size_t s2,
                      uint8_t *out, size_t max_out, uint32_t seed) {
    fuzz_rng r;
    fuzz_rng_init(&r, seed ^ 0x63726f7373ull);
    sim_scenario_from_bytes(d1, s1, &m->a);
    sim_scenario_from_bytes(d2, s2, &m->b);
    switch (fuzz_rng_below(&r, 4)) {
    case 0:
    case 1: fuzz_splice_faults(&m->a, &m->a, &m->b, &r); break;
    case 2: splice_reqs(&m->a, &m->b, &r); break;
    default: take_topology(&m->a.cfg, &m->b.cfg); break;
    }
    sim_scenario_clamp(&m->a);
    size_t n = max_out >= EMPTY_BYTES ? encode_fit(&m->a, out, max_out) : 0;
    if (n) return n;
    n = s1 < max_out ? s1 : max_out; /* too small for any scenario: d1's prefix */
    if (n) memcpy(out, d1, n);
    return n;
}
