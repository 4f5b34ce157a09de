/* transport/auth/auth.c — the cluster secret and its MAC; see auth.h. */
#include "transport/auth/auth.h"

#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

_Static_assert(crypto_auth_hmacsha256_BYTES == KV_AUTH_MAC_BYTES, "MAC size");

#define HEX_LEN (2u * KV_AUTH_KEY_BYTES)

kv_status kv_auth_init(void) { return sodium_init() < 0 ? KV_EIO : KV_OK; }

__attribute__((format(printf, 4, 5))) static kv_status fail(char *err, size_t cap, kv_status st, const char *fmt,
                                                            ...) {
    va_list ap;
    va_start(ap, fmt);
    if (err && cap) vsnprintf(err, cap, fmt, ap);
    va_end(ap);
    return st;
}

/* 64 hex digits, then at most one newline. */
static kv_status parse_hex(const char *s, size_t len, kv_auth_key *out, const char *where, char *err, size_t cap) {
    if (len == HEX_LEN + 1u && s[HEX_LEN] == '\n') len--;
    size_t bin_len = 0;
    kv_auth_key k = {.set = true};
    if (len != HEX_LEN || sodium_hex2bin(k.k, sizeof k.k, s, len, NULL, &bin_len, NULL) != 0 ||
        bin_len != KV_AUTH_KEY_BYTES) {
        sodium_memzero(&k, sizeof k);
        return fail(err, cap, KV_EINVAL, "%s: the secret must be exactly 64 hex digits (kvnode keygen PATH writes one)",
                    where);
    }
    *out = k;
    sodium_memzero(&k, sizeof k);
    return KV_OK;
}

kv_status kv_auth_load_file(const char *path, kv_auth_key *out, char *err, size_t cap) {
    char buf[HEX_LEN + 2u];
    struct stat st;
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return fail(err, cap, KV_EINVAL, "%s: cannot open the secret file: %s", path, strerror(errno));
    kv_status rc = KV_OK;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
        rc = fail(err, cap, KV_EINVAL, "%s: the secret file is not a regular file", path);
    else if (st.st_uid != geteuid())
        rc = fail(err, cap, KV_EINVAL, "%s: the secret file belongs to another user", path);
    else if (st.st_mode & (S_IRWXG | S_IRWXO))
        rc = fail(err, cap, KV_EINVAL, "%s: the secret file may be read or written by others (chmod 600 %s)", path,
                  path);
    ssize_t n = rc == KV_OK ? read(fd, buf, sizeof buf) : 0;
    close(fd);
    if (rc == KV_OK && n < 0) rc = fail(err, cap, KV_EINVAL, "%s: cannot read the secret file: %s", path, strerror(errno));
    if (rc == KV_OK) rc = parse_hex(buf, (size_t)n, out, path, err, cap);
    sodium_memzero(buf, sizeof buf);
    return rc;
}

kv_status kv_auth_load_env(const char *var, kv_auth_key *out, char *err, size_t cap) {
    const char *v = getenv(var);
    if (!v || !v[0]) return KV_ENOENT;
    return parse_hex(v, strlen(v), out, var, err, cap);
}

kv_status kv_auth_generate(const char *path, char *err, size_t cap) {
    uint8_t k[KV_AUTH_KEY_BYTES];
    char hex[HEX_LEN + 2u];
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
        return fail(err, cap, errno == EEXIST ? KV_EEXIST : KV_EIO, "%s: cannot create the secret file: %s", path,
                    errno == EEXIST ? "it exists (a secret is never overwritten)" : strerror(errno));
    randombytes_buf(k, sizeof k);
    sodium_bin2hex(hex, sizeof hex, k, sizeof k);
    hex[HEX_LEN] = '\n';
    ssize_t w = write(fd, hex, HEX_LEN + 1u);
    int c = close(fd);
    sodium_memzero(k, sizeof k);
    sodium_memzero(hex, sizeof hex);
    if (w != (ssize_t)(HEX_LEN + 1u) || c != 0) {
        (void)unlink(path);
        return fail(err, cap, KV_EIO, "%s: cannot write the secret file", path);
    }
    return KV_OK;
}

void kv_auth_random(void *out, size_t n) { randombytes_buf(out, n); }

void kv_auth_mac(const kv_auth_key *key, const char *label, const kv_auth_part *parts, uint32_t n,
                 uint8_t out[KV_AUTH_MAC_BYTES]) {
    crypto_auth_hmacsha256_state st;
    crypto_auth_hmacsha256_init(&st, key->k, sizeof key->k);
    crypto_auth_hmacsha256_update(&st, (const unsigned char *)label, strlen(label) + 1u); /* with its NUL */
    for (uint32_t i = 0; i < n; i++) {
        uint8_t len[4] = {(uint8_t)parts[i].n, (uint8_t)(parts[i].n >> 8), (uint8_t)(parts[i].n >> 16),
                          (uint8_t)(parts[i].n >> 24)};
        crypto_auth_hmacsha256_update(&st, len, sizeof len);
        if (parts[i].n) crypto_auth_hmacsha256_update(&st, parts[i].p, parts[i].n);
    }
    crypto_auth_hmacsha256_final(&st, out);
    sodium_memzero(&st, sizeof st);
}

bool kv_auth_check(const kv_auth_key *key, const char *label, const kv_auth_part *parts, uint32_t n,
                   const uint8_t mac[KV_AUTH_MAC_BYTES]) {
    uint8_t want[KV_AUTH_MAC_BYTES];
    kv_auth_mac(key, label, parts, n, want);
    bool ok = crypto_verify_32(want, mac) == 0;
    sodium_memzero(want, sizeof want);
    return ok;
}

void kv_auth_forget(kv_auth_key *key) { sodium_memzero(key, sizeof *key); }

kv_status kv_auth_set(kv_auth_key *dst, const kv_auth_key *src) {
    if (!src || !src->set) {
        kv_auth_forget(dst);
        return KV_OK;
    }
    if (kv_auth_init() != KV_OK) return KV_EIO;
    *dst = *src;
    return KV_OK;
}
