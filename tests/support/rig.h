/* tests/support/rig.h — the simulator's runtime and network without a
 * world, for tests that build one core object alone (an engine, a proxy, a
 * store sender on a stand-in worker) and drive it message by message.
 *
 * Everything runs in one test_env (rig.te): its heap counts and can refuse
 * allocations, its violations are recorded; its clock and running actor are
 * the runtime's. The core sees the runtime through rig.rt, which can refuse
 * one spawn (an actor table with no room left). Node RIG_STORE_NODE may hold
 * the simulated KV store. */
#ifndef KVCONN_TEST_RIG_H
#define KVCONN_TEST_RIG_H

#include <stdbool.h>

#include "kvconn/actor.h"
#include "sim/choice.h"
#include "sim/sim_net.h"
#include "sim/sim_rt.h"
#include "sim/sim_store.h"
#include "tests/support/test_env.h"

#define RIG_NODES 8u
#define RIG_STORE_NODE (RIG_NODES - 1u)

typedef struct rig {
    test_env te;             /* first: the env's ctx is the rig */
    sim_choice choice;
    sim_rt *sim;
    sim_net *net;
    sim_store *store;        /* NULL until rig_add_store */
    kv_rt rt;                /* what the core is given: sim's, with fail_spawn */
    uint64_t spawns;         /* spawns asked for through rt (refused ones too) */
    uint64_t fail_spawn;     /* the spawn with this number is refused (KV_ENOMEM); 0: none */
    sim_net_pump_buf pump;   /* the world's delivery of network events (sim_net_pump) */
} rig;

/* A runtime and a network (nc NULL: the world's settings). Static or heap
 * storage: the rig is large. */
void rig_init(rig *r, const sim_net_cfg *nc);
void rig_free(rig *r);
/* Forgets every actor, message and connection (not the store: call before
 * rig_add_store). */
void rig_reset(rig *r);
/* The simulated KV store on RIG_STORE_NODE; its address is *addr. */
void rig_add_store(rig *r, uint32_t capacity, kvt_addr *addr);
/* A network endpoint's due events into its owner's mailbox, due messages
 * into mailboxes, and one message handled; when none is runnable, the clock
 * moves to the next due event. False when nothing is left to do. */
bool rig_step(rig *r);
/* rig_step until nothing is left or until `until` returns true. */
void rig_run(rig *r, bool (*until)(void *ctx), void *ctx);

/* A test actor that keeps the messages it gets (kind and the first bytes). */
#define RIG_SINK_MAX 64u
typedef struct rig_sink {
    uint32_t actor;
    uint32_t n;
    uint32_t kind[RIG_SINK_MAX];
    uint8_t payload[RIG_SINK_MAX][512];
} rig_sink;
void rig_sink_spawn(rig *r, rig_sink *s, const char *name, uint32_t node);
/* Messages of this kind the sink got. */
uint32_t rig_sink_count(const rig_sink *s, uint32_t kind);

#endif

/* ---- an engine alone ---------------------------------------------------------- */

#include "core/engine.h"

/* Engine 0 on node 0, its ranks on nodes 1..tp: one full-attention group,
 * a small pool, no proxy and no bootstrap service to tell. */
kv_engine_cfg rig_engine_cfg(uint8_t role, uint32_t tp);
/* Builds it on a freshly reset rig (KV_OK, or the constructor's error). */
kv_status rig_engine_new(rig *r, const kv_engine_cfg *cfg, kv_conn_kind kind, kv_engine **out);

/* A constructor's failure paths: the engine built once per allocation its
 * construction makes, with that one allocation refused, then once per spawn
 * with that one spawn refused. After each, what it built is freed (if it
 * was built) and every allocation must have been given back. */
typedef struct rig_failures {
    bool built;               /* the construction with nothing refused succeeded */
    uint64_t allocs, spawns;  /* a whole construction's */
    uint64_t failed;          /* constructions that failed */
    char first_leak[128];     /* "" or which refusal left what behind */
    char first_built[64];     /* "" or the first refusal the construction succeeded despite */
} rig_failures;
rig_failures rig_engine_failures(rig *r, const kv_engine_cfg *cfg, kv_conn_kind kind);
