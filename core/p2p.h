/* core/p2p.h — the Mooncake P2P (prefill/decode) connector.
 *
 * Protocol (push, vLLM's MooncakeConnector): D's receiver sends each paired P
 * worker its block ids per group with a transfer id (XFER_META); P's sender
 * waits until its own request is ready, WRITEs its blocks into D's regions,
 * and answers CONTINUE* then FINISH (or a whole-message ERROR) with ok and
 * failed request lists. D reports finished_recving exactly once per request
 * that holds destination blocks, with a load error when it failed.
 *
 * Files (one state machine each):
 *   p2p_sched.c     scheduler half (on the engine scheduler actor)
 *   p2p_worker.c    worker half on the worker main actor
 *   p2p_sender.c    P sender loop actor (owns SendBlockMeta entries)
 *   p2p_receiver.c  D receiver loop actor (owns pull metas, remote agents)
 */
#ifndef KVCONN_CORE_P2P_H
#define KVCONN_CORE_P2P_H

#include "core/engine.h"
#include "core/worker.h"

/* P serves a request recorded with KV_ENGINE_ANY to any D engine (a request
 * whose params name no decode engine). */
#define KV_ENGINE_ANY UINT32_MAX

/* Transfer ids of requests P finished without processing them. */
typedef struct kv_xfer_id_list {
    uint32_t n;
    kv_xfer_id id[KV_ENGINE_REQS_MAX];
} kv_xfer_id_list;

/* PullReqMeta (D): what the receiver needs to pull one request. */
typedef struct kv_p2p_pull {
    uint32_t d_req;
    kv_xfer_id transfer_id;
    uint32_t remote_engine;
    kvt_addr bootstrap;
    kv_tokens tokens;           /* for verifying what arrives (INV-DATA) */
    uint32_t prompt_len;        /* the tokens P computed: N - 1 with a recurrent group */
    uint32_t first_pos[KV_GROUPS_MAX]; /* request position of blocks.id[g][0] */
    kv_block_table blocks;      /* local destination blocks (may be empty) */
} kv_p2p_pull;

/* reqs_to_send entry (P): empty blocks mean "create the entry". */
typedef struct kv_p2p_send {
    uint32_t p_req;
    kv_xfer_id transfer_id;
    uint32_t d_engine;          /* the D engine the proxy named, or KV_ENGINE_ANY */
    uint8_t filled;             /* 1: real (clipped) blocks follow */
    uint32_t first_pos[KV_GROUPS_MAX];
    kv_block_table blocks;
} kv_p2p_send;

typedef struct kv_p2p_meta {
    uint32_t n_recv;
    kv_p2p_pull *recv;          /* [engine reqs_max] */
    uint32_t n_send;
    kv_p2p_send *send;          /* [engine reqs_max] */
    kv_xfer_id_list not_processed;
} kv_p2p_meta;

/* receiver -> worker main */
typedef struct kv_m_recv_done {
    uint32_t d_req;
    uint8_t failed;
    kv_p2p_pull pull;           /* what was pulled, for verification */
} kv_m_recv_done;

typedef struct kv_m_send_done {
    uint32_t p_req;
} kv_m_send_done;

/* Scheduler half. */
kv_status kv_p2p_sched_new(kv_engine *e, kv_conn_sched *out);
void kv_p2p_sched_free(kv_engine *e, kv_conn_sched *c);
uint32_t kv_p2p_sched_state(const kv_conn_sched *c);

/* Worker half; spawns the sender (P) or receiver (D) actor of this rank. */
kv_status kv_p2p_worker_new(kv_worker *w, kv_conn_worker *out);
void kv_p2p_worker_free(kv_worker *w, kv_conn_worker *c);
uint32_t kv_p2p_worker_state(const kv_conn_worker *c);

/* Sender and receiver actors (owned by the worker half). */
typedef struct kv_p2p_sender kv_p2p_sender;
typedef struct kv_p2p_receiver kv_p2p_receiver;
kv_status kv_p2p_sender_new(kv_worker *w, kv_p2p_sender **out, uint32_t *out_actor);
void kv_p2p_sender_free(kv_p2p_sender *s);
uint32_t kv_p2p_sender_state(const kv_p2p_sender *s);
/* Read-only views for checkers: a bounded table is full, so some pull
 * would now fail for want of room. The sender: every pull slot taken, no run
 * of request slots as long as the largest pull ("sender busy"), or every
 * entry in use. The receiver: every pull or every batch slot in use. */
bool kv_p2p_sender_saturated(const kv_p2p_sender *s);
bool kv_p2p_receiver_saturated(const kv_p2p_receiver *r);
kv_status kv_p2p_receiver_new(kv_worker *w, kv_p2p_receiver **out, uint32_t *out_actor);
void kv_p2p_receiver_free(kv_p2p_receiver *r);
uint32_t kv_p2p_receiver_state(const kv_p2p_receiver *r);
/* recv_map_race: the original main thread wrote the receiver's map itself.
 * Owner-checked: calling it from any actor but the receiver is INV-OWNER. */
void kv_p2p_receiver_insert(kv_p2p_receiver *r, const kv_p2p_pull *p);

/* Pairing of TP ranks by head ranges (handshake_target_ranks): the ranks of
 * a TP group of size `other_tp` whose heads overlap rank `rank` of size tp.
 * Returns the count; ranks into out. */
uint32_t kv_p2p_paired_ranks(uint32_t tp, uint32_t rank, uint32_t other_tp, uint32_t *out);

/* The connector actor of a worker half (sender on P, receiver on D). */
uint32_t kv_p2p_worker_actor(const kv_conn_worker *c);
/* Its sender or receiver is saturated (kv_p2p_sender_saturated). */
bool kv_p2p_worker_saturated(const kv_conn_worker *c);

#endif
