/* tests/assert_shims/shim_store_lookup.c — core/store_lookup.c with its private
 * struct in reach (shims.h). */
#include "core/store_lookup.c"

#include "tests/assert_shims/shims.h"

void shim_store_lookup_flip_busy(kv_store_lookup *x) { x->busy = !x->busy; }
