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
 * (multiply-shift, no division). Token i is token_of(key + i), the key
 * being the prompt's shared prefix or its own seed, times the FNV prime. */
static uint64_t token_key(const kv_tokens *t, bool in_prefix) {
    return (in_prefix ? 0x5eed000000000000ull ^ t->prefix_group : t->token_seed) * 0x100000001b3ull;
}
static uint32_t token_of(uint64_t x) { return (uint32_t)(((kv_mix64(x) >> 32) * 50000u) >> 32); }

uint32_t kv_token(const kv_tokens *t, uint32_t i) { return token_of(token_key(t, i < t->prefix_len) + i); }

static uint32_t tokens8_avx512(uint64_t key, uint32_t from, uint32_t *out); /* 0 without AVX-512 */

static uint64_t chain_run(uint64_t key, uint64_t h, uint32_t from, uint32_t to) {
    uint32_t i = from;
    uint32_t tok[8];
    while (to - i >= 8u && tokens8_avx512(key, i, tok)) { /* the mixes eight at a time; the chain stays serial */
        for (uint32_t j = 0; j < 8u; j++) h = (h ^ tok[j]) * 0x100000001b3ull;
        i += 8u;
    }
    for (; i < to; i++) h = (h ^ token_of(key + i)) * 0x100000001b3ull;
    return h;
}

/* Order-sensitive digest of a block's tokens: one multiply per token, one
 * full mix at the end. The prefix part and the rest each run with their
 * key fixed. */
static uint64_t chain(const kv_tokens *t, uint64_t h, uint32_t from, uint32_t to) {
    uint32_t split = t->prefix_len < from ? from : t->prefix_len < to ? t->prefix_len : to;
    h = chain_run(token_key(t, true), h, from, split);
    return chain_run(token_key(t, false), h, split, to);
}
static uint32_t block_end(uint32_t pos, uint32_t bs, uint32_t n_tokens) {
    return (pos + 1) * bs < n_tokens ? (pos + 1) * bs : n_tokens;
}
static uint64_t digest_of(uint64_t h, uint32_t pos, uint32_t bs, uint32_t end) {
    return kv_mix64(h ^ ((uint64_t)(end - pos * bs) << 40));
}
static uint64_t tokens_digest(const kv_tokens *t, uint32_t pos, uint32_t bs, uint32_t n_tokens) {
    uint32_t end = block_end(pos, bs, n_tokens);
    return digest_of(chain(t, 0xcbf29ce484222325ull ^ pos, pos * bs, end), pos, bs, end);
}

uint64_t kv_block_digest_grow(const kv_tokens *t, uint32_t pos, uint32_t block_size, uint32_t n_tokens,
                              kv_digest_run *run, bool valid) {
    uint32_t end = block_end(pos, block_size, n_tokens);
    if (!valid || run->pos != pos || run->n > end || run->n < pos * block_size)
        *run = (kv_digest_run){.h = 0xcbf29ce484222325ull ^ pos, .pos = pos, .n = pos * block_size};
    run->h = chain(t, run->h, run->n, end);
    run->n = end;
    return digest_of(run->h, pos, block_size, end);
}

const char *kv_simd_name(kv_simd p) {
    return p == KV_SIMD_SCALAR ? "scalar" : p == KV_SIMD_AVX2 ? "avx2" : p == KV_SIMD_AVX512 ? "avx512" : "?";
}

uint32_t kv_spec_accepted(const kv_tokens *t, uint32_t pos, uint32_t k) {
    if (!k) return 0;
    uint64_t x = kv_mix64(t->token_seed ^ 0x5bec0000000000ull ^ ((uint64_t)t->prefix_group << 32) ^ pos);
    return (uint32_t)(((x >> 32) * (k + 1u)) >> 32);
}

uint32_t kv_draft_token(const kv_tokens *t, uint32_t i) {
    uint32_t d = token_of((t->token_seed ^ 0xd4af7d4af7ull) * 0x100000001b3ull + i);
    return d != kv_token(t, i) ? d : (d + 1u) % 50000u; /* rejected: never the token itself */
}

static uint32_t clip(uint32_t v, uint32_t lo, uint32_t hi) { return v < lo ? lo : v > hi ? hi : v; }

uint64_t kv_block_digest_drafts(const kv_tokens *t, uint32_t pos, uint32_t block_size, uint32_t n_tokens,
                                const kv_draft_slots *d) {
    uint32_t cur = pos * block_size, end = block_end(pos, block_size, n_tokens);
    uint64_t h = 0xcbf29ce484222325ull ^ pos;
    for (uint32_t k = 0; k < d->n && k < 2u; k++) {
        uint32_t a = clip(d->lo[k], cur, end), b = clip(d->hi[k], a, end);
        h = chain(t, h, cur, a);
        for (uint32_t i = a; i < b; i++) h = (h ^ kv_draft_token(t, i)) * 0x100000001b3ull;
        cur = b;
    }
    return digest_of(chain(t, h, cur, end), pos, block_size, end);
}

static uint64_t hash_of(uint64_t parent, uint64_t digest, uint32_t group) {
    uint64_t h = kv_mix64(parent ^ digest ^ ((uint64_t)group << 56));
    return h ? h : 1;
}

uint64_t kv_block_hash(const kv_tokens *t, uint64_t parent, uint32_t pos, uint32_t block_size,
                       uint32_t group) {
    return hash_of(parent, tokens_digest(t, pos, block_size, (pos + 1) * block_size), group);
}

/* Bytes j..j+7 of one head are the little-endian bytes of one mix of
 * (digest, group, head, j/8): word k of a head is kv_mix64(key ^ k) with
 * key = digest ^ group << 48 ^ head << 32. The loops below produce exactly
 * those bytes, a word (or, with AVX-512, eight words) at a time; only a
 * head_bytes that is not a multiple of 8 takes the byte path for its tail.
 * Same output on every path (kvnode's D checks P's bytes; the simulator's
 * traces hash them). */
static uint64_t head_key(uint64_t digest, uint32_t group, uint32_t head) {
    return digest ^ ((uint64_t)group << 48) ^ ((uint64_t)head << 32);
}

static void put_word(uint8_t *o, uint64_t v) {
    for (uint32_t b = 0; b < 8; b++) o[b] = (uint8_t)(v >> (8u * b)); /* one store after store merging */
}

static uint64_t get_word(const uint8_t *o) {
    uint64_t v = 0;
    for (uint32_t b = 0; b < 8; b++) v |= (uint64_t)o[b] << (8u * b);
    return v;
}

/* Words [k0, nw) of one head; returns the OR of (have ^ want) when have is
 * given (verify), else writes out (fill). */
static uint64_t head_words(uint8_t *out, const uint8_t *have, uint64_t key, uint32_t k0, uint32_t nw) {
    uint64_t diff = 0;
    for (uint32_t k = k0; k < nw; k++) {
        uint64_t v = kv_mix64(key ^ k);
        if (have) diff |= get_word(have + 8u * k) ^ v;
        else put_word(out + 8u * k, v);
    }
    return diff;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && !defined(KVCONN_NO_SIMD)
#include <immintrin.h>
#include <stdatomic.h>
#define KV_DATA_SIMD 1
/* kv_mix64 of each lane. */
__attribute__((target("avx512f,avx512dq"))) static inline __m512i mix8(__m512i x) {
    x = _mm512_add_epi64(x, _mm512_set1_epi64((long long)0x9e3779b97f4a7c15ull));
    x = _mm512_mullo_epi64(_mm512_xor_si512(x, _mm512_srli_epi64(x, 30)),
                           _mm512_set1_epi64((long long)0xbf58476d1ce4e5b9ull));
    x = _mm512_mullo_epi64(_mm512_xor_si512(x, _mm512_srli_epi64(x, 27)),
                           _mm512_set1_epi64((long long)0x94d049bb133111ebull));
    return _mm512_xor_si512(x, _mm512_srli_epi64(x, 31));
}

/* kv_mix64 on eight words at once: words [0, nw & ~7) of one head. */
__attribute__((target("avx512f,avx512dq"))) static uint64_t head_words_avx512(uint8_t *out, const uint8_t *have,
                                                                               uint64_t key, uint32_t nw) {
    const __m512i step = _mm512_set1_epi64(8);
    __m512i k = _mm512_set_epi64(7, 6, 5, 4, 3, 2, 1, 0), kk = _mm512_set1_epi64((long long)key);
    __m512i diff = _mm512_setzero_si512();
    for (uint32_t i = 0; i + 8u <= nw; i += 8u) {
        __m512i x = mix8(_mm512_xor_si512(kk, k));
        if (have) diff = _mm512_or_si512(diff, _mm512_xor_si512(x, _mm512_loadu_si512((const void *)(have + 8u * i))));
        else _mm512_storeu_si512((void *)(out + 8u * i), x);
        k = _mm512_add_epi64(k, step);
    }
    return (uint64_t)_mm512_reduce_or_epi64(diff);
}

/* AVX2 has no 64-bit multiply: the low 64 bits of x * c from three 32 x 32
 * products (lo*lo + (hi*lo + lo*hi) << 32). */
__attribute__((target("avx2"))) static inline __m256i mul64_avx2(__m256i x, uint64_t c) {
    __m256i cl = _mm256_set1_epi64x((long long)(c & 0xffffffffu)), ch = _mm256_set1_epi64x((long long)(c >> 32));
    __m256i cross = _mm256_add_epi64(_mm256_mul_epu32(_mm256_srli_epi64(x, 32), cl), _mm256_mul_epu32(x, ch));
    return _mm256_add_epi64(_mm256_mul_epu32(x, cl), _mm256_slli_epi64(cross, 32));
}
__attribute__((target("avx2"))) static inline __m256i mix4(__m256i x) {
    x = _mm256_add_epi64(x, _mm256_set1_epi64x((long long)0x9e3779b97f4a7c15ull));
    x = mul64_avx2(_mm256_xor_si256(x, _mm256_srli_epi64(x, 30)), 0xbf58476d1ce4e5b9ull);
    x = mul64_avx2(_mm256_xor_si256(x, _mm256_srli_epi64(x, 27)), 0x94d049bb133111ebull);
    return _mm256_xor_si256(x, _mm256_srli_epi64(x, 31));
}

/* Heads this large (and 32-byte aligned) are filled with streaming stores
 * and verified with reads prefetched ahead: at kvnode's sizes the bytes are
 * not in cache either way (P's blocks go to the NIC's copy later, D's came
 * from the kernel's), and a streaming store does not first read the line it
 * overwrites. */
#define KV_STREAM_MIN_WORDS 512u /* 4 KiB */
#define KV_PREFETCH_AHEAD 512u   /* bytes */

/* kv_mix64 on four words at once: words [0, nw & ~3) of one head. */
__attribute__((target("avx2"))) static uint64_t head_words_avx2(uint8_t *out, const uint8_t *have, uint64_t key,
                                                                uint32_t nw) {
    const __m256i step = _mm256_set1_epi64x(4);
    __m256i k = _mm256_set_epi64x(3, 2, 1, 0), kk = _mm256_set1_epi64x((long long)key);
    __m256i diff = _mm256_setzero_si256();
    bool big = nw >= KV_STREAM_MIN_WORDS; /* invariant tests: the compiler unswitches these loops */
    if (have) {
        for (uint32_t i = 0; i + 4u <= nw; i += 4u) {
            if (big) _mm_prefetch((const char *)(have + 8u * i + KV_PREFETCH_AHEAD), _MM_HINT_T0);
            __m256i x = mix4(_mm256_xor_si256(kk, k));
            diff = _mm256_or_si256(diff, _mm256_xor_si256(x, _mm256_loadu_si256((const void *)(have + 8u * i))));
            k = _mm256_add_epi64(k, step);
        }
    } else {
        bool stream = big && ((uintptr_t)out & 31u) == 0;
        for (uint32_t i = 0; i + 4u <= nw; i += 4u) {
            __m256i x = mix4(_mm256_xor_si256(kk, k));
            if (stream) _mm256_stream_si256((__m256i *)(void *)(out + 8u * i), x);
            else _mm256_storeu_si256((void *)(out + 8u * i), x);
            k = _mm256_add_epi64(k, step);
        }
        if (stream) _mm_sfence(); /* streaming stores are weakly ordered: visible before the caller hands the block on */
    }
    return !_mm256_testz_si256(diff, diff);
}

/* The vector path in use: 0 not yet known, else 1 + kv_simd. Atomic:
 * kvnode's workers fill and verify on several threads; every writer stores
 * the same value (kv_simd_force aside, which only tests call). Detected when
 * the program loads, so that no run takes a first-call path the next one
 * does not (AFL++ counts that as an unstable edge in persistent mode). */
static _Atomic int simd_state;
kv_simd kv_simd_best(void) {
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq")) return KV_SIMD_AVX512;
    return __builtin_cpu_supports("avx2") ? KV_SIMD_AVX2 : KV_SIMD_SCALAR;
}
static int simd_detect(void) {
    int s = 1 + (int)kv_simd_best();
    atomic_store_explicit(&simd_state, s, memory_order_relaxed);
    return s;
}
__attribute__((constructor)) static void simd_at_load(void) { (void)simd_detect(); }
static kv_simd simd_level(void) {
    int s = atomic_load_explicit(&simd_state, memory_order_relaxed);
    return (kv_simd)((s ? s : simd_detect()) - 1);
}
kv_simd kv_simd_used(void) { return simd_level(); }
kv_simd kv_simd_force(kv_simd want) {
    kv_simd best = kv_simd_best(), use = want < best ? want : best;
    atomic_store_explicit(&simd_state, 1 + (int)use, memory_order_relaxed);
    return use;
}

/* token_of(key + from + j) for j < 8 (the same values as the scalar path). */
__attribute__((target("avx512f,avx512dq"))) static void tokens8_do(uint64_t key, uint32_t from, uint32_t *out) {
    __m512i x = _mm512_add_epi64(_mm512_set1_epi64((long long)(key + from)), _mm512_set_epi64(7, 6, 5, 4, 3, 2, 1, 0));
    __m512i t = _mm512_srli_epi64(_mm512_mul_epu32(_mm512_srli_epi64(mix8(x), 32), _mm512_set1_epi64(50000)), 32);
    _mm256_storeu_si256((__m256i *)(void *)out, _mm512_cvtepi64_epi32(t));
}

static uint32_t tokens8_avx512(uint64_t key, uint32_t from, uint32_t *out) {
    if (simd_level() != KV_SIMD_AVX512) return 0;
    tokens8_do(key, from, out);
    return 8;
}
#else
static uint32_t tokens8_avx512(uint64_t key, uint32_t from, uint32_t *out) {
    (void)key, (void)from, (void)out;
    return 0;
}
kv_simd kv_simd_best(void) { return KV_SIMD_SCALAR; }
kv_simd kv_simd_used(void) { return KV_SIMD_SCALAR; }
kv_simd kv_simd_force(kv_simd want) {
    (void)want;
    return KV_SIMD_SCALAR;
}
#endif

/* One head: fill (have NULL) or compare; true when equal (fill: always). */
static bool head_bytes_do(uint8_t *out, const uint8_t *have, uint64_t key, uint32_t head_bytes) {
    if (head_bytes == 8u) { /* one word (the simulator's heads): word 0 is kv_mix64(key ^ 0) */
        uint64_t v = kv_mix64(key);
        if (have) return get_word(have) == v;
        put_word(out, v);
        return true;
    }
    uint32_t nw = head_bytes / 8u, k0 = 0;
    uint64_t diff = 0;
#ifdef KV_DATA_SIMD
    kv_simd path = nw >= 4u ? simd_level() : KV_SIMD_SCALAR;
    if (path == KV_SIMD_AVX512 && nw >= 8u) {
        diff = head_words_avx512(out, have, key, nw);
        k0 = nw & ~7u;
    } else if (path != KV_SIMD_SCALAR) {
        diff = head_words_avx2(out, have, key, nw);
        k0 = nw & ~3u;
    }
#endif
    diff |= head_words(out, have, key, k0, nw);
    if (head_bytes & 7u) {
        uint64_t v = kv_mix64(key ^ nw);
        for (uint32_t j = nw * 8u; j < head_bytes; j++) {
            uint8_t b = (uint8_t)(v >> (8u * (j & 7u)));
            if (have) diff |= (uint8_t)(have[j] ^ b);
            else out[j] = b;
        }
    }
    return diff == 0;
}

void kv_fill_block(uint8_t *out, const kv_tokens *t, uint32_t pos, uint32_t block_size,
                   uint32_t n_tokens, uint32_t group, uint32_t head_lo, uint32_t head_hi,
                   uint32_t head_bytes) {
    uint64_t d = tokens_digest(t, pos, block_size, n_tokens);
    for (uint32_t h = head_lo; h < head_hi; h++)
        (void)head_bytes_do(out + (size_t)(h - head_lo) * head_bytes, NULL, head_key(d, group, h), head_bytes);
}

bool kv_verify_block(const uint8_t *have, const kv_tokens *t, uint32_t pos, uint32_t block_size,
                     uint32_t n_tokens, uint32_t group, uint32_t head_lo, uint32_t head_hi,
                     uint32_t head_bytes) {
    uint64_t d = tokens_digest(t, pos, block_size, n_tokens);
    for (uint32_t h = head_lo; h < head_hi; h++)
        if (!head_bytes_do(NULL, have + (size_t)(h - head_lo) * head_bytes, head_key(d, group, h), head_bytes))
            return false;
    return true;
}

/* ---- recurrent state: a chain over every token so far ---- */

#define STATE_SEED 0x84222325cbf29ce4ull

uint64_t kv_state_advance(const kv_tokens *t, uint64_t state, uint32_t from, uint32_t to) {
    return chain(t, state, from, to);
}

uint64_t kv_state_digest(const kv_tokens *t, uint32_t n_tokens) { return chain(t, STATE_SEED, 0, n_tokens); }

uint64_t kv_state_initial(void) { return STATE_SEED; }

/* The inverse of a * x mod 2^64 for odd a (Newton: each step doubles the
 * correct low bits, 3 to start). */
static uint64_t inv_odd(uint64_t a) {
    uint64_t x = a;
    for (int i = 0; i < 5; i++) x *= 2u - a * x;
    return x;
}

/* kv_mix64 undone, step by step (each xor-shift by s is undone by xoring
 * the shifts by s, 2s, ... that stay inside the word). */
static uint64_t unmix64(uint64_t y) {
    y ^= (y >> 31) ^ (y >> 62);
    y *= inv_odd(0x94d049bb133111ebull);
    y ^= (y >> 27) ^ (y >> 54);
    y *= inv_odd(0xbf58476d1ce4e5b9ull);
    y ^= (y >> 30) ^ (y >> 60);
    return y - 0x9e3779b97f4a7c15ull;
}

uint64_t kv_state_read(const uint8_t *block, uint32_t group, uint32_t head_lo) {
    return unmix64(get_word(block)) ^ ((uint64_t)group << 48) ^ ((uint64_t)head_lo << 32);
}

/* ---- digest memo: one token digest per position, shared across groups ---- */

void kv_digest_memo_init(kv_digest_memo *m, const kv_tokens *t, uint32_t block_size, uint32_t n_tokens) {
    m->t = t;
    m->block_size = block_size;
    m->n_tokens = n_tokens;
    m->have = 0;
}

static uint64_t memo_digest(kv_digest_memo *m, uint32_t pos) {
    uint32_t n = m->n_tokens ? m->n_tokens : (pos + 1) * m->block_size;
    if (pos >= KV_DIGEST_MEMO_BLOCKS) return tokens_digest(m->t, pos, m->block_size, n);
    if (!(m->have >> pos & 1u)) {
        m->d[pos] = tokens_digest(m->t, pos, m->block_size, n);
        m->have |= 1ull << pos;
    }
    return m->d[pos];
}

void kv_digest_memo_put(kv_digest_memo *m, uint32_t pos, uint64_t digest) {
    if (pos >= KV_DIGEST_MEMO_BLOCKS) return;
    m->d[pos] = digest;
    m->have |= 1ull << pos;
}

uint64_t kv_block_hash_m(kv_digest_memo *m, uint64_t parent, uint32_t pos, uint32_t group) {
    return hash_of(parent, memo_digest(m, pos), group);
}

uint64_t kv_block_digest_m(kv_digest_memo *m, uint32_t pos) { return memo_digest(m, pos); }

uint64_t kv_group_digest_m(kv_digest_memo *m, uint32_t pos, bool recurrent) {
    if (!recurrent) return memo_digest(m, pos);
    uint32_t end = (pos + 1) * m->block_size;
    return kv_state_digest(m->t, m->n_tokens && m->n_tokens < end ? m->n_tokens : end);
}

void kv_fill_block_digest(uint8_t *out, uint64_t digest, uint32_t group, uint32_t head_lo, uint32_t head_hi,
                          uint32_t head_bytes) {
    for (uint32_t h = head_lo; h < head_hi; h++)
        (void)head_bytes_do(out + (size_t)(h - head_lo) * head_bytes, NULL, head_key(digest, group, h), head_bytes);
}

bool kv_verify_block_digest(const uint8_t *have, uint64_t digest, uint32_t group, uint32_t head_lo,
                            uint32_t head_hi, uint32_t head_bytes) {
    for (uint32_t h = head_lo; h < head_hi; h++)
        if (!head_bytes_do(NULL, have + (size_t)(h - head_lo) * head_bytes, head_key(digest, group, h), head_bytes))
            return false;
    return true;
}

void kv_fill_block_m(uint8_t *out, kv_digest_memo *m, uint32_t pos, uint32_t group, uint32_t head_lo,
                     uint32_t head_hi, uint32_t head_bytes) {
    kv_fill_block_digest(out, memo_digest(m, pos), group, head_lo, head_hi, head_bytes);
}

bool kv_verify_block_m(const uint8_t *have, kv_digest_memo *m, uint32_t pos, uint32_t group,
                       uint32_t head_lo, uint32_t head_hi, uint32_t head_bytes) {
    return kv_verify_block_digest(have, memo_digest(m, pos), group, head_lo, head_hi, head_bytes);
}

void kv_heads_of(uint32_t tp, uint32_t rank, uint32_t *lo, uint32_t *hi) {
    uint32_t per = KV_HEADS / (tp ? tp : 1);
    *lo = rank * per;
    *hi = *lo + per;
}

uint32_t kv_sw_dead_blocks(uint32_t n_tokens, uint32_t window, uint32_t block_size) {
    return n_tokens > window ? (n_tokens - window) / block_size : 0;
}
