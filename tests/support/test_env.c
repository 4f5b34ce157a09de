/* tests/support/test_env.c — see test_env.h. */
#include "tests/support/test_env.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kvconn/actor.h"

static uint64_t te_now(void *ctx) { return ((test_env *)ctx)->now_ns; }
/* Every allocation sits between a header holding its size and a guard of
 * TE_GUARD bytes after it; the release checks the guard, so a write past
 * the end of what the code asked for fails the test that frees it (abort:
 * the suite names the test), without a sanitizer. */
#define TE_HEAD 16u
#define TE_GUARD 16u
#define TE_GUARD_BYTE 0xfd
static void *te_alloc(void *ctx, size_t n) {
    test_env *te = ctx;
    if (++te->allocs == te->fail_alloc) return NULL;
    uint8_t *p = calloc(1, TE_HEAD + n + TE_GUARD);
    if (!p) return NULL;
    memcpy(p, &n, sizeof n);
    memset(p + TE_HEAD + n, TE_GUARD_BYTE, TE_GUARD);
    te->live++;
    return p + TE_HEAD;
}
static void te_release(void *ctx, void *q) {
    test_env *te = ctx;
    if (!q) return;
    uint8_t *p = (uint8_t *)q - TE_HEAD;
    size_t n;
    memcpy(&n, p, sizeof n);
    for (uint32_t i = 0; i < TE_GUARD; i++)
        if (p[TE_HEAD + n + i] != TE_GUARD_BYTE) {
            fprintf(stderr, "test_env: an allocation of %zu bytes was written past its end (byte %u after it)\n", n, i);
            abort();
        }
    te->live--;
    free(p);
}
static uint64_t te_rand(void *ctx) {
    test_env *te = ctx;
    uint64_t x = (te->rng += 0x9e3779b97f4a7c15ull);
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}
KV_FMT_VA(3) static void te_log(void *ctx, kv_log_level lvl, const char *fmt, va_list ap) {
    test_env *te = ctx;
    if (lvl < KV_LOG_WARN) return;
    va_list aq;
    va_copy(aq, ap);
    vsnprintf(te->last_warn, sizeof te->last_warn, fmt, aq);
    va_end(aq);
    te->n_warn++;
    if (te->quiet) return;
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
}
static void te_violation(void *ctx, const kv_violation *v) {
    test_env *te = ctx;
    if (te->n_violations >= TEST_ENV_VIOLATIONS_MAX) return;
    uint32_t i = te->n_violations++;
    te->v[i] = *v;
    snprintf(te->text[i], sizeof te->text[i], "%s", v->detail ? v->detail : "");
    te->v[i].detail = te->text[i];
}
static uint32_t te_actor(void *ctx) { return ((test_env *)ctx)->actor; }

void test_env_init(test_env *te) {
    memset(te, 0, sizeof *te);
    te->env = (kv_env){.size = sizeof(kv_env),
                       .ctx = te,
                       .now_ns = te_now,
                       .alloc = te_alloc,
                       .release = te_release,
                       .random_u64 = te_rand,
                       .log = te_log,
                       .violation = te_violation,
                       .current_actor = te_actor};
    te->rng = 1;
    te->actor = KV_ACTOR_NONE;
    te->quiet = 1;
}

uint32_t test_env_count(const test_env *te, kv_inv inv) {
    uint32_t c = 0;
    for (uint32_t i = 0; i < te->n_violations; i++) c += te->v[i].inv == inv;
    return c;
}
