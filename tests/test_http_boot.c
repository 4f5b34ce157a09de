/* tests/test_http_boot.c — kvnode's HTTP bootstrap without sockets: the
 * bounded HTTP/1.1 request reader (apps/kvnode/http_req.c) and vLLM's
 * registry rules (apps/kvnode/boot_registry.c), both compiled into this
 * suite (CMakeLists.txt). The reader: whole requests, every prefix of one
 * is "need more", bodies by Content-Length, each refusal with its status
 * (400, 413 from the header alone, 431, 501, 505); a seeded run of random
 * bytes never reads past its input and always ends in one of the three
 * verdicts. The registry: vLLM's test_bootstrap_server sequence (empty
 * query, register, query shape, duplicate and engine-id mismatch refused
 * with vLLM's words), malformed payloads refused with what was wrong,
 * extra members ignored, the bounds. tools/test_http_boot.sh drives the
 * same server over real HTTP with curl. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apps/kvnode/boot_registry.h"
#include "apps/kvnode/http_req.h"
#include "util/json_read.h"

static kvn_http_verdict parse(const char *s, kvn_http_req *r) {
    return kvn_http_parse(s, strlen(s), KVN_BOOT_BODY_MAX, r);
}

Test(http_req, a_post_with_a_body_and_every_prefix_of_it) {
    const char *s = "POST /register?x=1 HTTP/1.1\r\nHost: h\r\nContent-Type: application/json\r\n"
                    "Content-Length: 7\r\n\r\n{\"a\":1}";
    kvn_http_req r;
    cr_assert_eq(parse(s, &r), KVN_HTTP_DONE, "%d %s", r.status, r.why);
    cr_assert_str_eq(r.method, "POST");
    cr_assert_str_eq(r.path, "/register", "the query string is not part of the path");
    cr_assert_eq(r.minor, 1);
    cr_assert_eq(r.body_len, 7);
    cr_assert(memcmp(r.body, "{\"a\":1}", 7) == 0);
    for (size_t n = 0; n < strlen(s); n++)
        cr_assert_eq(kvn_http_parse(s, n, KVN_BOOT_BODY_MAX, &r), KVN_HTTP_MORE, "prefix of %zu bytes", n);
}

Test(http_req, a_get_with_bare_lf_lines_and_http_1_0) {
    kvn_http_req r;
    cr_assert_eq(parse("GET /query HTTP/1.0\nAccept: */*\n\n", &r), KVN_HTTP_DONE, "%s", r.why);
    cr_assert_str_eq(r.path, "/query");
    cr_assert_eq(r.minor, 0);
    cr_assert_eq(r.body_len, 0);
}

static void refused(const char *s, int status, const char *why_has) {
    kvn_http_req r;
    cr_assert_eq(parse(s, &r), KVN_HTTP_BAD, "accepted: %s", s);
    cr_assert_eq(r.status, status, "status %d for: %s (%s)", r.status, s, r.why);
    cr_assert(strstr(r.why, why_has), "why '%s' lacks '%s'", r.why, why_has);
}

Test(http_req, each_malformed_head_refused_with_its_status) {
    refused("\r\n", 400, "empty request line");
    refused("GET\r\n\r\n", 400, "METHOD SP TARGET");
    refused("GET /query\r\n\r\n", 400, "METHOD SP TARGET");
    refused("GET http://h/query HTTP/1.1\r\n\r\n", 400, "not a path");
    refused("GET /q\x01 HTTP/1.1\r\n\r\n", 400, "visible ASCII");
    refused("G(T /query HTTP/1.1\r\n\r\n", 400, "token");
    refused("GET /query HTTP/2.0\r\n\r\n", 505, "HTTP/1.0 and HTTP/1.1");
    refused("GET /query SPDY/3\r\n\r\n", 400, "HTTP/1.x");
    refused("GET /query HTTP/1.1\r\nNoColon\r\n\r\n", 400, "NAME:");
    refused("GET /query HTTP/1.1\r\nBad Name: x\r\n\r\n", 400, "token");
    refused("GET /query HTTP/1.1\r\nA: b\r\n folded\r\n\r\n", 400, "folded");
    refused("GET /query HTTP/1.1\r\nA: b\x7f\r\n\r\n", 400, "control");
    refused("GET /query HTTP/1.1\r\nA: b\rc\r\n\r\n", 400, "bare CR");
    refused("POST /register HTTP/1.1\r\nContent-Length: -1\r\n\r\n", 400, "decimal");
    refused("POST /register HTTP/1.1\r\nContent-Length: 1x\r\n\r\n", 400, "decimal");
    refused("POST /register HTTP/1.1\r\nContent-Length: 99999999999999999999\r\n\r\n", 400, "decimal");
    refused("POST /register HTTP/1.1\r\nContent-Length: 1\r\ncontent-length: 1\r\n\r\n", 400, "twice");
    refused("POST /register HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", 501, "Content-Length");
}

Test(http_req, an_oversized_body_is_refused_from_its_header_alone) {
    kvn_http_req r;
    const char *s = "POST /register HTTP/1.1\r\nContent-Length: 65537\r\n"; /* the head is not even complete */
    cr_assert_eq(parse(s, &r), KVN_HTTP_BAD);
    cr_assert_eq(r.status, 413);
    const char *t = "POST / HTTP/1.1\r\nContent-Length: 11\r\n\r\n";
    cr_assert_eq(kvn_http_parse(t, strlen(t), 10, &r), KVN_HTTP_BAD);
    cr_assert_eq(r.status, 413, "the caller's bound applies");
}

Test(http_req, a_head_over_its_bound_is_refused) {
    size_t n = KVN_HTTP_HEAD_MAX + 2;
    char *s = malloc(n + 1);
    memcpy(s, "GET /query HTTP/1.1\r\nX: ", 24);
    memset(s + 24, 'a', n - 24);
    s[n] = 0;
    kvn_http_req r;
    cr_assert_eq(kvn_http_parse(s, n, KVN_BOOT_BODY_MAX, &r), KVN_HTTP_BAD);
    cr_assert_eq(r.status, 431);
    char many[4096] = "GET /query HTTP/1.1\r\n";
    for (int i = 0; i < 70; i++) strcat(many, "A: b\r\n");
    strcat(many, "\r\n");
    cr_assert_eq(parse(many, &r), KVN_HTTP_BAD);
    cr_assert_eq(r.status, 431, "more than %u header lines", KVN_HTTP_HEADERS_MAX);
    free(s);
}

/* Random heads: the verdict is one of the three, a BAD one has a status,
 * and (under ASan) nothing past the input is read: each input sits at the
 * end of its own allocation. */
Test(http_req, random_bytes_never_crash_the_reader) {
    uint64_t x = 0x9e3779b97f4a7c15ull;
    static const char *const parts[] = {"GET ", "POST ", "/query", "/register", " HTTP/1.1", "\r\n", "\n", ": ",
                                        "Content-Length", "5", "99999", "\r", "\0", "Transfer-Encoding", " ", "{}"};
    for (int round = 0; round < 20000; round++) {
        char buf[512];
        size_t n = 0;
        for (int k = 0; k < 24 && n < sizeof buf - 32; k++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            const char *p = parts[x % (sizeof parts / sizeof parts[0])];
            size_t l = (x >> 20) % 7 == 0 ? 1 : (p[0] ? strlen(p) : 1);
            if ((x >> 24) % 5 == 0) buf[n++] = (char)(x >> 32);
            else memcpy(buf + n, p, l), n += l;
        }
        char *in = malloc(n ? n : 1);
        memcpy(in, buf, n);
        kvn_http_req r;
        kvn_http_verdict v = kvn_http_parse(in, n, 64, &r);
        cr_assert(v == KVN_HTTP_MORE || v == KVN_HTTP_DONE || v == KVN_HTTP_BAD);
        if (v == KVN_HTTP_BAD) cr_assert(r.status >= 400 && r.why[0], "round %d", round);
        if (v == KVN_HTTP_DONE) cr_assert(r.head_len + r.body_len <= n && r.path[0] == '/', "round %d", round);
        free(in);
    }
}

static int reg(kvn_boot_registry *g, const char *json, char *detail) {
    kvn_boot_reg p;
    char why[512];
    if (kvn_boot_payload_parse(json, strlen(json), &p, why, sizeof why) != 0) {
        snprintf(detail, 512, "%s", why);
        return 400;
    }
    return kvn_boot_register(g, &p, detail, 512);
}

static char *query(kvn_boot_registry *g) {
    char *doc = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&doc, &len);
    cr_assert_eq(kvn_boot_query_json(g, f), 0);
    fclose(f);
    return doc;
}

/* vLLM's tests/v1/kv_connector/unit/test_mooncake_connector.py
 * test_bootstrap_server, step by step. */
Test(boot_registry, vllm_test_bootstrap_server_sequence) {
    static kvn_boot_registry g;
    char d[512];
    kvn_boot_registry_init(&g);
    char *q = query(&g);
    cr_assert_str_eq(q, "{}");
    free(q);
    const char *p1 = "{\"engine_id\": \"eng-1\", \"dp_rank\": 0, \"tp_rank\": 0, \"pp_rank\": 0, "
                     "\"addr\": \"tcp://1.1.1.1:1111\"}";
    cr_assert_eq(reg(&g, p1, d), 200, "%s", d);
    q = query(&g);
    cr_assert_str_eq(q, "{\"0\":{\"engine_id\":\"eng-1\",\"worker_addr\":{\"0\":{\"0\":\"tcp://1.1.1.1:1111\"}}}}");
    free(q);
    cr_assert_eq(reg(&g, p1, d), 400, "the same worker again");
    cr_assert(strstr(d, "is already registered"), "%s", d);
    const char *p3 = "{\"engine_id\": \"eng-2\", \"dp_rank\": 0, \"tp_rank\": 1, \"pp_rank\": 0, "
                     "\"addr\": \"tcp://3.3.3.3:3333\"}";
    cr_assert_eq(reg(&g, p3, d), 400);
    cr_assert(strstr(d, "Engine ID mismatch"), "%s", d);
    cr_assert_eq(g.n_workers, 1, "a refused registration changes nothing");
}

Test(boot_registry, query_groups_by_dp_then_tp_then_pp_whatever_the_order) {
    static kvn_boot_registry g;
    char d[512];
    kvn_boot_registry_init(&g);
    const char *regs[] = {
        "{\"engine_id\":\"B\",\"dp_rank\":1,\"tp_rank\":0,\"pp_rank\":0,\"addr\":\"b00\"}",
        "{\"engine_id\":\"A\",\"dp_rank\":0,\"tp_rank\":1,\"pp_rank\":1,\"addr\":\"a11\"}",
        "{\"engine_id\":\"A\",\"dp_rank\":0,\"tp_rank\":0,\"pp_rank\":0,\"addr\":\"a00\"}",
        /* with members newer vLLM sends: ignored */
        "{\"engine_id\":\"A\",\"dp_rank\":0,\"tp_rank\":1,\"pp_rank\":0,\"addr\":\"a10\",\"tp_size\":2,\"registered_layer_names\":[\"l0\"]}",
    };
    for (int i = 0; i < 4; i++) cr_assert_eq(reg(&g, regs[i], d), 200, "%d: %s", i, d);
    char *q = query(&g);
    cr_assert_str_eq(q, "{\"0\":{\"engine_id\":\"A\",\"worker_addr\":{\"0\":{\"0\":\"a00\"},\"1\":{\"0\":\"a10\","
                        "\"1\":\"a11\"}}},\"1\":{\"engine_id\":\"B\",\"worker_addr\":{\"0\":{\"0\":\"b00\"}}}}");
    kv_jdoc doc;
    cr_assert_eq(kv_jdoc_parse(&doc, q, strlen(q)), 0, "the answer is JSON");
    kv_jdoc_free(&doc);
    free(q);
}

static void malformed(const char *json, const char *why_has) {
    static kvn_boot_registry g;
    char d[512];
    kvn_boot_registry_init(&g);
    cr_assert_eq(reg(&g, json, d), 400, "taken: %s", json);
    cr_assert(strstr(d, why_has), "'%s' lacks '%s' (%s)", d, why_has, json);
    cr_assert_eq(g.n_workers, 0);
}

Test(boot_registry, malformed_payloads_refused_with_what_was_wrong) {
    malformed("", "not JSON");
    malformed("{\"engine_id\": \"e\",", "not JSON");
    malformed("[1]", "not a JSON object");
    malformed("{\"dp_rank\":0,\"tp_rank\":0,\"pp_rank\":0,\"addr\":\"a\"}", "'engine_id' is missing");
    malformed("{\"engine_id\":7,\"dp_rank\":0,\"tp_rank\":0,\"pp_rank\":0,\"addr\":\"a\"}", "'engine_id' is not a string");
    malformed("{\"engine_id\":\"e\",\"dp_rank\":-1,\"tp_rank\":0,\"pp_rank\":0,\"addr\":\"a\"}", "'dp_rank' is not a non");
    malformed("{\"engine_id\":\"e\",\"dp_rank\":0.5,\"tp_rank\":0,\"pp_rank\":0,\"addr\":\"a\"}", "'dp_rank'");
    malformed("{\"engine_id\":\"e\",\"dp_rank\":\"0\",\"tp_rank\":0,\"pp_rank\":0,\"addr\":\"a\"}", "'dp_rank'");
    malformed("{\"engine_id\":\"e\",\"dp_rank\":0,\"tp_rank\":64,\"pp_rank\":0,\"addr\":\"a\"}", "0..63");
    malformed("{\"engine_id\":\"e\",\"dp_rank\":0,\"tp_rank\":0,\"addr\":\"a\"}", "'pp_rank' is missing");
    malformed("{\"engine_id\":\"e\",\"dp_rank\":0,\"tp_rank\":0,\"pp_rank\":0,\"addr\":null}", "'addr' is not a string");
    malformed("{\"engine_id\":\"e\\u0000x\",\"dp_rank\":0,\"tp_rank\":0,\"pp_rank\":0,\"addr\":\"a\"}", "NUL");
    malformed("{\"engine_id\":\"e\",\"engine_id\":\"f\",\"dp_rank\":0,\"tp_rank\":0,\"pp_rank\":0,\"addr\":\"a\"}",
              "not JSON");
    char big[600];
    snprintf(big, sizeof big, "{\"engine_id\":\"e\",\"dp_rank\":0,\"tp_rank\":0,\"pp_rank\":0,\"addr\":\"%0300d\"}", 0);
    malformed(big, "longer than 256 bytes");
}

Test(boot_registry, the_registry_bound_is_503_and_changes_nothing) {
    static kvn_boot_registry g;
    char d[512], json[256];
    kvn_boot_registry_init(&g);
    for (uint32_t i = 0; i < KVN_BOOT_WORKERS_MAX; i++) {
        snprintf(json, sizeof json, "{\"engine_id\":\"e%u\",\"dp_rank\":%u,\"tp_rank\":%u,\"pp_rank\":%u,\"addr\":\"x\"}",
                 i / 64, i / 64, i % 64, 0u);
        cr_assert_eq(reg(&g, json, d), 200, "%u: %s", i, d);
    }
    cr_assert_eq(reg(&g, "{\"engine_id\":\"e0\",\"dp_rank\":0,\"tp_rank\":0,\"pp_rank\":1,\"addr\":\"x\"}", d), 503);
    cr_assert_eq(g.n_workers, KVN_BOOT_WORKERS_MAX);
    cr_assert_eq(reg(&g, "{\"engine_id\":\"zz\",\"dp_rank\":9,\"tp_rank\":0,\"pp_rank\":1,\"addr\":\"x\"}", d), 503);
    cr_assert(!g.dp_known[9], "a refused registration fixes no engine id");
}
