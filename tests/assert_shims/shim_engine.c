/* tests/assert_shims/shim_engine.c — core/engine.c with its private
 * functions in reach (shims.h). */
#include "core/engine.c"

#include "tests/assert_shims/shims.h"

/* merge_result of res[0 .. n) into the step's aggregate, as the ranks'
 * results; whether request id is then in the aggregate's failed_recving.
 * The aggregate is put back as it was, so the run goes on unbroken. */
bool shim_engine_merge_fails(kv_engine *e, const kv_m_step_result *res, uint32_t n, uint32_t id) {
    static kv_conn_output saved;
    saved = e->agg;
    for (uint32_t i = 0; i < n; i++) merge_result(e, &res[i]);
    bool failed = kv_id_list_has(&e->agg.failed_recving, id);
    e->agg = saved;
    return failed;
}

/* delete_req of the live request id, wherever it is queued. */
bool shim_engine_delete(kv_engine *e, uint32_t id) {
    kv_sreq *s = find(e, id);
    if (!s) return false;
    delete_req(e, s);
    return true;
}
