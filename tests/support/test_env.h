/* tests/support/test_env.h — a kv_env for unit tests: libc heap, a settable
 * clock, a seeded PRNG, and a violation recorder the test can inspect. The
 * heap counts what it hands out and takes back, and can refuse one
 * allocation: a constructor's failure paths, one allocation at a time. Each
 * allocation has a guard after it, checked when it is released: a write
 * past its end aborts the test. */
#ifndef KVCONN_TEST_ENV_H
#define KVCONN_TEST_ENV_H

#include <stdint.h>

#include "kvconn/env.h"

#define TEST_ENV_VIOLATIONS_MAX 64

typedef struct test_env {
    kv_env env;              /* pass &te.env to the code under test */
    uint64_t now_ns;         /* the clock; tests set it */
    uint64_t rng;            /* splitmix state */
    uint32_t actor;          /* what current_actor returns */
    uint32_t n_violations;   /* recorded so far */
    kv_violation v[TEST_ENV_VIOLATIONS_MAX]; /* detail points into text[] */
    char text[TEST_ENV_VIOLATIONS_MAX][256];
    int quiet;               /* 1: do not print log lines */
    uint32_t n_warn;         /* log lines at KV_LOG_WARN or above, printed or not */
    char last_warn[512];     /* the latest of them */
    uint64_t allocs;         /* allocations asked for so far (refused ones too) */
    int64_t live;            /* handed out and not yet released */
    uint64_t fail_alloc;     /* the allocation with this number (allocs after it) is refused; 0: none */
} test_env;

void test_env_init(test_env *te);
/* Number of recorded violations of one invariant. */
uint32_t test_env_count(const test_env *te, kv_inv inv);

#endif
