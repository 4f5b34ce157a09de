/* fuzz/afl/kvconn_mutator.c — fuzz/mutator.c as an AFL++ custom mutator
 * (AFL_CUSTOM_MUTATOR_LIBRARY=libkvconn_afl_mutator.so), the same
 * structure-aware mutations and cross-over libFuzzer's fuzz_scenario gets
 * through LLVMFuzzerCustomMutator / LLVMFuzzerCustomCrossOver.
 *
 * afl-fuzz calls afl_custom_fuzz once per custom-stage execution with the
 * queue entry in buf and, when it has one, a second queue entry in add_buf:
 * one call in four with add_buf is a cross-over (d2's fault plan, requests
 * or topology into d1), the rest mutate. The output lives in the mutator's
 * own buffer, as the API allows. Every output decodes to the scenario the
 * mutator built (canonical encoding), so AFL++'s havoc stage, which still
 * runs after this one unless AFL_CUSTOM_MUTATOR_ONLY is set, keeps the byte
 * mutations.
 *
 * Built without AFL++ instrumentation (it is loaded into afl-fuzz, not into
 * the target): see CMakeLists.txt. KVCONN_MUTATOR_STATS=FILE makes deinit
 * write "calls N mutations N crossovers N bytes N" there (tests). */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz/mutator.h"

/* afl-fuzz's state is opaque here; the API passes it to init only. */
typedef struct afl_state afl_state_t;

typedef struct kvconn_afl {
    fuzz_mutator m;
    fuzz_rng rng;
    uint8_t *out;
    size_t out_cap;
    uint64_t calls, mutations, crossovers, bytes;
} kvconn_afl;

void *afl_custom_init(afl_state_t *afl, unsigned int seed);
size_t afl_custom_fuzz(void *data, uint8_t *buf, size_t buf_size, uint8_t **out_buf, uint8_t *add_buf,
                       size_t add_buf_size, size_t max_size);
const char *afl_custom_describe(void *data, size_t max_description_len);
void afl_custom_deinit(void *data);

void *afl_custom_init(afl_state_t *afl, unsigned int seed) {
    (void)afl;
    kvconn_afl *k = calloc(1, sizeof *k);
    if (!k) return NULL;
    fuzz_rng_init(&k->rng, seed);
    return k;
}

static uint8_t *room(kvconn_afl *k, size_t n) {
    if (n > k->out_cap) {
        uint8_t *p = realloc(k->out, n);
        if (!p) return NULL;
        k->out = p;
        k->out_cap = n;
    }
    return k->out;
}

size_t afl_custom_fuzz(void *data, uint8_t *buf, size_t buf_size, uint8_t **out_buf, uint8_t *add_buf,
                       size_t add_buf_size, size_t max_size) {
    kvconn_afl *k = data;
    uint32_t seed = (uint32_t)fuzz_rng_next(&k->rng);
    uint8_t *out = room(k, max_size > buf_size ? max_size : buf_size);
    k->calls++;
    if (!out || !max_size) { /* nothing to write into: hand the input back */
        *out_buf = buf;
        return buf_size < max_size ? buf_size : max_size;
    }
    size_t n;
    if (add_buf && add_buf_size && fuzz_rng_below(&k->rng, 4) == 0) {
        n = fuzz_crossover(&k->m, buf, buf_size, add_buf, add_buf_size, out, max_size, seed);
        k->crossovers++;
    } else {
        size_t have = buf_size < max_size ? buf_size : max_size;
        memcpy(out, buf, have);
        fuzz_mut_report rep;
        n = fuzz_mutate(&k->m, out, have, max_size, seed, NULL, &rep);
        if (rep.bytes) k->bytes++;
        else k->mutations++;
    }
    *out_buf = out;
    return n;
}

const char *afl_custom_describe(void *data, size_t max_description_len) {
    (void)data;
    return max_description_len >= 6 ? "kvconn" : "";
}

void afl_custom_deinit(void *data) {
    kvconn_afl *k = data;
    if (!k) return;
    const char *path = getenv("KVCONN_MUTATOR_STATS");
    FILE *f = path ? fopen(path, "w") : NULL;
    if (f) {
        fprintf(f, "calls %llu mutations %llu crossovers %llu bytes %llu\n", (unsigned long long)k->calls,
                (unsigned long long)k->mutations, (unsigned long long)k->crossovers, (unsigned long long)k->bytes);
        fclose(f);
    }
    free(k->out);
    free(k);
}
