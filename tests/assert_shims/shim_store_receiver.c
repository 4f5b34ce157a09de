/* tests/assert_shims/shim_store_receiver.c — core/store_receiver.c with its private
 * struct in reach (shims.h). */
#include "core/store_receiver.c"

#include "tests/assert_shims/shims.h"

void shim_store_receiver_flip_busy(kv_store_receiver *x) { x->busy = !x->busy; }
