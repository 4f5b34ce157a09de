/* tests/assert_shims/shim_p2p_worker.c — core/p2p_worker.c with its
 * private struct in reach (shims.h). */
#include "core/p2p_worker.c"

#include "tests/assert_shims/shims.h"

kv_p2p_sender *shim_p2p_sender(const kv_worker *w) { return shim_p2p_sender_of(&w->conn); }
kv_p2p_sender *shim_p2p_sender_of(const kv_conn_worker *c) { return ((const p2p_worker *)c->self)->sender; }
kv_p2p_receiver *shim_p2p_receiver(const kv_worker *w) { return ((const p2p_worker *)w->conn.self)->receiver; }
void shim_p2p_worker_forget_sender_actor(kv_worker *w) { ((p2p_worker *)w->conn.self)->sender_actor = KV_ACTOR_NONE; }
