/* core/block_pool.c — one engine's KV block pool for one group, with an LRU
 * free list and a prefix-cache index; see block_pool.h for the contract.
 *
 * Free list: a doubly-linked queue of block ids through meta[].prev/next
 * (0 = none). Block 0 (the null block) is never on it and never handed out.
 *
 * Prefix-cache index: open addressing with linear probing over index_cap
 * slots (a power of two >= 2 * capacity, so the load factor stays <= 1/2 and
 * the table never fills: each block carries at most one hash and each hash
 * maps to at most one block). Key 0 marks an empty slot. Deletion uses
 * backward-shift (no tombstones): after emptying a slot, later entries of the
 * same probe run whose home slot does not lie cyclically in (hole, entry] are
 * moved back into the hole, so every remaining key stays reachable from its
 * home slot without a gap.
 *
 * Contract breaches (double free, ids out of range, tagging or caching a
 * block that is not held, inconsistent state found by kv_pool_check) are
 * reported as INV-CONSERVE naming engine, group and block; the offending
 * operation is ignored so the pool stays consistent.
 *
 * Invariants (kv_pool_invariants, O(1), asserted on return from every
 * mutating entry point in every build, kv_pool_tag checking the one its
 * tag moves, P5; INV-ASSERT, core/assert.h):
 *   P1 n_free <= capacity - 1 (the null block is never free);
 *   P2 the free list is empty exactly when n_free is 0: head == 0 and
 *      tail == 0 then, both nonzero otherwise;
 *   P3 n_free_cached <= n_free and n_free_cached <= n_cached_index (a CACHED
 *      block keeps its index entry);
 *   P4 n_cached_index <= capacity - 1 (one hash per block at most);
 *   P5 n_free + n_tag[OWNED] + n_tag[PINNED] + n_tag[INFLIGHT] ==
 *      capacity - 1 (every usable block in exactly one class);
 *   P6 the null block is never held and never on the free list;
 * and, per block an operation touches (cheap, at the operation):
 *   B1 on_free <=> ref_cnt == 0, and only free blocks have free-list links;
 *   B2 a held block's tag is OWNED, PINNED or INFLIGHT.
 *   P7 (checked builds) the structural walk of kv_pool_check: the free list
 *      is a simple path of n_free blocks with consistent back links, the
 *      counters equal a recount, and index entries and hashed blocks are one
 *      to one. It walks the whole pool, so it runs every walk_period
 *      transitions (about two blocks per transition on any pool size),
 *      reported as INV-ASSERT; the checker calls the same walk as
 *      INV-CONSERVE.
 *
 * Everything is deterministic: no pointer-order iteration, no randomness. */
#include "core/block_pool.h"

#include <stddef.h>
#include <string.h>

#include "core/assert.h"
#include "kvconn/types.h"

#define POOL_ASSERT(p, cond, ...) KV_ASSERT((p)->env, (p)->engine, cond, __VA_ARGS__)

static bool pool_walk(const kv_block_pool *p, kv_inv inv);

/* ---- index --------------------------------------------------------------- */

static uint64_t index_mix(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    return x ^ (x >> 33);
}

static uint32_t index_home(const kv_block_pool *p, uint64_t hash) {
    return (uint32_t)(index_mix(hash) & (uint64_t)(p->index_cap - 1u));
}

/* Slot holding `hash`, or index_cap when absent. */
static uint32_t index_find(const kv_block_pool *p, uint64_t hash) {
    uint32_t mask = p->index_cap - 1u;
    uint32_t s = index_home(p, hash);
    for (uint32_t n = 0; n < p->index_cap; n++, s = (s + 1u) & mask) {
        if (p->index_hash[s] == 0) return p->index_cap;
        if (p->index_hash[s] == hash) return s;
    }
    return p->index_cap;
}

/* Inserts a key known to be absent. The table cannot be full (see top). */
static void index_insert(kv_block_pool *p, uint64_t hash, uint32_t id) {
    uint32_t mask = p->index_cap - 1u;
    uint32_t s = index_home(p, hash);
    for (uint32_t n = 0; n < p->index_cap; n++, s = (s + 1u) & mask) {
        if (p->index_hash[s] != 0) continue;
        p->index_hash[s] = hash;
        p->index_block[s] = id;
        p->n_cached_index++;
        return;
    }
    /* load factor <= 1/2 by construction: a full table means n_cached_index
     * lost count of the entries */
    POOL_ASSERT(p, false, "engine %u group %u: prefix index full (%u slots, %u entries) inserting block %u",
                p->engine, p->group, p->index_cap, p->n_cached_index, id);
}

/* True when home slot k lies cyclically in (hole, j]: the entry at j must
 * then stay where it is. */
static bool index_stays(uint32_t hole, uint32_t j, uint32_t k) {
    if (hole <= j) return hole < k && k <= j;
    return hole < k || k <= j;
}

/* Backward-shift deletion of slot s. */
static void index_remove_slot(kv_block_pool *p, uint32_t s) {
    if (!POOL_ASSERT(p, s < p->index_cap && p->index_hash[s] != 0 && p->n_cached_index > 0,
                     "engine %u group %u: removing index slot %u (empty or out of %u), %u entries", p->engine,
                     p->group, s, p->index_cap, p->n_cached_index))
        return;
    uint32_t mask = p->index_cap - 1u;
    uint32_t hole = s;
    uint32_t j = s;
    for (uint32_t n = 0; n < p->index_cap; n++) {
        j = (j + 1u) & mask;
        if (p->index_hash[j] == 0) break;
        if (index_stays(hole, j, index_home(p, p->index_hash[j]))) continue;
        p->index_hash[hole] = p->index_hash[j];
        p->index_block[hole] = p->index_block[j];
        hole = j;
    }
    p->index_hash[hole] = 0;
    p->index_block[hole] = 0;
    p->n_cached_index--;
}

/* Drops block id's hash from the index (if it is the indexed holder). */
static void drop_hash(kv_block_pool *p, uint32_t id) {
    uint64_t h = p->meta[id].hash;
    if (h == 0) return;
    uint32_t s = index_find(p, h);
    if (s < p->index_cap && p->index_block[s] == id) index_remove_slot(p, s);
    if (p->meta[id].on_free) p->n_free_cached--;
    p->meta[id].hash = 0;
    /* the evicted content is gone from the index: no later hit finds it */
    POOL_ASSERT(p, kv_pool_lookup(p, h) != id, "engine %u group %u block %u: hash %llx still indexed after its drop",
                p->engine, p->group, id, (unsigned long long)h);
}

/* ---- free list ----------------------------------------------------------- */

static inline void list_unlink(kv_block_pool *p, uint32_t id) {
    kv_block_meta *m = &p->meta[id];
    /* unlinking a block that is not on the list would splice its stale
     * links into the list (and count n_free down for nothing) */
    if (!POOL_ASSERT(p, m->on_free && p->n_free > 0, "engine %u group %u block %u: unlink with on_free %u, n_free %u",
                     p->engine, p->group, id, m->on_free, p->n_free))
        return;
    if (m->prev) p->meta[m->prev].next = m->next;
    else p->head = m->next;
    if (m->next) p->meta[m->next].prev = m->prev;
    else p->tail = m->prev;
    m->prev = m->next = 0;
    m->on_free = 0;
    p->n_free--;
    if (m->hash) p->n_free_cached--;
}

static inline void list_append(kv_block_pool *p, uint32_t id) {
    kv_block_meta *m = &p->meta[id];
    if (!POOL_ASSERT(p, !m->on_free && m->ref_cnt == 0 && id != KV_NULL_BLOCK,
                     "engine %u group %u block %u: append with on_free %u, ref_cnt %u", p->engine, p->group, id,
                     m->on_free, m->ref_cnt))
        return;
    m->prev = p->tail;
    m->next = 0;
    if (p->tail) p->meta[p->tail].next = id;
    else p->head = id;
    p->tail = id;
    m->on_free = 1;
    p->n_free++;
    if (m->hash) p->n_free_cached++;
}

/* ---- invariants ---------------------------------------------------------- */

/* P1-P6 as one branch-free test: the pool's every transition pays this. */
static bool pool_invariants_hold(const kv_block_pool *p) {
    uint32_t usable = p->capacity - 1u;
    uint64_t held = (uint64_t)p->n_tag[KV_BT_OWNED] + p->n_tag[KV_BT_PINNED] + p->n_tag[KV_BT_INFLIGHT];
    return (p->capacity >= 1u) & (p->n_free <= usable) & ((p->head == 0) == (p->n_free == 0)) &
           ((p->tail == 0) == (p->n_free == 0)) & (p->n_free_cached <= p->n_free) &
           (p->n_free_cached <= p->n_cached_index) & (p->n_cached_index <= usable) & (held + p->n_free == usable) &
           (p->meta[KV_NULL_BLOCK].ref_cnt == 0) & (p->meta[KV_NULL_BLOCK].on_free == 0);
}

bool kv_pool_invariants(const kv_block_pool *p) {
    if (KV_LIKELY(pool_invariants_hold(p))) return true;
    /* one failed: the assertions below name which */
    uint32_t usable = p->capacity - 1u;
    if (!POOL_ASSERT(p, p->capacity >= 1u && p->n_free <= usable, "engine %u group %u: n_free %u of %u usable",
                     p->engine, p->group, p->n_free, usable))
        return false;
    if (!POOL_ASSERT(p, (p->head == 0) == (p->n_free == 0) && (p->tail == 0) == (p->n_free == 0),
                     "engine %u group %u: free list head %u tail %u with n_free %u", p->engine, p->group, p->head,
                     p->tail, p->n_free))
        return false;
    if (!POOL_ASSERT(p, p->n_free_cached <= p->n_free && p->n_free_cached <= p->n_cached_index,
                     "engine %u group %u: %u cached free blocks, %u free, %u indexed", p->engine, p->group,
                     p->n_free_cached, p->n_free, p->n_cached_index))
        return false;
    if (!POOL_ASSERT(p, p->n_cached_index <= usable, "engine %u group %u: %u index entries for %u blocks", p->engine,
                     p->group, p->n_cached_index, usable))
        return false;
    uint64_t held = (uint64_t)p->n_tag[KV_BT_OWNED] + p->n_tag[KV_BT_PINNED] + p->n_tag[KV_BT_INFLIGHT];
    if (!POOL_ASSERT(p, held + p->n_free == usable,
                     "engine %u group %u: free %u + owned %u + pinned %u + inflight %u != %u", p->engine, p->group,
                     p->n_free, p->n_tag[KV_BT_OWNED], p->n_tag[KV_BT_PINNED], p->n_tag[KV_BT_INFLIGHT], usable))
        return false;
    const kv_block_meta *z = &p->meta[KV_NULL_BLOCK];
    return POOL_ASSERT(p, z->ref_cnt == 0 && !z->on_free, "engine %u group %u: null block ref_cnt %u on_free %u",
                       p->engine, p->group, z->ref_cnt, z->on_free);
}

/* B1, B2 for one block an operation just changed. */
static inline bool block_ok(const kv_block_pool *p, uint32_t id) {
    const kv_block_meta *m = &p->meta[id];
    return POOL_ASSERT(p, (m->ref_cnt == 0) == (m->on_free == 1) && (m->on_free || (!m->prev && !m->next)) &&
                              (m->on_free || m->tag <= KV_BT_INFLIGHT),
                       "engine %u group %u block %u: ref_cnt %u on_free %u tag %u links %u/%u", p->engine, p->group,
                       id, m->ref_cnt, m->on_free, m->tag, m->prev, m->next);
}

/* Checked builds: P7 every walk_period transitions. Every 64th up to 128
 * blocks, every 256th at 512, ...: the walk costs about two blocks per
 * transition on any pool size. */
static void pool_walk_sampled(kv_block_pool *p) {
    if (!KV_CHECKED) return;
    uint32_t period = 64u * ((p->capacity + 127u) / 128u);
    if (++p->walk_tick < period) return;
    p->walk_tick = 0;
    pool_walk(p, KV_INV_ASSERT);
}

/* The postcondition of every mutating entry point: P1-P6, then P7 sampled. */
static void pool_transition_done(kv_block_pool *p) {
    if (kv_pool_invariants(p)) pool_walk_sampled(p);
}

/* ---- lifecycle ----------------------------------------------------------- */

static void pool_fill(kv_block_pool *p) {
    memset(p->meta, 0, (size_t)p->capacity * sizeof p->meta[0]);
    memset(p->index_hash, 0, (size_t)p->index_cap * sizeof p->index_hash[0]);
    memset(p->index_block, 0, (size_t)p->index_cap * sizeof p->index_block[0]);
    p->n_free = 0;
    p->head = p->tail = 0;
    p->n_cached_index = 0;
    p->n_free_cached = 0;
    memset(p->n_tag, 0, sizeof p->n_tag);
    p->evictions = 0;
    p->walk_tick = 0;
    for (uint32_t id = 1; id < p->capacity; id++) list_append(p, id);
    /* a fresh pool: every usable block free, in id order */
    POOL_ASSERT(p, p->n_free == p->capacity - 1u, "engine %u group %u: %u free after fill of %u", p->engine,
                p->group, p->n_free, p->capacity);
}

static uint32_t index_cap_for(uint32_t capacity) {
    uint32_t cap = 2;
    while (cap < 2u * capacity) cap *= 2u;
    return cap;
}

static void pool_release(kv_block_pool *p) {
    kv_release(p->env, p->meta);
    kv_release(p->env, p->index_hash);
    kv_release(p->env, p->index_block);
    p->meta = NULL;
    p->index_hash = NULL;
    p->index_block = NULL;
}

kv_status kv_pool_init(kv_block_pool *p, const kv_env *env, uint32_t owner_actor, uint32_t engine,
                       uint32_t group, uint32_t capacity) {
    if (!p || !env) return KV_EINVAL;
    memset(p, 0, sizeof *p);
    /* capacity counts the null block; at most KV_POOL_BLOCKS_MAX usable. */
    if (capacity < 1u || capacity > KV_POOL_BLOCKS_MAX + 1u) return KV_EINVAL;
    p->owner = (kv_owner){.actor = owner_actor, .what = "block pool"};
    p->env = env;
    p->engine = engine;
    p->group = group;
    p->capacity = capacity;
    p->index_cap = index_cap_for(capacity);
    /* scratch: pool_fill zeroes all three */
    p->meta = kv_alloc_scratch(env, (size_t)capacity * sizeof p->meta[0]);
    p->index_hash = kv_alloc_scratch(env, (size_t)p->index_cap * sizeof p->index_hash[0]);
    p->index_block = kv_alloc_scratch(env, (size_t)p->index_cap * sizeof p->index_block[0]);
    if (!p->meta || !p->index_hash || !p->index_block) {
        pool_release(p);
        memset(p, 0, sizeof *p);
        return KV_ENOMEM;
    }
    pool_fill(p);
    return KV_OK;
}

void kv_pool_reset(kv_block_pool *p) {
    kv_owner_check(p->env, &p->owner, p->engine);
    if (!p->meta) return;
    pool_fill(p);
}

void kv_pool_deinit(kv_block_pool *p) {
    if (!p || !p->env) return;
    pool_release(p);
    memset(p, 0, sizeof *p);
}

/* ---- operations ---------------------------------------------------------- */

uint32_t kv_pool_num_free(const kv_block_pool *p) { return p->n_free; }

static void take_head(kv_block_pool *p, uint32_t *out) {
    uint32_t id = p->head;
    *out = KV_NULL_BLOCK;
    /* the caller checked n_free: a free list that ends early lost blocks */
    if (!POOL_ASSERT(p, id != KV_NULL_BLOCK && id < p->capacity, "engine %u group %u: free-list head %u with n_free %u",
                     p->engine, p->group, id, p->n_free))
        return;
    list_unlink(p, id);
    if (p->meta[id].hash != 0) {
        drop_hash(p, id);
        p->evictions++;
    }
    p->meta[id].ref_cnt = 1;
    p->meta[id].tag = KV_BT_OWNED;
    p->n_tag[KV_BT_OWNED]++;
    *out = id;
    block_ok(p, id);
}

kv_status kv_pool_alloc(kv_block_pool *p, uint32_t n, uint32_t *out) {
    kv_owner_check(p->env, &p->owner, p->engine);
    if (n == 0) return KV_OK;
    if (!out) return KV_EINVAL;
    if (n > p->n_free) return KV_ENOMEM;
    for (uint32_t i = 0; i < n; i++) take_head(p, &out[i]);
    pool_transition_done(p);
    return KV_OK;
}

static bool id_in_range(const kv_block_pool *p, uint32_t id) { return id != 0 && id < p->capacity; }

static void free_one(kv_block_pool *p, uint32_t id) {
    if (id == KV_NULL_BLOCK) return;
    if (id >= p->capacity) {
        kv_violate(p->env, KV_INV_CONSERVE, p->engine, KV_REQ_NONE,
                   "engine %u group %u: free of block %u out of range (capacity %u)", p->engine,
                   p->group, id, p->capacity);
        return;
    }
    kv_block_meta *m = &p->meta[id];
    if (m->ref_cnt == 0) {
        kv_violate(p->env, KV_INV_CONSERVE, p->engine, KV_REQ_NONE,
                   "engine %u group %u: double free of block %u (not held)", p->engine, p->group,
                   id);
        return;
    }
    if (--m->ref_cnt > 0) return;
    if (m->tag <= KV_BT_INFLIGHT) p->n_tag[m->tag]--;
    m->tag = KV_BT_OWNED;
    list_append(p, id);
    block_ok(p, id);
}

void kv_pool_free(kv_block_pool *p, const uint32_t *ids, uint32_t n) {
    kv_owner_check(p->env, &p->owner, p->engine);
    if (!ids) return;
    for (uint32_t i = 0; i < n; i++) free_one(p, ids[i]);
    pool_transition_done(p);
}

uint32_t kv_pool_lookup(const kv_block_pool *p, uint64_t hash) {
    if (hash == 0 || !p->index_hash) return 0;
    uint32_t s = index_find(p, hash);
    return s < p->index_cap ? p->index_block[s] : 0;
}

kv_status kv_pool_touch(kv_block_pool *p, uint32_t id) {
    kv_owner_check(p->env, &p->owner, p->engine);
    if (!id_in_range(p, id)) return KV_EINVAL;
    kv_block_meta *m = &p->meta[id];
    if (m->ref_cnt == UINT32_MAX) return KV_EINVAL;
    if (m->ref_cnt == 0) {
        list_unlink(p, id);
        m->tag = KV_BT_OWNED;
        p->n_tag[KV_BT_OWNED]++;
    }
    m->ref_cnt++;
    block_ok(p, id);
    pool_transition_done(p);
    return KV_OK;
}

/* Reports a cache/tag on a block that is not held; true when id is usable. */
static bool held_or_report(const kv_block_pool *p, uint32_t id, const char *op) {
    if (id_in_range(p, id) && p->meta[id].ref_cnt > 0) return true;
    kv_violate(p->env, KV_INV_CONSERVE, p->engine, KV_REQ_NONE,
               "engine %u group %u: %s of block %u which is not held", p->engine, p->group, op, id);
    return false;
}

void kv_pool_cache(kv_block_pool *p, uint32_t id, uint64_t hash) {
    kv_owner_check(p->env, &p->owner, p->engine);
    if (id == KV_NULL_BLOCK || hash == 0) return;
    if (!held_or_report(p, id, "cache")) return;
    /* A block's content is fixed once full: its first hash stays. */
    if (p->meta[id].hash != 0) return;
    if (index_find(p, hash) < p->index_cap) return; /* first writer wins */
    p->meta[id].hash = hash;
    index_insert(p, hash, id);
    /* postcondition: the hash now finds this block (a lookup from the next
     * request's prefix hit must see what was just cached) */
    POOL_ASSERT(p, kv_pool_lookup(p, hash) == id, "engine %u group %u block %u: cached hash %llx finds block %u",
                p->engine, p->group, id, (unsigned long long)hash, kv_pool_lookup(p, hash));
    pool_transition_done(p);
}

void kv_pool_tag(kv_block_pool *p, uint32_t id, kv_block_tag tag) {
    kv_owner_check(p->env, &p->owner, p->engine);
    if (id == KV_NULL_BLOCK) return;
    if (!held_or_report(p, id, "tag")) return;
    if ((unsigned)tag > (unsigned)KV_BT_INFLIGHT) {
        kv_violate(p->env, KV_INV_CONSERVE, p->engine, KV_REQ_NONE,
                   "engine %u group %u: bad tag %u for block %u", p->engine, p->group,
                   (unsigned)tag, id);
        return;
    }
    if (p->meta[id].tag <= KV_BT_INFLIGHT) p->n_tag[p->meta[id].tag]--;
    p->meta[id].tag = (uint8_t)tag;
    p->n_tag[tag]++;
    /* a tag moves one held block between held classes: of P1-P6 only P5's
     * counts change (the engine tags every block of a table: the hot path) */
    if (block_ok(p, id) &&
        POOL_ASSERT(p, p->n_tag[KV_BT_OWNED] + p->n_tag[KV_BT_PINNED] + p->n_tag[KV_BT_INFLIGHT] + p->n_free == p->capacity - 1u,
                    "engine %u group %u block %u: tagged %u, owned %u + pinned %u + inflight %u + free %u != %u",
                    p->engine, p->group, id, (unsigned)tag, p->n_tag[KV_BT_OWNED], p->n_tag[KV_BT_PINNED],
                    p->n_tag[KV_BT_INFLIGHT], p->n_free, p->capacity - 1u))
        pool_walk_sampled(p);
}

bool kv_pool_is_held(const kv_block_pool *p, uint32_t id) {
    return id_in_range(p, id) && p->meta[id].ref_cnt > 0;
}

/* ---- accounting ---------------------------------------------------------- */

static void report_add(kv_pool_report *r, const kv_block_meta *m) {
    if (m->on_free) {
        if (m->hash) r->cached++;
        else r->free++;
        return;
    }
    switch ((kv_block_tag)m->tag) {
    case KV_BT_OWNED: r->owned++; break;
    case KV_BT_PINNED: r->pinned++; break;
    case KV_BT_INFLIGHT: r->inflight++; break;
    }
    /* An invalid tag is counted nowhere; kv_pool_check reports it. */
}

void kv_pool_report_get(const kv_block_pool *p, kv_pool_report *out) {
    *out = (kv_pool_report){.capacity = p->capacity ? p->capacity - 1u : 0,
                            .free = p->n_free - p->n_free_cached,
                            .cached = p->n_free_cached,
                            .owned = p->n_tag[KV_BT_OWNED],
                            .pinned = p->n_tag[KV_BT_PINNED],
                            .inflight = p->n_tag[KV_BT_INFLIGHT]};
}

/* One failed structural check: INV-CONSERVE for the checker
 * (kv_pool_check), INV-ASSERT with the failing check's line when the pool
 * asserts its own structure (P7). */
static bool pool_check_fail_at(const kv_block_pool *p, kv_inv inv, const char *what, uint32_t id, int line) {
    if (inv == KV_INV_ASSERT)
        return kv_assert_fail(p->env, p->engine, __FILE__, line, what, "engine %u group %u block %u: pool structure",
                              p->engine, p->group, id);
    kv_violate(p->env, inv, p->engine, KV_REQ_NONE, "engine %u group %u block %u: pool check: %s", p->engine, p->group,
               id, what);
    return false;
}
#define pool_check_fail(p, what, id) pool_check_fail_at((p), inv, (what), (id), __LINE__)

/* Head to tail: a simple path of free blocks with consistent back links.
 * One walk is enough: each block's prev is checked against the block before
 * it, the path ends at tail and holds n_free blocks, so the walk back from
 * tail over prev is this path reversed, its next links the ones walked. */
static bool pool_check_forward(const kv_block_pool *p, kv_inv inv) {
    uint32_t prev = 0, n = 0;
    for (uint32_t id = p->head; id != 0; id = p->meta[id].next) {
        if (id >= p->capacity) return pool_check_fail(p, "free-list link out of range", id);
        if (++n > p->n_free) return pool_check_fail(p, "free list longer than n_free", id);
        if (p->meta[id].prev != prev) return pool_check_fail(p, "free-list prev link broken", id);
        if (!p->meta[id].on_free) return pool_check_fail(p, "on free list without on_free", id);
        if (p->meta[id].ref_cnt != 0) return pool_check_fail(p, "on free list with ref_cnt", id);
        prev = id;
    }
    if (prev != p->tail) return pool_check_fail(p, "free-list tail mismatch", prev);
    if (n != p->n_free) return pool_check_fail(p, "free list shorter than n_free", prev);
    return true;
}

static bool pool_check_block(const kv_block_pool *p, uint32_t id, kv_inv inv) {
    const kv_block_meta *m = &p->meta[id];
    if (m->on_free > 1) return pool_check_fail(p, "bad on_free flag", id);
    if ((m->ref_cnt == 0) != (m->on_free == 1))
        return pool_check_fail(p, "ref_cnt == 0 differs from on free list", id);
    if (!m->on_free && m->tag > KV_BT_INFLIGHT) return pool_check_fail(p, "bad tag", id);
    if (!m->on_free && (m->prev || m->next)) return pool_check_fail(p, "held block with links", id);
    if (m->hash && kv_pool_lookup(p, m->hash) != id)
        return pool_check_fail(p, "block hash not indexed to this block", id);
    return true;
}

/* One pass over the blocks: each block's own state, its index entry, and
 * the accounting recounted (the scan must equal the counters). */
static bool pool_check_blocks(const kv_block_pool *p, kv_inv inv) {
    const kv_block_meta *z = &p->meta[0];
    if (z->ref_cnt || z->on_free || z->hash || z->prev || z->next)
        return pool_check_fail(p, "null block in use", 0);
    uint32_t on_free = 0, hashed = 0;
    kv_pool_report r = {.capacity = p->capacity - 1u}, c;
    for (uint32_t id = 1; id < p->capacity; id++) {
        if (!pool_check_block(p, id, inv)) return false;
        on_free += p->meta[id].on_free;
        hashed += p->meta[id].hash != 0;
        report_add(&r, &p->meta[id]);
    }
    if (on_free != p->n_free) return pool_check_fail(p, "on_free count differs from n_free", 0);
    if (hashed != p->n_cached_index) return pool_check_fail(p, "hashed blocks differ from index", 0);
    kv_pool_report_get(p, &c);
    if (memcmp(&r, &c, sizeof r) != 0) return pool_check_fail(p, "counted accounting differs from a scan", 0);
    uint32_t sum = r.free + r.cached + r.owned + r.pinned + r.inflight;
    if (sum != r.capacity) return pool_check_fail(p, "report does not sum to capacity - 1", 0);
    if (r.free + r.cached != p->n_free) return pool_check_fail(p, "report free differs from n_free", 0);
    return true;
}

/* The index side: every entry points in range at a block with that hash,
 * and there are exactly n_cached_index of them. With pool_check_blocks (each
 * hashed block is found by a lookup of its hash, and there are
 * n_cached_index hashed blocks) that makes entries and hashed blocks one to
 * one, so no entry is unreachable or stale. */
static bool pool_check_index(const kv_block_pool *p, kv_inv inv) {
    uint32_t n = 0;
    for (uint32_t s = 0; s < p->index_cap; s++) {
        uint64_t h = p->index_hash[s];
        if (h == 0) continue;
        n++;
        uint32_t id = p->index_block[s];
        if (!id_in_range(p, id)) return pool_check_fail(p, "index entry points out of range", id);
        if (p->meta[id].hash != h) return pool_check_fail(p, "index entry hash mismatch", id);
    }
    if (n != p->n_cached_index) return pool_check_fail(p, "n_cached_index differs from index", 0);
    return true;
}

static bool pool_walk(const kv_block_pool *p, kv_inv inv) {
    if (!p->meta || p->capacity == 0) return pool_check_fail(p, "pool not initialised", 0);
    if (p->index_cap < 2u * p->capacity || (p->index_cap & (p->index_cap - 1u)) != 0)
        return pool_check_fail(p, "index_cap not a power of two >= 2 * capacity", 0);
    if (p->n_free >= p->capacity) return pool_check_fail(p, "n_free exceeds usable blocks", 0);
    return pool_check_forward(p, inv) && pool_check_blocks(p, inv) && pool_check_index(p, inv);
}

bool kv_pool_check(const kv_block_pool *p) {
    if (!p->env) return false; /* never initialised: nobody to report to */
    return pool_walk(p, KV_INV_CONSERVE);
}
