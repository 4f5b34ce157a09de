/* core/worker.h — one worker (TP rank) of an engine: the model-runner main
 * actor, its KV memory (one region per KV group, registered with the
 * transport), and the connector's worker half.
 *
 * Owner: the worker main actor. The connector's own actors (sender,
 * receiver) read the worker's immutable configuration (cfg, rank, regions)
 * and never its mutable state. */
#ifndef KVCONN_CORE_WORKER_H
#define KVCONN_CORE_WORKER_H

#include "core/engine.h"

/* The last block a running request wrote on this rank: a decode step
 * digests only its new token there (kv_block_digest_grow). */
#define KV_WORKER_TAILS 64u
typedef struct kv_worker_tail {
    bool used;
    uint32_t id;
    kv_tokens tokens;
    kv_digest_run run;
    uint32_t dlo, dhi;  /* slots [dlo, dhi) of the request hold rejected drafts' KV (none: dlo >= dhi) */
} kv_worker_tail;

struct kv_worker {
    kv_owner owner;              /* the worker main actor */
    const kv_env *env;           /* borrowed */
    kv_rt *rt;                   /* borrowed */
    kv_engine_cfg cfg;           /* immutable copy */
    uint32_t rank;
    uint32_t node;               /* transport node of this rank (its actors run in the
                                  * engine's process: the scheduler's runtime node) */
    uint32_t main_actor;
    uint32_t sched_actor;
    kvt *t;                      /* borrowed: this node's transport */
    uint32_t head_lo, head_hi;   /* heads held by this rank */
    uint32_t block_bytes;        /* bytes of one block on this rank */
    uint32_t capacity;           /* block ids per group incl. the null block */
    uint8_t *kv[KV_GROUPS_MAX];  /* host memory per group (registered; the provider's) */
    const kv_kvmem_ops *mem;     /* the block-memory provider (core/kvmem.h) */
    void *memh[KV_GROUPS_MAX];   /* its handle per group */
    uint8_t *scratch;            /* one block: what mem->read may copy into */
    kvt_region region[KV_GROUPS_MAX];
    kv_conn_worker conn;         /* the connector's worker half */
    kv_worker_tail tail[KV_WORKER_TAILS]; /* by request id mod KV_WORKER_TAILS */
    /* Scratch (env): every step writes them before reading (the lists'
     * counts cleared, then filled; packed from those): */
    kv_m_step_result *result;    /* this step's reply, built in place */
    uint8_t *result_buf;         /* [KV_STEP_RESULT_PACKED_MAX]: ... and packed to be posted */
    uint64_t verified_blocks;    /* blocks checked against INV-DATA */
    uint32_t store_lookup_actor; /* rank 0 with a store connector: its lookup actor
                                  * (set at construction, then immutable) */
    uint64_t store_saves, store_loads; /* jobs issued */
    uint64_t store_checks;       /* INV-SAVE checks made (non-vacuity) */
};

kv_status kv_worker_new(kv_engine *e, uint32_t rank, kvt *t, kv_conn_kind kind, kv_worker **out);
/* Spawns one of the connector's actors of this rank, named
 * "<P|D><engine>.w<rank>.<what>", in the engine's process. */
kv_status kv_worker_spawn(const kv_worker *w, const char *what, kv_actor_fn fn, void *self, uint32_t mailbox_bytes,
                          uint32_t *out_actor);
void kv_worker_free(kv_worker *w);
/* Byte address of (group, block) in this rank's host memory (what the
 * transport and the store receiver write; with a staged provider not the KV
 * itself until kv_worker_absorb). */
static inline uint8_t *kv_worker_block(kv_worker *w, uint32_t g, uint32_t block) {
    return w->kv[g] + (uint64_t)block * w->block_bytes;
}
/* The provider's hooks (core/kvmem.h), worker main only. */
static inline void kv_worker_expose(kv_worker *w, uint32_t g, const uint32_t *blocks, uint32_t n) {
    if (n) w->mem->expose(w->memh[g], blocks, n);
}
static inline void kv_worker_absorb(kv_worker *w, uint32_t g, const uint32_t *blocks, uint32_t n) {
    if (n) w->mem->absorb(w->memh[g], blocks, n);
}
/* The KV of (group, block), read-only; valid until the next call. */
static inline const uint8_t *kv_worker_kv(kv_worker *w, uint32_t g, uint32_t block) {
    return w->mem->read(w->memh[g], block, w->scratch);
}
/* Expose / absorb every block of a table (null blocks included: harmless). */
void kv_worker_expose_table(kv_worker *w, const kv_block_table *t);
void kv_worker_absorb_table(kv_worker *w, const kv_block_table *t);

#endif
