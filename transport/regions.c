/* transport/regions.c — registered-memory table; see regions.h. */
#include "transport/regions.h"

#include <string.h>

void kvt_region_tab_init(kvt_region_tab *t, kvt_region_entry *e, uint32_t cap) {
    *t = (kvt_region_tab){.e = e, .cap = cap, .hw = cap, .next_id = 1};
    kvt_region_tab_clear(t);
}

void kvt_region_tab_clear(kvt_region_tab *t) {
    if (t->hw) memset(t->e, 0, (size_t)t->hw * sizeof t->e[0]);
    t->hw = 0;
}

kvt_region_entry *kvt_region_find(kvt_region_tab *t, kvt_region id) {
    if (id == 0 || id == KVT_NONE) return NULL;
    for (uint32_t i = 0; i < t->hw; i++)
        if (t->e[i].used && t->e[i].id == id) return &t->e[i];
    return NULL;
}

kv_status kvt_region_add(kvt_region_tab *t, void *base, uint64_t len, kvt_region *out) {
    if (!base || len == 0 || !out) return KV_EINVAL;
    if (t->next_id == KVT_NONE) return KV_ENOMEM;
    uint32_t i = 0;
    while (i < t->hw && t->e[i].used) i++;
    if (i == t->cap) return KV_ENOMEM;
    if (i == t->hw) t->hw++;
    t->e[i] = (kvt_region_entry){.used = true, .id = t->next_id++, .base = base, .len = len};
    *out = t->e[i].id;
    return KV_OK;
}

kv_status kvt_region_remove(kvt_region_tab *t, kvt_region id) {
    kvt_region_entry *r = kvt_region_find(t, id);
    if (!r) return KV_ENOENT;
    memset(r, 0, sizeof *r);
    while (t->hw && !t->e[t->hw - 1].used) t->hw--;
    return KV_OK;
}

kv_status kvt_region_desc(kvt_region_tab *t, kvt_region id, kvt_desc *out) {
    if (!out) return KV_EINVAL;
    const kvt_region_entry *r = kvt_region_find(t, id);
    if (!r) return KV_ENOENT;
    *out = (kvt_desc){.region = r->id, .len = r->len};
    return KV_OK;
}
