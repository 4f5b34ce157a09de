/* core/wire.c — the control-message codec (kvconn/wire.h): a bounded,
 * allocation-free encoder and decoder for the D <-> P side-channel messages
 * and the bootstrap messages.
 *
 * Wire format (every integer little endian, fixed width; fields are written
 * one by one, never a struct image, so no padding or host order leaks out):
 *
 *   header   'K' 'V' u8 version (KV_WIRE_VERSION) u8 type  u32 payload_len
 *   payload  exactly payload_len bytes, as below for each type
 *
 *   str      u16 n, then n bytes; no NUL on the wire. Decode requires
 *            n < sizeof(destination) and no NUL among the bytes, and
 *            NUL-terminates.
 *   table    u8 n_groups (<= KV_GROUPS_MAX), then per group:
 *            u16 n (<= KV_REQ_BLOCKS_MAX), n x u32 block id
 *
 *   XFER_META   u32 d_engine, u32 d_tp_size, u32 d_tp_rank, u32 batch,
 *               str d_addr,
 *               u8 n_groups (<= KV_GROUPS_MAX),
 *               n_groups x {u32 region, u64 len, u64 key[2]} (region and key:
 *               D's write grant for this P rank, transport.h; version 2),
 *               u32 block_bytes,
 *               u16 n_reqs (<= KV_PULL_REQS_MAX),
 *               n_reqs x {u32 d_req, u64 transfer_id[2] (hi, lo: version 3),
 *                            table blocks}
 *   XFER_RESP   u32 status (0..2), u32 batch, u32 p_tp_rank,
 *               u16 n_ok (<= KV_PULL_REQS_MAX), n_ok x u32,
 *               u16 n_err (<= KV_PULL_REQS_MAX), n_err x u32,
 *               str err_msg
 *   BOOT_*      u32 engine, u32 tp_size, u32 tp_rank, u32 found,
 *               u8 n_addr, n_addr x str addr, where n_addr is fixed by the
 *               type: BOOT_REG 1, BOOT_QUERY 0, BOOT_REPLY tp_size
 *               (tp_size <= KV_TP_MAX).
 *   STORE_EXIST       u32 seq, u16 n (<= KV_STORE_KEYS_MAX), n x key
 *   STORE_EXIST_REPLY u32 seq, i32 status, u16 n (<= KV_STORE_KEYS_MAX), n x u8 flag (0/1)
 *   STORE_PUT         u32 seq, u32 block_bytes, u16 n (<= KV_STORE_BATCH_MAX),
 *                     n x key, n x block_bytes bytes
 *   STORE_PUT_REPLY   u32 seq, i32 status
 *   STORE_GET         u32 seq, u32 block_bytes, u16 n (<= KV_STORE_BATCH_MAX), n x key
 *   STORE_GET_REPLY   u32 seq, i32 status, u32 block_bytes, u16 n, n x u8 flag,
 *                     then block_bytes bytes per found key
 *   key               u64 hash, u32 heads
 *   (block_bytes is 1..KV_STORE_BLOCK_BYTES_MAX wherever it is carried)
 *
 * Decode rejects, with KV_EPROTO: a short header, wrong magic, unknown type,
 * payload_len != len - 8, any count over its bound, any read past the end,
 * and trailing bytes; a version other than KV_WIRE_VERSION gives KV_EVERSION.
 * On error the output is zeroed. On success every scalar not carried on the
 * wire is zero and array entries past their counts are never read, so the
 * encoding is canonical: encode(decode(b)) == b for every accepted b. (A
 * message is ~40 KiB at capacity; decode touches only what it carries.) Encode checks the same bounds (KV_EINVAL) and the
 * buffer capacity (KV_ENOMEM); bounds win over capacity.
 *
 * The encode path's invariant (kv_wire_encoded_ok, which the core asserts
 * after encoding each of its own messages; core/assert.h):
 *   C1 the frame starts 'K' 'V', KV_WIRE_VERSION, the message's type;
 *   C2 its length field is the payload's length, len - KV_WIRE_HDR_BYTES;
 *   C3 (checked builds) it decodes, and the decoded message carries what
 *      the encoded one did: every scalar and count on the wire, every entry
 *      up to its count, the strings. So our own encoder never sends a peer
 *      a frame that peer's decoder refuses, or one that says something else.
 * This file has no env (it is pure, and fuzz_wire compiles its own copy):
 * it states the predicate, its callers assert it. */
#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#include "kvconn/wire.h"

/* ---- writer: counts every byte, stores only those that fit ---- */

typedef struct wcur {
    uint8_t *p;
    size_t cap;
    size_t n; /* bytes wanted so far; may exceed cap */
} wcur;

static void w_le(wcur *w, uint64_t v, unsigned bytes) {
    if (w->n <= w->cap && w->cap - w->n >= bytes) { /* the usual case: one bound check a field */
        for (unsigned i = 0; i < bytes; i++) w->p[w->n + i] = (uint8_t)(v >> (8u * i));
    } else {
        for (unsigned i = 0; i < bytes; i++)
            if (w->n + i < w->cap) w->p[w->n + i] = (uint8_t)(v >> (8u * i));
    }
    w->n += bytes;
}

static void w_u8(wcur *w, uint32_t v) { w_le(w, v, 1); }
static void w_u16(wcur *w, uint32_t v) { w_le(w, v, 2); }
static void w_u32(wcur *w, uint32_t v) { w_le(w, v, 4); }
static void w_u64(wcur *w, uint64_t v) { w_le(w, v, 8); }

static void w_bytes(wcur *w, const uint8_t *p, size_t n) {
    if (w->n <= w->cap && w->cap - w->n >= n) { /* fits: one copy */
        if (n) memcpy(w->p + w->n, p, n);
        w->n += n;
        return;
    }
    for (size_t i = 0; i < n; i++) w_u8(w, p[i]); /* stores the bytes that fit, counts all */
}

static kv_status w_str(wcur *w, const char *s, size_t size) {
    const char *z = memchr(s, '\0', size);
    if (!z) return KV_EINVAL;
    size_t n = (size_t)(z - s);
    w_u16(w, (uint32_t)n);
    w_bytes(w, (const uint8_t *)s, n);
    return KV_OK;
}

static kv_status w_table(wcur *w, const kv_block_table *t) {
    if (t->n_groups > KV_GROUPS_MAX) return KV_EINVAL;
    w_u8(w, t->n_groups);
    for (uint32_t g = 0; g < t->n_groups; g++) {
        if (t->n[g] > KV_REQ_BLOCKS_MAX) return KV_EINVAL;
        w_u16(w, t->n[g]);
        for (uint32_t i = 0; i < t->n[g]; i++) w_u32(w, t->id[g][i]);
    }
    return KV_OK;
}

static kv_status w_u32_list(wcur *w, const uint32_t *v, uint32_t n, uint32_t max) {
    if (n > max) return KV_EINVAL;
    w_u16(w, n);
    for (uint32_t i = 0; i < n; i++) w_u32(w, v[i]);
    return KV_OK;
}

static kv_status w_meta(wcur *w, const kv_wire_xfer_meta *m) {
    w_u32(w, m->d_engine);
    w_u32(w, m->d_tp_size);
    w_u32(w, m->d_tp_rank);
    w_u32(w, m->batch);
    if (w_str(w, m->d_addr.s, sizeof m->d_addr.s) != KV_OK) return KV_EINVAL;
    if (m->n_groups > KV_GROUPS_MAX || m->n_reqs > KV_PULL_REQS_MAX) return KV_EINVAL;
    w_u8(w, m->n_groups);
    for (uint32_t g = 0; g < m->n_groups; g++) {
        w_u32(w, m->region[g].region);
        w_u64(w, m->region[g].len);
        w_u64(w, m->region[g].key.w[0]);
        w_u64(w, m->region[g].key.w[1]);
    }
    w_u32(w, m->block_bytes);
    w_u16(w, m->n_reqs);
    for (uint32_t i = 0; i < m->n_reqs; i++) {
        w_u32(w, m->req[i].d_req);
        w_u64(w, m->req[i].transfer_id.hi);
        w_u64(w, m->req[i].transfer_id.lo);
        if (w_table(w, &m->req[i].blocks) != KV_OK) return KV_EINVAL;
    }
    return KV_OK;
}

static kv_status w_resp(wcur *w, const kv_wire_xfer_resp *r) {
    if (r->status > KV_XFER_ERROR) return KV_EINVAL;
    w_u32(w, r->status);
    w_u32(w, r->batch);
    w_u32(w, r->p_tp_rank);
    if (w_u32_list(w, r->ok, r->n_ok, KV_PULL_REQS_MAX) != KV_OK) return KV_EINVAL;
    if (w_u32_list(w, r->err, r->n_err, KV_PULL_REQS_MAX) != KV_OK) return KV_EINVAL;
    return w_str(w, r->err_msg, sizeof r->err_msg);
}

/* Number of addrs a BOOT_* message carries; UINT32_MAX when out of bounds. */
static uint32_t boot_n_addr(uint32_t type, uint32_t tp_size) {
    if (type == KV_WIRE_BOOT_REG) return 1;
    if (type == KV_WIRE_BOOT_REPLY) return tp_size <= KV_TP_MAX ? tp_size : UINT32_MAX;
    return 0;
}

static kv_status w_boot(wcur *w, uint32_t type, const kv_wire_boot *b) {
    uint32_t n = boot_n_addr(type, b->tp_size);
    if (n == UINT32_MAX) return KV_EINVAL;
    w_u32(w, b->engine);
    w_u32(w, b->tp_size);
    w_u32(w, b->tp_rank);
    w_u32(w, b->found);
    w_u8(w, n);
    for (uint32_t i = 0; i < n; i++)
        if (w_str(w, b->addr[i].s, sizeof b->addr[i].s) != KV_OK) return KV_EINVAL;
    return KV_OK;
}

static kv_status w_keys(wcur *w, const kv_wire_store *m, uint32_t max) {
    if (m->n > max) return KV_EINVAL;
    w_u16(w, m->n);
    for (uint32_t i = 0; i < m->n; i++) {
        w_u64(w, m->key[i].hash);
        w_u32(w, m->key[i].heads);
    }
    return KV_OK;
}

static bool store_bytes_ok(uint32_t b) { return b >= 1 && b <= KV_STORE_BLOCK_BYTES_MAX; }

static kv_status w_flags(wcur *w, const kv_wire_store *m, uint32_t *found) {
    if (m->n > KV_STORE_KEYS_MAX) return KV_EINVAL;
    w_u16(w, m->n);
    *found = 0;
    for (uint32_t i = 0; i < m->n; i++) {
        if (m->flag[i] > 1) return KV_EINVAL;
        *found += m->flag[i];
        w_u8(w, m->flag[i]);
    }
    return KV_OK;
}

static kv_status w_store(wcur *w, uint32_t type, const kv_wire_store *m) {
    uint32_t found = 0;
    w_u32(w, m->seq);
    switch ((kv_wire_type)type) {
    case KV_WIRE_STORE_EXIST: return w_keys(w, m, KV_STORE_KEYS_MAX);
    case KV_WIRE_STORE_EXIST_REPLY:
        w_u32(w, (uint32_t)m->status);
        return w_flags(w, m, &found);
    case KV_WIRE_STORE_PUT:
        if (!store_bytes_ok(m->block_bytes)) return KV_EINVAL;
        w_u32(w, m->block_bytes);
        if (w_keys(w, m, KV_STORE_BATCH_MAX) != KV_OK) return KV_EINVAL;
        w_bytes(w, m->data, (size_t)m->n * m->block_bytes);
        return KV_OK;
    case KV_WIRE_STORE_PUT_REPLY: w_u32(w, (uint32_t)m->status); return KV_OK;
    case KV_WIRE_STORE_GET:
        if (!store_bytes_ok(m->block_bytes)) return KV_EINVAL;
        w_u32(w, m->block_bytes);
        return w_keys(w, m, KV_STORE_BATCH_MAX);
    case KV_WIRE_STORE_GET_REPLY:
        if (!store_bytes_ok(m->block_bytes) || m->n > KV_STORE_BATCH_MAX) return KV_EINVAL;
        w_u32(w, (uint32_t)m->status);
        w_u32(w, m->block_bytes);
        if (w_flags(w, m, &found) != KV_OK) return KV_EINVAL;
        w_bytes(w, m->data, (size_t)found * m->block_bytes);
        return KV_OK;
    case KV_WIRE_XFER_META:
    case KV_WIRE_XFER_RESP:
    case KV_WIRE_BOOT_REG:
    case KV_WIRE_BOOT_QUERY:
    case KV_WIRE_BOOT_REPLY: break;
    }
    return KV_EINVAL;
}

static kv_status w_payload(wcur *w, const kv_wire_msg *m) {
    switch (m->type) {
    case KV_WIRE_XFER_META: return w_meta(w, &m->u.meta);
    case KV_WIRE_XFER_RESP: return w_resp(w, &m->u.resp);
    case KV_WIRE_BOOT_REG:
    case KV_WIRE_BOOT_QUERY:
    case KV_WIRE_BOOT_REPLY: return w_boot(w, m->type, &m->u.boot);
    case KV_WIRE_STORE_EXIST:
    case KV_WIRE_STORE_EXIST_REPLY:
    case KV_WIRE_STORE_PUT:
    case KV_WIRE_STORE_PUT_REPLY:
    case KV_WIRE_STORE_GET:
    case KV_WIRE_STORE_GET_REPLY: return w_store(w, m->type, &m->u.store);
    default: return KV_EINVAL;
    }
}

void kv_wire_msg_reset(kv_wire_msg *m, uint32_t type) {
    m->type = type;
    switch ((kv_wire_type)type) {
    case KV_WIRE_XFER_META: memset(&m->u.meta, 0, offsetof(kv_wire_xfer_meta, req)); return;
    case KV_WIRE_XFER_RESP: memset(&m->u.resp, 0, sizeof m->u.resp); return;
    case KV_WIRE_BOOT_REG:
    case KV_WIRE_BOOT_QUERY:
    case KV_WIRE_BOOT_REPLY: memset(&m->u.boot, 0, sizeof m->u.boot); return;
    case KV_WIRE_STORE_EXIST:
    case KV_WIRE_STORE_EXIST_REPLY:
    case KV_WIRE_STORE_PUT:
    case KV_WIRE_STORE_PUT_REPLY:
    case KV_WIRE_STORE_GET:
    case KV_WIRE_STORE_GET_REPLY: memset(&m->u.store, 0, offsetof(kv_wire_store, key)); return;
    }
    memset(m, 0, sizeof *m);
    m->type = type;
}

kv_status kv_wire_encode(const kv_wire_msg *m, uint8_t *buf, size_t cap, size_t *out_len) {
    if (out_len) *out_len = 0;
    if (!m || !out_len || (!buf && cap)) return KV_EINVAL;
    wcur w = {.p = buf, .cap = cap, .n = 0};
    w_u8(&w, 'K');
    w_u8(&w, 'V');
    w_u8(&w, KV_WIRE_VERSION);
    w_u8(&w, m->type & 0xffu);
    w_u32(&w, 0); /* payload length, patched below */
    kv_status st = w_payload(&w, m);
    if (st != KV_OK) return st;
    if (w.n > cap || w.n - KV_WIRE_HDR_BYTES > UINT32_MAX) return KV_ENOMEM;
    wcur len_w = {.p = buf + 4, .cap = 4, .n = 0};
    w_u32(&len_w, (uint32_t)(w.n - KV_WIRE_HDR_BYTES));
    *out_len = w.n;
    return KV_OK;
}

/* ---- the encode path's postcondition ---- */

#ifdef KVCONN_CHECKED
static bool same_table(const kv_block_table *a, const kv_block_table *b) {
    if (a->n_groups != b->n_groups) return false;
    for (uint32_t g = 0; g < a->n_groups && g < KV_GROUPS_MAX; g++)
        if (a->n[g] != b->n[g] || memcmp(a->id[g], b->id[g], (size_t)a->n[g] * sizeof a->id[g][0]) != 0) return false;
    return true;
}

static bool same_meta(const kv_wire_xfer_meta *a, const kv_wire_xfer_meta *b) {
    if (a->d_engine != b->d_engine || a->d_tp_size != b->d_tp_size || a->d_tp_rank != b->d_tp_rank ||
        a->batch != b->batch || strcmp(a->d_addr.s, b->d_addr.s) != 0 || a->n_groups != b->n_groups ||
        a->block_bytes != b->block_bytes || a->n_reqs != b->n_reqs)
        return false;
    for (uint32_t g = 0; g < a->n_groups; g++)
        if (a->region[g].region != b->region[g].region || a->region[g].len != b->region[g].len ||
            a->region[g].key.w[0] != b->region[g].key.w[0] || a->region[g].key.w[1] != b->region[g].key.w[1])
            return false;
    for (uint32_t i = 0; i < a->n_reqs; i++)
        if (a->req[i].d_req != b->req[i].d_req || !kv_xfer_id_eq(a->req[i].transfer_id, b->req[i].transfer_id) ||
            !same_table(&a->req[i].blocks, &b->req[i].blocks))
            return false;
    return true;
}

static bool same_resp(const kv_wire_xfer_resp *a, const kv_wire_xfer_resp *b) {
    return a->status == b->status && a->batch == b->batch && a->p_tp_rank == b->p_tp_rank && a->n_ok == b->n_ok &&
           a->n_err == b->n_err && memcmp(a->ok, b->ok, (size_t)a->n_ok * sizeof a->ok[0]) == 0 &&
           memcmp(a->err, b->err, (size_t)a->n_err * sizeof a->err[0]) == 0 && strcmp(a->err_msg, b->err_msg) == 0;
}

static bool same_boot(uint32_t type, const kv_wire_boot *a, const kv_wire_boot *b) {
    if (a->engine != b->engine || a->tp_size != b->tp_size || a->tp_rank != b->tp_rank || a->found != b->found)
        return false;
    uint32_t n = boot_n_addr(type, a->tp_size);
    for (uint32_t i = 0; i < n && i < KV_TP_MAX; i++)
        if (strcmp(a->addr[i].s, b->addr[i].s) != 0) return false;
    return true;
}

static bool same_store(uint32_t type, const kv_wire_store *a, const kv_wire_store *b) {
    if (a->seq != b->seq || a->n != b->n) return false;
    bool keys = type == KV_WIRE_STORE_EXIST || type == KV_WIRE_STORE_PUT || type == KV_WIRE_STORE_GET;
    bool flags = type == KV_WIRE_STORE_EXIST_REPLY || type == KV_WIRE_STORE_GET_REPLY;
    bool sized = type == KV_WIRE_STORE_PUT || type == KV_WIRE_STORE_GET || type == KV_WIRE_STORE_GET_REPLY;
    bool status = type == KV_WIRE_STORE_EXIST_REPLY || type == KV_WIRE_STORE_PUT_REPLY || type == KV_WIRE_STORE_GET_REPLY;
    if ((sized && a->block_bytes != b->block_bytes) || (status && a->status != b->status)) return false;
    size_t data = 0;
    for (uint32_t i = 0; i < a->n && i < KV_STORE_KEYS_MAX; i++) {
        if (keys && (a->key[i].hash != b->key[i].hash || a->key[i].heads != b->key[i].heads)) return false;
        if (flags && a->flag[i] != b->flag[i]) return false;
        data += type == KV_WIRE_STORE_PUT || (type == KV_WIRE_STORE_GET_REPLY && a->flag[i]);
    }
    if (type != KV_WIRE_STORE_PUT && type != KV_WIRE_STORE_GET_REPLY) return true;
    return memcmp(a->data, b->data, data * a->block_bytes) == 0;
}

/* C3: decode(buf) carries what m does. */
static bool decodes_as(const kv_wire_msg *m, const uint8_t *buf, size_t len) {
    kv_wire_msg back; /* ~42 KiB of stack; decode writes only what the frame carries */
    if (kv_wire_decode(buf, len, &back) != KV_OK || back.type != m->type) return false;
    switch ((kv_wire_type)m->type) {
    case KV_WIRE_XFER_META: return same_meta(&m->u.meta, &back.u.meta);
    case KV_WIRE_XFER_RESP: return same_resp(&m->u.resp, &back.u.resp);
    case KV_WIRE_BOOT_REG:
    case KV_WIRE_BOOT_QUERY:
    case KV_WIRE_BOOT_REPLY: return same_boot(m->type, &m->u.boot, &back.u.boot);
    case KV_WIRE_STORE_EXIST:
    case KV_WIRE_STORE_EXIST_REPLY:
    case KV_WIRE_STORE_PUT:
    case KV_WIRE_STORE_PUT_REPLY:
    case KV_WIRE_STORE_GET:
    case KV_WIRE_STORE_GET_REPLY: return same_store(m->type, &m->u.store, &back.u.store);
    }
    return false;
}
#endif

size_t kv_wire_printable(const char *text, size_t text_len, char *out, size_t cap) {
    size_t n = 0;
    for (; n + 1 < cap && n < text_len && text[n]; n++) {
        unsigned char ch = (unsigned char)text[n];
        out[n] = ch >= 0x20 && ch < 0x7f ? (char)ch : '?';
    }
    out[n] = 0;
    return n;
}

bool kv_wire_encoded_ok(const kv_wire_msg *m, const uint8_t *buf, size_t len) {
    if (!m || !buf || len < KV_WIRE_HDR_BYTES || len - KV_WIRE_HDR_BYTES > UINT32_MAX) return false;
    if (buf[0] != 'K' || buf[1] != 'V' || buf[2] != KV_WIRE_VERSION || buf[3] != m->type) return false; /* C1 */
    uint32_t payload = (uint32_t)buf[4] | (uint32_t)buf[5] << 8 | (uint32_t)buf[6] << 16 | (uint32_t)buf[7] << 24;
    if (payload != len - KV_WIRE_HDR_BYTES) return false; /* C2 */
#ifdef KVCONN_CHECKED
    return decodes_as(m, buf, len); /* C3 */
#else
    return true;
#endif
}

/* ---- reader: bounded, sticky failure ---- */

typedef struct rcur {
    const uint8_t *p;
    size_t len;
    size_t pos;
    bool bad; /* a read went past the end or a check failed */
} rcur;

static const uint8_t *r_take(rcur *r, size_t n) {
    if (r->bad || r->len - r->pos < n) {
        r->bad = true;
        return NULL;
    }
    const uint8_t *q = r->p + r->pos;
    r->pos += n;
    return q;
}

static uint64_t r_le(rcur *r, unsigned bytes) {
    const uint8_t *q = r_take(r, bytes);
    uint64_t v = 0;
    if (!q) return 0;
    for (unsigned i = bytes; i-- > 0;) v = (v << 8) | q[i];
    return v;
}

static uint32_t r_u8(rcur *r) { return (uint32_t)r_le(r, 1); }
static uint32_t r_u16(rcur *r) { return (uint32_t)r_le(r, 2); }
static uint32_t r_u32(rcur *r) { return (uint32_t)r_le(r, 4); }
static uint64_t r_u64(rcur *r) { return r_le(r, 8); }

/* Reads a count and fails the cursor when it is over max. */
static uint32_t r_count(rcur *r, unsigned bytes, uint32_t max) {
    uint32_t n = (uint32_t)r_le(r, bytes);
    if (n > max) r->bad = true;
    return r->bad ? 0 : n;
}

static void r_str(rcur *r, char *dst, size_t size) {
    uint32_t n = r_u16(r);
    if (n >= size) r->bad = true;
    const uint8_t *q = r_take(r, n);
    if (!q) return;
    if (memchr(q, '\0', n)) {
        r->bad = true;
        return;
    }
    memcpy(dst, q, n);
    dst[n] = '\0';
}

static void r_table(rcur *r, kv_block_table *t) {
    t->n_groups = r_count(r, 1, KV_GROUPS_MAX);
    for (uint32_t g = 0; g < t->n_groups && !r->bad; g++) {
        t->n[g] = r_count(r, 2, KV_REQ_BLOCKS_MAX);
        for (uint32_t i = 0; i < t->n[g]; i++) t->id[g][i] = r_u32(r);
    }
}

static void r_meta(rcur *r, kv_wire_xfer_meta *m) {
    m->d_engine = r_u32(r);
    m->d_tp_size = r_u32(r);
    m->d_tp_rank = r_u32(r);
    m->batch = r_u32(r);
    r_str(r, m->d_addr.s, sizeof m->d_addr.s);
    m->n_groups = r_count(r, 1, KV_GROUPS_MAX);
    for (uint32_t g = 0; g < m->n_groups; g++) {
        m->region[g].region = r_u32(r);
        m->region[g].len = r_u64(r);
        m->region[g].key.w[0] = r_u64(r);
        m->region[g].key.w[1] = r_u64(r);
    }
    m->block_bytes = r_u32(r);
    m->n_reqs = r_count(r, 2, KV_PULL_REQS_MAX);
    for (uint32_t i = 0; i < m->n_reqs && !r->bad; i++) {
        m->req[i].d_req = r_u32(r);
        m->req[i].transfer_id.hi = r_u64(r);
        m->req[i].transfer_id.lo = r_u64(r);
        r_table(r, &m->req[i].blocks);
    }
}

static void r_u32_list(rcur *r, uint32_t *v, uint32_t *n) {
    *n = r_count(r, 2, KV_PULL_REQS_MAX);
    for (uint32_t i = 0; i < *n; i++) v[i] = r_u32(r);
}

static void r_resp(rcur *r, kv_wire_xfer_resp *x) {
    x->status = r_u32(r);
    if (x->status > KV_XFER_ERROR) r->bad = true;
    x->batch = r_u32(r);
    x->p_tp_rank = r_u32(r);
    r_u32_list(r, x->ok, &x->n_ok);
    r_u32_list(r, x->err, &x->n_err);
    r_str(r, x->err_msg, sizeof x->err_msg);
}

static void r_boot(rcur *r, uint32_t type, kv_wire_boot *b) {
    b->engine = r_u32(r);
    b->tp_size = r_u32(r);
    b->tp_rank = r_u32(r);
    b->found = r_u32(r);
    uint32_t want = boot_n_addr(type, b->tp_size);
    if (r_u8(r) != want) r->bad = true; /* also rejects want == UINT32_MAX */
    for (uint32_t i = 0; i < want && !r->bad; i++) r_str(r, b->addr[i].s, sizeof b->addr[i].s);
}

static void r_keys(rcur *r, kv_wire_store *m, uint32_t max) {
    m->n = r_count(r, 2, max);
    for (uint32_t i = 0; i < m->n && !r->bad; i++) {
        m->key[i].hash = r_u64(r);
        m->key[i].heads = r_u32(r);
    }
}

static uint32_t r_flags(rcur *r, kv_wire_store *m, uint32_t max) {
    uint32_t found = 0;
    m->n = r_count(r, 2, max);
    for (uint32_t i = 0; i < m->n && !r->bad; i++) {
        m->flag[i] = (uint8_t)r_u8(r);
        if (m->flag[i] > 1) r->bad = true;
        found += m->flag[i];
    }
    return found;
}

static void r_block_bytes(rcur *r, kv_wire_store *m) {
    m->block_bytes = r_u32(r);
    if (!store_bytes_ok(m->block_bytes)) r->bad = true;
}

static void r_bytes(rcur *r, uint8_t *dst, size_t n) {
    const uint8_t *q = r_take(r, n);
    if (q) memcpy(dst, q, n);
}

static void r_store(rcur *r, uint32_t type, kv_wire_store *m) {
    m->seq = r_u32(r);
    switch ((kv_wire_type)type) {
    case KV_WIRE_STORE_EXIST: r_keys(r, m, KV_STORE_KEYS_MAX); return;
    case KV_WIRE_STORE_EXIST_REPLY:
        m->status = (int32_t)r_u32(r);
        (void)r_flags(r, m, KV_STORE_KEYS_MAX);
        return;
    case KV_WIRE_STORE_PUT:
        r_block_bytes(r, m);
        r_keys(r, m, KV_STORE_BATCH_MAX);
        if (!r->bad) r_bytes(r, m->data, (size_t)m->n * m->block_bytes);
        return;
    case KV_WIRE_STORE_PUT_REPLY: m->status = (int32_t)r_u32(r); return;
    case KV_WIRE_STORE_GET:
        r_block_bytes(r, m);
        r_keys(r, m, KV_STORE_BATCH_MAX);
        return;
    case KV_WIRE_STORE_GET_REPLY: {
        m->status = (int32_t)r_u32(r);
        r_block_bytes(r, m);
        uint32_t found = r_flags(r, m, KV_STORE_BATCH_MAX);
        if (!r->bad) r_bytes(r, m->data, (size_t)found * m->block_bytes);
        return;
    }
    case KV_WIRE_XFER_META:
    case KV_WIRE_XFER_RESP:
    case KV_WIRE_BOOT_REG:
    case KV_WIRE_BOOT_QUERY:
    case KV_WIRE_BOOT_REPLY: break;
    }
    r->bad = true;
}

static bool known_type(uint32_t t) { return t >= KV_WIRE_XFER_META && t <= KV_WIRE_STORE_GET_REPLY; }

/* Checks the header; KV_OK when the payload may be parsed. */
static kv_status r_header(const uint8_t *buf, size_t len, uint32_t *out_type) {
    if (len < KV_WIRE_HDR_BYTES || buf[0] != 'K' || buf[1] != 'V') return KV_EPROTO;
    if (buf[2] != KV_WIRE_VERSION) return KV_EVERSION;
    if (!known_type(buf[3])) return KV_EPROTO;
    rcur h = {.p = buf + 4, .len = 4, .pos = 0, .bad = false};
    if ((uint64_t)r_u32(&h) != (uint64_t)(len - KV_WIRE_HDR_BYTES)) return KV_EPROTO;
    *out_type = buf[3];
    return KV_OK;
}

static void r_payload(rcur *r, kv_wire_msg *out) {
    switch (out->type) {
    case KV_WIRE_XFER_META: r_meta(r, &out->u.meta); break;
    case KV_WIRE_XFER_RESP: r_resp(r, &out->u.resp); break;
    case KV_WIRE_BOOT_REG:
    case KV_WIRE_BOOT_QUERY:
    case KV_WIRE_BOOT_REPLY: r_boot(r, out->type, &out->u.boot); break;
    case KV_WIRE_STORE_EXIST:
    case KV_WIRE_STORE_EXIST_REPLY:
    case KV_WIRE_STORE_PUT:
    case KV_WIRE_STORE_PUT_REPLY:
    case KV_WIRE_STORE_GET:
    case KV_WIRE_STORE_GET_REPLY: r_store(r, out->type, &out->u.store); break;
    default: r->bad = true; break;
    }
}

kv_status kv_wire_decode(const uint8_t *buf, size_t len, kv_wire_msg *out) {
    if (!out) return KV_EINVAL;
    uint32_t type = 0;
    kv_status st = buf ? r_header(buf, len, &type) : len ? KV_EINVAL : KV_EPROTO;
    if (st != KV_OK) {
        memset(out, 0, sizeof *out);
        return st;
    }
    kv_wire_msg_reset(out, type);
    rcur r = {.p = buf + KV_WIRE_HDR_BYTES, .len = len - KV_WIRE_HDR_BYTES, .pos = 0, .bad = false};
    r_payload(&r, out);
    if (r.bad || r.pos != r.len) {
        memset(out, 0, sizeof *out);
        return KV_EPROTO;
    }
    return KV_OK;
}
