/* apps/kvnode/boot_registry.h — what vLLM's Mooncake bootstrap server
 * (MooncakeBootstrapServer) keeps and answers, without the HTTP around it
 * (http_boot.c speaks that): prefill workers register
 * {engine_id, dp_rank, tp_rank, pp_rank, addr}; a decode worker asks for
 * everything and gets {dp_rank: {engine_id, worker_addr: {tp_rank: {pp_rank:
 * addr}}}} with the ranks as string keys. The rules are vLLM's (docs/kvnode.md,
 * "HTTP bootstrap"):
 *   - the first registration of a dp_rank fixes its engine_id; another
 *     engine_id for that dp_rank is refused (400, "Engine ID mismatch ...");
 *   - a (dp_rank, tp_rank, pp_rank) registered once is refused after that,
 *     the same address included (400, "... is already registered at ...").
 * kvnode's own bounds, since a registration comes from the network: ranks
 * 0..KVN_BOOT_RANK_MAX-1, at most KVN_BOOT_WORKERS_MAX workers (503 after
 * that), engine_id and addr of bounded length without NUL bytes; a body that
 * is not such a JSON object is refused (400) with what was wrong. Members the
 * payload has beyond the five (newer vLLM sends tp_size, pp_size, layer
 * lists) are ignored, as vLLM's model ignores what it does not declare.
 *
 * One owner: the server's thread. Storage is inside the struct (no
 * allocation). Workers are kept sorted by (dp, tp, pp), so the query is one
 * pass. */
#ifndef KVCONN_APPS_KVNODE_BOOT_REGISTRY_H
#define KVCONN_APPS_KVNODE_BOOT_REGISTRY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define KVN_BOOT_RANK_MAX 64u        /* dp_rank, tp_rank and pp_rank are below this */
#define KVN_BOOT_WORKERS_MAX 512u    /* registrations kept */
#define KVN_BOOT_ENGINE_ID_MAX 128u  /* bytes of an engine_id */
#define KVN_BOOT_ADDR_MAX 256u       /* bytes of an addr ("tcp://10.0.0.6:41234") */
#define KVN_BOOT_BODY_MAX 65536u     /* bytes of a /register body (newer vLLM adds layer lists) */

/* One registration, as POST /register carries it. */
typedef struct kvn_boot_reg {
    char engine_id[KVN_BOOT_ENGINE_ID_MAX + 1];
    uint32_t dp_rank, tp_rank, pp_rank;
    char addr[KVN_BOOT_ADDR_MAX + 1];
} kvn_boot_reg;

typedef struct kvn_boot_worker {
    uint32_t dp, tp, pp;
    char addr[KVN_BOOT_ADDR_MAX + 1];
} kvn_boot_worker;

typedef struct kvn_boot_registry {
    bool dp_known[KVN_BOOT_RANK_MAX];                              /* the dp_rank has an engine */
    char engine_id[KVN_BOOT_RANK_MAX][KVN_BOOT_ENGINE_ID_MAX + 1]; /* fixed by its first registration */
    uint32_t n_workers;
    kvn_boot_worker worker[KVN_BOOT_WORKERS_MAX];                  /* sorted by (dp, tp, pp) */
    uint64_t registered, refused, queries;                         /* counters, for the log */
} kvn_boot_registry;

void kvn_boot_registry_init(kvn_boot_registry *g);

/* The JSON body of a /register: 0 and *out filled, or -1 with why. */
int kvn_boot_payload_parse(const char *body, size_t len, kvn_boot_reg *out, char *why, size_t why_cap);

/* Applies vLLM's rules to one registration: 200 taken, 400 (mismatch,
 * duplicate) or 503 (full) with the detail for the client. */
int kvn_boot_register(kvn_boot_registry *g, const kvn_boot_reg *p, char *detail, size_t detail_cap);

/* The /query document, to f. 0, or -1 when the stream failed. */
int kvn_boot_query_json(kvn_boot_registry *g, FILE *f);

#endif
