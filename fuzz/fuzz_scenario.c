/* fuzz/fuzz_scenario.c — bytes -> scenario (the total binary decoder) ->
 * simulator run; abort() with the violation and the scenario as .kvs when an
 * invariant breaks, from a stack frame named after the invariant.
 * KVCONN_BUG=<switch>[,...] fuzzes with seed bugs switched on. libFuzzer entry point, with a structure-aware custom mutator and
 * cross-over (fuzz/mutator.h); AFL++ builds the same file (its driver runs
 * LLVMFuzzerTestOneInput in persistent mode and ignores the mutator).
 *
 * No state survives an input: the world rewinds its arena per run, the
 * scenario is decoded afresh, and the only statics are the world itself,
 * the bug mask read once from the environment, scratch buffers and (with
 * KVCONN_DB) the findings database, touched only on a finding. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "fuzz/fuzz_common.h"
#include "fuzz/mutator.h"
#include "replay/fuzz_hook.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static sim_world *w;
static uint32_t bugs;

/* One world for the process: sim_world_run rewinds it, and no run's path
 * depends on the runs before it (AFL++ stability 100%). */
int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    if (w) return 0;
    if (sim_world_new(&w) != KV_OK) abort();
    bugs = fuzz_bugs_from_env();
    return 0;
}

/* One crash frame per invariant: crash deduplication (ClusterFuzzLite,
 * OSS-Fuzz, AFL++'s triage) keys on the top frames of the stack, so each
 * invariant aborts from a function of its own and findings of different
 * invariants are never folded into one. noinline keeps each frame. */
#define FUZZ_VIOLATION_FRAME(name) \
    __attribute__((noinline)) static void name(void) { abort(); }
FUZZ_VIOLATION_FRAME(violation_inv_conserve)
FUZZ_VIOLATION_FRAME(violation_inv_leak)
FUZZ_VIOLATION_FRAME(violation_inv_stray)
FUZZ_VIOLATION_FRAME(violation_inv_live)
FUZZ_VIOLATION_FRAME(violation_inv_owner)
FUZZ_VIOLATION_FRAME(violation_inv_save)
FUZZ_VIOLATION_FRAME(violation_inv_data)
FUZZ_VIOLATION_FRAME(violation_sched_assert)
FUZZ_VIOLATION_FRAME(violation_inv_outcome)
FUZZ_VIOLATION_FRAME(violation_inv_hold)
FUZZ_VIOLATION_FRAME(violation_inv_assert)
FUZZ_VIOLATION_FRAME(violation_inv_cache)
FUZZ_VIOLATION_FRAME(violation_inv_grant)

__attribute__((noreturn)) static void crash_as(kv_inv inv) {
    static void (*const frame[KV_INV_COUNT])(void) = {
        [KV_INV_CONSERVE] = violation_inv_conserve, [KV_INV_LEAK] = violation_inv_leak,
        [KV_INV_STRAY] = violation_inv_stray,       [KV_INV_LIVE] = violation_inv_live,
        [KV_INV_OWNER] = violation_inv_owner,       [KV_INV_SAVE] = violation_inv_save,
        [KV_INV_DATA] = violation_inv_data,         [KV_INV_SCHED_ASSERT] = violation_sched_assert,
        [KV_INV_OUTCOME] = violation_inv_outcome,   [KV_INV_HOLD] = violation_inv_hold,
        [KV_INV_ASSERT] = violation_inv_assert,     [KV_INV_CACHE] = violation_inv_cache,
        [KV_INV_GRANT] = violation_inv_grant,
    };
    _Static_assert(KV_INV_COUNT == 13, "a crash frame for each invariant");
    if ((unsigned)inv < KV_INV_COUNT && frame[inv]) frame[inv]();
    abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static sim_scenario sc;
    if (!w) LLVMFuzzerInitialize(NULL, NULL); /* a driver that skips the hook */
    sim_scenario_from_bytes(data, size, &sc);
    fuzz_prepare(&sc.cfg, bugs);
    sim_result r;
    if (sim_world_run(w, &sc.cfg, NULL, &r) != KV_OK || !r.violated) return 0;
    fprintf(stderr, "VIOLATION %s at event %llu, t=%llu ns, actor %s, request %d: %s\n", kv_inv_name(r.inv),
            (unsigned long long)r.event, (unsigned long long)r.at_ns, r.actor_name, (int)r.req, r.detail);
    replay_fuzz_record("fuzz_scenario", data, size, &sc.cfg, &r); /* KVCONN_DB=FILE: into the findings database */
    static char text[SIM_SCENARIO_TEXT_MAX];
    size_t n = 0;
    sc.cfg.bugs = 0; /* the switch is the environment's, not the scenario's */
    if (sim_scenario_to_text(&sc, text, sizeof text, &n) == KV_OK) fwrite(text, 1, n, stderr);
    else fputs("# (the prepared scenario is outside the .kvs ranges: kvsim replay --fuzz CRASH-FILE)\n", stderr);
    crash_as(r.inv);
}

/* ---- structure-aware mutation (libFuzzer only) ------------------------------------ */

size_t LLVMFuzzerMutate(uint8_t *data, size_t size, size_t max_size) __attribute__((weak));
size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max_size, unsigned int seed);
size_t LLVMFuzzerCustomCrossOver(const uint8_t *d1, size_t s1, const uint8_t *d2, size_t s2, uint8_t *out,
                                 size_t max_out, unsigned int seed);

static fuzz_mutator mutator;

/* libFuzzer's own byte mutations (with its dictionary and the comparison
 * operands it saw) are the fallback; a driver without them (AFL++'s) never
 * calls this file's mutator anyway. */
size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max_size, unsigned int seed) {
    return fuzz_mutate(&mutator, data, size, max_size, seed, LLVMFuzzerMutate, NULL);
}

size_t LLVMFuzzerCustomCrossOver(const uint8_t *d1, size_t s1, const uint8_t *d2, size_t s2, uint8_t *out,
                                 size_t max_out, unsigned int seed) {
    return fuzz_crossover(&mutator, d1, s1, d2, s2, out, max_out, seed);
}
