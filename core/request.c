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
 *   PREEMPTED -> WAITING_FOR_REMOTE_KVS   sched_admit (resumed with a load)
 *   RUNNING -> FINISHED_STOPPED / _LENGTH_CAPPED   sched_after_step
 *   any live -> FINISHED_ABORTED          sched_abort
 *   any live -> FINISHED_ERROR            sched_handle_invalid_blocks
 * Invariants:
 *   I1 a finished status is terminal;
 *   I2 only the edges above exist (kv_req_edge_ok mirrors this diagram);
 *   I3 WAITING_FOR_REMOTE_KVS is entered only from WAITING (first schedule).
 * Of the request object (kv_req_invariants, asserted after every transition
 * the setter makes, and by the engine's own invariant for every live slot):
 *   R1 its status is one of the diagram's (< KV_RS_COUNT);
 *   R2 0 < prompt_len, and num_computed <= prompt_len + num_output +
 *      num_spec (KV is never ahead of the tokens and the drafts of the step
 *      in flight), num_spec <= KV_SPEC_MAX;
 *   R3 num_output <= max_tokens (a request at max_tokens finishes);
 *   R4 its block table has n_groups <= KV_GROUPS_MAX and n[g] <=
 *      KV_REQ_BLOCKS_MAX in every group.
 * An illegal edge stays what it was (a SCHED-ASSERT of vLLM's scheduler);
 * R1-R4 are INV-ASSERT (core/assert.h).
 */
#include "core/request.h"

#include "core/assert.h"
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
    [KV_RS_PREEMPTED] = B(KV_RS_RUNNING) | B(KV_RS_WAITING_FOR_REMOTE_KVS) | B(KV_RS_FINISHED_ABORTED) |
                        B(KV_RS_FINISHED_ERROR),
};
#undef B

bool kv_req_edge_ok(kv_req_status from, kv_req_status to) {
    if ((unsigned)from >= KV_RS_COUNT || (unsigned)to >= KV_RS_COUNT) return false;
    return (edge_ok[from] >> to) & 1u;
}

#define REQ_ASSERT(cond, ...) KV_ASSERT(env, engine, cond, __VA_ARGS__)

bool kv_req_invariants(const kv_env *env, uint32_t engine, const kv_req *r) {
    if (!REQ_ASSERT(r->status < KV_RS_COUNT, "request %u: status %u", r->id, r->status)) return false;
    if (!REQ_ASSERT(r->prompt_len > 0 && r->num_spec <= KV_SPEC_MAX &&
                        r->num_computed <= kv_req_num_tokens(r) + r->num_spec,
                    "request %u (%s): num_computed %u, prompt_len %u + num_output %u + drafts %u", r->id,
                    kv_req_status_name((kv_req_status)r->status), r->num_computed, r->prompt_len, r->num_output,
                    r->num_spec))
        return false;
    if (!REQ_ASSERT(r->num_output <= r->max_tokens, "request %u (%s): num_output %u > max_tokens %u", r->id,
                    kv_req_status_name((kv_req_status)r->status), r->num_output, r->max_tokens))
        return false;
    if (!REQ_ASSERT(r->blocks.n_groups <= KV_GROUPS_MAX, "request %u: block table of %u groups", r->id,
                    r->blocks.n_groups))
        return false;
    for (uint32_t g = 0; g < r->blocks.n_groups; g++)
        if (!REQ_ASSERT(r->blocks.n[g] <= KV_REQ_BLOCKS_MAX, "request %u group %u: %u block ids", r->id, g,
                        r->blocks.n[g]))
            return false;
    return true;
}

bool kv_req_set_status(const kv_env *env, uint32_t engine, kv_req *r, kv_req_status to) {
    kv_req_status from = (kv_req_status)r->status;
    if (!kv_req_edge_ok(from, to)) {
        kv_violate(env, KV_INV_SCHED_ASSERT, engine, r->id, "request %u: illegal transition %s -> %s",
                   r->id, kv_req_status_name(from), kv_req_status_name(to));
        return false;
    }
    r->status = (uint32_t)to;
    return kv_req_invariants(env, engine, r);
}
