/* sim/sim_store.h — the simulated KV store (Mooncake store's role): one
 * actor with one transport endpoint, keyed by kv_store_key, holding block
 * bytes, answering STORE_EXIST / PUT / GET control messages (kvconn/wire.h).
 *
 * Capacity is in keys; a put of a new key into a full store evicts the
 * least recently used one. Faults (KV_M_FAULT from the world): put failure,
 * get failure, eviction of the oldest keys (later gets miss), pool pressure
 * (puts answered KV_STORE_NO_HANDLE). A crash (the world's store_crash
 * fault) takes every key with the process; the restart is a new, empty
 * process at the same address. Memory comes from the env (the world's
 * per-run arena). */
#ifndef KVCONN_SIM_STORE_H
#define KVCONN_SIM_STORE_H

#include "kvconn/actor.h"
#include "kvconn/transport.h"
#include "kvconn/wire.h"

#define SIM_STORE_CAPACITY_MAX 4096u

typedef struct sim_store_stats {
    uint64_t puts, put_keys, gets, get_hits, get_misses, exists, evictions, failures;
    uint64_t exist_keys;          /* keys the EXISTs asked about */
    uint64_t exist_failures;      /* EXISTs failed as a whole (store_exists_fail; in failures too) */
    uint64_t crashes, crash_keys; /* crashes, and the keys they took (counted in evictions too) */
} sim_store_stats;

typedef struct sim_store sim_store;

/* Spawns the store actor on `node` with an endpoint on transport t. */
kv_status sim_store_new(const kv_env *env, kv_rt *rt, kvt *t, uint32_t node, uint32_t capacity, sim_store **out);
void sim_store_free(sim_store *s);
const kvt_addr *sim_store_addr(const sim_store *s);
uint32_t sim_store_actor(const sim_store *s);
const sim_store_stats *sim_store_get_stats(const sim_store *s);
uint32_t sim_store_keys(const sim_store *s);
/* The store's process died (the world has killed its actor and crashed
 * its node): every key goes with it (counted as evicted: a lookup's
 * promise is void), and so do the armed faults. */
void sim_store_crash(sim_store *s);
/* A new process: a new actor on the same node, listening at the same
 * address, empty. KV_EEXIST if its address would differ (the node's
 * endpoint was taken), or the spawn's error (no room for an actor). */
kv_status sim_store_restart(sim_store *s);
/* Does the store hold key k now? (the checker's read, between events) */
bool sim_store_has(const sim_store *s, kv_store_key k);

#endif
