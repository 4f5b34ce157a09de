/* transport/posix/thread_rt.h — the production kv_rt: one pthread per actor.
 *
 * Actors. spawn() registers an actor with a bounded byte-ring mailbox
 * (mailbox_bytes, as the core asks); kvp_rt_start() gives every registered
 * actor its own thread (an actor spawned after start gets its thread at
 * once). A thread runs only its own actor's handler, one message at a time,
 * so no actor's handler ever runs on two threads at once (the runtime
 * asserts it). post() copies the message into the destination's ring under
 * that mailbox's lock; KV_EFULL when it does not fit (never blocks). Posts
 * from one thread to one actor are FIFO.
 *
 * Timers. post_at() puts the message on a timer heap (bounded, payloads
 * copied); one timer thread sleeps on CLOCK_MONOTONIC until the earliest is
 * due and posts it. A timer whose mailbox is full is retried 1 ms later
 * (counted, logged once), never dropped.
 *
 * Actor ids carry the process: id = proc << 16 | index. A post to an actor
 * of another process goes over the bridge (bridge.c; design in
 * transport/README.md): one TCP link per pair of processes, framed POST
 * messages of raw payload bytes (both ends run the same build; the HELLO
 * carries an ABI tag and a mismatch refuses the link), and a directory of
 * actor names each process publishes so the other side can look ids up by
 * name. A post to a process whose link is down returns KV_ECONNRESET.
 *
 * Hooks. kvp_rt_set_after() runs a function on an actor's thread after each
 * of its messages (a driver waits on its own condition variable instead of
 * polling the actor with calls).
 *
 * Calls. kvp_rt_call() runs a function on an actor's own thread between two
 * of its messages and waits for it: the way a non-actor thread reads actor
 * state without a data race. kvp_rt_stop_world() parks every actor of this
 * process between messages, runs a function, and resumes them: consistent
 * reads of state several actors own (block pool reports, connector state).
 *
 * Owner: the thread that created it (start/stop/free come from it). */
#ifndef KVCONN_POSIX_THREAD_RT_H
#define KVCONN_POSIX_THREAD_RT_H

#include <stdbool.h>
#include <stdint.h>

#include "kvconn/actor.h"

#define KVP_ACTORS_MAX 64u   /* actors per process */
#define KVP_PROCS_MAX 16u    /* processes one bridge knows */
#define KVP_NAME_MAX 32u     /* bytes of an actor name incl. NUL */
#define KVP_ACTOR_ID(proc, idx) (((uint32_t)(proc) << 16) | (uint32_t)(idx))
#define KVP_ACTOR_PROC(id) ((uint32_t)(id) >> 16)
#define KVP_ACTOR_INDEX(id) ((uint32_t)(id) & 0xffffu)

typedef struct kvp_rt_cfg {
    uint32_t proc;          /* this process's id, < KVP_PROCS_MAX */
    uint32_t abi;           /* ABI tag checked at bridge HELLO (same build on both ends) */
    uint32_t timers_max;    /* pending post_at timers (0: 4096) */
    uint32_t timer_big_max; /* timers with payloads > 64 B pending at once (0: 64) */
} kvp_rt_cfg;

typedef struct kvp_rt kvp_rt;

typedef struct kvp_rt_counters {
    uint64_t handled;       /* messages handled by all local actors */
    uint64_t full;          /* posts refused with KV_EFULL */
    uint64_t unreachable;   /* posts to a process with no link */
    uint64_t timer_retries; /* due timers whose mailbox was full */
    uint64_t bridge_in, bridge_out; /* POST frames received / sent */
    uint64_t link_losses;
    uint64_t bridge_refused;  /* POST frames the remote filter refused (kvp_rt_set_remote_filter) */
    uint64_t bridge_auth_failed; /* links closed in their handshake: a wrong proof, a frame out of
                                    order, a secret on one side only, the deadline, or evicted by
                                    a newer one (8 may wait at once) */
} kvp_rt_counters;

kv_status kvp_rt_new(const kv_env *env, const kvp_rt_cfg *cfg, kvp_rt **out);
kv_rt *kvp_rt_iface(kvp_rt *rt);
/* Starts the timer thread and one thread per actor. */
kv_status kvp_rt_start(kvp_rt *rt);
/* Stops and joins every thread (actors finish the message in hand; queued
 * messages are dropped); closes bridge links. Idempotent. */
void kvp_rt_stop(kvp_rt *rt);
/* NULL-safe; stops first. */
void kvp_rt_free(kvp_rt *rt);

typedef void (*kvp_call_fn)(void *arg);
/* Runs fn(arg) on `actor`'s thread and waits (inline when called from that
 * actor's own thread). The actor must be local and started. */
kv_status kvp_rt_call(kvp_rt *rt, uint32_t actor, kvp_call_fn fn, void *arg);
/* Parks every started local actor (but the calling one) between messages,
 * runs fn(arg) on the calling thread, resumes them. */
kv_status kvp_rt_stop_world(kvp_rt *rt, kvp_call_fn fn, void *arg);

typedef void (*kvp_after_fn)(void *arg, const kv_msg *m);
/* fn(arg, m) runs on `actor`'s own thread right after its handler took m
 * (not for calls or parks), with m as the handler saw it: how a non-actor
 * thread learns of a change in actor state without polling for it (kvnode's
 * driver is told of request completions this way). The local actor must not
 * be started yet; one hook per actor (NULL removes it). */
kv_status kvp_rt_set_after(kvp_rt *rt, uint32_t actor, kvp_after_fn fn, void *arg);

/* Looks `name` up among local actors and every directory the bridge has
 * received; waits up to timeout_ns for it to appear. */
kv_status kvp_rt_lookup(kvp_rt *rt, const char *name, uint64_t timeout_ns, uint32_t *out);
/* Local actor name, or "?" ("remote" for another process's actor). */
const char *kvp_rt_actor_name(kvp_rt *rt, uint32_t actor);
void kvp_rt_counters_get(kvp_rt *rt, kvp_rt_counters *out);

/* ---- bridge (bridge.c) ---------------------------------------------------- */
/* Listens for links from other processes on host:port (0: ephemeral). */
kv_status kvp_rt_listen(kvp_rt *rt, const char *host, uint16_t port, uint16_t *out_port);
/* Dials "a.b.c.d:port" and waits up to timeout_ns for the other side's
 * HELLO; *out_proc is its process id. Retries a refused connect until the
 * timeout (the listener may not be up yet), 20 ms after the first refusal,
 * doubling up to 500 ms between tries. */
kv_status kvp_rt_dial(kvp_rt *rt, const char *addr, uint64_t timeout_ns, uint32_t *out_proc);

/* While kvp_rt_dial or kvp_rt_lookup waits, fn is called about once a
 * second (from the waiting thread) with what it waits for, how long it has
 * waited and when it gives up, so a node never sits silent. NULL: quiet. */
typedef void (*kvp_rt_waiting_fn)(void *ctx, const char *what, uint64_t waited_ms, uint64_t limit_ms);
void kvp_rt_set_waiting(kvp_rt *rt, kvp_rt_waiting_fn fn, void *ctx);

/* Which posts another process may make: the bridge asks fn(ctx, kind, len)
 * for every POST frame before it reaches a mailbox, and drops (and counts,
 * and logs: the first 16 per link, then every 1024th) those it refuses, so
 * no handler reads a payload of another size than it expects or a kind
 * that never crosses processes. NULL (the default): every post passes. Set
 * before the first link. */
typedef bool (*kvp_rt_remote_fn)(void *ctx, uint32_t kind, uint32_t len);
void kvp_rt_set_remote_filter(kvp_rt *rt, kvp_rt_remote_fn fn, void *ctx);

/* The cluster secret: every bridge link, listened or dialed, proves it both
 * ways before it is up (bridge.c, top). NULL or an unset key: none. Before
 * the first kvp_rt_listen or kvp_rt_dial (KV_ESTATE after); KV_EIO when the
 * crypto library cannot start. */
struct kv_auth_key;
kv_status kvp_rt_set_secret(kvp_rt *rt, const struct kv_auth_key *key);
/* A link that is not up this long after it opened is closed (default 5000). */
void kvp_rt_set_handshake_deadline_ms(kvp_rt *rt, uint32_t ms);
/* Sends the directory of local actors on every link (links opened later get
 * it with the HELLO). Call after spawning what others must look up. */
kv_status kvp_rt_publish(kvp_rt *rt);
/* on: a link that comes up gets no directory until the next kvp_rt_publish
 * (with or without a secret), so a process that links again (kvnode's
 * engines after a proxy restart) decides when the other side learns its
 * actors: after it has pointed them at the new peer. Off by default. */
void kvp_rt_set_dir_on_publish(kvp_rt *rt, bool on);
bool kvp_rt_link_up(kvp_rt *rt, uint32_t proc);

#endif
