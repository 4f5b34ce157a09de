/* apps/kvnode/proxy_link.h — an engine's link to the proxy's process: the
 * first dial, P's relay in front of the proxy's bootstrap actor, and what
 * happens when the link is lost (proxy_link.c; docs/kvnode.md, "A proxy
 * restart"):
 *
 *   lost -> end what the old proxy sent (every request it had sent is
 *   aborted through the scheduler's own ABORT, completions go nowhere) ->
 *   wait until the engine holds nothing (no live request, no connector
 *   state, every block free) -> redial the proxy's address -> HELLO (and
 *   the secret's proof) -> look up the new proxy's actors -> point the core
 *   at them (with every actor parked) -> P: register its ranks again with
 *   the new bootstrap -> publish this process's actors.
 *
 * The whole of it is bounded by --proxy-wait-ms (0: exit 11 at once, as
 * before); running out is exit 11. The link keeps the engine's directory
 * back until the publish (kvp_rt_set_dir_on_publish), so the new proxy
 * cannot dispatch to the engine before the engine answers to it. Owner: the
 * engine's main thread; the relay's fields as marked. */
#ifndef KVCONN_APPS_KVNODE_PROXY_LINK_H
#define KVCONN_APPS_KVNODE_PROXY_LINK_H

#include <pthread.h>

#include "apps/kvnode/kvnode.h"
#include "core/msgs.h"

typedef struct kvn_plink {
    kvp_rt *rt;              /* borrowed */
    const kv_env *env;       /* borrowed */
    const kvn_opts *o;       /* borrowed */
    const char *tag;         /* "P0", "D1" */
    kv_engine *eng;          /* borrowed, once built */
    uint32_t admin;          /* this engine's admin actor (SHUTDOWN lands there) */
    const _Atomic bool *shutdown; /* set by the admin actor on SHUTDOWN */
    uint32_t proxy, boot;    /* the proxy's actors of the current link */
    uint32_t takes;          /* proxies taken after the first */
    /* P: the relay the senders register through (KV_ACTOR_NONE on D) */
    uint32_t relay;
    uint32_t relay_to;       /* where it forwards: its thread reads it; written with it parked */
    pthread_mutex_t mu;      /* guards n_regs, regs (the relay writes, the main thread reads) */
    uint32_t n_regs;
    kv_wire_boot regs[KV_TP_MAX];
} kvn_plink;

void kvn_plink_init(kvn_plink *l, kvp_rt *rt, const kv_env *env, const kvn_opts *o, const char *tag);
/* Dials --proxy and looks up its "proxy" and "bootstrap" actors (waits up
 * to timeout_ns in all). */
kv_status kvn_plink_dial(kvn_plink *l, uint64_t timeout_ns);
/* The bootstrap actor the engine's core should post to: on P a relay
 * actor spawned here on `node` (it forwards to the proxy's and keeps a copy
 * of each rank's REGISTER), on D the proxy's own. */
kv_status kvn_plink_relay(kvn_plink *l, uint32_t node, uint32_t *boot);
/* P: waits (up to ms) until the relay has passed on tp REGISTERs; copies
 * them to out (may be NULL) and returns how many it has. */
uint32_t kvn_plink_registered(kvn_plink *l, uint32_t tp, uint32_t ms, kv_wire_boot *out);
/* The link to the proxy is gone: true once a new proxy was taken; false
 * with *rc EXIT_CLEAN when the proxy had told the engine to shut down just
 * before it went (*shutdown is set), EXIT_PEER_LOST when no proxy came
 * within --proxy-wait-ms or the engine could not end what it held by then.
 * Logs every step. */
bool kvn_plink_lost(kvn_plink *l, int *rc);

#endif
