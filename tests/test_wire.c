/* tests/test_wire.c — the control-message codec (core/wire.c): round trips,
 * exact byte layout, truncation, mutation, bounds, capacity and a seeded
 * random-input sweep. Every accepted input must be a fixed point of
 * decode -> encode. Large structs live in static storage. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kvconn/wire.h"

/* Cheap in hot loops: Criterion is only called on failure. */
#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) cr_assert_fail(__VA_ARGS__);                                                  \
    } while (0)

static kv_wire_msg g_msg, g_out, g_zero;
static uint8_t g_buf[KV_WIRE_MAX], g_buf2[KV_WIRE_MAX], g_mut[KV_WIRE_MAX];

/* ---- fixtures ---- */

static void set_str(char *dst, size_t size, char fill, size_t n) {
    memset(dst, 0, size);
    memset(dst, fill, n);
}

static void fill_table(kv_block_table *t, uint32_t groups, uint32_t n, uint32_t seed) {
    t->n_groups = groups;
    for (uint32_t g = 0; g < groups; g++) {
        t->n[g] = n ? n - (g % 2) * (n / 2) : 0;
        for (uint32_t i = 0; i < t->n[g]; i++) t->id[g][i] = (i % 5 == 0) ? 0 : seed * 131u + g * 7u + i;
    }
}

static void meta_fixture(kv_wire_msg *m, uint32_t groups, uint32_t reqs, uint32_t blocks,
                         size_t addr_len) {
    memset(m, 0, sizeof *m);
    m->type = KV_WIRE_XFER_META;
    kv_wire_xfer_meta *x = &m->u.meta;
    x->d_engine = 3;
    x->d_tp_size = 4;
    x->d_tp_rank = 2;
    x->batch = 0xdeadbeefu;
    set_str(x->d_addr.s, sizeof x->d_addr.s, 'a', addr_len);
    x->n_groups = groups;
    for (uint32_t g = 0; g < groups; g++) {
        x->region[g].region = 100 + g;
        x->region[g].len = 0x123456789abull + g;
        x->region[g].key = (kvt_key){{0xfeedface00000000ull + g, 0x0123456789abcdefull ^ g}};
    }
    x->block_bytes = 4096;
    x->n_reqs = reqs;
    for (uint32_t i = 0; i < reqs; i++) {
        x->req[i].d_req = 1000 + i;
        x->req[i].transfer_id = (kv_xfer_id){.hi = 0x8000000000000000ull + i, .lo = 0x0123456789abcdefull ^ i};
        fill_table(&x->req[i].blocks, i == 0 && reqs > 1 ? 0 : groups, blocks, i);
    }
}

static void resp_fixture(kv_wire_msg *m, uint32_t status, uint32_t n_ok, uint32_t n_err,
                         size_t msg_len) {
    memset(m, 0, sizeof *m);
    m->type = KV_WIRE_XFER_RESP;
    kv_wire_xfer_resp *r = &m->u.resp;
    r->status = status;
    r->batch = 77;
    r->p_tp_rank = 1;
    r->n_ok = n_ok;
    for (uint32_t i = 0; i < n_ok; i++) r->ok[i] = 500 + i;
    r->n_err = n_err;
    for (uint32_t i = 0; i < n_err; i++) r->err[i] = 0xffffff00u + i;
    set_str(r->err_msg, sizeof r->err_msg, 'e', msg_len);
}

static void boot_fixture(kv_wire_msg *m, uint32_t type, uint32_t tp_size, size_t addr_len) {
    memset(m, 0, sizeof *m);
    m->type = type;
    kv_wire_boot *b = &m->u.boot;
    b->engine = 5;
    b->tp_size = tp_size;
    b->tp_rank = type == KV_WIRE_BOOT_REG ? 1 : 0;
    b->found = type == KV_WIRE_BOOT_REPLY ? 1 : 0;
    uint32_t n = type == KV_WIRE_BOOT_REG ? 1 : type == KV_WIRE_BOOT_REPLY ? tp_size : 0;
    for (uint32_t i = 0; i < n; i++)
        set_str(b->addr[i].s, sizeof b->addr[i].s, (char)('p' + i), addr_len);
}

/* A store message: n keys; data for PUT (n blocks) and GET_REPLY (found ones). */
static void store_fixture(kv_wire_msg *m, uint32_t type, uint32_t n, uint32_t block_bytes, int32_t status) {
    memset(m, 0, sizeof *m);
    m->type = type;
    kv_wire_store *s = &m->u.store;
    s->seq = 77 + n;
    bool keys = type == KV_WIRE_STORE_EXIST || type == KV_WIRE_STORE_PUT || type == KV_WIRE_STORE_GET;
    bool flags = type == KV_WIRE_STORE_EXIST_REPLY || type == KV_WIRE_STORE_GET_REPLY;
    bool bytes = type == KV_WIRE_STORE_PUT || type == KV_WIRE_STORE_GET || type == KV_WIRE_STORE_GET_REPLY;
    if (type == KV_WIRE_STORE_EXIST_REPLY || type == KV_WIRE_STORE_PUT_REPLY || type == KV_WIRE_STORE_GET_REPLY)
        s->status = status;
    if (bytes) s->block_bytes = block_bytes;
    if (type != KV_WIRE_STORE_PUT_REPLY) s->n = n;
    uint32_t found = 0;
    for (uint32_t i = 0; i < s->n; i++) {
        if (keys) s->key[i] = (kv_store_key){.hash = 0x1234567890abcdefull * (i + 1), .heads = i << 16 | (i + 1)};
        if (flags) found += s->flag[i] = (uint8_t)(i % 3 != 1);
    }
    uint32_t data = type == KV_WIRE_STORE_PUT ? n : type == KV_WIRE_STORE_GET_REPLY ? found : 0;
    for (uint32_t i = 0; i < data * block_bytes; i++) s->data[i] = (uint8_t)(i * 7 + 3);
}

enum { FIX_COUNT = 19, FIX_SMALL = 9 };

/* Fixture k; the first FIX_SMALL are small enough for exhaustive mutation. */
static void fixture(kv_wire_msg *m, int k) {
    switch (k) {
    case 0: meta_fixture(m, 0, 0, 0, 0); break;
    case 1: meta_fixture(m, 2, 3, 3, 9); break;
    case 2: resp_fixture(m, KV_XFER_FINISH, 0, 0, 0); break;
    case 3: resp_fixture(m, KV_XFER_ERROR, 3, 2, 4); break;
    case 4: boot_fixture(m, KV_WIRE_BOOT_REG, 2, 13); break;
    case 5: boot_fixture(m, KV_WIRE_BOOT_QUERY, 0, 0); break;
    case 6: boot_fixture(m, KV_WIRE_BOOT_REPLY, 0, 0); break;
    case 7: boot_fixture(m, KV_WIRE_BOOT_REPLY, 2, 11); break;
    case 8: resp_fixture(m, KV_XFER_CONTINUE, 1, 0, 0); break;
    case 9: meta_fixture(m, KV_GROUPS_MAX, KV_PULL_REQS_MAX, KV_REQ_BLOCKS_MAX, KV_ADDR_MAX - 1); break;
    case 10: resp_fixture(m, KV_XFER_ERROR, KV_PULL_REQS_MAX, KV_PULL_REQS_MAX, KV_ERR_MSG_MAX - 1); break;
    case 11: store_fixture(m, KV_WIRE_STORE_EXIST, 5, 0, 0); break;
    case 12: store_fixture(m, KV_WIRE_STORE_EXIST_REPLY, KV_STORE_KEYS_MAX, 0, KV_STORE_FAILED); break;
    case 13: store_fixture(m, KV_WIRE_STORE_PUT, KV_STORE_BATCH_MAX, KV_STORE_BLOCK_BYTES_MAX, 0); break;
    case 14: store_fixture(m, KV_WIRE_STORE_PUT_REPLY, 0, 0, KV_STORE_NO_HANDLE); break;
    case 15: store_fixture(m, KV_WIRE_STORE_GET, 3, 16, 0); break;
    case 16: store_fixture(m, KV_WIRE_STORE_GET_REPLY, 7, 32, 0); break;
    case 17: store_fixture(m, KV_WIRE_STORE_EXIST, KV_STORE_KEYS_MAX, 0, 0); break;
    default: boot_fixture(m, KV_WIRE_BOOT_REPLY, KV_TP_MAX, KV_ADDR_MAX - 1); break;
    }
}

/* ---- field-wise equality (no reliance on padding) ---- */

static int table_eq(const kv_block_table *a, const kv_block_table *b) {
    if (a->n_groups != b->n_groups) return 0;
    for (uint32_t g = 0; g < a->n_groups; g++) {
        if (a->n[g] != b->n[g]) return 0;
        if (memcmp(a->id[g], b->id[g], a->n[g] * sizeof a->id[g][0])) return 0;
    }
    return 1;
}

static int meta_eq(const kv_wire_xfer_meta *a, const kv_wire_xfer_meta *b) {
    if (a->d_engine != b->d_engine || a->d_tp_size != b->d_tp_size || a->d_tp_rank != b->d_tp_rank ||
        a->batch != b->batch || strcmp(a->d_addr.s, b->d_addr.s) || a->n_groups != b->n_groups ||
        a->block_bytes != b->block_bytes || a->n_reqs != b->n_reqs)
        return 0;
    for (uint32_t g = 0; g < a->n_groups; g++)
        if (a->region[g].region != b->region[g].region || a->region[g].len != b->region[g].len ||
            a->region[g].key.w[0] != b->region[g].key.w[0] || a->region[g].key.w[1] != b->region[g].key.w[1])
            return 0;
    for (uint32_t i = 0; i < a->n_reqs; i++)
        if (a->req[i].d_req != b->req[i].d_req || !kv_xfer_id_eq(a->req[i].transfer_id, b->req[i].transfer_id) ||
            !table_eq(&a->req[i].blocks, &b->req[i].blocks))
            return 0;
    return 1;
}

static int resp_eq(const kv_wire_xfer_resp *a, const kv_wire_xfer_resp *b) {
    return a->status == b->status && a->batch == b->batch && a->p_tp_rank == b->p_tp_rank &&
           a->n_ok == b->n_ok && !memcmp(a->ok, b->ok, a->n_ok * sizeof a->ok[0]) &&
           a->n_err == b->n_err && !memcmp(a->err, b->err, a->n_err * sizeof a->err[0]) &&
           !strcmp(a->err_msg, b->err_msg);
}

static int boot_eq(uint32_t type, const kv_wire_boot *a, const kv_wire_boot *b) {
    if (a->engine != b->engine || a->tp_size != b->tp_size || a->tp_rank != b->tp_rank ||
        a->found != b->found)
        return 0;
    uint32_t n = type == KV_WIRE_BOOT_REG ? 1 : type == KV_WIRE_BOOT_REPLY ? a->tp_size : 0;
    for (uint32_t i = 0; i < n; i++)
        if (strcmp(a->addr[i].s, b->addr[i].s)) return 0;
    return 1;
}

/* What each store type carries: keys, flags, data (n keys' or the found ones'). */
static int store_eq(uint32_t type, const kv_wire_store *a, const kv_wire_store *b) {
    if (a->seq != b->seq || a->status != b->status || a->block_bytes != b->block_bytes || a->n != b->n) return 0;
    bool keys = type == KV_WIRE_STORE_EXIST || type == KV_WIRE_STORE_PUT || type == KV_WIRE_STORE_GET;
    bool flags = type == KV_WIRE_STORE_EXIST_REPLY || type == KV_WIRE_STORE_GET_REPLY;
    uint32_t found = 0;
    for (uint32_t i = 0; i < a->n; i++) {
        if (keys && (a->key[i].hash != b->key[i].hash || a->key[i].heads != b->key[i].heads)) return 0;
        if (flags && a->flag[i] != b->flag[i]) return 0;
        found += flags ? a->flag[i] : 0;
    }
    size_t data = type == KV_WIRE_STORE_PUT ? a->n : type == KV_WIRE_STORE_GET_REPLY ? found : 0;
    return !memcmp(a->data, b->data, data * a->block_bytes);
}

static int msg_eq(const kv_wire_msg *a, const kv_wire_msg *b) {
    if (a->type != b->type) return 0;
    switch (a->type) {
    case KV_WIRE_XFER_META: return meta_eq(&a->u.meta, &b->u.meta);
    case KV_WIRE_XFER_RESP: return resp_eq(&a->u.resp, &b->u.resp);
    case KV_WIRE_STORE_EXIST:
    case KV_WIRE_STORE_EXIST_REPLY:
    case KV_WIRE_STORE_PUT:
    case KV_WIRE_STORE_PUT_REPLY:
    case KV_WIRE_STORE_GET:
    case KV_WIRE_STORE_GET_REPLY: return store_eq(a->type, &a->u.store, &b->u.store);
    default: return boot_eq(a->type, &a->u.boot, &b->u.boot);
    }
}

static int is_zero(const kv_wire_msg *m) { return memcmp(m, &g_zero, sizeof *m) == 0; }

/* ---- helpers ---- */

static size_t encode_ok(const kv_wire_msg *m, uint8_t *buf) {
    size_t n = 0;
    kv_status rc = kv_wire_encode(m, buf, KV_WIRE_MAX, &n);
    cr_assert_eq(rc, KV_OK, "encode: %s", kv_status_str(rc));
    cr_assert_geq(n, KV_WIRE_HDR_BYTES);
    return n;
}

/* Decodes len bytes from an exact-size heap copy, so ASan sees over-reads. */
static kv_status decode_exact(const uint8_t *b, size_t len, kv_wire_msg *out) {
    uint8_t *p = malloc(len ? len : 1);
    cr_assert(p);
    if (len) memcpy(p, b, len);
    memset(out, 0xa5, sizeof *out);
    kv_status rc = kv_wire_decode(p, len, out);
    free(p);
    return rc;
}

/* Checks the decode outcome of b[len]: rejected cleanly, or a fixed point.
 * Returns 1 when accepted. */
static int check_fixed_point(const uint8_t *b, size_t len) {
    memset(&g_out, 0x5a, sizeof g_out);
    kv_status rc = kv_wire_decode(b, len, &g_out);
    if (rc != KV_OK) {
        CHECK(rc == KV_EPROTO || rc == KV_EVERSION, "unexpected %s", kv_status_str(rc));
        CHECK(is_zero(&g_out), "output not zeroed on %s", kv_status_str(rc));
        return 0;
    }
    size_t n = 0;
    rc = kv_wire_encode(&g_out, g_buf2, KV_WIRE_MAX, &n);
    CHECK(rc == KV_OK, "re-encode of accepted input: %s", kv_status_str(rc));
    CHECK(n == len && memcmp(g_buf2, b, len) == 0, "accepted input is not a fixed point (len %zu)", len);
    return 1;
}

/* A test-side byte builder, independent of the codec. */
typedef struct bb {
    uint8_t b[KV_WIRE_MAX];
    size_t n;
} bb;
static bb g_bb;

static void bb_le(bb *x, uint64_t v, int bytes) {
    for (int i = 0; i < bytes; i++) x->b[x->n++] = (uint8_t)(v >> (8 * i));
}
static void bb_hdr(bb *x, uint32_t type) {
    x->n = 0;
    bb_le(x, 'K', 1);
    bb_le(x, 'V', 1);
    bb_le(x, KV_WIRE_VERSION, 1);
    bb_le(x, type, 1);
    bb_le(x, 0, 4);
}
static void bb_fin(bb *x) {
    uint32_t p = (uint32_t)(x->n - 8);
    for (int i = 0; i < 4; i++) x->b[4 + i] = (uint8_t)(p >> (8 * i));
}
static void bb_str(bb *x, size_t n, char c) {
    bb_le(x, n, 2);
    for (size_t i = 0; i < n; i++) x->b[x->n++] = (uint8_t)c;
}

static void build_meta(bb *x, uint32_t groups, uint32_t reqs, uint32_t tgroups, uint32_t tn,
                       size_t addr_len) {
    bb_hdr(x, KV_WIRE_XFER_META);
    for (int i = 0; i < 4; i++) bb_le(x, (uint64_t)i, 4);
    bb_str(x, addr_len, 'z');
    bb_le(x, groups, 1);
    for (uint32_t g = 0; g < groups; g++) {
        bb_le(x, g, 4);
        bb_le(x, 1000 + g, 8);
        bb_le(x, 0x5eed0000u + g, 8); /* the grant's key */
        bb_le(x, g, 8);
    }
    bb_le(x, 64, 4);
    bb_le(x, reqs, 2);
    for (uint32_t i = 0; i < reqs; i++) {
        bb_le(x, i, 4);
        bb_le(x, i + 9, 8); /* transfer id: hi, lo */
        bb_le(x, i + 10, 8);
        bb_le(x, tgroups, 1);
        for (uint32_t g = 0; g < tgroups; g++) {
            bb_le(x, tn, 2);
            for (uint32_t k = 0; k < tn; k++) bb_le(x, k, 4);
        }
    }
    bb_fin(x);
}

static void build_resp(bb *x, uint32_t status, uint32_t n_ok, uint32_t n_err, size_t msg_len) {
    bb_hdr(x, KV_WIRE_XFER_RESP);
    bb_le(x, status, 4);
    bb_le(x, 1, 4);
    bb_le(x, 2, 4);
    bb_le(x, n_ok, 2);
    for (uint32_t i = 0; i < n_ok; i++) bb_le(x, i, 4);
    bb_le(x, n_err, 2);
    for (uint32_t i = 0; i < n_err; i++) bb_le(x, i, 4);
    bb_str(x, msg_len, 'm');
    bb_fin(x);
}

static void build_boot(bb *x, uint32_t type, uint32_t tp_size, uint32_t n_addr, size_t addr_len) {
    bb_hdr(x, type);
    bb_le(x, 1, 4);
    bb_le(x, tp_size, 4);
    bb_le(x, 0, 4);
    bb_le(x, 1, 4);
    bb_le(x, n_addr, 1);
    for (uint32_t i = 0; i < n_addr; i++) bb_str(x, addr_len, 'q');
    bb_fin(x);
}

static kv_status decode_bb(const bb *x) { return decode_exact(x->b, x->n, &g_out); }

/* ---- round trips ---- */

static void round_trip(int k) {
    fixture(&g_msg, k);
    size_t n = encode_ok(&g_msg, g_buf);
    kv_status rc = decode_exact(g_buf, n, &g_out);
    cr_assert_eq(rc, KV_OK, "fixture %d: decode %s", k, kv_status_str(rc));
    cr_assert(msg_eq(&g_msg, &g_out), "fixture %d: decoded value differs", k);
    size_t n2 = encode_ok(&g_out, g_buf2);
    cr_assert_eq(n2, n, "fixture %d", k);
    cr_assert_arr_eq(g_buf2, g_buf, n, "fixture %d: re-encode differs", k);
}

Test(wire, round_trip_xfer_meta) {
    round_trip(0); /* empty lists */
    round_trip(1); /* full */
    round_trip(9); /* max-size lists and address */
    cr_assert_lt(encode_ok(&g_msg, g_buf), (size_t)KV_WIRE_MAX);
}

Test(wire, round_trip_xfer_resp) {
    round_trip(2);
    round_trip(3);
    round_trip(8);
    round_trip(10);
    for (uint32_t s = KV_XFER_FINISH; s <= KV_XFER_ERROR; s++) {
        resp_fixture(&g_msg, s, 1, 1, 1);
        size_t n = encode_ok(&g_msg, g_buf);
        cr_assert_eq(kv_wire_decode(g_buf, n, &g_out), KV_OK);
        cr_assert_eq(g_out.u.resp.status, s);
    }
}

Test(wire, round_trip_boot) {
    round_trip(4);  /* REG */
    round_trip(5);  /* QUERY */
    round_trip(6);  /* REPLY, unknown engine */
    round_trip(7);  /* REPLY, tp 2 */
    round_trip(11); /* REPLY, KV_TP_MAX ranks, max-size addresses */
    boot_fixture(&g_msg, KV_WIRE_BOOT_REG, 1, 0); /* empty address */
    size_t n = encode_ok(&g_msg, g_buf);
    cr_assert_eq(kv_wire_decode(g_buf, n, &g_out), KV_OK);
    cr_assert_str_eq(g_out.u.boot.addr[0].s, "");
}

Test(wire, decode_never_writes_past_the_counts) {
    /* Garbage beyond the counts in the source is not encoded, and decode
     * writes no entry past a count (it leaves them as they were). */
    fixture(&g_msg, 1);
    g_msg.u.meta.req[5].d_req = 99;
    g_msg.u.meta.region[4].len = 99;
    memcpy(g_msg.u.meta.d_addr.s + 20, "junk", 4);
    size_t n = encode_ok(&g_msg, g_buf);
    memset(&g_out, 0, sizeof g_out);
    cr_assert_eq(kv_wire_decode(g_buf, n, &g_out), KV_OK);
    cr_assert_eq(g_out.u.meta.req[5].d_req, 0);
    cr_assert_eq(g_out.u.meta.region[4].len, 0);
    cr_assert_eq(g_out.u.meta.d_addr.s[20], 0);
}

/* ---- exact layout ---- */

Test(wire, layout_boot_query) {
    static const uint8_t want[] = {'K', 'V', 4, 4, 17, 0, 0, 0, /* header */
                                   7, 0, 0, 0,  2, 0, 0, 0,  /* engine, tp_size */
                                   1, 0, 0, 0,  0, 0, 0, 0,  /* tp_rank, found */
                                   0};                       /* no addrs */
    memset(&g_msg, 0, sizeof g_msg);
    g_msg.type = KV_WIRE_BOOT_QUERY;
    g_msg.u.boot = (kv_wire_boot){.engine = 7, .tp_size = 2, .tp_rank = 1, .found = 0};
    size_t n = encode_ok(&g_msg, g_buf);
    cr_assert_eq(n, sizeof want);
    cr_assert_arr_eq(g_buf, want, sizeof want);
    cr_assert_eq(kv_wire_decode(want, sizeof want, &g_out), KV_OK);
    cr_assert(msg_eq(&g_msg, &g_out));
}

Test(wire, layout_xfer_resp) {
    static const uint8_t want[] = {'K', 'V', 4, 2, 24, 0, 0, 0,
                                   2, 0, 0, 0,             /* status ERROR */
                                   4, 3, 2, 1,             /* batch 0x01020304 */
                                   1, 0, 0, 0,             /* p_tp_rank */
                                   1, 0, 0xd0, 0xc0, 0xb0, 0xa0, /* ok = [0xa0b0c0d0] */
                                   0, 0,                   /* err = [] */
                                   2, 0, 'h', 'i'};        /* err_msg "hi" */
    memset(&g_msg, 0, sizeof g_msg);
    g_msg.type = KV_WIRE_XFER_RESP;
    g_msg.u.resp.status = KV_XFER_ERROR;
    g_msg.u.resp.batch = 0x01020304u;
    g_msg.u.resp.p_tp_rank = 1;
    g_msg.u.resp.n_ok = 1;
    g_msg.u.resp.ok[0] = 0xa0b0c0d0u;
    strcpy(g_msg.u.resp.err_msg, "hi");
    size_t n = encode_ok(&g_msg, g_buf);
    cr_assert_eq(n, sizeof want);
    cr_assert_arr_eq(g_buf, want, sizeof want);
}

Test(wire, layout_xfer_meta) {
    static const uint8_t want[] = {'K', 'V', 4, 1, 85, 0, 0, 0,
                                   1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 9, 0, 0, 0, /* engine..batch */
                                   1, 0, 'a',                         /* d_addr "a" */
                                   1,                                 /* n_groups */
                                   3, 0, 0, 0, 5, 0, 0, 0, 1, 0, 0, 0, /* region 3, len 2^32+5 */
                                   0xab, 0, 0, 0, 0, 0, 0, 0,         /* key.w[0] 0xab */
                                   0, 0, 0, 0, 0, 0, 0, 0xcd,         /* key.w[1] 0xcd << 56 */
                                   0, 0x10, 0, 0,                     /* block_bytes 4096 */
                                   1, 0,                              /* n_reqs */
                                   5, 0, 0, 0,                        /* d_req */
                                   6, 0, 0, 0, 0, 0, 0, 0x11,         /* transfer_id.hi */
                                   0x22, 0, 0, 0, 0, 0, 0, 0,         /* transfer_id.lo */
                                   1, 2, 0, 0, 0, 0, 0, 7, 0, 0, 0};  /* ((0, 7),) */
    memset(&g_msg, 0, sizeof g_msg);
    g_msg.type = KV_WIRE_XFER_META;
    kv_wire_xfer_meta *x = &g_msg.u.meta;
    x->d_engine = 1;
    x->d_tp_size = 1;
    x->batch = 9;
    strcpy(x->d_addr.s, "a");
    x->n_groups = 1;
    x->region[0] = (kvt_desc){.region = 3, .len = 0x100000005ull, .key = {{0xab, 0xcdull << 56}}};
    x->block_bytes = 4096;
    x->n_reqs = 1;
    x->req[0].d_req = 5;
    x->req[0].transfer_id = (kv_xfer_id){.hi = 0x1100000000000006ull, .lo = 0x22};
    x->req[0].blocks.n_groups = 1;
    x->req[0].blocks.n[0] = 2;
    x->req[0].blocks.id[0][1] = 7;
    size_t n = encode_ok(&g_msg, g_buf);
    cr_assert_eq(n, sizeof want);
    cr_assert_arr_eq(g_buf, want, sizeof want);
}

/* ---- truncation and mutation ---- */

Test(wire, every_truncation_rejected) {
    for (int k = 0; k < FIX_COUNT; k++) {
        fixture(&g_msg, k);
        size_t n = encode_ok(&g_msg, g_buf);
        for (size_t len = 0; len < n; len++) {
            kv_status rc = decode_exact(g_buf, len, &g_out);
            CHECK(rc == KV_EPROTO, "fixture %d prefix %zu: %s", k, len, kv_status_str(rc));
            CHECK(is_zero(&g_out), "fixture %d prefix %zu: output not zeroed", k, len);
        }
        CHECK(decode_exact(g_buf, n, &g_out) == KV_OK, "fixture %d: full message rejected", k);
    }
}

Test(wire, every_truncation_with_fixed_length_rejected) {
    /* Prefixes whose header claims exactly the shortened payload. */
    for (int k = 0; k < FIX_SMALL; k++) {
        fixture(&g_msg, k);
        size_t n = encode_ok(&g_msg, g_buf);
        for (size_t len = KV_WIRE_HDR_BYTES; len < n; len++) {
            memcpy(g_mut, g_buf, len);
            uint32_t p = (uint32_t)(len - KV_WIRE_HDR_BYTES);
            for (int i = 0; i < 4; i++) g_mut[4 + i] = (uint8_t)(p >> (8 * i));
            kv_status rc = decode_exact(g_mut, len, &g_out);
            CHECK(rc == KV_EPROTO, "fixture %d prefix %zu: %s", k, len, kv_status_str(rc));
            CHECK(is_zero(&g_out), "fixture %d prefix %zu: output not zeroed", k, len);
        }
    }
}

Test(wire, every_byte_mutation_small) {
    unsigned accepted = 0, rejected = 0;
    for (int k = 0; k < FIX_SMALL; k++) {
        fixture(&g_msg, k);
        size_t n = encode_ok(&g_msg, g_buf);
        for (size_t pos = 0; pos < n; pos++) {
            for (unsigned v = 0; v < 256; v++) {
                if (v == g_buf[pos]) continue;
                memcpy(g_mut, g_buf, n);
                g_mut[pos] = (uint8_t)v;
                if (check_fixed_point(g_mut, n)) accepted++;
                else rejected++;
            }
        }
    }
    cr_assert_gt(accepted, 0);
    cr_assert_gt(rejected, 0);
}

Test(wire, byte_mutation_large) {
    unsigned accepted = 0;
    for (int k = FIX_SMALL; k < FIX_COUNT; k++) {
        fixture(&g_msg, k);
        size_t n = encode_ok(&g_msg, g_buf);
        for (size_t pos = 0; pos < n; pos++) {
            if (pos >= 96 && pos + 96 < n && pos % 53) continue;
            static const uint8_t flips[] = {0x01, 0x80, 0xff};
            for (size_t f = 0; f < sizeof flips; f++) {
                memcpy(g_mut, g_buf, n);
                g_mut[pos] ^= flips[f];
                accepted += (unsigned)check_fixed_point(g_mut, n);
            }
        }
    }
    cr_assert_gt(accepted, 0);
}

/* ---- header errors ---- */

Test(wire, wrong_version) {
    fixture(&g_msg, 3);
    size_t n = encode_ok(&g_msg, g_buf);
    /* 1: before the grant's key; 2: before 128-bit transfer ids; 3: before EXIST_REPLY's status */
    static const uint8_t versions[] = {0, 1, 2, 3, 5, 0x81, 0xff};
    for (size_t i = 0; i < sizeof versions; i++) {
        memcpy(g_mut, g_buf, n);
        g_mut[2] = versions[i];
        cr_assert_eq(decode_exact(g_mut, n, &g_out), KV_EVERSION, "version %u", versions[i]);
        cr_assert(is_zero(&g_out));
    }
}

Test(wire, wrong_magic_or_type) {
    fixture(&g_msg, 5);
    size_t n = encode_ok(&g_msg, g_buf);
    memcpy(g_mut, g_buf, n);
    g_mut[0] = 'k';
    cr_assert_eq(decode_exact(g_mut, n, &g_out), KV_EPROTO);
    memcpy(g_mut, g_buf, n);
    g_mut[1] = 'W';
    cr_assert_eq(decode_exact(g_mut, n, &g_out), KV_EPROTO);
    static const uint8_t types[] = {0, 6, 0x7f, 0xff};
    for (size_t i = 0; i < sizeof types; i++) {
        memcpy(g_mut, g_buf, n);
        g_mut[3] = types[i];
        cr_assert_eq(decode_exact(g_mut, n, &g_out), KV_EPROTO, "type %u", types[i]);
        cr_assert(is_zero(&g_out));
    }
}

Test(wire, payload_length_mismatch) {
    fixture(&g_msg, 4);
    size_t n = encode_ok(&g_msg, g_buf);
    for (int d = -3; d <= 3; d++) {
        if (!d) continue;
        memcpy(g_mut, g_buf, n);
        g_mut[4] = (uint8_t)(g_mut[4] + d);
        cr_assert_eq(decode_exact(g_mut, n, &g_out), KV_EPROTO, "delta %d", d);
    }
    memcpy(g_mut, g_buf, n);
    g_mut[7] = 0x80; /* ~2 GiB claimed */
    cr_assert_eq(decode_exact(g_mut, n, &g_out), KV_EPROTO);
}

Test(wire, trailing_garbage) {
    for (int k = 0; k < FIX_COUNT; k++) {
        fixture(&g_msg, k);
        size_t n = encode_ok(&g_msg, g_buf);
        for (size_t extra = 1; extra <= 3; extra++) {
            memcpy(g_mut, g_buf, n);
            memset(g_mut + n, 0, extra);
            /* With the header's length left alone ... */
            CHECK(decode_exact(g_mut, n + extra, &g_out) == KV_EPROTO, "fixture %d +%zu", k, extra);
            /* ... and with it covering the extra bytes. */
            uint32_t p = (uint32_t)(n + extra - KV_WIRE_HDR_BYTES);
            for (int i = 0; i < 4; i++) g_mut[4 + i] = (uint8_t)(p >> (8 * i));
            CHECK(decode_exact(g_mut, n + extra, &g_out) == KV_EPROTO, "fixture %d +%zu fixed", k, extra);
            CHECK(is_zero(&g_out), "fixture %d: output not zeroed", k);
        }
    }
}

/* ---- bounds on decode ---- */

Test(wire, count_over_bound_meta) {
    build_meta(&g_bb, KV_GROUPS_MAX, 1, 1, 1, 1);
    cr_assert_eq(decode_bb(&g_bb), KV_OK);
    build_meta(&g_bb, KV_GROUPS_MAX + 1, 1, 1, 1, 1);
    cr_assert_eq(decode_bb(&g_bb), KV_EPROTO, "regions over bound");
    build_meta(&g_bb, 1, KV_PULL_REQS_MAX, 0, 0, 1);
    cr_assert_eq(decode_bb(&g_bb), KV_OK);
    build_meta(&g_bb, 1, KV_PULL_REQS_MAX + 1, 0, 0, 1);
    cr_assert_eq(decode_bb(&g_bb), KV_EPROTO, "reqs over bound");
    build_meta(&g_bb, 1, 1, KV_GROUPS_MAX, KV_REQ_BLOCKS_MAX, 1);
    cr_assert_eq(decode_bb(&g_bb), KV_OK);
    build_meta(&g_bb, 1, 1, KV_GROUPS_MAX + 1, 1, 1);
    cr_assert_eq(decode_bb(&g_bb), KV_EPROTO, "table groups over bound");
    build_meta(&g_bb, 1, 1, 1, KV_REQ_BLOCKS_MAX + 1, 1);
    cr_assert_eq(decode_bb(&g_bb), KV_EPROTO, "blocks over bound");
    cr_assert(is_zero(&g_out));
}

Test(wire, count_over_bound_resp) {
    build_resp(&g_bb, KV_XFER_ERROR, KV_PULL_REQS_MAX, KV_PULL_REQS_MAX, 0);
    cr_assert_eq(decode_bb(&g_bb), KV_OK);
    build_resp(&g_bb, KV_XFER_FINISH, KV_PULL_REQS_MAX + 1, 0, 0);
    cr_assert_eq(decode_bb(&g_bb), KV_EPROTO, "ok over bound");
    build_resp(&g_bb, KV_XFER_FINISH, 0, KV_PULL_REQS_MAX + 1, 0);
    cr_assert_eq(decode_bb(&g_bb), KV_EPROTO, "err over bound");
    build_resp(&g_bb, KV_XFER_ERROR + 1, 0, 0, 0);
    cr_assert_eq(decode_bb(&g_bb), KV_EPROTO, "status out of range");
    build_resp(&g_bb, 0x100, 0, 0, 0);
    cr_assert_eq(decode_bb(&g_bb), KV_EPROTO, "status out of range");
    cr_assert(is_zero(&g_out));
}

Test(wire, count_over_bound_boot) {
    build_boot(&g_bb, KV_WIRE_BOOT_REPLY, KV_TP_MAX, KV_TP_MAX, 3);
    cr_assert_eq(decode_bb(&g_bb), KV_OK);
    build_boot(&g_bb, KV_WIRE_BOOT_REPLY, KV_TP_MAX + 1, KV_TP_MAX + 1, 3);
    cr_assert_eq(decode_bb(&g_bb), KV_EPROTO, "tp_size over bound");
    build_boot(&g_bb, KV_WIRE_BOOT_REPLY, 2, 1, 3);
    cr_assert_eq(decode_bb(&g_bb), KV_EPROTO, "addr count != tp_size");
    build_boot(&g_bb, KV_WIRE_BOOT_REG, 2, 1, 3);
    cr_assert_eq(decode_bb(&g_bb), KV_OK);
    build_boot(&g_bb, KV_WIRE_BOOT_REG, 2, 2, 3);
    cr_assert_eq(decode_bb(&g_bb), KV_EPROTO, "REG with 2 addrs");
    build_boot(&g_bb, KV_WIRE_BOOT_REG, 2, 0, 3);
    cr_assert_eq(decode_bb(&g_bb), KV_EPROTO, "REG with 0 addrs");
    build_boot(&g_bb, KV_WIRE_BOOT_QUERY, 2, 0, 0);
    cr_assert_eq(decode_bb(&g_bb), KV_OK);
    build_boot(&g_bb, KV_WIRE_BOOT_QUERY, 2, 1, 3);
    cr_assert_eq(decode_bb(&g_bb), KV_EPROTO, "QUERY with an addr");
    cr_assert(is_zero(&g_out));
}

Test(wire, oversized_string) {
    build_meta(&g_bb, 0, 0, 0, 0, KV_ADDR_MAX - 1);
    cr_assert_eq(decode_bb(&g_bb), KV_OK);
    cr_assert_eq(strlen(g_out.u.meta.d_addr.s), KV_ADDR_MAX - 1);
    build_meta(&g_bb, 0, 0, 0, 0, KV_ADDR_MAX);
    cr_assert_eq(decode_bb(&g_bb), KV_EPROTO, "addr of KV_ADDR_MAX bytes");
    build_meta(&g_bb, 0, 0, 0, 0, 1000);
    cr_assert_eq(decode_bb(&g_bb), KV_EPROTO);
    build_resp(&g_bb, 0, 0, 0, KV_ERR_MSG_MAX - 1);
    cr_assert_eq(decode_bb(&g_bb), KV_OK);
    build_resp(&g_bb, 0, 0, 0, KV_ERR_MSG_MAX);
    cr_assert_eq(decode_bb(&g_bb), KV_EPROTO, "err_msg of KV_ERR_MSG_MAX bytes");
    build_boot(&g_bb, KV_WIRE_BOOT_REG, 1, 1, KV_ADDR_MAX);
    cr_assert_eq(decode_bb(&g_bb), KV_EPROTO, "boot addr of KV_ADDR_MAX bytes");
    cr_assert(is_zero(&g_out));
    /* A length that runs past the end. */
    build_resp(&g_bb, 0, 0, 0, 0);
    g_bb.b[g_bb.n - 2] = 0xff;
    g_bb.b[g_bb.n - 1] = 0xff;
    cr_assert_eq(decode_bb(&g_bb), KV_EPROTO);
}

Test(wire, embedded_nul_in_string) {
    build_resp(&g_bb, 0, 0, 0, 5);
    cr_assert_eq(decode_bb(&g_bb), KV_OK);
    g_bb.b[g_bb.n - 3] = 0;
    cr_assert_eq(decode_bb(&g_bb), KV_EPROTO);
    build_boot(&g_bb, KV_WIRE_BOOT_REG, 1, 1, 4);
    g_bb.b[g_bb.n - 1] = 0;
    cr_assert_eq(decode_bb(&g_bb), KV_EPROTO);
    cr_assert(is_zero(&g_out));
}

Test(wire, decode_bad_arguments) {
    cr_assert_eq(kv_wire_decode(NULL, 0, &g_out), KV_EPROTO);
    cr_assert_eq(kv_wire_decode(NULL, 8, &g_out), KV_EINVAL);
    cr_assert(is_zero(&g_out));
    fixture(&g_msg, 5);
    size_t n = encode_ok(&g_msg, g_buf);
    cr_assert_eq(kv_wire_decode(g_buf, n, NULL), KV_EINVAL);
}

/* ---- encode errors ---- */

Test(wire, encode_cap_too_small) {
    for (int k = 0; k < FIX_COUNT; k++) {
        fixture(&g_msg, k);
        size_t n = encode_ok(&g_msg, g_buf);
        for (size_t cap = 0; cap < n; cap++) {
            if (k >= FIX_SMALL && cap > 9 && cap != n / 2 && cap + 1 != n) continue;
            memset(g_buf2, 0xee, cap + 16);
            size_t out = 123;
            kv_status rc = kv_wire_encode(&g_msg, g_buf2, cap, &out);
            CHECK(rc == KV_ENOMEM, "fixture %d cap %zu: %s", k, cap, kv_status_str(rc));
            CHECK(out == 0, "fixture %d cap %zu: out_len %zu", k, cap, out);
            for (size_t i = cap; i < cap + 16; i++)
                CHECK(g_buf2[i] == 0xee, "fixture %d cap %zu: wrote byte %zu", k, cap, i);
        }
        size_t out = 0;
        CHECK(kv_wire_encode(&g_msg, g_buf2, n, &out) == KV_OK && out == n, "fixture %d exact cap", k);
    }
    cr_assert_eq(kv_wire_encode(&g_msg, NULL, 0, &(size_t){0}), KV_ENOMEM);
}

static void expect_einval(const kv_wire_msg *m, const char *what) {
    size_t out = 7;
    kv_status rc = kv_wire_encode(m, g_buf, KV_WIRE_MAX, &out);
    cr_assert_eq(rc, KV_EINVAL, "%s: %s", what, kv_status_str(rc));
    cr_assert_eq(out, 0, "%s", what);
    rc = kv_wire_encode(m, g_buf, 4, &out); /* bounds win over capacity */
    cr_assert_eq(rc, KV_EINVAL, "%s (small cap): %s", what, kv_status_str(rc));
}

Test(wire, encode_out_of_bounds) {
    fixture(&g_msg, 1);
    g_msg.type = 0;
    expect_einval(&g_msg, "type 0");
    g_msg.type = 6;
    expect_einval(&g_msg, "type 6");

    fixture(&g_msg, 1);
    g_msg.u.meta.n_groups = KV_GROUPS_MAX + 1;
    expect_einval(&g_msg, "meta n_groups");
    fixture(&g_msg, 1);
    g_msg.u.meta.n_reqs = KV_PULL_REQS_MAX + 1;
    expect_einval(&g_msg, "meta n_reqs");
    fixture(&g_msg, 1);
    g_msg.u.meta.req[1].blocks.n_groups = KV_GROUPS_MAX + 1;
    expect_einval(&g_msg, "table n_groups");
    fixture(&g_msg, 1);
    g_msg.u.meta.req[2].blocks.n[1] = KV_REQ_BLOCKS_MAX + 1;
    expect_einval(&g_msg, "table n");
    fixture(&g_msg, 1);
    memset(g_msg.u.meta.d_addr.s, 'x', sizeof g_msg.u.meta.d_addr.s);
    expect_einval(&g_msg, "unterminated d_addr");

    fixture(&g_msg, 3);
    g_msg.u.resp.status = KV_XFER_ERROR + 1;
    expect_einval(&g_msg, "resp status");
    fixture(&g_msg, 3);
    g_msg.u.resp.n_ok = KV_PULL_REQS_MAX + 1;
    expect_einval(&g_msg, "resp n_ok");
    fixture(&g_msg, 3);
    g_msg.u.resp.n_err = KV_PULL_REQS_MAX + 1;
    expect_einval(&g_msg, "resp n_err");
    fixture(&g_msg, 3);
    memset(g_msg.u.resp.err_msg, 'x', sizeof g_msg.u.resp.err_msg);
    expect_einval(&g_msg, "unterminated err_msg");

    fixture(&g_msg, 7);
    g_msg.u.boot.tp_size = KV_TP_MAX + 1;
    expect_einval(&g_msg, "reply tp_size");
    fixture(&g_msg, 7);
    memset(g_msg.u.boot.addr[1].s, 'x', sizeof g_msg.u.boot.addr[1].s);
    expect_einval(&g_msg, "unterminated reply addr");
    fixture(&g_msg, 4);
    memset(g_msg.u.boot.addr[0].s, 'x', sizeof g_msg.u.boot.addr[0].s);
    expect_einval(&g_msg, "unterminated reg addr");

    size_t out = 0;
    cr_assert_eq(kv_wire_encode(NULL, g_buf, KV_WIRE_MAX, &out), KV_EINVAL);
    fixture(&g_msg, 5);
    cr_assert_eq(kv_wire_encode(&g_msg, g_buf, KV_WIRE_MAX, NULL), KV_EINVAL);
    cr_assert_eq(kv_wire_encode(&g_msg, NULL, 64, &out), KV_EINVAL);
}

Test(wire, encode_ignores_unused_slots) {
    /* Slots past the counts (and addrs a BOOT type does not carry) do not
     * change the bytes: one encoding per message value. */
    fixture(&g_msg, 5);
    size_t n = encode_ok(&g_msg, g_buf);
    memset(g_msg.u.boot.addr, 'x', sizeof g_msg.u.boot.addr); /* unterminated, unused */
    size_t n2 = encode_ok(&g_msg, g_buf2);
    cr_assert_eq(n2, n);
    cr_assert_arr_eq(g_buf2, g_buf, n);
    fixture(&g_msg, 3);
    n = encode_ok(&g_msg, g_buf);
    g_msg.u.resp.ok[10] = 1;
    g_msg.u.resp.err_msg[50] = 'x';
    n2 = encode_ok(&g_msg, g_buf2);
    cr_assert_eq(n2, n);
    cr_assert_arr_eq(g_buf2, g_buf, n);
}

/* ---- seeded random inputs ---- */

static uint64_t g_rng;
static uint64_t rnd(void) {
    uint64_t x = (g_rng += 0x9e3779b97f4a7c15ull);
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static size_t random_input(uint8_t *b) {
    size_t len = (size_t)(rnd() % 513);
    for (size_t i = 0; i < len; i++) b[i] = (uint8_t)rnd();
    unsigned mode = (unsigned)(rnd() % 4);
    if (mode == 1 && len >= 3) { /* a valid header */
        b[0] = 'K';
        b[1] = 'V';
        b[2] = KV_WIRE_VERSION;
        b[3] = (uint8_t)(rnd() % 7);
        uint32_t p = len >= 8 ? (uint32_t)(len - 8) : 0;
        for (size_t i = 4; i < 8 && i < len; i++) b[i] = (uint8_t)(p >> (8 * (i - 4)));
    } else if (mode >= 2) { /* a small valid message, lightly mutated */
        static uint8_t enc[FIX_SMALL][1024];
        static size_t enc_n[FIX_SMALL];
        int k = (int)(rnd() % FIX_SMALL);
        if (!enc_n[k]) {
            fixture(&g_msg, k);
            enc_n[k] = encode_ok(&g_msg, enc[k]);
        }
        len = enc_n[k];
        memcpy(b, enc[k], len);
        unsigned edits = (unsigned)(rnd() % 3);
        for (unsigned e = 0; e < edits; e++) b[rnd() % len] = (uint8_t)rnd();
    }
    return len;
}

Test(wire, random_inputs_never_crash) {
    g_rng = 0x5eedf00dull;
    unsigned accepted = 0;
    for (int i = 0; i < 100000; i++) {
        size_t len = random_input(g_mut);
        /* An exact-size copy so any over-read is an ASan error. */
        uint8_t *p = malloc(len ? len : 1);
        cr_assert(p);
        memcpy(p, g_mut, len);
        accepted += (unsigned)check_fixed_point(p, len);
        free(p);
    }
    cr_assert_gt(accepted, 1000, "accepted %u", accepted);
}

Test(wire, store_messages_are_bounds_checked) {
    size_t n = 0;
    store_fixture(&g_msg, KV_WIRE_STORE_PUT, KV_STORE_BATCH_MAX, 8, 0);
    g_msg.u.store.n = KV_STORE_BATCH_MAX + 1; /* more keys than a put carries */
    cr_assert_eq(kv_wire_encode(&g_msg, g_buf, KV_WIRE_MAX, &n), KV_EINVAL);
    store_fixture(&g_msg, KV_WIRE_STORE_GET, 2, KV_STORE_BLOCK_BYTES_MAX + 1, 0);
    cr_assert_eq(kv_wire_encode(&g_msg, g_buf, KV_WIRE_MAX, &n), KV_EINVAL);
    store_fixture(&g_msg, KV_WIRE_STORE_GET_REPLY, 3, 8, 0);
    size_t len = encode_ok(&g_msg, g_buf);
    /* header 8, seq 4, status 4, block_bytes 4, n 2: the first flag */
    g_buf[KV_WIRE_HDR_BYTES + 14] = 2;
    cr_assert_eq(decode_exact(g_buf, len, &g_out), KV_EPROTO, "a flag other than 0/1 is rejected");
    cr_assert(is_zero(&g_out));
    store_fixture(&g_msg, KV_WIRE_STORE_GET_REPLY, 3, 8, 0);
    len = encode_ok(&g_msg, g_buf);
    uint32_t short_payload = (uint32_t)(len - 1 - KV_WIRE_HDR_BYTES); /* a consistent header, one byte short */
    for (int i = 0; i < 4; i++) g_buf[4 + i] = (uint8_t)(short_payload >> (8 * i));
    cr_assert_eq(decode_exact(g_buf, len - 1, &g_out), KV_EPROTO, "a truncated block is rejected");
}

/* A store block is 1..KV_STORE_BLOCK_BYTES_MAX bytes: both ends of the range
 * round-trip in every message that carries a size, and 0 is refused both
 * ways (the encoder's bound, and the decoder's for the same bytes). */
Test(wire, store_block_sizes_are_one_to_the_maximum) {
    static const uint32_t sized[] = {KV_WIRE_STORE_PUT, KV_WIRE_STORE_GET, KV_WIRE_STORE_GET_REPLY};
    static const uint32_t ends[] = {1, KV_STORE_BLOCK_BYTES_MAX};
    for (size_t t = 0; t < sizeof sized / sizeof sized[0]; t++) {
        for (size_t e = 0; e < sizeof ends / sizeof ends[0]; e++) {
            store_fixture(&g_msg, sized[t], 3, ends[e], 0);
            size_t n = encode_ok(&g_msg, g_buf);
            kv_status rc = decode_exact(g_buf, n, &g_out);
            cr_assert_eq(rc, KV_OK, "type %u, %u-byte blocks: decode %s", sized[t], ends[e], kv_status_str(rc));
            cr_assert(msg_eq(&g_msg, &g_out), "type %u, %u-byte blocks: decoded value differs", sized[t], ends[e]);
        }
        store_fixture(&g_msg, sized[t], 3, 1, 0);
        size_t n = encode_ok(&g_msg, g_buf);
        g_msg.u.store.block_bytes = 0;
        expect_einval(&g_msg, "0-byte blocks");
        /* header 8, seq 4, then (GET_REPLY: after the status) the size */
        size_t at = KV_WIRE_HDR_BYTES + 4 + (sized[t] == KV_WIRE_STORE_GET_REPLY ? 4 : 0);
        cr_assert_eq(g_buf[at], 1, "type %u: the size is not at byte %zu", sized[t], at);
        g_buf[at] = 0;
        cr_assert_eq(decode_exact(g_buf, n, &g_out), KV_EPROTO, "type %u: a 0-byte block size is rejected", sized[t]);
    }
}

/* A peer's text goes to a log as one printable line: every byte outside
 * 0x20..0x7e (controls, DEL, the high half) as '?', cut at its NUL, its
 * length or the output's room. */
Test(wire, peer_text_is_printed_as_one_printable_line) {
    char in[256], out[300];
    for (int i = 0; i < 255; i++) in[i] = (char)(i + 1); /* bytes 1..255 */
    in[255] = 0;
    cr_assert_eq(kv_wire_printable(in, sizeof in, out, sizeof out), 255u);
    for (int i = 0; i < 255; i++) {
        unsigned char b = (unsigned char)(i + 1);
        char want = b >= 0x20 && b <= 0x7e ? (char)b : '?';
        cr_assert_eq(out[i], want, "byte 0x%02x printed as 0x%02x", b, (unsigned char)out[i]);
    }
    cr_assert_eq(out[255], 0);
    cr_assert_eq(kv_wire_printable("P num blocks less than D\nX", 100, out, 11), 10u);
    cr_assert_str_eq(out, "P num bloc");
    cr_assert_eq(kv_wire_printable("abc", 2, out, sizeof out), 2u);
    cr_assert_str_eq(out, "ab");
    cr_assert_eq(kv_wire_printable("a\0b", 3, out, sizeof out), 1u);
    cr_assert_eq(kv_wire_printable("abc", 3, out, 1), 0u);
    cr_assert_str_eq(out, "");
}
