/* kvconn/wire.h — the control-message codec (vLLM's msgpack side channel).
 *
 * Frame: magic "KV" (2 bytes), version (1), type (1), payload length (4,
 * little endian), payload. Every length and index is bounds-checked on
 * decode: garbage in gives KV_EPROTO / KV_EVERSION, never a crash, never a
 * write outside the output struct. encode(decode(x)) is canonical, so
 * decode -> encode -> decode is a fixed point. */
#ifndef KVCONN_WIRE_H
#define KVCONN_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kvconn/status.h"
#include "kvconn/types.h"

#define KV_WIRE_VERSION 4u /* 2: XFER_META's regions carry the grant's key; 3: 128-bit transfer ids;
                              * 4: STORE_EXIST_REPLY carries a status */
#define KV_WIRE_HDR_BYTES 8u

typedef enum kv_wire_type {
    KV_WIRE_XFER_META = 1, /* D -> P: MooncakeXferMetadata */
    KV_WIRE_XFER_RESP = 2, /* P -> D: MooncakeXferResponse */
    KV_WIRE_BOOT_REG = 3,  /* P -> bootstrap: register a worker */
    KV_WIRE_BOOT_QUERY = 4,/* D -> bootstrap: where is engine E */
    KV_WIRE_BOOT_REPLY = 5,/* bootstrap -> D */
    KV_WIRE_STORE_EXIST = 6,       /* store client -> store: which keys exist */
    KV_WIRE_STORE_EXIST_REPLY = 7, /* store -> client: flag per key */
    KV_WIRE_STORE_PUT = 8,         /* client -> store: keys with their block bytes */
    KV_WIRE_STORE_PUT_REPLY = 9,   /* store -> client: status */
    KV_WIRE_STORE_GET = 10,        /* client -> store: keys to read */
    KV_WIRE_STORE_GET_REPLY = 11,  /* store -> client: status, flag per key, bytes of the found ones */
} kv_wire_type;

typedef enum kv_xfer_status { KV_XFER_FINISH = 0, KV_XFER_CONTINUE = 1, KV_XFER_ERROR = 2 } kv_xfer_status;

/* One request of a pull: D's request, the transfer id, D's block ids. */
typedef struct kv_wire_req_blocks {
    uint32_t d_req;
    kv_xfer_id transfer_id;
    kv_block_table blocks;
} kv_wire_req_blocks;

typedef struct kv_wire_xfer_meta {
    uint32_t d_engine;         /* D's engine index */
    uint32_t d_tp_size;
    uint32_t d_tp_rank;
    uint32_t batch;            /* D's pull-batch id, echoed in responses */
    kvt_addr d_addr;           /* D worker's endpoint (P connects here to write) */
    uint32_t n_groups;
    kvt_desc region[KV_GROUPS_MAX]; /* D's region per group */
    uint32_t block_bytes;      /* bytes of one block on one D worker */
    uint32_t n_reqs;
    kv_wire_req_blocks req[KV_PULL_REQS_MAX];
} kv_wire_xfer_meta;

typedef struct kv_wire_xfer_resp {
    uint32_t status;  /* kv_xfer_status */
    uint32_t batch;
    uint32_t p_tp_rank;
    uint32_t n_ok;
    uint32_t ok[KV_PULL_REQS_MAX];
    uint32_t n_err;
    uint32_t err[KV_PULL_REQS_MAX];
    char err_msg[KV_ERR_MSG_MAX]; /* NUL-terminated */
} kv_wire_xfer_resp;

typedef struct kv_wire_boot {
    uint32_t engine;
    uint32_t tp_size;
    uint32_t tp_rank;  /* BOOT_REG */
    uint32_t found;    /* BOOT_REPLY: 1 if the engine is known */
    kvt_addr addr[KV_TP_MAX]; /* BOOT_REG: addr[0]; BOOT_REPLY: one per rank */
} kv_wire_boot;

/* ---- KV store (Mooncake store's batch_is_exist / put / get) ---- */

/* Keys one EXIST may carry: a lookup asks for every (position, group, rank)
 * of a request at once. */
#define KV_STORE_KEYS_MAX (KV_REQ_BLOCKS_MAX * KV_GROUPS_MAX * KV_TP_MAX)
/* Keys one PUT or GET carries with their bytes. */
#define KV_STORE_BATCH_MAX 32u
/* Largest block (one worker's share) the store path moves. */
#define KV_STORE_BLOCK_BYTES_MAX 256u
/* put status when the store has no room (Mooncake's NO_AVAILABLE_HANDLE). */
#define KV_STORE_NO_HANDLE (-200)
/* Any other failed put or get. */
#define KV_STORE_FAILED (-1)

/* A stored block: the prefix hash of its position in its group (the group is
 * mixed into the hash) and the head range of the worker that holds it, so
 * different TP layouts never share keys. */
typedef struct kv_store_key {
    uint64_t hash;
    uint32_t heads; /* head_lo << 16 | head_hi */
    uint32_t pad_;  /* zero */
} kv_store_key;

typedef struct kv_wire_store {
    uint32_t seq;          /* request number, echoed by the reply */
    int32_t status;        /* EXIST_REPLY, PUT_REPLY, GET_REPLY: 0, KV_STORE_NO_HANDLE or
                            * KV_STORE_FAILED (an EXIST_REPLY that failed has n 0) */
    uint32_t block_bytes;  /* PUT, GET, GET_REPLY: bytes per key (<= KV_STORE_BLOCK_BYTES_MAX) */
    uint32_t n;            /* keys (EXIST <= KV_STORE_KEYS_MAX; PUT, GET <= KV_STORE_BATCH_MAX) */
    kv_store_key key[KV_STORE_KEYS_MAX];   /* EXIST, PUT, GET */
    uint8_t flag[KV_STORE_KEYS_MAX];       /* EXIST_REPLY: exists; GET_REPLY: found (0/1) */
    uint8_t data[KV_STORE_BATCH_MAX * KV_STORE_BLOCK_BYTES_MAX]; /* PUT: n blocks; GET_REPLY: found ones, in order */
} kv_wire_store;

typedef struct kv_wire_msg {
    uint32_t type; /* kv_wire_type */
    union {
        kv_wire_xfer_meta meta;
        kv_wire_xfer_resp resp;
        kv_wire_boot boot;
        kv_wire_store store;
    } u;
} kv_wire_msg;

/* Makes m an empty message of `type`: the type and every scalar field of
 * its member are zero; array entries past their counts are left as they
 * are (encode never reads them), so this is cheap whatever the message's
 * capacity. Fill counts and entries after it. */
void kv_wire_msg_reset(kv_wire_msg *m, uint32_t type);

/* Encodes m into buf[cap]; KV_EINVAL if m is out of its own bounds,
 * KV_ENOMEM if cap is too small. */
kv_status kv_wire_encode(const kv_wire_msg *m, uint8_t *buf, size_t cap, size_t *out_len);
/* Decodes exactly len bytes. On success the fields the message carries are
 * set and every other scalar of its member is zero; array entries past
 * their counts are unspecified (as after kv_wire_msg_reset). On error *out
 * is zeroed and nothing else is written. */
kv_status kv_wire_decode(const uint8_t *buf, size_t len, kv_wire_msg *out);

/* The postcondition of kv_wire_encode for a message our own code built:
 * buf[0..len) is one frame with the header of m's type and a payload length
 * of len - KV_WIRE_HDR_BYTES. In checked builds (KVCONN_CHECKED) it also
 * decodes the frame and compares what the message carries (its counts and
 * scalars): what we send a peer is what that peer's decoder accepts. The
 * core asserts it after every encode (core/assert.h); a peer's bytes are
 * only ever decoded, never asserted on. */
bool kv_wire_encoded_ok(const kv_wire_msg *m, const uint8_t *buf, size_t len);

/* A peer's text (a response's err_msg) as one printable line for a log:
 * at most cap - 1 bytes of text up to its NUL (or text_len), each byte
 * outside printable ASCII (0x20..0x7e) written as '?', NUL-ended; returns
 * the length written. cap > 0. */
size_t kv_wire_printable(const char *text, size_t text_len, char *out, size_t cap);

#endif
