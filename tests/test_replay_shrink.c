/* tests/test_replay_shrink.c — kvsim shrink's delta debugging: the repro
 * of each seed bug (the first seed a sweep finds, as `kvsim sweep --bug X
 * --stop` prints it) shrinks to at most 10 directives, still violates the
 * same signature with the switch on and runs clean with it off, survives
 * the trip through .kvs text bit for bit, and shrinking is deterministic.
 *
 * Add a bug to the table when its switch works. */
#include <criterion/criterion.h>
#include <string.h>

#include "replay/shrink.h"
#include "sim/gen.h"
#include "sim/sweep.h"

typedef struct seed_bug {
    const char *bug;    /* kv_bug_name */
    const char *inv;    /* what the checker reports */
    uint64_t max_seeds; /* where a sweep finds it */
} seed_bug;

static const seed_bug bugs[] = {
    {"err_early_return", "INV-LIVE", 2000},          {"recv_map_race", "INV-OWNER", 2000},
    {"empty_pull_completion", "SCHED-ASSERT", 4000}, {"store_empty_block_table", "INV-SAVE", 4000},
    {"store_rejected_load_save", "INV-SAVE", 4000},
};

static sim_world *W;
static void setup(void) {
    cr_assert_eq(sim_world_new(&W), KV_OK);
}
static void teardown(void) {
    sim_world_free(W);
}
TestSuite(replay_shrink, .init = setup, .fini = teardown, .timeout = 300);

/* The first seed in 1..max whose generated scenario violates with bit. */
static uint64_t first_seed(uint32_t bit, uint64_t max) {
    static sim_sweep s;
    sim_sweep_init(&s);
    cr_assert_eq(sim_sweep_run(W, 1, max, bit, true, 0, 1, NULL, NULL, &s), KV_OK);
    cr_assert_neq(s.first_violation_seed, UINT64_MAX, "%s not found in %llu seeds",
                  kv_bug_name(bit), (unsigned long long)max);
    return s.first_violation_seed;
}

static void shrink_one(const seed_bug *b) {
    uint32_t bit = kv_bug_parse(b->bug);
    cr_assert_neq(bit, 0, "unknown bug %s", b->bug);
    uint64_t seed = first_seed(bit, b->max_seeds);
    static sim_scenario in, out, again, parsed;
    sim_scenario_init(&in);
    sim_gen(seed, bit, &in.cfg); /* kvsim gen --seed S --bug X */
    in.cfg.choice = in.choice;
    cr_assert(sim_scenario_valid(&in));
    replay_shrink_opts o = {.keep_blame = true};
    replay_shrink_stats st, st2;
    sim_result r, r2;
    cr_assert_eq(replay_shrink(W, &in, &o, &out, &r, &st), KV_OK, "%s seed %llu", b->bug,
                 (unsigned long long)seed);
    cr_log_info("%s seed %llu: directives %u -> %u in %u runs", b->bug, (unsigned long long)seed,
                st.directives_before, st.directives_after, st.runs);
    cr_assert_leq(st.directives_after, 10, "%s seed %llu: %u -> %u directives", b->bug,
                  (unsigned long long)seed, st.directives_before, st.directives_after);
    cr_assert_eq(st.directives_after, sim_scenario_directives(&out));
    cr_assert(st.blame,
              "%s: the generated repro runs clean without its switch, so shrink must keep that",
              b->bug);
    cr_assert(!st.budget_hit);
    cr_assert(r.violated);
    cr_assert_str_eq(kv_inv_name(r.inv), b->inv, "%s shrunk to %s: %s", b->bug, kv_inv_name(r.inv),
                     r.detail);

    /* the result alone reproduces it, and only with the switch */
    sim_result check;
    cr_assert_eq(sim_world_run(W, &out.cfg, NULL, &check), KV_OK);
    char sig[REPLAY_SIG_MAX];
    replay_signature(&check, sig, sizeof sig);
    cr_assert_str_eq(sig, st.signature);
    cr_assert_eq(check.trace_hash, r.trace_hash);
    sim_scenario_copy(&again, &out);
    again.cfg.bugs = 0;
    cr_assert_eq(sim_world_run(W, &again.cfg, NULL, &check), KV_OK);
    cr_assert(!check.violated, "%s: the shrunk scenario violates without the switch: %s", b->bug,
              check.detail);

    /* through .kvs text, bit for bit */
    static char text[SIM_SCENARIO_TEXT_MAX];
    size_t n = 0;
    cr_assert_eq(sim_scenario_to_text(&out, text, sizeof text, &n), KV_OK);
    cr_assert_eq(sim_scenario_parse(text, n, "shrunk.kvs", &parsed, NULL), KV_OK);
    cr_assert_eq(sim_world_run(W, &parsed.cfg, NULL, &check), KV_OK);
    cr_assert_eq(check.trace_hash, r.trace_hash,
                 "%s: the .kvs text replays with another trace hash", b->bug);

    /* deterministic */
    cr_assert_eq(replay_shrink(W, &in, &o, &again, &r2, &st2), KV_OK);
    cr_assert(sim_scenario_equal(&again, &out), "%s: a second shrink gave another scenario",
              b->bug);
    cr_assert_eq(st2.runs, st.runs);
}

Test(replay_shrink, each_seed_bug_repro_shrinks_to_at_most_ten_directives) {
    for (size_t i = 0; i < sizeof bugs / sizeof bugs[0]; i++)
        shrink_one(&bugs[i]);
}

Test(replay_shrink, a_clean_scenario_has_nothing_to_shrink) {
    static sim_scenario in, out;
    sim_scenario_init(&in);
    sim_gen(5, 0, &in.cfg);
    in.cfg.choice = in.choice;
    replay_shrink_opts o = {0};
    replay_shrink_stats st;
    sim_result r;
    cr_assert_eq(replay_shrink(W, &in, &o, &out, &r, &st), KV_ENOENT);
}

Test(replay_shrink, the_run_budget_is_kept) {
    uint32_t bit = kv_bug_parse("err_early_return");
    static sim_scenario in, out;
    sim_scenario_init(&in);
    sim_gen(first_seed(bit, 2000), bit, &in.cfg);
    in.cfg.choice = in.choice;
    replay_shrink_opts o = {.max_runs = 5};
    replay_shrink_stats st;
    sim_result r;
    cr_assert_eq(replay_shrink(W, &in, &o, &out, &r, &st), KV_OK);
    cr_assert_leq(st.runs, 5);
    cr_assert(st.budget_hit);
    cr_assert(r.violated, "what it returns still violates");
}

/* A fuzz input carries a choice stream; shrink cuts it too. */
Test(replay_shrink, the_choice_stream_is_cut) {
    uint32_t bit = kv_bug_parse("recv_map_race");
    static sim_scenario in, out;
    sim_scenario_init(&in);
    sim_gen(first_seed(bit, 2000), bit, &in.cfg);
    in.cfg.choice = in.choice;
    for (uint32_t i = 0; i < 512; i++)
        in.choice[i] = (uint8_t)(i * 131u + 7u);
    in.cfg.choice_len = 512;
    sim_result r;
    cr_assert_eq(sim_world_run(W, &in.cfg, NULL, &r), KV_OK);
    if (!r.violated)
        cr_skip_test("these choice bytes hide the race");
    replay_shrink_opts o = {.keep_blame = true};
    replay_shrink_stats st;
    cr_assert_eq(replay_shrink(W, &in, &o, &out, &r, &st), KV_OK);
    cr_assert_lt(st.choice_after, 512);
    cr_assert_leq(st.directives_after, 10);
}
