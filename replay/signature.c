/* replay/signature.c — see signature.h. */
#include "replay/signature.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

/* Appends c while room is left (one byte kept for the NUL). */
static void put(char *buf, size_t cap, size_t *n, char c) {
    if (*n + 1 < cap)
        buf[(*n)++] = c;
}

static void put_str(char *buf, size_t cap, size_t *n, const char *s) {
    while (*s)
        put(buf, cap, n, *s++);
}

/* Copies s with every digit run replaced by mark; with hex, a "0x" prefix
 * and the hex digits after it count as part of the run. */
static void put_normalised(char *buf, size_t cap, size_t *n, const char *s, char mark, int hex) {
    size_t i = 0;
    while (s[i]) {
        if (!isdigit((unsigned char)s[i])) {
            put(buf, cap, n, s[i++]);
            continue;
        }
        if (hex && s[i] == '0' && (s[i + 1] == 'x' || s[i + 1] == 'X') &&
            isxdigit((unsigned char)s[i + 2])) {
            i += 2;
            while (isxdigit((unsigned char)s[i]))
                i++;
        } else {
            while (isdigit((unsigned char)s[i]))
                i++;
        }
        put(buf, cap, n, mark);
    }
}

void replay_signature(const sim_result *r, char *buf, size_t cap) {
    size_t n = 0;
    if (!cap)
        return;
    put_str(buf, cap, &n, kv_inv_name(r->inv));
    put(buf, cap, &n, ' ');
    put_normalised(buf, cap, &n, r->actor_name[0] ? r->actor_name : "?", '*', 0);
    put(buf, cap, &n, ' ');
    put_normalised(buf, cap, &n, r->detail, '#', 1);
    buf[n] = 0;
}

uint64_t replay_fnv64(const void *data, size_t len) {
    const unsigned char *p = data;
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < len; i++) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

void replay_sig_short(const char *sig, char out[13]) {
    uint64_t h = replay_fnv64(sig, strlen(sig));
    snprintf(out, 13, "%012llx", (unsigned long long)(h >> 16));
}
