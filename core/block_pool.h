/* core/block_pool.h — one KV block pool (the "HBM") of one engine for one KV
 * group, with vLLM-style prefix caching.
 *
 * Blocks 1..capacity-1 are usable; block 0 is the null block and is never
 * handed out. A block is in exactly one accounting class:
 *   FREE      on the free list, no content worth keeping
 *   CACHED    on the free list but still holding a full block whose hash is
 *             in the prefix-cache index (evictable; counts as free for LEAK)
 *   OWNED     ref_cnt > 0, held by one or more running/waiting requests
 *   PINNED    ref_cnt > 0, held only for a send (P's delayed free)
 *   INFLIGHT  ref_cnt > 0, destination of a transfer not yet finished (D)
 * PINNED and INFLIGHT are tags the engine sets on owned blocks so the checker
 * can see them (INV-CONSERVE: free + cached + owned + pinned + inflight ==
 * capacity - 1).
 *
 * Free list order is LRU (vLLM's FreeKVCacheBlockQueue): freed blocks go to
 * the tail, allocation pops from the head, a cache hit removes the block from
 * wherever it is. Evicting a CACHED block removes its hash from the index.
 *
 * Owner: the engine's scheduler actor; every entry point checks it.
 * No allocation after init. */
#ifndef KVCONN_CORE_BLOCK_POOL_H
#define KVCONN_CORE_BLOCK_POOL_H

#include <stdbool.h>
#include <stdint.h>

#include "kvconn/actor.h"
#include "kvconn/env.h"
#include "kvconn/limits.h"
#include "kvconn/status.h"

typedef enum kv_block_tag { KV_BT_OWNED = 0, KV_BT_PINNED = 1, KV_BT_INFLIGHT = 2 } kv_block_tag;

typedef struct kv_pool_report {
    uint32_t capacity;  /* usable blocks (excludes the null block) */
    uint32_t free;      /* on the free list without a cached hash */
    uint32_t cached;    /* on the free list with a cached hash */
    uint32_t owned;
    uint32_t pinned;
    uint32_t inflight;
} kv_pool_report;

typedef struct kv_block_meta {
    uint32_t ref_cnt;  /* holders */
    uint32_t prev, next; /* free-list links (block ids; 0 = none) */
    uint64_t hash;     /* prefix-cache hash; 0 = none */
    uint8_t tag;       /* kv_block_tag, meaningful when ref_cnt > 0 */
    uint8_t on_free;   /* 1 while on the free list */
} kv_block_meta;

typedef struct kv_block_pool {
    kv_owner owner;        /* the engine scheduler actor */
    const kv_env *env;     /* borrowed */
    uint32_t engine;       /* for reports */
    uint32_t group;        /* for reports */
    uint32_t capacity;     /* total ids including the null block */
    uint32_t n_free;       /* blocks on the free list (free + cached) */
    uint32_t head, tail;   /* free-list ends (0 = empty) */
    kv_block_meta *meta;   /* [capacity], owned, from env at init */
    /* Prefix-cache index: open addressing, hash -> block id. */
    uint32_t index_cap;    /* power of two >= 2 * capacity */
    uint64_t *index_hash;  /* [index_cap], 0 = empty slot; owned */
    uint32_t *index_block; /* [index_cap]; owned */
    uint32_t n_cached_index; /* entries in the index */
    uint32_t n_free_cached;  /* free-list blocks that keep a hash (CACHED) */
    uint32_t n_tag[3];       /* held blocks per kv_block_tag; the report is O(1) */
    uint64_t evictions;    /* cached blocks reused for new content */
    uint32_t walk_tick;    /* checked builds: transitions since the last structural walk */
} kv_block_pool;

/* capacity counts the null block: capacity 25 gives 24 usable blocks. */
kv_status kv_pool_init(kv_block_pool *p, const kv_env *env, uint32_t owner_actor, uint32_t engine,
                       uint32_t group, uint32_t capacity);
/* Back to the just-initialised state without allocating. */
void kv_pool_reset(kv_block_pool *p);
void kv_pool_deinit(kv_block_pool *p);

uint32_t kv_pool_num_free(const kv_block_pool *p);
/* Takes n blocks (ref_cnt 1, tag OWNED) into out; evicts cached blocks LRU.
 * KV_ENOMEM and no change if fewer than n are free. */
kv_status kv_pool_alloc(kv_block_pool *p, uint32_t n, uint32_t *out);
/* Drops one reference of each block (null blocks ignored). A block reaching 0
 * goes to the free-list tail; it keeps its hash (CACHED) if it has one.
 * A block that is not held reports INV-CONSERVE (double free). */
void kv_pool_free(kv_block_pool *p, const uint32_t *ids, uint32_t n);
/* Prefix cache: the block holding `hash`, or 0. Does not take a reference. */
uint32_t kv_pool_lookup(const kv_block_pool *p, uint64_t hash);
/* Takes a reference on a cached or held block (a cache hit). */
kv_status kv_pool_touch(kv_block_pool *p, uint32_t id);
/* Records that held block id now holds full content with this hash. A hash
 * already cached by another block is left alone (first writer wins). */
void kv_pool_cache(kv_block_pool *p, uint32_t id, uint64_t hash);
/* Sets the accounting tag of a held block. */
void kv_pool_tag(kv_block_pool *p, uint32_t id, kv_block_tag tag);
bool kv_pool_is_held(const kv_block_pool *p, uint32_t id);
/* O(1): from counters kept by every transition. kv_pool_check recounts by
 * scanning and reports any difference. */
void kv_pool_report_get(const kv_block_pool *p, kv_pool_report *out);
/* Full structural check (free list consistent, counts add up, index points
 * at blocks with that hash). Reports INV-CONSERVE and returns false on the
 * first problem. Linear time; for the checker. The pool runs the same walk
 * itself in checked builds, sampled, as an INV-ASSERT (block_pool.c P7). */
bool kv_pool_check(const kv_block_pool *p);
/* P1-P6 of block_pool.c: O(1), each an INV-ASSERT naming engine and group;
 * true when all hold. Every mutating entry point asserts them on return. */
bool kv_pool_invariants(const kv_block_pool *p);

#endif
