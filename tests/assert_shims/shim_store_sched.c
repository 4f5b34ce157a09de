/* tests/assert_shims/shim_store_sched.c — core/store_sched.c with its
 * private struct in reach (shims.h). */
#include "core/store_sched.c"

#include "tests/assert_shims/shims.h"

/* Request id's save tracker says it saved half a block. False while the
 * request has no tracker. */
bool shim_store_sched_misalign_tracker(kv_engine *e, uint32_t id) {
    store_sched *c = e->conn.self;
    for (uint32_t i = 0; i < e->cfg.reqs_max; i++)
        if (c->req[i].used && c->req[i].id == id && c->req[i].tracker.used) {
            c->req[i].tracker.num_saved += e->cfg.block_size / 2u;
            return true;
        }
    return false;
}
