/* tests/assert_shims/shim_store_sender.c — core/store_sender.c with its private
 * struct in reach (shims.h). */
#include "core/store_sender.c"

#include "tests/assert_shims/shims.h"

void shim_store_sender_flip_busy(kv_store_sender *x) { x->busy = !x->busy; }
