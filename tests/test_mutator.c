/* tests/test_mutator.c — fuzz/mutator: the structure-aware mutator of
 * fuzz_scenario, compiled here without any fuzzing engine. Each mutation
 * kind changes the field it names and nothing it should not (a retimed
 * fault keeps its kind, target and arg; an inserted request leaves the
 * others in order); a kind that cannot apply says so and leaves the
 * scenario alone; every output of fuzz_mutate and fuzz_crossover fits
 * max_size and decodes to a valid scenario whose canonical encoding is the
 * output itself; the same seed gives the same bytes; splicing keeps a
 * prefix of one fault plan and a suffix of the other. sim_scenario is
 * large: every instance here is static. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <string.h>

#include "fuzz/mutator.h"
#include "sim/scenario.h"

static sim_scenario base, s, dec;
static fuzz_mutator mut;
static uint8_t in[SIM_SCENARIO_BYTES_MAX], out[SIM_SCENARIO_BYTES_MAX], out2[SIM_SCENARIO_BYTES_MAX];

/* A varied valid scenario: random bytes through the total decoder, then a
 * few requests and faults so that every kind has something to work on. */
static void make_scenario(sim_scenario *dst, uint64_t seed) {
    fuzz_rng r;
    fuzz_rng_init(&r, seed);
    size_t n = 20u + fuzz_rng_below(&r, 300);
    for (size_t i = 0; i < n; i++) in[i] = (uint8_t)fuzz_rng_next(&r);
    sim_scenario_from_bytes(in, n, dst);
    for (uint32_t i = 0, k = fuzz_rng_below(&r, 6); i < k; i++) fuzz_mutate_scenario(dst, FUZZ_MUT_REQ_INSERT, &r);
    for (uint32_t i = 0, k = fuzz_rng_below(&r, 6); i < k; i++) fuzz_mutate_scenario(dst, FUZZ_MUT_FAULT_INSERT, &r);
    if (fuzz_rng_below(&r, 2)) fuzz_mutate_scenario(dst, FUZZ_MUT_CHOICE, &r);
}

/* Valid, and binary -> struct -> binary is the identity on it. */
static void assert_canonical(const sim_scenario *x) {
    cr_assert(sim_scenario_valid(x));
    size_t n = 0;
    cr_assert_eq(sim_scenario_to_bytes(x, out2, sizeof out2, &n), KV_OK);
    cr_assert_eq(n, fuzz_encoded_size(x));
    sim_scenario_from_bytes(out2, n, &dec);
    cr_assert(sim_scenario_equal(x, &dec));
}

static bool topology_equal(const sim_world_cfg *a, const sim_world_cfg *b) {
    return a->n_p == b->n_p && a->n_d == b->n_d && a->tp_p == b->tp_p && a->tp_d == b->tp_d &&
           a->block_size == b->block_size && a->pool_blocks_p == b->pool_blocks_p &&
           a->pool_blocks_d == b->pool_blocks_d && a->policy == b->policy &&
           a->prefix_caching == b->prefix_caching && a->conn_p == b->conn_p && a->conn_d == b->conn_d &&
           a->store_capacity == b->store_capacity;
}

/* Field by field everywhere: the structs have padding, which struct
 * assignment need not copy. */
static bool group_eq(const kv_group_cfg *a, const kv_group_cfg *b) { return a->kind == b->kind && a->window == b->window; }

static bool req_eq(const sim_req_plan *a, const sim_req_plan *b) {
    return a->at_ns == b->at_ns && a->p_engine == b->p_engine && a->d_engine == b->d_engine &&
           a->prompt_len == b->prompt_len && a->max_tokens == b->max_tokens && a->prefix_group == b->prefix_group &&
           a->prefix_len == b->prefix_len && a->sequential == b->sequential && a->d_extra_tokens == b->d_extra_tokens;
}

static bool fault_eq(const sim_fault *a, const sim_fault *b) {
    return a->at_ns == b->at_ns && a->kind == b->kind && a->target == b->target && a->arg == b->arg;
}

static bool groups_equal(const sim_world_cfg *a, const sim_world_cfg *b) {
    if (a->n_groups != b->n_groups) return false;
    for (uint32_t g = 0; g < a->n_groups; g++)
        if (!group_eq(&a->group[g], &b->group[g])) return false;
    return true;
}

static bool faults_equal(const sim_world_cfg *a, const sim_world_cfg *b) {
    if (a->n_faults != b->n_faults) return false;
    for (uint32_t i = 0; i < a->n_faults; i++)
        if (!fault_eq(&a->fault[i], &b->fault[i])) return false;
    return true;
}

static bool reqs_equal(const sim_world_cfg *a, const sim_world_cfg *b) {
    if (a->n_reqs != b->n_reqs) return false;
    for (uint32_t i = 0; i < a->n_reqs; i++)
        if (!req_eq(&a->req[i], &b->req[i])) return false;
    return true;
}

/* longer[nl] is shorter[ns] with one element inserted. */
static bool one_more_req(const sim_req_plan *longer, uint32_t nl, const sim_req_plan *shorter, uint32_t ns) {
    if (ns + 1u != nl) return false;
    uint32_t i = 0;
    while (i < ns && req_eq(&longer[i], &shorter[i])) i++;
    for (; i < ns; i++)
        if (!req_eq(&longer[i + 1u], &shorter[i])) return false;
    return true;
}

static bool one_more_fault(const sim_fault *longer, uint32_t nl, const sim_fault *shorter, uint32_t ns) {
    if (ns + 1u != nl) return false;
    uint32_t i = 0;
    while (i < ns && fault_eq(&longer[i], &shorter[i])) i++;
    for (; i < ns; i++)
        if (!fault_eq(&longer[i + 1u], &shorter[i])) return false;
    return true;
}

/* What each kind may and may not touch; pre is before, post after. */
static void assert_effect(fuzz_mut m, const sim_scenario *pre, const sim_scenario *post) {
    const sim_world_cfg *a = &pre->cfg, *b = &post->cfg;
    bool choice_same = a->choice_len == b->choice_len && !memcmp(pre->choice, post->choice, a->choice_len);
    if (m != FUZZ_MUT_SEED) cr_assert_eq(a->seed, b->seed, "%s changed the seed", fuzz_mut_name(m));
    if (m != FUZZ_MUT_CHOICE) cr_assert(choice_same, "%s changed the choice stream", fuzz_mut_name(m));
    if (m != FUZZ_MUT_TOPOLOGY) cr_assert(topology_equal(a, b), "%s changed the topology", fuzz_mut_name(m));
    if (m != FUZZ_MUT_GROUPS) cr_assert(groups_equal(a, b), "%s changed the groups", fuzz_mut_name(m));
    bool touches_faults = m == FUZZ_MUT_FAULT_INSERT || m == FUZZ_MUT_FAULT_DELETE ||
                          m == FUZZ_MUT_FAULT_RETIME || m == FUZZ_MUT_FAULT_CHANGE;
    if (!touches_faults) cr_assert(faults_equal(a, b), "%s changed the fault plan", fuzz_mut_name(m));
    /* A topology change may fold a request's engine index or prompt back
     * into range (as the decoder would); nothing else touches requests. */
    bool touches_reqs = m == FUZZ_MUT_REQ_INSERT || m == FUZZ_MUT_REQ_DELETE || m == FUZZ_MUT_REQ_CHANGE ||
                        m == FUZZ_MUT_TOPOLOGY;
    if (!touches_reqs) cr_assert(reqs_equal(a, b), "%s changed the requests", fuzz_mut_name(m));
    switch (m) {
    case FUZZ_MUT_REQ_INSERT:
        cr_assert(one_more_req(b->req, b->n_reqs, a->req, a->n_reqs), "not one request added");
        break;
    case FUZZ_MUT_REQ_DELETE:
        cr_assert(one_more_req(a->req, a->n_reqs, b->req, b->n_reqs), "not one request removed");
        break;
    case FUZZ_MUT_REQ_CHANGE: {
        cr_assert_eq(a->n_reqs, b->n_reqs);
        uint32_t diff = 0;
        for (uint32_t i = 0; i < a->n_reqs; i++) diff += !req_eq(&a->req[i], &b->req[i]);
        cr_assert_eq(diff, 1, "req_change changed %u requests", diff);
        break;
    }
    case FUZZ_MUT_FAULT_INSERT:
        cr_assert(one_more_fault(b->fault, b->n_faults, a->fault, a->n_faults), "not one fault added");
        break;
    case FUZZ_MUT_FAULT_DELETE:
        cr_assert(one_more_fault(a->fault, a->n_faults, b->fault, b->n_faults), "not one fault removed");
        break;
    case FUZZ_MUT_FAULT_RETIME: {
        cr_assert_eq(a->n_faults, b->n_faults);
        uint32_t moved = 0;
        for (uint32_t i = 0; i < a->n_faults; i++) {
            cr_assert_eq(a->fault[i].kind, b->fault[i].kind, "retime changed a kind");
            cr_assert_eq(a->fault[i].target, b->fault[i].target, "retime changed a target");
            cr_assert_eq(a->fault[i].arg, b->fault[i].arg, "retime changed an arg");
            moved += a->fault[i].at_ns != b->fault[i].at_ns;
        }
        cr_assert_eq(moved, 1, "retime moved %u faults", moved);
        break;
    }
    case FUZZ_MUT_FAULT_CHANGE: {
        cr_assert_eq(a->n_faults, b->n_faults);
        uint32_t diff = 0;
        for (uint32_t i = 0; i < a->n_faults; i++) {
            cr_assert_eq(a->fault[i].at_ns, b->fault[i].at_ns, "fault_change moved a fault");
            diff += !fault_eq(&a->fault[i], &b->fault[i]);
        }
        cr_assert_eq(diff, 1, "fault_change changed %u faults", diff);
        break;
    }
    case FUZZ_MUT_TOPOLOGY: cr_assert(!topology_equal(a, b), "topology unchanged"); break;
    case FUZZ_MUT_GROUPS: cr_assert(!groups_equal(a, b), "groups unchanged"); break;
    case FUZZ_MUT_TIMEOUTS:
        cr_assert(a->abort_timeout_ns != b->abort_timeout_ns || a->recv_timeout_ns != b->recv_timeout_ns);
        break;
    case FUZZ_MUT_CHOICE: cr_assert(!choice_same, "choice unchanged"); break;
    case FUZZ_MUT_SEED: cr_assert_neq(a->seed, b->seed); break;
    case FUZZ_MUT_COUNT: cr_assert_fail("no such kind"); break;
    }
}

/* Can kind m apply to x at all? */
static bool applies(fuzz_mut m, const sim_scenario *x) {
    const sim_world_cfg *c = &x->cfg;
    switch (m) {
    case FUZZ_MUT_REQ_INSERT: return c->n_reqs < SIM_REQS_MAX;
    case FUZZ_MUT_REQ_DELETE:
    case FUZZ_MUT_REQ_CHANGE: return c->n_reqs > 0;
    case FUZZ_MUT_FAULT_INSERT: return c->n_faults < SIM_FAULTS_MAX;
    case FUZZ_MUT_FAULT_DELETE:
    case FUZZ_MUT_FAULT_RETIME:
    case FUZZ_MUT_FAULT_CHANGE: return c->n_faults > 0;
    case FUZZ_MUT_TOPOLOGY:
    case FUZZ_MUT_GROUPS:
    case FUZZ_MUT_TIMEOUTS:
    case FUZZ_MUT_CHOICE:
    case FUZZ_MUT_SEED: return true;
    case FUZZ_MUT_COUNT: break;
    }
    return false;
}

Test(mutator, every_kind_changes_its_field_and_stays_valid) {
    for (uint32_t m = 0; m < FUZZ_MUT_COUNT; m++) {
        fuzz_rng r;
        fuzz_rng_init(&r, 1000u + m);
        for (uint64_t i = 0; i < 300; i++) {
            make_scenario(&base, i * 7919u + m);
            sim_scenario_copy(&s, &base);
            bool ok = fuzz_mutate_scenario(&s, (fuzz_mut)m, &r);
            cr_assert_eq(ok, applies((fuzz_mut)m, &base), "%s on scenario %llu: returned %d", fuzz_mut_name((fuzz_mut)m),
                         (unsigned long long)i, ok);
            if (!ok) {
                cr_assert(sim_scenario_equal(&s, &base), "%s failed but changed the scenario", fuzz_mut_name((fuzz_mut)m));
                continue;
            }
            assert_canonical(&s);
            assert_effect((fuzz_mut)m, &base, &s);
        }
    }
}

Test(mutator, kinds_that_cannot_apply_leave_the_scenario_alone) {
    fuzz_rng r;
    fuzz_rng_init(&r, 7);
    sim_scenario_init(&s); /* no requests, no faults */
    sim_scenario_copy(&base, &s);
    fuzz_mut empty_fails[] = {FUZZ_MUT_REQ_DELETE, FUZZ_MUT_REQ_CHANGE, FUZZ_MUT_FAULT_DELETE, FUZZ_MUT_FAULT_RETIME,
                              FUZZ_MUT_FAULT_CHANGE};
    for (size_t i = 0; i < sizeof empty_fails / sizeof empty_fails[0]; i++) {
        cr_assert(!fuzz_mutate_scenario(&s, empty_fails[i], &r), "%s applied to an empty list", fuzz_mut_name(empty_fails[i]));
        cr_assert(sim_scenario_equal(&s, &base));
    }
    while (s.cfg.n_reqs < SIM_REQS_MAX) cr_assert(fuzz_mutate_scenario(&s, FUZZ_MUT_REQ_INSERT, &r));
    while (s.cfg.n_faults < SIM_FAULTS_MAX) cr_assert(fuzz_mutate_scenario(&s, FUZZ_MUT_FAULT_INSERT, &r));
    sim_scenario_copy(&base, &s);
    cr_assert(!fuzz_mutate_scenario(&s, FUZZ_MUT_REQ_INSERT, &r));
    cr_assert(!fuzz_mutate_scenario(&s, FUZZ_MUT_FAULT_INSERT, &r));
    cr_assert(!fuzz_mutate_scenario(&s, FUZZ_MUT_COUNT, &r));
    cr_assert(sim_scenario_equal(&s, &base));
    assert_canonical(&s);
}

Test(mutator, inserted_faults_cover_every_kind) {
    uint32_t seen[SIM_F_KIND_COUNT] = {0};
    fuzz_rng r;
    fuzz_rng_init(&r, 11);
    for (int i = 0; i < 2000; i++) {
        sim_scenario_init(&s);
        cr_assert(fuzz_mutate_scenario(&s, FUZZ_MUT_FAULT_INSERT, &r));
        cr_assert_eq(s.cfg.n_faults, 1);
        seen[s.cfg.fault[0].kind]++;
    }
    for (uint32_t k = 1; k < SIM_F_KIND_COUNT; k++) cr_assert_gt(seen[k], 0, "fault kind %s never inserted", sim_fault_name(k));
}

/* fuzz_mutate's output: fits, decodes valid, is canonical unless the byte
 * fallback ran, and is a function of (input, max_size, seed). */
Test(mutator, fuzz_mutate_outputs_fit_decode_and_repeat) {
    uint32_t kinds[FUZZ_MUT_COUNT] = {0}, fallbacks = 0;
    fuzz_rng r;
    fuzz_rng_init(&r, 3);
    size_t size = 0;
    for (uint32_t i = 0; i < 6000; i++) {
        if (i % 50 == 0) size = fuzz_rng_below(&r, 200); /* a fresh random input now and then */
        for (size_t k = 0; i % 50 == 0 && k < size; k++) in[k] = (uint8_t)fuzz_rng_next(&r);
        size_t max = i % 7 == 0 ? 64u + fuzz_rng_below(&r, 64) : 4096u;
        if (size > max) size = max;
        uint32_t seed = (uint32_t)fuzz_rng_next(&r);
        fuzz_mut_report rep;
        memcpy(out, in, size);
        size_t n = fuzz_mutate(&mut, out, size, max, seed, NULL, &rep);
        cr_assert_leq(n, max);
        memcpy(out2, in, size);
        cr_assert_eq(fuzz_mutate(&mut, out2, size, max, seed, NULL, NULL), n, "not deterministic");
        cr_assert(!memcmp(out, out2, n), "not deterministic");
        sim_scenario_from_bytes(out, n, &s);
        cr_assert(sim_scenario_valid(&s));
        if (rep.bytes) fallbacks++;
        else {
            cr_assert_gt(rep.n, 0);
            for (uint32_t k = 0; k < rep.n && k < 4; k++) kinds[rep.kind[k]]++;
            size_t m = 0;
            cr_assert_eq(sim_scenario_to_bytes(&s, out2, sizeof out2, &m), KV_OK);
            cr_assert_eq(m, n, "structured output is not canonical");
            cr_assert(!memcmp(out, out2, n), "structured output is not canonical");
        }
        memcpy(in, out, n); /* chain, as a fuzzer does */
        size = n;
    }
    for (uint32_t m = 0; m < FUZZ_MUT_COUNT; m++) cr_assert_gt(kinds[m], 0, "%s never chosen", fuzz_mut_name((fuzz_mut)m));
    cr_assert_gt(fallbacks, 6000 / 20, "byte fallback too rare: %u", fallbacks);
    cr_assert_lt(fallbacks, 6000 / 4, "byte fallback too common: %u", fallbacks);
}

static size_t calls;
static size_t count_bytes(uint8_t *data, size_t size, size_t max_size) {
    (void)data;
    (void)max_size;
    calls++;
    return size;
}

Test(mutator, byte_fallback_is_the_given_mutator_and_tiny_limits_use_it) {
    sim_scenario_init(&s);
    size_t n = 0;
    cr_assert_eq(sim_scenario_to_bytes(&s, in, sizeof in, &n), KV_OK);
    calls = 0;
    for (uint32_t seed = 0; seed < 200; seed++) {
        memcpy(out, in, n);
        fuzz_mut_report rep;
        size_t got = fuzz_mutate(&mut, out, n, 4096, seed, count_bytes, &rep);
        if (rep.bytes) cr_assert_eq(got, n);
    }
    cr_assert_gt(calls, 0);
    cr_assert_lt(calls, 200);
    calls = 0;
    memcpy(out, in, 40); /* a limit below the smallest scenario: bytes only */
    fuzz_mut_report rep;
    cr_assert_eq(fuzz_mutate(&mut, out, 40, 40, 5, count_bytes, &rep), 40);
    cr_assert(rep.bytes);
    cr_assert_eq(calls, 1);
}

Test(mutator, fit_drops_choice_then_faults_then_requests) {
    fuzz_rng r;
    fuzz_rng_init(&r, 5);
    sim_scenario_init(&s);
    for (int i = 0; i < 10; i++) fuzz_mutate_scenario(&s, FUZZ_MUT_REQ_INSERT, &r);
    for (int i = 0; i < 10; i++) fuzz_mutate_scenario(&s, FUZZ_MUT_FAULT_INSERT, &r);
    s.cfg.choice_len = 100;
    assert_canonical(&s);
    size_t full = fuzz_encoded_size(&s);
    sim_scenario_copy(&base, &s);
    fuzz_fit(&s, full - 60);
    cr_assert_eq(s.cfg.choice_len, 40);
    cr_assert_eq(s.cfg.n_faults, 10);
    fuzz_fit(&s, full - 100 - 13 * 3);
    cr_assert_eq(s.cfg.choice_len, 0);
    cr_assert_eq(s.cfg.n_faults, 7);
    for (uint32_t i = 0; i < 7; i++) cr_assert(fault_eq(&s.cfg.fault[i], &base.cfg.fault[i]), "fit kept other faults than the first");
    fuzz_fit(&s, fuzz_encoded_size(&s) - 7 * 13 - 1);
    cr_assert_eq(s.cfg.n_faults, 0);
    cr_assert_eq(s.cfg.n_reqs, 9);
    cr_assert_leq(fuzz_encoded_size(&s), full - 100 - 10 * 13 - 1);
    assert_canonical(&s);
}

Test(mutator, splice_keeps_a_prefix_of_one_plan_and_a_suffix_of_the_other) {
    static sim_scenario a, b;
    fuzz_rng r;
    fuzz_rng_init(&r, 9);
    for (uint64_t i = 0; i < 300; i++) {
        make_scenario(&a, 2 * i);
        make_scenario(&b, 2 * i + 1);
        fuzz_splice_faults(&s, &a, &b, &r);
        assert_canonical(&s);
        const sim_world_cfg *c = &s.cfg;
        uint32_t p = 0; /* longest prefix taken from a */
        while (p < c->n_faults && p < a.cfg.n_faults && fault_eq(&c->fault[p], &a.cfg.fault[p])) p++;
        bool found = false; /* some prefix length of a, the rest a suffix of b */
        for (uint32_t i0 = 0; i0 <= p && !found; i0++) {
            uint32_t rest = c->n_faults - i0;
            if (rest > b.cfg.n_faults) continue;
            uint32_t j = b.cfg.n_faults - rest;
            bool same = true;
            for (uint32_t k = 0; k < rest && same; k++) same = fault_eq(&c->fault[i0 + k], &b.cfg.fault[j + k]);
            found = same;
        }
        cr_assert(found || c->n_faults == SIM_FAULTS_MAX, "splice %llu is not prefix(a) + suffix(b)", (unsigned long long)i);
        /* everything but the fault plan is a's */
        cr_assert(reqs_equal(&a.cfg, c) && topology_equal(&a.cfg, c) && groups_equal(&a.cfg, c));
        cr_assert_eq(a.cfg.seed, c->seed);
    }
}

Test(mutator, crossover_outputs_fit_and_decode) {
    static sim_scenario a, b;
    static uint8_t ea[SIM_SCENARIO_BYTES_MAX], eb[SIM_SCENARIO_BYTES_MAX];
    for (uint64_t i = 0; i < 300; i++) {
        make_scenario(&a, 3 * i);
        make_scenario(&b, 3 * i + 1);
        size_t na = 0, nb = 0;
        cr_assert_eq(sim_scenario_to_bytes(&a, ea, sizeof ea, &na), KV_OK);
        cr_assert_eq(sim_scenario_to_bytes(&b, eb, sizeof eb, &nb), KV_OK);
        size_t max = i % 3 ? 4096u : 80u + (size_t)(i % 200);
        size_t n = fuzz_crossover(&mut, ea, na, eb, nb, out, max, (uint32_t)i);
        cr_assert_leq(n, max);
        cr_assert_gt(n, 0);
        sim_scenario_from_bytes(out, n, &s);
        assert_canonical(&s);
        size_t n2 = fuzz_crossover(&mut, ea, na, eb, nb, out2, max, (uint32_t)i);
        cr_assert(n2 == n && !memcmp(out, out2, n), "crossover not deterministic");
    }
}

/* The soft request cap: structured mutations of a scenario at
 * FUZZ_REQS_SOFT requests never leave it above the cap (an insert drawn
 * there deletes instead), crossovers stop at the cap unless the first
 * parent is already larger (then at its size), and below the cap chained
 * mutations still grow a scenario up to it. */
static uint32_t with_reqs(sim_scenario *x, uint32_t n, uint64_t seed, uint8_t *enc) {
    fuzz_rng r;
    fuzz_rng_init(&r, seed);
    sim_scenario_init(x);
    while (x->cfg.n_reqs < n) cr_assert(fuzz_mutate_scenario(x, FUZZ_MUT_REQ_INSERT, &r));
    size_t len = 0;
    cr_assert_eq(sim_scenario_to_bytes(x, enc, SIM_SCENARIO_BYTES_MAX, &len), KV_OK);
    return (uint32_t)len;
}

Test(mutator, requests_grow_to_the_soft_cap_and_no_further) {
    static sim_scenario a, b;
    static uint8_t ea[SIM_SCENARIO_BYTES_MAX], eb[SIM_SCENARIO_BYTES_MAX];
    uint32_t na = with_reqs(&a, FUZZ_REQS_SOFT, 1, ea), shrunk = 0, structured = 0;
    for (uint32_t seed = 0; seed < 3000; seed++) {
        memcpy(out, ea, na);
        fuzz_mut_report rep;
        size_t n = fuzz_mutate(&mut, out, na, 4096, seed, NULL, &rep);
        if (rep.bytes) continue;
        structured++;
        sim_scenario_from_bytes(out, n, &s);
        cr_assert_leq(s.cfg.n_reqs, FUZZ_REQS_SOFT, "seed %u grew the scenario to %u requests", seed, s.cfg.n_reqs);
        if (s.cfg.n_reqs < FUZZ_REQS_SOFT) shrunk++;
    }
    cr_assert_gt(structured, 2000);
    cr_assert_gt(shrunk, structured / 10, "drawn inserts do not delete: %u of %u", shrunk, structured);

    uint32_t nb = with_reqs(&b, FUZZ_REQS_SOFT, 2, eb);
    for (uint32_t seed = 0; seed < 500; seed++) {
        size_t n = fuzz_crossover(&mut, ea, na, eb, nb, out, 4096, seed);
        sim_scenario_from_bytes(out, n, &s);
        cr_assert_leq(s.cfg.n_reqs, FUZZ_REQS_SOFT);
    }
    na = with_reqs(&a, FUZZ_REQS_SOFT + 8u, 3, ea); /* a larger first parent keeps at most its size */
    uint32_t kept = 0;
    for (uint32_t seed = 0; seed < 500; seed++) {
        size_t n = fuzz_crossover(&mut, ea, na, eb, nb, out, 4096, seed);
        sim_scenario_from_bytes(out, n, &s);
        cr_assert_leq(s.cfg.n_reqs, FUZZ_REQS_SOFT + 8u);
        kept += s.cfg.n_reqs > FUZZ_REQS_SOFT;
    }
    cr_assert_gt(kept, 0);

    na = with_reqs(&a, 1, 4, ea); /* below the cap: chained mutations reach it */
    memcpy(in, ea, na);
    size_t size = na;
    uint32_t most = 0;
    for (uint32_t i = 0; i < 20000 && most < FUZZ_REQS_SOFT; i++) {
        size = fuzz_mutate(&mut, in, size, 4096, i, NULL, NULL);
        sim_scenario_from_bytes(in, size, &s);
        if (s.cfg.n_reqs > most) most = s.cfg.n_reqs;
    }
    cr_assert_geq(most, FUZZ_REQS_SOFT, "chained mutations grew to %u requests only", most);
}
