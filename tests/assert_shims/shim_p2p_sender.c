/* tests/assert_shims/shim_p2p_sender.c — core/p2p_sender.c with its
 * private struct in reach (shims.h). */
#include "core/p2p_sender.c"

#include "tests/assert_shims/shims.h"

/* A request slot marked used that no pull holds: the pool leaks it. */
void shim_p2p_sender_leak_request_slot(kv_p2p_sender *s) {
    for (uint32_t i = s->n_preqs; i-- > 0;)
        if (!s->preq_used[i]) {
            s->preq_used[i] = true;
            return;
        }
}
