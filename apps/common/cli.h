/* apps/common/cli.h — what the command lines of kvsim, kvnode and kvdemo
 * share: --version, strict number parsing, and "-" as stdout. */
#ifndef KVCONN_APPS_CLI_H
#define KVCONN_APPS_CLI_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "apps/common/exit_codes.h"

/* --version: the tool, the kvconn version, the git commit the build was
 * configured at, the build type and the bug switches compiled in. */
void kv_cli_version(FILE *out, const char *tool);

/* The same facts as fields, for documents that must say which build wrote
 * them (kvsim sweep --json): static strings, "unknown" when not set. */
typedef struct kv_cli_build {
    const char *version, *commit, *build;
} kv_cli_build;
kv_cli_build kv_cli_build_info(void);

/* A decimal number in lo..hi: digits only (no sign, no blanks, no 0x),
 * no overflow. 0 ok, -1 otherwise. */
int kv_cli_u64(const char *s, uint64_t lo, uint64_t hi, uint64_t *out);

/* Opens PATH for writing ("w" or "wb"). "-" is stdout: the file then gets
 * the process's stdout, and whatever else the command prints to stdout goes
 * to stderr from here on, so stdout carries the file alone. NULL when the
 * file cannot be opened (errno set). */
FILE *kv_cli_open_out(const char *path, const char *mode);
bool kv_cli_is_stdout(const char *path);

/* A command line to print for copy and paste: each word added is quoted
 * for a POSIX shell when it needs it. Too long a line ends in "...". */
typedef struct kv_cmdline {
    char s[2048];
    size_t n;
} kv_cmdline;
void kv_cmdline_init(kv_cmdline *c, const char *first);
void kv_cmdline_add(kv_cmdline *c, const char *word);

#endif
