/* kvconn/connector.h — the connector API, with vLLM's hook names and order.
 *
 * A connector has two halves (vLLM's KVConnectorRole):
 *  - the scheduler half runs on the engine's scheduler actor;
 *  - the worker half runs on each worker's main actor, and may own further
 *    actors (the P2P connector's sender and receiver loops).
 *
 * Per engine step the scheduler calls, in this order:
 *   for each waiting request with num_computed == 0:
 *     get_num_new_matched_tokens -> allocate -> update_state_after_alloc
 *   build_connector_meta                              (once per step)
 * and each worker:
 *   bind_connector_metadata -> start_load_kv -> (forward) -> wait_for_save
 *   -> get_finished -> get_block_ids_with_load_errors -> clear_connector_metadata
 * then the scheduler:
 *   update_connector_output, then per finished request request_finished.
 *
 * The metadata a build produces is owned by the scheduler half and frozen
 * (read-only for everyone) until the step's outputs are back; it is the one
 * structure that several actors read, and nobody writes it while frozen. */
#ifndef KVCONN_CONNECTOR_H
#define KVCONN_CONNECTOR_H

#include <stdbool.h>
#include <stdint.h>

#include "kvconn/actor.h"
#include "kvconn/types.h"

typedef enum kv_req_status {
    KV_RS_WAITING = 0,
    KV_RS_WAITING_FOR_REMOTE_KVS,
    KV_RS_RUNNING,
    KV_RS_PREEMPTED,
    KV_RS_FINISHED_STOPPED,
    KV_RS_FINISHED_LENGTH_CAPPED,
    KV_RS_FINISHED_ABORTED,
    KV_RS_FINISHED_ERROR,
    KV_RS_COUNT
} kv_req_status;

const char *kv_req_status_name(kv_req_status s);
static inline bool kv_req_status_finished(kv_req_status s) { return s >= KV_RS_FINISHED_STOPPED; }

/* The engine's request, as connectors see it. Owned by the scheduler actor. */
#define KV_SPEC_MAX 4u /* draft tokens per decode step at most (speculative decoding) */

typedef struct kv_req {
    uint32_t id;               /* request id (same on P and D) */
    uint32_t status;           /* kv_req_status; changed only by kv_req_set_status */
    uint32_t prompt_len;       /* prompt tokens */
    uint32_t max_tokens;       /* tokens to generate */
    uint32_t num_computed;     /* tokens whose KV is in the block table */
    uint32_t num_output;       /* tokens generated */
    uint32_t num_spec;         /* draft tokens of the step in flight (vLLM's spec_token_ids as
                                * scheduled): counted in num_computed until its output rolls
                                * the rejected ones back; 0 between steps */
    uint32_t num_preemptions;  /* times preempted */
    uint32_t prefix_group;     /* shared-prefix group (token derivation) */
    uint32_t prefix_len;       /* tokens shared with the group */
    uint64_t token_seed;       /* per-request token stream */
    kv_xfer_params params;     /* kv_transfer_params; connectors clear flags */
    kv_block_table blocks;     /* per-group block ids, owned by this request */
} kv_req;

/* Total tokens (prompt + generated). */
static inline uint32_t kv_req_num_tokens(const kv_req *r) { return r->prompt_len + r->num_output; }

/* get_num_new_matched_tokens's (Optional[int], bool). */
typedef struct kv_match {
    bool ready;        /* false: vLLM's None, ask again next step */
    uint32_t ext;      /* tokens the connector can supply beyond num_computed */
    bool load_async;   /* request waits for remote KV (WAITING_FOR_REMOTE_KVS) */
} kv_match;

/* What the scheduler tells connectors about one step. vLLM's
 * num_scheduled_tokens is not carried: no connector here reads it (each
 * reads its requests' num_computed). */
typedef struct kv_sched_output {
    kv_id_list new_reqs;       /* scheduled for the first time */
    kv_id_list cached_reqs;    /* scheduled again */
    kv_id_list resumed_reqs;   /* subset of cached that resumed after preemption */
    kv_id_list preempted_reqs;
    kv_id_list finished_reqs;  /* finished since the previous step */
} kv_sched_output;

typedef struct kv_conn_sched_ops {
    size_t size;      /* sizeof(kv_conn_sched_ops) */
    const char *name; /* "p2p", "store", "multi" */
    kv_status (*get_num_new_matched_tokens)(void *c, const kv_req *r, uint32_t num_computed,
                                            kv_match *out);
    void (*update_state_after_alloc)(void *c, kv_req *r, const kv_block_table *blocks, uint32_t ext);
    /* Returns the frozen metadata for this step (owned by c). */
    const void *(*build_connector_meta)(void *c, const kv_sched_output *so);
    /* blocks: the request's blocks after remove_skipped_blocks. */
    void (*request_finished)(void *c, kv_req *r, const kv_block_table *blocks, bool *out_delay_free);
    /* May filter o (a MultiConnector holds back a child's finished_sending). */
    void (*update_connector_output)(void *c, kv_conn_output *o);
    /* A message for the connector in the scheduler actor's mailbox (a store
     * lookup's reply); the engine steps again after it. May be NULL. */
    void (*on_message)(void *c, const kv_msg *m);
    /* A request was added to the engine, before its first schedule (vLLM's
     * on_new_request); the connector may rewrite it (P's N - 1 truncation
     * for a model with a recurrent group). May be NULL. */
    void (*on_new_request)(void *c, kv_req *r);
} kv_conn_sched_ops;

typedef struct kv_conn_worker_ops {
    size_t size;
    const char *name;
    void (*bind_connector_metadata)(void *w, const void *meta);
    void (*start_load_kv)(void *w);
    void (*wait_for_save)(void *w);
    /* Adds this worker's finished sets to out. */
    void (*get_finished)(void *w, const kv_id_list *finished_req_ids, kv_conn_output *out);
    void (*get_block_ids_with_load_errors)(void *w, kv_bad_blocks *out);
    void (*clear_connector_metadata)(void *w);
    /* A message from one of the connector's own actors, arrived in the
     * worker main actor's mailbox between steps. */
    void (*on_message)(void *w, const kv_msg *m);
} kv_conn_worker_ops;

typedef struct kv_conn_sched {
    const kv_conn_sched_ops *ops;
    void *self;
} kv_conn_sched;

typedef struct kv_conn_worker {
    const kv_conn_worker_ops *ops;
    void *self;
} kv_conn_worker;

#endif
