/* tests/assert_shims/shim_store_worker.c — core/store_worker.c with its
 * private struct in reach (shims.h). */
#include "core/store_worker.c"

#include "tests/assert_shims/shims.h"

kv_store_sender *shim_store_sender(const kv_worker *w) { return ((const store_worker *)w->conn.self)->sender; }
kv_store_receiver *shim_store_receiver(const kv_worker *w) { return ((const store_worker *)w->conn.self)->receiver; }
kv_store_lookup *shim_store_lookup(const kv_worker *w) { return ((const store_worker *)w->conn.self)->lookup; }

/* A second pin for a request that has one. False while none is pinned. */
bool shim_store_worker_duplicate_pin(kv_worker *w) {
    store_worker *c = w->conn.self;
    for (uint32_t i = 0; i < KV_ENGINE_REQS_MAX; i++) {
        if (!c->pin[i].used) continue;
        for (uint32_t j = 0; j < KV_ENGINE_REQS_MAX; j++)
            if (!c->pin[j].used) {
                c->pin[j] = c->pin[i];
                return true;
            }
    }
    return false;
}

/* Pins the rank's store worker holds now. */
uint32_t shim_store_worker_pins(const kv_worker *w) {
    const store_worker *c = w->conn.self;
    uint32_t n = 0;
    for (uint32_t i = 0; i < KV_ENGINE_REQS_MAX; i++) n += c->pin[i].used;
    return n;
}
