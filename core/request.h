/* core/request.h — request status transitions (see core/request.c). */
#ifndef KVCONN_CORE_REQUEST_H
#define KVCONN_CORE_REQUEST_H

#include <stdbool.h>

#include "kvconn/connector.h"
#include "kvconn/env.h"

bool kv_req_edge_ok(kv_req_status from, kv_req_status to);
/* The only way a request's status changes. An edge not in the diagram is a
 * scheduler assertion (reported) and leaves the status unchanged. */
bool kv_req_set_status(const kv_env *env, uint32_t engine, kv_req *r, kv_req_status to);
/* R1-R4 of core/request.c, each an INV-ASSERT (core/assert.h) naming the
 * request; true when all hold. O(groups). */
bool kv_req_invariants(const kv_env *env, uint32_t engine, const kv_req *r);

#endif
