/* fuzz/fuzz_scenario_text.c — the .kvs parser never crashes, and whatever
 * it accepts round-trips: to_text(parse(x)) parses back to an equal
 * scenario and prints the same text again. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sim/scenario.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static sim_scenario a, b;
    static char t1[SIM_SCENARIO_TEXT_MAX], t2[SIM_SCENARIO_TEXT_MAX];
    sim_parse_error err;
    if (sim_scenario_parse((const char *)data, size, "fuzz.kvs", &a, &err) != KV_OK) {
        if (err.line == 0 && size) abort(); /* a parse error always names a line */
        return 0;
    }
    size_t n1 = 0, n2 = 0;
    if (sim_scenario_to_text(&a, t1, sizeof t1, &n1) != KV_OK) abort();
    if (sim_scenario_parse(t1, n1, "round.kvs", &b, &err) != KV_OK) abort();
    if (!sim_scenario_equal(&a, &b)) abort();
    if (sim_scenario_to_text(&b, t2, sizeof t2, &n2) != KV_OK || n1 != n2 || memcmp(t1, t2, n1)) abort();
    return 0;
}
