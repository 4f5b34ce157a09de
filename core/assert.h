/* core/assert.h — assertions inside the core, in two tiers (STYLE.md 2-3).
 *
 * What an assertion states: a property of our own state, or of a message
 * one of our own actors built for another of our actors (a worker's
 * STEP_RESULT, a pull meta, a store job, our own timers, a frame our own
 * encoder wrote). Never of input from a peer: wire bytes, control messages
 * from other processes (the proxy's ADD_REQ/ABORT, engines' REQ_DONE,
 * bootstrap registrations and replies), transport events and store replies
 * are validated and refused as before, and are never asserted on.
 *
 * Tiers:
 *   KV_ASSERT(env, engine, cond, fmt, ...)
 *       cheap, O(1): compiled into every build, production included.
 *   KV_ASSERT_CHECKED(env, engine, cond, fmt, ...)
 *       expensive (a walk over a whole object, a re-decode): compiled only in
 *       checked builds (KVCONN_CHECKED: the default, clang, asan, tsan, fuzz
 *       and afl presets; not prod or pgo). Elsewhere the condition is not
 *       evaluated.
 *   KV_CHECKED
 *       1 in checked builds, else 0, for `if (KV_CHECKED) walk(x);`.
 * Both macros are expressions: true when the condition holds.
 *
 * A failure calls kv_assert_fail: a violation KV_INV_ASSERT through the
 * env's violation callback, detail
 *   "core/engine.c:412: assert(n_waiting <= cap) failed: engine 0 scheduler: n_waiting 70 cap 64"
 * (file:line, the condition, then the object and the state its fmt names).
 * The production env (transport/posix/posix_env.c) prints that line as
 * "VIOLATION INV-ASSERT ..." and aborts. The simulator and the fuzzers record
 * the violation and stop the run at the end of the current event, so the
 * handler runs on after a failed assertion. Every site is written so that
 * going on is harmless: an invariant function or a postcondition only reads;
 * a precondition guarding an index, a count or a pointer returns at once
 * (`if (!KV_ASSERT(...)) return;`), leaving the object as it was; and an
 * invariant function returns at its first failure, before a later check
 * would index with the value found broken.
 *
 * Assertions never change what they check, never call the env except on
 * failure, and never change the trace: with every assertion passing, every
 * trace hash is that of a build without them. */
#ifndef KVCONN_CORE_ASSERT_H
#define KVCONN_CORE_ASSERT_H

#include <stdbool.h>
#include <stdint.h>

#include "kvconn/env.h"

/* Reports the failed assertion (KV_INV_ASSERT) and returns false. file is
 * trimmed to its last two components ("core/engine.c"); cond is the
 * condition's text; fmt names the object and its state. */
#if defined(__GNUC__)
__attribute__((format(printf, 6, 7), cold, noinline))
#endif
bool kv_assert_fail(const kv_env *env, uint32_t engine, const char *file, int line, const char *cond,
                    const char *fmt, ...);

#if defined(__GNUC__)
#define KV_LIKELY(x) __builtin_expect(!!(x), 1)
#else
#define KV_LIKELY(x) (!!(x))
#endif

/* The identity: a call whose result may go unused (an assertion used as a
 * statement), where a bare `a || b` would trip -Wunused-value. */
static inline bool kv_assert_ok(bool ok) { return ok; }

#define KV_ASSERT(env, engine, cond, ...) \
    kv_assert_ok(KV_LIKELY(cond) || kv_assert_fail((env), (engine), __FILE__, __LINE__, #cond, __VA_ARGS__))

/* For invariant walks: true when id[0..n) are pairwise distinct; else
 * *a < *b index a pair of equal ids. O(n^2) in the ids given: a walk
 * gathers the ids of its used slots first (usually few of a table). */
bool kv_ids_distinct(const uint32_t *id, uint32_t n, uint32_t *a, uint32_t *b);

#ifdef KVCONN_CHECKED
#define KV_CHECKED 1
#define KV_ASSERT_CHECKED(env, engine, cond, ...) KV_ASSERT(env, engine, cond, __VA_ARGS__)
#else
#define KV_CHECKED 0
/* Compiled (so its operands stay "used") but never evaluated: the inline
 * false folds the whole assertion away. */
static inline bool kv_checked_build(void) { return false; }
#define KV_ASSERT_CHECKED(env, engine, cond, ...) kv_assert_ok(!kv_checked_build() || KV_ASSERT(env, engine, cond, __VA_ARGS__))
#endif

#endif
