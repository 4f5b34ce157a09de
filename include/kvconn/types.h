/* kvconn/types.h — value types shared by the engine model and connectors. */
#ifndef KVCONN_TYPES_H
#define KVCONN_TYPES_H

#include <stdbool.h>
#include <stdint.h>

#include "kvconn/limits.h"
#include "kvconn/transport.h"

#define KV_REQ_NONE UINT32_MAX
/* Block id 0 of every pool is vLLM's null block: a placeholder for slots a
 * sliding-window or mamba group no longer holds. It is never allocated. */
#define KV_NULL_BLOCK 0u

typedef enum kv_group_kind { KV_GROUP_FULL = 0, KV_GROUP_SLIDING = 1, KV_GROUP_MAMBA = 2 } kv_group_kind;

typedef struct kv_group_cfg {
    uint8_t kind;       /* kv_group_kind */
    uint32_t window;    /* tokens, KV_GROUP_SLIDING only */
} kv_group_cfg;

/* Per-group block ids of one request (vLLM's tuple[list[int], ...]).
 * n_groups == 0 is the empty tuple `()`. */
typedef struct kv_block_table {
    uint32_t n_groups;                              /* 0..KV_GROUPS_MAX */
    uint32_t n[KV_GROUPS_MAX];                      /* ids used in each group */
    uint32_t id[KV_GROUPS_MAX][KV_REQ_BLOCKS_MAX];  /* block ids; KV_NULL_BLOCK allowed */
} kv_block_table;

/* True when some group holds a non-null block (Python's any(blocks)). */
bool kv_blocks_any(const kv_block_table *t);
uint32_t kv_blocks_count_real(const kv_block_table *t);
void kv_blocks_clear(kv_block_table *t, uint32_t n_groups);
/* dst = src for every reader that stays within n_groups and n[g] (all of
 * them): only the used ids are copied. Checked builds (KVCONN_CHECKED) set
 * the rest of each group's row to an id no pool has, so a reader that
 * strays past n[g] is caught by the pool's bounds checks. */
void kv_blocks_copy(kv_block_table *dst, const kv_block_table *src);

/* A transfer id: 128 bits the proxy draws per request from its env's
 * entropy (kv_random_u64: the kernel's generator in production, a counter
 * through a mixer in the simulator), so it cannot be guessed from another
 * request's. P serves a pull of it only to the D engine the proxy named. */
typedef struct kv_xfer_id {
    uint64_t hi, lo;
} kv_xfer_id;

static inline bool kv_xfer_id_eq(kv_xfer_id a, kv_xfer_id b) { return a.hi == b.hi && a.lo == b.lo; }
/* What logs print of an id: its first 32 bits, enough to follow one
 * request through P's and D's logs, never the whole capability. */
static inline uint32_t kv_xfer_id_short(kv_xfer_id a) { return (uint32_t)(a.hi >> 32); }

/* kv_transfer_params, as the proxy injects them. */
typedef struct kv_xfer_params {
    bool do_remote_prefill;   /* D: fetch the prompt's KV from remote_engine */
    bool do_remote_decode;    /* P: hold the KV for a decoder to pull */
    bool has_transfer_id;
    bool has_remote_engine;
    bool has_bootstrap;
    bool has_decode_engine;
    kv_xfer_id transfer_id;
    uint32_t remote_engine;   /* D: engine index of P */
    uint32_t decode_engine;   /* P: the D engine the proxy named; only its ranks may pull */
    kvt_addr remote_bootstrap;/* bootstrap address of P */
} kv_xfer_params;

typedef enum kv_fail_policy { KV_POLICY_FAIL = 0, KV_POLICY_RECOMPUTE = 1 } kv_fail_policy;

/* A bounded list of request ids. */
typedef struct kv_id_list {
    uint32_t n;
    uint32_t id[KV_ENGINE_REQS_MAX];
} kv_id_list;

bool kv_id_list_has(const kv_id_list *l, uint32_t id);
/* Appends unless present; false when full. */
bool kv_id_list_add(kv_id_list *l, uint32_t id);
/* to = from, copying only the ids in use. */
void kv_id_list_copy(kv_id_list *to, const kv_id_list *from);
bool kv_id_list_remove(kv_id_list *l, uint32_t id);
/* Adds every id of `from` to `to` (a union), then empties `from`. */
void kv_id_list_move(kv_id_list *to, kv_id_list *from);

/* (group, block) pairs whose load failed (vLLM's invalid_block_ids). */
typedef struct kv_bad_block {
    uint32_t group, block;
} kv_bad_block;

#define KV_BAD_BLOCKS_MAX (KV_ENGINE_REQS_MAX * 4u)
/* What one connector lists per step, so that a MultiConnector's children
 * together always fit; a failure with more blocks than are left is
 * reported for its whole request (failed_recving) instead. */
#define KV_BAD_BLOCKS_CHILD_MAX (KV_BAD_BLOCKS_MAX / 2u)

typedef struct kv_bad_blocks {
    uint32_t n;
    kv_bad_block e[KV_BAD_BLOCKS_MAX];
} kv_bad_blocks;

/* Appends `from` to `to` as far as it fits, then empties `from`. */
void kv_bad_blocks_move(kv_bad_blocks *to, kv_bad_blocks *from);

/* KVConnectorOutput: what the worker side reports after a step. */
typedef struct kv_conn_output {
    kv_id_list finished_sending;
    kv_id_list finished_recving;
    kv_id_list failed_recving; /* request-level load failures (HMA, >1 group) */
    kv_bad_blocks invalid_blocks;
} kv_conn_output;

void kv_conn_output_clear(kv_conn_output *o);

#endif
