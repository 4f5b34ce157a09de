/* core/engine.h — the engine model: a faithful subset of vLLM v1's
 * scheduler (EngineCore) and its workers, enough to hold a connector to the
 * same contract (DESIGN.md section 3).
 *
 * Actors per engine (ownership):
 *   <E>.sched         kv_engine: request table, block pools, waiting/running
 *                     queues, the connector's scheduler half, the frozen step
 *   <E>.w<r>.main     kv_worker: KV memory of rank r, the connector's worker
 *                     half, the model runner (fills KV from token ids)
 *   connector actors  spawned by the connector's worker half (P2P: sender on
 *                     P, receiver on D), one set per rank
 * The scheduler and its workers are synchronous per step, as in vLLM:
 * TICK -> input queue -> schedule -> EXECUTE to every rank -> STEP_RESULT
 * from every rank -> update_from_output -> next TICK after the step's model
 * cost. Client requests and aborts wait in the input queue and are applied
 * only between steps, right before a schedule, as vLLM's engine core busy
 * loop takes them (_process_input_queue, then step). */
#ifndef KVCONN_CORE_ENGINE_H
#define KVCONN_CORE_ENGINE_H

#include <stdbool.h>
#include <stdint.h>

#include "core/block_pool.h"
#include "core/kv_data.h"
#include "core/kvmem.h"
#include "core/msgs.h"
#include "kvconn/actor.h"
#include "kvconn/connector.h"
#include "kvconn/transport.h"

typedef enum kv_role { KV_ROLE_PRODUCER = 1, KV_ROLE_CONSUMER = 2 } kv_role;

/* Bug switches (DESIGN.md section 8): each brings one original production
 * bug back at run time. They do not exist in a production build. */
typedef enum kv_bug {
    KV_BUG_ERR_EARLY_RETURN = 1u << 0,        /* seed 000 (b) */
    KV_BUG_RECV_MAP_RACE = 1u << 1,           /* seed 000 (a) */
    KV_BUG_EMPTY_PULL_COMPLETION = 1u << 2,   /* seed 004 */
    KV_BUG_STORE_EMPTY_BLOCK_TABLE = 1u << 3, /* seed 003, #54643 */
    KV_BUG_STORE_REJECTED_LOAD_SAVE = 1u << 4,/* seed 003, follow-up */
} kv_bug;

#ifdef KVCONN_BUG_SWITCHES
static inline bool kv_bug_on(uint32_t mask, kv_bug b) { return (mask & (uint32_t)b) != 0; }
#else
static inline bool kv_bug_on(uint32_t mask, kv_bug b) { (void)mask; (void)b; return false; }
#endif
/* "err_early_return" -> bit; 0 if unknown. */
uint32_t kv_bug_parse(const char *name);
const char *kv_bug_name(uint32_t bit);
/* Walks a comma list of switch names ("a,b"): *bit gets the first name's
 * bit (0 if unknown), *len its length; returns the rest of the list, or NULL
 * after the last name. */
const char *kv_bug_list_next(const char *list, uint32_t *bit, size_t *len);

/* Request phases, for fault-coverage accounting. */
typedef enum kv_phase {
    KV_PH_P_QUEUED = 0,   /* P has it, not scheduled yet */
    KV_PH_P_PREFILL,      /* P computing the prompt */
    KV_PH_P_HELD,         /* P finished, blocks held for the send */
    KV_PH_D_QUEUED,       /* D has it, not scheduled yet */
    KV_PH_D_WAITING_KV,   /* D in WAITING_FOR_REMOTE_KVS */
    KV_PH_D_DECODE,       /* D running */
    KV_PH_DONE,
    KV_PH_COUNT
} kv_phase;
const char *kv_phase_name(kv_phase p);

/* Connector configurations (core/connector.c builds them). */
typedef enum kv_conn_kind {
    KV_CONN_P2P = 1,             /* MooncakeConnector */
    KV_CONN_STORE = 2,           /* MooncakeStoreConnector */
    KV_CONN_MULTI_P2P_STORE = 3, /* MultiConnector(p2p, store) */
    KV_CONN_MULTI_STORE_P2P = 4, /* MultiConnector(store, p2p) */
    KV_CONN_KIND_COUNT
} kv_conn_kind;
/* "p2p", "store", "multi(p2p,store)", "multi(store,p2p)"; "?" otherwise. */
const char *kv_conn_kind_name(uint32_t kind);
/* The inverse; 0 if unknown. */
uint32_t kv_conn_kind_parse(const char *name);
/* Does this configuration use the store (needs a store address)? */
bool kv_conn_kind_has_store(uint32_t kind);

typedef struct kv_engine_cfg {
    uint32_t index;           /* engine index in the world */
    uint32_t node;            /* node of the scheduler; rank r runs on node + 1 + r */
    uint8_t role;             /* kv_role */
    uint32_t tp;              /* workers, divides KV_HEADS */
    uint32_t n_groups;
    kv_group_cfg group[KV_GROUPS_MAX];
    uint32_t block_size;      /* tokens per block */
    uint32_t pool_blocks;     /* usable blocks per group */
    uint32_t head_bytes;      /* KV bytes of one head in one block */
    uint32_t max_batched_tokens;
    uint32_t max_running;
    uint32_t num_spec;        /* speculative decoding: draft tokens per decode step
                               * (num_speculative_tokens), 0..KV_SPEC_MAX; an engine with a
                               * recurrent group takes none */
    uint32_t reqs_max;        /* live requests the tables hold (vLLM's max_num_seqs
                               * bounds what runs; this bounds what is known):
                               * 1..KV_ENGINE_REQS_MAX, 0 = KV_ENGINE_REQS_MAX. Every
                               * per-request table of the engine and its connector
                               * is sized by it. */
    uint8_t policy;           /* kv_fail_policy */
    bool prefix_caching;
    uint64_t step_ns_base;    /* model cost of one step */
    uint64_t step_ns_per_token;
    uint64_t idle_poll_ns;    /* retry period of a send still in flight at its expiry */
    uint64_t abort_timeout_ns;/* P: VLLM_MOONCAKE_ABORT_REQUEST_TIMEOUT */
    uint64_t recv_timeout_ns; /* D: RCVTIMEO */
    uint32_t peer_share_pct;  /* P: the most of its sender's pull slots and request slots one D
                               * peer (a D rank's control connection) may hold, in percent; 0 or
                               * 100: no cap. A pull over it is refused "sender busy" (logged,
                               * counted), so no one peer can hold all of them */
    uint32_t bugs;            /* kv_bug mask */
    uint32_t proxy_actor;     /* request completions go here */
    uint32_t bootstrap_actor;
    kvt_addr store_addr;      /* the KV store's endpoint (store connector) */
    bool store_lookup_off;    /* store connector: never look the store up (vLLM's
                               * enable_lookup = false): every request is a store miss; saves
                               * as before */
    kv_kvmem kvmem;           /* where KV blocks live (core/kvmem.h); ops NULL: host */
} kv_engine_cfg;

/* One scheduled request in the frozen step, as the workers see it. */
typedef struct kv_step_req {
    uint32_t id;
    uint32_t computed_before; /* tokens whose KV existed before this step */
    uint32_t num_scheduled;   /* tokens computed by this step */
    uint32_t num_spec;        /* of num_scheduled, draft tokens after the request's last one
                               * (scheduled_spec_decode_tokens); the first kv_spec_accepted
                               * of them are kept, the rest rolled back */
    uint32_t num_tokens;      /* prompt + output so far */
    kv_tokens tokens;
    kv_block_table blocks;
} kv_step_req;

/* The scheduler output of one step: frozen while the step is in flight. */
typedef struct kv_step {
    uint64_t step_no;
    uint32_t n_reqs;
    kv_step_req *req;         /* [cfg.reqs_max] */
    kv_id_list finished;      /* finished_req_ids for get_finished */
    const void *conn_meta;    /* the connector's frozen metadata */
} kv_step;

typedef struct kv_m_execute {
    const kv_step *step; /* frozen until every rank's STEP_RESULT is back */
} kv_m_execute;

typedef struct kv_m_step_result {
    uint32_t rank;
    uint64_t step_no;
    kv_conn_output out;
} kv_m_step_result;

/* STEP_RESULT travels packed: rank, step_no, then each list of `out` as a
 * count and only its used entries (an empty result is 28 bytes, not the
 * whole struct). Unpack fills the counts and the used entries only. */
#define KV_STEP_RESULT_PACKED_MAX \
    (12u + 4u * 4u + 3u * 4u * KV_ENGINE_REQS_MAX + 8u * KV_BAD_BLOCKS_MAX)
uint32_t kv_step_result_pack(const kv_m_step_result *r, uint8_t *buf);
bool kv_step_result_unpack(const uint8_t *buf, uint32_t len, kv_m_step_result *out);

/* A request slot of the scheduler. */
typedef struct kv_sreq {
    kv_req r;
    kv_tokens tokens;
    bool used;
    bool delay_free;        /* finished; blocks held until the connector is done */
    bool recv_failed;       /* a load of this request failed */
    bool gave_back;         /* it gave its loaded KV back while waiting (release_waiting_holder) */
    uint32_t seq;           /* arrival order */
    uint32_t local_hit;     /* tokens from the local prefix cache at first schedule */
    uint32_t recv_votes;    /* ranks that reported finished_recving */
    uint32_t send_votes;    /* ranks that reported finished_sending */
    uint32_t phase;         /* kv_phase */
    uint32_t cached_blocks; /* positions [0, cached_blocks) are in the prefix cache */
    uint64_t cache_parent[KV_GROUPS_MAX]; /* prefix hash of position cached_blocks - 1 */
    kv_digest_memo dm;      /* token digests of full blocks, over `tokens`: computed once
                             * for the request's prefix lookups and caching */
} kv_sreq;

typedef struct kv_engine_stats {
    uint64_t steps, preemptions, aborts, finished, errors, recomputes, prefix_hit_tokens;
    uint64_t finished_recving, finished_sending, load_errors;
    uint64_t rejected_loads;  /* MultiConnector: a child's hit not chosen */
    uint64_t turned_away;     /* requests refused on arrival: no free slot, or they can never fit */
    uint64_t aborts_after_recv; /* aborts of a request whose KV had arrived, before a schedule took it in */
    uint64_t resumed_hits;      /* preempted requests whose re-admission found computed tokens (a local
                                 * prefix hit or a connector's), as vLLM asks again on resume */
    uint64_t drafts, drafts_accepted; /* draft tokens scheduled, and kept (speculative decoding) */
    uint64_t draft_blocks;    /* steps whose drafts reached into a block past their last token's */
} kv_engine_stats;

typedef struct kv_worker kv_worker;

/* One entry of the engine's input queue: a client request (ADD_REQ, the
 * whole spec) or an abort (ABORT, spec.id only). Each request is added and
 * aborted at most once, so two per request slot hold any step's arrivals;
 * the rest is room for a proxy that outpaces the table. */
typedef struct kv_engine_input {
    uint32_t kind;            /* KV_M_ADD_REQ or KV_M_ABORT */
    kv_req_spec spec;
} kv_engine_input;
#define KV_ENGINE_INQ(reqs_max) (2u * (reqs_max) + 8u)

typedef struct kv_engine {
    kv_owner owner;            /* the scheduler actor */
    const kv_env *env;         /* borrowed */
    kv_rt *rt;                 /* borrowed */
    kv_engine_cfg cfg;
    uint32_t sched_actor;
    kv_block_pool pool[KV_GROUPS_MAX];
    kv_sreq *req;                 /* [cfg.reqs_max] slots */
    uint64_t live;                /* bit i: req[i].used (reqs_max <= 64) */
    uint32_t live_id[KV_ENGINE_REQS_MAX]; /* req[i].r.id where bit i of live is set */
    uint8_t hint[KV_ENGINE_REQS_MAX];     /* id % 64 -> the slot last given to such an id */
    uint32_t *waiting;            /* [cfg.reqs_max] slot indices, FIFO */
    uint32_t n_waiting;
    uint32_t *running;            /* [cfg.reqs_max] slot indices, admission order */
    uint32_t n_running;
    uint32_t next_seq;
    kv_engine_input *inq;         /* [KV_ENGINE_INQ(cfg.reqs_max)] client requests and aborts
                                   * since the last schedule, FIFO: applied in order right
                                   * before the next one (vLLM's input queue) */
    uint32_t n_inq;
    kv_id_list finished_recving_kv;  /* finished_recving_kv_req_ids */
    kv_id_list failed_recving_kv;    /* failed_recving_kv_req_ids */
    kv_id_list finished_since_step;  /* finished_req_ids for the next step */
    kv_id_list preempted_since_step;
    kv_conn_kind conn_kind;
    kv_conn_sched conn;              /* the connector's scheduler half */
    kv_step step;                    /* frozen while busy */
    bool busy;                       /* a step is in flight */
    bool tick_armed;                 /* a TICK is pending */
    bool wake_pending;               /* a worker woke us while a step was in flight */
    bool step_preempted;             /* the step in flight preempted a request (the waiting
                                      * queue was not scheduled: the next step must come) */
    uint32_t results_pending;        /* ranks yet to answer */
    kv_conn_output agg;              /* outputs of this step, all ranks */
    kv_m_step_result rx;             /* the STEP_RESULT being merged, unpacked */
    kv_worker *worker[KV_TP_MAX];    /* owned (env); each owned by its own actor */
    kv_engine_stats stats;
} kv_engine;

/* Factory (core/connector.c): either half of any configuration. */
kv_status kv_conn_sched_new(kv_engine *e, kv_conn_kind kind, kv_conn_sched *out);
void kv_conn_sched_free(kv_engine *e, kv_conn_sched *c);
uint32_t kv_conn_sched_state(const kv_conn_sched *c);
kv_status kv_conn_worker_new(kv_worker *w, kv_conn_kind kind, kv_conn_worker *out);
void kv_conn_worker_free(kv_worker *w, kv_conn_worker *c);
uint32_t kv_conn_worker_state(const kv_conn_worker *c);
/* The P2P sender (P) or receiver (D) actor inside a worker half, or
 * KV_ACTOR_NONE when the configuration has no P2P connector. */
uint32_t kv_conn_worker_p2p_actor(const kv_conn_worker *c);
/* Read-only view for checkers: its P2P sender or receiver has a bounded
 * table full, so some pull would now fail for want of room (false without
 * a P2P connector). */
bool kv_conn_worker_p2p_saturated(const kv_conn_worker *c);
/* Which connector's actors send a message kind: "p2p", "store" or "". */
const char *kv_msg_family(uint32_t kind);

/* Builds the engine and its workers, spawns their actors. transports[r] is
 * the transport of rank r's node (borrowed). */
kv_status kv_engine_new(const kv_env *env, kv_rt *rt, const kv_engine_cfg *cfg, kv_conn_kind kind,
                        kvt *const *transports, kv_engine **out);
void kv_engine_free(kv_engine *e);

/* Read-only views for the checker and reports (no owner check: callers read
 * at quiescence or from the runtime between events). */
uint32_t kv_engine_live_reqs(const kv_engine *e);
void kv_engine_pool_report(const kv_engine *e, uint32_t group, kv_pool_report *out);
const kv_sreq *kv_engine_find(const kv_engine *e, uint32_t id);
/* Is request id waiting in the input queue (arrived, not yet applied)? */
bool kv_engine_inq_has(const kv_engine *e, uint32_t id);
/* Connector-side state still held for some request (0 at clean quiescence). */
uint32_t kv_engine_conn_state(const kv_engine *e);

#endif
