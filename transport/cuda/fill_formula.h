/* transport/cuda/fill_formula.h — one byte of a KV block, as the fill
 * kernel computes it (hbm.cu), compiled for the device there and for the
 * host by tests/test_kvmem.c, which checks it against kv_fill_block_digest
 * (core/kv_data.c) on every machine: the kernel's formula is tested without
 * a GPU. Byte j of head h is byte j % 8 (little-endian) of
 * kv_mix64(digest ^ group << 48 ^ h << 32 ^ j / 8): the host's word loop,
 * and its tail when head_bytes is not a multiple of 8. */
#ifndef KVCONN_TRANSPORT_CUDA_FILL_FORMULA_H
#define KVCONN_TRANSPORT_CUDA_FILL_FORMULA_H

#include <stdint.h>

#ifdef __CUDACC__
#define KVF_HD __host__ __device__
#else
#define KVF_HD
#endif

static inline KVF_HD uint64_t kvf_mix64(uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* Byte k of a block holding heads [head_lo, ...) of head_bytes each. */
static inline KVF_HD uint8_t kvf_byte(uint64_t digest, uint32_t group, uint32_t head_lo, uint32_t head_bytes,
                                      uint32_t k) {
    uint32_t h = head_lo + k / head_bytes, j = k % head_bytes;
    uint64_t key = digest ^ ((uint64_t)group << 48) ^ ((uint64_t)h << 32);
    return (uint8_t)(kvf_mix64(key ^ (j >> 3)) >> (8u * (j & 7u)));
}

#endif
