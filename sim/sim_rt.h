/* sim/sim_rt.h — the simulator's single-threaded actor runtime (kv_rt).
 *
 * Mailboxes are byte rings sized at spawn. A post within a node appends at
 * once; a post across nodes becomes a delivery event at now + latency (drawn
 * from the choice stream), FIFO per (source node, destination actor); a
 * post_at is a timer event. Events live in a 4-ary heap ordered by
 * (time, sequence) — never by pointer — with payloads in a per-run arena.
 *
 * The world drives it: sim_rt_deliver_due() moves due events into mailboxes,
 * sim_rt_run_one() lets one runnable actor (chosen by the choice stream)
 * handle one message. Between runs sim_rt_reset() rewinds everything without
 * allocating; actors spawned stay registered. Owner: the world. */
#ifndef KVCONN_SIM_RT_H
#define KVCONN_SIM_RT_H

#include <stdbool.h>
#include <stdint.h>

#include "kvconn/actor.h"
#include "sim/choice.h"

#define SIM_ACTORS_MAX 192u
/* Largest mailbox an actor may ask for. Every actor slot's ring has this
 * capacity from sim_rt_new on (untouched pages cost nothing), so no run's
 * path depends on what earlier runs spawned. */
#define SIM_MAILBOX_MAX (1u << 20)

typedef struct sim_rt_cfg {
    uint32_t events_max;      /* heap entries */
    uint32_t arena_bytes;     /* event payload arena per run */
    uint64_t lat_min_ns;      /* cross-node post latency range */
    uint64_t lat_max_ns;
} sim_rt_cfg;

typedef struct sim_rt sim_rt;

/* Called once per handled message, after the handler ran (trace, checker). */
typedef void (*sim_rt_hook)(void *ctx, uint32_t actor, const kv_msg *m);

/* Called at each post (and post_at: timer) while set, with the id the
 * message gets (1, 2, ... per run) and the actor posting it (KV_ACTOR_NONE:
 * the world). The id comes back at its handling (sim_rt_msg_id). For
 * traces: it changes nothing a run does. NULL (the default) gives no ids. */
typedef void (*sim_rt_post_hook)(void *ctx, uint32_t id, uint32_t from, uint32_t to, uint32_t kind, bool timer);

kv_status sim_rt_new(const kv_env *env, const sim_rt_cfg *cfg, sim_choice *choice, sim_rt **out);
void sim_rt_free(sim_rt *rt);
kv_rt *sim_rt_iface(sim_rt *rt);
void sim_rt_set_hook(sim_rt *rt, sim_rt_hook hook, void *ctx);
void sim_rt_set_post_hook(sim_rt *rt, sim_rt_post_hook hook, void *ctx);
/* The id of the message being handled (valid in the handler and the hook);
 * 0 when it was posted without a post hook. */
uint32_t sim_rt_msg_id(const sim_rt *rt);
/* Empties mailboxes, heap and arena; forgets all actors. */
void sim_rt_reset(sim_rt *rt, sim_choice *choice);
/* Clears the per-pair delivery clocks this run wrote (reset does it too):
 * the world calls it as a run ends, so that no reset's work depends on the
 * run before it. */
void sim_rt_clear_pairs(sim_rt *rt);

/* The virtual clock (the env's now_ns should return this). */
uint64_t sim_rt_now(const sim_rt *rt);
void sim_rt_set_now(sim_rt *rt, uint64_t now_ns);
uint32_t sim_rt_current(const sim_rt *rt);
/* Set the actor the core sees as running while the world itself acts. */
void sim_rt_set_current(sim_rt *rt, uint32_t actor);

/* Earliest pending event time, UINT64_MAX if none. */
uint64_t sim_rt_next_event(const sim_rt *rt);
/* Moves every event due at or before now into mailboxes. */
void sim_rt_deliver_due(sim_rt *rt);
uint32_t sim_rt_runnable(const sim_rt *rt);
/* Runs one message of one runnable actor; false if none is runnable. */
bool sim_rt_run_one(sim_rt *rt);
/* Non-zero when a bounded resource ran out (mailbox, heap, arena): the run
 * is invalid as a test of the core and the world stops it. */
kv_status sim_rt_error(const sim_rt *rt);

/* A crashed process: the actor never runs again; its mail, queued and
 * future (posts and timers), is dropped and counted. Spawning goes on with
 * new ids, so a restarted process is new actors. */
void sim_rt_kill(sim_rt *rt, uint32_t actor);
bool sim_rt_dead(const sim_rt *rt, uint32_t actor);
uint64_t sim_rt_dropped(const sim_rt *rt);

const char *sim_rt_actor_name(const sim_rt *rt, uint32_t actor);
uint32_t sim_rt_actor_node(const sim_rt *rt, uint32_t actor);
uint32_t sim_rt_actor_count(const sim_rt *rt);
uint64_t sim_rt_messages(const sim_rt *rt);

#endif
