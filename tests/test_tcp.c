/* tests/test_tcp.c — transport/tcp: the real TCP backend on 127.0.0.1.
 * Two kvt instances in one process, polled from the test loop with a real
 * monotonic clock copied into te.now_ns. Ctrl round trip and reply through
 * the event's peer id; ordered ctrl; byte-exact WRITE batches with exactly
 * one completion; remote bounds checks (guards intact, failed entries);
 * rejected submits complete never; deadlines; peer loss mid-batch; a raw
 * malicious client; connect to a closed port. Every wait is bounded (2 s). */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "tests/support/test_env.h"
#include "transport/tcp/tcp.h"

#define REC_MAX 4096u
#define WAIT_NS 2000000000ull

typedef struct rec {
    kvt_event e;
    uint32_t blen;
    uint8_t bytes[64];
} rec;

typedef struct side {
    kvt *t;
    kvt_ep ep;
    kvt_addr addr;
    bool polling;
    uint32_t n;
    rec r[REC_MAX];
} side;

static test_env te;
static side A, B;

static uint64_t mono(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void open_side(side *s, uint32_t owner) {
    memset(s, 0, sizeof *s);
    cr_assert_eq(kvt_tcp_new(&te.env, "127.0.0.1", &s->t), KV_OK);
    cr_assert_eq(kvt_ep_open(s->t, owner, &s->ep, &s->addr), KV_OK);
    cr_assert(strncmp(s->addr.s, "127.0.0.1:", 10) == 0, "addr %s", s->addr.s);
    s->polling = true;
}

static void setup(void) {
    (void)kv_auth_init();
    test_env_init(&te);
    te.now_ns = mono();
    open_side(&A, 1);
    open_side(&B, 2);
}

static void teardown(void) {
    kvt_tcp_free(A.t);
    kvt_tcp_free(B.t);
    A.t = B.t = NULL;
}

/* One poll of s; records events (ctrl bytes copied right after poll). */
static uint32_t pump_side(side *s) {
    kvt_event ev[64];
    uint32_t n = 0;
    if (!s->t || !s->polling) return 0;
    cr_assert_eq(kvt_poll(s->t, ev, 64, &n), KV_OK);
    for (uint32_t i = 0; i < n; i++) {
        cr_assert_lt(s->n, REC_MAX);
        rec *r = &s->r[s->n++];
        r->e = ev[i];
        r->blen = 0;
        if (ev[i].kind != KVT_EV_CTRL) continue;
        const uint8_t *p = NULL;
        cr_assert_eq(kvt_tcp_event_data(s->t, i, &p), KV_OK);
        r->blen = ev[i].len < sizeof r->bytes ? ev[i].len : (uint32_t)sizeof r->bytes;
        memcpy(r->bytes, p, r->blen);
    }
    return n;
}

static void pump(void) {
    te.now_ns = mono();
    uint32_t n = pump_side(&A) + pump_side(&B);
    if (n == 0) {
        struct timespec ts = {0, 100000};
        nanosleep(&ts, NULL);
    }
}

/* Pumps until cond() or WAIT_NS of wall time; fails the test on timeout. */
#define PUMP_UNTIL(cond)                                                   \
    do {                                                                   \
        uint64_t t0_ = mono();                                             \
        while (!(cond)) {                                                  \
            cr_assert_lt(mono() - t0_, WAIT_NS, "timed out waiting: %s", #cond); \
            pump();                                                        \
        }                                                                  \
    } while (0)

static void pump_for_ms(uint32_t ms) {
    uint64_t t0 = mono();
    while (mono() - t0 < (uint64_t)ms * 1000000ull) pump();
}

static uint32_t count(const side *s, uint32_t kind) {
    uint32_t c = 0;
    for (uint32_t i = 0; i < s->n; i++) c += s->r[i].e.kind == kind;
    return c;
}

static const rec *find(const side *s, uint32_t kind) {
    for (uint32_t i = 0; i < s->n; i++)
        if (s->r[i].e.kind == kind) return &s->r[i];
    return NULL;
}

TestSuite(tcp, .init = setup, .fini = teardown, .timeout = 20);

Test(tcp, ctrl_round_trip_and_reply) {
    kvt_peer pb, pb2;
    cr_assert_eq(kvt_connect(A.t, A.ep, &B.addr, &pb), KV_OK);
    cr_assert_eq(kvt_connect(A.t, A.ep, &B.addr, &pb2), KV_OK);
    cr_assert_eq(pb, pb2, "connect is idempotent per addr");
    cr_assert_eq(kvt_send_ctrl(A.t, A.ep, pb, "hello", 5), KV_OK);
    PUMP_UNTIL(count(&B, KVT_EV_CTRL) == 1);
    const rec *r = find(&B, KVT_EV_CTRL);
    cr_assert_eq(r->e.len, 5);
    cr_assert_eq(r->e.owner, 2);
    cr_assert_eq(r->e.ep, B.ep);
    cr_assert(memcmp(r->bytes, "hello", 5) == 0);
    kvt_peer back;
    cr_assert_eq(kvt_connect(B.t, B.ep, &A.addr, &back), KV_OK);
    cr_assert_eq(back, r->e.peer, "same addr -> same peer id");
    cr_assert_eq(kvt_send_ctrl(B.t, B.ep, r->e.peer, "world!", 6), KV_OK);
    cr_assert_eq(kvt_send_ctrl(B.t, B.ep, r->e.peer, NULL, 0), KV_OK);
    PUMP_UNTIL(count(&A, KVT_EV_CTRL) == 2);
    const rec *q = find(&A, KVT_EV_CTRL);
    cr_assert_eq(q->e.peer, pb);
    cr_assert_eq(q->e.owner, 1);
    cr_assert_eq(q->e.len, 6);
    cr_assert(memcmp(q->bytes, "world!", 6) == 0);
    cr_assert_eq(A.r[A.n - 1].e.len, 0);
    cr_assert_eq(count(&A, KVT_EV_PEER_DOWN) + count(&B, KVT_EV_PEER_DOWN), 0);
    cr_assert_eq(kvt_send_ctrl(A.t, A.ep, pb, "x", KV_WIRE_MAX + 1), KV_EINVAL);
    cr_assert_eq(kvt_send_ctrl(A.t, A.ep, 17, "x", 1), KV_ENOENT);
}

Test(tcp, ctrl_ordered_1000) {
    kvt_peer pb;
    cr_assert_eq(kvt_connect(A.t, A.ep, &B.addr, &pb), KV_OK);
    for (uint32_t i = 0; i < 1000; i++) {
        uint8_t m[4 + 16];
        memcpy(m, &i, 4);
        memset(m + 4, (int)(i & 0xff), 16);
        cr_assert_eq(kvt_send_ctrl(A.t, A.ep, pb, m, 4 + (i % 17)), KV_OK);
    }
    PUMP_UNTIL(count(&B, KVT_EV_CTRL) == 1000);
    uint32_t want = 0;
    for (uint32_t i = 0; i < B.n; i++) {
        if (B.r[i].e.kind != KVT_EV_CTRL) continue;
        uint32_t got;
        memcpy(&got, B.r[i].bytes, 4);
        cr_assert_eq(got, want, "message %u arrived at position %u", got, want);
        cr_assert_eq(B.r[i].e.len, 4 + (want % 17));
        want++;
    }
}

#define BLK 4096u
static uint8_t src[64 * BLK];
static uint8_t dst_buf[BLK + 64 * BLK + BLK]; /* guard | region | guard */

/* B's grants to A (transport.h, "write capabilities"): B's regions are never
 * writable as such; A writes through a grant bound to B's peer id for A. */
static kvt_key GK;          /* the key of the last grant_a */
static kvt_region RD_REG;   /* B's region under the grant regions() made */

static kvt_desc grant_desc(kvt_region r, uint64_t off, uint64_t len, uint32_t *id) {
    kvt_peer pa;
    kvt_desc d;
    cr_assert_eq(kvt_connect(B.t, B.ep, &A.addr, &pa), KV_OK);
    cr_assert_eq(kvt_grant(B.t, r, B.ep, pa, off, len, id, &d), KV_OK);
    cr_assert_eq(d.region, *id);
    cr_assert_eq(d.len, off + len);
    cr_assert(d.key.w[0] | d.key.w[1]);
    return d;
}

static kvt_region grant_a(kvt_region r, uint64_t off, uint64_t len) {
    uint32_t id;
    kvt_desc d = grant_desc(r, off, len, &id);
    GK = d.key;
    return d.region;
}

static void regions(kvt_region *rs, kvt_region *rd) {
    for (uint32_t i = 0; i < sizeof src; i++) src[i] = (uint8_t)(i * 131u + (i >> 12));
    memset(dst_buf, 0xA5, sizeof dst_buf);
    cr_assert_eq(kvt_reg(A.t, src, sizeof src, KVT_MEM_HOST, rs), KV_OK);
    cr_assert_eq(kvt_reg(B.t, dst_buf + BLK, 64 * BLK, KVT_MEM_HOST, rd), KV_OK);
    kvt_desc d;
    cr_assert_eq(kvt_export_desc(B.t, *rd, &d), KV_OK);
    cr_assert_eq(d.len, 64 * BLK);
    cr_assert(!(d.key.w[0] | d.key.w[1]), "a plain region carries no key");
    RD_REG = *rd;
    *rd = grant_a(*rd, 0, 64 * BLK);
}

static bool guards_intact(void) {
    for (uint32_t i = 0; i < BLK; i++)
        if (dst_buf[i] != 0xA5 || dst_buf[BLK + 64 * BLK + i] != 0xA5) return false;
    return true;
}

Test(tcp, write_batch_lands_once) {
    kvt_region rs, rd;
    kvt_peer pb;
    regions(&rs, &rd);
    cr_assert_eq(kvt_connect(A.t, A.ep, &B.addr, &pb), KV_OK);
    kvt_write w[64];
    for (uint32_t i = 0; i < 64; i++) /* reversed order, varying lengths */
        w[i] = (kvt_write){.local = rs, .local_off = (uint64_t)i * BLK, .remote = rd, .key = GK,
                           .remote_off = (uint64_t)(63 - i) * BLK, .len = BLK - (i % 7) * 100};
    cr_assert_eq(kvt_submit(A.t, A.ep, pb, w, 64, 77, mono() + 5000000000ull), KV_OK);
    PUMP_UNTIL(count(&A, KVT_EV_DONE) == 1);
    pump_for_ms(20);
    cr_assert_eq(count(&A, KVT_EV_DONE), 1);
    const rec *d = find(&A, KVT_EV_DONE);
    cr_assert_eq(d->e.done.tag, 77);
    cr_assert_eq(d->e.done.status, KV_OK);
    cr_assert_eq(d->e.done.n_ok, 64);
    cr_assert_eq(d->e.done.n_failed, 0);
    cr_assert_eq(d->e.peer, pb);
    for (uint32_t i = 0; i < 64; i++) {
        const uint8_t *got = dst_buf + BLK + (63 - i) * BLK;
        cr_assert(memcmp(got, src + i * BLK, w[i].len) == 0, "entry %u differs", i);
        for (uint32_t k = w[i].len; k < BLK; k++) cr_assert_eq(got[k], 0xA5, "entry %u overran", i);
    }
    cr_assert(guards_intact());
    cr_assert_eq(count(&B, KVT_EV_DONE) + count(&B, KVT_EV_CTRL), 0, "no events on the target");
}

/* A second grant over B's memory revoked while A's WRITE through it is on
 * the wire: the entry fails on B, nothing lands, and the same memory stays
 * writable through the first grant. */
Test(tcp, revoked_grant_fails_writes_in_flight) {
    kvt_region rs, rd;
    kvt_peer pb;
    uint32_t g;
    regions(&rs, &rd);
    kvt_key k1 = GK;
    kvt_desc gd = grant_desc(RD_REG, 0, 64 * BLK, &g);
    cr_assert_eq(kvt_connect(A.t, A.ep, &B.addr, &pb), KV_OK);
    cr_assert_eq(kvt_send_ctrl(A.t, A.ep, pb, "hi", 2), KV_OK);
    PUMP_UNTIL(count(&B, KVT_EV_CTRL) == 1);
    B.polling = false;
    kvt_write w = {.local = rs, .local_off = 0, .remote = g, .remote_off = 0, .len = BLK, .key = gd.key};
    cr_assert_eq(kvt_submit(A.t, A.ep, pb, &w, 1, 1, 0), KV_OK);
    pump_for_ms(20); /* on the wire, B not reading */
    cr_assert_eq(kvt_revoke(B.t, g), KV_OK);
    cr_assert_eq(kvt_revoke(B.t, g), KV_ENOENT, "revoked once");
    B.polling = true;
    PUMP_UNTIL(count(&A, KVT_EV_DONE) == 1);
    const rec *d = find(&A, KVT_EV_DONE);
    cr_assert_eq(d->e.done.status, KV_ERANGE);
    cr_assert_eq(d->e.done.n_failed, 1);
    for (uint32_t k = 0; k < 64 * BLK; k++) cr_assert_eq(dst_buf[BLK + k], 0xA5, "byte %u written", k);
    cr_assert_eq(count(&A, KVT_EV_PEER_DOWN) + count(&B, KVT_EV_PEER_DOWN), 0, "a revoke fails no connection");
    w.remote = rd;
    w.key = k1;
    cr_assert_eq(kvt_submit(A.t, A.ep, pb, &w, 1, 2, 0), KV_OK);
    PUMP_UNTIL(count(&A, KVT_EV_DONE) == 2);
    cr_assert_eq(A.r[A.n - 1].e.done.status, KV_OK);
    cr_assert(memcmp(dst_buf + BLK, src, BLK) == 0);
    cr_assert(guards_intact());
}

Test(tcp, write_out_of_range_fails_entries) {
    kvt_region rs, rd;
    kvt_peer pb;
    regions(&rs, &rd);
    cr_assert_eq(kvt_connect(A.t, A.ep, &B.addr, &pb), KV_OK);
    kvt_write w[5] = {
        {.local = rs, .local_off = 0, .remote = rd, .key = GK, .remote_off = 0, .len = 100},                /* ok */
        {.local = rs, .local_off = 0, .remote = 999, .remote_off = 0, .len = 100},               /* no region */
        {.local = rs, .local_off = 0, .remote = rd, .key = GK, .remote_off = 64 * BLK - 10, .len = 100},    /* past end */
        {.local = rs, .local_off = 0, .remote = rd, .key = GK, .remote_off = UINT64_MAX - 10, .len = 100},  /* overflow */
        {.local = rs, .local_off = 0, .remote = rd, .key = GK, .remote_off = 64 * BLK, .len = 1},           /* at end */
    };
    cr_assert_eq(kvt_submit(A.t, A.ep, pb, w, 5, 5, 0), KV_OK);
    PUMP_UNTIL(count(&A, KVT_EV_DONE) == 1);
    pump_for_ms(20);
    cr_assert_eq(count(&A, KVT_EV_DONE), 1);
    const rec *d = find(&A, KVT_EV_DONE);
    cr_assert_eq(d->e.done.status, KV_ERANGE);
    cr_assert_eq(d->e.done.n_ok, 1);
    cr_assert_eq(d->e.done.n_failed, 4);
    cr_assert(memcmp(dst_buf + BLK, src, 100) == 0);
    for (uint32_t k = 100; k < 64 * BLK; k++) cr_assert_eq(dst_buf[BLK + k], 0xA5, "byte %u written", k);
    cr_assert(guards_intact());
}

Test(tcp, rejected_submit_never_completes) {
    kvt_region rs, rd;
    kvt_peer pb;
    regions(&rs, &rd);
    cr_assert_eq(kvt_connect(A.t, A.ep, &B.addr, &pb), KV_OK);
    kvt_write bad_off = {.local = rs, .local_off = sizeof src - 10, .remote = rd, .key = GK, .remote_off = 0, .len = 100};
    kvt_write bad_reg = {.local = 4242, .local_off = 0, .remote = rd, .key = GK, .remote_off = 0, .len = 1};
    kvt_write big = {.local = rs, .local_off = 0, .remote = rd, .key = GK, .remote_off = 0, .len = KVT_TCP_ENTRY_MAX + 1};
    cr_assert_eq(kvt_submit(A.t, A.ep, pb, &bad_off, 1, 1, 0), KV_ERANGE);
    cr_assert_eq(kvt_submit(A.t, A.ep, pb, &bad_reg, 1, 2, 0), KV_ERANGE);
    cr_assert_eq(kvt_submit(A.t, A.ep, pb, &big, 1, 3, 0), KV_EINVAL);
    cr_assert_eq(kvt_submit(A.t, A.ep, pb, &bad_reg, 0, 4, 0), KV_EINVAL);
    cr_assert_eq(kvt_submit(A.t, A.ep, 9, &bad_reg, 1, 5, 0), KV_ENOENT);
    kvt_write mixed[2] = {{.local = rs, .local_off = 0, .remote = rd, .key = GK, .remote_off = 0, .len = 8}, bad_off};
    cr_assert_eq(kvt_submit(A.t, A.ep, pb, mixed, 2, 6, 0), KV_ERANGE);
    cr_assert_eq(kvt_send_ctrl(A.t, A.ep, pb, "sync", 4), KV_OK);
    PUMP_UNTIL(count(&B, KVT_EV_CTRL) == 1);
    pump_for_ms(20);
    cr_assert_eq(count(&A, KVT_EV_DONE), 0);
    for (uint32_t k = 0; k < 64 * BLK; k++) cr_assert_eq(dst_buf[BLK + k], 0xA5);
}

Test(tcp, deadline_times_out_once) {
    kvt_region rs, rd;
    kvt_peer pb;
    regions(&rs, &rd);
    B.polling = false; /* the peer never polls: no ack ever comes */
    cr_assert_eq(kvt_connect(A.t, A.ep, &B.addr, &pb), KV_OK);
    kvt_write w = {.local = rs, .local_off = 0, .remote = rd, .key = GK, .remote_off = 0, .len = 64};
    uint64_t t0 = mono();
    cr_assert_eq(kvt_submit(A.t, A.ep, pb, &w, 1, 9, t0 + 50000000ull), KV_OK);
    PUMP_UNTIL(count(&A, KVT_EV_DONE) == 1);
    cr_assert_geq(mono() - t0, 50000000ull, "completed before its deadline");
    const rec *d = find(&A, KVT_EV_DONE);
    cr_assert_eq(d->e.done.status, KV_ETIMEDOUT);
    cr_assert_eq(d->e.done.tag, 9);
    cr_assert_eq(d->e.done.n_failed, 1);
    B.polling = true; /* the late ack must be ignored */
    pump_for_ms(30);
    cr_assert_eq(count(&A, KVT_EV_DONE), 1);
}

Test(tcp, peer_freed_mid_batch) {
    kvt_region rs, rd;
    kvt_peer pb;
    regions(&rs, &rd);
    cr_assert_eq(kvt_connect(A.t, A.ep, &B.addr, &pb), KV_OK);
    cr_assert_eq(kvt_send_ctrl(A.t, A.ep, pb, "hi", 2), KV_OK);
    PUMP_UNTIL(count(&B, KVT_EV_CTRL) == 1);
    B.polling = false;
    kvt_write w[64];
    for (uint32_t i = 0; i < 64; i++)
        w[i] = (kvt_write){.local = rs, .local_off = (uint64_t)i * BLK, .remote = rd, .key = GK, .remote_off = (uint64_t)i * BLK,
                           .len = BLK};
    cr_assert_eq(kvt_submit(A.t, A.ep, pb, w, 64, 11, 0), KV_OK);
    cr_assert_eq(kvt_submit(A.t, A.ep, pb, w, 8, 12, 0), KV_OK);
    pump_for_ms(5);
    kvt_tcp_free(B.t);
    B.t = NULL;
    PUMP_UNTIL(count(&A, KVT_EV_DONE) == 2 && count(&A, KVT_EV_PEER_DOWN) == 1);
    pump_for_ms(20);
    cr_assert_eq(count(&A, KVT_EV_DONE), 2);
    cr_assert_eq(count(&A, KVT_EV_PEER_DOWN), 1);
    for (uint32_t i = 0; i < A.n; i++) {
        if (A.r[i].e.kind == KVT_EV_PEER_DOWN) cr_assert_eq(A.r[i].e.peer, pb);
        if (A.r[i].e.kind != KVT_EV_DONE) continue;
        cr_assert_eq(A.r[i].e.done.status, KV_ECONNRESET);
        cr_assert_eq(A.r[i].e.done.n_ok, 0);
    }
}

/* ---- entries over KVT_TCP_INLINE_MAX: sent in place from the region -------------- */

#define BIG (64u * 1024u)
#define BIG_N 64u /* 4 MiB a batch: twice the send ring */

static uint8_t *big_src, *big_dst;

static void big_regions(kvt_region *rs, kvt_region *rd, uint32_t dst_blocks) {
    big_src = malloc((size_t)BIG_N * BIG);
    big_dst = malloc((size_t)(dst_blocks + 2u) * BIG);
    cr_assert(big_src && big_dst);
    for (uint32_t i = 0; i < BIG_N * BIG; i++) big_src[i] = (uint8_t)(i * 29u + (i >> 16));
    memset(big_dst, 0xA5, (size_t)(dst_blocks + 2u) * BIG);
    cr_assert_eq(kvt_reg(A.t, big_src, (uint64_t)BIG_N * BIG, KVT_MEM_HOST, rs), KV_OK);
    cr_assert_eq(kvt_reg(B.t, big_dst + BIG, (uint64_t)dst_blocks * BIG, KVT_MEM_HOST, rd), KV_OK);
    *rd = grant_a(*rd, 0, (uint64_t)dst_blocks * BIG);
}

Test(tcp, big_entries_land_in_place_batches_larger_than_the_ring) {
    kvt_region rs, rd;
    kvt_peer pb;
    big_regions(&rs, &rd, BIG_N);
    cr_assert_eq(kvt_connect(A.t, A.ep, &B.addr, &pb), KV_OK);
    kvt_write w[BIG_N];
    for (uint32_t i = 0; i < BIG_N; i++) /* reversed, lengths around the inline and direct-receive limits */
        w[i] = (kvt_write){.local = rs, .local_off = (uint64_t)i * BIG, .remote = rd, .key = GK,
                           .remote_off = (uint64_t)(BIG_N - 1 - i) * BIG, .len = BIG - (i % 9) * 7000u};
    cr_assert_eq(kvt_submit(A.t, A.ep, pb, w, BIG_N, 5, mono() + 5000000000ull), KV_OK);
    cr_assert_eq(kvt_submit(A.t, A.ep, pb, w, BIG_N, 6, mono() + 5000000000ull), KV_OK); /* 8 MiB queued */
    cr_assert_eq(kvt_send_ctrl(A.t, A.ep, pb, "after", 5), KV_OK); /* ordered behind the data */
    PUMP_UNTIL(count(&A, KVT_EV_DONE) == 2 && count(&B, KVT_EV_CTRL) == 1);
    pump_for_ms(20);
    cr_assert_eq(count(&A, KVT_EV_DONE), 2);
    for (uint32_t i = 0; i < A.n; i++)
        if (A.r[i].e.kind == KVT_EV_DONE) {
            cr_assert_eq(A.r[i].e.done.status, KV_OK);
            cr_assert_eq(A.r[i].e.done.n_ok, BIG_N);
        }
    for (uint32_t i = 0; i < BIG_N; i++) {
        const uint8_t *got = big_dst + BIG + (uint64_t)(BIG_N - 1 - i) * BIG;
        cr_assert(memcmp(got, big_src + (uint64_t)i * BIG, w[i].len) == 0, "entry %u differs", i);
        for (uint32_t k = w[i].len; k < BIG; k++) cr_assert_eq(got[k], 0xA5, "entry %u overran", i);
    }
    for (uint32_t k = 0; k < BIG; k++) {
        cr_assert_eq(big_dst[k], 0xA5);
        cr_assert_eq(big_dst[(uint64_t)(BIG_N + 1) * BIG + k], 0xA5);
    }
    free(big_src);
    free(big_dst);
}

/* B accepts but never reads: 64 MiB cannot all leave A's queue by the
 * deadline, so the batch completes KV_ETIMEDOUT only after its connection is
 * failed (no later send reads its source); the batch behind it on the same
 * connection completes KV_ECONNRESET and the peer goes down. */
Test(tcp, timeout_with_bytes_queued_fails_the_connection) {
    kvt_region rs, rd;
    kvt_peer pb;
    big_regions(&rs, &rd, BIG_N);
    cr_assert_eq(kvt_connect(A.t, A.ep, &B.addr, &pb), KV_OK);
    cr_assert_eq(kvt_send_ctrl(A.t, A.ep, pb, "hi", 2), KV_OK);
    PUMP_UNTIL(count(&B, KVT_EV_CTRL) == 1); /* accepted; from now on B does not read */
    B.polling = false;
    kvt_write w[BIG_N];
    for (uint32_t i = 0; i < BIG_N; i++)
        w[i] = (kvt_write){.local = rs, .local_off = (uint64_t)i * BIG, .remote = rd, .key = GK, .remote_off = (uint64_t)i * BIG,
                           .len = BIG};
    uint64_t t0 = mono();
    for (uint32_t k = 0; k < 16; k++) cr_assert_eq(kvt_submit(A.t, A.ep, pb, w, BIG_N, 100 + k, t0 + 100000000ull), KV_OK);
    cr_assert_eq(kvt_submit(A.t, A.ep, pb, w, 1, 200, 0), KV_OK); /* no deadline of its own */
    PUMP_UNTIL(count(&A, KVT_EV_DONE) == 17 && count(&A, KVT_EV_PEER_DOWN) == 1);
    cr_assert_geq(mono() - t0, 100000000ull, "completed before its deadline");
    uint32_t timed_out = 0, reset = 0;
    for (uint32_t i = 0; i < A.n; i++) {
        if (A.r[i].e.kind != KVT_EV_DONE) continue;
        timed_out += A.r[i].e.done.status == KV_ETIMEDOUT;
        reset += A.r[i].e.done.status == KV_ECONNRESET;
        if (A.r[i].e.done.tag == 200) cr_assert_eq(A.r[i].e.done.status, KV_ECONNRESET);
    }
    cr_assert_geq(timed_out, 1);
    cr_assert_eq(timed_out + reset, 17);
    free(big_src);
    free(big_dst);
}

/* Dereg of a region queued data still points into fails the connection
 * before the caller can reuse the memory (B never reads, so nothing else
 * could end those sends). */
Test(tcp, dereg_with_queued_sends_fails_the_connection) {
    kvt_region rs, rd;
    kvt_peer pb;
    big_regions(&rs, &rd, BIG_N);
    cr_assert_eq(kvt_connect(A.t, A.ep, &B.addr, &pb), KV_OK);
    cr_assert_eq(kvt_send_ctrl(A.t, A.ep, pb, "hi", 2), KV_OK);
    PUMP_UNTIL(count(&B, KVT_EV_CTRL) == 1);
    B.polling = false;
    kvt_write w[BIG_N];
    for (uint32_t i = 0; i < BIG_N; i++)
        w[i] = (kvt_write){.local = rs, .local_off = (uint64_t)i * BIG, .remote = rd, .key = GK, .remote_off = (uint64_t)i * BIG,
                           .len = BIG};
    for (uint32_t k = 0; k < 8; k++) cr_assert_eq(kvt_submit(A.t, A.ep, pb, w, BIG_N, k, 0), KV_OK);
    pump_for_ms(20);
    cr_assert_eq(count(&A, KVT_EV_DONE), 0);
    cr_assert_eq(kvt_dereg(A.t, rs), KV_OK);
    /* the memory is still mapped: only the dereg can have ended the sends */
    PUMP_UNTIL(count(&A, KVT_EV_DONE) == 8 && count(&A, KVT_EV_PEER_DOWN) == 1);
    for (uint32_t i = 0; i < A.n; i++)
        if (A.r[i].e.kind == KVT_EV_DONE) cr_assert_eq(A.r[i].e.done.status, KV_ECONNRESET);
    free(big_src); /* the caller may reuse it now; nothing reads it again (ASan build) */
    pump_for_ms(10);
    free(big_dst);
}

/* ---- a raw malicious client --------------------------------------------------- */

static int raw_connect(const kvt_addr *a) {
    char host[KV_ADDR_MAX];
    snprintf(host, sizeof host, "%s", a->s);
    char *colon = strrchr(host, ':');
    cr_assert(colon);
    *colon = '\0';
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(colon + 1))};
    inet_pton(AF_INET, host, &sa.sin_addr);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    cr_assert_geq(fd, 0);
    cr_assert_eq(connect(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL, 0) | O_NONBLOCK);
    return fd;
}

static size_t frame(uint8_t *out, uint32_t len, uint8_t type, const void *p, size_t plen) {
    for (int i = 0; i < 4; i++) out[i] = (uint8_t)(len >> (8 * i));
    out[4] = type;
    if (plen) memcpy(out + 5, p, plen);
    return 5 + plen;
}

static void raw_send(int fd, const void *b, size_t n) { cr_assert_eq(send(fd, b, n, MSG_NOSIGNAL), (ssize_t)n); }

/* Reads one WRITE_ACK frame (5 + KVT_TCP_ACK_LEN bytes) off a raw connection,
 * pumping B meanwhile: B answers a refused or out-of-range WRITE with an ack
 * of failed entries and keeps the connection. */
static void raw_ack(int fd, uint8_t *ack) {
    size_t got = 0, want = 5 + KVT_TCP_ACK_LEN;
    uint64_t t0 = mono();
    while (got < want) {
        ssize_t r = recv(fd, ack + got, want - got, 0);
        if (r > 0) got += (size_t)r;
        else cr_assert(r < 0 && errno == EAGAIN, "connection closed on a failed WRITE");
        cr_assert_lt(mono() - t0, WAIT_NS, "no ack");
        pump();
    }
    cr_assert_eq(ack[4], KVT_TCP_WRITE_ACK);
}

static void raw_hello(int fd, const char *addr) {
    uint8_t b[64];
    size_t n = frame(b, (uint32_t)(1 + strlen(addr)), KVT_TCP_HELLO, addr, strlen(addr));
    raw_send(fd, b, n);
}

/* Pumps until the transport closed fd (EOF or reset); fails after 2 s. */
static void expect_closed(int fd) {
    uint64_t t0 = mono();
    for (;;) {
        uint8_t b[256];
        ssize_t n = recv(fd, b, sizeof b, 0);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) break;
        cr_assert_lt(mono() - t0, WAIT_NS, "transport did not disconnect the client");
        pump();
    }
    close(fd);
}

static void put_le(uint8_t *p, uint64_t v, int n) {
    for (int i = 0; i < n; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static size_t write_frame_k(uint8_t *b, uint32_t region, const kvt_key *k, uint64_t off, uint32_t dlen,
                            uint32_t len_field) {
    uint8_t h[KVT_TCP_WRITE_HDR];
    put_le(h, 1234, 8);
    put_le(h + 8, 0, 4);
    put_le(h + 12, 1, 4);
    put_le(h + 16, region, 4);
    put_le(h + 20, off, 8);
    put_le(h + 28, dlen, 4);
    put_le(h + 32, k->w[0], 8);
    put_le(h + 40, k->w[1], 8);
    size_t n = frame(b, len_field, KVT_TCP_WRITE, h, sizeof h);
    memset(b + n, 0xEE, dlen);
    return n + dlen;
}

static size_t write_frame(uint8_t *b, uint32_t region, uint64_t off, uint32_t dlen, uint32_t len_field) {
    return write_frame_k(b, region, &GK, off, dlen, len_field);
}

Test(tcp, malicious_client_is_disconnected) {
    kvt_region rs, rd;
    regions(&rs, &rd);
    A.polling = false;
    static uint8_t b[512];
    /* 1: a truncated frame, then EOF */
    int fd = raw_connect(&B.addr);
    raw_hello(fd, "127.0.0.1:1");
    size_t n = frame(b, 100, KVT_TCP_CTRL, "0123456789", 10);
    raw_send(fd, b, n);
    pump_for_ms(10);
    shutdown(fd, SHUT_WR);
    expect_closed(fd);
    /* 2: an oversized length */
    fd = raw_connect(&B.addr);
    raw_hello(fd, "127.0.0.1:2");
    raw_send(fd, b, frame(b, 0xFFFFFFF0u, KVT_TCP_CTRL, NULL, 0));
    expect_closed(fd);
    /* 3: a WRITE before HELLO */
    fd = raw_connect(&B.addr);
    raw_send(fd, b, write_frame(b, rd, 0, 16, 1 + KVT_TCP_WRITE_HDR + 16));
    expect_closed(fd);
    /* 3b: a CTRL before HELLO: no event, disconnected */
    fd = raw_connect(&B.addr);
    raw_send(fd, b, frame(b, 3, KVT_TCP_CTRL, "zz", 2));
    expect_closed(fd);
    cr_assert_eq(count(&B, KVT_EV_CTRL), 0, "ctrl accepted before HELLO");
    /* 4: a WRITE whose length field disagrees with its data length */
    fd = raw_connect(&B.addr);
    raw_hello(fd, "127.0.0.1:4");
    raw_send(fd, b, write_frame(b, rd, 0, 16, 1 + KVT_TCP_WRITE_HDR + 8));
    expect_closed(fd);
    /* 5: WRITEs out of range (offset past the end, unknown region): failed
     * entries in the ack, no byte written */
    fd = raw_connect(&B.addr);
    raw_hello(fd, "127.0.0.1:5");
    raw_send(fd, b, write_frame(b, rd, 64 * BLK - 8, 16, 1 + KVT_TCP_WRITE_HDR + 16));
    uint8_t ack[5 + KVT_TCP_ACK_LEN];
    raw_ack(fd, ack);
    cr_assert_eq(ack[5], 1234 & 0xff);
    cr_assert_eq(ack[5 + 8], 0, "n_ok");
    cr_assert_eq(ack[5 + 12], 1, "n_failed");
    /* then garbage type: disconnected */
    raw_send(fd, b, frame(b, 3, 99, "ab", 2));
    expect_closed(fd);
    for (uint32_t k = 0; k < 64 * BLK; k++) cr_assert_eq(dst_buf[BLK + k], 0xA5, "byte %u written", k);
    cr_assert(guards_intact());
    /* the transport keeps serving an honest peer */
    A.polling = true;
    kvt_peer pb;
    cr_assert_eq(kvt_connect(A.t, A.ep, &B.addr, &pb), KV_OK);
    kvt_write w = {.local = rs, .local_off = 0, .remote = rd, .key = GK, .remote_off = 0, .len = 512};
    cr_assert_eq(kvt_submit(A.t, A.ep, pb, &w, 1, 3, 0), KV_OK);
    cr_assert_eq(kvt_send_ctrl(A.t, A.ep, pb, "ok", 2), KV_OK);
    PUMP_UNTIL(count(&A, KVT_EV_DONE) == 1 && count(&B, KVT_EV_CTRL) == 1);
    cr_assert_eq(find(&A, KVT_EV_DONE)->e.done.status, KV_OK);
    cr_assert(memcmp(dst_buf + BLK, src, 512) == 0);
    cr_assert_eq(find(&B, KVT_EV_CTRL)->e.len, 2);
}

Test(tcp, connect_to_closed_port) {
    kvt_region rs, rd;
    regions(&rs, &rd);
    int lf = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET};
    inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
    socklen_t sl = sizeof sa;
    cr_assert_eq(bind(lf, (struct sockaddr *)&sa, sizeof sa), 0);
    cr_assert_eq(getsockname(lf, (struct sockaddr *)&sa, &sl), 0);
    close(lf); /* nobody listens there now */
    kvt_addr dead;
    snprintf(dead.s, sizeof dead.s, "127.0.0.1:%u", (unsigned)ntohs(sa.sin_port));
    kvt_peer p;
    cr_assert_eq(kvt_connect(A.t, A.ep, &dead, &p), KV_OK);
    kvt_write w = {.local = rs, .local_off = 0, .remote = 1, .remote_off = 0, .len = 32};
    cr_assert_eq(kvt_submit(A.t, A.ep, p, &w, 1, 21, 0), KV_OK);
    cr_assert_eq(kvt_submit(A.t, A.ep, p, &w, 1, 22, 0), KV_OK);
    PUMP_UNTIL(count(&A, KVT_EV_DONE) == 2 && count(&A, KVT_EV_PEER_DOWN) == 1);
    pump_for_ms(20);
    cr_assert_eq(count(&A, KVT_EV_DONE), 2);
    cr_assert_eq(count(&A, KVT_EV_PEER_DOWN), 1);
    for (uint32_t i = 0; i < A.n; i++)
        if (A.r[i].e.kind == KVT_EV_DONE) cr_assert_eq(A.r[i].e.done.status, KV_ECONNRESET);
    kvt_addr bad = {.s = "not-an-addr"};
    cr_assert_eq(kvt_connect(A.t, A.ep, &bad, &p), KV_EINVAL);
}

/* ---- the cluster secret: the challenge-response (tcp.c, top) ------------------ */

static kv_auth_key key_of(uint8_t fill) {
    kv_auth_key k = {.set = true};
    memset(k.k, fill, sizeof k.k);
    return k;
}

static void auth_setup(void) {
    setup();
    te.quiet = 1;
    kv_auth_key k = key_of(7);
    cr_assert_eq(kvt_tcp_set_secret(A.t, &k), KV_OK);
    cr_assert_eq(kvt_tcp_set_secret(B.t, &k), KV_OK);
}

static kvt_tcp_stats sa, sb; /* A's and B's, as refused_for last read them */

static kvt_tcp_stats stats(const side *s) {
    kvt_tcp_stats st;
    kvt_tcp_stats_get(s->t, &st);
    return st;
}

TestSuite(tcp_auth, .init = auth_setup, .fini = teardown, .timeout = 20);

Test(tcp_auth, one_secret_both_sides_carries_ctrl_writes_and_replies) {
    kvt_region rs, rd;
    regions(&rs, &rd);
    kvt_peer pb;
    cr_assert_eq(kvt_connect(A.t, A.ep, &B.addr, &pb), KV_OK);
    /* queued before the handshake even started: they wait behind it */
    kvt_write w[4];
    for (uint32_t i = 0; i < 4; i++)
        w[i] = (kvt_write){.local = rs, .local_off = i * BLK, .remote = rd, .key = GK, .remote_off = i * BLK, .len = BLK};
    cr_assert_eq(kvt_submit(A.t, A.ep, pb, w, 4, 9, 0), KV_OK);
    cr_assert_eq(kvt_send_ctrl(A.t, A.ep, pb, "meta", 4), KV_OK);
    PUMP_UNTIL(count(&A, KVT_EV_DONE) == 1 && count(&B, KVT_EV_CTRL) == 1);
    cr_assert_eq(find(&A, KVT_EV_DONE)->e.done.status, KV_OK);
    cr_assert(memcmp(dst_buf + BLK, src, 4 * BLK) == 0);
    const rec *r = find(&B, KVT_EV_CTRL);
    cr_assert(memcmp(r->bytes, "meta", 4) == 0);
    cr_assert_eq(kvt_send_ctrl(B.t, B.ep, r->e.peer, "resp", 4), KV_OK); /* back on the same connection */
    PUMP_UNTIL(count(&A, KVT_EV_CTRL) == 1);
    /* two links, each proven once on both ends: A's, and the one B dialed
     * for its peer id of A (grant_desc's kvt_connect) */
    cr_assert_eq(stats(&A).auth_ok, 2);
    cr_assert_eq(stats(&B).auth_ok, 2);
    cr_assert_eq(stats(&A).auth_failed + stats(&B).auth_failed, 0);
    cr_assert(guards_intact());
}

Test(tcp_auth, another_secret_is_refused_with_a_log_line_and_nothing_lands) {
    kvt_region rs, rd;
    kvt_tcp_free(A.t);
    open_side(&A, 1);
    kv_auth_key other = key_of(8);
    cr_assert_eq(kvt_tcp_set_secret(A.t, &other), KV_OK);
    regions(&rs, &rd);
    kvt_peer pb;
    cr_assert_eq(kvt_connect(A.t, A.ep, &B.addr, &pb), KV_OK);
    kvt_write w = {.local = rs, .local_off = 0, .remote = rd, .key = GK, .remote_off = 0, .len = BLK};
    cr_assert_eq(kvt_submit(A.t, A.ep, pb, &w, 1, 5, 0), KV_OK);
    cr_assert_eq(kvt_send_ctrl(A.t, A.ep, pb, "meta", 4), KV_OK);
    PUMP_UNTIL(count(&A, KVT_EV_DONE) == 1 && count(&A, KVT_EV_PEER_DOWN) == 1);
    cr_assert_eq(find(&A, KVT_EV_DONE)->e.done.status, KV_ECONNRESET);
    cr_assert_eq(stats(&A).auth_failed, 1, "the dialer checks the acceptor's CHAL first");
    cr_assert(strstr(te.last_warn, "does not hold the cluster secret"), "%s", te.last_warn);
    pump_for_ms(20);
    cr_assert_eq(count(&B, KVT_EV_CTRL), 0);
    for (uint32_t k = 0; k < 64 * BLK; k++) cr_assert_eq(dst_buf[BLK + k], 0xA5, "byte %u written", k);
}

/* from dials to and sends a ctrl message; the refusal is counted on `counted`
 * and its log line names why; nothing reaches to's caller. */
static void refused_for(side *from, side *to, const uint64_t *counted, const char *why) {
    kvt_peer p;
    cr_assert_eq(kvt_connect(from->t, from->ep, &to->addr, &p), KV_OK);
    cr_assert_eq(kvt_send_ctrl(from->t, from->ep, p, "meta", 4), KV_OK);
    PUMP_UNTIL((kvt_tcp_stats_get(A.t, &sa), kvt_tcp_stats_get(B.t, &sb), *counted == 1));
    cr_assert(strstr(te.last_warn, why), "%s", te.last_warn);
    cr_assert_eq(count(to, KVT_EV_CTRL), 0);
}

Test(tcp_auth, a_secret_on_one_side_only_is_named_in_the_log) {
    kvt_tcp_free(A.t);
    open_side(&A, 1); /* no secret */
    refused_for(&A, &B, &sb.auth_failed, "HELLO without a nonce: the peer has no cluster secret");
    /* and the other way round: a node without a secret hears of one */
    refused_for(&B, &A, &sa.protocol_errors, "the peer has a cluster secret and this node has none");
}

/* A raw client that knows the protocol but not the secret. */
static void raw_hello_nonce(int fd, const char *addr) {
    uint8_t p[KV_AUTH_NONCE_BYTES + 32], b[128];
    memset(p, 0x11, KV_AUTH_NONCE_BYTES);
    size_t al = strlen(addr);
    memcpy(p + KV_AUTH_NONCE_BYTES, addr, al);
    raw_send(fd, b, frame(b, (uint32_t)(1 + KV_AUTH_NONCE_BYTES + al), KVT_TCP_HELLO, p, KV_AUTH_NONCE_BYTES + al));
}

Test(tcp_auth, a_client_without_the_secret_reaches_no_region_and_no_caller) {
    kvt_region rs, rd;
    regions(&rs, &rd);
    A.polling = false;
    static uint8_t b[512];
    uint8_t zero_mac[KV_AUTH_MAC_BYTES] = {0};
    /* 1: a WRITE right after the HELLO */
    int fd = raw_connect(&B.addr);
    raw_hello_nonce(fd, "127.0.0.1:1");
    raw_send(fd, b, write_frame(b, rd, 0, 16, 1 + KVT_TCP_WRITE_HDR + 16));
    expect_closed(fd);
    /* 2: a CTRL right after the HELLO */
    fd = raw_connect(&B.addr);
    raw_hello_nonce(fd, "127.0.0.1:2");
    raw_send(fd, b, frame(b, 3, KVT_TCP_CTRL, "zz", 2));
    expect_closed(fd);
    /* 3: a guessed PROOF */
    fd = raw_connect(&B.addr);
    raw_hello_nonce(fd, "127.0.0.1:3");
    raw_send(fd, b, frame(b, 1 + KV_AUTH_MAC_BYTES, KVT_TCP_PROOF, zero_mac, sizeof zero_mac));
    expect_closed(fd);
    cr_assert(strstr(te.last_warn, "PROOF does not check out") && strstr(te.last_warn, "127.0.0.1:"), "%s",
              te.last_warn);
    /* 4: a PROOF before any HELLO; 5: the old HELLO (no nonce) */
    fd = raw_connect(&B.addr);
    raw_send(fd, b, frame(b, 1 + KV_AUTH_MAC_BYTES, KVT_TCP_PROOF, zero_mac, sizeof zero_mac));
    expect_closed(fd);
    fd = raw_connect(&B.addr);
    raw_hello(fd, "127.0.0.1:5");
    expect_closed(fd);
    cr_assert_eq(stats(&B).auth_failed, 5);
    cr_assert_eq(stats(&B).auth_ok, 0);
    cr_assert_eq(count(&B, KVT_EV_CTRL), 0);
    for (uint32_t k = 0; k < 64 * BLK; k++) cr_assert_eq(dst_buf[BLK + k], 0xA5, "byte %u written", k);
    /* an honest peer still gets through */
    A.polling = true;
    kvt_peer pb;
    cr_assert_eq(kvt_connect(A.t, A.ep, &B.addr, &pb), KV_OK);
    cr_assert_eq(kvt_send_ctrl(A.t, A.ep, pb, "ok", 2), KV_OK);
    PUMP_UNTIL(count(&B, KVT_EV_CTRL) == 1);
}

Test(tcp_auth, a_silent_or_trickling_client_is_closed_at_the_hello_deadline) {
    kvt_tcp_set_hello_deadline_ms(B.t, 100);
    A.polling = false;
    int silent = raw_connect(&B.addr);
    int trickle = raw_connect(&B.addr);
    uint8_t b[64];
    size_t n = frame(b, (uint32_t)(1 + KV_AUTH_NONCE_BYTES + 11), KVT_TCP_HELLO, NULL, 0);
    uint64_t t0 = mono();
    for (size_t i = 0; i < n; i++) { /* one byte per 20 ms: never a whole HELLO in time */
        raw_send(trickle, b + i, 1);
        pump_for_ms(20);
        if (mono() - t0 > 150000000ull) break;
    }
    expect_closed(silent);
    expect_closed(trickle);
    cr_assert_eq(stats(&B).hello_timeouts, 2);
    cr_assert(strstr(te.last_warn, "within the HELLO deadline"), "%s", te.last_warn);
}

Test(tcp, without_a_secret_a_silent_client_is_closed_at_the_hello_deadline_too) {
    te.quiet = 1;
    kvt_tcp_set_hello_deadline_ms(B.t, 50);
    int fd = raw_connect(&B.addr);
    expect_closed(fd);
    cr_assert_eq(stats(&B).hello_timeouts, 1);
    cr_assert(strstr(te.last_warn, "no HELLO within the HELLO deadline"), "%s", te.last_warn);
    kvt_peer pb; /* honest peers connect as before */
    cr_assert_eq(kvt_connect(A.t, A.ep, &B.addr, &pb), KV_OK);
    cr_assert_eq(kvt_send_ctrl(A.t, A.ep, pb, "ok", 2), KV_OK);
    PUMP_UNTIL(count(&B, KVT_EV_CTRL) == 1);
}

Test(tcp_auth, a_flood_of_silent_clients_cannot_keep_an_honest_peer_out) {
    int fds[40];
    kvt_tcp_set_hello_deadline_ms(B.t, 300);
    A.polling = false;
    for (uint32_t i = 0; i < 40; i++) { /* all from 127.0.0.1, as the honest peer */
        fds[i] = raw_connect(&B.addr);
        pump();
    }
    pump_for_ms(20);
    kvt_tcp_stats st = stats(&B);
    cr_assert_eq(st.evicted, 32, "8 may wait in their HELLO per address: %llu evicted", (unsigned long long)st.evicted);
    cr_assert(strstr(te.last_warn, "evicted: too many connections from its address"), "%s", te.last_warn);
    A.polling = true;
    kvt_peer pb;
    cr_assert_eq(kvt_connect(A.t, A.ep, &B.addr, &pb), KV_OK);
    cr_assert_eq(kvt_send_ctrl(A.t, A.ep, pb, "ok", 2), KV_OK);
    PUMP_UNTIL(count(&B, KVT_EV_CTRL) == 1);
    cr_assert_eq(stats(&B).auth_ok, 1);
    for (uint32_t i = 0; i < 40; i++) expect_closed(fds[i]); /* evicted now, or at the deadline */
}

/* ---- write grants (transport.h, "write capabilities") ------------------------------ */

/* Reads one WRITE_ACK off a raw connection (see raw_ack); returns n_failed. */
static uint32_t raw_ack_failed(int fd) {
    uint8_t ack[5 + KVT_TCP_ACK_LEN];
    raw_ack(fd, ack);
    return (uint32_t)ack[5 + 12];
}

/* A peer writes with no key, a wrong key, a revoked grant, another peer's
 * grant, and outside its window: each entry is refused on B (failed in the
 * ack, the connection stays), counted by reason, and B's memory is
 * untouched; an honest WRITE through the live grant still lands. The raw
 * writer is the deliberately broken sender: it builds frames by hand. */
Test(tcp, write_grants_refuse_no_key_wrong_key_revoked_other_peer_outside) {
    kvt_region rs, rd;
    regions(&rs, &rd); /* grant rd: all of B's region, to A */
    uint32_t win, dead;
    kvt_desc wd = grant_desc(RD_REG, 4 * BLK, 2 * BLK, &win); /* a window of blocks 4..5, to A */
    kvt_desc dd = grant_desc(RD_REG, 0, 64 * BLK, &dead);
    cr_assert_eq(kvt_revoke(B.t, dead), KV_OK);
    cr_assert(memcmp(&wd.key, &dd.key, sizeof wd.key) != 0, "keys differ");
    A.polling = false;
    static uint8_t b[512];
    const kvt_key none = {{0, 0}}, wrong = {{GK.w[0] ^ 1u, GK.w[1]}};
    /* a raw peer that claims another address: rd was granted to A only */
    int fd = raw_connect(&B.addr);
    raw_hello(fd, "127.0.0.1:9");
    struct { uint32_t grant; const kvt_key *key; uint64_t off; uint32_t len; } bad[] = {
        {rd, &none, 0, 16},    /* no key */
        {rd, &wrong, 0, 16},   /* wrong key */
        {dead, &dd.key, 0, 16},/* revoked */
        {rd, &GK, 0, 16},      /* the right key, from a peer it was not granted to */
        {999, &GK, 0, 16},     /* never granted */
    };
    for (uint32_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        raw_send(fd, b, write_frame_k(b, bad[i].grant, bad[i].key, bad[i].off, bad[i].len, 1 + KVT_TCP_WRITE_HDR + bad[i].len));
        cr_assert_eq(raw_ack_failed(fd), 1, "bad write %u accepted", i);
    }
    close(fd);
    kvt_tcp_stats st;
    kvt_tcp_stats_get(B.t, &st);
    cr_assert_eq(st.write_refused, 5);
    cr_assert_eq(st.write_bad_key, 2);
    cr_assert_eq(st.write_no_grant, 2);
    cr_assert_eq(st.write_wrong_peer, 1);
    /* A itself: outside its window, and a wrong key: refused, counted */
    A.polling = true;
    kvt_peer pb;
    cr_assert_eq(kvt_connect(A.t, A.ep, &B.addr, &pb), KV_OK);
    kvt_write w[4] = {
        {.local = rs, .local_off = 0, .remote = win, .remote_off = 3 * BLK, .len = BLK, .key = wd.key},      /* before */
        {.local = rs, .local_off = 0, .remote = win, .remote_off = 5 * BLK + 1, .len = BLK, .key = wd.key},  /* past */
        {.local = rs, .local_off = 0, .remote = win, .remote_off = 4 * BLK, .len = BLK, .key = GK},          /* another grant's key */
        {.local = rs, .local_off = 0, .remote = dead, .remote_off = 0, .len = BLK, .key = dd.key},           /* revoked */
    };
    cr_assert_eq(kvt_submit(A.t, A.ep, pb, w, 4, 1, 0), KV_OK);
    PUMP_UNTIL(count(&A, KVT_EV_DONE) == 1);
    const rec *d = find(&A, KVT_EV_DONE);
    cr_assert_eq(d->e.done.status, KV_ERANGE);
    cr_assert_eq(d->e.done.n_failed, 4);
    kvt_tcp_stats_get(B.t, &st);
    cr_assert_eq(st.write_refused, 9);
    cr_assert_eq(st.write_outside, 2);
    cr_assert_eq(st.write_bad_key, 3);
    cr_assert_eq(st.write_no_grant, 3);
    for (uint32_t k = 0; k < 64 * BLK; k++) cr_assert_eq(dst_buf[BLK + k], 0xA5, "byte %u written", k);
    cr_assert(guards_intact());
    cr_assert_eq(count(&A, KVT_EV_PEER_DOWN), 0, "a refusal fails no connection");
    /* honest: inside the window with its key */
    kvt_write ok = {.local = rs, .local_off = 0, .remote = win, .remote_off = 4 * BLK, .len = 2 * BLK, .key = wd.key};
    cr_assert_eq(kvt_submit(A.t, A.ep, pb, &ok, 1, 2, 0), KV_OK);
    PUMP_UNTIL(count(&A, KVT_EV_DONE) == 2);
    cr_assert_eq(A.r[A.n - 1].e.done.status, KV_OK);
    cr_assert(memcmp(dst_buf + BLK + 4 * BLK, src, 2 * BLK) == 0);
    for (uint32_t k = 0; k < 4 * BLK; k++) cr_assert_eq(dst_buf[BLK + k], 0xA5, "byte %u written", k);
    /* a grant is refused for an unknown region, an empty or out-of-range window */
    uint32_t id;
    kvt_desc x;
    cr_assert_eq(kvt_grant(B.t, 4242, B.ep, 0, 0, BLK, &id, &x), KV_ENOENT);
    cr_assert_eq(kvt_grant(B.t, RD_REG, B.ep, 0, 0, 0, &id, &x), KV_ERANGE);
    cr_assert_eq(kvt_grant(B.t, RD_REG, B.ep, 0, 63 * BLK, 2 * BLK, &id, &x), KV_ERANGE);
}
