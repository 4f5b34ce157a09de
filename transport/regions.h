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

#endif
