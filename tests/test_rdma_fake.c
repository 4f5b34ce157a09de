/* tests/test_rdma_fake.c — transport/rdma's batch engine against a fake
 * verbs table: WRITEs land and complete once; the per-QP outstanding limit
 * refuses without posting; remote and local bounds are checked before any
 * post; a remote access error is the root cause and the WRs flushed after it
 * are knock-on (a later batch of only flushes reports the QP's root cause);
 * retry-exceeded maps to peer loss; completions for recycled slots are
 * dropped; a post failure mid-batch still completes the batch exactly once. */
#include <criterion/criterion.h>
#include <string.h>

#include "tests/support/test_env.h"
#include "transport/rdma/rdma.h"

#define FAKE_WR_MAX 4096u

typedef struct fake_wr {
    uint64_t wr_id, laddr, raddr;
    uint32_t len, qp;
} fake_wr;

typedef struct fake {
    uint32_t n_mr, n_qp, connected;
    fake_wr wr[FAKE_WR_MAX];
    uint32_t n_wr, head;        /* posted; head: next to complete */
    kvt_rdma_wc cq[FAKE_WR_MAX];
    uint32_t cq_n, cq_head;
    uint32_t fail_post_at;      /* post number that fails (UINT32_MAX: none) */
    uint32_t posts;
} fake;

static fake F;
static test_env te;

static kv_status f_reg_mr(void *ctx, void *addr, uint64_t len, uint32_t access, kvt_rdma_mr *out) {
    fake *f = ctx;
    (void)len;
    (void)access;
    f->n_mr++;
    *out = (kvt_rdma_mr){.handle = addr, .addr = (uint64_t)(uintptr_t)addr, .lkey = 100 + f->n_mr, .rkey = 200 + f->n_mr};
    return KV_OK;
}
static void f_dereg_mr(void *ctx, kvt_rdma_mr *mr) {
    ((fake *)ctx)->n_mr--;
    mr->handle = NULL;
}
static kv_status f_create_qp(void *ctx, uint32_t max, void **qp, kvt_rdma_qp_info *info) {
    fake *f = ctx;
    (void)max;
    f->n_qp++;
    *qp = (void *)(uintptr_t)f->n_qp;
    memset(info, 0, sizeof *info);
    info->qp_num = 0x40 + f->n_qp;
    return KV_OK;
}
static kv_status f_connect_qp(void *ctx, void *qp, const kvt_rdma_qp_info *r) {
    (void)qp;
    (void)r;
    ((fake *)ctx)->connected++;
    return KV_OK;
}
static void f_destroy_qp(void *ctx, void *qp) {
    (void)qp;
    ((fake *)ctx)->n_qp--;
}
static kv_status f_post_write(void *ctx, void *qp, uint64_t wr_id, uint64_t laddr, uint32_t lkey, uint64_t raddr,
                              uint32_t rkey, uint32_t len) {
    fake *f = ctx;
    (void)lkey;
    (void)rkey;
    if (f->posts++ == f->fail_post_at) return KV_EFULL;
    cr_assert_lt(f->n_wr, FAKE_WR_MAX);
    f->wr[f->n_wr++] = (fake_wr){wr_id, laddr, raddr, len, (uint32_t)(uintptr_t)qp};
    return KV_OK;
}
static kv_status f_poll_cq(void *ctx, kvt_rdma_wc *out, uint32_t max, uint32_t *n) {
    fake *f = ctx;
    uint32_t k = 0;
    while (k < max && f->cq_head < f->cq_n) out[k++] = f->cq[f->cq_head++];
    *n = k;
    return KV_OK;
}

static const kvt_rdma_verbs fake_verbs = {
    .size = sizeof(kvt_rdma_verbs), .name = "fake", .ctx = &F, .reg_mr = f_reg_mr, .dereg_mr = f_dereg_mr,
    .create_qp = f_create_qp, .connect_qp = f_connect_qp, .destroy_qp = f_destroy_qp,
    .post_write = f_post_write, .poll_cq = f_poll_cq};

/* The "NIC": completes the next k posted WRs with status (a success copies). */
static void nic(uint32_t k, uint32_t status) {
    for (uint32_t i = 0; i < k && F.head < F.n_wr; i++) {
        fake_wr *w = &F.wr[F.head++];
        if (status == KVT_WC_SUCCESS) memcpy((void *)(uintptr_t)w->raddr, (void *)(uintptr_t)w->laddr, w->len);
        F.cq[F.cq_n++] = (kvt_rdma_wc){.wr_id = w->wr_id, .status = status, .vendor_err = status ? 0x42 : 0,
                                      .qp_num = 0x40 + w->qp};
    }
}

#define BLK 256u
static uint8_t src[64 * BLK], dst[64 * BLK + 2 * BLK];
static kvt_rdma_qps *Q;
static kvt_region rs, rd_local;
static kvt_peer P;

static void setup(void) {
    memset(&F, 0, sizeof F);
    F.fail_post_at = UINT32_MAX;
    test_env_init(&te);
    cr_assert_eq(kvt_rdma_qps_new(&te.env, &fake_verbs, 16, &Q), KV_OK);
    for (uint32_t i = 0; i < sizeof src; i++) src[i] = (uint8_t)(i * 3 + 1);
    memset(dst, 0xA5, sizeof dst);
    cr_assert_eq(kvt_rdma_reg(Q, src, sizeof src, &rs), KV_OK);
    /* the peer's region, as its set-up message would describe it */
    cr_assert_eq(kvt_rdma_reg(Q, dst + BLK, 64 * BLK, &rd_local), KV_OK);
    kvt_rdma_remote_region rr;
    cr_assert_eq(kvt_rdma_export(Q, rd_local, &rr), KV_OK);
    rr.id = 77; /* the peer's own id for it */
    kvt_rdma_qp_info mine, theirs = {.qp_num = 0x99};
    cr_assert_eq(kvt_rdma_peer_new(Q, &P, &mine), KV_OK);
    cr_assert_eq(kvt_rdma_peer_connect(Q, P, &theirs, &rr, 1), KV_OK);
    cr_assert_eq(F.connected, 1);
}

static void teardown(void) {
    kvt_rdma_qps_free(Q);
    cr_assert_eq(F.n_qp, 0, "QP leaked");
    cr_assert_eq(F.n_mr, 0, "MR leaked");
}

TestSuite(rdma_fake, .init = setup, .fini = teardown);

static kvt_write wr(uint32_t i, uint64_t remote_off, uint32_t len) {
    return (kvt_write){.local = rs, .local_off = (uint64_t)i * BLK, .remote = 77, .remote_off = remote_off, .len = len};
}

static uint32_t poll_all(kvt_completion *c, uint32_t max) {
    uint32_t n = 0;
    cr_assert_eq(kvt_rdma_poll(Q, c, NULL, max, &n), KV_OK);
    return n;
}

Test(rdma_fake, batch_lands_and_completes_once) {
    kvt_write w[8];
    for (uint32_t i = 0; i < 8; i++) w[i] = wr(i, (uint64_t)i * BLK, BLK);
    cr_assert_eq(kvt_rdma_submit(Q, P, w, 8, 5), KV_OK);
    cr_assert_eq(kvt_rdma_outstanding(Q, P), 8);
    kvt_completion c[4];
    nic(7, KVT_WC_SUCCESS);
    cr_assert_eq(poll_all(c, 4), 0, "not before the last WR");
    nic(1, KVT_WC_SUCCESS);
    cr_assert_eq(poll_all(c, 4), 1);
    cr_assert_eq(c[0].tag, 5);
    cr_assert_eq(c[0].status, KV_OK);
    cr_assert_eq(c[0].n_ok, 8);
    cr_assert_eq(kvt_rdma_outstanding(Q, P), 0);
    cr_assert(memcmp(dst + BLK, src, 8 * BLK) == 0);
    cr_assert_eq(poll_all(c, 4), 0, "exactly one completion");
}

Test(rdma_fake, outstanding_limit_refuses_without_posting) {
    kvt_write w[12];
    for (uint32_t i = 0; i < 12; i++) w[i] = wr(i, (uint64_t)i * BLK, BLK);
    cr_assert_eq(kvt_rdma_submit(Q, P, w, 12, 1), KV_OK);
    cr_assert_eq(kvt_rdma_submit(Q, P, w, 5, 2), KV_EFULL, "16 per QP");
    cr_assert_eq(F.n_wr, 12, "a refused submit posts nothing");
    cr_assert_eq(kvt_rdma_submit(Q, P, w, 4, 3), KV_OK);
    nic(16, KVT_WC_SUCCESS);
    kvt_completion c[4];
    cr_assert_eq(poll_all(c, 4), 2);
}

Test(rdma_fake, bounds_checked_before_posting) {
    kvt_write w = wr(0, 64 * BLK - 8, 16); /* past the remote end */
    cr_assert_eq(kvt_rdma_submit(Q, P, &w, 1, 1), KV_ERANGE);
    w = wr(0, UINT64_MAX - 4, 16); /* overflowing offset */
    cr_assert_eq(kvt_rdma_submit(Q, P, &w, 1, 1), KV_ERANGE);
    w = wr(0, 0, 16);
    w.remote = 78; /* unknown remote region */
    cr_assert_eq(kvt_rdma_submit(Q, P, &w, 1, 1), KV_ERANGE);
    w = wr(63, 0, 2 * BLK); /* past the local end */
    cr_assert_eq(kvt_rdma_submit(Q, P, &w, 1, 1), KV_ERANGE);
    cr_assert_eq(F.n_wr, 0);
    kvt_completion c[2];
    cr_assert_eq(poll_all(c, 2), 0, "rejected submits complete never");
    for (uint32_t k = 0; k < sizeof dst; k++) cr_assert_eq(dst[k], 0xA5);
}

Test(rdma_fake, remote_access_error_is_the_cause_flushes_are_knock_on) {
    kvt_write w[4];
    for (uint32_t i = 0; i < 4; i++) w[i] = wr(i, (uint64_t)i * BLK, BLK);
    cr_assert_eq(kvt_rdma_submit(Q, P, w, 4, 10), KV_OK);
    cr_assert_eq(kvt_rdma_submit(Q, P, w, 4, 11), KV_OK);
    nic(1, KVT_WC_SUCCESS);
    nic(1, KVT_WC_REM_ACCESS_ERR); /* the cause */
    nic(6, KVT_WC_WR_FLUSH_ERR);   /* everything after it on the QP */
    kvt_completion c[4];
    cr_assert_eq(poll_all(c, 4), 2);
    cr_assert_eq(c[0].tag, 10);
    cr_assert_eq(c[0].status, KV_ERANGE, "batch 10: its own first error");
    cr_assert_eq(c[0].n_ok, 1);
    cr_assert_eq(c[0].n_failed, 3);
    cr_assert_eq(c[0].provider_err & 0xffff, KVT_WC_REM_ACCESS_ERR);
    cr_assert_eq(c[1].tag, 11);
    cr_assert_eq(c[1].status, KV_ERANGE, "batch 11 only flushed: the QP's root cause, not EIO");
    cr_assert_eq(c[1].n_failed, 4);
    cr_assert_eq(kvt_rdma_outstanding(Q, P), 0);
}

Test(rdma_fake, retry_exceeded_is_peer_loss_and_bare_flush_is_reset) {
    kvt_write w = wr(0, 0, BLK);
    cr_assert_eq(kvt_rdma_submit(Q, P, &w, 1, 1), KV_OK);
    nic(1, KVT_WC_RETRY_EXC_ERR);
    kvt_completion c[2];
    cr_assert_eq(poll_all(c, 2), 1);
    cr_assert_eq(c[0].status, KV_ECONNRESET);
    /* reconnect (fresh QP state), then a flush with no cause seen */
    kvt_rdma_qp_info theirs = {.qp_num = 0x98};
    kvt_rdma_remote_region rr;
    kvt_rdma_export(Q, rd_local, &rr);
    rr.id = 77;
    cr_assert_eq(kvt_rdma_peer_connect(Q, P, &theirs, &rr, 1), KV_OK);
    cr_assert_eq(kvt_rdma_submit(Q, P, &w, 1, 2), KV_OK);
    nic(1, KVT_WC_WR_FLUSH_ERR);
    cr_assert_eq(poll_all(c, 2), 1);
    cr_assert_eq(c[0].status, KV_ECONNRESET, "flushed without a cause: QP torn down");
    cr_assert_eq(kvt_rdma_wc_status(KVT_WC_GENERAL_ERR), KV_EIO);
    cr_assert_eq(kvt_rdma_wc_status(KVT_WC_LOC_PROT_ERR), KV_ERANGE);
}

Test(rdma_fake, post_failure_mid_batch_completes_once) {
    kvt_write w[4];
    for (uint32_t i = 0; i < 4; i++) w[i] = wr(i, (uint64_t)i * BLK, BLK);
    F.fail_post_at = 0;
    cr_assert_eq(kvt_rdma_submit(Q, P, w, 4, 1), KV_EFULL, "first post fails: refused");
    F.fail_post_at = F.posts + 2;
    cr_assert_eq(kvt_rdma_submit(Q, P, w, 4, 2), KV_OK, "accepted once a WR is posted");
    nic(2, KVT_WC_SUCCESS);
    kvt_completion c[2];
    cr_assert_eq(poll_all(c, 2), 1);
    cr_assert_eq(c[0].tag, 2);
    cr_assert_eq(c[0].n_ok, 2);
    cr_assert_eq(c[0].n_failed, 2);
    cr_assert_eq(c[0].status, KV_EIO);
    cr_assert_eq(poll_all(c, 2), 0);
}

Test(rdma_fake, stale_completion_dropped) {
    kvt_write w = wr(0, 0, BLK);
    cr_assert_eq(kvt_rdma_submit(Q, P, &w, 1, 1), KV_OK);
    nic(1, KVT_WC_SUCCESS);
    F.cq[F.cq_n] = F.cq[F.cq_n - 1]; /* a duplicate of the same wr_id */
    F.cq_n++;
    kvt_completion c[2];
    cr_assert_eq(poll_all(c, 2), 1);
    cr_assert_eq(poll_all(c, 2), 0, "a completion for a finished batch completes nothing");
}
