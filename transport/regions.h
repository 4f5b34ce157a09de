/* transport/regions.h — the registered-memory table every transport backend
 * keeps (sim, tcp, and rdma to come), and the one bounds check that guards
 * every access to it: a peer can never make a backend read or write outside
 * a registered region. Ids are never reused while the table lives (an old
 * id held by a peer fails instead of hitting a new region). Pure; no
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

/* off + len within the region, without overflow. */
static inline bool kvt_range_ok(const kvt_region_entry *r, uint64_t off, uint64_t len) {
    return off <= r->len && len <= r->len - off;
}

kvt_region_entry *kvt_region_find(kvt_region_entry *tab, uint32_t cap, kvt_region id);
/* *next_id is the table's id counter (start it at 1). */
kv_status kvt_region_add(kvt_region_entry *tab, uint32_t cap, kvt_region *next_id, void *base,
                         uint64_t len, kvt_region *out);
kv_status kvt_region_remove(kvt_region_entry *tab, uint32_t cap, kvt_region id);
kv_status kvt_region_desc(kvt_region_entry *tab, uint32_t cap, kvt_region id, kvt_desc *out);

#endif
