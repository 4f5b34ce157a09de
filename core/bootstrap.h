/* core/bootstrap.h — the bootstrap service (vLLM's MooncakeBootstrapServer):
 * P workers register (engine, tp rank) -> sender address; D receivers query
 * an engine and get every rank's address, or "unknown". Owner: its actor. */
#ifndef KVCONN_CORE_BOOTSTRAP_H
#define KVCONN_CORE_BOOTSTRAP_H

#include "core/msgs.h"

typedef struct kv_bootstrap {
    kv_owner owner;
    const kv_env *env;
    kv_rt *rt;
    uint32_t actor;
    uint64_t down_until_ns;               /* fault: answers "unknown" until then */
    uint32_t tp[KV_ENGINES_MAX];          /* 0: engine not registered */
    uint32_t registered[KV_ENGINES_MAX];  /* bit per rank */
    kvt_addr addr[KV_ENGINES_MAX][KV_TP_MAX];
    uint64_t queries, misses;
} kv_bootstrap;

kv_status kv_bootstrap_new(const kv_env *env, kv_rt *rt, uint32_t node, kv_bootstrap **out);
void kv_bootstrap_free(kv_bootstrap *b);

#endif
