/* core/multi.h — MultiConnector: two child connectors composed in config
 * order (p2p then store, or store then p2p).
 *
 * Files (one state machine each):
 *   multi_sched.c   scheduler half: the first child with a hit is chosen;
 *                   the others get USAA with 0 external tokens and the
 *                   real block table; request_finished holds the blocks
 *                   while any child does
 *   multi_worker.c  worker half: binds each child to its own metadata;
 *                   finished_recving, failed loads and load errors are
 *                   unions; finished_sending of a request several children
 *                   hold is emitted once the last of them reports
 *
 * The scheduler tells the workers, in the metadata of the step that
 * follows request_finished, how many children hold each request; each rank
 * counts its children's reports down (vLLM keeps _extra_async_saves). */
#ifndef KVCONN_CORE_MULTI_H
#define KVCONN_CORE_MULTI_H

#include "core/engine.h"
#include "core/worker.h"

#define KV_MULTI_CHILDREN 2u

typedef struct kv_multi_hold {
    uint32_t id;
    uint32_t n; /* children that delayed the free (>= 2) */
} kv_multi_hold;

typedef struct kv_multi_meta {
    const void *child[KV_MULTI_CHILDREN];
    uint32_t n_holds;
    kv_multi_hold hold[KV_ENGINE_REQS_MAX];
} kv_multi_meta;

kv_status kv_multi_sched_new(kv_engine *e, const kv_conn_kind kids[KV_MULTI_CHILDREN], kv_conn_sched *out);
void kv_multi_sched_free(kv_engine *e, kv_conn_sched *c);
uint32_t kv_multi_sched_state(const kv_conn_sched *c);

kv_status kv_multi_worker_new(kv_worker *w, const kv_conn_kind kids[KV_MULTI_CHILDREN], kv_conn_worker *out);
void kv_multi_worker_free(kv_worker *w, kv_conn_worker *c);
uint32_t kv_multi_worker_state(const kv_conn_worker *c);
/* The children's worker halves (for lookups through the composition). */
const kv_conn_worker *kv_multi_worker_child(const kv_conn_worker *c, uint32_t i);

#endif
