/* tests/assert_shims/shim_p2p_sched.c — core/p2p_sched.c with its private
 * struct in reach (shims.h). */
#include "core/p2p_sched.c"

#include "tests/assert_shims/shims.h"

/* Group 0 (full attention) told to keep a sliding window's blocks. */
void shim_p2p_sched_window_on_full_group(kv_engine *e) { ((p2p_sched *)e->conn.self)->blocks_per_sw[0] = 3; }

/* Q3-Q4 (p2p_meta_walk) over m, by a scheduler half of engine e as built
 * (no sliding group). */
bool shim_p2p_sched_walk(kv_engine *e, const kv_p2p_meta *m) {
    p2p_sched c = {.e = e};
    c.pending = &c.buf[0];
    return p2p_meta_walk(&c, m);
}
