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

/* ---- write grants ---------------------------------------------------------------- */

#define GRANT_SLOT_MASK (KVT_GRANT_CAP_MAX - 1u)
#define GRANT_SEQ_MAX (UINT32_MAX >> KVT_GRANT_SLOT_BITS)

void kvt_grant_tab_init(kvt_grant_tab *t, kvt_grant_entry *e, uint32_t cap) {
    if (cap > KVT_GRANT_CAP_MAX) cap = KVT_GRANT_CAP_MAX;
    *t = (kvt_grant_tab){.e = e, .cap = cap, .seq = 1};
    memset(e, 0, (size_t)cap * sizeof e[0]);
}

void kvt_grant_tab_clear(kvt_grant_tab *t) {
    if (t->n == 0) return; /* a removed entry is all zero already */
    memset(t->e, 0, (size_t)t->cap * sizeof t->e[0]);
    t->n = 0;
}

bool kvt_key_eq(const kvt_key *a, const kvt_key *b) {
    uint64_t d = (a->w[0] ^ b->w[0]) | (a->w[1] ^ b->w[1]);
    return d == 0;
}

kv_status kvt_grant_add(kvt_grant_tab *t, kvt_region r, kvt_ep ep, kvt_peer peer, uint64_t off, uint64_t len,
                        const kvt_key *k, uint32_t *out_id) {
    if (!k || !out_id || kvt_key_zero(k) || len == 0) return KV_EINVAL;
    if (t->n == t->cap) return KV_ENOMEM;
    /* the slot after the last one used, so a revoked slot rests a while */
    uint32_t i = t->seq % t->cap;
    while (t->e[i].used) i = (i + 1u) % t->cap;
    uint32_t id = (t->seq << KVT_GRANT_SLOT_BITS) | i;
    t->seq = t->seq == GRANT_SEQ_MAX ? 1u : t->seq + 1u;
    t->e[i] = (kvt_grant_entry){.used = true, .id = id, .region = r, .ep = ep, .peer = peer, .off = off, .len = len,
                                .key = *k};
    t->n++;
    *out_id = id;
    return KV_OK;
}

kvt_grant_entry *kvt_grant_find(kvt_grant_tab *t, uint32_t id) {
    uint32_t i = id & GRANT_SLOT_MASK;
    if (i >= t->cap || !t->e[i].used || t->e[i].id != id) return NULL;
    return &t->e[i];
}

kv_status kvt_grant_remove(kvt_grant_tab *t, uint32_t id) {
    kvt_grant_entry *g = kvt_grant_find(t, id);
    if (!g) return KV_ENOENT;
    memset(g, 0, sizeof *g);
    t->n--;
    return KV_OK;
}

void kvt_grant_remove_region(kvt_grant_tab *t, kvt_region r) {
    for (uint32_t i = 0; i < t->cap && t->n; i++)
        if (t->e[i].used && t->e[i].region == r) kvt_grant_remove(t, t->e[i].id);
}

kvt_grant_verdict kvt_grant_check(kvt_grant_tab *t, uint32_t id, const kvt_key *k, kvt_ep ep, kvt_peer peer,
                                  uint64_t off, uint64_t len, const kvt_grant_entry **out) {
    const kvt_grant_entry *g = kvt_grant_find(t, id);
    if (!g) return KVT_GRANT_NONE;
    if (!kvt_key_eq(&g->key, k)) return KVT_GRANT_BAD_KEY;
    if (g->ep != ep || g->peer != peer) return KVT_GRANT_WRONG_PEER;
    /* off + len within [g->off, g->off + g->len), without overflow */
    if (off < g->off || off - g->off > g->len || len > g->len - (off - g->off)) return KVT_GRANT_OUTSIDE;
    if (out) *out = g;
    return KVT_GRANT_OK;
}

const char *kvt_grant_verdict_str(kvt_grant_verdict v) {
    switch (v) {
    case KVT_GRANT_OK: return "ok";
    case KVT_GRANT_NONE: return "no live grant";
    case KVT_GRANT_BAD_KEY: return "wrong key";
    case KVT_GRANT_WRONG_PEER: return "granted to another peer";
    case KVT_GRANT_OUTSIDE: return "outside the grant's window";
    }
    return "?";
}
