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

/* kv_p2p_sender_saturated of a sender as kv_p2p_sender_new sizes it for an
 * engine of reqs_max requests, holding no entry and no request slot, with
 * pull slot i taken for each bit i of pulls_used. */
bool shim_p2p_sender_saturated_as_built(uint32_t reqs_max, uint32_t pulls_used) {
    static kv_p2p_sender s;
    static bool preq_used[SND_PREQS_MAX];
    memset(&s, 0, sizeof s);
    memset(preq_used, 0, sizeof preq_used);
    s.n_entries = 2u * reqs_max < SND_ENTRIES_MAX ? 2u * reqs_max : SND_ENTRIES_MAX;
    s.n_preqs = preq_pool_size(reqs_max);
    s.preq_used = preq_used;
    for (uint32_t i = 0; i < SND_PULLS_MAX && i < 32u; i++) s.pull[i].used = (pulls_used >> i) & 1u;
    return kv_p2p_sender_saturated(&s);
}
