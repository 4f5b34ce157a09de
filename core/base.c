/* core/base.c — status names, logging and violation helpers, small value
 * types (block tables, id lists). Pure functions; no state. */
#include <stdarg.h>
#include <stdio.h> /* vsnprintf only: formatting, no I/O */
#include <string.h>

#include "kvconn/actor.h"
#include "kvconn/connector.h"
#include "kvconn/env.h"
#include "kvconn/status.h"
#include "kvconn/types.h"
#include "core/assert.h"
#include "core/msgs.h"

const char *kv_status_str(kv_status s) {
    switch (s) {
    case KV_OK: return "KV_OK";
    case KV_EINVAL: return "KV_EINVAL";
    case KV_ENOMEM: return "KV_ENOMEM";
    case KV_EFULL: return "KV_EFULL";
    case KV_ENOENT: return "KV_ENOENT";
    case KV_EEXIST: return "KV_EEXIST";
    case KV_ERANGE: return "KV_ERANGE";
    case KV_EPROTO: return "KV_EPROTO";
    case KV_EVERSION: return "KV_EVERSION";
    case KV_ETIMEDOUT: return "KV_ETIMEDOUT";
    case KV_ECANCELED: return "KV_ECANCELED";
    case KV_ECONNRESET: return "KV_ECONNRESET";
    case KV_EIO: return "KV_EIO";
    case KV_ESTATE: return "KV_ESTATE";
    case KV_EAGAIN: return "KV_EAGAIN";
    case KV_ENOSYS: return "KV_ENOSYS";
    }
    return "KV_E(unknown)";
}

const char *kv_inv_name(kv_inv inv) {
    static const char *const names[KV_INV_COUNT] = {
        [KV_INV_CONSERVE] = "INV-CONSERVE", [KV_INV_LEAK] = "INV-LEAK",
        [KV_INV_STRAY] = "INV-STRAY",       [KV_INV_LIVE] = "INV-LIVE",
        [KV_INV_OWNER] = "INV-OWNER",       [KV_INV_SAVE] = "INV-SAVE",
        [KV_INV_DATA] = "INV-DATA",         [KV_INV_SCHED_ASSERT] = "SCHED-ASSERT",
        [KV_INV_OUTCOME] = "INV-OUTCOME",   [KV_INV_HOLD] = "INV-HOLD",
        [KV_INV_ASSERT] = "INV-ASSERT",     [KV_INV_CACHE] = "INV-CACHE",
        [KV_INV_GRANT] = "INV-GRANT",
    };
    return (unsigned)inv < KV_INV_COUNT ? names[inv] : "INV-?";
}

const char *kv_req_status_name(kv_req_status s) {
    static const char *const names[KV_RS_COUNT] = {
        [KV_RS_WAITING] = "WAITING",
        [KV_RS_WAITING_FOR_REMOTE_KVS] = "WAITING_FOR_REMOTE_KVS",
        [KV_RS_RUNNING] = "RUNNING",
        [KV_RS_PREEMPTED] = "PREEMPTED",
        [KV_RS_FINISHED_STOPPED] = "FINISHED_STOPPED",
        [KV_RS_FINISHED_LENGTH_CAPPED] = "FINISHED_LENGTH_CAPPED",
        [KV_RS_FINISHED_ABORTED] = "FINISHED_ABORTED",
        [KV_RS_FINISHED_ERROR] = "FINISHED_ERROR",
    };
    return (unsigned)s < KV_RS_COUNT ? names[s] : "?";
}

void kv_logf(const kv_env *e, kv_log_level level, const char *fmt, ...) {
    if (!e || !e->log) return;
    va_list ap;
    va_start(ap, fmt);
    e->log(e->ctx, level, fmt, ap);
    va_end(ap);
}

void kv_violate(const kv_env *e, kv_inv inv, uint32_t engine, uint32_t req, const char *fmt, ...) {
    char detail[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    kv_violation v = {.inv = inv,
                      .actor = e->current_actor ? kv_current_actor(e) : KV_ACTOR_NONE,
                      .engine = engine,
                      .req = req,
                      .detail = detail};
    e->violation(e->ctx, &v);
}

/* "core/engine.c" from whatever path the compiler was given. */
static const char *short_path(const char *file) {
    const char *last = NULL, *prev = NULL;
    for (const char *p = file; *p; p++)
        if (*p == '/') {
            prev = last;
            last = p;
        }
    return prev ? prev + 1 : file;
}

bool kv_assert_fail(const kv_env *env, uint32_t engine, const char *file, int line, const char *cond,
                    const char *fmt, ...) {
    char what[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    /* kv_violate bounds the whole detail to 256 bytes; the condition text
     * is cut first so the object and its state survive. */
    kv_violate(env, KV_INV_ASSERT, engine, KV_REQ_NONE, "%s:%d: assert(%.72s) failed: %s", short_path(file), line,
               cond, what);
    return false;
}

bool kv_ids_distinct(const uint32_t *id, uint32_t n, uint32_t *a, uint32_t *b) {
    for (uint32_t j = 1; j < n; j++)
        for (uint32_t i = 0; i < j; i++)
            if (id[i] == id[j]) {
                *a = i;
                *b = j;
                return false;
            }
    return true;
}

void kv_owner_check_slow(const kv_env *env, const kv_owner *o, uint32_t engine) {
    kv_violate(env, KV_INV_OWNER, engine, KV_REQ_NONE, "%s owned by actor %u touched by actor %u",
               o->what ? o->what : "structure", o->actor, kv_current_actor(env));
}

bool kv_blocks_any(const kv_block_table *t) {
    for (uint32_t g = 0; g < t->n_groups; g++)
        for (uint32_t i = 0; i < t->n[g]; i++)
            if (t->id[g][i] != KV_NULL_BLOCK) return true;
    return false;
}

uint32_t kv_blocks_count_real(const kv_block_table *t) {
    uint32_t c = 0;
    for (uint32_t g = 0; g < t->n_groups; g++)
        for (uint32_t i = 0; i < t->n[g]; i++) c += t->id[g][i] != KV_NULL_BLOCK;
    return c;
}

void kv_blocks_clear(kv_block_table *t, uint32_t n_groups) {
    memset(t, 0, sizeof *t);
    t->n_groups = n_groups;
}

void kv_blocks_copy(kv_block_table *dst, const kv_block_table *src) {
    dst->n_groups = src->n_groups;
    memcpy(dst->n, src->n, sizeof dst->n);
    for (uint32_t g = 0; g < src->n_groups && g < KV_GROUPS_MAX; g++) {
        uint32_t n = src->n[g] < KV_REQ_BLOCKS_MAX ? src->n[g] : KV_REQ_BLOCKS_MAX;
        memcpy(dst->id[g], src->id[g], n * sizeof dst->id[g][0]);
#ifdef KVCONN_CHECKED
        for (uint32_t i = n; i < KV_REQ_BLOCKS_MAX; i++) dst->id[g][i] = KV_POOL_BLOCKS_MAX + 1u;
#endif
    }
}

bool kv_id_list_has(const kv_id_list *l, uint32_t id) {
    for (uint32_t i = 0; i < l->n; i++)
        if (l->id[i] == id) return true;
    return false;
}

bool kv_id_list_add(kv_id_list *l, uint32_t id) {
    if (kv_id_list_has(l, id)) return true;
    if (l->n >= KV_ENGINE_REQS_MAX) return false;
    l->id[l->n++] = id;
    return true;
}

bool kv_id_list_remove(kv_id_list *l, uint32_t id) {
    for (uint32_t i = 0; i < l->n; i++) {
        if (l->id[i] != id) continue;
        memmove(&l->id[i], &l->id[i + 1], (l->n - i - 1) * sizeof l->id[0]);
        l->n--;
        return true;
    }
    return false;
}

void kv_id_list_copy(kv_id_list *to, const kv_id_list *from) {
    to->n = from->n < KV_ENGINE_REQS_MAX ? from->n : KV_ENGINE_REQS_MAX;
    memcpy(to->id, from->id, to->n * sizeof to->id[0]);
}

void kv_id_list_move(kv_id_list *to, kv_id_list *from) {
    for (uint32_t i = 0; i < from->n; i++) kv_id_list_add(to, from->id[i]);
    from->n = 0;
}

void kv_bad_blocks_move(kv_bad_blocks *to, kv_bad_blocks *from) {
    for (uint32_t i = 0; i < from->n && to->n < KV_BAD_BLOCKS_MAX; i++) to->e[to->n++] = from->e[i];
    from->n = 0;
}

void kv_conn_output_clear(kv_conn_output *o) {
    o->finished_sending.n = 0;
    o->finished_recving.n = 0;
    o->failed_recving.n = 0;
    o->invalid_blocks.n = 0;
}

bool kv_msg_remote_ok(uint32_t kind, uint32_t len) {
    switch (kind) {
    case KV_M_ADD_REQ: return len == sizeof(kv_req_spec);
    case KV_M_ABORT: return len == sizeof(kv_m_abort);
    case KV_M_REQ_DONE: return len == sizeof(kv_m_req_done);
    case KV_M_BOOT_REG: return len == sizeof(kv_wire_boot);
    case KV_M_BOOT_QUERY: return len == sizeof(kv_m_boot_query);
    case KV_M_BOOT_REPLY: return len == sizeof(kv_wire_boot);
    default: return false;
    }
}

const char *kv_msg_kind_name(uint32_t kind) {
    static const char *const names[] = {
        [KV_M_ADD_REQ] = "ADD_REQ",
        [KV_M_ABORT] = "ABORT",
        [KV_M_TICK] = "TICK",
        [KV_M_STEP_RESULT] = "STEP_RESULT",
        [KV_M_EXECUTE] = "EXECUTE",
        [KV_M_REQ_DONE] = "REQ_DONE",
        [KV_M_PROXY_SUBMIT] = "PROXY_SUBMIT",
        [KV_M_PROXY_ABORT] = "PROXY_ABORT",
        [KV_M_BOOT_REG] = "BOOT_REG",
        [KV_M_BOOT_QUERY] = "BOOT_QUERY",
        [KV_M_BOOT_REPLY] = "BOOT_REPLY",
        [KV_M_P2P_RECV_START] = "P2P_RECV_START",
        [KV_M_P2P_RECV_FLUSH] = "P2P_RECV_FLUSH",
        [KV_M_P2P_RECV_TIMEOUT] = "P2P_RECV_TIMEOUT",
        [KV_M_P2P_RECV_DONE] = "P2P_RECV_DONE",
        [KV_M_P2P_SEND_RECORD] = "P2P_SEND_RECORD",
        [KV_M_P2P_NOT_PROCESSED] = "P2P_NOT_PROCESSED",
        [KV_M_P2P_SEND_TIMEOUT] = "P2P_SEND_TIMEOUT",
        [KV_M_P2P_REAP] = "P2P_REAP",
        [KV_M_P2P_SEND_DONE] = "P2P_SEND_DONE",
        [KV_M_FAULT] = "FAULT",
        [KV_M_WAKE] = "WAKE",
        [KV_M_STORE_LOOKUP] = "STORE_LOOKUP",
        [KV_M_STORE_LOOKUP_REPLY] = "STORE_LOOKUP_REPLY",
        [KV_M_STORE_LOOKUP_TIMEOUT] = "STORE_LOOKUP_TIMEOUT",
        [KV_M_STORE_SAVE] = "STORE_SAVE",
        [KV_M_STORE_SAVE_DONE] = "STORE_SAVE_DONE",
        [KV_M_STORE_SAVE_TIMEOUT] = "STORE_SAVE_TIMEOUT",
        [KV_M_STORE_LOAD] = "STORE_LOAD",
        [KV_M_STORE_LOAD_DONE] = "STORE_LOAD_DONE",
        [KV_M_STORE_LOAD_TIMEOUT] = "STORE_LOAD_TIMEOUT",
        [KV_M_PROXY_ENGINE_DOWN] = "PROXY_ENGINE_DOWN",
        [KV_M_PROXY_ENGINE_UP] = "PROXY_ENGINE_UP",
    };
    if (kind == KVT_MSG_EVENT) return "TRANSPORT_EVENT";
    if (kind < sizeof names / sizeof names[0] && names[kind]) return names[kind];
    return "MSG?";
}
