/* tests/test_json_read.c — the strict JSON reader (util/json_read.c):
 * every kind of value and the tree walk, escapes and surrogate pairs
 * decoded, each strictness rule refused with its offset, and a seeded
 * round trip: documents of random strings and numbers written by kv_json
 * read back to the same values. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/json.h"
#include "util/json_read.h"

static int parse(kv_jdoc *d, const char *s) { return kv_jdoc_parse(d, s, strlen(s)); }

Test(json_read, a_document_with_every_kind_of_value) {
    kv_jdoc d;
    const char *s = " {\"runs\": 18446744073709551615, \"neg\": -5, \"f\": 1.5e2, \"ok\": true, \"no\": false,"
                    " \"none\": null, \"s\": \"a\\\"b\", \"arr\": [1, [], {}], \"empty\": {}}\n";
    cr_assert_eq(parse(&d, s), 0, "%s at %zu", d.err, d.err_at);
    const kv_jnode *r = kv_jdoc_root(&d);
    cr_assert_eq(r->type, KV_J_OBJ);
    cr_assert_eq(r->n, 9);
    uint64_t u;
    cr_assert(kv_jget_u64(&d, r, "runs", &u));
    cr_assert_eq(u, UINT64_MAX);
    cr_assert(!kv_jget_u64(&d, r, "neg", &u), "a negative number is not a u64");
    double f;
    cr_assert(kv_jget_f64(&d, r, "neg", &f) && f == -5.0);
    cr_assert(kv_jget_f64(&d, r, "f", &f) && f == 150.0);
    cr_assert(!kv_jget_u64(&d, r, "f", &u), "an exponent form is not a plain integer");
    cr_assert(kv_jget(&d, r, "ok")->b);
    cr_assert(!kv_jget(&d, r, "no")->b);
    cr_assert_eq(kv_jget(&d, r, "none")->type, KV_J_NULL);
    cr_assert_str_eq(kv_jget_str(&d, r, "s"), "a\"b");
    const kv_jnode *arr = kv_jget(&d, r, "arr");
    cr_assert_eq(arr->n, 3);
    cr_assert_eq(kv_jat(&d, arr, 0)->u64, 1);
    cr_assert_eq(kv_jat(&d, arr, 1)->type, KV_J_ARR);
    cr_assert_eq(kv_jat(&d, arr, 2)->type, KV_J_OBJ);
    cr_assert_null(kv_jat(&d, arr, 3));
    cr_assert_null(kv_jfirst(&d, kv_jget(&d, r, "empty")));
    cr_assert_null(kv_jget(&d, r, "missing"));
    cr_assert_null(kv_jget(&d, arr, "runs"), "an array has no members");
    const char *order[] = {"runs", "neg", "f", "ok", "no", "none", "s", "arr", "empty"};
    int i = 0;
    for (const kv_jnode *m = kv_jfirst(&d, r); m; m = kv_jnext(&d, m)) cr_assert_str_eq(m->key, order[i++]);
    cr_assert_eq(i, 9);
    kv_jdoc_free(&d);
}

Test(json_read, escapes_and_surrogate_pairs_decode_to_utf8) {
    kv_jdoc d;
    cr_assert_eq(parse(&d, "\"\\b\\f\\n\\r\\t\\/\\\\\\u0041\\u00e9\\u20ac\\ud83d\\ude00\\u0000x\""), 0, "%s", d.err);
    const kv_jnode *r = kv_jdoc_root(&d);
    const char want[] = "\b\f\n\r\t/\\A\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\0x";
    cr_assert_eq(r->len, sizeof want - 1);
    cr_assert(!memcmp(r->str, want, sizeof want - 1));
    kv_jdoc_free(&d);
    cr_assert_eq(parse(&d, "\"caf\xc3\xa9 \xe2\x82\xac\""), 0, "raw UTF-8 passes: %s", d.err);
    cr_assert_str_eq(kv_jdoc_root(&d)->str, "caf\xc3\xa9 \xe2\x82\xac");
    kv_jdoc_free(&d);
}

Test(json_read, what_is_not_exactly_json_is_refused_with_its_offset) {
    static const struct {
        const char *text;
        size_t at;
        const char *why;
    } bad[] = {
        {"", 0, "expected a value"},
        {"{\"a\":1,}", 7, "trailing comma"},
        {"[1,]", 3, "trailing comma"},
        {"[01]", 2, "leading zero"},
        {"{\"a\":1,\"a\":2}", 7, "duplicate member"},
        {"{\"a\" 1}", 5, "expected ':'"},
        {"{a:1}", 1, "expected a member name"},
        {"[1 2]", 3, "expected ',' or ']'"},
        {"\"tab\there\"", 4, "control character"},
        {"\"\\x\"", 2, "unknown escape"},
        {"\"\\ud800\"", 7, "high surrogate"},
        {"\"\\udc00\"", 7, "lone low surrogate"},
        {"\"\\u12g4\"", 5, "four hex digits"},
        {"\"\xc3\x28\"", 1, "invalid UTF-8"},
        {"\"\xed\xa0\x80\"", 1, "invalid UTF-8"},
        {"\"\xc0\xaf\"", 1, "invalid UTF-8"},
        {"\"open", 5, "unterminated string"},
        {"tru", 0, "unexpected character"},
        {"1 2", 2, "more after the value"},
        {"-", 1, "needs digits"},
        {"1.", 2, "needs digits"},
        {"1e", 2, "needs digits"},
        {"1e999", 0, "out of range"},
        {"// c\n1", 0, "unexpected character"},
        {"NaN", 0, "unexpected character"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        kv_jdoc d;
        cr_assert_eq(parse(&d, bad[i].text), -1, "'%s' was accepted", bad[i].text);
        cr_assert(strstr(d.err, bad[i].why), "'%s': '%s', want '%s'", bad[i].text, d.err, bad[i].why);
        cr_assert_eq(d.err_at, bad[i].at, "'%s': at %zu, want %zu", bad[i].text, d.err_at, bad[i].at);
        cr_assert_null(kv_jdoc_root(&d));
        kv_jdoc_free(&d);
    }
}

Test(json_read, nesting_is_bounded) {
    char deep[2 * (KV_JREAD_DEPTH + 2) + 1];
    size_t n = 0;
    for (int i = 0; i < KV_JREAD_DEPTH + 1; i++) deep[n++] = '[';
    for (int i = 0; i < KV_JREAD_DEPTH + 1; i++) deep[n++] = ']';
    kv_jdoc d;
    cr_assert_eq(kv_jdoc_parse(&d, deep, n), 0, "depth %d: %s", KV_JREAD_DEPTH, d.err);
    kv_jdoc_free(&d);
    memmove(deep + 1, deep, n);
    deep[0] = '[';
    deep[++n] = ']';
    n++;
    cr_assert_eq(kv_jdoc_parse(&d, deep, n), -1);
    cr_assert(strstr(d.err, "nested deeper"), "%s", d.err);
    kv_jdoc_free(&d);
}

/* xorshift64*: a fixed seed, so a failure names the same case every run */
static uint64_t rnd(uint64_t *s) {
    *s ^= *s >> 12, *s ^= *s << 25, *s ^= *s >> 27;
    return *s * 2685821657736338717ull;
}

Test(json_read, what_kv_json_writes_reads_back) {
    uint64_t seed = 0x5eed;
    for (int doc = 0; doc < 200; doc++) {
        enum { N = 40 };
        static char strs[N][64];
        static size_t lens[N];
        static uint64_t nums[N];
        char *buf = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&buf, &len);
        kv_json j;
        kv_json_init(&j, f);
        kv_json_obj(&j);
        kv_json_karr(&j, "items");
        for (int i = 0; i < N; i++) {
            /* printable ASCII, control characters and valid UTF-8: all
             * pass through the writer unchanged, so they must read back */
            lens[i] = rnd(&seed) % 32;
            for (size_t k = 0; k < lens[i]; k++) {
                uint64_t r = rnd(&seed) % 100;
                strs[i][k] = r < 10 ? (char)(1 + r) : r < 15 ? '"' : r < 20 ? '\\' : (char)(' ' + r % 95);
            }
            if (lens[i] > 3 && rnd(&seed) % 2) memcpy(strs[i], "\xe2\x82\xac", 3);
            nums[i] = rnd(&seed) >> (rnd(&seed) % 64);
            kv_json_obj(&j);
            kv_json_key(&j, "s");
            kv_json_strn(&j, strs[i], lens[i]);
            kv_json_ku64(&j, "n", nums[i]);
            kv_json_end(&j);
            kv_json_nl(&j);
        }
        kv_json_end(&j);
        kv_json_end(&j);
        cr_assert_eq(kv_json_done(&j), 0);
        fclose(f);
        kv_jdoc d;
        cr_assert_eq(kv_jdoc_parse(&d, buf, len), 0, "document %d: %s at %zu", doc, d.err, d.err_at);
        const kv_jnode *items = kv_jget(&d, kv_jdoc_root(&d), "items");
        cr_assert_eq(items->n, N);
        int i = 0;
        for (const kv_jnode *it = kv_jfirst(&d, items); it; it = kv_jnext(&d, it), i++) {
            const kv_jnode *s = kv_jget(&d, it, "s");
            cr_assert_eq(s->len, lens[i], "document %d item %d", doc, i);
            cr_assert(!memcmp(s->str, strs[i], lens[i]), "document %d item %d", doc, i);
            uint64_t u;
            cr_assert(kv_jget_u64(&d, it, "n", &u) && u == nums[i], "document %d item %d", doc, i);
        }
        kv_jdoc_free(&d);
        free(buf);
    }
}
