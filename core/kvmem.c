/* core/kvmem.c — the host and staged block-memory providers; see kvmem.h. */
#include "core/kvmem.h"

#include <string.h>

#include "core/kv_data.h"

typedef struct km_group {
    kv_kvmem_group g;
    uint8_t *host;  /* the transport's memory */
    uint8_t *kv;    /* where the KV lives: host itself, or the stand-in device array */
    kv_kvmem_staged_cfg cfg;
} km_group;

static uint8_t *block_at(uint8_t *base, const km_group *m, uint32_t block) {
    return base + (uint64_t)block * m->g.block_bytes;
}

static void km_fill(void *h, const kv_kvmem_fill *f, uint32_t n) {
    km_group *m = h;
    for (uint32_t i = 0; i < n; i++)
        if (f[i].block < m->g.blocks)
            kv_fill_block_digest(block_at(m->kv, m, f[i].block), f[i].digest, f[i].group, m->g.head_lo,
                                 m->g.head_hi, m->g.head_bytes);
}

static const uint8_t *km_read(void *h, uint32_t block, uint8_t *scratch) {
    km_group *m = h;
    (void)scratch;
    return block < m->g.blocks ? block_at(m->kv, m, block) : NULL;
}

static kv_status open_group(const kv_env *env, const kv_kvmem_group *g, bool staged, const kv_kvmem_staged_cfg *cfg,
                            uint8_t **host, void **h) {
    km_group *m = kv_alloc(env, sizeof *m);
    uint64_t bytes = (uint64_t)g->blocks * g->block_bytes;
    if (!m) return KV_ENOMEM;
    m->g = *g;
    m->host = kv_alloc(env, bytes);
    m->kv = staged ? kv_alloc(env, bytes) : m->host;
    if (cfg) m->cfg = *cfg;
    if (!m->host || !m->kv) {
        if (m->kv != m->host) kv_release(env, m->kv);
        kv_release(env, m->host);
        kv_release(env, m);
        return KV_ENOMEM;
    }
    *host = m->host;
    *h = m;
    return KV_OK;
}

static void km_close(void *ctx, const kv_env *env, void *h) {
    km_group *m = h;
    (void)ctx;
    if (!m) return;
    if (m->kv != m->host) kv_release(env, m->kv);
    kv_release(env, m->host);
    kv_release(env, m);
}

/* ---- host: the host memory is the KV ---- */

static kv_status host_open(void *ctx, const kv_env *env, const kv_kvmem_group *g, uint8_t **host, void **h) {
    (void)ctx;
    return open_group(env, g, false, NULL, host, h);
}
static void host_sync(void *h, const uint32_t *blocks, uint32_t n) { (void)h, (void)blocks, (void)n; }

const kv_kvmem_ops kv_kvmem_host = {.size = sizeof(kv_kvmem_ops), .name = "host", .open = host_open,
                                    .close = km_close, .fill = km_fill, .expose = host_sync,
                                    .absorb = host_sync, .read = km_read};

/* ---- staged: KV in a second array, host memory its mirror ---- */

static kv_status staged_open(void *ctx, const kv_env *env, const kv_kvmem_group *g, uint8_t **host, void **h) {
    return open_group(env, g, true, ctx, host, h);
}

static void copy_blocks(km_group *m, uint8_t *to, const uint8_t *from, const uint32_t *blocks, uint32_t n) {
    for (uint32_t i = 0; i < n; i++)
        if (blocks[i] < m->g.blocks)
            memcpy(block_at(to, m, blocks[i]), from + (uint64_t)blocks[i] * m->g.block_bytes, m->g.block_bytes);
}

static void staged_expose(void *h, const uint32_t *blocks, uint32_t n) {
    km_group *m = h;
    if (!m->cfg.skip_expose) copy_blocks(m, m->host, m->kv, blocks, n);
}

static void staged_absorb(void *h, const uint32_t *blocks, uint32_t n) {
    km_group *m = h;
    if (!m->cfg.skip_absorb) copy_blocks(m, m->kv, m->host, blocks, n);
}

const kv_kvmem_ops kv_kvmem_staged = {.size = sizeof(kv_kvmem_ops), .name = "staged", .open = staged_open,
                                      .close = km_close, .fill = km_fill, .expose = staged_expose,
                                      .absorb = staged_absorb, .read = km_read};
