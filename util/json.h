/* util/json.h — the one JSON writer of kvconn's programs.
 *
 * Every JSON document kvconn writes (kvsim's --json, the sweep schema, the
 * Perfetto trace, selftest, kvnode's --json) goes through this streaming
 * writer, so there is one escaping rule (RFC 8259): '"', '\\' and the
 * control characters are escaped (\n, \t, \r, \b, \f, else \u00XX), valid
 * UTF-8 passes through, and a byte that is not part of a valid UTF-8
 * sequence becomes U+FFFD, so the output always parses.
 *
 * The writer keeps the container stack and places commas and colons
 * itself; a caller that closes what it did not open, nests deeper than
 * KV_JSON_DEPTH or writes a value where a key belongs sets an error that
 * kv_json_done() reports. Numbers: integers exactly; doubles with a fixed
 * number of decimals, non-finite ones as null.
 *
 * Not used by core/: the core writes no files. */
#ifndef KVCONN_UTIL_JSON_H
#define KVCONN_UTIL_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define KV_JSON_DEPTH 32

typedef struct kv_json {
    FILE *f;
    uint32_t depth;
    char close[KV_JSON_DEPTH]; /* '}' or ']' per open container */
    bool first[KV_JSON_DEPTH]; /* no item written yet in that container */
    bool want_value;           /* a key was written: its value comes next */
    bool misuse;               /* the calls did not describe a well-formed document */
    bool top_done;             /* the top-level value is complete */
} kv_json;

void kv_json_init(kv_json *j, FILE *f);
/* 0 when the document is complete and well formed and the stream had no
 * error; -1 otherwise. Does not close the stream. */
int kv_json_done(kv_json *j);

void kv_json_obj(kv_json *j);
void kv_json_arr(kv_json *j);
void kv_json_end(kv_json *j); /* closes the innermost object or array */
void kv_json_key(kv_json *j, const char *key);

void kv_json_str(kv_json *j, const char *s); /* NULL writes null */
void kv_json_strn(kv_json *j, const char *s, size_t n);
void kv_json_u64(kv_json *j, uint64_t v);
void kv_json_i64(kv_json *j, int64_t v);
void kv_json_f64(kv_json *j, double v, int decimals);
void kv_json_bool(kv_json *j, bool v);
void kv_json_null(kv_json *j);
/* A line break between items (JSON allows whitespace there): documents of
 * many records stay readable and diffable line by line. */
void kv_json_nl(kv_json *j);

/* key + value in one call */
void kv_json_kstr(kv_json *j, const char *key, const char *s);
void kv_json_ku64(kv_json *j, const char *key, uint64_t v);
void kv_json_ki64(kv_json *j, const char *key, int64_t v);
void kv_json_kf64(kv_json *j, const char *key, double v, int decimals);
void kv_json_kbool(kv_json *j, const char *key, bool v);
void kv_json_kobj(kv_json *j, const char *key);
void kv_json_karr(kv_json *j, const char *key);

/* The escaped body of a JSON string (no quotes) written to f. */
void kv_json_escape(FILE *f, const char *s, size_t n);

#endif
