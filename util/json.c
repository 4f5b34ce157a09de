/* util/json.c — the streaming JSON writer (util/json.h). */
#include "util/json.h"

#include <inttypes.h>
#include <math.h>
#include <string.h>

void kv_json_init(kv_json *j, FILE *f) {
    *j = (kv_json){.f = f};
}

int kv_json_done(kv_json *j) {
    if (j->misuse || j->depth || !j->top_done || j->want_value) return -1;
    return ferror(j->f) ? -1 : 0;
}

/* Before a value: the comma between items, or nothing after a key. */
static bool before_value(kv_json *j) {
    if (j->want_value) {
        j->want_value = false;
        return true;
    }
    if (j->depth == 0) {
        if (j->top_done) j->misuse = true; /* a second top-level value */
        return !j->top_done;
    }
    if (j->close[j->depth - 1] == '}') { /* an object item needs its key first */
        j->misuse = true;
        return false;
    }
    if (!j->first[j->depth - 1]) fputc(',', j->f);
    j->first[j->depth - 1] = false;
    return true;
}

static void after_value(kv_json *j) {
    if (j->depth == 0) j->top_done = true;
}

static void open_container(kv_json *j, char o, char c) {
    if (!before_value(j)) return;
    if (j->depth == KV_JSON_DEPTH) {
        j->misuse = true;
        return;
    }
    fputc(o, j->f);
    j->close[j->depth] = c;
    j->first[j->depth] = true;
    j->depth++;
}

void kv_json_obj(kv_json *j) { open_container(j, '{', '}'); }
void kv_json_arr(kv_json *j) { open_container(j, '[', ']'); }

void kv_json_end(kv_json *j) {
    if (j->depth == 0 || j->want_value) {
        j->misuse = true;
        return;
    }
    j->depth--;
    fputc(j->close[j->depth], j->f);
    after_value(j);
}

void kv_json_key(kv_json *j, const char *key) {
    if (j->depth == 0 || j->close[j->depth - 1] != '}' || j->want_value || !key) {
        j->misuse = true;
        return;
    }
    if (!j->first[j->depth - 1]) fputc(',', j->f);
    j->first[j->depth - 1] = false;
    fputc('"', j->f);
    kv_json_escape(j->f, key, strlen(key));
    fputs("\":", j->f);
    j->want_value = true;
}

/* Length of the valid UTF-8 sequence at s (at most n bytes), 0 if none. */
static size_t utf8_len(const unsigned char *s, size_t n) {
    unsigned char c = s[0];
    size_t len;
    unsigned char lo = 0x80, hi = 0xbf; /* range of the second byte */
    if (c < 0x80) return 1;
    if (c >= 0xc2 && c <= 0xdf) len = 2;
    else if (c >= 0xe0 && c <= 0xef) {
        len = 3;
        if (c == 0xe0) lo = 0xa0;      /* no overlong forms */
        else if (c == 0xed) hi = 0x9f; /* no surrogates */
    } else if (c >= 0xf0 && c <= 0xf4) {
        len = 4;
        if (c == 0xf0) lo = 0x90;
        else if (c == 0xf4) hi = 0x8f; /* nothing above U+10FFFF */
    } else
        return 0;
    if (n < len || s[1] < lo || s[1] > hi) return 0;
    for (size_t i = 2; i < len; i++)
        if (s[i] < 0x80 || s[i] > 0xbf) return 0;
    return len;
}

void kv_json_escape(FILE *f, const char *str, size_t n) {
    const unsigned char *s = (const unsigned char *)str;
    for (size_t i = 0; i < n;) {
        unsigned char c = s[i];
        if (c == '"' || c == '\\') {
            fputc('\\', f);
            fputc(c, f);
            i++;
        } else if (c < 0x20) {
            switch (c) {
            case '\n': fputs("\\n", f); break;
            case '\t': fputs("\\t", f); break;
            case '\r': fputs("\\r", f); break;
            case '\b': fputs("\\b", f); break;
            case '\f': fputs("\\f", f); break;
            default: fprintf(f, "\\u%04x", (unsigned)c); break;
            }
            i++;
        } else {
            size_t len = utf8_len(s + i, n - i);
            if (len == 0) {
                fputs("\\ufffd", f);
                i++;
            } else {
                fwrite(s + i, 1, len, f);
                i += len;
            }
        }
    }
}

void kv_json_strn(kv_json *j, const char *s, size_t n) {
    if (!before_value(j)) return;
    fputc('"', j->f);
    kv_json_escape(j->f, s, n);
    fputc('"', j->f);
    after_value(j);
}

void kv_json_str(kv_json *j, const char *s) {
    if (!s) kv_json_null(j);
    else kv_json_strn(j, s, strlen(s));
}

void kv_json_u64(kv_json *j, uint64_t v) {
    if (!before_value(j)) return;
    fprintf(j->f, "%" PRIu64, v);
    after_value(j);
}

void kv_json_i64(kv_json *j, int64_t v) {
    if (!before_value(j)) return;
    fprintf(j->f, "%" PRId64, v);
    after_value(j);
}

void kv_json_f64(kv_json *j, double v, int decimals) {
    if (!isfinite(v)) {
        kv_json_null(j);
        return;
    }
    if (!before_value(j)) return;
    if (decimals < 0) decimals = 0;
    if (decimals > 17) decimals = 17;
    fprintf(j->f, "%.*f", decimals, v);
    after_value(j);
}

void kv_json_bool(kv_json *j, bool v) {
    if (!before_value(j)) return;
    fputs(v ? "true" : "false", j->f);
    after_value(j);
}

void kv_json_null(kv_json *j) {
    if (!before_value(j)) return;
    fputs("null", j->f);
    after_value(j);
}

void kv_json_nl(kv_json *j) { fputc('\n', j->f); }

void kv_json_kstr(kv_json *j, const char *key, const char *s) { kv_json_key(j, key), kv_json_str(j, s); }
void kv_json_ku64(kv_json *j, const char *key, uint64_t v) { kv_json_key(j, key), kv_json_u64(j, v); }
void kv_json_ki64(kv_json *j, const char *key, int64_t v) { kv_json_key(j, key), kv_json_i64(j, v); }
void kv_json_kf64(kv_json *j, const char *key, double v, int d) { kv_json_key(j, key), kv_json_f64(j, v, d); }
void kv_json_kbool(kv_json *j, const char *key, bool v) { kv_json_key(j, key), kv_json_bool(j, v); }
void kv_json_kobj(kv_json *j, const char *key) { kv_json_key(j, key), kv_json_obj(j); }
void kv_json_karr(kv_json *j, const char *key) { kv_json_key(j, key), kv_json_arr(j); }
