/* apps/kvnode/boot_registry.c — see boot_registry.h. The detail strings
 * keep vLLM's wording ("Engine ID mismatch", "is already registered"), which
 * its clients and tests match on. */
#include "apps/kvnode/boot_registry.h"

#include <stdarg.h>
#include <string.h>

#include "util/json.h"
#include "util/json_read.h"

#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
static int say(char *out, size_t cap, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(out, cap, fmt, ap);
    va_end(ap);
    return -1;
}

void kvn_boot_registry_init(kvn_boot_registry *g) { memset(g, 0, sizeof *g); }

static int take_str(const kv_jdoc *d, const kv_jnode *o, const char *key, char *dst, size_t max, char *why,
                    size_t cap) {
    const kv_jnode *v = kv_jget(d, o, key);
    if (!v) return say(why, cap, "field '%s' is missing", key);
    if (v->type != KV_J_STR) return say(why, cap, "field '%s' is not a string", key);
    if (v->len > max) return say(why, cap, "field '%s' is longer than %zu bytes", key, max);
    if (memchr(v->str, 0, v->len)) return say(why, cap, "field '%s' holds a NUL character", key);
    memcpy(dst, v->str, v->len);
    dst[v->len] = 0;
    return 0;
}

static int take_rank(const kv_jdoc *d, const kv_jnode *o, const char *key, uint32_t *dst, char *why, size_t cap) {
    const kv_jnode *v = kv_jget(d, o, key);
    if (!v) return say(why, cap, "field '%s' is missing", key);
    if (v->type != KV_J_NUM || !v->is_u64) return say(why, cap, "field '%s' is not a non-negative integer", key);
    if (v->u64 >= KVN_BOOT_RANK_MAX) return say(why, cap, "field '%s' is %llu; kvnode takes 0..%u", key,
                                                (unsigned long long)v->u64, KVN_BOOT_RANK_MAX - 1);
    *dst = (uint32_t)v->u64;
    return 0;
}

int kvn_boot_payload_parse(const char *body, size_t len, kvn_boot_reg *out, char *why, size_t why_cap) {
    kv_jdoc d;
    memset(out, 0, sizeof *out);
    if (kv_jdoc_parse(&d, body, len) != 0) {
        say(why, why_cap, "the body is not JSON: %s at byte %zu", d.err, d.err_at);
        kv_jdoc_free(&d);
        return -1;
    }
    const kv_jnode *o = kv_jdoc_root(&d);
    int rc = -1;
    if (o->type != KV_J_OBJ) say(why, why_cap, "the body is not a JSON object");
    else if (!take_str(&d, o, "engine_id", out->engine_id, KVN_BOOT_ENGINE_ID_MAX, why, why_cap) &&
             !take_rank(&d, o, "dp_rank", &out->dp_rank, why, why_cap) &&
             !take_rank(&d, o, "tp_rank", &out->tp_rank, why, why_cap) &&
             !take_rank(&d, o, "pp_rank", &out->pp_rank, why, why_cap) &&
             !take_str(&d, o, "addr", out->addr, KVN_BOOT_ADDR_MAX, why, why_cap))
        rc = 0;
    kv_jdoc_free(&d);
    return rc;
}

static int rank_cmp(const kvn_boot_worker *w, const kvn_boot_reg *p) {
    if (w->dp != p->dp_rank) return w->dp < p->dp_rank ? -1 : 1;
    if (w->tp != p->tp_rank) return w->tp < p->tp_rank ? -1 : 1;
    if (w->pp != p->pp_rank) return w->pp < p->pp_rank ? -1 : 1;
    return 0;
}

/* The first worker not below p (the insertion point). */
static uint32_t lower_bound(const kvn_boot_registry *g, const kvn_boot_reg *p) {
    uint32_t lo = 0, hi = g->n_workers;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (rank_cmp(&g->worker[mid], p) < 0) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

int kvn_boot_register(kvn_boot_registry *g, const kvn_boot_reg *p, char *detail, size_t cap) {
    uint32_t dp = p->dp_rank;
    if (dp >= KVN_BOOT_RANK_MAX || p->tp_rank >= KVN_BOOT_RANK_MAX || p->pp_rank >= KVN_BOOT_RANK_MAX) {
        g->refused++;
        return say(detail, cap, "a rank is outside 0..%u", KVN_BOOT_RANK_MAX - 1), 400;
    }
    if (g->dp_known[dp] && strcmp(g->engine_id[dp], p->engine_id) != 0) {
        g->refused++;
        return say(detail, cap, "Engine ID mismatch for dp_rank=%u: expected %s, got %s", dp, g->engine_id[dp],
                   p->engine_id),
               400;
    }
    uint32_t at = lower_bound(g, p);
    if (at < g->n_workers && rank_cmp(&g->worker[at], p) == 0) {
        g->refused++;
        return say(detail, cap,
                   "Worker with dp_rank=%u, tp_rank=%u, pp_rank=%u is already registered at %s, but still want "
                   "to register at %s",
                   dp, p->tp_rank, p->pp_rank, g->worker[at].addr, p->addr),
               400;
    }
    if (g->n_workers == KVN_BOOT_WORKERS_MAX) {
        g->refused++;
        return say(detail, cap, "the registry holds %u workers, its most", KVN_BOOT_WORKERS_MAX), 503;
    }
    if (!g->dp_known[dp]) {
        g->dp_known[dp] = true;
        snprintf(g->engine_id[dp], sizeof g->engine_id[dp], "%s", p->engine_id);
    }
    memmove(&g->worker[at + 1], &g->worker[at], (g->n_workers - at) * sizeof g->worker[0]);
    kvn_boot_worker *w = &g->worker[at];
    w->dp = dp;
    w->tp = p->tp_rank;
    w->pp = p->pp_rank;
    snprintf(w->addr, sizeof w->addr, "%s", p->addr);
    g->n_workers++;
    g->registered++;
    snprintf(detail, cap, "ok");
    return 200;
}

static void key_u32(kv_json *j, uint32_t v) {
    char k[16];
    snprintf(k, sizeof k, "%u", v);
    kv_json_key(j, k);
}

int kvn_boot_query_json(kvn_boot_registry *g, FILE *f) {
    kv_json j;
    kv_json_init(&j, f);
    kv_json_obj(&j);
    uint32_t i = 0;
    g->queries++;
    for (uint32_t dp = 0; dp < KVN_BOOT_RANK_MAX; dp++) {
        if (!g->dp_known[dp]) continue;
        key_u32(&j, dp);
        kv_json_obj(&j);
        kv_json_kstr(&j, "engine_id", g->engine_id[dp]);
        kv_json_kobj(&j, "worker_addr");
        while (i < g->n_workers && g->worker[i].dp == dp) {
            uint32_t tp = g->worker[i].tp;
            key_u32(&j, tp);
            kv_json_obj(&j);
            for (; i < g->n_workers && g->worker[i].dp == dp && g->worker[i].tp == tp; i++) {
                key_u32(&j, g->worker[i].pp);
                kv_json_str(&j, g->worker[i].addr);
            }
            kv_json_end(&j);
        }
        kv_json_end(&j);
        kv_json_end(&j);
    }
    kv_json_end(&j);
    return kv_json_done(&j);
}
