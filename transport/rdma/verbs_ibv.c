/* transport/rdma/verbs_ibv.c — kvt_rdma_verbs bound to libibverbs
 * (rdma-core). Built only with -DKVCONN_RDMA=ON (pkg-config libibverbs);
 * runs only where an RDMA NIC (or rxe/siw soft-RoCE) exists. Every call the
 * batch engine makes goes through the ops table, so the error paths are
 * tested with a fake (tests/test_rdma_fake.c) instead of this file. */
#include <infiniband/verbs.h>
#include <string.h>

#include "transport/rdma/rdma.h"

#define IBV_CQ_DEPTH 4096

typedef struct ibv_state {
    const kv_env *env;
    struct ibv_context *ctx;
    struct ibv_pd *pd;
    struct ibv_cq *cq;
    uint8_t port;
    struct ibv_port_attr port_attr;
    union ibv_gid gid;
    struct ibv_wc wc[KVT_RDMA_WC_BATCH];
} ibv_state;

static kv_status v_reg_mr(void *ctx, void *addr, uint64_t len, uint32_t access, kvt_rdma_mr *out) {
    ibv_state *s = ctx;
    /* a plain registration: local access only (never writable by a peer) */
    unsigned int flags = (unsigned int)IBV_ACCESS_LOCAL_WRITE;
    if (access == KVT_RDMA_ACCESS_REMOTE_WRITE) flags |= (unsigned int)IBV_ACCESS_REMOTE_WRITE;
    struct ibv_mr *mr = ibv_reg_mr(s->pd, addr, (size_t)len, flags);
    if (!mr) return KV_EIO;
    *out = (kvt_rdma_mr){.handle = mr, .addr = (uint64_t)(uintptr_t)addr, .lkey = mr->lkey, .rkey = mr->rkey};
    return KV_OK;
}

static void v_dereg_mr(void *ctx, kvt_rdma_mr *mr) {
    (void)ctx;
    if (mr->handle) ibv_dereg_mr(mr->handle);
    mr->handle = NULL;
}

static kv_status v_create_qp(void *ctx, uint32_t max_outstanding, void **out_qp, kvt_rdma_qp_info *info) {
    ibv_state *s = ctx;
    struct ibv_qp_init_attr ia;
    memset(&ia, 0, sizeof ia);
    ia.send_cq = ia.recv_cq = s->cq;
    ia.qp_type = IBV_QPT_RC;
    ia.cap.max_send_wr = max_outstanding;
    ia.cap.max_recv_wr = 1;
    ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
    struct ibv_qp *qp = ibv_create_qp(s->pd, &ia);
    if (!qp) return KV_EIO;
    struct ibv_qp_attr a;
    memset(&a, 0, sizeof a);
    a.qp_state = IBV_QPS_INIT;
    a.port_num = s->port;
    a.pkey_index = 0;
    a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
    if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)) {
        ibv_destroy_qp(qp);
        return KV_EIO;
    }
    memset(info, 0, sizeof *info);
    info->qp_num = qp->qp_num;
    info->lid = s->port_attr.lid;
    info->psn = qp->qp_num & 0xffffffu;
    memcpy(info->gid, s->gid.raw, sizeof info->gid);
    *out_qp = qp;
    return KV_OK;
}

static kv_status v_connect_qp(void *ctx, void *qpv, const kvt_rdma_qp_info *r) {
    ibv_state *s = ctx;
    struct ibv_qp *qp = qpv;
    struct ibv_qp_attr a;
    memset(&a, 0, sizeof a);
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = s->port_attr.active_mtu;
    a.dest_qp_num = r->qp_num;
    a.rq_psn = r->psn;
    a.max_dest_rd_atomic = 1;
    a.min_rnr_timer = 12;
    a.ah_attr.dlid = r->lid;
    a.ah_attr.port_num = s->port;
    static const uint8_t zero[16];
    if (memcmp(r->gid, zero, sizeof zero) != 0) { /* RoCE: route by GID */
        a.ah_attr.is_global = 1;
        memcpy(a.ah_attr.grh.dgid.raw, r->gid, 16);
        a.ah_attr.grh.hop_limit = 1;
        a.ah_attr.grh.sgid_index = 0;
    }
    if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                  IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
        return KV_EIO;
    memset(&a, 0, sizeof a);
    a.qp_state = IBV_QPS_RTS;
    a.timeout = 14;
    a.retry_cnt = 7;
    a.rnr_retry = 7;
    a.sq_psn = qp->qp_num & 0xffffffu;
    a.max_rd_atomic = 1;
    if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                                  IBV_QP_MAX_QP_RD_ATOMIC))
        return KV_EIO;
    return KV_OK;
}

static void v_destroy_qp(void *ctx, void *qp) {
    (void)ctx;
    ibv_destroy_qp(qp);
}

static kv_status v_post_write(void *ctx, void *qp, uint64_t wr_id, uint64_t laddr, uint32_t lkey, uint64_t raddr,
                              uint32_t rkey, uint32_t len) {
    (void)ctx;
    struct ibv_sge sge = {.addr = laddr, .length = len, .lkey = lkey};
    struct ibv_send_wr wr, *bad = NULL;
    memset(&wr, 0, sizeof wr);
    wr.wr_id = wr_id;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_RDMA_WRITE;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.wr.rdma.remote_addr = raddr;
    wr.wr.rdma.rkey = rkey;
    return ibv_post_send(qp, &wr, &bad) == 0 ? KV_OK : KV_EFULL;
}

static kv_status v_poll_cq(void *ctx, kvt_rdma_wc *out, uint32_t max, uint32_t *out_n) {
    ibv_state *s = ctx;
    if (max > KVT_RDMA_WC_BATCH) max = KVT_RDMA_WC_BATCH;
    int n = ibv_poll_cq(s->cq, (int)max, s->wc);
    if (n < 0) return KV_EIO;
    for (int i = 0; i < n; i++)
        out[i] = (kvt_rdma_wc){.wr_id = s->wc[i].wr_id, .status = (uint32_t)s->wc[i].status,
                               .vendor_err = s->wc[i].vendor_err, .qp_num = s->wc[i].qp_num};
    *out_n = (uint32_t)n;
    return KV_OK;
}

kv_status kvt_rdma_ibv_open(const kv_env *env, const char *dev_name, uint8_t port, kvt_rdma_verbs *out) {
    int n = 0;
    struct ibv_device **devs = ibv_get_device_list(&n);
    if (!devs) return KV_ENOSYS;
    struct ibv_device *dev = NULL;
    for (int i = 0; i < n && !dev; i++)
        if (!dev_name || strcmp(ibv_get_device_name(devs[i]), dev_name) == 0) dev = devs[i];
    ibv_state *s = dev ? kv_alloc(env, sizeof *s) : NULL;
    kv_status st = dev ? (s ? KV_OK : KV_ENOMEM) : KV_ENOSYS;
    if (st == KV_OK) {
        memset(s, 0, sizeof *s);
        s->env = env;
        s->port = port ? port : 1;
        s->ctx = ibv_open_device(dev);
        s->pd = s->ctx ? ibv_alloc_pd(s->ctx) : NULL;
        s->cq = s->pd ? ibv_create_cq(s->ctx, IBV_CQ_DEPTH, NULL, NULL, 0) : NULL;
        if (!s->cq || ibv_query_port(s->ctx, s->port, &s->port_attr) || ibv_query_gid(s->ctx, s->port, 0, &s->gid))
            st = KV_EIO;
    }
    ibv_free_device_list(devs);
    if (st != KV_OK) {
        if (s) {
            if (s->cq) ibv_destroy_cq(s->cq);
            if (s->pd) ibv_dealloc_pd(s->pd);
            if (s->ctx) ibv_close_device(s->ctx);
            kv_release(env, s);
        }
        return st;
    }
    *out = (kvt_rdma_verbs){.size = sizeof(kvt_rdma_verbs), .name = "ibverbs", .ctx = s, .reg_mr = v_reg_mr,
                            .dereg_mr = v_dereg_mr, .create_qp = v_create_qp, .connect_qp = v_connect_qp,
                            .destroy_qp = v_destroy_qp, .post_write = v_post_write, .poll_cq = v_poll_cq};
    return KV_OK;
}

void kvt_rdma_ibv_close(kvt_rdma_verbs *v) {
    ibv_state *s = v->ctx;
    if (!s) return;
    ibv_destroy_cq(s->cq);
    ibv_dealloc_pd(s->pd);
    ibv_close_device(s->ctx);
    kv_release(s->env, s);
    v->ctx = NULL;
}
