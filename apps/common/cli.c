/* apps/common/cli.c — see cli.h and exit_codes.h. */
#include "apps/common/cli.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/engine.h"

#ifndef KVCONN_VERSION
#define KVCONN_VERSION "unknown"
#endif
#ifndef KVCONN_GIT_COMMIT
#define KVCONN_GIT_COMMIT "unknown"
#endif
#ifndef KVCONN_BUILD_DESC
#define KVCONN_BUILD_DESC "unknown"
#endif

void kv_exit_print(FILE *out) {
    fputs(
        "exit: 0 clean, 1 safety violation, 2 liveness violation, 3 bad input, 4 usage error,\n"
        "      5 resources exhausted (simulator; kvnode start-up), 6 database corrupt or not a\n"
        "      findings database, 7 database schema version, 8 database read-only, 9 a fixed case\n"
        "      came back, 10 a case does not reproduce as recorded, 11 kvnode's peer went away\n",
        out);
}

void kv_cli_version(FILE *out, const char *tool) {
    fprintf(out, "%s (kvconn) %s\ncommit %s\nbuild %s\nbug switches:", tool, KVCONN_VERSION,
            KVCONN_GIT_COMMIT, KVCONN_BUILD_DESC);
#ifdef KVCONN_BUG_SWITCHES
    for (uint32_t b = 1; b; b <<= 1)
        if (strcmp(kv_bug_name(b), "?"))
            fprintf(out, " %s", kv_bug_name(b));
    fputc('\n', out);
#else
    fputs(" none (production build: compiled out)\n", out);
#endif
    fprintf(out, "kv fill/verify path: %s\n", kv_simd_name(kv_simd_used()));
}

kv_cli_build kv_cli_build_info(void) {
    return (kv_cli_build){.version = KVCONN_VERSION, .commit = KVCONN_GIT_COMMIT, .build = KVCONN_BUILD_DESC};
}

int kv_cli_u64(const char *s, uint64_t lo, uint64_t hi, uint64_t *out) {
    if (!s || !*s)
        return -1;
    for (const char *p = s; *p; p++)
        if (*p < '0' || *p > '9')
            return -1;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno == ERANGE || *end || v < lo || v > hi)
        return -1;
    *out = (uint64_t)v;
    return 0;
}

bool kv_cli_is_stdout(const char *path) {
    return path && !strcmp(path, "-");
}

FILE *kv_cli_open_out(const char *path, const char *mode) {
    if (!kv_cli_is_stdout(path))
        return fopen(path, mode);
    fflush(stdout);
    int fd = dup(STDOUT_FILENO);
    FILE *f = fd < 0 ? NULL : fdopen(fd, mode);
    if (!f) {
        if (fd >= 0)
            close(fd);
        return NULL;
    }
    if (dup2(STDERR_FILENO, STDOUT_FILENO) < 0) {
        fclose(f);
        return NULL;
    }
    return f;
}

void kv_cmdline_init(kv_cmdline *c, const char *first) {
    c->n = 0;
    c->s[0] = 0;
    kv_cmdline_add(c, first);
}

static bool plain_word(const char *w) {
    if (!*w)
        return false;
    for (const char *p = w; *p; p++)
        if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./:=,+@%", *p))
            return false;
    return true;
}

static void put(kv_cmdline *c, char ch) {
    if (c->n + 4 < sizeof c->s) {
        c->s[c->n++] = ch;
        c->s[c->n] = 0;
    } else if (c->n + 4 == sizeof c->s) {
        memcpy(c->s + c->n, "...", 4);
        c->n += 3;
    }
}

void kv_cmdline_add(kv_cmdline *c, const char *word) {
    if (c->n)
        put(c, ' ');
    bool plain = plain_word(word);
    if (!plain)
        put(c, '\'');
    for (const char *p = word; *p; p++) {
        if (*p == '\'') {
            put(c, '\'');
            put(c, '\\');
            put(c, '\'');
        }
        put(c, *p);
    }
    if (!plain)
        put(c, '\'');
}
