/* tests/assert_shims/shim_worker.c — core/worker.c with its forward pass in
 * reach (shims.h). */
#include "core/worker.c"

#include "tests/assert_shims/shims.h"

void shim_worker_forward(kv_worker *w, const kv_step *st) { forward(w, st); }
