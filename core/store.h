/* core/store.h — the Mooncake store connector (MooncakeStoreConnector): KV
 * blocks saved to and loaded from a shared KV store keyed by prefix hash.
 *
 * Files (one state machine each):
 *   store_sched.c     scheduler half: lookup, LoadSpec, request trackers,
 *                     unfinished requests, the pending-load path, preemption
 *                     reset, request_finished with delayed free
 *   store_worker.c    worker half on the worker main actor: get_finished
 *                     issues every load and save, stored-request pins,
 *                     done_sending
 *   store_sender.c    send actor (KVCacheStoreSendingThread): batch_is_exist,
 *                     put, resume offsets, the pool-pressure skip
 *   store_receiver.c  receive actor (KVCacheStoreRecvingThread): get, write
 *                     into the worker's blocks, failed keys
 *   store_lookup.c    lookup actor on rank 0 (LookupKeyServer): answers the
 *                     scheduler's lookups with batch_is_exist
 *
 * Every store operation is a control message to the store's endpoint (the
 * transport carries it: kvconn/wire.h STORE_*), answered by one reply or a
 * timeout; the actors never block.
 *
 * The two seed-003 fixes are the default: USAA always records the full
 * per-group block table, and the pending-load path builds a ReqMeta only
 * for an accepted load (can_load). Bug switches bring the code back as it
 * was right before each fix: `store_empty_block_table` (before #54643: the
 * table is recorded only when ext > 0, and the pending path acts on every
 * LoadSpec, since the follow-up fix came later) and
 * `store_rejected_load_save` (after #54643, before the follow-up: the real
 * table is recorded, but a rejected LoadSpec still becomes a save). */
#ifndef KVCONN_CORE_STORE_H
#define KVCONN_CORE_STORE_H

#include "core/engine.h"
#include "core/worker.h"
#include "kvconn/wire.h"

/* Store operations not answered by then fail (virtual or real ns). */
#define KV_STORE_OP_TIMEOUT_NS 1000000000ull
/* How long saves are skipped after the store reported pool pressure. */
#define KV_STORE_PRESSURE_SKIP_NS 200000000ull
/* Jobs a send or receive actor queues (more are failed at once, the pin
 * still released). */
#define KV_STORE_JOBS_MAX 24u
/* Largest store message (an EXIST of KV_STORE_KEYS_MAX keys). */
#define KV_STORE_WIRE_MAX (KV_WIRE_HDR_BYTES + 6u + KV_STORE_KEYS_MAX * 12u)
/* Bytes of one block (one worker's share) a save snapshot holds; the store
 * connector needs block_bytes <= this. */
#define KV_STORE_SNAP_BYTES 64u

/* LoadSpec: what a lookup found and whether the load was accepted. */
typedef struct kv_store_load_spec {
    uint32_t vllm_cached;   /* tokens computed locally when GNMT asked */
    uint32_t kvpool_cached; /* tokens the store holds (block aligned) */
    bool can_load;          /* USAA with ext > 0 accepted it */
} kv_store_load_spec;

/* ReqMeta: one request's work for the workers this step. */
typedef enum kv_store_origin {
    KV_STORE_FROM_NEW = 1,     /* a newly scheduled request */
    KV_STORE_FROM_CACHED = 2,  /* a request scheduled again */
    KV_STORE_FROM_PENDING = 3, /* the pending-load path (not scheduled this step) */
} kv_store_origin;

typedef struct kv_store_req_meta {
    uint32_t id;
    uint8_t origin;           /* kv_store_origin (traces) */
    bool can_save;
    bool has_load;            /* load.can_load is then true */
    kv_store_load_spec load;
    uint32_t save_from;       /* tokens already saved by earlier steps (block aligned) */
    uint32_t token_len;       /* save [save_from, token_len), block aligned */
    kv_tokens tokens;
    kv_block_table blocks;    /* per group; may be short or empty only by a bug switch */
} kv_store_req_meta;

typedef struct kv_store_meta {
    uint32_t n;
    kv_store_req_meta *req;   /* [engine reqs_max] */
    kv_id_list preempted;     /* drop their stored-request pins */
} kv_store_meta;

/* ---- actor messages ---- */

/* scheduler -> lookup actor; the reply goes to reply_to. */
typedef struct kv_m_store_lookup {
    uint32_t id;
    uint32_t reply_to;
    uint32_t num_tokens;      /* the request's tokens (the hit stays below) */
    kv_tokens tokens;
} kv_m_store_lookup;

typedef struct kv_m_store_lookup_reply {
    uint32_t id;
    uint32_t hit_tokens;      /* block aligned; 0 on any failure */
} kv_m_store_lookup_reply;

/* worker main -> send actor: up to KV_STORE_BATCH_MAX blocks of one
 * request with the bytes they held when the job was made (the CUDA-event
 * snapshot); a save of more blocks is several jobs in a row, the last one
 * marked. n == 0 with forget set: the request ended; drop its resume
 * offset (no pin). */
typedef struct kv_store_snap {
    uint64_t hash;            /* prefix hash of (group, pos): the key */
    uint8_t group;
    uint8_t pos;
    uint8_t bytes[KV_STORE_SNAP_BYTES];
} kv_store_snap;

typedef struct kv_m_store_save {
    uint32_t id;
    uint32_t end_tokens;      /* the save (all its jobs) saves up to here */
    uint8_t forget;
    uint8_t last;             /* the save's last job: once it and every job
                                 before it are done, the resume offset moves
                                 to end_tokens (never earlier: a save split
                                 into jobs is one put in vLLM) */
    uint32_t n;
    kv_store_snap e[KV_STORE_BATCH_MAX];
} kv_m_store_save;

/* worker main -> receive actor: load [from_pos, to_pos) into blocks. */
typedef struct kv_m_store_load {
    uint32_t id;
    uint32_t from_pos, to_pos;
    uint32_t num_tokens;
    kv_tokens tokens;
    kv_block_table blocks;
} kv_m_store_load;

/* send actor -> worker main: one per save job, always (releases the pin). */
typedef struct kv_m_store_save_done {
    uint32_t id;
    uint32_t saved_blocks;
    int32_t status;           /* 0, KV_STORE_NO_HANDLE, KV_STORE_FAILED, or 1: skipped */
} kv_m_store_save_done;

/* receive actor -> worker main: one per load job, always. */
typedef struct kv_m_store_load_done {
    uint32_t id;
    uint32_t n_failed;
    kv_bad_block failed[KV_GROUPS_MAX * KV_REQ_BLOCKS_MAX];
    kv_m_store_load job;      /* what was loaded, for verification */
} kv_m_store_load_done;

/* ---- construction ---- */

kv_status kv_store_sched_new(kv_engine *e, kv_conn_sched *out);
void kv_store_sched_free(kv_engine *e, kv_conn_sched *c);
uint32_t kv_store_sched_state(const kv_conn_sched *c);

kv_status kv_store_worker_new(kv_worker *w, kv_conn_worker *out);
void kv_store_worker_free(kv_worker *w, kv_conn_worker *c);
uint32_t kv_store_worker_state(const kv_conn_worker *c);

typedef struct kv_store_sender kv_store_sender;
typedef struct kv_store_receiver kv_store_receiver;
typedef struct kv_store_lookup kv_store_lookup;
kv_status kv_store_sender_new(kv_worker *w, kv_store_sender **out, uint32_t *out_actor);
void kv_store_sender_free(kv_store_sender *s);
uint32_t kv_store_sender_state(const kv_store_sender *s);
kv_status kv_store_receiver_new(kv_worker *w, kv_store_receiver **out, uint32_t *out_actor);
void kv_store_receiver_free(kv_store_receiver *r);
uint32_t kv_store_receiver_state(const kv_store_receiver *r);
kv_status kv_store_lookup_new(kv_worker *w, kv_store_lookup **out, uint32_t *out_actor);
void kv_store_lookup_free(kv_store_lookup *l);

/* ---- helpers shared by the store actors ---- */

/* The key of (group, position) on a worker holding heads [lo, hi). */
kv_store_key kv_store_key_of(uint64_t hash, uint32_t head_lo, uint32_t head_hi);
/* Prefix hashes of positions [0, n) of group g (n <= KV_REQ_BLOCKS_MAX). */
void kv_store_hashes(kv_digest_memo *m, uint32_t g, uint32_t n, uint64_t *out);
/* Does a hit of k blocks need position pos of group g? (full: all; sliding:
 * the last blocks_per_sw; mamba: the state at k-1) */
bool kv_store_needs(const kv_engine_cfg *cfg, uint32_t g, uint32_t pos, uint32_t k);
/* One store round trip for an actor: its endpoint, its connection to the
 * store, the encode buffer, the sequence number and the timeout timer. */
typedef struct kv_store_chan {
    kv_worker *w;             /* borrowed (immutable parts only) */
    uint32_t actor;
    kvt_ep ep;
    kvt_addr addr;
    kvt_peer peer;            /* KVT_NONE until connected */
    uint32_t seq;             /* of the operation in flight (0: none) */
    uint32_t next_seq;
    uint32_t timer_kind;      /* message kind of this actor's timeout */
    uint8_t *buf;             /* scratch (env): KV_STORE_WIRE_MAX bytes */
    kv_wire_msg *msg;         /* scratch (env): the request being sent, the reply decoded */
} kv_store_chan;
kv_status kv_store_chan_open(kv_store_chan *c, kv_worker *w, uint32_t actor, uint32_t timer_kind);
/* Releases the channel's buffers (its owner's free). */
void kv_store_chan_close(kv_store_chan *c);
/* Sends c->msg (type set by the caller, seq filled here) and arms the
 * timeout; false when it could not be sent (the operation failed). */
bool kv_store_chan_send(kv_store_chan *c);
/* Decodes an event's control bytes into c->msg if it is the reply of the
 * operation in flight; false for anything else (stale, garbage). */
bool kv_store_chan_reply(kv_store_chan *c, const kv_msg *m);
/* A timer message: true when it is the timeout of the operation in flight
 * (which it then ends). */
bool kv_store_chan_timeout(kv_store_chan *c, const kv_msg *m);

#endif
