/* core/kv_data.h — what KV bytes are: derived from token ids, so any engine
 * can recompute what a block must hold (INV-DATA) and prefix caching can
 * hash blocks. Pure functions, no state.
 *
 * Token i of a request is H(prefix_group, i) for i < prefix_len (shared by
 * every request of the group) and H(token_seed, i) after. A block's content
 * on one worker is a function of (tokens it covers, group, position, head
 * range); P's forward pass writes it, D verifies what it received. */
#ifndef KVCONN_CORE_KV_DATA_H
#define KVCONN_CORE_KV_DATA_H

#include <stdbool.h>
#include <stdint.h>

#define KV_HEADS 4u /* attention heads per layer group, split across TP ranks */

typedef struct kv_tokens {
    uint64_t token_seed;
    uint32_t prefix_group;
    uint32_t prefix_len;
} kv_tokens;

uint64_t kv_mix64(uint64_t x);
/* ceil(a / b), b > 0. */
static inline uint32_t kv_cdiv(uint32_t a, uint32_t b) { return (a + b - 1) / b; }
/* Blocks a sliding-window group keeps for a transfer (vLLM's
 * blocks_per_sw: cdiv(window, block_size) + 1). */
static inline uint32_t kv_sw_blocks(uint32_t window, uint32_t block_size) {
    return kv_cdiv(window, block_size) + 1;
}
uint32_t kv_token(const kv_tokens *t, uint32_t i);
/* Prefix-cache hash of full block `pos` given the parent block's hash
 * (0 for the first block). Never returns 0. */
uint64_t kv_block_hash(const kv_tokens *t, uint64_t parent, uint32_t pos, uint32_t block_size,
                       uint32_t group);
/* Writes the bytes of block `pos` holding tokens [pos*bs, min((pos+1)*bs, n_tokens))
 * for heads [head_lo, head_hi) into out (head_bytes per head). */
void kv_fill_block(uint8_t *out, const kv_tokens *t, uint32_t pos, uint32_t block_size,
                   uint32_t n_tokens, uint32_t group, uint32_t head_lo, uint32_t head_hi,
                   uint32_t head_bytes);
/* True when `have` equals what kv_fill_block would write. */
bool kv_verify_block(const uint8_t *have, const kv_tokens *t, uint32_t pos, uint32_t block_size,
                     uint32_t n_tokens, uint32_t group, uint32_t head_lo, uint32_t head_hi,
                     uint32_t head_bytes);
/* The token digests of one request's blocks, computed once per position
 * and shared by every group and call in a loop (the digest does not depend
 * on the group). n_tokens 0: every block full (prefix-cache hashing). Lives
 * on the caller's stack; the same values as the functions above. */
#define KV_DIGEST_MEMO_BLOCKS 64u
typedef struct kv_digest_memo {
    const kv_tokens *t;
    uint32_t block_size, n_tokens;
    uint64_t have; /* bit p: d[p] is computed */
    uint64_t d[KV_DIGEST_MEMO_BLOCKS];
} kv_digest_memo;
void kv_digest_memo_init(kv_digest_memo *m, const kv_tokens *t, uint32_t block_size, uint32_t n_tokens);
uint64_t kv_block_hash_m(kv_digest_memo *m, uint64_t parent, uint32_t pos, uint32_t group);
void kv_fill_block_m(uint8_t *out, kv_digest_memo *m, uint32_t pos, uint32_t group, uint32_t head_lo,
                     uint32_t head_hi, uint32_t head_bytes);
bool kv_verify_block_m(const uint8_t *have, kv_digest_memo *m, uint32_t pos, uint32_t group,
                       uint32_t head_lo, uint32_t head_hi, uint32_t head_bytes);
/* The digest a block's bytes derive from (what kv_fill_block_m uses), and
 * the bytes of a digest: the same values, for a caller that computes the
 * digest here and the bytes elsewhere (core/kvmem.h). */
uint64_t kv_block_digest_m(kv_digest_memo *m, uint32_t pos);
void kv_fill_block_digest(uint8_t *out, uint64_t digest, uint32_t group, uint32_t head_lo, uint32_t head_hi,
                          uint32_t head_bytes);
bool kv_verify_block_digest(const uint8_t *have, uint64_t digest, uint32_t group, uint32_t head_lo,
                            uint32_t head_hi, uint32_t head_bytes);
/* The growing last block of a request: its digest chain over tokens
 * [pos * block_size, n), so the next step's digest of the same block takes
 * only the new tokens (a decode step adds one). */
typedef struct kv_digest_run {
    uint64_t h;
    uint32_t pos, n;
} kv_digest_run;
/* Digest of block pos holding tokens up to n_tokens (what kv_fill_block
 * uses), continuing run when it is this block's and not ahead of n_tokens
 * (valid), else from the block's start; run then holds this chain. */
uint64_t kv_block_digest_grow(const kv_tokens *t, uint32_t pos, uint32_t block_size, uint32_t n_tokens,
                              kv_digest_run *run, bool valid);
/* Speculative decoding (core/engine.c). Drafts proposed for positions
 * [pos, pos + k) of a request: the rejection sampler accepts the first
 * kv_spec_accepted of them (0..k), a pure function of the request's tokens
 * and pos, so every rank and the scheduler agree without a wire field. A
 * rejected draft is a token other than the request's at that position
 * (kv_draft_token); its KV stays in its slot until a later step rewrites it. */
uint32_t kv_spec_accepted(const kv_tokens *t, uint32_t pos, uint32_t k);
uint32_t kv_draft_token(const kv_tokens *t, uint32_t i);
/* Slots of a request that hold rejected drafts: n (0..2) intervals
 * [lo[i], hi[i]), in order and apart. */
typedef struct kv_draft_slots {
    uint32_t n, lo[2], hi[2];
} kv_draft_slots;
/* Digest of block pos holding tokens up to n_tokens whose slots in d hold
 * rejected drafts (kv_draft_token) and every other slot the request's own
 * token: the block bytes of a step that rolled drafts back, and of the
 * steps after it until those slots are computed again. No slots: the
 * plain block digest. */
uint64_t kv_block_digest_drafts(const kv_tokens *t, uint32_t pos, uint32_t block_size, uint32_t n_tokens,
                                const kv_draft_slots *d);
/* Gives the memo position pos's digest, computed elsewhere. */
void kv_digest_memo_put(kv_digest_memo *m, uint32_t pos, uint64_t digest);
/* A recurrent (mamba-like) group's state block holds the bytes of a state
 * digest instead of a block digest: S(0) = kv_state_initial(), S(i + 1) =
 * (S(i) ^ token i) * the FNV prime, a chain over every token of the request
 * so far. The forward pass reads the state it continues from the block
 * (kv_state_read: word 0 of the rank's first head, kv_mix64 undone), so a
 * token folded twice, a token skipped or a state that is not the request's
 * changes every later byte. Needs head_bytes >= 8 (one whole word). */
uint64_t kv_state_initial(void);
uint64_t kv_state_advance(const kv_tokens *t, uint64_t state, uint32_t from, uint32_t to);
/* S(n_tokens) from the start. */
uint64_t kv_state_digest(const kv_tokens *t, uint32_t n_tokens);
/* The state digest whose bytes (group, heads from head_lo) block holds. */
uint64_t kv_state_read(const uint8_t *block, uint32_t group, uint32_t head_lo);
/* What position pos of a group holds: the block digest, or for a recurrent
 * group the state after the tokens up to the block's end (the memo's
 * n_tokens when that is sooner). */
uint64_t kv_group_digest_m(kv_digest_memo *m, uint32_t pos, bool recurrent);
/* The vector paths of the block bytes (and, with AVX-512, of token ids),
 * each giving the same values: chosen once per process from what the CPU
 * has. Tests force each one to compare them; kv_simd_force returns the path
 * it set (never one the CPU lacks). */
typedef enum kv_simd { KV_SIMD_SCALAR, KV_SIMD_AVX2, KV_SIMD_AVX512 } kv_simd;
kv_simd kv_simd_best(void);
kv_simd kv_simd_force(kv_simd want);
/* The path the fill and verify take now (kv_simd_best from the program's
 * load unless a test forced another); "scalar", "avx2", "avx512". */
kv_simd kv_simd_used(void);
const char *kv_simd_name(kv_simd p);
/* Leading blocks of a sliding-window group that hold only tokens outside the
 * window once n_tokens are computed (remove_skipped_blocks frees them). */
uint32_t kv_sw_dead_blocks(uint32_t n_tokens, uint32_t window, uint32_t block_size);
/* Head range [lo, hi) of rank r in a TP group of size tp (tp divides KV_HEADS). */
void kv_heads_of(uint32_t tp, uint32_t rank, uint32_t *lo, uint32_t *hi);

#endif
