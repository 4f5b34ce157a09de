/* transport/rdma/qps.c — the per-QP RDMA WRITE batch engine; see rdma.h.
 *
 * Batch states:  FREE --submit--> POSTED --last WR completion--> FREE (one completion out)
 * wr_id = gen << 17 | batch << 7 | entry  (gen: the batch slot's generation,
 * so a completion for a recycled slot is recognised and dropped).
 * Invariants: peer.outstanding == WRs of the peer posted and not completed;
 * a batch's done <= n; exactly one kvt_completion per accepted batch. */
#include "transport/rdma/rdma.h"

#include <string.h>

#include "transport/regions.h"

enum { RB_FREE = 0, RB_POSTED = 1 };

typedef struct rq_peer {
    bool used, connected;
    void *qp;                 /* the binding's QP; owned through verbs */
    kvt_rdma_qp_info info;
    uint32_t outstanding;     /* WRs in flight */
    uint32_t root_status;     /* first non-flush error on this QP (KVT_WC_*), 0: none */
    uint32_t root_vendor;
    uint32_t n_regions;
    kvt_rdma_remote_region region[KVT_RDMA_REGIONS_MAX];
} rq_peer;

typedef struct rq_batch {
    uint32_t state;
    uint32_t gen;
    kvt_peer peer;
    uint32_t n, done, ok;
    uint32_t first_status, first_vendor; /* the batch's own first non-flush error */
    uint64_t tag;
} rq_batch;

struct kvt_rdma_qps {
    const kv_env *env;        /* borrowed */
    const kvt_rdma_verbs *v;  /* borrowed */
    uint32_t max_outstanding;
    kvt_region_entry reg_store[KVT_RDMA_LOCAL_MAX];
    kvt_region_tab reg;
    kvt_rdma_mr mr[KVT_RDMA_LOCAL_MAX]; /* by reg[] slot */
    rq_peer peer[KVT_RDMA_QPS_MAX];
    rq_batch batch[KVT_RDMA_BATCHES_MAX];
    kvt_rdma_wc wc[KVT_RDMA_WC_BATCH];
};

#define WR_ID(gen, b, e) (((uint64_t)(gen) << 17) | ((uint64_t)(b) << 7) | (uint64_t)(e))
#define WR_BATCH(id) ((uint32_t)(((id) >> 7) & 0x3ffu))
#define WR_GEN(id) ((uint32_t)((id) >> 17))

kv_status kvt_rdma_wc_status(uint32_t s) {
    switch (s) {
    case KVT_WC_SUCCESS: return KV_OK;
    case KVT_WC_REM_ACCESS_ERR:
    case KVT_WC_LOC_PROT_ERR: return KV_ERANGE;
    case KVT_WC_RETRY_EXC_ERR:
    case KVT_WC_RNR_RETRY_EXC_ERR: return KV_ECONNRESET;
    default: return KV_EIO;
    }
}

kv_status kvt_rdma_qps_new(const kv_env *env, const kvt_rdma_verbs *verbs, uint32_t max_outstanding,
                           kvt_rdma_qps **out) {
    if (!env || !verbs || !out || max_outstanding == 0 || verbs->size < sizeof(kvt_rdma_verbs)) return KV_EINVAL;
    kvt_rdma_qps *q = kv_alloc(env, sizeof *q);
    if (!q) return KV_ENOMEM;
    memset(q, 0, sizeof *q);
    q->env = env;
    q->v = verbs;
    q->max_outstanding = max_outstanding;
    kvt_region_tab_init(&q->reg, q->reg_store, KVT_RDMA_LOCAL_MAX);
    *out = q;
    return KV_OK;
}

void kvt_rdma_qps_free(kvt_rdma_qps *q) {
    if (!q) return;
    for (uint32_t i = 0; i < KVT_RDMA_QPS_MAX; i++)
        if (q->peer[i].used && q->peer[i].qp) q->v->destroy_qp(q->v->ctx, q->peer[i].qp);
    for (uint32_t i = 0; i < q->reg.hw; i++)
        if (q->reg.e[i].used) q->v->dereg_mr(q->v->ctx, &q->mr[i]);
    kv_release(q->env, q);
}

static uint32_t reg_slot(kvt_rdma_qps *q, kvt_region id) {
    const kvt_region_entry *r = kvt_region_find(&q->reg, id);
    return r ? kvt_region_slot(&q->reg, r) : UINT32_MAX;
}

static kv_status reg_access(kvt_rdma_qps *q, void *base, uint64_t len, uint32_t access, kvt_region *out) {
    if (!base || !len || !out) return KV_EINVAL;
    kvt_rdma_mr mr;
    kv_status st = q->v->reg_mr(q->v->ctx, base, len, access, &mr);
    if (st != KV_OK) return st;
    st = kvt_region_add(&q->reg, base, len, out);
    if (st != KV_OK) {
        q->v->dereg_mr(q->v->ctx, &mr);
        return st;
    }
    q->mr[reg_slot(q, *out)] = mr;
    return KV_OK;
}

kv_status kvt_rdma_reg(kvt_rdma_qps *q, void *base, uint64_t len, kvt_region *out) {
    return reg_access(q, base, len, KVT_RDMA_ACCESS_LOCAL, out);
}

kv_status kvt_rdma_reg_remote(kvt_rdma_qps *q, void *base, uint64_t len, kvt_region *out) {
    return reg_access(q, base, len, KVT_RDMA_ACCESS_REMOTE_WRITE, out);
}

kv_status kvt_rdma_dereg(kvt_rdma_qps *q, kvt_region r) {
    uint32_t s = reg_slot(q, r);
    if (s == UINT32_MAX) return KV_ENOENT;
    q->v->dereg_mr(q->v->ctx, &q->mr[s]);
    return kvt_region_remove(&q->reg, r);
}

kv_status kvt_rdma_export(kvt_rdma_qps *q, kvt_region r, kvt_rdma_remote_region *out) {
    uint32_t s = reg_slot(q, r);
    if (s == UINT32_MAX || !out) return KV_ENOENT;
    *out = (kvt_rdma_remote_region){.id = r, .addr = q->mr[s].addr, .len = q->reg.e[s].len, .rkey = q->mr[s].rkey};
    return KV_OK;
}

kv_status kvt_rdma_peer_new(kvt_rdma_qps *q, kvt_peer *out, kvt_rdma_qp_info *info) {
    for (uint32_t i = 0; i < KVT_RDMA_QPS_MAX; i++) {
        rq_peer *p = &q->peer[i];
        if (p->used) continue;
        memset(p, 0, sizeof *p);
        kv_status st = q->v->create_qp(q->v->ctx, q->max_outstanding, &p->qp, &p->info);
        if (st != KV_OK) return st;
        p->used = true;
        *out = i;
        if (info) *info = p->info;
        return KV_OK;
    }
    return KV_ENOMEM;
}

kv_status kvt_rdma_peer_connect(kvt_rdma_qps *q, kvt_peer pi, const kvt_rdma_qp_info *remote,
                                const kvt_rdma_remote_region *regions, uint32_t n_regions) {
    if (pi >= KVT_RDMA_QPS_MAX || !q->peer[pi].used) return KV_ENOENT;
    if (!remote || n_regions > KVT_RDMA_REGIONS_MAX || (n_regions && !regions)) return KV_EINVAL;
    rq_peer *p = &q->peer[pi];
    kv_status st = q->v->connect_qp(q->v->ctx, p->qp, remote);
    if (st != KV_OK) return st;
    memcpy(p->region, regions, n_regions * sizeof *regions);
    p->n_regions = n_regions;
    p->connected = true;
    p->root_status = 0;
    return KV_OK;
}

kv_status kvt_rdma_peer_region(kvt_rdma_qps *q, kvt_peer pi, const kvt_rdma_remote_region *add, kvt_region del) {
    if (pi >= KVT_RDMA_QPS_MAX || !q->peer[pi].used) return KV_ENOENT;
    rq_peer *p = &q->peer[pi];
    for (uint32_t i = 0; i < p->n_regions; i++) {
        kvt_region id = p->region[i].id;
        if (id != del && !(add && id == add->id)) continue;
        p->region[i--] = p->region[--p->n_regions]; /* order is not kept: lookups are by id */
    }
    if (!add) return KV_OK;
    if (p->n_regions == KVT_RDMA_REGIONS_MAX) return KV_ENOMEM;
    p->region[p->n_regions++] = *add;
    return KV_OK;
}

static const kvt_rdma_remote_region *remote_find(const rq_peer *p, kvt_region id) {
    for (uint32_t i = 0; i < p->n_regions; i++)
        if (p->region[i].id == id) return &p->region[i];
    return NULL;
}

/* Every entry checked before anything is posted. */
static kv_status check_batch(kvt_rdma_qps *q, const rq_peer *p, const kvt_write *w, uint32_t n) {
    for (uint32_t i = 0; i < n; i++) {
        uint32_t s = reg_slot(q, w[i].local);
        if (s == UINT32_MAX || !kvt_range_ok(&q->reg.e[s], w[i].local_off, w[i].len)) return KV_ERANGE;
        const kvt_rdma_remote_region *r = remote_find(p, w[i].remote);
        if (!r || w[i].remote_off > r->len || w[i].len > r->len - w[i].remote_off) return KV_ERANGE;
    }
    return KV_OK;
}

kv_status kvt_rdma_submit(kvt_rdma_qps *q, kvt_peer pi, const kvt_write *w, uint32_t n, uint64_t tag) {
    if (!w || n == 0 || n > KVT_BATCH_WRITES_MAX) return KV_EINVAL;
    if (pi >= KVT_RDMA_QPS_MAX || !q->peer[pi].used || !q->peer[pi].connected) return KV_ENOENT;
    rq_peer *p = &q->peer[pi];
    kv_status st = check_batch(q, p, w, n);
    if (st != KV_OK) return st;
    if (p->outstanding + n > q->max_outstanding) return KV_EFULL;
    uint32_t bi = UINT32_MAX;
    for (uint32_t i = 0; i < KVT_RDMA_BATCHES_MAX && bi == UINT32_MAX; i++)
        if (q->batch[i].state == RB_FREE) bi = i;
    if (bi == UINT32_MAX) return KV_EFULL;
    rq_batch *b = &q->batch[bi];
    uint32_t gen = (b->gen + 1u) & 0x7fffffu;
    *b = (rq_batch){.state = RB_POSTED, .gen = gen, .peer = pi, .n = n, .tag = tag};
    for (uint32_t i = 0; i < n; i++) {
        uint32_t s = reg_slot(q, w[i].local);
        const kvt_rdma_remote_region *r = remote_find(p, w[i].remote);
        st = q->v->post_write(q->v->ctx, p->qp, WR_ID(gen, bi, i), q->mr[s].addr + w[i].local_off, q->mr[s].lkey,
                              r->addr + w[i].remote_off, (uint32_t)w[i].key.w[0], w[i].len);
        if (st != KV_OK) {
            if (i == 0) { /* nothing posted: refused, completes never */
                b->state = RB_FREE;
                return st;
            }
            /* Entries not posted count as done and failed; the posted ones
             * complete on the CQ and the batch completes once, KV_EIO. */
            b->done += n - i;
            b->first_status = KVT_WC_GENERAL_ERR;
            kv_logf(q->env, KV_LOG_ERROR, "rdma: post_write failed at entry %u of %u: %s", i, n, kv_status_str(st));
            return KV_OK;
        }
        p->outstanding++;
    }
    return KV_OK;
}

static void complete(kvt_rdma_qps *q, rq_batch *b, kvt_completion *out, kvt_peer *out_peer) {
    const rq_peer *p = &q->peer[b->peer];
    uint32_t raw = b->first_status ? b->first_status : p->root_status;
    uint32_t vendor = b->first_status ? b->first_vendor : p->root_vendor;
    kv_status st = b->ok == b->n ? KV_OK : raw ? kvt_rdma_wc_status(raw) : KV_ECONNRESET;
    *out = (kvt_completion){.tag = b->tag, .n_ok = b->ok, .n_failed = b->n - b->ok,
                            .provider_err = b->ok == b->n ? 0 : (int32_t)(raw | (vendor << 16)), .status = st};
    if (out_peer) *out_peer = b->peer;
    b->state = RB_FREE;
}

/* One work completion; true if it finished a batch (written to *out). */
static bool on_wc(kvt_rdma_qps *q, const kvt_rdma_wc *wc, kvt_completion *out, kvt_peer *out_peer) {
    rq_batch *b = &q->batch[WR_BATCH(wc->wr_id)];
    if (b->state != RB_POSTED || b->gen != WR_GEN(wc->wr_id)) {
        kv_logf(q->env, KV_LOG_WARN, "rdma: completion for an unknown work request %#llx dropped",
                (unsigned long long)wc->wr_id);
        return false;
    }
    rq_peer *p = &q->peer[b->peer];
    if (p->outstanding) p->outstanding--;
    b->done++;
    if (wc->status == KVT_WC_SUCCESS) {
        b->ok++;
    } else if (wc->status != KVT_WC_WR_FLUSH_ERR) { /* a cause, not a knock-on */
        if (!b->first_status) {
            b->first_status = wc->status;
            b->first_vendor = wc->vendor_err;
        }
        if (!p->root_status) {
            p->root_status = wc->status;
            p->root_vendor = wc->vendor_err;
            kv_logf(q->env, KV_LOG_ERROR, "rdma: QP %u error: wc status %u vendor %#x (%s); later WRs flush",
                    wc->qp_num, wc->status, wc->vendor_err, kv_status_str(kvt_rdma_wc_status(wc->status)));
        }
    }
    if (b->done < b->n) return false;
    complete(q, b, out, out_peer);
    return true;
}

kv_status kvt_rdma_poll(kvt_rdma_qps *q, kvt_completion *out, kvt_peer *out_peer, uint32_t max, uint32_t *out_n) {
    if (!out_n || (max && !out)) return KV_EINVAL;
    *out_n = 0;
    /* Batches whose every entry was accounted at submit (all unposted). */
    for (uint32_t i = 0; i < KVT_RDMA_BATCHES_MAX && *out_n < max; i++) {
        rq_batch *b = &q->batch[i];
        if (b->state == RB_POSTED && b->done == b->n) {
            complete(q, b, &out[*out_n], out_peer ? &out_peer[*out_n] : NULL);
            (*out_n)++;
        }
    }
    while (*out_n < max) {
        uint32_t room = max - *out_n, got = 0; /* one wc finishes at most one batch */
        if (room > KVT_RDMA_WC_BATCH) room = KVT_RDMA_WC_BATCH;
        kv_status st = q->v->poll_cq(q->v->ctx, q->wc, room, &got);
        if (st != KV_OK) return st;
        for (uint32_t i = 0; i < got; i++)
            if (on_wc(q, &q->wc[i], &out[*out_n], out_peer ? &out_peer[*out_n] : NULL)) (*out_n)++;
        if (got < room) break;
    }
    return KV_OK;
}

uint32_t kvt_rdma_outstanding(const kvt_rdma_qps *q, kvt_peer p) {
    return p < KVT_RDMA_QPS_MAX && q->peer[p].used ? q->peer[p].outstanding : 0;
}
