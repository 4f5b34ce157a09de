/* replay/signature.h — the violation signature: what makes two findings the
 * same finding, whatever seed, time or instance numbers they came with.
 *
 *   signature = INVARIANT " " ROLE " " DETAIL
 *     INVARIANT  kv_inv_name (INV-LIVE, SCHED-ASSERT, ...)
 *     ROLE       the failing actor's name with every digit run replaced by
 *                '*': "D3.w1.main" -> "D*.w*.main", "world" stays "world"
 *     DETAIL     the checker's detail text with every number (decimal, or
 *                hex with a 0x prefix) replaced by '#':
 *                "request 3 ... on engine 3" -> "request # ... on engine #"
 * Request ids, engine and rank indices, actor ids, block counts and times
 * all vanish; the invariant, the kind of actor and the wording of the
 * failed check (which names the state or assertion) remain. The signature
 * hash (FNV-1a 64 of the signature) names files: its first 12 hex digits.
 *
 * Pure functions; no allocation. */
#ifndef KVCONN_REPLAY_SIGNATURE_H
#define KVCONN_REPLAY_SIGNATURE_H

#include <stddef.h>
#include <stdint.h>

#include "sim/world.h"

/* Longest signature text, NUL included (invariant + role + detail). */
#define REPLAY_SIG_MAX 320u

/* Writes r's signature into buf (always NUL-terminated, cut at cap - 1).
 * r must be a violation (r->violated). */
void replay_signature(const sim_result *r, char *buf, size_t cap);
/* FNV-1a 64 of len bytes. */
uint64_t replay_fnv64(const void *data, size_t len);
/* 12 lowercase hex digits of replay_fnv64(sig) into out[13]. */
void replay_sig_short(const char *sig, char out[13]);

#endif
