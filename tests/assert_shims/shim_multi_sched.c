/* tests/assert_shims/shim_multi_sched.c — core/multi_sched.c with its
 * private struct in reach (shims.h). */
#include "core/multi_sched.c"

#include "tests/assert_shims/shims.h"

/* A request's choice of a child that had no hit. False while none is
 * recorded. */
bool shim_multi_sched_choice_without_hit(kv_engine *e) {
    multi_sched *c = e->conn.self;
    for (uint32_t i = 0; i < KV_ENGINE_REQS_MAX; i++)
        if (c->req[i].used) {
            c->req[i].chosen = 0;
            c->req[i].had_hit = 0;
            return true;
        }
    return false;
}
