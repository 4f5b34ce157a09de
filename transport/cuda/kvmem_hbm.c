/* transport/cuda/kvmem_hbm.c — the block-memory provider (core/kvmem.h)
 * over HBM: KV in the cudaMalloc slab, the host memory the transport
 * registers is its pinned mirror (slot = block id). fill launches the fill
 * kernel; expose copies device -> pinned and waits on the fence, so no
 * WRITE reads a block the kernel or a copy is still writing; absorb copies
 * pinned -> device; read copies one block out for verification. CUDA
 * errors cannot be returned through the hook: they are logged, and the
 * bytes they leave wrong are what D's verification reports (INV-DATA). */
#include "transport/cuda/kvmem_hbm.h"

#include <string.h>

#include "transport/cuda/hbm.h"

typedef struct hbm_group {
    const kv_env *env;
    kv_kvmem_group g;
    kvt_hbm *h;
    kvt_hbm_fill f[64];
} hbm_group;

static void check(hbm_group *m, kv_status st, const char *what) {
    if (st != KV_OK) kv_logf(m->env, KV_LOG_ERROR, "hbm: %s (group %u) failed: %s", what, m->g.group, kv_status_str(st));
}

static kv_status hbm_open(void *ctx, const kv_env *env, const kv_kvmem_group *g, uint8_t **host, void **out) {
    (void)ctx;
    hbm_group *m = kv_alloc(env, sizeof *m);
    if (!m) return KV_ENOMEM;
    memset(m, 0, sizeof *m);
    m->env = env;
    m->g = *g;
    kv_status st = kvt_hbm_new(env, g->blocks, g->block_bytes, g->blocks, &m->h);
    if (st != KV_OK) {
        kv_release(env, m);
        return st;
    }
    *host = kvt_hbm_staging(m->h);
    *out = m;
    return KV_OK;
}

static void hbm_close(void *ctx, const kv_env *env, void *h) {
    hbm_group *m = h;
    (void)ctx;
    if (!m) return;
    kvt_hbm_free(m->h);
    kv_release(env, m);
}

static void hbm_fill(void *h, const kv_kvmem_fill *f, uint32_t n) {
    hbm_group *m = h;
    const uint32_t cap = (uint32_t)(sizeof m->f / sizeof m->f[0]);
    for (uint32_t off = 0; off < n; off += cap) {
        uint32_t k = n - off < cap ? n - off : cap;
        for (uint32_t i = 0; i < k; i++)
            m->f[i] = (kvt_hbm_fill){.block = f[off + i].block, .group = f[off + i].group, .head_lo = m->g.head_lo,
                                     .head_hi = m->g.head_hi, .head_bytes = m->g.head_bytes,
                                     .digest = f[off + i].digest};
        check(m, kvt_hbm_fill_blocks(m->h, m->f, k), "fill");
    }
}

static void hbm_expose(void *h, const uint32_t *blocks, uint32_t n) {
    check(h, kvt_hbm_expose(((hbm_group *)h)->h, blocks, n), "expose");
}

static void hbm_absorb(void *h, const uint32_t *blocks, uint32_t n) {
    check(h, kvt_hbm_absorb(((hbm_group *)h)->h, blocks, n), "absorb");
}

static const uint8_t *hbm_read(void *h, uint32_t block, uint8_t *scratch) {
    hbm_group *m = h;
    kv_status st = kvt_hbm_read(m->h, block, scratch);
    check(m, st, "read");
    return st == KV_OK ? scratch : NULL;
}

const kv_kvmem_ops kv_kvmem_hbm = {.size = sizeof(kv_kvmem_ops), .name = "hbm", .open = hbm_open,
                                   .close = hbm_close, .fill = hbm_fill, .expose = hbm_expose,
                                   .absorb = hbm_absorb, .read = hbm_read};
