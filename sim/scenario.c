/* sim/scenario.c — scenarios: range clamping, the binary total decoder and
 * its canonical encoder, the .kvs text parser and printer. Both formats are
 * described in sim/scenario.h. Nothing here allocates; the only static
 * storage is sim_scenario_load's thread-local file buffer (scratch, no
 * state survives a call). */
#include "sim/scenario.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "core/engine.h"
#include "core/store.h"
#include "kvconn/env.h"
#include "kvconn/limits.h"

#if defined(__GNUC__)
#define SCN_FMT(i, j) __attribute__((format(printf, i, j)))
#else
#define SCN_FMT(i, j)
#endif

#define NS_MS 1000000ull
#define NS_S 1000000000ull
#define AT_MAX (60ull * NS_S)
#define TIMEOUT_MIN NS_MS
#define TIMEOUT_MAX (600ull * NS_S)
#define LIVE_MIN SIM_LIVE_BOUND_MIN_NS
#define LIVE_MAX SIM_LIVE_BOUND_MAX_NS
#define SIDE_MAX 4u
#define BUGS_MASK 0x1fu
#define BUG_BITS 5u
#define WINDOW_MAX 1024u
#define WINDOW_DEFAULT 64u
#define POOL_MIN 8u
#define POOL_MAX 1024u
#define STORE_MIN 16u
#define STORE_MAX 4096u
#define HEAD_MIN 8u
#define HEAD_MAX 4096u
#define PROMPT_MAX 512u
#define MAX_TOKENS_MAX 64u
#define PREFIX_GROUPS 8u
#define D_EXTRA_MAX 128u
#define U16_MAX 65535u
#define REQ_PROMPT_DEFAULT 16u
#define REQ_MAX_DEFAULT 4u
#define CHOICE_LINE_BYTES 64u

_Static_assert(2u * SIDE_MAX <= KV_ENGINES_MAX, "n_p + n_d always fits");
_Static_assert(SIM_REQS_MAX <= U16_MAX && SIM_FAULTS_MAX <= 255u, "counts fit their fields");

static const uint8_t magic[4] = {'K', 'V', 'S', (uint8_t)SIM_SCENARIO_VERSION};
static const uint8_t magic_v1[4] = {'K', 'V', 'S', 1};
static const uint8_t magic_v2[4] = {'K', 'V', 'S', 2};
static const uint8_t magic_v3[4] = {'K', 'V', 'S', 3};
static const uint8_t magic_v4[4] = {'K', 'V', 'S', 4};
static const uint8_t magic_v5[4] = {'K', 'V', 'S', 5};
static const uint8_t magic_v6[4] = {'K', 'V', 'S', 6};
static const uint8_t magic_v7[4] = {'K', 'V', 'S', 7};
static const uint32_t tp_set[3] = {1, 2, 4};
static const uint32_t block_set[4] = {4, 8, 16, 32};

/* ---- ranges ------------------------------------------------------------------ */

/* v if inside lo..hi, else lo + v mod the span (hi < UINT64_MAX here). */
static uint64_t fit_u64(uint64_t v, uint64_t lo, uint64_t hi) {
    if (v >= lo && v <= hi) return v;
    return lo + v % (hi - lo + 1u);
}

static uint32_t fit_u32(uint32_t v, uint32_t lo, uint32_t hi) { return (uint32_t)fit_u64(v, lo, hi); }

static uint32_t fit_set(uint32_t v, const uint32_t *set, uint32_t n) {
    for (uint32_t i = 0; i < n; i++)
        if (set[i] == v) return v;
    return set[v % n];
}

static uint32_t req_tokens_cap(uint32_t block_size) { return KV_REQ_BLOCKS_MAX * block_size; }

static void clamp_topology(sim_world_cfg *c) {
    c->n_p = fit_u32(c->n_p, 1, SIDE_MAX);
    c->n_d = fit_u32(c->n_d, 1, SIDE_MAX);
    c->tp_p = fit_set(c->tp_p, tp_set, 3);
    c->tp_d = fit_set(c->tp_d, tp_set, 3);
    c->block_size = fit_set(c->block_size, block_set, 4);
    c->pool_blocks_p = fit_u32(c->pool_blocks_p, POOL_MIN, POOL_MAX);
    c->pool_blocks_d = fit_u32(c->pool_blocks_d, POOL_MIN, POOL_MAX);
    c->policy = (uint8_t)(c->policy % 2u);
    c->abort_timeout_ns = fit_u64(c->abort_timeout_ns, TIMEOUT_MIN, TIMEOUT_MAX);
    c->recv_timeout_ns = fit_u64(c->recv_timeout_ns, TIMEOUT_MIN, TIMEOUT_MAX);
    c->live_bound_ns = fit_u64(c->live_bound_ns, LIVE_MIN, LIVE_MAX);
    c->bugs &= BUGS_MASK;
    c->conn_p = (uint8_t)fit_u32(c->conn_p, 1, KV_CONN_KIND_COUNT - 1u);
    c->conn_d = (uint8_t)fit_u32(c->conn_d, 1, KV_CONN_KIND_COUNT - 1u);
    c->store_capacity = fit_u32(c->store_capacity, STORE_MIN, STORE_MAX);
}

/* The largest head_bytes the topology holds: one rank's block (its
 * KV_HEADS / tp heads) is at most KV_BLOCK_BYTES_MAX, and with a store
 * connector at most what a save job snapshots (KV_STORE_SNAP_BYTES); every
 * engine's KV (KV_GROUPS_MAX groups, pool + 1 blocks) fits HEAD_KV_BUDGET of
 * the world's arena. */
#define HEAD_KV_BUDGET (96u << 20)
uint32_t sim_head_bytes_max(const sim_world_cfg *c) {
    uint64_t blocks = (uint64_t)c->n_p * (c->pool_blocks_p + 1u) + (uint64_t)c->n_d * (c->pool_blocks_d + 1u);
    uint32_t tp = c->tp_p < c->tp_d ? c->tp_p : c->tp_d, heads = KV_HEADS / (tp ? tp : 1u); /* on the widest rank */
    bool store = kv_conn_kind_has_store(c->conn_p) || kv_conn_kind_has_store(c->conn_d);
    uint32_t rank_max = store ? KV_STORE_SNAP_BYTES : KV_BLOCK_BYTES_MAX, hi = HEAD_MAX;
    while (hi > HEAD_MIN && (blocks * KV_HEADS * KV_GROUPS_MAX * hi > HEAD_KV_BUDGET || hi * heads > rank_max)) hi /= 2u;
    return hi;
}

/* A power of two HEAD_MIN..sim_head_bytes_max: any other value maps onto
 * one by its bits (the highest set bit, halved until it fits). */
static void clamp_head(sim_world_cfg *c) {
    uint32_t v = c->head_bytes, h = HEAD_MIN;
    while (h < HEAD_MAX && h * 2u <= v) h *= 2u;
    uint32_t hi = sim_head_bytes_max(c);
    c->head_bytes = h < hi ? h : hi;
}

/* Drafts 0..KV_SPEC_MAX (mod), none with a recurrent group (an engine
 * refuses the two together). */
static void clamp_spec(sim_world_cfg *c) {
    c->num_spec %= KV_SPEC_MAX + 1u;
    for (uint32_t g = 0; g < c->n_groups; g++)
        if (c->group[g].kind == KV_GROUP_MAMBA) c->num_spec = 0;
}

static void clamp_groups(sim_world_cfg *c) {
    c->n_groups = fit_u32(c->n_groups, 1, KV_GROUPS_MAX);
    for (uint32_t g = 0; g < KV_GROUPS_MAX; g++) {
        kv_group_cfg *k = &c->group[g];
        if (g >= c->n_groups) {
            *k = (kv_group_cfg){.kind = KV_GROUP_FULL, .window = 0};
            continue;
        }
        k->kind = g == 0 ? (uint8_t)KV_GROUP_FULL : (uint8_t)(k->kind % 3u);
        k->window = k->kind == KV_GROUP_SLIDING ? fit_u32(k->window, 1, WINDOW_MAX) : 0;
    }
}

static void clamp_req(sim_req_plan *q, const sim_world_cfg *c) {
    q->at_ns = fit_u64(q->at_ns, 0, AT_MAX);
    q->p_engine %= c->n_p;
    q->d_engine %= c->n_d;
    q->max_tokens = fit_u32(q->max_tokens, 1, MAX_TOKENS_MAX);
    q->prompt_len = fit_u32(q->prompt_len, 1, PROMPT_MAX);
    uint32_t cap = req_tokens_cap(c->block_size);
    if (q->prompt_len + q->max_tokens > cap) q->prompt_len = cap - q->max_tokens;
    q->prefix_group %= PREFIX_GROUPS;
    q->prefix_len %= q->prompt_len + 1u;
    q->sequential = (uint8_t)(q->sequential % 2u);
    q->d_extra_tokens = fit_u32(q->d_extra_tokens, 0, D_EXTRA_MAX);
}

static void clamp_fault(sim_fault *f) {
    f->at_ns = fit_u64(f->at_ns, 0, AT_MAX);
    f->kind = fit_u32(f->kind, 1, SIM_F_KIND_COUNT - 1u);
    f->target %= U16_MAX + 1u;
    f->arg %= U16_MAX + 1u;
}

void sim_scenario_init(sim_scenario *s) {
    sim_world_cfg_default(&s->cfg);
    memset(s->choice, 0, sizeof s->choice);
    s->cfg.choice = s->choice;
    s->cfg.choice_len = 0;
}

void sim_scenario_clamp(sim_scenario *s) {
    sim_world_cfg *c = &s->cfg;
    clamp_topology(c);
    clamp_groups(c);
    clamp_head(c);
    clamp_spec(c);
    c->n_reqs = fit_u32(c->n_reqs, 0, SIM_REQS_MAX);
    for (uint32_t i = 0; i < SIM_REQS_MAX; i++) {
        if (i < c->n_reqs) clamp_req(&c->req[i], c);
        else memset(&c->req[i], 0, sizeof c->req[i]);
    }
    c->n_faults = fit_u32(c->n_faults, 0, SIM_FAULTS_MAX);
    for (uint32_t i = 0; i < SIM_FAULTS_MAX; i++) {
        if (i < c->n_faults) clamp_fault(&c->fault[i]);
        else memset(&c->fault[i], 0, sizeof c->fault[i]);
    }
    if (c->choice_len > SIM_CHOICE_MAX) c->choice_len = SIM_CHOICE_MAX;
    memset(s->choice + c->choice_len, 0, SIM_CHOICE_MAX - c->choice_len);
    c->choice = s->choice;
}

void sim_scenario_copy(sim_scenario *dst, const sim_scenario *src) {
    if (dst != src) memcpy(dst, src, sizeof *dst);
    dst->cfg.choice = dst->choice;
}

/* ---- equality ---------------------------------------------------------------- */

static bool req_equal(const sim_req_plan *a, const sim_req_plan *b) {
    return a->at_ns == b->at_ns && a->p_engine == b->p_engine && a->d_engine == b->d_engine &&
           a->prompt_len == b->prompt_len && a->max_tokens == b->max_tokens &&
           a->prefix_group == b->prefix_group && a->prefix_len == b->prefix_len &&
           a->sequential == b->sequential && a->d_extra_tokens == b->d_extra_tokens;
}

static bool fault_equal(const sim_fault *a, const sim_fault *b) {
    return a->at_ns == b->at_ns && a->kind == b->kind && a->target == b->target && a->arg == b->arg;
}

static bool head_equal(const sim_world_cfg *a, const sim_world_cfg *b) {
    return a->seed == b->seed && a->n_p == b->n_p && a->n_d == b->n_d && a->tp_p == b->tp_p &&
           a->tp_d == b->tp_d && a->n_groups == b->n_groups && a->block_size == b->block_size &&
           a->pool_blocks_p == b->pool_blocks_p && a->pool_blocks_d == b->pool_blocks_d &&
           a->policy == b->policy && a->prefix_caching == b->prefix_caching &&
           a->abort_timeout_ns == b->abort_timeout_ns && a->recv_timeout_ns == b->recv_timeout_ns &&
           a->bugs == b->bugs && a->n_reqs == b->n_reqs && a->n_faults == b->n_faults &&
           a->choice_len == b->choice_len && a->live_bound_ns == b->live_bound_ns && a->conn_p == b->conn_p &&
           a->conn_d == b->conn_d && a->store_capacity == b->store_capacity && a->head_bytes == b->head_bytes &&
           a->store_lookup_off == b->store_lookup_off && a->num_spec == b->num_spec;
}

bool sim_scenario_equal(const sim_scenario *a, const sim_scenario *b) {
    const sim_world_cfg *x = &a->cfg, *y = &b->cfg;
    if (!head_equal(x, y)) return false;
    for (uint32_t g = 0; g < x->n_groups && g < KV_GROUPS_MAX; g++)
        if (x->group[g].kind != y->group[g].kind || x->group[g].window != y->group[g].window) return false;
    for (uint32_t i = 0; i < x->n_reqs && i < SIM_REQS_MAX; i++)
        if (!req_equal(&x->req[i], &y->req[i])) return false;
    for (uint32_t i = 0; i < x->n_faults && i < SIM_FAULTS_MAX; i++)
        if (!fault_equal(&x->fault[i], &y->fault[i])) return false;
    size_t n = x->choice_len < SIM_CHOICE_MAX ? x->choice_len : SIM_CHOICE_MAX;
    return memcmp(a->choice, b->choice, n) == 0;
}

bool sim_scenario_valid(const sim_scenario *s) {
    sim_scenario c;
    sim_scenario_copy(&c, s);
    sim_scenario_clamp(&c);
    return sim_scenario_equal(&c, s);
}

uint32_t sim_scenario_directives(const sim_scenario *s) {
    return 1u + s->cfg.n_groups + s->cfg.n_reqs + s->cfg.n_faults;
}

/* ---- binary: decoder ---------------------------------------------------------- */

typedef struct rd {
    const uint8_t *p;
    size_t len, pos; /* pos <= len */
} rd;

/* An n-byte little-endian field, or def (and the input ends) if cut. */
static uint64_t rd_uint(rd *r, size_t n, uint64_t def) {
    if (r->len - r->pos < n) {
        r->pos = r->len;
        return def;
    }
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++) v |= (uint64_t)r->p[r->pos + i] << (8u * i);
    r->pos += n;
    return v;
}

static uint32_t rd_u8(rd *r, uint32_t def) { return (uint32_t)rd_uint(r, 1, def); }
static uint32_t rd_u16(rd *r, uint32_t def) { return (uint32_t)rd_uint(r, 2, def); }
static uint64_t rd_u64(rd *r, uint64_t def) { return rd_uint(r, 8, def); }

static void rd_fixed(rd *r, sim_world_cfg *c, bool v1, bool v5, bool v7, bool v8) {
    c->seed = rd_u64(r, c->seed);
    c->n_p = rd_u8(r, c->n_p);
    c->n_d = rd_u8(r, c->n_d);
    c->tp_p = rd_u8(r, c->tp_p);
    c->tp_d = rd_u8(r, c->tp_d);
    c->block_size = rd_u8(r, c->block_size);
    c->pool_blocks_p = rd_u16(r, c->pool_blocks_p);
    c->pool_blocks_d = rd_u16(r, c->pool_blocks_d);
    c->policy = (uint8_t)rd_u8(r, c->policy);
    c->prefix_caching = (rd_u8(r, c->prefix_caching) & 1u) != 0;
    c->n_groups = rd_u8(r, c->n_groups);
    for (uint32_t g = 0; g < KV_GROUPS_MAX; g++) {
        c->group[g].kind = (uint8_t)rd_u8(r, c->group[g].kind);
        c->group[g].window = rd_u16(r, c->group[g].window);
    }
    c->abort_timeout_ns = rd_u64(r, c->abort_timeout_ns);
    c->recv_timeout_ns = rd_u64(r, c->recv_timeout_ns);
    c->live_bound_ns = rd_u64(r, c->live_bound_ns);
    c->bugs = rd_u8(r, c->bugs);
    if (v1) return;
    c->conn_p = (uint8_t)rd_u8(r, c->conn_p);
    c->conn_d = (uint8_t)rd_u8(r, c->conn_d);
    c->store_capacity = rd_u16(r, c->store_capacity);
    if (v5) c->head_bytes = rd_u16(r, c->head_bytes);
    if (v7) c->store_lookup_off = (rd_u8(r, c->store_lookup_off ? 1u : 0u) & 1u) != 0;
    if (v8) c->num_spec = rd_u8(r, c->num_spec);
}

static void rd_req(rd *r, sim_req_plan *q) {
    q->at_ns = rd_u64(r, 0);
    q->p_engine = rd_u8(r, 0);
    q->d_engine = rd_u8(r, 0);
    q->prompt_len = rd_u16(r, REQ_PROMPT_DEFAULT);
    q->max_tokens = rd_u8(r, REQ_MAX_DEFAULT);
    q->prefix_group = rd_u8(r, 0);
    q->prefix_len = rd_u16(r, 0);
    q->sequential = (uint8_t)rd_u8(r, 0);
    q->d_extra_tokens = rd_u8(r, 0);
}

/* kinds_hi: the last fault kind of the input's format version. */
static void rd_fault(rd *r, sim_fault *f, uint32_t kinds_hi) {
    f->at_ns = rd_u64(r, 0);
    f->kind = fit_u32(rd_u8(r, SIM_F_ABORT), 1, kinds_hi);
    f->target = rd_u16(r, 0);
    f->arg = rd_u16(r, 0);
}

static void rd_lists(rd *r, sim_world_cfg *c, uint32_t kinds_hi) {
    uint32_t n = rd_u16(r, 0) % (SIM_REQS_MAX + 1u);
    c->n_reqs = 0;
    for (uint32_t i = 0; i < n && r->pos < r->len; i++) rd_req(r, &c->req[c->n_reqs++]);
    n = rd_u8(r, 0) % (SIM_FAULTS_MAX + 1u);
    c->n_faults = 0;
    for (uint32_t i = 0; i < n && r->pos < r->len; i++) rd_fault(r, &c->fault[c->n_faults++], kinds_hi);
}

void sim_scenario_from_bytes(const uint8_t *buf, size_t len, sim_scenario *out) {
    sim_scenario_init(out);
    rd r = {.p = buf, .len = buf ? len : 0, .pos = 0};
    bool v1 = r.len >= sizeof magic_v1 && memcmp(buf, magic_v1, sizeof magic_v1) == 0;
    bool v2 = r.len >= sizeof magic_v2 && memcmp(buf, magic_v2, sizeof magic_v2) == 0;
    bool v3 = r.len >= sizeof magic_v3 && memcmp(buf, magic_v3, sizeof magic_v3) == 0;
    bool v4 = r.len >= sizeof magic_v4 && memcmp(buf, magic_v4, sizeof magic_v4) == 0;
    bool v5 = r.len >= sizeof magic_v5 && memcmp(buf, magic_v5, sizeof magic_v5) == 0;
    bool v6 = r.len >= sizeof magic_v6 && memcmp(buf, magic_v6, sizeof magic_v6) == 0;
    bool v7 = r.len >= sizeof magic_v7 && memcmp(buf, magic_v7, sizeof magic_v7) == 0;
    bool v8 = r.len >= sizeof magic && memcmp(buf, magic, sizeof magic) == 0;
    if (v1 || v2 || v3 || v4 || v5 || v6 || v7 || v8) r.pos = sizeof magic;
    rd_fixed(&r, &out->cfg, v1, v5 || v6 || v7 || v8, v7 || v8, v8);
    /* each version's fault kinds only behind its magic (or a later one):
     * every older input (magic-less ones too) decodes as it always did */
    rd_lists(&r, &out->cfg,
             v7 || v8 ? SIM_F_KIND_COUNT - 1u
             : v6 ? SIM_F_KIND_COUNT_V6 - 1u
             : v5 ? SIM_F_KIND_COUNT_V5 - 1u
             : v4 ? SIM_F_KIND_COUNT_V4 - 1u
             : v3 ? SIM_F_KIND_COUNT_V3 - 1u
                  : SIM_F_KIND_COUNT_V2 - 1u);
    size_t n = r.len - r.pos;
    if (n > SIM_CHOICE_MAX) n = SIM_CHOICE_MAX;
    if (n) memcpy(out->choice, r.p + r.pos, n);
    out->cfg.choice_len = n;
    sim_scenario_clamp(out);
}

/* ---- binary: encoder ---------------------------------------------------------- */

typedef struct wr {
    uint8_t *p;
    size_t cap, len; /* len counts every byte, written or not */
} wr;

static void wr_uint(wr *w, uint64_t v, size_t n) {
    for (size_t i = 0; i < n; i++, w->len++)
        if (w->len < w->cap) w->p[w->len] = (uint8_t)(v >> (8u * i));
}

static void wr_fixed(wr *w, const sim_world_cfg *c) {
    wr_uint(w, c->seed, 8);
    wr_uint(w, c->n_p, 1);
    wr_uint(w, c->n_d, 1);
    wr_uint(w, c->tp_p, 1);
    wr_uint(w, c->tp_d, 1);
    wr_uint(w, c->block_size, 1);
    wr_uint(w, c->pool_blocks_p, 2);
    wr_uint(w, c->pool_blocks_d, 2);
    wr_uint(w, c->policy, 1);
    wr_uint(w, c->prefix_caching ? 1u : 0u, 1);
    wr_uint(w, c->n_groups, 1);
    for (uint32_t g = 0; g < KV_GROUPS_MAX; g++) {
        bool used = g < c->n_groups;
        wr_uint(w, used ? c->group[g].kind : 0u, 1);
        wr_uint(w, used ? c->group[g].window : 0u, 2);
    }
    wr_uint(w, c->abort_timeout_ns, 8);
    wr_uint(w, c->recv_timeout_ns, 8);
    wr_uint(w, c->live_bound_ns, 8);
    wr_uint(w, c->bugs, 1);
    wr_uint(w, c->conn_p, 1);
    wr_uint(w, c->conn_d, 1);
    wr_uint(w, c->store_capacity, 2);
    wr_uint(w, c->head_bytes, 2);
    wr_uint(w, c->store_lookup_off ? 1u : 0u, 1);
    wr_uint(w, c->num_spec, 1);
}

static void wr_req(wr *w, const sim_req_plan *q) {
    wr_uint(w, q->at_ns, 8);
    wr_uint(w, q->p_engine, 1);
    wr_uint(w, q->d_engine, 1);
    wr_uint(w, q->prompt_len, 2);
    wr_uint(w, q->max_tokens, 1);
    wr_uint(w, q->prefix_group, 1);
    wr_uint(w, q->prefix_len, 2);
    wr_uint(w, q->sequential, 1);
    wr_uint(w, q->d_extra_tokens, 1);
}

static void wr_fault(wr *w, const sim_fault *f) {
    wr_uint(w, f->at_ns, 8);
    wr_uint(w, f->kind, 1);
    wr_uint(w, f->target, 2);
    wr_uint(w, f->arg, 2);
}

kv_status sim_scenario_to_bytes(const sim_scenario *s, uint8_t *buf, size_t cap, size_t *out_len) {
    *out_len = 0;
    if (!sim_scenario_valid(s)) return KV_EINVAL;
    const sim_world_cfg *c = &s->cfg;
    wr w = {.p = buf, .cap = buf ? cap : 0, .len = 0};
    for (size_t i = 0; i < sizeof magic; i++) wr_uint(&w, magic[i], 1);
    wr_fixed(&w, c);
    wr_uint(&w, c->n_reqs, 2);
    for (uint32_t i = 0; i < c->n_reqs; i++) wr_req(&w, &c->req[i]);
    wr_uint(&w, c->n_faults, 1);
    for (uint32_t i = 0; i < c->n_faults; i++) wr_fault(&w, &c->fault[i]);
    for (size_t i = 0; i < c->choice_len; i++) wr_uint(&w, s->choice[i], 1);
    if (w.len > w.cap) return KV_EFULL;
    *out_len = w.len;
    return KV_OK;
}

/* ---- text: printer ------------------------------------------------------------ */

typedef struct tw {
    char *p;
    size_t cap, len; /* len counts every char, written or not */
} tw;

SCN_FMT(2, 3) static void tw_printf(tw *w, const char *fmt, ...) {
    char line[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    size_t k = (size_t)n < sizeof line ? (size_t)n : sizeof line - 1u;
    for (size_t i = 0; i < k; i++, w->len++)
        if (w->len < w->cap) w->p[w->len] = line[i];
}

static const char *policy_name(uint32_t v) {
    return v == KV_POLICY_FAIL ? "fail" : v == KV_POLICY_RECOMPUTE ? "recompute" : "?";
}

static const char *group_kind_name(uint32_t v) {
    return v == KV_GROUP_FULL ? "full" : v == KV_GROUP_SLIDING ? "sliding" : v == KV_GROUP_MAMBA ? "mamba" : "?";
}

static void tw_head(tw *w, const sim_world_cfg *c) {
    tw_printf(w, "kvs %u\nseed %llu\n", SIM_SCENARIO_VERSION, (unsigned long long)c->seed);
    tw_printf(w,
              "topology p=%u d=%u tp_p=%u tp_d=%u block=%u pool_p=%u pool_d=%u policy=%s prefix_cache=%u conn_p=%s "
              "conn_d=%s store=%u head=%u lookup=%u spec=%u\n",
              c->n_p, c->n_d, c->tp_p, c->tp_d, c->block_size, c->pool_blocks_p, c->pool_blocks_d,
              policy_name(c->policy), c->prefix_caching ? 1u : 0u, kv_conn_kind_name(c->conn_p),
              kv_conn_kind_name(c->conn_d), c->store_capacity, c->head_bytes, c->store_lookup_off ? 0u : 1u,
              c->num_spec);
    for (uint32_t g = 0; g < c->n_groups; g++) {
        if (c->group[g].kind == KV_GROUP_SLIDING) tw_printf(w, "group sliding window=%u\n", c->group[g].window);
        else tw_printf(w, "group %s\n", group_kind_name(c->group[g].kind));
    }
    tw_printf(w, "timeouts abort_ns=%llu recv_ns=%llu live_ns=%llu\n", (unsigned long long)c->abort_timeout_ns,
              (unsigned long long)c->recv_timeout_ns, (unsigned long long)c->live_bound_ns);
    tw_printf(w, "bugs");
    if (c->bugs == 0) tw_printf(w, " none");
    for (uint32_t b = 0, k = 0; b < BUG_BITS; b++)
        if (c->bugs & (1u << b)) tw_printf(w, "%s%s", k++ ? "," : " ", kv_bug_name(1u << b));
    tw_printf(w, "\n");
}

static void tw_lists(tw *w, const sim_scenario *s) {
    const sim_world_cfg *c = &s->cfg;
    for (uint32_t i = 0; i < c->n_reqs; i++) {
        const sim_req_plan *q = &c->req[i];
        tw_printf(w, "req at=%llu p=%u d=%u prompt=%u max=%u prefix_group=%u prefix_len=%u seq=%u d_extra=%u\n",
                  (unsigned long long)q->at_ns, q->p_engine, q->d_engine, q->prompt_len, q->max_tokens,
                  q->prefix_group, q->prefix_len, (unsigned)q->sequential, q->d_extra_tokens);
    }
    for (uint32_t i = 0; i < c->n_faults; i++) {
        const sim_fault *f = &c->fault[i];
        tw_printf(w, "fault at=%llu kind=%s target=%u arg=%u\n", (unsigned long long)f->at_ns,
                  sim_fault_name(f->kind), f->target, f->arg);
    }
    for (size_t i = 0; i < c->choice_len; i++) {
        if (i % CHOICE_LINE_BYTES == 0) tw_printf(w, "choice ");
        tw_printf(w, "%02x", (unsigned)s->choice[i]);
        if (i % CHOICE_LINE_BYTES == CHOICE_LINE_BYTES - 1u || i + 1u == c->choice_len) tw_printf(w, "\n");
    }
}

kv_status sim_scenario_to_text(const sim_scenario *s, char *buf, size_t cap, size_t *out_len) {
    *out_len = 0;
    if (!sim_scenario_valid(s)) return KV_EINVAL;
    tw w = {.p = buf, .cap = buf ? cap : 0, .len = 0};
    tw_head(&w, &s->cfg);
    tw_lists(&w, s);
    if (w.len >= w.cap) return KV_EFULL;
    buf[w.len] = '\0';
    *out_len = w.len;
    return KV_OK;
}

/* ---- text: lexer -------------------------------------------------------------- */

typedef struct tok {
    const char *s;
    size_t len;
    uint32_t col; /* 1-based column of s[0] */
} tok;

typedef struct pctx {
    sim_parse_error *err;
    sim_scenario *out;
    const char *ls; /* current line; comment cut off */
    size_t ll, pos; /* its length, the cursor */
    uint32_t line;
    bool seen_kvs, seen_seed, seen_topology, seen_timeouts, seen_bugs, seen_group, seen_req;
} pctx;

static bool is_sep(char ch) { return ch == ' ' || ch == '\t' || ch == '\r' || ch == '\v' || ch == '\f'; }

static uint32_t col_of(size_t at) { return at >= UINT32_MAX ? UINT32_MAX : (uint32_t)(at + 1u); }

static bool next_token(pctx *c, tok *t) {
    while (c->pos < c->ll && is_sep(c->ls[c->pos])) c->pos++;
    if (c->pos >= c->ll) return false;
    size_t b = c->pos;
    while (c->pos < c->ll && !is_sep(c->ls[c->pos])) c->pos++;
    *t = (tok){.s = c->ls + b, .len = c->pos - b, .col = col_of(b)};
    return true;
}

static bool tok_is(const char *s, size_t len, const char *word) {
    size_t n = strlen(word);
    return n == len && memcmp(s, word, n) == 0;
}

/* A printable, bounded copy of s[0..len) for messages. */
static const char *show(char *b, size_t cap, const char *s, size_t len) {
    size_t k = len < cap - 1u ? len : cap - 1u;
    for (size_t i = 0; i < k; i++) b[i] = s[i] >= 0x20 && s[i] < 0x7f ? s[i] : '?';
    if (k < len && k >= 3) memcpy(b + k - 3, "...", 3);
    b[k] = '\0';
    return b;
}

/* 0: ok, 1: not a plain decimal integer, 2: does not fit in 64 bits. */
static int parse_u64(const char *s, size_t len, uint64_t *out) {
    if (len == 0) return 1;
    uint64_t v = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9') return 1;
        uint64_t d = (uint64_t)(s[i] - '0');
        if (v > (UINT64_MAX - d) / 10u) return 2;
        v = v * 10u + d;
    }
    *out = v;
    return 0;
}

SCN_FMT(4, 5) static kv_status fail(pctx *c, kv_status st, uint32_t col, const char *fmt, ...) {
    if (!c->err) return st;
    c->err->line = c->line;
    c->err->col = col;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->err->msg, sizeof c->err->msg, fmt, ap);
    va_end(ap);
    return st;
}

static kv_status no_more_tokens(pctx *c, const char *dir) {
    tok t;
    char b[48];
    if (!next_token(c, &t)) return KV_OK;
    return fail(c, KV_EINVAL, t.col, "unexpected token '%s' after %s", show(b, sizeof b, t.s, t.len), dir);
}

/* ---- text: key=value lists ---------------------------------------------------- */

#define KEY_POW2 1u
#define KEYS_MAX 15u

typedef struct keydef {
    const char *name;
    uint64_t lo, hi;
    uint32_t flags;                      /* KEY_POW2: value must be a power of two */
    const char *what;                    /* named values ("policy"); NULL: integer */
    const char *(*value_name)(uint32_t); /* names of lo..hi when what is set */
} keydef;

typedef struct kvals {
    uint64_t v[KEYS_MAX];   /* caller fills the defaults */
    uint32_t col[KEYS_MAX]; /* column of the key=value token; 0: not given */
} kvals;

static kv_status parse_named(pctx *c, const keydef *k, const tok *t, const tok *val, uint64_t *out) {
    char b[48];
    for (uint64_t v = k->lo; v <= k->hi; v++) {
        if (tok_is(val->s, val->len, k->value_name((uint32_t)v))) {
            *out = v;
            return KV_OK;
        }
    }
    return fail(c, KV_EINVAL, t->col, "unknown %s '%s'", k->what, show(b, sizeof b, val->s, val->len));
}

static kv_status parse_number(pctx *c, const keydef *k, const tok *t, const tok *val, uint64_t *out) {
    uint64_t v = 0;
    int r = parse_u64(val->s, val->len, &v);
    if (r == 1) return fail(c, KV_EINVAL, t->col, "expected integer after '%s='", k->name);
    if (r == 2) return fail(c, KV_EINVAL, t->col, "value of '%s=' does not fit in 64 bits", k->name);
    if (v < k->lo || v > k->hi)
        return fail(c, KV_EINVAL, t->col, "%s=%llu out of range %llu..%llu", k->name, (unsigned long long)v,
                    (unsigned long long)k->lo, (unsigned long long)k->hi);
    if ((k->flags & KEY_POW2) && (v & (v - 1u)) != 0)
        return fail(c, KV_EINVAL, t->col, "%s=%llu must be a power of two in %llu..%llu", k->name,
                    (unsigned long long)v, (unsigned long long)k->lo, (unsigned long long)k->hi);
    *out = v;
    return KV_OK;
}

static int find_key(const keydef *k, uint32_t n, const char *s, size_t len) {
    for (uint32_t i = 0; i < n; i++)
        if (tok_is(s, len, k[i].name)) return (int)i;
    return -1;
}

/* Every remaining token of the line is key=value with a key of k. */
static kv_status parse_keys(pctx *c, const char *dir, const keydef *k, uint32_t n, kvals *kv) {
    char b[48];
    tok t;
    memset(kv->col, 0, sizeof kv->col);
    while (next_token(c, &t)) {
        const char *eq = memchr(t.s, '=', t.len);
        if (!eq) return fail(c, KV_EINVAL, t.col, "expected key=value in %s, got '%s'", dir, show(b, sizeof b, t.s, t.len));
        size_t kl = (size_t)(eq - t.s);
        int i = find_key(k, n, t.s, kl);
        if (i < 0) return fail(c, KV_EINVAL, t.col, "unknown key '%s' in %s", show(b, sizeof b, t.s, kl), dir);
        if (kv->col[i]) return fail(c, KV_EINVAL, t.col, "duplicate key '%s' in %s", k[i].name, dir);
        tok val = {.s = eq + 1, .len = t.len - kl - 1u, .col = t.col + (uint32_t)kl + 1u};
        kv_status st = k[i].what ? parse_named(c, &k[i], &t, &val, &kv->v[i]) : parse_number(c, &k[i], &t, &val, &kv->v[i]);
        if (st != KV_OK) return st;
        kv->col[i] = t.col;
    }
    return KV_OK;
}

/* ---- text: directives --------------------------------------------------------- */

static kv_status d_kvs(pctx *c, const tok *d) {
    tok t;
    uint64_t v = 0;
    if (c->seen_kvs) return fail(c, KV_EINVAL, d->col, "duplicate 'kvs' directive");
    c->seen_kvs = true;
    if (!next_token(c, &t)) return fail(c, KV_EINVAL, d->col, "expected version after 'kvs'");
    if (parse_u64(t.s, t.len, &v) != 0) return fail(c, KV_EINVAL, t.col, "expected integer after 'kvs'");
    if (v < 1 || v > SIM_SCENARIO_VERSION)
        return fail(c, KV_EVERSION, t.col, "scenario format version %llu is not supported (this build reads 1..%u)",
                    (unsigned long long)v, SIM_SCENARIO_VERSION);
    return no_more_tokens(c, "kvs");
}

static kv_status d_seed(pctx *c, const tok *d) {
    tok t;
    if (c->seen_seed) return fail(c, KV_EINVAL, d->col, "duplicate 'seed' directive");
    c->seen_seed = true;
    if (!next_token(c, &t)) return fail(c, KV_EINVAL, d->col, "expected integer after 'seed'");
    int r = parse_u64(t.s, t.len, &c->out->cfg.seed);
    if (r == 1) return fail(c, KV_EINVAL, t.col, "expected integer after 'seed'");
    if (r == 2) return fail(c, KV_EINVAL, t.col, "seed does not fit in 64 bits");
    return no_more_tokens(c, "seed");
}

static const char *conn_name(uint32_t v) { return kv_conn_kind_name(v); }

enum { T_P, T_D, T_TP_P, T_TP_D, T_BLOCK, T_POOL_P, T_POOL_D, T_POLICY, T_PREFIX, T_CONN_P, T_CONN_D, T_STORE, T_HEAD, T_LOOKUP, T_SPEC, T_N };
static const keydef topology_keys[T_N] = {
    [T_P] = {"p", 1, SIDE_MAX, 0, NULL, NULL},
    [T_D] = {"d", 1, SIDE_MAX, 0, NULL, NULL},
    [T_TP_P] = {"tp_p", 1, KV_TP_MAX, KEY_POW2, NULL, NULL},
    [T_TP_D] = {"tp_d", 1, KV_TP_MAX, KEY_POW2, NULL, NULL},
    [T_BLOCK] = {"block", 4, 32, KEY_POW2, NULL, NULL},
    [T_POOL_P] = {"pool_p", POOL_MIN, POOL_MAX, 0, NULL, NULL},
    [T_POOL_D] = {"pool_d", POOL_MIN, POOL_MAX, 0, NULL, NULL},
    [T_POLICY] = {"policy", KV_POLICY_FAIL, KV_POLICY_RECOMPUTE, 0, "policy", policy_name},
    [T_PREFIX] = {"prefix_cache", 0, 1, 0, NULL, NULL},
    [T_CONN_P] = {"conn_p", 1, KV_CONN_KIND_COUNT - 1u, 0, "connector", conn_name},
    [T_CONN_D] = {"conn_d", 1, KV_CONN_KIND_COUNT - 1u, 0, "connector", conn_name},
    [T_STORE] = {"store", STORE_MIN, STORE_MAX, 0, NULL, NULL},
    [T_HEAD] = {"head", HEAD_MIN, HEAD_MAX, KEY_POW2, NULL, NULL},
    [T_LOOKUP] = {"lookup", 0, 1, 0, NULL, NULL},
    [T_SPEC] = {"spec", 0, KV_SPEC_MAX, 0, NULL, NULL},
};

static kv_status d_topology(pctx *c, const tok *d) {
    sim_world_cfg *w = &c->out->cfg;
    if (c->seen_topology) return fail(c, KV_EINVAL, d->col, "duplicate 'topology' directive");
    if (c->seen_req) return fail(c, KV_EINVAL, d->col, "topology must come before the first req");
    c->seen_topology = true;
    kvals kv = {.v = {[T_P] = w->n_p, [T_D] = w->n_d, [T_TP_P] = w->tp_p, [T_TP_D] = w->tp_d,
                      [T_BLOCK] = w->block_size, [T_POOL_P] = w->pool_blocks_p, [T_POOL_D] = w->pool_blocks_d,
                      [T_POLICY] = w->policy, [T_PREFIX] = w->prefix_caching ? 1u : 0u, [T_CONN_P] = w->conn_p,
                      [T_CONN_D] = w->conn_d, [T_STORE] = w->store_capacity, [T_HEAD] = w->head_bytes,
                      [T_LOOKUP] = w->store_lookup_off ? 0u : 1u, [T_SPEC] = w->num_spec}};
    kv_status st = parse_keys(c, "topology", topology_keys, T_N, &kv);
    if (st != KV_OK) return st;
    w->n_p = (uint32_t)kv.v[T_P];
    w->n_d = (uint32_t)kv.v[T_D];
    w->tp_p = (uint32_t)kv.v[T_TP_P];
    w->tp_d = (uint32_t)kv.v[T_TP_D];
    w->block_size = (uint32_t)kv.v[T_BLOCK];
    w->pool_blocks_p = (uint32_t)kv.v[T_POOL_P];
    w->pool_blocks_d = (uint32_t)kv.v[T_POOL_D];
    w->policy = (uint8_t)kv.v[T_POLICY];
    w->prefix_caching = kv.v[T_PREFIX] != 0;
    w->conn_p = (uint8_t)kv.v[T_CONN_P];
    w->conn_d = (uint8_t)kv.v[T_CONN_D];
    w->store_capacity = (uint32_t)kv.v[T_STORE];
    w->head_bytes = (uint32_t)kv.v[T_HEAD];
    w->store_lookup_off = kv.v[T_LOOKUP] == 0;
    w->num_spec = (uint32_t)kv.v[T_SPEC];
    for (uint32_t g = 0; c->seen_group && g < w->n_groups && w->num_spec; g++)
        if (w->group[g].kind == KV_GROUP_MAMBA)
            return fail(c, KV_EINVAL, d->col, "spec=%u with a mamba group: an engine with a recurrent group takes no "
                        "drafts (spec=0)", w->num_spec);
    if (w->head_bytes > sim_head_bytes_max(w))
        return fail(c, KV_EINVAL, d->col,
                    "head=%u is more than this topology holds (%u: one rank's block is at most %u bytes, %u with a "
                    "store connector, and every engine's KV fits %u MiB)",
                    w->head_bytes, sim_head_bytes_max(w), KV_BLOCK_BYTES_MAX, KV_STORE_SNAP_BYTES, HEAD_KV_BUDGET >> 20);
    return KV_OK;
}

static const keydef window_key[1] = {{"window", 1, WINDOW_MAX, 0, NULL, NULL}};

static int group_kind_of(const tok *t) {
    for (uint32_t k = KV_GROUP_FULL; k <= KV_GROUP_MAMBA; k++)
        if (tok_is(t->s, t->len, group_kind_name(k))) return (int)k;
    return -1;
}

static kv_status d_group(pctx *c, const tok *d) {
    sim_world_cfg *w = &c->out->cfg;
    char b[48];
    tok t;
    if (!c->seen_group) w->n_groups = 0;
    c->seen_group = true;
    if (w->n_groups >= KV_GROUPS_MAX)
        return fail(c, KV_EINVAL, d->col, "too many group directives (max %u)", KV_GROUPS_MAX);
    if (!next_token(c, &t)) return fail(c, KV_EINVAL, d->col, "expected group kind after 'group'");
    int kind = group_kind_of(&t);
    if (kind < 0) return fail(c, KV_EINVAL, t.col, "unknown group kind '%s'", show(b, sizeof b, t.s, t.len));
    if (w->n_groups == 0 && kind != KV_GROUP_FULL)
        return fail(c, KV_EINVAL, t.col, "first group must be full, got '%s'", group_kind_name((uint32_t)kind));
    if (kind == KV_GROUP_MAMBA && w->num_spec)
        return fail(c, KV_EINVAL, t.col, "group mamba with topology spec=%u: an engine with a recurrent group takes no "
                    "drafts (spec=0)", w->num_spec);
    kvals kv = {.v = {WINDOW_DEFAULT}};
    bool sliding = kind == KV_GROUP_SLIDING;
    kv_status st = parse_keys(c, sliding ? "group sliding" : "group", window_key, sliding ? 1u : 0u, &kv);
    if (st != KV_OK) return st;
    w->group[w->n_groups++] = (kv_group_cfg){.kind = (uint8_t)kind, .window = sliding ? (uint32_t)kv.v[0] : 0u};
    return KV_OK;
}

enum { O_ABORT, O_RECV, O_LIVE, O_N };
static const keydef timeout_keys[O_N] = {
    [O_ABORT] = {"abort_ns", TIMEOUT_MIN, TIMEOUT_MAX, 0, NULL, NULL},
    [O_RECV] = {"recv_ns", TIMEOUT_MIN, TIMEOUT_MAX, 0, NULL, NULL},
    [O_LIVE] = {"live_ns", LIVE_MIN, LIVE_MAX, 0, NULL, NULL},
};

static kv_status d_timeouts(pctx *c, const tok *d) {
    sim_world_cfg *w = &c->out->cfg;
    if (c->seen_timeouts) return fail(c, KV_EINVAL, d->col, "duplicate 'timeouts' directive");
    c->seen_timeouts = true;
    kvals kv = {.v = {[O_ABORT] = w->abort_timeout_ns, [O_RECV] = w->recv_timeout_ns, [O_LIVE] = w->live_bound_ns}};
    kv_status st = parse_keys(c, "timeouts", timeout_keys, O_N, &kv);
    if (st != KV_OK) return st;
    w->abort_timeout_ns = kv.v[O_ABORT];
    w->recv_timeout_ns = kv.v[O_RECV];
    w->live_bound_ns = kv.v[O_LIVE];
    return KV_OK;
}

/* One comma-separated list of bug names. */
static kv_status bug_list(pctx *c, const tok *t, uint32_t *mask) {
    char b[48];
    for (size_t i = 0; i <= t->len;) {
        const char *comma = memchr(t->s + i, ',', t->len - i);
        size_t e = comma ? (size_t)(comma - t->s) : t->len;
        uint32_t col = t->col + (uint32_t)i;
        if (e == i) return fail(c, KV_EINVAL, col, "empty bug name in '%s'", show(b, sizeof b, t->s, t->len));
        show(b, sizeof b, t->s + i, e - i);
        uint32_t bit = e - i < sizeof b ? kv_bug_parse(b) : 0u;
        if (bit == 0) return fail(c, KV_EINVAL, col, "unknown bug '%s'", b);
        *mask |= bit;
        i = e + 1u;
    }
    return KV_OK;
}

static kv_status d_bugs(pctx *c, const tok *d) {
    tok t;
    uint32_t mask = 0;
    if (c->seen_bugs) return fail(c, KV_EINVAL, d->col, "duplicate 'bugs' directive");
    c->seen_bugs = true;
    if (!next_token(c, &t)) return fail(c, KV_EINVAL, d->col, "expected bug names or 'none' after 'bugs'");
    if (tok_is(t.s, t.len, "none")) {
        c->out->cfg.bugs = 0;
        return no_more_tokens(c, "bugs none");
    }
    do { /* one list per remaining token of the line */
        kv_status st = bug_list(c, &t, &mask);
        if (st != KV_OK) return st;
    } while (next_token(c, &t));
    c->out->cfg.bugs = mask;
    return KV_OK;
}

enum { R_AT, R_P, R_D, R_PROMPT, R_MAX, R_PGROUP, R_PLEN, R_SEQ, R_DEXTRA, R_N };
static const keydef req_keys[R_N] = {
    [R_AT] = {"at", 0, AT_MAX, 0, NULL, NULL},
    [R_P] = {"p", 0, SIDE_MAX - 1u, 0, NULL, NULL},
    [R_D] = {"d", 0, SIDE_MAX - 1u, 0, NULL, NULL},
    [R_PROMPT] = {"prompt", 1, PROMPT_MAX, 0, NULL, NULL},
    [R_MAX] = {"max", 1, MAX_TOKENS_MAX, 0, NULL, NULL},
    [R_PGROUP] = {"prefix_group", 0, PREFIX_GROUPS - 1u, 0, NULL, NULL},
    [R_PLEN] = {"prefix_len", 0, PROMPT_MAX, 0, NULL, NULL},
    [R_SEQ] = {"seq", 0, 1, 0, NULL, NULL},
    [R_DEXTRA] = {"d_extra", 0, D_EXTRA_MAX, 0, NULL, NULL},
};

static uint32_t first_col(const kvals *kv, uint32_t a, uint32_t b, uint32_t dflt) {
    return kv->col[a] ? kv->col[a] : kv->col[b] ? kv->col[b] : dflt;
}

/* Checks that depend on the topology or on two keys. */
static kv_status req_cross(pctx *c, const tok *d, const kvals *kv) {
    const sim_world_cfg *w = &c->out->cfg;
    if (kv->v[R_P] >= w->n_p)
        return fail(c, KV_EINVAL, kv->col[R_P], "p=%llu out of range 0..%u (topology has p=%u)",
                    (unsigned long long)kv->v[R_P], w->n_p - 1u, w->n_p);
    if (kv->v[R_D] >= w->n_d)
        return fail(c, KV_EINVAL, kv->col[R_D], "d=%llu out of range 0..%u (topology has d=%u)",
                    (unsigned long long)kv->v[R_D], w->n_d - 1u, w->n_d);
    if (kv->v[R_PROMPT] + kv->v[R_MAX] > req_tokens_cap(w->block_size))
        return fail(c, KV_EINVAL, first_col(kv, R_PROMPT, R_MAX, d->col), "prompt=%llu + max=%llu exceeds %u*block=%u",
                    (unsigned long long)kv->v[R_PROMPT], (unsigned long long)kv->v[R_MAX], KV_REQ_BLOCKS_MAX,
                    req_tokens_cap(w->block_size));
    if (kv->v[R_PLEN] > kv->v[R_PROMPT])
        return fail(c, KV_EINVAL, kv->col[R_PLEN], "prefix_len=%llu exceeds prompt=%llu",
                    (unsigned long long)kv->v[R_PLEN], (unsigned long long)kv->v[R_PROMPT]);
    return KV_OK;
}

static kv_status d_req(pctx *c, const tok *d) {
    sim_world_cfg *w = &c->out->cfg;
    c->seen_req = true;
    if (w->n_reqs >= SIM_REQS_MAX) return fail(c, KV_EINVAL, d->col, "too many req directives (max %u)", SIM_REQS_MAX);
    kvals kv = {.v = {[R_PROMPT] = REQ_PROMPT_DEFAULT, [R_MAX] = REQ_MAX_DEFAULT}};
    kv_status st = parse_keys(c, "req", req_keys, R_N, &kv);
    if (st == KV_OK) st = req_cross(c, d, &kv);
    if (st != KV_OK) return st;
    w->req[w->n_reqs++] = (sim_req_plan){
        .at_ns = kv.v[R_AT], .p_engine = (uint32_t)kv.v[R_P], .d_engine = (uint32_t)kv.v[R_D],
        .prompt_len = (uint32_t)kv.v[R_PROMPT], .max_tokens = (uint32_t)kv.v[R_MAX],
        .prefix_group = (uint32_t)kv.v[R_PGROUP], .prefix_len = (uint32_t)kv.v[R_PLEN],
        .sequential = (uint8_t)kv.v[R_SEQ], .d_extra_tokens = (uint32_t)kv.v[R_DEXTRA]};
    return KV_OK;
}

enum { F_AT, F_KIND, F_TARGET, F_ARG, F_N };
static const keydef fault_keys[F_N] = {
    [F_AT] = {"at", 0, AT_MAX, 0, NULL, NULL},
    [F_KIND] = {"kind", SIM_F_ABORT, SIM_F_KIND_COUNT - 1u, 0, "fault kind", sim_fault_name},
    [F_TARGET] = {"target", 0, U16_MAX, 0, NULL, NULL},
    [F_ARG] = {"arg", 0, U16_MAX, 0, NULL, NULL},
};

static kv_status d_fault(pctx *c, const tok *d) {
    sim_world_cfg *w = &c->out->cfg;
    if (w->n_faults >= SIM_FAULTS_MAX)
        return fail(c, KV_EINVAL, d->col, "too many fault directives (max %u)", SIM_FAULTS_MAX);
    kvals kv = {.v = {[F_KIND] = SIM_F_ABORT}};
    kv_status st = parse_keys(c, "fault", fault_keys, F_N, &kv);
    if (st != KV_OK) return st;
    w->fault[w->n_faults++] = (sim_fault){.at_ns = kv.v[F_AT], .kind = (uint32_t)kv.v[F_KIND],
                                          .target = (uint32_t)kv.v[F_TARGET], .arg = (uint32_t)kv.v[F_ARG]};
    return KV_OK;
}

static int hex_val(char ch) {
    if (ch >= '0' && ch <= '9') return ch - '0';
    if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F') return ch - 'A' + 10;
    return -1;
}

static kv_status choice_token(pctx *c, const tok *t) {
    sim_scenario *s = c->out;
    char b[48];
    for (size_t i = 0; i < t->len; i++)
        if (hex_val(t->s[i]) < 0)
            return fail(c, KV_EINVAL, t->col + (uint32_t)i, "invalid hex digit '%s' in choice", show(b, sizeof b, t->s + i, 1));
    if (t->len % 2u) return fail(c, KV_EINVAL, t->col, "odd number of hex digits in choice");
    if (t->len / 2u > SIM_CHOICE_MAX - s->cfg.choice_len)
        return fail(c, KV_EINVAL, t->col, "too many choice bytes (max %u)", SIM_CHOICE_MAX);
    for (size_t i = 0; i < t->len; i += 2)
        s->choice[s->cfg.choice_len++] = (uint8_t)(hex_val(t->s[i]) * 16 + hex_val(t->s[i + 1u]));
    return KV_OK;
}

static kv_status d_choice(pctx *c, const tok *d) {
    (void)d;
    tok t;
    while (next_token(c, &t)) {
        kv_status st = choice_token(c, &t);
        if (st != KV_OK) return st;
    }
    return KV_OK;
}

/* ---- text: lines -------------------------------------------------------------- */

static const struct {
    const char *name;
    kv_status (*fn)(pctx *, const tok *);
} directives[] = {
    {"kvs", d_kvs},           {"seed", d_seed}, {"topology", d_topology}, {"group", d_group},
    {"timeouts", d_timeouts}, {"bugs", d_bugs}, {"req", d_req},           {"fault", d_fault},
    {"choice", d_choice},
};

static kv_status parse_line(pctx *c) {
    char b[48];
    tok d;
    if (!next_token(c, &d)) return KV_OK;
    if (!c->seen_kvs && !tok_is(d.s, d.len, "kvs"))
        return fail(c, KV_EINVAL, d.col, "expected 'kvs %u' as the first directive, got '%s'", SIM_SCENARIO_VERSION,
                    show(b, sizeof b, d.s, d.len));
    for (size_t i = 0; i < sizeof directives / sizeof directives[0]; i++)
        if (tok_is(d.s, d.len, directives[i].name)) return directives[i].fn(c, &d);
    return fail(c, KV_EINVAL, d.col, "unknown directive '%s'", show(b, sizeof b, d.s, d.len));
}

static void err_file(sim_parse_error *err, const char *file_name) {
    if (!err) return;
    memset(err, 0, sizeof *err);
    snprintf(err->file, sizeof err->file, "%s", file_name ? file_name : "<input>");
}

static kv_status parse_all(pctx *c, const char *text, size_t len) {
    for (size_t at = 0; at < len; c->line++) {
        const char *nl = memchr(text + at, '\n', len - at);
        size_t end = nl ? (size_t)(nl - text) : len;
        const char *hash = memchr(text + at, '#', end - at);
        c->ls = text + at;
        c->ll = (hash ? (size_t)(hash - text) : end) - at;
        c->pos = 0;
        kv_status st = parse_line(c);
        if (st != KV_OK) return st;
        at = end + 1u;
    }
    if (!c->seen_kvs) {
        c->line = 1;
        return fail(c, KV_EINVAL, 1, "missing 'kvs %u' header", SIM_SCENARIO_VERSION);
    }
    return KV_OK;
}

kv_status sim_scenario_parse(const char *text, size_t len, const char *file_name, sim_scenario *out,
                             sim_parse_error *err) {
    err_file(err, file_name);
    sim_scenario_init(out);
    pctx c = {.err = err, .out = out, .line = 1};
    kv_status st = parse_all(&c, text ? text : "", text ? len : 0);
    if (st != KV_OK) sim_scenario_init(out);
    return st;
}

SCN_FMT(4, 5) static kv_status file_fail(sim_parse_error *err, const char *path, kv_status st, const char *fmt, ...) {
    err_file(err, path);
    if (!err) return st;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
    return st;
}

kv_status sim_scenario_load(const char *path, sim_scenario *out, sim_parse_error *err) {
    static _Thread_local char buf[SIM_SCENARIO_FILE_MAX + 1u];
    sim_scenario_init(out);
    FILE *f = fopen(path, "rb");
    if (!f) return file_fail(err, path, KV_ENOENT, "cannot open '%s': %s", path, strerror(errno));
    size_t n = fread(buf, 1, sizeof buf, f);
    bool bad = ferror(f) != 0;
    fclose(f);
    if (bad) return file_fail(err, path, KV_EIO, "read error in '%s'", path);
    if (n > SIM_SCENARIO_FILE_MAX)
        return file_fail(err, path, KV_EFULL, "'%s' is larger than %u bytes", path, SIM_SCENARIO_FILE_MAX);
    return sim_scenario_parse(buf, n, path, out, err);
}
