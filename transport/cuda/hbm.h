/* transport/cuda/hbm.h — KV block memory in HBM (-DKVCONN_CUDA=ON).
 *
 *   pool     one cudaMalloc'd slab of blocks x block_bytes (the block pool's
 *            memory on the GPU; block id = index)
 *   fill     a kernel that writes P's blocks with the bytes kv_fill_block
 *            (core/kv_data.c) derives from a block's token digest: one thread block per
 *            KV block, same formula, checked byte for byte against the host
 *            function by tests/test_cuda_hbm.c where a GPU exists
 *   fence    a CUDA event recorded after the fill on the pool's stream and
 *            waited on before blocks are exposed to the transport: no WRITE
 *            ever reads a block the kernel is still writing
 *   staging  pinned host memory (cudaHostAlloc) for the TCP path: blocks are
 *            copied device -> pinned (P, before the send) and pinned ->
 *            device (D, after the receive); RDMA with GPUDirect would
 *            register the device slab itself (KVT_MEM_CUDA) instead
 * Compiles wherever the CUDA toolkit is (CI); runs where a GPU is. Every
 * call returns KV_ENOSYS when no device is present. Single-threaded:
 * owned by one actor (the worker main of its rank). */
#ifndef KVCONN_TRANSPORT_CUDA_HBM_H
#define KVCONN_TRANSPORT_CUDA_HBM_H

#include <stdint.h>

#include "core/kv_data.h"
#include "kvconn/env.h"
#include "kvconn/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kvt_hbm kvt_hbm;

/* One block for the fill kernel: kv_fill_block_digest's arguments (the
 * token digest is computed on the host, core/kv_data.h). */
typedef struct kvt_hbm_fill {
    uint32_t block;          /* block id in the pool */
    uint32_t group, head_lo, head_hi, head_bytes;
    uint32_t pad_;
    uint64_t digest;
} kvt_hbm_fill;

/* KV_OK when a CUDA device is usable, KV_ENOSYS otherwise. */
kv_status kvt_hbm_probe(char *name, uint32_t cap);
kv_status kvt_hbm_new(const kv_env *env, uint32_t blocks, uint32_t block_bytes, uint32_t staging_blocks, kvt_hbm **out);
void kvt_hbm_free(kvt_hbm *h);
/* Launches the fill of n blocks (asynchronous; fence before exposing). */
kv_status kvt_hbm_fill_blocks(kvt_hbm *h, const kvt_hbm_fill *f, uint32_t n);
/* Records the event after all queued work and waits for it. */
kv_status kvt_hbm_fence(kvt_hbm *h);
/* Device blocks -> staging slots [0, n) (fenced on return). */
kv_status kvt_hbm_stage_out(kvt_hbm *h, const uint32_t *blocks, uint32_t n);
/* Staging slots [0, n) -> device blocks (fenced on return). */
kv_status kvt_hbm_stage_in(kvt_hbm *h, const uint32_t *blocks, uint32_t n);
/* Mirror staging (staging_blocks == blocks: slot = block id), what the
 * block-memory provider uses (kvmem_hbm.c): device -> slot of each block
 * (expose), slot -> device (absorb); both fenced on return. */
kv_status kvt_hbm_expose(kvt_hbm *h, const uint32_t *blocks, uint32_t n);
kv_status kvt_hbm_absorb(kvt_hbm *h, const uint32_t *blocks, uint32_t n);
/* One block's device bytes into out (block_bytes), fenced. */
kv_status kvt_hbm_read(kvt_hbm *h, uint32_t block, uint8_t *out);
uint8_t *kvt_hbm_staging(kvt_hbm *h);   /* pinned host, staging_blocks x block_bytes */
void *kvt_hbm_device(kvt_hbm *h);       /* device pointer of block 0 */

#ifdef __cplusplus
}
#endif

#endif
