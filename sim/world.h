/* sim/world.h — one simulated deployment: a proxy, a bootstrap service, P
 * and D engines running the real core, the simulated network, a workload, a
 * fault plan and the invariant checker. A run is a pure function of its
 * configuration (and choice bytes): the same config gives the same trace
 * hash on every run, build type and compiler.
 *
 * Memory: sim_world_new allocates one arena; each run rewinds it. */
#ifndef KVCONN_SIM_WORLD_H
#define KVCONN_SIM_WORLD_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "core/engine.h"
#include "core/proxy.h"
#include "sim/sim_store.h"

#define SIM_REQS_MAX 256u
#define SIM_FAULTS_MAX 64u

typedef struct sim_req_plan {
    uint64_t at_ns;           /* client submits at */
    uint32_t p_engine, d_engine; /* indices among P engines / D engines */
    uint32_t prompt_len, max_tokens;
    uint32_t prefix_group, prefix_len;
    uint8_t sequential;       /* proxy contacts D after P answers */
    uint32_t d_extra_tokens;  /* fault: D told a longer prompt ("P has fewer blocks") */
} sim_req_plan;

typedef enum sim_fault_kind {
    SIM_F_ABORT = 1,          /* target: request index */
    SIM_F_SENDER_EXCEPTION,   /* target: P engine: next pull answered with whole ERROR */
    SIM_F_SENDER_ERR_REQ,     /* target: P engine: next response lists err_reqs */
    SIM_F_SENDER_DROP_RESP,   /* target: P engine: next response lost (D times out) */
    SIM_F_BOOT_DOWN,          /* arg: ms the bootstrap answers "unknown" */
    SIM_F_TE_ERROR,           /* target: P engine: next batch fails (TE nonzero:
                               * sim_te_error_code(arg)) */
    SIM_F_NET_RESET,          /* target: P engine, arg: D engine */
    SIM_F_NET_DELAY,          /* arg: extra ms for 50 ms */
    SIM_F_STORE_PUT_FAIL,     /* arg+1 puts fail */
    SIM_F_STORE_GET_FAIL,     /* arg+1 gets fail (every key of them) */
    SIM_F_STORE_EVICT,        /* the store drops its arg+1 oldest keys (missing keys) */
    SIM_F_STORE_PRESSURE,     /* arg+1 puts find no room (NO_AVAILABLE_HANDLE) */
    /* format version 3 on */
    SIM_F_PEER_CRASH,         /* target: engine (P first, then D): its process dies (actors,
                               * transport, KV memory); a new one takes its place arg ms
                               * later (scenario format version 3) */
    /* format version 4 on */
    SIM_F_PEER_HANG,          /* target: engine: its process dies silently (a dead host: no
                               * reset reaches its peers or the proxy, what they send it is
                               * lost, their batches to it time out); arg+1 ms later the host
                               * is back with a new process, and every connection to the old
                               * one resets then (scenario format version 4) */
    /* format version 5 on */
    SIM_F_ABORT_ON_KV,        /* target: request index: armed at its time, the client aborts
                               * the request the moment D's worker hears its KV arrived (a
                               * phase-triggered abort: with the engine's input queue it lands
                               * after the step that reports the KV and before the schedule
                               * that would take it in) */
    /* format version 6 on */
    SIM_F_STORE_CRASH,        /* the store's process dies: connections to it reset, what was
                               * in flight is lost and so is every key it held; a new, empty
                               * one listens at the same address arg+1 ms later (scenario
                               * format version 6) */
    /* format version 7 on */
    SIM_F_STORE_EXISTS_FAIL,  /* the store fails its next arg+1 EXIST calls as a whole (vLLM's
                               * batch_is_exist raising): a save drops its job, a lookup is
                               * a miss (scenario format version 7) */
    SIM_F_KIND_COUNT
} sim_fault_kind;
/* Kinds 1..SIM_F_KIND_COUNT_V2 - 1 are those of scenario format versions 1
 * and 2 (and of the generator's draws before crashes existed); version 3
 * adds peer_crash, version 4 peer_hang, version 5 abort_on_kv, version 6
 * store_crash, version 7 store_exists_fail. */
#define SIM_F_KIND_COUNT_V2 ((uint32_t)SIM_F_PEER_CRASH)
#define SIM_F_KIND_COUNT_V3 ((uint32_t)SIM_F_PEER_HANG)
#define SIM_F_KIND_COUNT_V4 ((uint32_t)SIM_F_ABORT_ON_KV)
#define SIM_F_KIND_COUNT_V5 ((uint32_t)SIM_F_STORE_CRASH)
#define SIM_F_KIND_COUNT_V6 ((uint32_t)SIM_F_STORE_EXISTS_FAIL)
const char *sim_fault_name(uint32_t kind);
/* The transfer engine's return code (kvt_completion.provider_err) for the
 * batch a te_error fault fails; the transport's status is KV_EIO. The codes
 * are the Mooncake transfer engine's (its error.h: invalid argument -1,
 * too many requests -2, address not registered -3, batch busy -4, device
 * not found -6, address overlapped -7, not a local segment -8, DNS -101,
 * socket -102, malformed JSON -103, handshake rejected -104, metadata
 * -200, endpoint -201, context -202, NUMA -300, clock -301, memory -302,
 * not implemented -303); arg picks one (mod SIM_TE_ERROR_CODES), so 0 is
 * -1 (once the code of every te_error, whatever its arg). */
#define SIM_TE_ERROR_CODES 18u
int32_t sim_te_error_code(uint32_t arg);

typedef struct sim_fault {
    uint64_t at_ns;
    uint32_t kind;            /* sim_fault_kind */
    uint32_t target;
    uint32_t arg;
} sim_fault;

typedef struct sim_world_cfg {
    uint64_t seed;
    uint32_t n_p, n_d;
    uint32_t tp_p, tp_d;
    uint32_t n_groups;
    kv_group_cfg group[KV_GROUPS_MAX];
    uint32_t block_size;
    uint32_t pool_blocks_p, pool_blocks_d;
    uint8_t policy;           /* kv_fail_policy */
    bool prefix_caching;
    uint64_t abort_timeout_ns, recv_timeout_ns;
    uint32_t bugs;            /* kv_bug mask */
    uint8_t conn_p, conn_d;   /* kv_conn_kind of the P and of the D engines */
    uint32_t store_capacity;  /* keys the KV store holds (when a connector uses it) */
    uint32_t head_bytes;      /* KV bytes of one attention head in one block: a power of two
                               * 8..4096 (scenario format version 5; 8 before) */
    bool store_lookup_off;    /* the store connectors never look the store up (vLLM's
                               * enable_lookup = false): no store hit, saves as before
                               * (scenario format version 7; on before) */
    uint32_t num_spec;        /* speculative decoding: draft tokens per decode step on every
                               * engine, 0..KV_SPEC_MAX; 0 with a recurrent group (scenario
                               * format version 8; 0 before) */
    uint32_t n_reqs;
    sim_req_plan req[SIM_REQS_MAX];
    uint32_t n_faults;
    sim_fault fault[SIM_FAULTS_MAX];
    const uint8_t *choice;    /* borrowed choice bytes (may be NULL) */
    size_t choice_len;
    uint64_t live_bound_ns;   /* after the last fault/arrival, all must end by then */
    uint32_t reqs_max;        /* engines' request tables (kv_engine_cfg.reqs_max): 0 = as
                               * many as the engine's requests (never binds); not part of
                               * the scenario encodings */
} sim_world_cfg;

/* Fills a sane default topology (1 P, 1 D, TP 1, one full group). */
void sim_world_cfg_default(sim_world_cfg *c);

/* Rare combinations, counted so a reader of a sweep sees how often each
 * was reached (sim_reach_name; the sweep table's "reach" lines). */
typedef enum sim_reach {
    SIM_R_WIDE_HEADS,        /* runs with heads wider than one word (head_bytes > 8) */
    SIM_R_TP_STORE_GET_FAIL, /* runs with TP >= 2, a store connector and a store get failure */
    SIM_R_RECURRENT_LAST,    /* runs whose last KV group is recurrent */
    SIM_R_ABORT_AFTER_RECV,  /* aborts of a request whose KV had arrived, before a schedule took it in */
    SIM_R_EXPIRED_HOLD,      /* P holds that ended by the expiry reap */
    SIM_R_RECURRENT_INNER,   /* runs with a recurrent group before the last position */
    SIM_R_HIT_ALL_BUT_ONE,   /* first schedules of a request on an engine whose local prefix hit is
                              * all but its last token (N - 1) */
    SIM_R_RECURRENT_CONTINUED, /* first schedules on an engine with a recurrent group that continue a
                                * state the request pulled or loaded (computed before > 0) */
    SIM_R_SHORT_TIMEOUTS,    /* runs whose abort timeout (P's ready wait and expiry) is under 1 s */
    SIM_R_HIT_ALL_BUT_ONE_RECURRENT, /* SIM_R_HIT_ALL_BUT_ONE on an engine with a recurrent group */
    SIM_R_EXISTS_FAILED,     /* EXIST calls the store failed (store_exists_fail) */
    SIM_R_LOOKUP_OFF,        /* runs with a store connector and its lookups off */
    SIM_R_SAVER_PREEMPTED,   /* preemptions on an engine whose connector saves to the store (P) */
    SIM_R_RESUMED_HIT,       /* preempted requests that resumed from a local or external hit */
    SIM_R_DRAFTS,            /* draft tokens scheduled (speculative decoding) */
    SIM_R_DRAFTS_REJECTED,   /* of those, rejected and rolled back */
    SIM_R_DRAFT_BLOCKS,      /* steps whose drafts reached into a block past their last token's */
    SIM_R_COUNT
} sim_reach;
const char *sim_reach_name(uint32_t r);

typedef struct sim_result {
    bool violated;
    kv_inv inv;
    uint64_t event;           /* index of the event that broke it */
    uint64_t at_ns;
    uint32_t actor, engine, req;
    char actor_name[32];
    char detail[256];
    uint64_t events;
    uint64_t trace_hash;
    uint64_t end_ns;          /* virtual time when the run stopped (stale timers included) */
    uint64_t last_done_ns;    /* virtual time the last request ended */
    uint64_t armed[KV_INV_COUNT];
    uint64_t requests_ok, requests_error, requests_aborted;
    uint64_t rejected_loads;  /* MultiConnector hits not chosen (rejected speculative loads) */
    uint64_t turned_away;     /* requests an engine refused on arrival (no free slot, cannot fit) */
    uint64_t store_saves, store_loads; /* store jobs the workers issued */
    sim_store_stats store;    /* the KV store's counters (zero without a store) */
    uint64_t fault_phase[SIM_F_KIND_COUNT][KV_PH_COUNT]; /* coverage: fault kind x phase */
    uint64_t reach[SIM_R_COUNT];  /* coverage: rare combinations (sim_reach) */
    kv_status sim_error;      /* a simulator resource ran out (not a core bug) */
} sim_result;

typedef struct sim_world sim_world;

kv_status sim_world_new(sim_world **out);
void sim_world_free(sim_world *w);
/* Tests: fill every scratch allocation (kv_alloc_scratch) with a byte that
 * changes from run to run, so that core code reading scratch before
 * writing it changes the run's trace. */
void sim_world_set_scratch_poison(sim_world *w, bool on);
/* Where every worker's KV blocks live (core/kvmem.h), from the next run on;
 * ops NULL: host (the default). Not part of the scenario: the same scenario
 * must give the same trace with every faithful provider. */
void sim_world_set_kvmem(sim_world *w, kv_kvmem mem);
/* Runs cfg to quiescence or its liveness bound, checks the end, then tears
 * down every process and the bootstrap service and checks their releases
 * (INV-LEAK). trace: optional text trace (a legend first; docs/traces.md). */
kv_status sim_world_run(sim_world *w, const sim_world_cfg *cfg, FILE *trace, sim_result *out);
/* Chrome trace-event JSON of the next runs (Perfetto opens it): processes
 * and actors as tracks, events and the world's actions as slices laid end
 * to end, logs and violations as instants, a flow from each handled
 * message's post to its handling, each request's lifecycle as an async
 * slice (docs/traces.md). NULL turns it off. */
void sim_world_set_json(sim_world *w, FILE *json);
/* Engine i of the run (P engines first), or NULL; after a crash, the
 * process that took its place (or the dead one, if none did). Read-only.
 * After a clean run it has been torn down (kv_engine_free; the arena keeps
 * its memory): its config and counters still read as they ended, its pools
 * do not (sim_world_report keeps their last accounting). */
const kv_engine *sim_world_engine(const sim_world *w, uint32_t i);
/* The proxy of the last run (each request's outcome and times), or NULL
 * before the first. */
const kv_proxy *sim_world_proxy(const sim_world *w);
/* Per-engine pool accounting after the last run (for reports). */
void sim_world_report(const sim_world *w, FILE *out);

#endif
