/* sim/gen.c — seeded random scenarios; see gen.h. Every draw comes from one
 * xoshiro stream seeded by the scenario seed. Requests always fit the
 * smallest pool, so a stall is a finding, never an artefact. */
#include "sim/gen.h"

#include <string.h>

#include "core/engine.h"
#include "core/store.h"
#include "sim/choice.h"
#include "sim/scenario.h"

static uint32_t pick(sim_choice *c, uint32_t lo, uint32_t hi) { return lo + sim_choice_below(c, hi - lo + 1); }

static void gen_topology(sim_choice *c, sim_world_cfg *cfg) {
    static const uint32_t tps[] = {1, 1, 2, 4};
    static const uint32_t bss[] = {8, 16, 16, 32};
    cfg->n_p = pick(c, 1, 4);
    cfg->n_d = pick(c, 1, 4);
    cfg->tp_p = tps[sim_choice_below(c, 4)];
    cfg->tp_d = tps[sim_choice_below(c, 4)];
    cfg->block_size = bss[sim_choice_below(c, 4)];
    cfg->n_groups = pick(c, 1, KV_GROUPS_MAX);
    cfg->group[0] = (kv_group_cfg){.kind = KV_GROUP_FULL};
    for (uint32_t g = 1; g < cfg->n_groups; g++) {
        uint32_t k = sim_choice_below(c, 3);
        cfg->group[g] = (kv_group_cfg){.kind = (uint8_t)k,
                                       .window = k == KV_GROUP_SLIDING ? pick(c, 16, 160) : 0};
    }
    bool small = sim_choice_below(c, 2);
    cfg->pool_blocks_p = small ? pick(c, 24, 48) : pick(c, 128, 512);
    cfg->pool_blocks_d = sim_choice_below(c, 2) ? pick(c, 24, 48) : pick(c, 128, 512);
    cfg->policy = (uint8_t)sim_choice_below(c, 2);
    cfg->prefix_caching = sim_choice_below(c, 2);
    /* connector configurations: p2p, store-only, Multi(p2p, store),
     * Multi(store, p2p); now and then P and D differ */
    static const uint8_t conns[10] = {KV_CONN_P2P, KV_CONN_P2P, KV_CONN_P2P, KV_CONN_STORE, KV_CONN_STORE,
                                      KV_CONN_MULTI_P2P_STORE, KV_CONN_MULTI_P2P_STORE, KV_CONN_MULTI_P2P_STORE,
                                      KV_CONN_MULTI_STORE_P2P, KV_CONN_MULTI_STORE_P2P};
    cfg->conn_p = conns[sim_choice_below(c, 10)];
    cfg->conn_d = cfg->conn_p;
    if (sim_choice_below(c, 8) == 0) cfg->conn_d = conns[sim_choice_below(c, 10)];
    cfg->store_capacity = sim_choice_below(c, 4) ? pick(c, 256, 2048) : pick(c, 16, 96);
}

/* n_lo..n_hi requests, each arriving 0..gaps-1 half-milliseconds after the
 * one before. */
static void gen_requests(sim_choice *c, sim_world_cfg *cfg, uint32_t n_lo, uint32_t n_hi, uint32_t gaps) {
    uint32_t pool = cfg->pool_blocks_p < cfg->pool_blocks_d ? cfg->pool_blocks_p : cfg->pool_blocks_d;
    uint32_t max_tokens_total = (pool < KV_REQ_BLOCKS_MAX ? pool : KV_REQ_BLOCKS_MAX) * cfg->block_size;
    uint32_t cap = max_tokens_total - 64 - 2 * cfg->block_size; /* room for decode and d_extra */
    if (cap > 400) cap = 400;
    cfg->n_reqs = pick(c, n_lo, n_hi);
    uint64_t t = 0;
    for (uint32_t i = 0; i < cfg->n_reqs; i++) {
        t += (uint64_t)sim_choice_below(c, gaps) * 500000u;
        /* One draw per statement: the evaluation order of initializers and
         * of operands is unspecified in C, and compilers differ. */
        sim_req_plan *q = &cfg->req[i];
        memset(q, 0, sizeof *q);
        q->at_ns = t;
        q->prompt_len = pick(c, 1, cap);
        q->prefix_len = sim_choice_below(c, 3) ? 0 : pick(c, 0, q->prompt_len);
        q->p_engine = sim_choice_below(c, cfg->n_p);
        q->d_engine = sim_choice_below(c, cfg->n_d);
        q->max_tokens = pick(c, 1, 24);
        q->prefix_group = sim_choice_below(c, 3);
        q->sequential = (uint8_t)sim_choice_below(c, 2);
    }
}

/* The fault plan is drawn in two parts: first the kinds of scenario format
 * version 2, with GEN_FEWER_BLOCKS (their count) standing for "P has fewer
 * blocks than D" (a request-plan fault), exactly as before version 3; then
 * engine crashes. So a seed whose draw has no crash gives the scenario it
 * gave before crashes existed. */
#define GEN_FEWER_BLOCKS SIM_F_KIND_COUNT_V2

/* Bit k: version-2 fault kind k (GEN_FEWER_BLOCKS: "P has fewer blocks") is on. */
static uint32_t gen_swarm(sim_choice *c) {
    uint32_t swarm = 0;
    for (uint32_t k = 1; k <= GEN_FEWER_BLOCKS; k++)
        if (sim_choice_below(c, 2)) swarm |= 1u << k;
    return swarm;
}

/* Crashes of engine processes: in one run of four, one or two, each at a
 * random time in the plan's span, restarting 1-200 ms later or, one time
 * in four, at once (the new process is up before its peers have handled
 * the old one's PEER_DOWN). One delayed crash in three is silent
 * (peer_hang). */
static void gen_crashes(sim_choice *c, sim_world_cfg *cfg, uint64_t span) {
    if (sim_choice_below(c, 4) != 0) return;
    uint32_t n = pick(c, 1, 2);
    for (uint32_t i = 0; i < n && cfg->n_faults < SIM_FAULTS_MAX; i++) {
        sim_fault *f = &cfg->fault[cfg->n_faults++];
        *f = (sim_fault){.kind = SIM_F_PEER_CRASH, .at_ns = (uint64_t)sim_choice_below(c, 1000) * (span / 1000u)};
        f->target = sim_choice_below(c, cfg->n_p + cfg->n_d);
        f->arg = sim_choice_below(c, 4) ? pick(c, 1, 200) : 0;
        if (f->arg && sim_choice_below(c, 3) == 0) { /* silent: nobody hears of it until the restart */
            f->kind = SIM_F_PEER_HANG;
            f->arg--; /* it restarts arg+1 ms later: the same 1..200 ms */
        }
    }
}

static void gen_faults(sim_choice *c, sim_world_cfg *cfg, uint32_t swarm, uint32_t n_max) {
    uint64_t span = cfg->req[cfg->n_reqs - 1].at_ns + 60000000u;
    uint32_t n = sim_choice_below(c, n_max + 1);
    cfg->n_faults = 0;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t kind = pick(c, 1, GEN_FEWER_BLOCKS);
        if (!((swarm >> kind) & 1u)) continue;
        if (kind == GEN_FEWER_BLOCKS) {
            /* D is told a longer prompt (sim_cfg_searchable makes it cross
             * a block boundary) */
            uint32_t r = sim_choice_below(c, cfg->n_reqs); /* one draw per statement */
            cfg->req[r].d_extra_tokens = pick(c, 1, cfg->block_size);
            continue;
        }
        sim_fault *f = &cfg->fault[cfg->n_faults++];
        *f = (sim_fault){.kind = kind, .at_ns = (uint64_t)sim_choice_below(c, 1000) * (span / 1000u)};
        switch ((sim_fault_kind)kind) {
        case SIM_F_ABORT: {
            uint32_t r = sim_choice_below(c, cfg->n_reqs);
            f->target = r;
            /* half early (P queue and prefill take a few ms), half spread */
            uint32_t steps = sim_choice_below(c, 2) ? 80u : 400u;
            f->at_ns = cfg->req[r].at_ns + (uint64_t)sim_choice_below(c, steps) * 100000u;
            break;
        }
        case SIM_F_BOOT_DOWN: f->arg = pick(c, 1, 300); break;
        case SIM_F_NET_RESET:
            f->target = sim_choice_below(c, cfg->n_p);
            f->arg = sim_choice_below(c, cfg->n_d);
            break;
        case SIM_F_NET_DELAY: f->arg = pick(c, 1, 50); break;
        case SIM_F_STORE_PUT_FAIL:
        case SIM_F_STORE_GET_FAIL:
        case SIM_F_STORE_PRESSURE: f->arg = pick(c, 0, 3); break;
        case SIM_F_STORE_EVICT: f->arg = pick(c, 1, 200); break;
        case SIM_F_SENDER_EXCEPTION:
        case SIM_F_SENDER_ERR_REQ:
        case SIM_F_SENDER_DROP_RESP: f->target = sim_choice_below(c, cfg->n_p); break;
        case SIM_F_TE_ERROR:
            f->target = sim_choice_below(c, cfg->n_p);
            f->arg = sim_choice_below(c, SIM_TE_ERROR_CODES); /* which transfer-engine code */
            break;
        case SIM_F_PEER_CRASH: /* drawn by gen_crashes */
        case SIM_F_PEER_HANG:
        case SIM_F_ABORT_ON_KV: /* drawn by gen_step_aborts */
        case SIM_F_STORE_CRASH: /* drawn by gen_store_crash */
        case SIM_F_STORE_EXISTS_FAIL: /* drawn by gen_store_lookups */
        case SIM_F_KIND_COUNT: break;
        }
    }
    gen_crashes(c, cfg, span);
}

/* Wider heads in one run of four, so the checked sweeps run the vector
 * fill and verify paths of kv_data.c (8 bytes is one word; 32 and more take
 * the AVX2/AVX-512 loops, 4096 the streaming stores) and the transport moves
 * larger writes: a power of two 16..4096, capped by what the topology holds
 * (sim_head_bytes_max). Drawn last, so a seed keeps every earlier draw. */
static void gen_heads(sim_choice *c, sim_world_cfg *cfg) {
    if (sim_choice_below(c, 4) != 0) return;
    uint32_t h = 16u << sim_choice_below(c, 9), hi = sim_head_bytes_max(cfg);
    cfg->head_bytes = h < hi ? h : hi;
}

/* Aborts timed at a step boundary in one run of four: one to four
 * requests are aborted the moment D hears their KV arrived (abort_on_kv),
 * so the abort lands after the step that reports the KV and before the
 * schedule that would take it in. Drawn last, after gen_heads. */
static void gen_step_aborts(sim_choice *c, sim_world_cfg *cfg) {
    if (sim_choice_below(c, 4) != 0 || !cfg->n_reqs) return;
    uint32_t n = pick(c, 1, 4);
    for (uint32_t i = 0; i < n && cfg->n_faults < SIM_FAULTS_MAX; i++) {
        sim_fault *f = &cfg->fault[cfg->n_faults++];
        uint32_t r = sim_choice_below(c, cfg->n_reqs);
        *f = (sim_fault){.kind = SIM_F_ABORT_ON_KV, .target = r, .at_ns = cfg->req[r].at_ns};
    }
}

/* A crash of the store's process in one run of eight that has a store: at
 * a random time in the plan's span, a new, empty one back 1-200 ms later.
 * Drawn last, after gen_step_aborts. */
static void gen_store_crash(sim_choice *c, sim_world_cfg *cfg) {
    if (sim_choice_below(c, 8) != 0 || cfg->n_faults >= SIM_FAULTS_MAX || !cfg->n_reqs) return;
    if (!kv_conn_kind_has_store(cfg->conn_p) && !kv_conn_kind_has_store(cfg->conn_d)) return;
    uint64_t span = cfg->req[cfg->n_reqs - 1].at_ns + 60000000u;
    sim_fault *f = &cfg->fault[cfg->n_faults++];
    *f = (sim_fault){.kind = SIM_F_STORE_CRASH, .at_ns = (uint64_t)sim_choice_below(c, 1000) * (span / 1000u)};
    f->arg = pick(c, 0, 199);
}

/* Short timeouts in one run of eight: P's ready wait and expiry (abort
 * timeout) 20-400 ms, D's receive timeout longer (as vLLM keeps it) by
 * 0.1-10 ms, so pulls that wait on P, CONTINUE chains and expiries meet
 * the timers that bound them. Drawn last, after gen_store_crash. */
static void gen_timeouts(sim_choice *c, sim_world_cfg *cfg) {
    if (sim_choice_below(c, 8) != 0) return;
    cfg->abort_timeout_ns = (uint64_t)pick(c, 20, 400) * 1000000ull;
    cfg->recv_timeout_ns = cfg->abort_timeout_ns + (uint64_t)pick(c, 1, 100) * 100000ull;
}

/* Local prefix hits of all but the last token in one run of eight with
 * prefix caching: about half the requests share one prefix of k whole
 * blocks and are one token longer, so each after the first that ends ok on
 * an engine finds k blocks there and computes one token (P), or needs
 * nothing from P (D). Drawn last, after gen_timeouts. */
static void gen_tail_hits(sim_choice *c, sim_world_cfg *cfg) {
    if (sim_choice_below(c, 8) != 0 || !cfg->prefix_caching || cfg->n_reqs < 2) return;
    uint32_t bs = cfg->block_size, most = 0;
    for (uint32_t i = 0; i < cfg->n_reqs; i++) most = cfg->req[i].prompt_len > most ? cfg->req[i].prompt_len : most;
    if (most <= bs) return; /* within the lengths the run's pools were sized for */
    uint32_t k = pick(c, 1, (most - 1) / bs < 4 ? (most - 1) / bs : 4);
    uint32_t group = sim_choice_below(c, 3);
    for (uint32_t i = 0; i < cfg->n_reqs; i++) {
        if (sim_choice_below(c, 2)) continue;
        sim_req_plan *q = &cfg->req[i];
        q->prefix_group = group;
        q->prefix_len = k * bs;
        q->prompt_len = k * bs + 1;
        q->d_extra_tokens = 0;
    }
}

/* With a store connector: in one run of eight, the store fails 1-4 EXIST
 * calls as a whole (store_exists_fail: a save drops its job, a lookup is a
 * miss), at a random time in the plan's span; in one run of sixteen the
 * store connectors never look the store up (vLLM's enable_lookup = false).
 * Drawn last, after gen_tail_hits. */
static void gen_store_lookups(sim_choice *c, sim_world_cfg *cfg) {
    if (!cfg->n_reqs || (!kv_conn_kind_has_store(cfg->conn_p) && !kv_conn_kind_has_store(cfg->conn_d))) return;
    if (sim_choice_below(c, 8) == 0 && cfg->n_faults < SIM_FAULTS_MAX) {
        uint64_t span = cfg->req[cfg->n_reqs - 1].at_ns + 60000000u;
        sim_fault *f = &cfg->fault[cfg->n_faults++];
        *f = (sim_fault){.kind = SIM_F_STORE_EXISTS_FAIL, .at_ns = (uint64_t)sim_choice_below(c, 1000) * (span / 1000u)};
        f->arg = pick(c, 0, 3);
    }
    cfg->store_lookup_off = sim_choice_below(c, 16) == 0;
}

/* Speculative decoding in one run of four without a recurrent group: 1-4
 * draft tokens per decode step on every engine (D's decode steps: P
 * generates one token, so it takes none), so drafts take blocks at block
 * ends, roll back, and meet preemption, prefix caching, pulls and store
 * loads. Drawn last, after gen_store_lookups. */
static void gen_spec(sim_choice *c, sim_world_cfg *cfg) {
    if (sim_choice_below(c, 4) != 0) return;
    for (uint32_t g = 0; g < cfg->n_groups; g++)
        if (cfg->group[g].kind == KV_GROUP_MAMBA) return;
    cfg->num_spec = pick(c, 1, KV_SPEC_MAX);
}

/* The defaults, with every later draw from one stream seeded by (seed, salt). */
static void gen_begin(sim_choice *c, uint64_t seed, uint64_t salt, uint32_t bugs, sim_world_cfg *cfg) {
    sim_choice_init(c, NULL, 0, sim_mix64(seed ^ salt));
    sim_world_cfg_default(cfg);
    cfg->seed = seed;
    cfg->bugs = bugs;
}

/* sim_gen's shape: a random topology, n_lo..n_hi requests, a fault plan of
 * at most faults_max faults under a swarm mask (returned). */
static uint32_t gen_mixed(uint64_t seed, uint64_t salt, uint32_t bugs, sim_world_cfg *cfg, uint32_t n_lo,
                          uint32_t n_hi, uint32_t gaps, uint32_t faults_max) {
    sim_choice c;
    gen_begin(&c, seed, salt, bugs, cfg);
    gen_topology(&c, cfg);
    gen_requests(&c, cfg, n_lo, n_hi, gaps);
    uint32_t swarm = gen_swarm(&c);
    gen_faults(&c, cfg, swarm, faults_max);
    gen_heads(&c, cfg);
    gen_step_aborts(&c, cfg);
    gen_store_crash(&c, cfg);
    gen_timeouts(&c, cfg);
    gen_tail_hits(&c, cfg);
    gen_store_lookups(&c, cfg);
    gen_spec(&c, cfg);
    sim_cfg_searchable(cfg);
    return swarm;
}

uint32_t sim_gen(uint64_t seed, uint32_t bugs, sim_world_cfg *cfg) {
    return gen_mixed(seed, 0x67656e, bugs, cfg, 1, 24, 20, 8);
}

uint32_t sim_gen_load(uint64_t seed, uint32_t bugs, sim_world_cfg *cfg) {
    return gen_mixed(seed, 0x6c6f6164ull, bugs, cfg, 64, SIM_REQS_MAX, 4, SIM_FAULTS_MAX / 2u);
}

void sim_cfg_searchable(sim_world_cfg *cfg) {
    if (cfg->abort_timeout_ns > 2000000000ull) cfg->abort_timeout_ns = 2000000000ull;
    if (cfg->abort_timeout_ns < 10000000ull) cfg->abort_timeout_ns = 10000000ull;
    if (cfg->recv_timeout_ns <= cfg->abort_timeout_ns)
        cfg->recv_timeout_ns = cfg->abort_timeout_ns + cfg->abort_timeout_ns / 4;
    /* every request's timeouts in a row, a store operation's among them
     * when a store is configured (a save or lookup in flight when the store
     * dies waits out KV_STORE_OP_TIMEOUT_NS, whatever the scenario's own
     * timeouts), and within what the scenario format holds
     * (SIM_LIVE_BOUND_MIN_NS..SIM_LIVE_BOUND_MAX_NS), so that every
     * generated or prepared scenario prints as .kvs and survives the binary
     * encoding unchanged: a finding the database could not hold is lost */
    _Static_assert((600ull + 600ull + 1ull) * 1000000000ull * (SIM_REQS_MAX + 4u) <= SIM_LIVE_BOUND_MAX_NS,
                   "the longest derived bound fits the format");
    _Static_assert(KV_STORE_OP_TIMEOUT_NS <= 1000000000ull, "the store's timeout is within the derived bound");
    bool store = kv_conn_kind_has_store(cfg->conn_p) || kv_conn_kind_has_store(cfg->conn_d);
    uint64_t per_req = cfg->abort_timeout_ns + cfg->recv_timeout_ns + (store ? KV_STORE_OP_TIMEOUT_NS : 0u);
    cfg->live_bound_ns = per_req * (cfg->n_reqs + 4u);
    if (cfg->live_bound_ns < SIM_LIVE_BOUND_MIN_NS) cfg->live_bound_ns = SIM_LIVE_BOUND_MIN_NS;
    uint32_t bs = cfg->block_size ? cfg->block_size : 1;
    bool recurrent = false;
    for (uint32_t g = 0; g < cfg->n_groups && g < KV_GROUPS_MAX; g++) recurrent |= cfg->group[g].kind == KV_GROUP_MAMBA;
    for (uint32_t i = 0; i < cfg->n_reqs && i < SIM_REQS_MAX; i++) {
        sim_req_plan *q = &cfg->req[i];
        if (!q->d_extra_tokens) continue;
        /* what P computes and D pulls: all but the last token with a
         * recurrent group (vLLM's N - 1 rule; P keeps a one-token prompt,
         * D's is always longer), and D's must reach past P's last block */
        uint32_t r_p = recurrent && q->prompt_len > 1 ? 1u : 0u, r_d = recurrent ? 1u : 0u;
        uint32_t pad = (bs - (q->prompt_len - r_p) % bs) % bs;
        q->d_extra_tokens = pad - r_p + 1 + r_d + (q->d_extra_tokens - 1) % bs;
        q->prefix_len = 0;
    }
}

/* Steady P/D serving traffic: P2P everywhere, no faults, a full request
 * table's worth of requests paced so that each D batches about 20-30 at
 * once (one step costs 2 ms + 20 us per token, see world.c). What one
 * request lifecycle costs when steps are shared, as they are in serving. */
uint32_t sim_gen_steady(uint64_t seed, uint32_t bugs, sim_world_cfg *cfg) {
    sim_choice c;
    gen_begin(&c, seed, 0x737465616479ull, bugs, cfg);
    cfg->n_p = pick(&c, 1, 2);
    cfg->n_d = pick(&c, 1, 2);
    cfg->tp_p = 1u << sim_choice_below(&c, 2);
    cfg->tp_d = 1u << sim_choice_below(&c, 2);
    cfg->block_size = 16;
    cfg->n_groups = 1;
    cfg->pool_blocks_p = cfg->pool_blocks_d = 1024;
    cfg->prefix_caching = true;
    cfg->n_reqs = SIM_REQS_MAX;
    /* P prefills ~40 tokens/ms, D decodes a batch of 32 in ~2.6 ms: about
     * 6 ms of P and 5 ms of D per request; pace below the slower side */
    uint32_t engines = cfg->n_p < cfg->n_d ? cfg->n_p : cfg->n_d;
    uint64_t t = 0, gap = 8000000u / engines;
    for (uint32_t i = 0; i < cfg->n_reqs; i++) {
        sim_req_plan *q = &cfg->req[i];
        memset(q, 0, sizeof *q);
        t += gap / 2 + sim_choice_below(&c, (uint32_t)gap);
        q->at_ns = t;
        q->prompt_len = pick(&c, 64, 320);
        q->max_tokens = pick(&c, 16, 64); /* the scenario format holds 1..64 */
        q->prefix_group = sim_choice_below(&c, 4);
        q->prefix_len = sim_choice_below(&c, 2) ? pick(&c, 16, 64) : 0;
        q->p_engine = sim_choice_below(&c, cfg->n_p);
        q->d_engine = sim_choice_below(&c, cfg->n_d);
    }
    sim_cfg_searchable(cfg);
    return 0;
}

sim_gen_fn sim_workload_gen(const char *name) {
    if (!name || !strcmp(name, "faults")) return sim_gen;
    if (!strcmp(name, "steady")) return sim_gen_steady;
    if (!strcmp(name, "load")) return sim_gen_load;
    return NULL;
}
