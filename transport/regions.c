/* transport/regions.c — registered-memory table; see regions.h. */
#include "transport/regions.h"

#include <string.h>

kvt_region_entry *kvt_region_find(kvt_region_entry *tab, uint32_t cap, kvt_region id) {
    if (id == 0 || id == KVT_NONE) return NULL;
    for (uint32_t i = 0; i < cap; i++)
        if (tab[i].used && tab[i].id == id) return &tab[i];
    return NULL;
}

kv_status kvt_region_add(kvt_region_entry *tab, uint32_t cap, kvt_region *next_id, void *base,
                         uint64_t len, kvt_region *out) {
    if (!base || len == 0 || !out) return KV_EINVAL;
    if (*next_id == KVT_NONE) return KV_ENOMEM;
    for (uint32_t i = 0; i < cap; i++) {
        if (tab[i].used) continue;
        tab[i] = (kvt_region_entry){.used = true, .id = (*next_id)++, .base = base, .len = len};
        *out = tab[i].id;
        return KV_OK;
    }
    return KV_ENOMEM;
}

kv_status kvt_region_remove(kvt_region_entry *tab, uint32_t cap, kvt_region id) {
    kvt_region_entry *r = kvt_region_find(tab, cap, id);
    if (!r) return KV_ENOENT;
    memset(r, 0, sizeof *r);
    return KV_OK;
}

kv_status kvt_region_desc(kvt_region_entry *tab, uint32_t cap, kvt_region id, kvt_desc *out) {
    if (!out) return KV_EINVAL;
    const kvt_region_entry *r = kvt_region_find(tab, cap, id);
    if (!r) return KV_ENOENT;
    *out = (kvt_desc){.region = r->id, .len = r->len};
    return KV_OK;
}
