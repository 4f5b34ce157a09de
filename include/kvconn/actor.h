/* kvconn/actor.h — actors, mailboxes and the runtime vtable.
 *
 * Each thread of vLLM's connector worker (model-runner main, P sender_loop,
 * D receiver_loop) and the engine scheduler is an actor: a struct of state it
 * alone owns plus one handler. Actors talk only by posting messages; a post
 * copies the payload into the destination's bounded mailbox, so ownership
 * never has to be negotiated. The one exception is a step's frozen
 * scheduler output (connector.h), which the scheduler publishes read-only to
 * its own workers until the step's results are back.
 *
 * The runtime decides who runs next. The simulator's runtime is single
 * threaded and takes that choice from the scenario's choice stream; the
 * production runtime gives each actor a pthread and a locked mailbox. Core
 * code cannot tell them apart. */
#ifndef KVCONN_ACTOR_H
#define KVCONN_ACTOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kvconn/env.h"
#include "kvconn/status.h"

#define KV_ACTOR_NONE UINT32_MAX

/* A message as its handler sees it. payload is valid only during the call. */
typedef struct kv_msg {
    uint32_t kind;        /* message kind; each actor defines its own set */
    uint32_t src;         /* posting actor (KV_ACTOR_NONE: the world/driver) */
    uint32_t len;         /* payload bytes, <= KV_MSG_PAYLOAD_MAX */
    const void *payload;  /* borrowed; copy what you keep */
} kv_msg;

typedef void (*kv_actor_fn)(void *self, const kv_msg *m);

typedef struct kv_rt kv_rt;

typedef struct kv_rt_ops {
    size_t size; /* sizeof(kv_rt_ops) */
    /* Register an actor living on `node` (a process: posts between nodes
     * cross the network and may be delayed; posts within a node are FIFO and
     * immediate). Its mailbox holds up to mailbox_bytes of messages. Called
     * only at start-up. */
    kv_status (*spawn)(kv_rt *rt, const char *name, uint32_t node, kv_actor_fn fn, void *self,
                       uint32_t mailbox_bytes, uint32_t *out_id);
    /* Copy a message into `to`'s mailbox; KV_EFULL if it does not fit. */
    kv_status (*post)(kv_rt *rt, uint32_t to, uint32_t kind, const void *payload, uint32_t len);
    /* Deliver a message to `to` no earlier than at_ns (a timer). */
    kv_status (*post_at)(kv_rt *rt, uint32_t to, uint64_t at_ns, uint32_t kind,
                         const void *payload, uint32_t len);
} kv_rt_ops;

struct kv_rt {
    const kv_rt_ops *ops;
    const kv_env *env; /* borrowed; outlives the runtime */
    void *impl;        /* backend state */
};

static inline kv_status kv_rt_spawn(kv_rt *rt, const char *name, uint32_t node, kv_actor_fn fn,
                                    void *self, uint32_t mailbox_bytes, uint32_t *out_id) {
    return rt->ops->spawn(rt, name, node, fn, self, mailbox_bytes, out_id);
}
static inline kv_status kv_rt_post(kv_rt *rt, uint32_t to, uint32_t kind, const void *p, uint32_t len) {
    return rt->ops->post(rt, to, kind, p, len);
}
static inline kv_status kv_rt_post_at(kv_rt *rt, uint32_t to, uint64_t at_ns, uint32_t kind,
                                      const void *p, uint32_t len) {
    return rt->ops->post_at(rt, to, at_ns, kind, p, len);
}

/* Ownership tag embedded in every actor-owned structure (INV-OWNER).
 * kv_owner_check reports a violation when the running actor is not the
 * owner; it is compiled in checked builds (KVCONN_CHECKED) and costs one
 * compare. */
typedef struct kv_owner {
    uint32_t actor;     /* owning actor id */
    const char *what;   /* structure name, for the report */
} kv_owner;

void kv_owner_check_slow(const kv_env *env, const kv_owner *o, uint32_t engine);

#ifdef KVCONN_CHECKED
#define kv_owner_check(env, o, engine)                                                   \
    do {                                                                                  \
        if ((o)->actor != KV_ACTOR_NONE && kv_current_actor(env) != (o)->actor)          \
            kv_owner_check_slow((env), (o), (engine));                                    \
    } while (0)
#else
#define kv_owner_check(env, o, engine) \
    do {                                \
        (void)(env);                    \
        (void)(o);                      \
        (void)(engine);                 \
    } while (0)
#endif

#endif
