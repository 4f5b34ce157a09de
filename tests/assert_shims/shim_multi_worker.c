/* tests/assert_shims/shim_multi_worker.c — core/multi_worker.c with its
 * private struct in reach (shims.h). */
#include "core/multi_worker.c"

#include "tests/assert_shims/shims.h"

/* Two live holds for one request. */
void shim_multi_worker_duplicate_hold(kv_worker *w) {
    multi_worker *c = w->conn.self;
    uint32_t made = 0;
    for (uint32_t i = 0; i < KV_ENGINE_REQS_MAX && made < 2; i++)
        if (!c->hold[i].n) {
            c->hold[i] = (kv_multi_hold){.id = 4242, .n = 1};
            made++;
        }
}
