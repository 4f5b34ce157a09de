/* tests/assert_shims/shim_p2p_sched.c — core/p2p_sched.c with its private
 * struct in reach (shims.h). */
#include "core/p2p_sched.c"

#include "tests/assert_shims/shims.h"

/* Group 0 (full attention) told to keep a sliding window's blocks. */
void shim_p2p_sched_window_on_full_group(kv_engine *e) { ((p2p_sched *)e->conn.self)->blocks_per_sw[0] = 3; }
