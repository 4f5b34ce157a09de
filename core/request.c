/* core/request.c — the request status state machine of the engine model
 * (vLLM v1 RequestStatus), and the one setter that changes it.
 *
 *              +--------------------- abort / error ----------------------+
 *              |                                                          v
 *   WAITING --schedule--> RUNNING --stop/length--> FINISHED_{STOPPED,LENGTH_CAPPED}
 *     |  ^                  |   ^
 *     |  |              preempt |schedule
 *     |  |                  v   |
 *     |  +--recv done-- PREEMPTED  (num_preemptions > 0 -> back as PREEMPTED)
 *     | async load          ^
 *     v                     |
 *   WAITING_FOR_REMOTE_KVS -+--recv done--> WAITING
 *
 * Transitions (edge -> function in core/engine.c):
 *   WAITING -> RUNNING                    sched_admit
 *   WAITING -> WAITING_FOR_REMOTE_KVS     sched_admit (connector load_async)
 *   WAITING_FOR_REMOTE_KVS -> WAITING     sched_remote_kv_ready
 *   WAITING_FOR_REMOTE_KVS -> PREEMPTED   sched_remote_kv_ready (was preempted before)
 *   RUNNING -> PREEMPTED                  sched_preempt
 *   PREEMPTED -> RUNNING                  sched_admit
 *   RUNNING -> FINISHED_STOPPED / _LENGTH_CAPPED   sched_after_step
 *   any live -> FINISHED_ABORTED          sched_abort
 *   any live -> FINISHED_ERROR            sched_handle_invalid_blocks
 * Invariants:
 *   I1 a finished status is terminal;
 *   I2 only the edges above exist (kv_req_edge_ok mirrors this diagram);
 *   I3 WAITING_FOR_REMOTE_KVS is entered only from WAITING (first schedule).
 */
#include "core/request.h"

#include "kvconn/env.h"

/* edge_ok[from] is a bit set of allowed destinations. */
#define B(s) (1u << (s))
static const uint32_t edge_ok[KV_RS_COUNT] = {
    [KV_RS_WAITING] = B(KV_RS_RUNNING) | B(KV_RS_WAITING_FOR_REMOTE_KVS) |
                      B(KV_RS_FINISHED_ABORTED) | B(KV_RS_FINISHED_ERROR),
    [KV_RS_WAITING_FOR_REMOTE_KVS] = B(KV_RS_WAITING) | B(KV_RS_PREEMPTED) |
                                     B(KV_RS_FINISHED_ABORTED) | B(KV_RS_FINISHED_ERROR),
    [KV_RS_RUNNING] = B(KV_RS_PREEMPTED) | B(KV_RS_FINISHED_STOPPED) |
                      B(KV_RS_FINISHED_LENGTH_CAPPED) | B(KV_RS_FINISHED_ABORTED) |
                      B(KV_RS_FINISHED_ERROR),
    [KV_RS_PREEMPTED] = B(KV_RS_RUNNING) | B(KV_RS_FINISHED_ABORTED) | B(KV_RS_FINISHED_ERROR),
};
#undef B

bool kv_req_edge_ok(kv_req_status from, kv_req_status to) {
    if ((unsigned)from >= KV_RS_COUNT || (unsigned)to >= KV_RS_COUNT) return false;
    return (edge_ok[from] >> to) & 1u;
}

bool kv_req_set_status(const kv_env *env, uint32_t engine, kv_req *r, kv_req_status to) {
    kv_req_status from = (kv_req_status)r->status;
    if (!kv_req_edge_ok(from, to)) {
        kv_violate(env, KV_INV_SCHED_ASSERT, engine, r->id, "request %u: illegal transition %s -> %s",
                   r->id, kv_req_status_name(from), kv_req_status_name(to));
        return false;
    }
    r->status = (uint32_t)to;
    return true;
}
