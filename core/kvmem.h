/* core/kvmem.h — where a worker's KV blocks live: the block-memory hook.
 *
 * The connector moves KV through host memory: the transport registers it
 * (KVT_MEM_HOST), P's WRITEs read it, D's land in it, the store path copies
 * through it. Where the model's KV lives is the provider's business:
 *   host    the host memory is the KV (the simulator, kvnode by default);
 *   staged  the KV lives elsewhere (a GPU's HBM, or, for tests, a second
 *           host array standing in for one) and the host memory is its
 *           pinned staging mirror, block id = slot.
 * The core calls the provider at exactly these points, all on the worker
 * main actor (the provider's owner):
 *   fill     the forward pass computed a block (P's prefill, D's decode);
 *   expose   blocks are about to be read from host: P records them for its
 *            sender (after the forward pass that finished them, before any
 *            WRITE reads them: the fence), the store save copies them;
 *   absorb   host bytes of blocks were written from outside (a pull that
 *            completed, a store load): they become the KV;
 *   read     the KV of one block, for verification (INV-DATA, INV-SAVE):
 *            a pointer into the provider's memory or into `scratch`.
 * A provider that skips a step is caught by the checker: P's sender would
 * send stale staging bytes, D would verify stale KV (tests/test_kvmem.c runs
 * sweeps with such a provider and expects INV-DATA). */
#ifndef KVCONN_CORE_KVMEM_H
#define KVCONN_CORE_KVMEM_H

#include <stdbool.h>
#include <stdint.h>

#include "kvconn/env.h"
#include "kvconn/status.h"

/* One block to compute: kv_fill_block's bytes for (digest, group, heads). */
typedef struct kv_kvmem_fill {
    uint32_t block;
    uint32_t group;
    uint64_t digest;  /* the block's token digest (kv_block_digest) */
} kv_kvmem_fill;

typedef struct kv_kvmem_group {
    uint32_t group;
    uint32_t blocks;      /* block ids [0, blocks) incl. the null block */
    uint32_t block_bytes; /* bytes of one block on this rank */
    uint32_t head_lo, head_hi, head_bytes;
} kv_kvmem_group;

typedef struct kv_kvmem_ops {
    size_t size;      /* sizeof(kv_kvmem_ops) */
    const char *name; /* "host", "staged", "hbm" */
    /* Memory of one group of one rank; *host: blocks x block_bytes bytes of
     * host memory (registered with the transport), *h: the provider's handle. */
    kv_status (*open)(void *ctx, const kv_env *env, const kv_kvmem_group *g, uint8_t **host, void **h);
    void (*close)(void *ctx, const kv_env *env, void *h);
    void (*fill)(void *h, const kv_kvmem_fill *f, uint32_t n);
    void (*expose)(void *h, const uint32_t *blocks, uint32_t n);
    void (*absorb)(void *h, const uint32_t *blocks, uint32_t n);
    const uint8_t *(*read)(void *h, uint32_t block, uint8_t *scratch);
} kv_kvmem_ops;

/* A provider: ops plus the context its open() gets. NULL ops: host. */
typedef struct kv_kvmem {
    const kv_kvmem_ops *ops;
    void *ctx;
} kv_kvmem;

extern const kv_kvmem_ops kv_kvmem_host;
/* The test stand-in for device memory: KV in a second host array, the host
 * memory its mirror. ctx: a kv_kvmem_staged_cfg (NULL: a faithful one). */
extern const kv_kvmem_ops kv_kvmem_staged;
typedef struct kv_kvmem_staged_cfg {
    bool skip_expose; /* a broken provider: expose does nothing */
    bool skip_absorb; /* ... absorb does nothing */
} kv_kvmem_staged_cfg;

#endif
