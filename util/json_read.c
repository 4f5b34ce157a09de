/* util/json_read.c — see json_read.h. A recursive-descent parser over a
 * private copy of the text: strings are decoded in place (a decoded string
 * is never longer than its escaped form), so a node's strings point into
 * that copy and no string is allocated on its own. */
#include "util/json_read.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct parser {
    kv_jdoc *d;
    char *s;     /* the copy */
    size_t len, at;
} parser;

#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
static int fail(parser *p, const char *fmt, ...) {
    if (p->d->err[0]) return -1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->d->err, sizeof p->d->err, fmt, ap);
    va_end(ap);
    p->d->err_at = p->at;
    return -1;
}

static void skip_ws(parser *p) {
    while (p->at < p->len && (p->s[p->at] == ' ' || p->s[p->at] == '\t' || p->s[p->at] == '\n' || p->s[p->at] == '\r'))
        p->at++;
}

static long new_node(parser *p, kv_jtype t) {
    kv_jdoc *d = p->d;
    if (d->n_nodes == d->cap) {
        uint32_t cap = d->cap ? d->cap * 2 : 64;
        if (cap <= d->cap) return fail(p, "too many values");
        kv_jnode *n = realloc(d->nodes, (size_t)cap * sizeof *n);
        if (!n) return fail(p, "out of memory");
        d->nodes = n;
        d->cap = cap;
    }
    memset(&d->nodes[d->n_nodes], 0, sizeof d->nodes[0]);
    d->nodes[d->n_nodes].type = t;
    return (long)d->n_nodes++;
}

static int hex4(parser *p, uint32_t *out) {
    uint32_t v = 0;
    for (int i = 0; i < 4; i++, p->at++) {
        char c = p->at < p->len ? p->s[p->at] : 0;
        v <<= 4;
        if (c >= '0' && c <= '9') v |= (uint32_t)(c - '0');
        else if (c >= 'a' && c <= 'f') v |= (uint32_t)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F') v |= (uint32_t)(c - 'A' + 10);
        else return fail(p, "\\u needs four hex digits");
    }
    *out = v;
    return 0;
}

static size_t put_utf8(char *w, uint32_t cp) {
    if (cp < 0x80) return w[0] = (char)cp, 1;
    if (cp < 0x800) return w[0] = (char)(0xC0 | cp >> 6), w[1] = (char)(0x80 | (cp & 0x3F)), 2;
    if (cp < 0x10000)
        return w[0] = (char)(0xE0 | cp >> 12), w[1] = (char)(0x80 | (cp >> 6 & 0x3F)), w[2] = (char)(0x80 | (cp & 0x3F)), 3;
    w[0] = (char)(0xF0 | cp >> 18), w[1] = (char)(0x80 | (cp >> 12 & 0x3F));
    w[2] = (char)(0x80 | (cp >> 6 & 0x3F)), w[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* The length of the valid UTF-8 sequence at s (1..4), 0 when not valid
 * (overlong forms, surrogates and code points past U+10FFFF included). */
static size_t utf8_len(const unsigned char *s, size_t avail) {
    if (s[0] < 0x80) return 1;
    size_t n = s[0] >= 0xC2 && s[0] <= 0xDF ? 2 : s[0] >= 0xE0 && s[0] <= 0xEF ? 3 : s[0] >= 0xF0 && s[0] <= 0xF4 ? 4 : 0;
    if (!n || n > avail) return 0;
    for (size_t i = 1; i < n; i++)
        if ((s[i] & 0xC0) != 0x80) return 0;
    if (n == 3 && ((s[0] == 0xE0 && s[1] < 0xA0) || (s[0] == 0xED && s[1] >= 0xA0))) return 0;
    if (n == 4 && ((s[0] == 0xF0 && s[1] < 0x90) || (s[0] == 0xF4 && s[1] >= 0x90))) return 0;
    return n;
}

/* At the opening quote: decodes the string in place; *out its start. */
static int parse_string(parser *p, const char **out, size_t *out_len) {
    p->at++;
    char *start = p->s + p->at, *w = start;
    for (;;) {
        if (p->at >= p->len) return fail(p, "unterminated string");
        unsigned char c = (unsigned char)p->s[p->at];
        if (c == '"') break;
        if (c < 0x20) return fail(p, "control character in a string");
        if (c != '\\') {
            size_t n = utf8_len((const unsigned char *)p->s + p->at, p->len - p->at);
            if (!n) return fail(p, "invalid UTF-8");
            memmove(w, p->s + p->at, n);
            w += n;
            p->at += n;
            continue;
        }
        p->at++;
        char e = p->at < p->len ? p->s[p->at] : 0;
        p->at++;
        switch (e) {
        case '"': *w++ = '"'; break;
        case '\\': *w++ = '\\'; break;
        case '/': *w++ = '/'; break;
        case 'b': *w++ = '\b'; break;
        case 'f': *w++ = '\f'; break;
        case 'n': *w++ = '\n'; break;
        case 'r': *w++ = '\r'; break;
        case 't': *w++ = '\t'; break;
        case 'u': {
            uint32_t cp, lo;
            if (hex4(p, &cp)) return -1;
            if (cp >= 0xDC00 && cp <= 0xDFFF) return fail(p, "lone low surrogate");
            if (cp >= 0xD800 && cp <= 0xDBFF) {
                if (p->at + 2 > p->len || p->s[p->at] != '\\' || p->s[p->at + 1] != 'u')
                    return fail(p, "high surrogate without its low surrogate");
                p->at += 2;
                if (hex4(p, &lo)) return -1;
                if (lo < 0xDC00 || lo > 0xDFFF) return fail(p, "high surrogate without its low surrogate");
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            }
            w += put_utf8(w, cp);
            break;
        }
        default:
            p->at--;
            return fail(p, "unknown escape");
        }
    }
    *out_len = (size_t)(w - start);
    *w = 0; /* at or before the closing quote, which is consumed here */
    p->at++;
    *out = start;
    return 0;
}

static int digits(parser *p) {
    size_t from = p->at;
    while (p->at < p->len && p->s[p->at] >= '0' && p->s[p->at] <= '9') p->at++;
    return p->at > from ? 0 : fail(p, "a number needs digits here");
}

static int parse_number(parser *p, kv_jnode *n) {
    size_t from = p->at;
    bool plain = true;
    if (p->s[p->at] == '-') p->at++, plain = false;
    if (p->at < p->len && p->s[p->at] == '0') {
        p->at++;
        if (p->at < p->len && p->s[p->at] >= '0' && p->s[p->at] <= '9') return fail(p, "leading zero");
    } else if (digits(p)) {
        return -1;
    }
    if (p->at < p->len && p->s[p->at] == '.') {
        p->at++, plain = false;
        if (digits(p)) return -1;
    }
    if (p->at < p->len && (p->s[p->at] == 'e' || p->s[p->at] == 'E')) {
        p->at++, plain = false;
        if (p->at < p->len && (p->s[p->at] == '+' || p->s[p->at] == '-')) p->at++;
        if (digits(p)) return -1;
    }
    char buf[64];
    size_t len = p->at - from;
    if (len >= sizeof buf) return p->at = from, fail(p, "number longer than %zu characters", sizeof buf - 1);
    memcpy(buf, p->s + from, len);
    buf[len] = 0;
    n->num = strtod(buf, NULL);
    if (!isfinite(n->num)) return p->at = from, fail(p, "number out of range");
    if (plain) {
        errno = 0;
        unsigned long long v = strtoull(buf, NULL, 10);
        n->is_u64 = errno != ERANGE;
        n->u64 = n->is_u64 ? (uint64_t)v : 0;
    }
    return 0;
}

static int literal(parser *p, const char *word) {
    size_t n = strlen(word);
    if (p->len - p->at < n || memcmp(p->s + p->at, word, n)) return fail(p, "unexpected character");
    p->at += n;
    return 0;
}

static long parse_value(parser *p, unsigned depth);

/* At '[' or '{': the items, linked in order under node self. */
static int parse_container(parser *p, long self, bool obj, unsigned depth) {
    char close = obj ? '}' : ']';
    long last = 0;
    p->at++;
    skip_ws(p);
    if (p->at < p->len && p->s[p->at] == close) return p->at++, 0;
    for (;;) {
        const char *key = NULL;
        size_t key_len = 0;
        skip_ws(p);
        if (obj) {
            if (p->at >= p->len || p->s[p->at] != '"') return fail(p, "expected a member name");
            size_t key_at = p->at;
            if (parse_string(p, &key, &key_len)) return -1;
            for (uint32_t i = p->d->nodes[self].first; i; i = p->d->nodes[i].next)
                if (!strcmp(p->d->nodes[i].key, key)) return p->at = key_at, fail(p, "duplicate member \"%.40s\"", key);
            skip_ws(p);
            if (p->at >= p->len || p->s[p->at] != ':') return fail(p, "expected ':'");
            p->at++;
        }
        long v = parse_value(p, depth + 1);
        if (v < 0) return -1;
        kv_jnode *nodes = p->d->nodes;
        nodes[v].key = key;
        if (last) nodes[last].next = (uint32_t)v;
        else nodes[self].first = (uint32_t)v;
        last = v;
        if (++nodes[self].n == UINT32_MAX) return fail(p, "too many items");
        skip_ws(p);
        if (p->at < p->len && p->s[p->at] == ',') {
            p->at++;
            skip_ws(p);
            if (p->at < p->len && p->s[p->at] == close) return fail(p, "trailing comma");
            continue;
        }
        if (p->at < p->len && p->s[p->at] == close) return p->at++, 0;
        return fail(p, obj ? "expected ',' or '}'" : "expected ',' or ']'");
    }
}

static long parse_value(parser *p, unsigned depth) {
    if (depth > KV_JREAD_DEPTH) return fail(p, "nested deeper than %d", KV_JREAD_DEPTH);
    skip_ws(p);
    if (p->at >= p->len) return fail(p, "expected a value");
    char c = p->s[p->at];
    long self;
    switch (c) {
    case '{':
    case '[':
        if ((self = new_node(p, c == '{' ? KV_J_OBJ : KV_J_ARR)) < 0) return -1;
        return parse_container(p, self, c == '{', depth) ? -1 : self;
    case '"': {
        const char *s;
        size_t n;
        if ((self = new_node(p, KV_J_STR)) < 0 || parse_string(p, &s, &n)) return -1;
        p->d->nodes[self].str = s;
        p->d->nodes[self].len = n;
        return self;
    }
    case 't':
    case 'f':
        if ((self = new_node(p, KV_J_BOOL)) < 0 || literal(p, c == 't' ? "true" : "false")) return -1;
        p->d->nodes[self].b = c == 't';
        return self;
    case 'n':
        if ((self = new_node(p, KV_J_NULL)) < 0 || literal(p, "null")) return -1;
        return self;
    default:
        if (c != '-' && (c < '0' || c > '9')) return fail(p, "unexpected character");
        if ((self = new_node(p, KV_J_NUM)) < 0) return -1;
        return parse_number(p, &p->d->nodes[self]) ? -1 : self;
    }
}

int kv_jdoc_parse(kv_jdoc *d, const char *text, size_t len) {
    memset(d, 0, sizeof *d);
    parser p = {.d = d, .len = len};
    if (!(d->text = malloc(len + 1))) return fail(&p, "out of memory");
    memcpy(d->text, text, len);
    d->text[len] = 0;
    p.s = d->text;
    if (parse_value(&p, 0) < 0) return -1;
    skip_ws(&p);
    if (p.at != len) return fail(&p, "more after the value");
    return 0;
}

void kv_jdoc_free(kv_jdoc *d) {
    free(d->nodes);
    free(d->text);
    d->nodes = NULL;
    d->text = NULL;
    d->n_nodes = d->cap = 0;
}

const kv_jnode *kv_jdoc_root(const kv_jdoc *d) { return d->n_nodes && !d->err[0] ? &d->nodes[0] : NULL; }

const kv_jnode *kv_jfirst(const kv_jdoc *d, const kv_jnode *v) {
    return v && (v->type == KV_J_ARR || v->type == KV_J_OBJ) && v->first ? &d->nodes[v->first] : NULL;
}

const kv_jnode *kv_jnext(const kv_jdoc *d, const kv_jnode *v) { return v && v->next ? &d->nodes[v->next] : NULL; }

const kv_jnode *kv_jget(const kv_jdoc *d, const kv_jnode *v, const char *key) {
    if (!v || v->type != KV_J_OBJ) return NULL;
    for (const kv_jnode *i = kv_jfirst(d, v); i; i = kv_jnext(d, i))
        if (!strcmp(i->key, key)) return i;
    return NULL;
}

const kv_jnode *kv_jat(const kv_jdoc *d, const kv_jnode *v, uint32_t i) {
    const kv_jnode *it = kv_jfirst(d, v);
    while (it && i--) it = kv_jnext(d, it);
    return it;
}

bool kv_jget_u64(const kv_jdoc *d, const kv_jnode *obj, const char *key, uint64_t *out) {
    const kv_jnode *v = kv_jget(d, obj, key);
    if (!v || v->type != KV_J_NUM || !v->is_u64) return false;
    *out = v->u64;
    return true;
}

bool kv_jget_f64(const kv_jdoc *d, const kv_jnode *obj, const char *key, double *out) {
    const kv_jnode *v = kv_jget(d, obj, key);
    if (!v || v->type != KV_J_NUM) return false;
    *out = v->num;
    return true;
}

const char *kv_jget_str(const kv_jdoc *d, const kv_jnode *obj, const char *key) {
    const kv_jnode *v = kv_jget(d, obj, key);
    return v && v->type == KV_J_STR ? v->str : NULL;
}
