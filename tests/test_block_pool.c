/* tests/test_block_pool.c — core/block_pool: LRU free list, exhaustion,
 * prefix cache and its open-addressing index, violation reporting, accounting
 * (report sums), reset, tags and owner checks. */
#include <criterion/criterion.h>
#include <string.h>

#include "core/block_pool.h"
#include "kvconn/types.h"
#include "tests/support/test_env.h"

#define OWNER 3u
#define ENGINE 5u
#define GROUP 2u

static test_env te;
static kv_block_pool pool;

static void setup_pool(uint32_t capacity) {
    test_env_init(&te);
    te.actor = OWNER;
    cr_assert_eq(kv_pool_init(&pool, &te.env, OWNER, ENGINE, GROUP, capacity), KV_OK);
}

static void teardown_pool(void) { kv_pool_deinit(&pool); }

static uint32_t report_sum(const kv_pool_report *r) {
    return r->free + r->cached + r->owned + r->pinned + r->inflight;
}

static void expect_report(uint32_t free_, uint32_t cached, uint32_t owned, uint32_t pinned,
                          uint32_t inflight) {
    kv_pool_report r;
    kv_pool_report_get(&pool, &r);
    cr_expect_eq(r.capacity, pool.capacity - 1);
    cr_expect_eq(r.free, free_, "free %u != %u", r.free, free_);
    cr_expect_eq(r.cached, cached, "cached %u != %u", r.cached, cached);
    cr_expect_eq(r.owned, owned, "owned %u != %u", r.owned, owned);
    cr_expect_eq(r.pinned, pinned, "pinned %u != %u", r.pinned, pinned);
    cr_expect_eq(r.inflight, inflight, "inflight %u != %u", r.inflight, inflight);
    cr_expect_eq(report_sum(&r), r.capacity);
}

static void expect_clean(void) {
    cr_expect(kv_pool_check(&pool), "pool check failed: %s",
              te.n_violations ? te.v[te.n_violations - 1].detail : "");
    cr_expect_eq(te.n_violations, 0, "unexpected violation: %s",
                 te.n_violations ? te.v[0].detail : "");
}

Test(block_pool, init_rejects_bad_capacity) {
    test_env_init(&te);
    kv_block_pool p;
    cr_expect_eq(kv_pool_init(&p, &te.env, OWNER, ENGINE, GROUP, 0), KV_EINVAL);
    /* no pool or no env: refused, whichever is missing */
    cr_expect_eq(kv_pool_init(NULL, &te.env, OWNER, ENGINE, GROUP, 25), KV_EINVAL);
    cr_expect_eq(kv_pool_init(&p, NULL, OWNER, ENGINE, GROUP, 25), KV_EINVAL);
    /* the null block alone: a pool with nothing to hand out, not an error */
    cr_assert_eq(kv_pool_init(&p, &te.env, OWNER, ENGINE, GROUP, 1), KV_OK);
    uint32_t id;
    cr_expect_eq(kv_pool_num_free(&p), 0);
    cr_expect_eq(kv_pool_alloc(&p, 1, &id), KV_ENOMEM);
    kv_pool_deinit(&p);
    cr_expect_eq(kv_pool_init(&p, &te.env, OWNER, ENGINE, GROUP, KV_POOL_BLOCKS_MAX + 2u),
                 KV_EINVAL);
    cr_assert_eq(kv_pool_init(&p, &te.env, OWNER, ENGINE, GROUP, 25), KV_OK);
    cr_expect_eq(kv_pool_num_free(&p), 24);
    cr_expect_geq(p.index_cap, 50);
    cr_expect_eq(p.index_cap & (p.index_cap - 1), 0);
    cr_expect(kv_pool_check(&p));
    kv_pool_deinit(&p);
    cr_expect_null(p.meta);
}

Test(block_pool, alloc_free_round_trip_and_lru_order, .fini = teardown_pool) {
    setup_pool(9); /* 8 usable */
    uint32_t ids[8];
    cr_assert_eq(kv_pool_alloc(&pool, 3, ids), KV_OK);
    cr_expect_eq(ids[0], 1);
    cr_expect_eq(ids[1], 2);
    cr_expect_eq(ids[2], 3);
    cr_expect(kv_pool_is_held(&pool, 2));
    cr_expect_eq(kv_pool_num_free(&pool), 5);
    expect_report(5, 0, 3, 0, 0);
    kv_pool_free(&pool, ids, 3);
    cr_expect_not(kv_pool_is_held(&pool, 2));
    cr_expect_eq(kv_pool_num_free(&pool), 8);
    expect_report(8, 0, 0, 0, 0);
    expect_clean();

    /* Freed blocks go to the tail: the list is now 4..8, 1, 2, 3. */
    uint32_t all[8];
    cr_assert_eq(kv_pool_alloc(&pool, 8, all), KV_OK);
    const uint32_t want[8] = {4, 5, 6, 7, 8, 1, 2, 3};
    for (int i = 0; i < 8; i++) cr_expect_eq(all[i], want[i], "slot %d: %u", i, all[i]);
    cr_expect_eq(kv_pool_num_free(&pool), 0);

    /* Free in a scrambled order; allocation returns that order. */
    const uint32_t order[8] = {6, 2, 8, 1, 3, 7, 5, 4};
    for (int i = 0; i < 8; i++) kv_pool_free(&pool, &order[i], 1);
    cr_assert_eq(kv_pool_alloc(&pool, 8, all), KV_OK);
    for (int i = 0; i < 8; i++) cr_expect_eq(all[i], order[i], "slot %d: %u", i, all[i]);
    kv_pool_free(&pool, all, 8);
    expect_clean();
}

Test(block_pool, shared_block_needs_every_reference_freed, .fini = teardown_pool) {
    setup_pool(5);
    uint32_t id;
    cr_assert_eq(kv_pool_alloc(&pool, 1, &id), KV_OK);
    cr_assert_eq(kv_pool_touch(&pool, id), KV_OK);
    cr_expect_eq(pool.meta[id].ref_cnt, 2);
    kv_pool_free(&pool, &id, 1);
    cr_expect(kv_pool_is_held(&pool, id));
    cr_expect_eq(kv_pool_num_free(&pool), 3);
    kv_pool_free(&pool, &id, 1);
    cr_expect_not(kv_pool_is_held(&pool, id));
    cr_expect_eq(kv_pool_num_free(&pool), 4);
    expect_clean();
}

Test(block_pool, exhaustion_is_enomem_without_change, .fini = teardown_pool) {
    setup_pool(6); /* 5 usable */
    uint32_t ids[8];
    cr_assert_eq(kv_pool_alloc(&pool, 3, ids), KV_OK);
    kv_pool_cache(&pool, ids[0], 0x1111);
    kv_pool_free(&pool, ids, 1); /* block 1 cached at tail */
    kv_pool_report before;
    kv_pool_report_get(&pool, &before);
    uint32_t head = pool.head, tail = pool.tail;

    uint32_t out[8];
    for (int i = 0; i < 8; i++) out[i] = 0xdeadbeefu;
    cr_expect_eq(kv_pool_alloc(&pool, 4, out), KV_ENOMEM);
    for (int i = 0; i < 8; i++) cr_expect_eq(out[i], 0xdeadbeefu, "out[%d] written", i);
    kv_pool_report after;
    kv_pool_report_get(&pool, &after);
    cr_expect_eq(memcmp(&before, &after, sizeof before), 0);
    cr_expect_eq(pool.head, head);
    cr_expect_eq(pool.tail, tail);
    cr_expect_eq(kv_pool_num_free(&pool), 3);
    cr_expect_eq(kv_pool_lookup(&pool, 0x1111), ids[0]);
    cr_expect_eq(pool.evictions, 0);

    /* Exactly what is left works, and drains the pool. */
    cr_expect_eq(kv_pool_alloc(&pool, 3, out), KV_OK);
    cr_expect_eq(kv_pool_num_free(&pool), 0);
    cr_expect_eq(kv_pool_alloc(&pool, 1, out + 3), KV_ENOMEM);
    cr_expect_eq(kv_pool_alloc(&pool, 0, NULL), KV_OK);
    expect_clean();
}

Test(block_pool, prefix_cache_lookup_touch_evict, .fini = teardown_pool) {
    setup_pool(5); /* 4 usable */
    uint32_t ids[4];
    cr_assert_eq(kv_pool_alloc(&pool, 2, ids), KV_OK);
    kv_pool_cache(&pool, ids[0], 0xaaaa);
    kv_pool_cache(&pool, ids[1], 0xbbbb);
    cr_expect_eq(kv_pool_lookup(&pool, 0xaaaa), ids[0]);
    cr_expect_eq(kv_pool_lookup(&pool, 0xbbbb), ids[1]);
    cr_expect_eq(kv_pool_lookup(&pool, 0xcccc), 0);
    cr_expect_eq(kv_pool_lookup(&pool, 0), 0);
    expect_report(2, 0, 2, 0, 0); /* held blocks with a hash count as owned */

    kv_pool_free(&pool, ids, 2);
    expect_report(2, 2, 0, 0, 0);
    cr_expect_eq(kv_pool_lookup(&pool, 0xaaaa), ids[0], "cached block keeps its hash");

    /* A cache hit takes the block back off the free list. */
    cr_assert_eq(kv_pool_touch(&pool, ids[1]), KV_OK);
    cr_expect(kv_pool_is_held(&pool, ids[1]));
    cr_expect_eq(pool.meta[ids[1]].tag, KV_BT_OWNED);
    expect_report(2, 1, 1, 0, 0);
    expect_clean();

    /* The list is now 3, 4, ids[0]: a 3-block alloc evicts ids[0]. */
    uint32_t more[3];
    cr_assert_eq(kv_pool_alloc(&pool, 3, more), KV_OK);
    cr_expect_eq(more[2], ids[0]);
    cr_expect_eq(pool.evictions, 1);
    cr_expect_eq(kv_pool_lookup(&pool, 0xaaaa), 0, "evicted hash must leave the index");
    cr_expect_eq(kv_pool_lookup(&pool, 0xbbbb), ids[1], "held hash stays");
    cr_expect_eq(pool.meta[ids[0]].hash, 0);
    expect_report(0, 0, 4, 0, 0);
    expect_clean();
}

Test(block_pool, cache_first_writer_wins, .fini = teardown_pool) {
    setup_pool(5);
    uint32_t ids[2];
    cr_assert_eq(kv_pool_alloc(&pool, 2, ids), KV_OK);
    kv_pool_cache(&pool, ids[0], 0x42);
    kv_pool_cache(&pool, ids[1], 0x42);
    cr_expect_eq(kv_pool_lookup(&pool, 0x42), ids[0]);
    cr_expect_eq(pool.meta[ids[1]].hash, 0);
    cr_expect_eq(pool.n_cached_index, 1);
    kv_pool_cache(&pool, ids[0], 0x43); /* a full block's hash does not change */
    cr_expect_eq(kv_pool_lookup(&pool, 0x43), 0);
    kv_pool_cache(&pool, ids[1], 0); /* hash 0 means none */
    cr_expect_eq(pool.n_cached_index, 1);
    kv_pool_free(&pool, ids, 2);
    expect_report(3, 1, 0, 0, 0);
    expect_clean();
}

/* Many hashes at load 1/2 (so probe runs and wrap-around are certain), plus
 * sequential and stride patterns; evicting a scattered subset must leave all
 * the others reachable (backward-shift deletion). */
static void many_hashes_round(uint64_t (*hash_of)(uint32_t)) {
    enum { N = 1023 };
    static uint32_t ids[N];
    cr_assert_eq(kv_pool_alloc(&pool, N, ids), KV_OK);
    for (uint32_t i = 0; i < N; i++) kv_pool_cache(&pool, ids[i], hash_of(i));
    cr_assert_eq(pool.n_cached_index, N);
    for (uint32_t i = 0; i < N; i++) cr_assert_eq(kv_pool_lookup(&pool, hash_of(i)), ids[i]);

    /* Free every third block first so they sit at the head of the LRU list,
     * then the rest; evict exactly the first group. */
    uint32_t n_first = 0;
    for (uint32_t i = 0; i < N; i += 3, n_first++) kv_pool_free(&pool, &ids[i], 1);
    for (uint32_t i = 0; i < N; i++)
        if (i % 3) kv_pool_free(&pool, &ids[i], 1);
    static uint32_t got[N];
    cr_assert_eq(kv_pool_alloc(&pool, n_first, got), KV_OK);
    cr_expect_eq(pool.n_cached_index, N - n_first);
    for (uint32_t i = 0; i < N; i++) {
        uint32_t want = i % 3 ? ids[i] : 0;
        cr_assert_eq(kv_pool_lookup(&pool, hash_of(i)), want, "hash #%u: got %u want %u", i,
                     kv_pool_lookup(&pool, hash_of(i)), want);
    }
    cr_assert(kv_pool_check(&pool));

    /* Reinsert the evicted hashes on the re-allocated blocks. */
    for (uint32_t k = 0, i = 0; i < N; i += 3, k++) kv_pool_cache(&pool, got[k], hash_of(i));
    for (uint32_t k = 0, i = 0; i < N; i++) {
        uint32_t want = i % 3 ? ids[i] : got[k++];
        cr_assert_eq(kv_pool_lookup(&pool, hash_of(i)), want, "hash #%u after reinsert", i);
    }
    kv_pool_free(&pool, got, n_first);
    cr_assert(kv_pool_check(&pool));
    kv_pool_reset(&pool);
}

static uint64_t h_seq(uint32_t i) { return (uint64_t)i + 1u; }
static uint64_t h_stride(uint32_t i) { return ((uint64_t)i + 1u) << 32; }
static uint64_t h_scrambled(uint32_t i) { return ((uint64_t)i * 0x9e3779b97f4a7c15ull) | 1u; }

Test(block_pool, index_many_hashes_with_deletion, .fini = teardown_pool) {
    setup_pool(1024); /* 1023 usable over 2048 slots */
    cr_assert_eq(pool.index_cap, 2048, "index_cap %u", pool.index_cap);
    many_hashes_round(h_seq);
    many_hashes_round(h_stride);
    many_hashes_round(h_scrambled);
    expect_clean();
}

/* A full index at load 1/2 with every hash evicted one by one, in LRU order,
 * checking the whole structure after each deletion. */
#define DN 255u /* usable blocks of a 256-id pool; index_cap 512 */
static uint64_t del_hash(uint32_t k) { return h_seq(k * 7u % DN); }
Test(block_pool, index_deletion_keeps_every_probe_run, .fini = teardown_pool) {
    setup_pool(DN + 1u);
    cr_assert_eq(pool.index_cap, 512);
    static uint32_t ids[DN];
    cr_assert_eq(kv_pool_alloc(&pool, DN, ids), KV_OK);
    for (uint32_t k = 0; k < DN; k++) kv_pool_cache(&pool, ids[k], del_hash(k));
    cr_assert_eq(pool.n_cached_index, DN);
    /* Free in an order unrelated to the hash order. */
    for (uint32_t i = 0; i < DN; i++) kv_pool_free(&pool, &ids[(i * 37u) % DN], 1);
    for (uint32_t e = 0; e < DN; e++) {
        uint32_t id;
        cr_assert_eq(kv_pool_alloc(&pool, 1, &id), KV_OK);
        cr_assert_eq(id, ids[(e * 37u) % DN], "LRU order broken at %u", e);
        cr_assert_eq(pool.n_cached_index, DN - 1u - e);
        cr_assert(kv_pool_check(&pool), "after eviction %u: %s", e,
                  te.n_violations ? te.v[0].detail : "");
        cr_assert_eq(kv_pool_lookup(&pool, del_hash((e * 37u) % DN)), 0);
        for (uint32_t j = e + 1; j < DN; j++) {
            uint32_t k = (j * 37u) % DN;
            cr_assert_eq(kv_pool_lookup(&pool, del_hash(k)), ids[k],
                         "eviction %u lost hash of block %u", e, ids[k]);
        }
    }
    cr_expect_eq(pool.evictions, DN);
    expect_clean();
}

Test(block_pool, double_free_reported_and_ignored, .fini = teardown_pool) {
    setup_pool(5);
    uint32_t ids[2];
    cr_assert_eq(kv_pool_alloc(&pool, 2, ids), KV_OK);
    kv_pool_free(&pool, &ids[0], 1);
    uint32_t head = pool.head, tail = pool.tail, n_free = pool.n_free;
    kv_pool_free(&pool, &ids[0], 1);
    cr_expect_eq(test_env_count(&te, KV_INV_CONSERVE), 1);
    cr_expect_eq(te.v[0].engine, ENGINE);
    cr_expect_eq(te.v[0].inv, KV_INV_CONSERVE);
    cr_expect_not_null(strstr(te.v[0].detail, "block 1"), "detail: %s", te.v[0].detail);
    cr_expect_not_null(strstr(te.v[0].detail, "group 2"), "detail: %s", te.v[0].detail);
    cr_expect_eq(pool.head, head);
    cr_expect_eq(pool.tail, tail);
    cr_expect_eq(pool.n_free, n_free);

    /* Out of range, and a duplicate within one call. */
    uint32_t bad[3] = {99, ids[1], ids[1]};
    kv_pool_free(&pool, bad, 3);
    cr_expect_eq(test_env_count(&te, KV_INV_CONSERVE), 3);
    cr_expect_eq(kv_pool_num_free(&pool), 4);
    te.n_violations = 0;
    expect_report(4, 0, 0, 0, 0);
    expect_clean();
}

Test(block_pool, null_block_ignored_and_never_allocated, .fini = teardown_pool) {
    setup_pool(4);
    uint32_t ids[3];
    cr_assert_eq(kv_pool_alloc(&pool, 3, ids), KV_OK);
    for (int i = 0; i < 3; i++) cr_expect_neq(ids[i], KV_NULL_BLOCK);
    cr_expect_not(kv_pool_is_held(&pool, KV_NULL_BLOCK));
    uint32_t with_null[4] = {KV_NULL_BLOCK, ids[0], KV_NULL_BLOCK, ids[1]};
    kv_pool_free(&pool, with_null, 4);
    cr_expect_eq(kv_pool_num_free(&pool), 2);
    cr_expect_eq(te.n_violations, 0);
    kv_pool_cache(&pool, KV_NULL_BLOCK, 0x77);
    kv_pool_tag(&pool, KV_NULL_BLOCK, KV_BT_PINNED);
    cr_expect_eq(kv_pool_lookup(&pool, 0x77), 0);
    cr_expect_eq(kv_pool_touch(&pool, KV_NULL_BLOCK), KV_EINVAL);
    cr_expect_eq(kv_pool_touch(&pool, 4), KV_EINVAL);
    cr_expect_eq(pool.meta[0].ref_cnt, 0);
    cr_expect_eq(pool.meta[0].on_free, 0);
    /* Drain repeatedly: block 0 never comes out. */
    for (int round = 0; round < 4; round++) {
        uint32_t out[3];
        uint32_t n = kv_pool_num_free(&pool);
        cr_assert_eq(kv_pool_alloc(&pool, n, out), KV_OK);
        for (uint32_t i = 0; i < n; i++) cr_expect_neq(out[i], KV_NULL_BLOCK);
        kv_pool_free(&pool, out, n);
    }
    kv_pool_free(&pool, &ids[2], 1);
    expect_report(3, 0, 0, 0, 0);
    expect_clean();
}

Test(block_pool, tags_reflected_in_report, .fini = teardown_pool) {
    setup_pool(9);
    uint32_t ids[6];
    cr_assert_eq(kv_pool_alloc(&pool, 6, ids), KV_OK);
    kv_pool_tag(&pool, ids[0], KV_BT_PINNED);
    kv_pool_tag(&pool, ids[1], KV_BT_PINNED);
    kv_pool_tag(&pool, ids[2], KV_BT_INFLIGHT);
    expect_report(2, 0, 3, 2, 1);
    kv_pool_tag(&pool, ids[1], KV_BT_OWNED);
    expect_report(2, 0, 4, 1, 1);
    kv_pool_cache(&pool, ids[2], 0x9); /* hashed, still in flight */
    expect_report(2, 0, 4, 1, 1);
    kv_pool_free(&pool, ids, 3);
    expect_report(4, 1, 3, 0, 0);
    /* A block brought back from the free list is OWNED again. */
    cr_assert_eq(kv_pool_touch(&pool, ids[2]), KV_OK);
    cr_expect_eq(pool.meta[ids[2]].tag, KV_BT_OWNED);
    expect_report(4, 0, 4, 0, 0);
    expect_clean();

    /* Tagging a block that is not held is a contract breach, ignored. */
    kv_pool_tag(&pool, ids[0], KV_BT_PINNED);
    cr_expect_eq(test_env_count(&te, KV_INV_CONSERVE), 1);
    expect_report(4, 0, 4, 0, 0);
}

Test(block_pool, reset_restores_initial_state, .fini = teardown_pool) {
    setup_pool(9);
    uint32_t ids[8];
    cr_assert_eq(kv_pool_alloc(&pool, 8, ids), KV_OK);
    for (uint32_t i = 0; i < 8; i++) kv_pool_cache(&pool, ids[i], 100 + i);
    kv_pool_tag(&pool, ids[0], KV_BT_PINNED);
    kv_pool_free(&pool, ids + 4, 4);
    cr_assert_eq(kv_pool_alloc(&pool, 2, ids + 4), KV_OK); /* two evictions */
    cr_expect_eq(pool.evictions, 2);
    kv_block_meta *meta = pool.meta;

    kv_pool_reset(&pool);
    cr_expect_eq(pool.meta, meta, "reset must not reallocate");
    cr_expect_eq(pool.evictions, 0);
    cr_expect_eq(pool.n_cached_index, 0);
    for (uint32_t i = 0; i < 8; i++) cr_expect_eq(kv_pool_lookup(&pool, 100 + i), 0);
    expect_report(8, 0, 0, 0, 0);
    expect_clean();

    /* Same as a fresh pool: allocation order 1..8. */
    uint32_t out[8];
    cr_assert_eq(kv_pool_alloc(&pool, 8, out), KV_OK);
    for (uint32_t i = 0; i < 8; i++) cr_expect_eq(out[i], i + 1);
    kv_block_pool fresh;
    cr_assert_eq(kv_pool_init(&fresh, &te.env, OWNER, ENGINE, GROUP, 9), KV_OK);
    kv_pool_reset(&pool);
    cr_expect_eq(memcmp(pool.meta, fresh.meta, 9 * sizeof *pool.meta), 0);
    cr_expect_eq(pool.head, fresh.head);
    cr_expect_eq(pool.tail, fresh.tail);
    cr_expect_eq(pool.n_free, fresh.n_free);
    kv_pool_deinit(&fresh);
}

Test(block_pool, check_detects_corruption, .fini = teardown_pool) {
    setup_pool(9);
    uint32_t ids[2];
    cr_assert_eq(kv_pool_alloc(&pool, 2, ids), KV_OK);
    kv_pool_cache(&pool, ids[0], 0x5);
    cr_assert(kv_pool_check(&pool));

    pool.n_free++;
    cr_expect_not(kv_pool_check(&pool));
    cr_expect_eq(test_env_count(&te, KV_INV_CONSERVE), 1);
    cr_expect_eq(te.v[0].engine, ENGINE);
    pool.n_free--;

    pool.meta[ids[1]].ref_cnt = 0; /* held but no references */
    cr_expect_not(kv_pool_check(&pool));
    pool.meta[ids[1]].ref_cnt = 1;

    pool.meta[ids[0]].hash = 0x6; /* index points at a block with another hash */
    cr_expect_not(kv_pool_check(&pool));
    pool.meta[ids[0]].hash = 0x5;

    uint32_t t = pool.meta[pool.tail].prev; /* broken back link */
    pool.meta[pool.tail].prev = 0;
    cr_expect_not(kv_pool_check(&pool));
    pool.meta[pool.tail].prev = t;

    pool.meta[ids[1]].tag = 7;
    cr_expect_not(kv_pool_check(&pool));
    pool.meta[ids[1]].tag = KV_BT_OWNED;

    uint32_t s = 0, mask = pool.index_cap - 1u; /* the index: its one entry */
    while (pool.index_hash[s] != 0x5) s++;
    uint32_t far = (s + pool.index_cap / 2u) & mask; /* empty: 1 entry in >= 18 slots */
    pool.index_hash[far] = 0x5; /* a second entry for the same hash */
    pool.index_block[far] = ids[0];
    cr_expect_not(kv_pool_check(&pool));
    pool.index_hash[s] = 0; /* now the only entry, but off its probe path */
    cr_expect_not(kv_pool_check(&pool));
    pool.index_hash[s] = 0x5;
    pool.index_hash[far] = 0;

    cr_expect_eq(test_env_count(&te, KV_INV_CONSERVE), 7);
    te.n_violations = 0;
    cr_expect(kv_pool_check(&pool));
    cr_expect_eq(te.n_violations, 0);
}

Test(block_pool, owner_check_reports_foreign_actor, .fini = teardown_pool) {
    setup_pool(5);
    uint32_t id;
    cr_assert_eq(kv_pool_alloc(&pool, 1, &id), KV_OK);
    cr_expect_eq(test_env_count(&te, KV_INV_OWNER), 0, "owner itself must pass");

    te.actor = OWNER + 1;
    uint32_t other;
    cr_expect_eq(kv_pool_alloc(&pool, 1, &other), KV_OK);
    cr_expect_eq(test_env_count(&te, KV_INV_OWNER), 1);
    cr_expect_eq(te.v[0].engine, ENGINE);
    cr_expect_eq(te.v[0].actor, OWNER + 1);
    kv_pool_free(&pool, &other, 1);
    kv_pool_touch(&pool, id);
    kv_pool_cache(&pool, id, 0x1);
    kv_pool_tag(&pool, id, KV_BT_PINNED);
    kv_pool_reset(&pool);
    cr_expect_eq(test_env_count(&te, KV_INV_OWNER), 6);

    /* Read-only entry points are free to call from anywhere. */
    te.n_violations = 0;
    kv_pool_report r;
    kv_pool_report_get(&pool, &r);
    (void)kv_pool_lookup(&pool, 0x1);
    (void)kv_pool_is_held(&pool, 1);
    (void)kv_pool_num_free(&pool);
    cr_expect(kv_pool_check(&pool));
    cr_expect_eq(te.n_violations, 0);
}

Test(block_pool, owner_none_is_not_checked) {
    test_env_init(&te);
    te.actor = 11;
    cr_assert_eq(kv_pool_init(&pool, &te.env, KV_ACTOR_NONE, ENGINE, GROUP, 5), KV_OK);
    uint32_t id;
    cr_expect_eq(kv_pool_alloc(&pool, 1, &id), KV_OK);
    kv_pool_free(&pool, &id, 1);
    cr_expect_eq(te.n_violations, 0);
    kv_pool_deinit(&pool);
}

/* ---- randomized accounting ----------------------------------------------- */

static uint64_t rng_state;
static uint64_t rnd(void) {
    uint64_t x = (rng_state += 0x9e3779b97f4a7c15ull);
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}
static uint32_t rnd_below(uint32_t n) { return (uint32_t)(rnd() % n); }

#define RCAP 65u
/* Shadow model: reference count per block id. */
static uint32_t shadow_ref[RCAP];

static uint32_t pick_held(void) {
    uint32_t start = 1 + rnd_below(RCAP - 1);
    for (uint32_t k = 0; k < RCAP - 1; k++) {
        uint32_t id = 1 + (start - 1 + k) % (RCAP - 1);
        if (shadow_ref[id]) return id;
    }
    return 0;
}

static void rand_op(uint32_t op) {
    uint32_t ids[8];
    switch (op) {
    case 0: case 1: case 2: { /* alloc */
        uint32_t n = 1 + rnd_below(8);
        uint32_t before = kv_pool_num_free(&pool);
        kv_status s = kv_pool_alloc(&pool, n, ids);
        cr_assert_eq(s, n > before ? KV_ENOMEM : KV_OK, "alloc %u with %u free", n, before);
        if (s != KV_OK) return;
        for (uint32_t i = 0; i < n; i++) {
            cr_assert_eq(shadow_ref[ids[i]], 0, "allocated held block %u", ids[i]);
            shadow_ref[ids[i]] = 1;
        }
        return;
    }
    case 3: case 4: case 5: { /* free one reference */
        uint32_t id = pick_held();
        if (!id) return;
        kv_pool_free(&pool, &id, 1);
        shadow_ref[id]--;
        return;
    }
    case 6: { /* cache a held block under a small hash space (collisions) */
        uint32_t id = pick_held();
        if (id) kv_pool_cache(&pool, id, 1 + rnd_below(200));
        return;
    }
    case 7: { /* cache hit by hash */
        uint32_t id = kv_pool_lookup(&pool, 1 + rnd_below(200));
        if (!id) return;
        cr_assert_eq(kv_pool_touch(&pool, id), KV_OK);
        shadow_ref[id]++;
        return;
    }
    case 8: { /* tag */
        uint32_t id = pick_held();
        if (id) kv_pool_tag(&pool, id, (kv_block_tag)rnd_below(3));
        return;
    }
    default: { /* touch a held block */
        uint32_t id = pick_held();
        if (!id) return;
        cr_assert_eq(kv_pool_touch(&pool, id), KV_OK);
        shadow_ref[id]++;
        return;
    }
    }
}

Test(block_pool, randomized_report_sums_and_check, .fini = teardown_pool) {
    setup_pool(RCAP);
    memset(shadow_ref, 0, sizeof shadow_ref);
    rng_state = 0x6b766330ull; /* fixed seed */
    uint32_t held_max = 0;
    for (uint32_t step = 0; step < 10000; step++) {
        rand_op(rnd_below(10));
        cr_assert(kv_pool_check(&pool), "step %u: %s", step,
                  te.n_violations ? te.v[0].detail : "");
        cr_assert_eq(te.n_violations, 0, "step %u: %s", step, te.v[0].detail);
        kv_pool_report r;
        kv_pool_report_get(&pool, &r);
        cr_assert_eq(report_sum(&r), RCAP - 1, "step %u: sum %u", step, report_sum(&r));
        uint32_t held = 0;
        for (uint32_t id = 1; id < RCAP; id++) {
            held += shadow_ref[id] != 0;
            cr_assert_eq(pool.meta[id].ref_cnt, shadow_ref[id], "step %u block %u", step, id);
        }
        cr_assert_eq(r.owned + r.pinned + r.inflight, held, "step %u", step);
        cr_assert_eq(kv_pool_num_free(&pool), RCAP - 1 - held, "step %u", step);
        if (held > held_max) held_max = held;
    }
    /* The sequence must actually exercise exhaustion and eviction. */
    cr_expect_geq(held_max, RCAP - 8);
    cr_expect_gt(pool.evictions, 0);
}
