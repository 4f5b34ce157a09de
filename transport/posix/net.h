/* transport/posix/net.h — a single-threaded kvt backend (tcp, rdma) made
 * safe for the threaded runtime, plus its progress thread.
 *
 * The backends are written single-threaded (every call, poll included, from
 * one thread at a time). kvp_net wraps one in a kvt whose every op takes one
 * lock, and runs a progress thread that:
 *   - calls the inner poll() under the lock, copies each event (and a ctrl
 *     event's bytes) out before unlocking;
 *   - posts each event into its endpoint owner's mailbox as KVT_MSG_EVENT
 *     (payload: kvt_event, then the ctrl bytes), retrying while that mailbox
 *     is full (never drops an event);
 *   - lets a submit/send_ctrl that finds the backend full wait (bounded)
 *     for the next poll to drain it: back-pressure, not a failed batch;
 *   - when a poll yields nothing, sleeps in poll(2) on the backend's fds
 *     (cfg.pollfds) and a self-pipe that submit/send_ctrl/connect write when
 *     the thread sleeps, for at most idle_wait_ns (the deadline resolution).
 * Actors call the wrapped kvt from their own threads; the progress thread
 * is the only caller of the inner poll().
 *
 * Owner: the creating thread. The inner kvt is owned by the kvp_net from a
 * successful kvp_net_new on and closed by kvp_net_free. */
#ifndef KVCONN_POSIX_NET_H
#define KVCONN_POSIX_NET_H

#include <stdint.h>

#include "kvconn/transport.h"
#include "transport/posix/thread_rt.h"

struct pollfd;

typedef struct kvp_net_cfg {
    kvt *inner;       /* the single-threaded backend */
    kvp_rt *rt;       /* events are posted through it */
    /* Bytes of KVT_EV_CTRL event i of the last inner poll (kvt_tcp_event_data). */
    kv_status (*event_data)(kvt *inner, uint32_t i, const uint8_t **out);
    /* The inner backend's poll(2) set (kvt_tcp_pollfds); NULL: sleep idle_wait_ns. */
    kv_status (*pollfds)(kvt *inner, struct pollfd *out, uint32_t cap, uint32_t *out_n);
    uint64_t idle_wait_ns; /* 0: 2 ms */
    /* submit/send_ctrl that find the send ring or batch table full wait this
     * long for the progress thread to drain it before KV_EFULL (0: 2 s) */
    uint64_t full_wait_ns;
} kvp_net_cfg;

typedef struct kvp_net_counters {
    uint64_t polls, events, sleeps, post_retries;
    uint64_t full_waits, full_fails; /* back-pressure waits; submits still full after full_wait_ns */
} kvp_net_counters;

typedef struct kvp_net kvp_net;

kv_status kvp_net_new(const kv_env *env, const kvp_net_cfg *cfg, kvp_net **out);
/* The thread-safe view the core is given. */
kvt *kvp_net_kvt(kvp_net *n);
kv_status kvp_net_start(kvp_net *n);
/* Joins the progress thread; idempotent. */
void kvp_net_stop(kvp_net *n);
/* NULL-safe: stops, closes the inner kvt, frees. */
void kvp_net_free(kvp_net *n);
void kvp_net_counters_get(kvp_net *n, kvp_net_counters *out);

#endif
