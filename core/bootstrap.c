/* core/bootstrap.c — bootstrap service actor; see bootstrap.h.
 * REGISTER: a duplicate (engine, rank) is refused ("is already registered"),
 * as is a rank outside the engine's TP size ("Engine ID mismatch").
 * QUERY: found only when every rank of the engine has registered.
 *
 * Invariants (boot_invariants, O(engines), on entry to and return from every
 * message in every build; INV-ASSERT, core/assert.h):
 *   B1 an engine's TP size is 0 (unknown) or 1..KV_TP_MAX;
 *   B2 its registered ranks lie below its TP size (none while unknown);
 *   B3 misses <= queries.
 * Registrations and queries come from other processes: validated and
 * refused (logged), never asserted on. */
#include "core/bootstrap.h"

#include <string.h>

#include "core/assert.h"

#define BOOT_ASSERT(b, cond, ...) KV_ASSERT((b)->env, UINT32_MAX, cond, __VA_ARGS__)

/* B1-B3: O(KV_ENGINES_MAX). */
static bool boot_invariants(const kv_bootstrap *b) {
    for (uint32_t e = 0; e < KV_ENGINES_MAX; e++)
        if (!BOOT_ASSERT(b, b->tp[e] <= KV_TP_MAX && (b->registered[e] >> b->tp[e]) == 0,
                         "bootstrap: engine %u with TP %u has ranks %x registered", e, b->tp[e], b->registered[e]))
            return false;
    return BOOT_ASSERT(b, b->misses <= b->queries, "bootstrap: %llu misses of %llu queries",
                       (unsigned long long)b->misses, (unsigned long long)b->queries);
}

static void on_reg(kv_bootstrap *b, const kv_wire_boot *r) {
    if (r->engine >= KV_ENGINES_MAX || !r->tp_size || r->tp_size > KV_TP_MAX || r->tp_rank >= r->tp_size) {
        kv_logf(b->env, KV_LOG_WARN, "bootstrap: bad registration (engine %u rank %u)", r->engine, r->tp_rank);
        return;
    }
    if (b->tp[r->engine] && b->tp[r->engine] != r->tp_size) {
        kv_logf(b->env, KV_LOG_WARN, "bootstrap: Engine ID mismatch for engine %u", r->engine);
        return;
    }
    if (b->registered[r->engine] & (1u << r->tp_rank)) {
        kv_logf(b->env, KV_LOG_WARN, "bootstrap: engine %u rank %u is already registered", r->engine, r->tp_rank);
        return;
    }
    b->tp[r->engine] = r->tp_size;
    b->registered[r->engine] |= 1u << r->tp_rank;
    b->addr[r->engine][r->tp_rank] = r->addr[0];
}

static void on_query(kv_bootstrap *b, const kv_m_boot_query *q) {
    kv_wire_boot rep;
    memset(&rep, 0, sizeof rep);
    rep.engine = q->engine;
    b->queries++;
    bool down = kv_now_ns(b->env) < b->down_until_ns;
    if (!down && q->engine < KV_ENGINES_MAX && b->tp[q->engine] &&
        b->registered[q->engine] == (1u << b->tp[q->engine]) - 1u) {
        rep.found = 1;
        rep.tp_size = b->tp[q->engine];
        memcpy(rep.addr, b->addr[q->engine], sizeof rep.addr);
    } else {
        b->misses++;
    }
    kv_rt_post(b->rt, q->reply_to, KV_M_BOOT_REPLY, &rep, sizeof rep);
}

static void boot_handle(void *self, const kv_msg *m) {
    kv_bootstrap *b = self;
    kv_owner_check(b->env, &b->owner, UINT32_MAX);
    boot_invariants(b);
    switch (m->kind) {
    case KV_M_BOOT_REG: on_reg(b, m->payload); break;
    case KV_M_BOOT_QUERY: on_query(b, m->payload); break;
    case KV_M_FAULT: {
        const kv_m_fault *f = m->payload;
        if (f->kind == KV_F_BOOT_DOWN) b->down_until_ns = kv_now_ns(b->env) + (uint64_t)f->arg * 1000000u;
        break;
    }
    default: kv_logf(b->env, KV_LOG_WARN, "bootstrap: unexpected message %u", m->kind);
    }
    boot_invariants(b);
}

kv_status kv_bootstrap_new(const kv_env *env, kv_rt *rt, uint32_t node, kv_bootstrap **out) {
    kv_bootstrap *b = kv_alloc(env, sizeof *b);
    if (!b) return KV_ENOMEM;
    b->env = env;
    b->rt = rt;
    kv_status st = kv_rt_spawn(rt, "bootstrap", node, boot_handle, b, 1u << 16, &b->actor);
    if (st != KV_OK) {
        kv_release(env, b);
        return st;
    }
    b->owner = (kv_owner){.actor = b->actor, .what = "bootstrap table"};
    *out = b;
    return KV_OK;
}

void kv_bootstrap_free(kv_bootstrap *b) {
    if (b) kv_release(b->env, b);
}
