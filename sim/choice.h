/* sim/choice.h — the choice stream: every decision the simulator makes
 * (which runnable actor steps next, a message's delay, a fault's target)
 * reads from here. Bytes come from the scenario first, so a fuzzer steers
 * them; once they are exhausted a PRNG seeded from the scenario takes over.
 * One seed, sub-seeded per consumer: no other source of randomness exists. */
#ifndef KVCONN_SIM_CHOICE_H
#define KVCONN_SIM_CHOICE_H

#include <stddef.h>
#include <stdint.h>

typedef struct sim_choice {
    const uint8_t *bytes; /* borrowed scenario bytes; may be NULL */
    size_t len;
    size_t pos;           /* next byte to read */
    uint64_t prng[4];     /* xoshiro256** state once bytes run out */
    uint64_t draws;       /* decisions made, for the trace */
} sim_choice;

void sim_choice_init(sim_choice *c, const uint8_t *bytes, size_t len, uint64_t seed);
/* Uniform-ish value in [0, bound); bound 0 or 1 returns 0 without a draw. */
uint32_t sim_choice_below(sim_choice *c, uint32_t bound);
/* A raw 64-bit value from the PRNG only (never from stream bytes). */
uint64_t sim_choice_prng(sim_choice *c);
/* splitmix64: derives sub-seeds; also the hash mixer used in traces. */
uint64_t sim_mix64(uint64_t x);

#endif
