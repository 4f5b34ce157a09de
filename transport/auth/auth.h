/* transport/auth/auth.h — the cluster secret and the challenge–response every
 * production link runs before it may hold a resource (transport/README.md,
 * "Threat model").
 *
 * The secret is 32 random bytes, written as 64 hex digits. It comes from a
 * file (kv_auth_load_file: a regular file owned by this user that nobody else
 * may read or write) or from an environment variable (kv_auth_load_env).
 * `kvnode keygen PATH` writes one (kv_auth_generate).
 *
 * The MAC is HMAC-SHA-256 from libsodium (crypto_auth_hmacsha256), compared
 * in constant time; nonces come from libsodium's system CSPRNG. Every MAC
 * binds a label naming the protocol and the role of the side that computed
 * it, so a proof can never be replayed in the other direction or on another
 * kind of link; the parts are length-prefixed so no two inputs collide. */
#ifndef KVCONN_TRANSPORT_AUTH_H
#define KVCONN_TRANSPORT_AUTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kvconn/status.h"

#define KV_AUTH_KEY_BYTES 32u
#define KV_AUTH_NONCE_BYTES 32u
#define KV_AUTH_MAC_BYTES 32u
#define KV_AUTH_ENV "KVCONN_SECRET" /* the variable kvnode reads when it has no --secret-file */

typedef struct kv_auth_key {
    bool set; /* false: no secret; links run unauthenticated (loopback only in kvnode) */
    uint8_t k[KV_AUTH_KEY_BYTES];
} kv_auth_key;

/* One part of a MAC's input. */
typedef struct kv_auth_part {
    const void *p;
    size_t n;
} kv_auth_part;

/* Once per process before anything else here (idempotent, thread-safe).
 * KV_EIO when libsodium cannot start (no system randomness). */
kv_status kv_auth_init(void);

/* Reads the secret from path. KV_EINVAL with err naming what is wrong: not
 * there, not a regular file, owned by someone else, readable or writable by
 * group or others, or not exactly 64 hex digits (one trailing newline
 * allowed). */
kv_status kv_auth_load_file(const char *path, kv_auth_key *out, char *err, size_t err_cap);
/* Reads the secret from the environment variable var. KV_ENOENT when it is
 * unset or empty; KV_EINVAL (err says why) when it is not 64 hex digits. */
kv_status kv_auth_load_env(const char *var, kv_auth_key *out, char *err, size_t err_cap);
/* Writes a new random secret to path, created with mode 0600; never
 * overwrites (KV_EEXIST). KV_EIO with err on any other failure. */
kv_status kv_auth_generate(const char *path, char *err, size_t err_cap);

/* Fills out with fresh random bytes (a nonce). */
void kv_auth_random(void *out, size_t n);
/* HMAC-SHA-256 under key of label, then each part, each prefixed with its
 * length (u32 little-endian). */
void kv_auth_mac(const kv_auth_key *key, const char *label, const kv_auth_part *parts, uint32_t n,
                 uint8_t out[KV_AUTH_MAC_BYTES]);
/* Whether mac is kv_auth_mac of the same input; constant time in the MAC. */
bool kv_auth_check(const kv_auth_key *key, const char *label, const kv_auth_part *parts, uint32_t n,
                   const uint8_t mac[KV_AUTH_MAC_BYTES]);
/* *dst = *src, or wiped when src is NULL or unset; starts the library
 * first (KV_EIO when it cannot). What kvt_tcp_set_secret and
 * kvp_rt_set_secret keep. */
kv_status kv_auth_set(kv_auth_key *dst, const kv_auth_key *src);
/* Wipes the key (sodium_memzero). */
void kv_auth_forget(kv_auth_key *key);

#endif
