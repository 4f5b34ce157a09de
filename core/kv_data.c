/* core/kv_data.c — token ids, block hashes and block bytes; see kv_data.h. */
#include "core/kv_data.h"

#include <stddef.h>

uint64_t kv_mix64(uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* A vocabulary of 50,000: the top 32 bits of a mix scaled into range
 * (multiply-shift, no division). */
uint32_t kv_token(const kv_tokens *t, uint32_t i) {
    uint64_t base = i < t->prefix_len ? 0x5eed000000000000ull ^ t->prefix_group : t->token_seed;
    return (uint32_t)(((kv_mix64(base * 0x100000001b3ull + i) >> 32) * 50000u) >> 32);
}

/* Order-sensitive digest of a block's tokens: one multiply per token, one
 * full mix at the end. */
static uint64_t tokens_digest(const kv_tokens *t, uint32_t pos, uint32_t bs, uint32_t n_tokens) {
    uint64_t h = 0xcbf29ce484222325ull ^ pos;
    uint32_t end = (pos + 1) * bs < n_tokens ? (pos + 1) * bs : n_tokens;
    for (uint32_t i = pos * bs; i < end; i++) h = (h ^ kv_token(t, i)) * 0x100000001b3ull;
    return kv_mix64(h ^ ((uint64_t)(end - pos * bs) << 40));
}

uint64_t kv_block_hash(const kv_tokens *t, uint64_t parent, uint32_t pos, uint32_t block_size,
                       uint32_t group) {
    uint64_t h = kv_mix64(parent ^ tokens_digest(t, pos, block_size, (pos + 1) * block_size) ^
                          ((uint64_t)group << 56));
    return h ? h : 1;
}

/* Bytes j..j+7 of one head come from one mix of (digest, group, head, j/8). */
static uint64_t block_word(uint64_t digest, uint32_t group, uint32_t head, uint32_t j) {
    return kv_mix64(digest ^ ((uint64_t)group << 48) ^ ((uint64_t)head << 32) ^ (j >> 3));
}

void kv_fill_block(uint8_t *out, const kv_tokens *t, uint32_t pos, uint32_t block_size,
                   uint32_t n_tokens, uint32_t group, uint32_t head_lo, uint32_t head_hi,
                   uint32_t head_bytes) {
    uint64_t d = tokens_digest(t, pos, block_size, n_tokens);
    for (uint32_t h = head_lo; h < head_hi; h++) {
        uint8_t *o = out + (size_t)(h - head_lo) * head_bytes;
        uint64_t v = 0;
        for (uint32_t j = 0; j < head_bytes; j++) {
            if ((j & 7u) == 0) v = block_word(d, group, h, j);
            o[j] = (uint8_t)(v >> (8u * (j & 7u)));
        }
    }
}

bool kv_verify_block(const uint8_t *have, const kv_tokens *t, uint32_t pos, uint32_t block_size,
                     uint32_t n_tokens, uint32_t group, uint32_t head_lo, uint32_t head_hi,
                     uint32_t head_bytes) {
    uint64_t d = tokens_digest(t, pos, block_size, n_tokens);
    for (uint32_t h = head_lo; h < head_hi; h++) {
        const uint8_t *o = have + (size_t)(h - head_lo) * head_bytes;
        uint64_t v = 0;
        for (uint32_t j = 0; j < head_bytes; j++) {
            if ((j & 7u) == 0) v = block_word(d, group, h, j);
            if (o[j] != (uint8_t)(v >> (8u * (j & 7u)))) return false;
        }
    }
    return true;
}

void kv_heads_of(uint32_t tp, uint32_t rank, uint32_t *lo, uint32_t *hi) {
    uint32_t per = KV_HEADS / (tp ? tp : 1);
    *lo = rank * per;
    *hi = *lo + per;
}

uint32_t kv_sw_dead_blocks(uint32_t n_tokens, uint32_t window, uint32_t block_size) {
    return n_tokens > window ? (n_tokens - window) / block_size : 0;
}
