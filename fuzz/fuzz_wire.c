/* fuzz/fuzz_wire.c — the control-message codec never reads or writes out of
 * bounds (ASan), and decode -> encode -> decode is stable: an accepted
 * message re-encodes to exactly its input bytes. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kvconn/wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static kv_wire_msg m, again;
    static uint8_t buf[KV_WIRE_MAX + KV_WIRE_HDR_BYTES];
    if (kv_wire_decode(data, size, &m) != KV_OK) return 0;
    size_t n = 0;
    if (kv_wire_encode(&m, buf, sizeof buf, &n) != KV_OK) abort();
    if (n != size || memcmp(buf, data, n)) abort();
    if (kv_wire_decode(buf, n, &again) != KV_OK) abort();
    return 0;
}
