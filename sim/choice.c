/* sim/choice.c — choice stream: scenario bytes first, then xoshiro256**. */
#include "sim/choice.h"

#include "core/kv_data.h"

uint64_t sim_mix64(uint64_t x) { return kv_mix64(x); } /* one mixer for core and sim */

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t sim_choice_prng(sim_choice *c) {
    uint64_t *s = c->prng;
    uint64_t r = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return r;
}

void sim_choice_init(sim_choice *c, const uint8_t *bytes, size_t len, uint64_t seed) {
    c->bytes = bytes;
    c->len = bytes ? len : 0;
    c->pos = 0;
    c->draws = 0;
    uint64_t x = seed;
    for (int i = 0; i < 4; i++) {
        x = sim_mix64(x + (uint64_t)i);
        c->prng[i] = x | 1u;
    }
}

uint32_t sim_choice_below(sim_choice *c, uint32_t bound) {
    if (bound <= 1) return 0;
    c->draws++;
    if (c->pos < c->len) {
        /* One byte for small bounds, two for larger ones: a fuzzer's byte
         * flip maps to a nearby decision. */
        uint32_t v = c->bytes[c->pos++];
        if (bound > 256 && c->pos < c->len) v = (v << 8) | c->bytes[c->pos++];
        return v % bound;
    }
    return (uint32_t)(sim_choice_prng(c) % bound);
}
