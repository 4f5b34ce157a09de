/* sim/sim_net.h — the simulated network and the "sim" transport backend.
 *
 * One sim_net is the whole network of a simulated world. Each node (one
 * worker process, or the proxy, or the store) gets its own kvt instance from
 * sim_net_node(); its ops implement include/kvconn/transport.h exactly:
 *   - regions are registered per node; remote addressing is (region, offset)
 *     and is bounds-checked at delivery on the destination node (KV_ERANGE
 *     entries count as failed; the batch still completes once);
 *   - an accepted batch yields exactly one KVT_EV_DONE to the submitting
 *     endpoint; a rejected submit yields none;
 *   - deadlines are enforced in progress with the env clock: a batch still
 *     undelivered at its deadline completes KV_ETIMEDOUT and is never applied
 *     afterwards (no late DMA);
 *   - control messages are FIFO per (source ep, destination ep) and are lost
 *     on a connection reset or crash, which also delivers KVT_EV_PEER_DOWN to
 *     the survivors' endpoints that were connected across it.
 * Latencies come from the choice stream, so delivery order across peers is
 * steerable (reordering across peers; never within one pair).
 *
 * Addresses are "sim:<node>/<ep>". The world drives progress: it asks
 * sim_net_next_due() when something is due and calls sim_net_progress(),
 * which returns due events in (due time, sequence) order; the world posts each
 * event to its owner actor as a KVT_MSG_EVENT message (with ctrl bytes
 * appended).
 *
 * All memory is allocated in sim_net_init from the env; sim_net_reset
 * rewinds to the initial state for the next run. Owner: the world. */
#ifndef KVCONN_SIM_NET_H
#define KVCONN_SIM_NET_H

#include <stdint.h>

#include "kvconn/actor.h"
#include "kvconn/env.h"
#include "kvconn/transport.h"
#include "sim/choice.h"

typedef struct sim_net sim_net;

typedef struct sim_net_cfg {
    uint32_t nodes_max;      /* nodes in the world */
    uint32_t eps_max;        /* endpoints per node */
    uint32_t regions_max;    /* regions per node */
    uint32_t packets_max;    /* in-flight batches + ctrl messages, whole net */
    uint32_t ctrl_bytes_max; /* bytes of in-flight ctrl payload, whole net */
    uint64_t lat_min_ns;     /* one-way latency range, drawn per packet */
    uint64_t lat_max_ns;
    uint64_t ns_per_kib;     /* bandwidth term for data */
} sim_net_cfg;

/* Allocates from env; the choice stream is borrowed for the net's lifetime. */
kv_status sim_net_new(const kv_env *env, const sim_net_cfg *cfg, sim_choice *choice, sim_net **out);
void sim_net_free(sim_net *net);
void sim_net_reset(sim_net *net, sim_choice *choice);

/* The kvt of node n (n < nodes_max). Stable for the net's lifetime. */
kvt *sim_net_node(sim_net *net, uint32_t node);

/* Earliest virtual time at which progress has work, UINT64_MAX if none. */
uint64_t sim_net_next_due(const sim_net *net);
/* Processes everything due at or before now; up to max events into out.
 * ctrl payloads are copied into ctrl_buf (ctrl_cap bytes); event i's bytes
 * start at out_ctrl_off[i]. KV_EAGAIN if more remain (call again). */
kv_status sim_net_progress(sim_net *net, kvt_event *out, uint32_t *out_ctrl_off, uint32_t max,
                           uint8_t *ctrl_buf, uint32_t ctrl_cap, uint32_t *out_n);

/* Scratch of sim_net_pump (about 1 MiB: keep it in a long-lived object). */
#define SIM_NET_PUMP_EVENTS 256u
typedef struct sim_net_pump_buf {
    kvt_event ev[SIM_NET_PUMP_EVENTS];
    uint32_t off[SIM_NET_PUMP_EVENTS];
    uint8_t ctrl[1u << 20];
    uint8_t msg[sizeof(kvt_event) + KV_WIRE_MAX]; /* one event + its ctrl bytes, being posted */
} sim_net_pump_buf;
/* What the world does with the network's due events: each one to its
 * endpoint's owner on rt, as a KVT_MSG_EVENT post with the ctrl bytes
 * appended, in order, until none is due. KV_EFULL (after posting the rest)
 * if an event would not fit a mailbox message; never for wire-sized ctrl. */
kv_status sim_net_pump(sim_net *net, kv_rt *rt, sim_net_pump_buf *b);

/* Faults. */
/* The next batch submitted from `node` fails n_fail entries with this
 * provider error (Mooncake TE nonzero return). */
void sim_net_fault_batch(sim_net *net, uint32_t node, int32_t provider_err, uint32_t n_fail);
/* Resets every connection between nodes a and b. */
void sim_net_fault_reset(sim_net *net, uint32_t a, uint32_t b);
/* Node crash: its in-flight traffic is lost, its peers get PEER_DOWN, its
 * regions reject writes (KV_ECONNRESET) until restart. */
void sim_net_fault_crash(sim_net *net, uint32_t node);
void sim_net_fault_restart(sim_net *net, uint32_t node);
/* Silent crash: the node's process is gone but no peer is told (a dead
 * host: no reset comes back). Its own in-flight traffic is lost; sends to
 * it are taken and lost, batches to it time out at their deadlines. A
 * later sim_net_fault_crash is the host coming back: every connection to
 * it resets then (PEER_DOWN to its peers, ECONNRESET for what waits). */
void sim_net_fault_hang(sim_net *net, uint32_t node);
/* Adds extra_ns to every packet sent in the next window_ns (congestion). */
void sim_net_fault_delay(sim_net *net, uint64_t extra_ns, uint64_t window_ns);

typedef struct sim_net_stats {
    uint64_t batches, writes, bytes, ctrl_msgs, range_errors, timeouts, resets;
    /* WRITE entries the destination's grant check refused (also counted in
     * range_errors): through no live grant (revoked: a late write) and
     * violations (a wrong key, another peer, outside the window) */
    uint64_t grant_refused, grant_violations;
} sim_net_stats;

/* The first grant violation of the run (wrong key, another peer, outside
 * the window: an honest sender never makes one), for the checker. */
typedef struct sim_net_grant_violation {
    bool seen;
    uint32_t verdict; /* kvt_grant_verdict (transport/regions.h) */
    uint32_t src, dst; /* nodes */
    uint32_t grant;
    uint64_t off, len, at_ns;
} sim_net_grant_violation;
/* False (out untouched) when the run has none so far. */
bool sim_net_grant_violation_get(const sim_net *net, sim_net_grant_violation *out);
void sim_net_stats_get(const sim_net *net, sim_net_stats *out);

#endif
