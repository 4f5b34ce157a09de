/* transport/regions.h — the registered-memory table every transport backend
 * keeps (sim, tcp, rdma), and the one bounds check that guards every access
 * to it: a peer can never make a backend read or write outside a registered
 * region. Ids are never reused while the table lives (an old id held by a
 * peer fails instead of hitting a new region), so dereg revokes: a WRITE to
 * a removed id fails wherever it is looked up (transport.h, "grants").
 *
 * Entries fill the lowest free slot; `hw` bounds the used slots, so lookups
 * and clearing cost what the table holds, not its capacity. Pure; no
 * allocation: the caller owns the storage. */
#ifndef KVCONN_TRANSPORT_REGIONS_H
#define KVCONN_TRANSPORT_REGIONS_H

#include <stdbool.h>
#include <stdint.h>

#include "kvconn/transport.h"

typedef struct kvt_region_entry {
    bool used;
    kvt_region id;
    uint8_t *base; /* borrowed: the registrant's memory */
    uint64_t len;
} kvt_region_entry;

typedef struct kvt_region_tab {
    kvt_region_entry *e; /* [cap], borrowed storage */
    uint32_t cap;
    uint32_t hw;         /* slots [hw, cap) are unused */
    kvt_region next_id;  /* starts at 1; 0 and KVT_NONE are never ids */
} kvt_region_tab;

/* off + len within the region, without overflow. */
static inline bool kvt_range_ok(const kvt_region_entry *r, uint64_t off, uint64_t len) {
    return off <= r->len && len <= r->len - off;
}

/* Empties the table over storage e[cap] (ids restart at 1). */
void kvt_region_tab_init(kvt_region_tab *t, kvt_region_entry *e, uint32_t cap);
/* Empties the table, keeping the id counter (old ids stay dead); costs the
 * slots used since the last clear. */
void kvt_region_tab_clear(kvt_region_tab *t);
kvt_region_entry *kvt_region_find(kvt_region_tab *t, kvt_region id);
/* The slot index of an entry find returned (backends keep per-slot data). */
static inline uint32_t kvt_region_slot(const kvt_region_tab *t, const kvt_region_entry *r) {
    return (uint32_t)(r - t->e);
}
kv_status kvt_region_add(kvt_region_tab *t, void *base, uint64_t len, kvt_region *out);
kv_status kvt_region_remove(kvt_region_tab *t, kvt_region id);
kv_status kvt_region_desc(kvt_region_tab *t, kvt_region id, kvt_desc *out);

/* ---- write grants (transport.h, "write capabilities") --------------------------
 *
 * The grant table the sim and tcp backends keep, and the one check every
 * WRITE entry passes on the side that owns the memory. A grant id is its
 * slot (low KVT_GRANT_SLOT_BITS) and a sequence number, so a lookup is O(1)
 * and a revoked id stays dead until the sequence wraps (2^22 grants later;
 * the 128-bit key is the guard, the id only an index). The caller makes the
 * key (tcp: libsodium's randombytes_buf; sim: a counter through a mixer)
 * and stores it with the entry; the comparison runs in constant time. */
#define KVT_GRANT_SLOT_BITS 10u
#define KVT_GRANT_CAP_MAX (1u << KVT_GRANT_SLOT_BITS)

typedef struct kvt_grant_entry {
    bool used;
    uint32_t id;
    kvt_region region; /* the granted region (its table's id) */
    kvt_ep ep;         /* the grantee: this peer of this endpoint */
    kvt_peer peer;
    uint64_t off, len; /* the window, in the region */
    kvt_key key;
} kvt_grant_entry;

typedef struct kvt_grant_tab {
    kvt_grant_entry *e; /* [cap], borrowed storage; cap <= KVT_GRANT_CAP_MAX */
    uint32_t cap;
    uint32_t n;         /* live grants */
    uint32_t seq;       /* of the next id, 1 .. 2^22 - 1 */
} kvt_grant_tab;

/* Why a WRITE entry was refused (KVT_GRANT_OK: it may land). */
typedef enum kvt_grant_verdict {
    KVT_GRANT_OK = 0,
    KVT_GRANT_NONE,      /* no live grant by that id: never granted, or revoked */
    KVT_GRANT_BAD_KEY,   /* a live grant, another key (no key: all zero) */
    KVT_GRANT_WRONG_PEER,/* the right key from an endpoint or peer it was not granted to */
    KVT_GRANT_OUTSIDE,   /* outside the grant's window (or its region is gone) */
} kvt_grant_verdict;

void kvt_grant_tab_init(kvt_grant_tab *t, kvt_grant_entry *e, uint32_t cap);
/* Revokes every grant, keeping the sequence (old ids stay dead). */
void kvt_grant_tab_clear(kvt_grant_tab *t);
/* Adds a grant over [off, off + len) of region r (checked by the caller
 * against r's length) with key k (not all zero: KV_EINVAL). */
kv_status kvt_grant_add(kvt_grant_tab *t, kvt_region r, kvt_ep ep, kvt_peer peer, uint64_t off, uint64_t len,
                        const kvt_key *k, uint32_t *out_id);
kv_status kvt_grant_remove(kvt_grant_tab *t, uint32_t id);
/* Revokes every grant over region r (its dereg). */
void kvt_grant_remove_region(kvt_grant_tab *t, kvt_region r);
kvt_grant_entry *kvt_grant_find(kvt_grant_tab *t, uint32_t id);
/* The check of one WRITE entry of len bytes at off through grant id,
 * presented with key k by (ep, peer); on KVT_GRANT_OK *out (if out) is the
 * grant, whose region the entry lands in. */
kvt_grant_verdict kvt_grant_check(kvt_grant_tab *t, uint32_t id, const kvt_key *k, kvt_ep ep, kvt_peer peer,
                                  uint64_t off, uint64_t len, const kvt_grant_entry **out);
/* A short name of a verdict, for log lines. */
const char *kvt_grant_verdict_str(kvt_grant_verdict v);
/* Constant time in the key's bytes. */
bool kvt_key_eq(const kvt_key *a, const kvt_key *b);
static inline bool kvt_key_zero(const kvt_key *k) { return (k->w[0] | k->w[1]) == 0; }

#endif
