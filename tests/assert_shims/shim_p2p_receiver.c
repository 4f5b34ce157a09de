/* tests/assert_shims/shim_p2p_receiver.c — core/p2p_receiver.c with its
 * private struct in reach (shims.h). */
#include "core/p2p_receiver.c"

#include "tests/assert_shims/shims.h"

/* A request slot used but neither staged nor in a batch. */
void shim_p2p_receiver_orphan_request(kv_p2p_receiver *r) {
    for (uint32_t i = r->n_req; i-- > 0;)
        if (!r->req[i].used) {
            memset(&r->req[i], 0, sizeof r->req[i]);
            r->req[i].used = true;
            r->req[i].batch = UINT32_MAX;
            return;
        }
}

/* The receiver's own address loses its terminator: the next pull it
 * encodes is out of the codec's bounds. */
void shim_p2p_receiver_unterminated_addr(kv_p2p_receiver *r) { memset(r->addr.s, 'x', sizeof r->addr.s); }
