/* transport/cuda/hbm.cu — HBM block memory; see hbm.h. */
#include "transport/cuda/hbm.h"
#include "transport/cuda/fill_formula.h"

#include <cuda_runtime.h>
#include <string.h>

#define FILL_MAX 1024u /* blocks one launch fills */

struct kvt_hbm {
    const kv_env *env;
    uint32_t blocks, block_bytes, staging_blocks;
    uint8_t *dev;          /* cudaMalloc: blocks x block_bytes */
    uint8_t *staging;      /* cudaHostAlloc (pinned) */
    kvt_hbm_fill *dev_fill;/* cudaMalloc: FILL_MAX requests */
    cudaStream_t stream;
    cudaEvent_t fence;
};

/* One thread block per KV block; threads stride over its bytes. The byte
 * formula is fill_formula.h's, which tests/test_kvmem.c checks against
 * core/kv_data.c on the host. */
__global__ static void fill_kernel(uint8_t *dev, uint32_t block_bytes, const kvt_hbm_fill *f) {
    const kvt_hbm_fill *q = &f[blockIdx.x];
    uint8_t *out = dev + (uint64_t)q->block * block_bytes;
    uint32_t bytes = (q->head_hi - q->head_lo) * q->head_bytes;
    for (uint32_t k = threadIdx.x; k < bytes; k += blockDim.x)
        out[k] = kvf_byte(q->digest, q->group, q->head_lo, q->head_bytes, k);
}

static kv_status st_of(cudaError_t e) { return e == cudaSuccess ? KV_OK : KV_EIO; }

extern "C" kv_status kvt_hbm_probe(char *name, uint32_t cap) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) return KV_ENOSYS;
    cudaDeviceProp p;
    if (cudaGetDeviceProperties(&p, 0) != cudaSuccess) return KV_ENOSYS;
    if (name && cap) {
        strncpy(name, p.name, cap - 1);
        name[cap - 1] = 0;
    }
    return KV_OK;
}

extern "C" kv_status kvt_hbm_new(const kv_env *env, uint32_t blocks, uint32_t block_bytes, uint32_t staging_blocks,
                                 kvt_hbm **out) {
    if (!env || !out || !blocks || !block_bytes) return KV_EINVAL;
    if (kvt_hbm_probe(NULL, 0) != KV_OK) return KV_ENOSYS;
    kvt_hbm *h = (kvt_hbm *)kv_alloc(env, sizeof *h);
    if (!h) return KV_ENOMEM;
    memset(h, 0, sizeof *h);
    h->env = env;
    h->blocks = blocks;
    h->block_bytes = block_bytes;
    h->staging_blocks = staging_blocks;
    kv_status st = st_of(cudaMalloc((void **)&h->dev, (size_t)blocks * block_bytes));
    if (st == KV_OK && staging_blocks)
        st = st_of(cudaHostAlloc((void **)&h->staging, (size_t)staging_blocks * block_bytes, cudaHostAllocDefault));
    if (st == KV_OK) st = st_of(cudaMalloc((void **)&h->dev_fill, FILL_MAX * sizeof(kvt_hbm_fill)));
    if (st == KV_OK) st = st_of(cudaStreamCreateWithFlags(&h->stream, cudaStreamNonBlocking));
    if (st == KV_OK) st = st_of(cudaEventCreateWithFlags(&h->fence, cudaEventDisableTiming));
    if (st == KV_OK) st = st_of(cudaMemsetAsync(h->dev, 0, (size_t)blocks * block_bytes, h->stream));
    if (st != KV_OK) {
        kvt_hbm_free(h);
        return st;
    }
    *out = h;
    return KV_OK;
}

extern "C" void kvt_hbm_free(kvt_hbm *h) {
    if (!h) return;
    if (h->stream) cudaStreamSynchronize(h->stream);
    if (h->fence) cudaEventDestroy(h->fence);
    if (h->stream) cudaStreamDestroy(h->stream);
    cudaFree(h->dev_fill);
    cudaFreeHost(h->staging);
    cudaFree(h->dev);
    kv_release(h->env, h);
}

extern "C" kv_status kvt_hbm_fill_blocks(kvt_hbm *h, const kvt_hbm_fill *f, uint32_t n) {
    for (uint32_t i = 0; i < n; i++)
        if (f[i].block >= h->blocks || (f[i].head_hi - f[i].head_lo) * f[i].head_bytes > h->block_bytes)
            return KV_ERANGE;
    for (uint32_t off = 0; off < n; off += FILL_MAX) {
        uint32_t k = n - off < FILL_MAX ? n - off : FILL_MAX;
        /* The staging copy of the requests must finish before the next
         * chunk overwrites dev_fill: same stream, so it is ordered. */
        kv_status st = st_of(cudaMemcpyAsync(h->dev_fill, f + off, k * sizeof *f, cudaMemcpyHostToDevice, h->stream));
        if (st != KV_OK) return st;
        fill_kernel<<<k, 256, 0, h->stream>>>(h->dev, h->block_bytes, h->dev_fill);
        if ((st = st_of(cudaGetLastError())) != KV_OK) return st;
        if ((st = st_of(cudaStreamSynchronize(h->stream))) != KV_OK) return st; /* f is caller memory */
    }
    return KV_OK;
}

extern "C" kv_status kvt_hbm_fence(kvt_hbm *h) {
    kv_status st = st_of(cudaEventRecord(h->fence, h->stream));
    return st == KV_OK ? st_of(cudaEventSynchronize(h->fence)) : st;
}

static kv_status stage(kvt_hbm *h, const uint32_t *blocks, uint32_t n, bool out) {
    if (n > h->staging_blocks) return KV_EINVAL;
    for (uint32_t i = 0; i < n; i++) {
        if (blocks[i] >= h->blocks) return KV_ERANGE;
        uint8_t *d = h->dev + (uint64_t)blocks[i] * h->block_bytes, *s = h->staging + (uint64_t)i * h->block_bytes;
        cudaError_t e = out ? cudaMemcpyAsync(s, d, h->block_bytes, cudaMemcpyDeviceToHost, h->stream)
                            : cudaMemcpyAsync(d, s, h->block_bytes, cudaMemcpyHostToDevice, h->stream);
        if (e != cudaSuccess) return KV_EIO;
    }
    return kvt_hbm_fence(h);
}

/* Mirror mode: staging slot = block id (staging_blocks == blocks). */
static kv_status mirror(kvt_hbm *h, const uint32_t *blocks, uint32_t n, bool out) {
    if (h->staging_blocks < h->blocks) return KV_EINVAL;
    for (uint32_t i = 0; i < n; i++) {
        if (blocks[i] >= h->blocks) return KV_ERANGE;
        uint64_t off = (uint64_t)blocks[i] * h->block_bytes;
        cudaError_t e = out ? cudaMemcpyAsync(h->staging + off, h->dev + off, h->block_bytes, cudaMemcpyDeviceToHost, h->stream)
                            : cudaMemcpyAsync(h->dev + off, h->staging + off, h->block_bytes, cudaMemcpyHostToDevice, h->stream);
        if (e != cudaSuccess) return KV_EIO;
    }
    return kvt_hbm_fence(h);
}

extern "C" kv_status kvt_hbm_expose(kvt_hbm *h, const uint32_t *b, uint32_t n) { return mirror(h, b, n, true); }
extern "C" kv_status kvt_hbm_absorb(kvt_hbm *h, const uint32_t *b, uint32_t n) { return mirror(h, b, n, false); }

extern "C" kv_status kvt_hbm_read(kvt_hbm *h, uint32_t block, uint8_t *out) {
    if (block >= h->blocks || !out) return KV_ERANGE;
    kv_status st = st_of(cudaMemcpyAsync(out, h->dev + (uint64_t)block * h->block_bytes, h->block_bytes,
                                         cudaMemcpyDeviceToHost, h->stream));
    return st == KV_OK ? kvt_hbm_fence(h) : st;
}

extern "C" kv_status kvt_hbm_stage_out(kvt_hbm *h, const uint32_t *b, uint32_t n) { return stage(h, b, n, true); }
extern "C" kv_status kvt_hbm_stage_in(kvt_hbm *h, const uint32_t *b, uint32_t n) { return stage(h, b, n, false); }
extern "C" uint8_t *kvt_hbm_staging(kvt_hbm *h) { return h->staging; }
extern "C" void *kvt_hbm_device(kvt_hbm *h) { return h->dev; }
