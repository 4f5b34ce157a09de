/* apps/kvnode/kvnode.h — the production node: one process per role.
 *
 *   prefill  a P engine (scheduler, workers, P2P sender) with real KV block
 *            memory; its forward pass fills blocks with bytes derived from
 *            token ids
 *   decode   a D engine; its receiver pulls P's blocks over the transport and
 *            its worker verifies every received block (INV-DATA)
 *   blast    no engine: the raw loopback TCP bandwidth (bench baseline)
 *   http-bootstrap  no engine: vLLM's Mooncake bootstrap server over HTTP
 *            (boot_node.c; engines reach it with --http-bootstrap)
 *   proxy    the core's proxy and bootstrap actors plus a driver that pushes
 *            N requests through --prefills P and --decodes D engines
 *            (round-robin), optionally aborting a fraction at
 *            random phases, then reports requests/s, GB/s of KV moved,
 *            latency percentiles and each engine's block-pool accounting
 * Processes: proxy = process 0 (listens on --listen); engine i = process
 * 1 + i (dials --proxy). Posts between them cross the runtime's bridge
 * (transport/posix/bridge.c); KV and the P2P control channel cross the TCP
 * transport between P and D directly.
 *
 * Each engine process also runs an "admin" actor (<E>.admin): STATS_REQ
 * answers a kvn_stats snapshot taken with every other actor of the process
 * parked (consistent, race-free), SHUTDOWN ends the process. */
#ifndef KVCONN_APPS_KVNODE_H
#define KVCONN_APPS_KVNODE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "apps/common/exit_codes.h"
#include "core/block_pool.h"
#include "core/engine.h"
#include "transport/auth/auth.h"
#include "transport/posix/posix_env.h"
#include "transport/posix/thread_rt.h"

/* Bytes of one head of one block on one worker. A block is KV_HEADS (4)
 * heads / tp: 64 KiB per group at tp 1, the size of one attention layer's
 * K and V for a 16-token block of a Llama-3-8B-class model (8 KV heads x
 * head_dim 128 x 2 B (bf16) x 2) — the granularity vLLM's Mooncake connector
 * writes (one block of one layer's KV cache per transfer descriptor). */
#define KVN_HEAD_BYTES_DEFAULT 16384u

/* kvnode's own message kinds (the core's are small integers). */
enum {
    KVN_M_STATS_REQ = 0x6b760001, /* proxy -> admin: payload u32 token */
    KVN_M_STATS = 0x6b760002,     /* admin -> requester: kvn_stats */
    KVN_M_SHUTDOWN = 0x6b760003,  /* proxy -> admin */
};

typedef struct kvn_stats {
    uint32_t token;          /* as in the request */
    uint32_t engine, role;   /* kv_role */
    uint32_t tp, n_groups, block_size, head_bytes, pool_blocks;
    uint32_t live_reqs;      /* request slots in use */
    uint32_t conn_state;     /* connector entries still held */
    kv_pool_report pool[KV_GROUPS_MAX];
    kv_engine_stats st;
    uint64_t verified_blocks;/* blocks D checked against the token-derived bytes */
    uint64_t violations;     /* invariant violations the core reported */
    kvp_rt_counters rt;
} kvn_stats;

typedef struct kvn_opts {
    const char *role;        /* "prefill" | "decode" | "proxy" */
    const char *listen;      /* proxy: bridge address, "127.0.0.1:0" */
    const char *proxy;       /* engines: the proxy's bridge address */
    const char *host;        /* transport bind host */
    const char *port_file;   /* proxy: write the bridge port here */
    const char *json;        /* proxy, blast: results as JSON ("-": stdout) */
    uint32_t index;          /* engine index (P: 0, D: 1); with --prefills N: P 0..N-1, D N.. */
    uint32_t prefills, decodes; /* proxy: P and D engines it drives (1, 1) */
    uint32_t requests, window;
    double abort_frac;
    uint32_t abort_max_us;   /* aborts land 0..this after submit */
    uint64_t seed;
    uint32_t prompt_min, prompt_max, decode_tokens;
    bool sequential;
    uint32_t tp, block_size, pool_blocks, head_bytes, max_batched_tokens;
    uint32_t spec;               /* draft tokens per decode step (speculative decoding), 0..KV_SPEC_MAX */
    uint32_t step_us;        /* model cost of a step */
    uint32_t recv_timeout_ms, abort_timeout_ms;
    uint32_t stats_ms;       /* engines: print live pool accounting this often */
    uint32_t quiesce_ms;     /* proxy: bound on waiting for pools to drain */
    uint32_t stall_ms;       /* proxy: no completion for this long = stuck */
    uint8_t policy;          /* kv_fail_policy */
    bool no_shutdown;        /* proxy: leave the engines running */
    kv_log_level log_level;
    uint32_t groups;         /* KV cache groups (full attention), 1..KV_GROUPS_MAX */
    uint32_t blast_mb;       /* blast: MiB to send */
    uint32_t blast_buf_mb;   /* blast: MiB of buffer each side cycles through (0, 1: 1 MiB) */
    const char *transport;   /* engines: "tcp" (default) or "rdma" (-DKVCONN_RDMA=ON builds) */
    const char *kvmem;       /* engines: "host" (default), "staged" or "hbm" (core/kvmem.h) */
    const char *rdma_dev;    /* rdma: device name (NULL: the first) */
    uint32_t rdma_port;      /* rdma: port (1) */
    const char *secret_file; /* --secret-file; without it the KVCONN_SECRET variable */
    kv_auth_key key;         /* the cluster secret (key.set: every link proves it) */
    uint32_t hello_ms;       /* HELLO (and challenge-response) deadline of every link */
    uint32_t max_pending, max_pending_addr; /* transport connections in their HELLO: all, per address */
    uint32_t peer_share;     /* P: percent of its pull and request slots one D peer may hold (75; 100: all) */
    const char *http_boot;   /* engines: --http-bootstrap IP:PORT (P0 serves it, P registers, D queries) */
    uint32_t proxy_wait_ms;  /* engines: how long a lost proxy may take to come back (30000; 0: exit 11 at once) */
} kvn_opts;

/* The ABI tag both ends of the bridge must share: sizes of every payload
 * that crosses it (raw struct bytes). */
uint32_t kvn_abi(void);
/* "P0: g0[cap .. free .. cached .. owned .. pinned .. inflight ..] ..." */
void kvn_stats_line(const kvn_stats *s, char *out, size_t cap);
/* The runtime's waiting hook (kvp_rt_set_waiting): "[TAG] waiting N s of M s
 * for WHAT" on stderr, once a second; ctx is the tag (a string). */
void kvn_say_waiting(void *ctx, const char *what, uint64_t waited_ms, uint64_t limit_ms);
/* The bridge's remote filter (kvp_rt_set_remote_filter) for every kvnode
 * process: the core's cross-process kinds (kv_msg_remote_ok) and kvnode's
 * admin kinds, each at its exact size. */
bool kvn_remote_ok(void *ctx, uint32_t kind, uint32_t len);

/* The cluster secret of o (already loaded by main) on a TCP kvt and on the
 * runtime's bridge, with o's HELLO deadline. */
kv_status kvn_secure_kvt(const kvn_opts *o, kvt *t);
kv_status kvn_secure_rt(const kvn_opts *o, kvp_rt *rt);

int kvn_run_engine(const kvn_opts *o);
int kvn_run_proxy(const kvn_opts *o);
/* Raw loopback TCP bandwidth (the benchmark's baseline). */
int kvn_run_blast(const kvn_opts *o);
/* The same, through the TCP kvt and its progress threads (no fill/verify). */
int kvn_run_kvt_blast(const kvn_opts *o);

/* The HTTP bootstrap (boot_node.c). An engine with --http-bootstrap:
 * kvn_boot_hook_begin before anything else (the owner, prefill engine 0,
 * starts the server; NULL without the option, or on failure with *rc the
 * exit code), kvn_boot_hook_up once the engine runs (P registers its ranks
 * from regs[0..n), the REGISTERs its core made (proxy_link.h's relay); D
 * queries; 0 or the exit code), kvn_boot_hook_end at exit. */
typedef struct kvn_boot_hook kvn_boot_hook;
bool kvn_boot_is_owner(const kvn_opts *o);
kvn_boot_hook *kvn_boot_hook_begin(const kvn_opts *o, const char *tag, int *rc);
int kvn_boot_hook_up(kvn_boot_hook *h, const kvn_opts *o, const char *tag, const kv_wire_boot *regs, uint32_t n);
void kvn_boot_hook_end(kvn_boot_hook *h);
/* --role http-bootstrap: the server alone on --listen until SIGINT/SIGTERM. */
int kvn_run_http_boot(const kvn_opts *o);

/* Posts from a thread that is no actor's, retrying a full mailbox every
 * 100 us for at most 2 s. */
kv_status kvn_post_retry(kvp_rt *rt, uint32_t to, uint32_t kind, const void *p, uint32_t len);
/* A block pool with every block free or cached (nothing owned, pinned or
 * in flight). */
bool kvn_pool_clean(const kv_pool_report *r);

/* Sleeps ms milliseconds (the start-up and run loops' polls). */
void kvn_nap_ms(uint32_t ms);
/* Writes port to path through path.tmp and a rename, so a reader sees the
 * whole number or no file; false when any step failed. */
bool kvn_write_port_file(const char *path, uint16_t port);

/* --json PATH for writing; "-" is stdout, taken over at start-up (main.c)
 * so that the JSON is all stdout carries. NULL if it cannot be opened. */
FILE *kvn_json_open(const kvn_opts *o);

#endif
