/* util/json_read.h — a small strict JSON reader, the counterpart of
 * util/json.h for the documents kvconn writes and reads back (kvsim report
 * reads the kvconn.sweep documents of sweep shards).
 *
 * Strict RFC 8259: one value with optional whitespace around it; no
 * comments, no trailing commas, no leading zeros, no raw control
 * characters in strings, no lone surrogates, valid UTF-8 only, no
 * duplicate keys in an object, at most KV_JREAD_DEPTH levels of nesting.
 * Anything else is refused with the byte offset and what was wrong: the
 * reader only has to read what kv_json writes, and a document that is not
 * exactly JSON is a damaged shard output, not something to guess at.
 *
 * The whole document is parsed at once into a tree of nodes owned by the
 * kv_jdoc (one node array plus one copy of the text that the decoded
 * strings live in); nodes are reached from the root by key or index. */
#ifndef KVCONN_UTIL_JSON_READ_H
#define KVCONN_UTIL_JSON_READ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define KV_JREAD_DEPTH 64

typedef enum kv_jtype {
    KV_J_NULL,
    KV_J_BOOL,
    KV_J_NUM,
    KV_J_STR,
    KV_J_ARR,
    KV_J_OBJ,
} kv_jtype;

typedef struct kv_jnode {
    kv_jtype type;
    const char *key;  /* the member name inside an object (decoded, NUL-ended); else NULL */
    const char *str;  /* KV_J_STR: the decoded string, NUL-ended (may hold NULs: see len) */
    size_t len;       /* KV_J_STR: its length in bytes */
    double num;       /* KV_J_NUM */
    bool is_u64;      /* KV_J_NUM written as a plain non-negative integer within uint64 */
    uint64_t u64;     /* valid when is_u64 */
    bool b;           /* KV_J_BOOL */
    uint32_t n;       /* KV_J_ARR / KV_J_OBJ: number of items */
    uint32_t first;   /* index of the first item (0: none; the root is node 0) */
    uint32_t next;    /* index of the next item of the same container (0: last) */
} kv_jnode;

typedef struct kv_jdoc {
    kv_jnode *nodes;
    uint32_t n_nodes, cap;
    char *text;       /* the copy of the input the strings are decoded into */
    size_t err_at;    /* byte offset of the error */
    char err[128];    /* what was wrong; empty after a successful parse */
} kv_jdoc;

/* Parses len bytes of text. 0 ok (kv_jdoc_root gives the value); -1 with
 * d->err and d->err_at set. Either way free with kv_jdoc_free. */
int kv_jdoc_parse(kv_jdoc *d, const char *text, size_t len);
void kv_jdoc_free(kv_jdoc *d);

const kv_jnode *kv_jdoc_root(const kv_jdoc *d);
/* The member named key of an object; NULL when v is not an object or has none. */
const kv_jnode *kv_jget(const kv_jdoc *d, const kv_jnode *v, const char *key);
/* The i-th item of an array or object; NULL when out of range. */
const kv_jnode *kv_jat(const kv_jdoc *d, const kv_jnode *v, uint32_t i);
/* Iteration: the first item of a container, then the one after it (NULL at the end). */
const kv_jnode *kv_jfirst(const kv_jdoc *d, const kv_jnode *v);
const kv_jnode *kv_jnext(const kv_jdoc *d, const kv_jnode *v);

/* Typed access to a member: false when it is missing or of another type. */
bool kv_jget_u64(const kv_jdoc *d, const kv_jnode *obj, const char *key, uint64_t *out);
bool kv_jget_f64(const kv_jdoc *d, const kv_jnode *obj, const char *key, double *out);
/* The string, or NULL when missing or not a string. */
const char *kv_jget_str(const kv_jdoc *d, const kv_jnode *obj, const char *key);

#endif
