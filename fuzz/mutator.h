/* fuzz/mutator.h — structure-aware mutation of binary scenarios, for
 * fuzz_scenario's LLVMFuzzerCustomMutator and LLVMFuzzerCustomCrossOver.
 *
 * A byte mutation of a binary scenario mostly lands in the choice stream or
 * shifts every later field; a scenario mutation changes one thing a person
 * would change: add a request, move a fault 100 us later, make D use TP 4.
 * fuzz_mutate decodes the input with the total decoder, applies one (or a
 * few) of the mutations below, and writes the canonical encoding back, so
 * every output decodes to exactly the scenario that was built. One call in
 * ten (and every call whose result would not fit max_size bytes even after
 * trimming) falls back to a byte mutation instead.
 *
 * Deterministic: the same input, max_size and seed give the same output.
 * Not reentrant on one fuzz_mutator (its scratch scenarios); libFuzzer
 * calls the mutator from one thread. */
#ifndef KVCONN_FUZZ_MUTATOR_H
#define KVCONN_FUZZ_MUTATOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sim/scenario.h"

typedef enum fuzz_mut {
    FUZZ_MUT_REQ_INSERT,    /* a new request at a random index (n_reqs + 1) */
    FUZZ_MUT_REQ_DELETE,    /* one request removed (n_reqs - 1) */
    FUZZ_MUT_REQ_CHANGE,    /* one field of one request */
    FUZZ_MUT_FAULT_INSERT,  /* a new fault, timed near a request (n_faults + 1) */
    FUZZ_MUT_FAULT_DELETE,  /* one fault removed (n_faults - 1) */
    FUZZ_MUT_FAULT_RETIME,  /* one fault's at_ns, nudged or re-anchored */
    FUZZ_MUT_FAULT_CHANGE,  /* one fault's kind (with a fitting target/arg), target or arg */
    FUZZ_MUT_TOPOLOGY,      /* one knob: n_p, n_d, tp_p, tp_d, block, pools, policy, prefix
                             * cache, P or D connector kind, store capacity */
    FUZZ_MUT_GROUPS,        /* n_groups, or one group's kind or sliding window */
    FUZZ_MUT_TIMEOUTS,      /* abort, receive timeout or liveness bound */
    FUZZ_MUT_CHOICE,        /* the choice stream: set, insert, erase or append bytes */
    FUZZ_MUT_SEED,          /* the scenario seed (token contents, PRNG fallback) */
    FUZZ_MUT_COUNT
} fuzz_mut;

const char *fuzz_mut_name(fuzz_mut m);

/* Requests the structure-aware mutations grow a scenario to: at this many,
 * a drawn insert becomes a delete, and a request splice stops here (one
 * already larger keeps its size). Larger scenarios still come from seeds
 * and byte mutations. An input's cost grows with its requests; with the
 * cap the fuzzer ran faster and covered as many edges (README, fuzzing). */
#define FUZZ_REQS_SOFT 32u

/* splitmix64 stream; the only randomness the mutator uses. */
typedef struct fuzz_rng {
    uint64_t s;
} fuzz_rng;

void fuzz_rng_init(fuzz_rng *r, uint64_t seed);
uint64_t fuzz_rng_next(fuzz_rng *r);
/* Uniform in 0..n-1 (0 when n is 0). */
uint32_t fuzz_rng_below(fuzz_rng *r, uint32_t n);

/* Applies mutation m to a valid scenario s; s stays valid (clamped). Returns
 * false and leaves s unchanged when m does not apply (deleting from an empty
 * list, inserting into a full one); true means the field m names changed. */
bool fuzz_mutate_scenario(sim_scenario *s, fuzz_mut m, fuzz_rng *r);

/* dst := a with its fault plan replaced by a prefix of a's faults followed
 * by a suffix of b's (cut points drawn from r, at most SIM_FAULTS_MAX in
 * all). dst may be a; b must not be dst. */
void fuzz_splice_faults(sim_scenario *dst, const sim_scenario *a, const sim_scenario *b, fuzz_rng *r);

/* Canonical encoding size of a valid scenario (what sim_scenario_to_bytes
 * writes). */
size_t fuzz_encoded_size(const sim_scenario *s);
/* Drops choice bytes, then the last faults, then the last requests until
 * s encodes in at most max_size bytes (or nothing is left to drop). */
void fuzz_fit(sim_scenario *s, size_t max_size);

/* A byte-level mutator (libFuzzer's LLVMFuzzerMutate): mutates data[size]
 * in place, returns the new size (<= max_size). */
typedef size_t (*fuzz_byte_mutator)(uint8_t *data, size_t size, size_t max_size);

/* Scratch of fuzz_mutate / fuzz_crossover (two scenarios, ~30 KB). */
typedef struct fuzz_mutator {
    sim_scenario a, b;
} fuzz_mutator;

/* What the last call did (for tests and statistics). */
typedef struct fuzz_mut_report {
    bool bytes;               /* fell back to the byte mutator */
    uint32_t n;               /* scenario mutations applied */
    fuzz_mut kind[4];         /* the first of them, in order */
} fuzz_mut_report;

/* libFuzzer's custom-mutator contract: data holds size bytes and has room
 * for max_size; returns the new size. bytes may be NULL (a small built-in
 * byte mutator is used). report may be NULL. */
size_t fuzz_mutate(fuzz_mutator *m, uint8_t *data, size_t size, size_t max_size, uint32_t seed,
                   fuzz_byte_mutator bytes, fuzz_mut_report *report);

/* libFuzzer's custom cross-over: out := the canonical encoding of d1's
 * scenario with d2's fault plan spliced in (fuzz_splice_faults), or with
 * d2's requests or topology taken over; returns its size (<= max_out). */
size_t fuzz_crossover(fuzz_mutator *m, const uint8_t *d1, size_t s1, const uint8_t *d2, size_t s2,
                      uint8_t *out, size_t max_out, uint32_t seed);

#endif
