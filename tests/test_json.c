/* tests/test_json.c — the JSON writer (util/json.c): exact output of
 * documents, every escape, UTF-8 kept or replaced, misuse reported, and a
 * seeded sweep of random byte strings whose escaped form must be a valid
 * JSON string body that decodes back to the input (U+FFFD where the input
 * was not UTF-8). */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/json.h"

static char *g_buf;
static size_t g_len;
static FILE *g_f;

static kv_json begin(void) {
    g_f = open_memstream(&g_buf, &g_len);
    cr_assert(g_f);
    kv_json j;
    kv_json_init(&j, g_f);
    return j;
}
static const char *finish(kv_json *j, int want_rc) {
    fflush(g_f);
    cr_assert_eq(kv_json_done(j), want_rc, "kv_json_done for '%s'", g_buf);
    fclose(g_f);
    return g_buf;
}

Test(json, a_document_with_every_kind_of_value) {
    kv_json j = begin();
    kv_json_obj(&j);
    kv_json_ku64(&j, "runs", 18446744073709551615ull);
    kv_json_ki64(&j, "delta", -5);
    kv_json_kf64(&j, "wall_s", 1.23456, 3);
    kv_json_kf64(&j, "nan", 0.0 / 0.0, 3);
    kv_json_kbool(&j, "ok", true);
    kv_json_kstr(&j, "none", NULL);
    kv_json_karr(&j, "seeds");
    kv_json_u64(&j, 1);
    kv_json_nl(&j);
    kv_json_obj(&j);
    kv_json_end(&j);
    kv_json_arr(&j);
    kv_json_end(&j);
    kv_json_end(&j);
    kv_json_kstr(&j, "a\"b", "c\\d");
    kv_json_end(&j);
    cr_assert_str_eq(finish(&j, 0), "{\"runs\":18446744073709551615,\"delta\":-5,\"wall_s\":1.235,\"nan\":null,"
                                    "\"ok\":true,\"none\":null,\"seeds\":[1\n,{},[]],\"a\\\"b\":\"c\\\\d\"}");
    free(g_buf);
}

Test(json, control_characters_and_quotes_are_escaped) {
    kv_json j = begin();
    const char s[] = "q\" b\\ n\n t\t r\r b\b f\f x\x01 y\x1f z\x7f";
    kv_json_strn(&j, s, sizeof s - 1);
    cr_assert_str_eq(finish(&j, 0), "\"q\\\" b\\\\ n\\n t\\t r\\r b\\b f\\f x\\u0001 y\\u001f z\x7f\"");
    free(g_buf);
}

Test(json, a_nul_byte_inside_a_counted_string_is_kept) {
    kv_json j = begin();
    kv_json_strn(&j, "a\0b", 3);
    cr_assert_str_eq(finish(&j, 0), "\"a\\u0000b\"");
    free(g_buf);
}

Test(json, valid_utf8_passes_and_invalid_bytes_become_replacement_characters) {
    static const struct {
        const char *in, *out;
    } cases[] = {
        {"\xc3\xa9", "\"\xc3\xa9\""},                       /* é */
        {"\xe2\x82\xac", "\"\xe2\x82\xac\""},               /* € */
        {"\xf0\x9f\x98\x80", "\"\xf0\x9f\x98\x80\""},       /* U+1F600 */
        {"\xff", "\"\\ufffd\""},                             /* never valid */
        {"\xc0\xaf", "\"\\ufffd\\ufffd\""},                  /* overlong '/' */
        {"\xe0\x80\xaf", "\"\\ufffd\\ufffd\\ufffd\""},       /* overlong, 3 bytes */
        {"\xed\xa0\x80", "\"\\ufffd\\ufffd\\ufffd\""},       /* a surrogate */
        {"\xf4\x90\x80\x80", "\"\\ufffd\\ufffd\\ufffd\\ufffd\""}, /* above U+10FFFF */
        {"\xc3", "\"\\ufffd\""},                             /* cut short */
        {"a\xe2\x82", "\"a\\ufffd\\ufffd\""},
        {"C:\\dir\\x", "\"C:\\\\dir\\\\x\""},                /* a Windows-style path */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        kv_json j = begin();
        kv_json_str(&j, cases[i].in);
        cr_assert_str_eq(finish(&j, 0), cases[i].out, "case %zu", i);
        free(g_buf);
    }
}

Test(json, misuse_is_reported_not_written_silently) {
    {
        kv_json j = begin(); /* a value where a key belongs */
        kv_json_obj(&j);
        kv_json_u64(&j, 1);
        kv_json_end(&j);
        finish(&j, -1);
        free(g_buf);
    }
    {
        kv_json j = begin(); /* left open */
        kv_json_arr(&j);
        finish(&j, -1);
        free(g_buf);
    }
    {
        kv_json j = begin(); /* closed twice */
        kv_json_arr(&j);
        kv_json_end(&j);
        kv_json_end(&j);
        finish(&j, -1);
        free(g_buf);
    }
    {
        kv_json j = begin(); /* a key without its value */
        kv_json_obj(&j);
        kv_json_key(&j, "k");
        kv_json_end(&j);
        finish(&j, -1);
        free(g_buf);
    }
    {
        kv_json j = begin(); /* two top-level values */
        kv_json_u64(&j, 1);
        kv_json_u64(&j, 2);
        finish(&j, -1);
        free(g_buf);
    }
    {
        kv_json j = begin(); /* deeper than the stack */
        for (int i = 0; i <= KV_JSON_DEPTH; i++) kv_json_arr(&j);
        finish(&j, -1);
        free(g_buf);
    }
    {
        kv_json j = begin(); /* nothing at all */
        finish(&j, -1);
        free(g_buf);
    }
}

/* Decodes one JSON string body (between the quotes) into UTF-8; -1 when it
 * is not valid JSON: a raw control character, a bad escape. */
static long decode_body(const char *s, size_t n, unsigned char *out) {
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x20 || c == '"') return -1;
        if (c != '\\') {
            out[o++] = c;
            continue;
        }
        if (++i >= n) return -1;
        switch (s[i]) {
        case '"': out[o++] = '"'; break;
        case '\\': out[o++] = '\\'; break;
        case '/': out[o++] = '/'; break;
        case 'n': out[o++] = '\n'; break;
        case 't': out[o++] = '\t'; break;
        case 'r': out[o++] = '\r'; break;
        case 'b': out[o++] = '\b'; break;
        case 'f': out[o++] = '\f'; break;
        case 'u': {
            if (i + 4 >= n) return -1;
            unsigned v = 0;
            for (int k = 1; k <= 4; k++) {
                char h = s[i + (size_t)k];
                v = v * 16u + (unsigned)(h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10 : 99);
                if (v > 0xffff) return -1;
            }
            i += 4;
            if (v < 0x80) out[o++] = (unsigned char)v;
            else if (v == 0xfffd) out[o++] = 0xef, out[o++] = 0xbf, out[o++] = 0xbd;
            else return -1; /* the writer escapes nothing else above 0x7f */
            break;
        }
        default: return -1;
        }
    }
    return (long)o;
}

/* What the writer must give for raw bytes: valid UTF-8 kept, every other
 * byte replaced by U+FFFD (computed here independently, by decoding). */
static size_t expected(const unsigned char *in, size_t n, unsigned char *out) {
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        unsigned char c = in[i];
        size_t len = c < 0x80 ? 1 : (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 : (c & 0xf8) == 0xf0 ? 4 : 0;
        uint32_t cp = len == 1 ? c : len == 2 ? c & 0x1fu : len == 3 ? c & 0x0fu : c & 0x07u;
        bool ok = len > 0 && i + len <= n;
        for (size_t k = 1; ok && k < len; k++) {
            if ((in[i + k] & 0xc0) != 0x80) ok = false;
            cp = (cp << 6) | (in[i + k] & 0x3fu);
        }
        static const uint32_t min_cp[5] = {0, 0, 0x80, 0x800, 0x10000};
        if (ok && (cp < min_cp[len] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))) ok = false;
        if (!ok) {
            out[o++] = 0xef, out[o++] = 0xbf, out[o++] = 0xbd;
            i++;
        } else {
            memcpy(out + o, in + i, len);
            o += len, i += len;
        }
    }
    return o;
}

Test(json, random_bytes_escape_to_a_string_that_decodes_back) {
    uint64_t x = 0x9e3779b97f4a7c15ull;
    static unsigned char in[64], want[64 * 3], got[64 * 3];
    for (int round = 0; round < 20000; round++) {
        size_t n = 0;
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        n = (size_t)(x % 64);
        for (size_t i = 0; i < n; i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            /* mostly bytes that make UTF-8 sequences, some of them broken */
            unsigned r = (unsigned)(x >> 24);
            in[i] = (unsigned char)(r % 4 == 0 ? 0x80 + r % 64 : r % 4 == 1 ? 0xc0 + r % 64 : r);
        }
        kv_json j = begin();
        kv_json_strn(&j, (const char *)in, n);
        finish(&j, 0);
        size_t len = strlen(g_buf);
        cr_assert(len >= 2 && g_buf[0] == '"' && g_buf[len - 1] == '"', "round %d: not a string", round);
        long dec = decode_body(g_buf + 1, len - 2, got);
        cr_assert(dec >= 0, "round %d: not a valid JSON string: %s", round, g_buf);
        size_t w = expected(in, n, want);
        cr_assert_eq((size_t)dec, w, "round %d: decoded length", round);
        cr_assert(memcmp(got, want, w) == 0, "round %d: decoded bytes differ", round);
        free(g_buf);
    }
}
