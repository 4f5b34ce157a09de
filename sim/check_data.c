/* sim/check_data.c — INV-DATA at a request's first token: the KV its
 * attention reads is complete, wherever it came from.
 *
 * Rule: when a step on an engine's rank is the first to produce a token of
 * a request (its scheduled tokens reach the request's end), every block that
 * step's attention reads, in every group, is in the request's block table
 * and holds the bytes computed from the request's tokens (core/kv_data.h;
 * judged by the checker's own byte reference, ref_block_ok), whether the block was pulled from P, loaded from the store, hit in the
 * local prefix cache or computed here:
 *   full attention   every position of the prefix, [0, cdiv(end, bs));
 *   sliding window   the positions holding the last `window` tokens,
 *                    [(end - window) / bs, cdiv(end, bs)) when end > window;
 *   recurrent        the state block, at the table's last position: the
 *                    state after every token so far, a chain the checker
 *                    folds itself (ref_state), so a token folded twice or
 *                    skipped, or a state that is not the request's (never
 *                    pulled, loaded, or a stale block), shows.
 * A window clipped one block short or a group skipped is a violation even if
 * no later step reads the block. Checked once per request, engine and rank
 * (P's single token and D's first decode), after the worker's forward pass
 * wrote the step's tokens: the state a model's attention would read.
 *
 * Non-vacuity: each request that ended ok had its first token checked on D;
 * a run where requests ended ok and none was checked fails.
 *
 * Speculative decoding: on an engine that takes drafts, every decode step
 * is checked too, after its forward pass: the block holding the request's
 * last token before the step and every block the step wrote hold the
 * request's own tokens up to what the step keeps (its last token and the
 * accepted drafts, kv_spec_accepted) and the rejected drafts' tokens
 * (kv_draft_token) in the slots after it, no more and no less. A scheduler
 * that keeps a rejected draft's slot as computed (its next step starts past
 * it, so its KV is never computed again), or one that computes too much or
 * too little, shows here. Such a run with drafts scheduled and no decode
 * step checked fails. */
#include "sim/check_int.h"

#include "core/worker.h"

static const char *group_kind(uint8_t k) {
    return k == KV_GROUP_FULL ? "full" : k == KV_GROUP_SLIDING ? "sliding" : "recurrent";
}

/* The checker's own reference of a block's bytes, written from the byte
 * formula and not through core/kv_data.c's fill and verify paths (their
 * vector paths included), so a core whose fill or verify is wrong cannot
 * also blind this check: head h of group g holds words kv_mix64(key ^ k),
 * k < head_bytes / 8, little-endian, with key = digest ^ g << 48 ^ h << 32,
 * and a partial last word's low bytes of kv_mix64(key ^ k). */
static uint64_t load_le64(const uint8_t *p) {
    uint64_t v = 0;
    for (uint32_t i = 8; i-- > 0;) v = v << 8 | p[i];
    return v;
}

static bool ref_block_ok(const uint8_t *have, uint64_t digest, uint32_t g, uint32_t head_lo, uint32_t head_hi,
                         uint32_t head_bytes) {
    for (uint32_t h = head_lo; h < head_hi; h++) {
        uint64_t key = digest ^ (uint64_t)g << 48 ^ (uint64_t)h << 32;
        const uint8_t *b = have + (size_t)(h - head_lo) * head_bytes;
        uint32_t j = 0;
        for (; j + 8u <= head_bytes; j += 8) /* whole words */
            if (load_le64(b + j) != kv_mix64(key ^ (j / 8u))) return false;
        if (j == head_bytes) continue;
        uint64_t v = kv_mix64(key ^ (j / 8u)); /* a partial last word: its low bytes */
        for (uint32_t i = j; i < head_bytes; i++)
            if (b[i] != (uint8_t)(v >> (8u * (i - j)))) return false;
    }
    return true;
}

/* The recurrent state after n tokens, by its definition (core/kv_data.h),
 * not through the core's chain: S(0) is the seed, S(i + 1) = (S(i) ^ token
 * i) * the 64-bit FNV prime. */
#define REF_STATE_SEED 0x84222325cbf29ce4ull
static uint64_t ref_state(const kv_tokens *t, uint32_t n) {
    uint64_t s = REF_STATE_SEED;
    for (uint32_t i = 0; i < n; i++) s = (s ^ kv_token(t, i)) * 0x100000001b3ull;
    return s;
}

/* The first position of group g that the token after `end` computed tokens reads. */
static uint32_t first_read(const kv_engine_cfg *cfg, uint32_t g, uint32_t end, uint32_t last) {
    const kv_group_cfg *gc = &cfg->group[g];
    if (gc->kind == KV_GROUP_MAMBA) return last - 1;
    if (gc->kind == KV_GROUP_SLIDING && end > gc->window) return (end - gc->window) / cfg->block_size;
    return 0;
}

/* What is wrong with position pos of group g in the request's table on this
 * rank, given the digest its bytes must derive from; NULL: nothing. *id
 * gets the block there. */
static const char *block_wrong(kv_worker *w, const kv_step_req *q, uint32_t g, uint32_t pos, uint64_t digest,
                               uint32_t *id) {
    *id = pos < q->blocks.n[g] ? q->blocks.id[g][pos] : KV_NULL_BLOCK;
    if (*id == KV_NULL_BLOCK || *id >= w->capacity) return "has no block";
    return ref_block_ok(kv_worker_kv(w, g, *id), digest, g, w->head_lo, w->head_hi, w->cfg.head_bytes)
               ? NULL
               : "holds the wrong bytes";
}

static void check_req(sim_check *c, kv_worker *w, uint32_t engine, const kv_step_req *q) {
    const kv_engine_cfg *cfg = &w->cfg;
    uint32_t end = q->computed_before + q->num_scheduled;
    uint32_t last = kv_cdiv(end, cfg->block_size);
    kv_digest_memo dm;
    kv_digest_memo_init(&dm, &q->tokens, cfg->block_size, end);
    c->v.res->armed[KV_INV_DATA]++;
    c->first_token_checks++;
    for (uint32_t g = 0; g < cfg->n_groups; g++) {
        for (uint32_t pos = first_read(cfg, g, end, last); pos < last; pos++) {
            uint32_t id;
            const char *what = block_wrong(w, q, g, pos,
                                           cfg->group[g].kind == KV_GROUP_MAMBA ? ref_state(&q->tokens, end)
                                                                                : kv_block_digest_m(&dm, pos),
                                           &id);
            if (!what) continue;
            kv_violate(c->v.env, KV_INV_DATA, engine, q->id,
                       "first token of request %u on engine %u rank %u (%u tokens, %u computed before this step): "
                       "group %u (%s) position %u %s (block %u)",
                       q->id, engine, w->rank, end, q->computed_before, g, group_kind(cfg->group[g].kind), pos, what,
                       id);
            return;
        }
    }
}

static void check_decode(sim_check *c, kv_worker *w, uint32_t engine, const kv_step_req *q) {
    const kv_engine_cfg *cfg = &w->cfg;
    uint32_t bs = cfg->block_size, cb = q->computed_before, end = cb + q->num_scheduled;
    uint32_t keep = q->num_spec ? cb + 1 + kv_spec_accepted(&q->tokens, cb + 1, q->num_spec) : end;
    uint32_t last = kv_cdiv(end, bs);
    kv_draft_slots drafts = {.n = keep < end, .lo = {keep}, .hi = {end}};
    c->v.res->armed[KV_INV_DATA]++;
    c->decode_checks++;
    for (uint32_t g = 0; g < cfg->n_groups; g++) {
        uint32_t from = first_read(cfg, g, end, last), lo = (cb - 1) / bs;
        for (uint32_t pos = from > lo ? from : lo; pos < last; pos++) {
            uint32_t id;
            const char *what = block_wrong(w, q, g, pos, kv_block_digest_drafts(&q->tokens, pos, bs, end, &drafts), &id);
            if (!what) continue;
            kv_violate(c->v.env, KV_INV_DATA, engine, q->id,
                       "decode step of request %u on engine %u rank %u ([%u, %u), %u drafts, %u kept): group %u (%s) "
                       "position %u %s (block %u)",
                       q->id, engine, w->rank, cb, end, q->num_spec, keep - cb, g, group_kind(cfg->group[g].kind), pos,
                       what, id);
            return;
        }
    }
}

void chk_data_execute(sim_check *c, uint32_t engine, uint32_t rank, const kv_msg *m) {
    if (m->len < sizeof(kv_m_execute)) return;
    const kv_step *st = ((const kv_m_execute *)m->payload)->step;
    kv_worker *w = c->v.eng[engine]->worker[rank];
    uint32_t side = engine < c->v.cfg->n_p ? 0u : 1u;
    for (uint32_t i = 0; i < st->n_reqs && !chk_violated(c); i++) {
        const kv_step_req *q = &st->req[i];
        if (!q->num_scheduled || q->computed_before + q->num_scheduled < q->num_tokens || q->id >= chk_n_reqs(c))
            continue;
        if (w->cfg.num_spec && q->computed_before && q->num_scheduled - q->num_spec == 1u &&
            q->computed_before + 1u == q->num_tokens)
            check_decode(c, w, engine, q);
        uint8_t *done = &c->req[q->id].data_ranks[side];
        if (*done >> rank & 1u) continue;
        *done |= (uint8_t)(1u << rank);
        check_req(c, w, engine, q);
    }
}

void chk_data_end(sim_check *c) {
    const kv_proxy *p = c->v.proxy;
    uint64_t drafts = 0;
    for (uint32_t i = 0; i < c->v.n_eng; i++) drafts += c->v.eng[i]->stats.drafts;
    if (drafts && !c->decode_checks)
        kv_violate(c->v.env, KV_INV_DATA, KV_REQ_NONE, KV_REQ_NONE,
                   "%llu draft tokens were scheduled and no decode step was checked (the check never armed)",
                   (unsigned long long)drafts);
    if (p->ok && !c->first_token_checks)
        kv_violate(c->v.env, KV_INV_DATA, KV_REQ_NONE, KV_REQ_NONE,
                   "%llu requests ended ok and no first token was checked (the check never armed)",
                   (unsigned long long)p->ok);
}
