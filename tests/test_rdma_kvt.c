/* tests/test_rdma_kvt.c — the rdma kvt (transport/rdma/kvt_rdma.c), the
 * backend kvnode --transport rdma runs, against a fake NIC shared by two
 * instances in one process: real TCP on 127.0.0.1 for control and QP
 * set-up, a fake verbs table per side whose "fabric" executes RDMA WRITEs
 * by checking the rkey and range against the target side's remotely
 * writable registrations (REM_ACCESS_ERR otherwise, counted by the target
 * NIC as a responder's access error) and copying. B's memory is written
 * only through B's write grants (transport.h): A presents the grant's key
 * (its registration's rkey) with every entry. Proves: connect exchanges QP info
 * and region tables over the ctrl channel (set-up messages never reach the
 * owner; user ctrl passes through byte for byte; a user message that looks
 * like set-up is refused); submit before set-up is KV_EFULL and posts
 * nothing; a 64-entry batch lands byte-exact and completes once on the
 * submitter only; remote bounds are checked against the peer's table before
 * posting; a NIC access error completes KV_ERANGE and later flushed batches
 * report that root cause; PEER_DOWN resets the link and a reconnect sets up
 * a fresh QP; a WRITE with no key, a guessed key, through a revoked grant
 * or outside its window is refused (by A's table or B's NIC) and counted,
 * B's memory untouched, while an honest one lands; and writes through a
 * grant via kvp_net's progress thread (the wrapper kvnode uses). Every wait
 * is bounded. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#include "tests/support/test_env.h"
#include "transport/posix/net.h"
#include "transport/posix/posix_env.h"
#include "transport/rdma/rdma.h"
#include "transport/tcp/tcp.h"

#define WAIT_NS 2000000000ull
#define WR_MAX 4096u
#define MR_MAX 16u

/* ---- the fake fabric ------------------------------------------------------------- */

typedef struct fnic fnic;
typedef struct fqp {
    fnic *nic;
    uint32_t num, remote_num;
    bool connected, error; /* error: later WRs flush */
} fqp;
typedef struct fmr { uint64_t addr, len; uint32_t lkey, rkey; bool used, remote; } fmr;
struct fnic {
    uint32_t id;
    fmr mr[MR_MAX];
    fqp qp[64];
    uint32_t n_qp, live_qp, n_mr;
    uint32_t refused; /* WRs to us refused (rkey or range): a responder's access errors */
    kvt_rdma_wc cq[WR_MAX];
    uint32_t cq_n, cq_head;
};
typedef struct fwr { fqp *qp; uint64_t wr_id, laddr, raddr; uint32_t lkey, rkey, len; } fwr;

static fnic NA, NB;
static fwr WR[WR_MAX];
static uint32_t wr_n, wr_head;
static pthread_mutex_t fab_mu = PTHREAD_MUTEX_INITIALIZER; /* the kvp_net test posts and polls on threads */
static uint32_t force_status; /* next WR completes with this (0: by the checks) */

static kv_status f_reg_mr(void *ctx, void *addr, uint64_t len, uint32_t access, kvt_rdma_mr *out) {
    fnic *n = ctx;
    for (uint32_t i = 0; i < MR_MAX; i++) {
        if (n->mr[i].used) continue;
        uint32_t key = n->id * 1000u + i + 1u;
        n->mr[i] = (fmr){(uint64_t)(uintptr_t)addr, len, key, key + 500u, true, access == KVT_RDMA_ACCESS_REMOTE_WRITE};
        n->n_mr++;
        *out = (kvt_rdma_mr){.handle = &n->mr[i], .addr = (uint64_t)(uintptr_t)addr, .lkey = key, .rkey = key + 500u};
        return KV_OK;
    }
    return KV_ENOMEM;
}
static void f_dereg_mr(void *ctx, kvt_rdma_mr *mr) {
    fnic *n = ctx;
    ((fmr *)mr->handle)->used = false;
    n->n_mr--;
}
static kv_status f_create_qp(void *ctx, uint32_t max, void **out, kvt_rdma_qp_info *info) {
    fnic *n = ctx;
    (void)max;
    if (n->n_qp >= 64) return KV_ENOMEM;
    fqp *q = &n->qp[n->n_qp++];
    *q = (fqp){.nic = n, .num = n->id * 100u + n->n_qp};
    n->live_qp++;
    memset(info, 0, sizeof *info);
    info->qp_num = q->num;
    info->psn = 7;
    *out = q;
    return KV_OK;
}
static kv_status f_connect_qp(void *ctx, void *qp, const kvt_rdma_qp_info *r) {
    (void)ctx;
    fqp *q = qp;
    if (!r->qp_num) return KV_EINVAL;
    q->remote_num = r->qp_num;
    q->connected = true;
    return KV_OK;
}
static void f_destroy_qp(void *ctx, void *qp) {
    (void)qp;
    ((fnic *)ctx)->live_qp--;
}
static kv_status f_post_write(void *ctx, void *qp, uint64_t wr_id, uint64_t laddr, uint32_t lkey, uint64_t raddr,
                              uint32_t rkey, uint32_t len) {
    (void)ctx;
    fqp *q = qp;
    if (!q->connected) return KV_EIO; /* not RTS */
    pthread_mutex_lock(&fab_mu);
    cr_assert_lt(wr_n, WR_MAX);
    WR[wr_n++] = (fwr){q, wr_id, laddr, raddr, lkey, rkey, len};
    pthread_mutex_unlock(&fab_mu);
    return KV_OK;
}
static kv_status f_poll_cq(void *ctx, kvt_rdma_wc *out, uint32_t max, uint32_t *got) {
    fnic *n = ctx;
    uint32_t k = 0;
    pthread_mutex_lock(&fab_mu);
    while (k < max && n->cq_head < n->cq_n) out[k++] = n->cq[n->cq_head++];
    pthread_mutex_unlock(&fab_mu);
    *got = k;
    return KV_OK;
}

static const fmr *mr_find(const fnic *n, uint64_t addr, uint32_t len, uint32_t key, bool remote) {
    for (uint32_t i = 0; i < MR_MAX; i++) {
        const fmr *m = &n->mr[i];
        if (m->used && (!remote || m->remote) && (remote ? m->rkey : m->lkey) == key && addr >= m->addr && len <= m->len - (addr - m->addr))
            return m;
    }
    return NULL;
}

/* The NIC executes every posted WR: the target is the other side's
 * registrations (rkey + range), the source ours (lkey + range). */
static uint32_t fabric_run(void) {
    uint32_t k = 0;
    pthread_mutex_lock(&fab_mu);
    for (; wr_head < wr_n; wr_head++, k++) {
        fwr *w = &WR[wr_head];
        fnic *me = w->qp->nic, *peer = me == &NA ? &NB : &NA;
        uint32_t st = force_status;
        if (w->qp->error) st = KVT_WC_WR_FLUSH_ERR;
        else if (!st && !mr_find(me, w->laddr, w->len, w->lkey, false)) st = KVT_WC_LOC_PROT_ERR;
        else if (!st && !mr_find(peer, w->raddr, w->len, w->rkey, true)) {
            st = KVT_WC_REM_ACCESS_ERR;
            peer->refused++;
        }
        if (!st) memcpy((void *)(uintptr_t)w->raddr, (const void *)(uintptr_t)w->laddr, w->len);
        else w->qp->error = true;
        force_status = 0;
        me->cq[me->cq_n++] = (kvt_rdma_wc){.wr_id = w->wr_id, .status = st, .vendor_err = st ? 0x33 : 0, .qp_num = w->qp->num};
    }
    pthread_mutex_unlock(&fab_mu);
    return k;
}

static const kvt_rdma_verbs VA = {.size = sizeof(kvt_rdma_verbs), .name = "fake", .ctx = &NA, .reg_mr = f_reg_mr,
                                  .dereg_mr = f_dereg_mr, .create_qp = f_create_qp, .connect_qp = f_connect_qp,
                                  .destroy_qp = f_destroy_qp, .post_write = f_post_write, .poll_cq = f_poll_cq};
static const kvt_rdma_verbs VB = {.size = sizeof(kvt_rdma_verbs), .name = "fake", .ctx = &NB, .reg_mr = f_reg_mr,
                                  .dereg_mr = f_dereg_mr, .create_qp = f_create_qp, .connect_qp = f_connect_qp,
                                  .destroy_qp = f_destroy_qp, .post_write = f_post_write, .poll_cq = f_poll_cq};

/* ---- two rdma kvts polled from the test loop --------------------------------------- */

#define REC_MAX 1024u
typedef struct rec { kvt_event e; uint32_t blen; uint8_t bytes[64]; } rec;
typedef struct side {
    kvt *t;
    kvt_ep ep;
    kvt_addr addr;
    uint32_t n;
    rec r[REC_MAX];
} side;

static test_env te;
static side A, B;
#define BLK 512u
static uint8_t src[64 * BLK], dst_buf[66 * BLK];
static kvt_region rs, rd;
static kvt_desc GD; /* B's grant to A that W() writes through */

static uint64_t mono(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void open_side(side *s, const kvt_rdma_verbs *v, uint32_t owner) {
    memset(s, 0, sizeof *s);
    kvt *ctrl = NULL;
    cr_assert_eq(kvt_tcp_new(&te.env, "127.0.0.1", &ctrl), KV_OK);
    kvt_rdma_cfg c = {.ctrl = ctrl, .verbs = v, .max_outstanding = 256};
    cr_assert_eq(kvt_rdma_new(&te.env, &c, &s->t), KV_OK);
    cr_assert_str_eq(s->t->ops->name, "rdma");
    cr_assert_eq(kvt_ep_open(s->t, owner, &s->ep, &s->addr), KV_OK);
}

static void setup(void) {
    memset(&NA, 0, sizeof NA);
    memset(&NB, 0, sizeof NB);
    NA.id = 1;
    NB.id = 2;
    wr_n = wr_head = 0;
    force_status = 0;
    memset(&GD, 0, sizeof GD);
    test_env_init(&te);
    te.quiet = 1;
    te.now_ns = mono();
    open_side(&A, &VA, 1);
    open_side(&B, &VB, 2);
    for (uint32_t i = 0; i < sizeof src; i++) src[i] = (uint8_t)(i * 7 + 3);
    memset(dst_buf, 0xA5, sizeof dst_buf);
    cr_assert_eq(kvt_reg(A.t, src, sizeof src, KVT_MEM_HOST, &rs), KV_OK);
    cr_assert_eq(kvt_reg(B.t, dst_buf + BLK, 64 * BLK, KVT_MEM_HOST, &rd), KV_OK); /* guard block each side */
}

static void teardown(void) {
    kvt_rdma_free(A.t);
    kvt_rdma_free(B.t);
    A.t = B.t = NULL;
    cr_assert_eq(NA.live_qp + NB.live_qp, 0, "QP leaked");
    cr_assert_eq(NA.n_mr + NB.n_mr, 0, "MR leaked");
}

static uint32_t pump_side(side *s) {
    kvt_event ev[64];
    uint32_t n = 0;
    if (!s->t) return 0;
    cr_assert_eq(kvt_poll(s->t, ev, 64, &n), KV_OK);
    for (uint32_t i = 0; i < n; i++) {
        cr_assert_lt(s->n, REC_MAX);
        rec *r = &s->r[s->n++];
        r->e = ev[i];
        r->blen = 0;
        if (ev[i].kind != KVT_EV_CTRL) continue;
        const uint8_t *p = NULL;
        cr_assert_eq(kvt_rdma_event_data(s->t, i, &p), KV_OK);
        r->blen = ev[i].len < sizeof r->bytes ? ev[i].len : (uint32_t)sizeof r->bytes;
        memcpy(r->bytes, p, r->blen);
    }
    return n;
}

static void pump(void) {
    te.now_ns = mono();
    uint32_t n = pump_side(&A) + pump_side(&B) + fabric_run();
    if (!n) {
        struct timespec ts = {0, 100000};
        nanosleep(&ts, NULL);
    }
}

#define PUMP_UNTIL(cond)                                                                   \
    do {                                                                                   \
        uint64_t t0_ = mono();                                                             \
        while (!(cond)) {                                                                  \
            cr_assert_lt(mono() - t0_, WAIT_NS, "timed out waiting: %s", #cond);           \
            pump();                                                                        \
        }                                                                                  \
    } while (0)

static void pump_for_ms(uint32_t ms) {
    uint64_t t0 = mono();
    while (mono() - t0 < (uint64_t)ms * 1000000ull) pump();
}

static uint32_t count(const side *s, uint32_t kind) {
    uint32_t c = 0;
    for (uint32_t i = 0; i < s->n; i++) c += s->r[i].e.kind == kind;
    return c;
}

static const rec *nth(const side *s, uint32_t kind, uint32_t k) {
    for (uint32_t i = 0; i < s->n; i++)
        if (s->r[i].e.kind == kind && k-- == 0) return &s->r[i];
    return NULL;
}

static kvt_rdma_counters ctr(const side *s) {
    kvt_rdma_counters c;
    kvt_rdma_counters_get(s->t, &c);
    return c;
}

/* A connects to B; pumps until B's link is up and A's submits are accepted. */
static kvt_peer link_up(void) {
    kvt_peer pb;
    cr_assert_eq(kvt_connect(A.t, A.ep, &B.addr, &pb), KV_OK);
    PUMP_UNTIL(ctr(&A).links_ready == 1 && ctr(&B).links_ready == 1);
    return pb;
}

/* B grants [off, off + len) of rd to the writer at `writer` (B's peer id
 * for it: connecting back finds the link the writer opened). The grant is
 * announced on that link before anything B sends later, so a ctrl B sends
 * after it reaching A proves A's table has it. */
static kvt_desc grant_to(const kvt_addr *writer, uint64_t off, uint64_t len) {
    kvt_peer pa;
    cr_assert_eq(kvt_connect(B.t, B.ep, writer, &pa), KV_OK);
    kvt_desc d;
    uint32_t id;
    cr_assert_eq(kvt_grant(B.t, rd, B.ep, pa, off, len, &id, &d), KV_OK);
    cr_assert_eq(d.region, id);
    cr_assert_eq(d.len, off + len);
    cr_assert_neq(d.key.w[0], 0, "the key is the grant's rkey");
    uint32_t c0 = count(&A, KVT_EV_CTRL);
    cr_assert_eq(kvt_send_ctrl(B.t, B.ep, pa, "KVgranted", 9), KV_OK);
    PUMP_UNTIL(count(&A, KVT_EV_CTRL) == c0 + 1);
    return d;
}

/* All of rd, to A's endpoint: what W() writes through. */
static void grant_a(void) { GD = grant_to(&A.addr, 0, 64 * BLK); }

static kvt_write W(uint32_t i, uint64_t roff, uint32_t len) {
    return (kvt_write){.local = rs, .local_off = (uint64_t)i * BLK, .remote = GD.region, .remote_off = roff,
                       .len = len, .key = GD.key};
}

static bool guards_intact(void) {
    for (uint32_t k = 0; k < BLK; k++)
        if (dst_buf[k] != 0xA5 || dst_buf[65 * BLK + k] != 0xA5) return false;
    return true;
}

TestSuite(rdma_kvt, .init = setup, .fini = teardown, .timeout = 20);

Test(rdma_kvt, setup_over_ctrl_then_batch_lands_once) {
    kvt_peer pb;
    cr_assert_eq(kvt_connect(A.t, A.ep, &B.addr, &pb), KV_OK);
    kvt_write w[64];
    for (uint32_t i = 0; i < 64; i++) w[i] = W(i, (uint64_t)(63 - i) * BLK, BLK - (i % 5) * 50);
    /* not set up yet: refused, nothing posted */
    cr_assert_eq(kvt_submit(A.t, A.ep, pb, w, 64, 41, 0), KV_EFULL);
    cr_assert_eq(wr_n, 0);
    PUMP_UNTIL(ctr(&A).links_ready == 1 && ctr(&B).links_ready == 1);
    cr_assert_eq(count(&A, KVT_EV_CTRL) + count(&B, KVT_EV_CTRL), 0, "set-up messages reached an owner");
    cr_assert_eq(NA.qp[0].remote_num, NB.qp[0].num, "A's QP connected to B's");
    cr_assert_eq(NB.qp[0].remote_num, NA.qp[0].num, "B's QP connected to A's");
    grant_a();
    for (uint32_t i = 0; i < 64; i++) w[i] = W(i, (uint64_t)(63 - i) * BLK, BLK - (i % 5) * 50);
    cr_assert_eq(kvt_submit(A.t, A.ep, pb, w, 64, 42, 0), KV_OK);
    cr_assert_eq(wr_n, 64, "one WR per entry");
    PUMP_UNTIL(count(&A, KVT_EV_DONE) == 1);
    pump_for_ms(20);
    cr_assert_eq(count(&A, KVT_EV_DONE), 1);
    cr_assert_eq(count(&B, KVT_EV_DONE), 0, "no completion on the target");
    const rec *d = nth(&A, KVT_EV_DONE, 0);
    cr_assert_eq(d->e.done.tag, 42);
    cr_assert_eq(d->e.done.status, KV_OK);
    cr_assert_eq(d->e.done.n_ok, 64);
    cr_assert_eq(d->e.owner, 1);
    cr_assert_eq(d->e.peer, pb);
    for (uint32_t i = 0; i < 64; i++) {
        const uint8_t *got = dst_buf + BLK + (63 - i) * BLK;
        cr_assert(memcmp(got, src + i * BLK, w[i].len) == 0, "entry %u differs", i);
        for (uint32_t k = w[i].len; k < BLK; k++) cr_assert_eq(got[k], 0xA5, "entry %u overran", i);
    }
    cr_assert(guards_intact());
}

/* A grant (its own remotely writable registration of B's memory) made
 * after set-up reaches A before anything B sends later, so A can write
 * through it; once B revokes it a WR A had already posted is refused by B's
 * NIC (the rkey is gone), and once A has heard of it A's submit is refused:
 * nothing lands. */
Test(rdma_kvt, grant_after_setup_is_announced_and_revoked) {
    kvt_peer pb = link_up();
    grant_a();
    kvt_write w = W(0, 0, BLK);
    cr_assert_eq(kvt_submit(A.t, A.ep, pb, &w, 1, 1, 0), KV_OK);
    PUMP_UNTIL(count(&A, KVT_EV_DONE) == 1);
    cr_assert_eq(nth(&A, KVT_EV_DONE, 0)->e.done.status, KV_OK);
    cr_assert(memcmp(dst_buf + BLK, src, BLK) == 0);

    /* posted, then revoked before the NIC runs it */
    memset(dst_buf + BLK, 0xA5, BLK);
    w = W(1, 0, BLK);
    cr_assert_eq(kvt_submit(A.t, A.ep, pb, &w, 1, 2, 0), KV_OK);
    cr_assert_eq(kvt_revoke(B.t, GD.region), KV_OK);
    cr_assert_eq(kvt_revoke(B.t, GD.region), KV_ENOENT);
    PUMP_UNTIL(count(&A, KVT_EV_DONE) == 2);
    cr_assert_eq(nth(&A, KVT_EV_DONE, 1)->e.done.status, KV_ERANGE, "the revoked rkey is refused by B's NIC");
    cr_assert_eq(NB.refused, 1);
    uint32_t c0 = count(&A, KVT_EV_CTRL);
    cr_assert_eq(kvt_send_ctrl(B.t, B.ep, 0, "KVafter2", 8), KV_OK); /* B's peer 0 is A */
    PUMP_UNTIL(count(&A, KVT_EV_CTRL) == c0 + 1);
    /* A has heard of the revocation: refused at submit, nothing posted */
    uint32_t posted = wr_n;
    cr_assert_eq(kvt_submit(A.t, A.ep, pb, &w, 1, 3, 0), KV_ERANGE);
    cr_assert_eq(wr_n, posted);
    for (uint32_t k = 0; k < BLK; k++) cr_assert_eq(dst_buf[BLK + k], 0xA5, "a revoked grant was written");
    cr_assert(guards_intact());
}

Test(rdma_kvt, user_ctrl_passes_through_setup_magic_refused) {
    kvt_peer pb = link_up();
    cr_assert_eq(kvt_send_ctrl(A.t, A.ep, pb, "KVhello", 7), KV_OK);
    PUMP_UNTIL(count(&B, KVT_EV_CTRL) == 1);
    const rec *c = nth(&B, KVT_EV_CTRL, 0);
    cr_assert_eq(c->blen, 7);
    cr_assert(memcmp(c->bytes, "KVhello", 7) == 0);
    cr_assert_eq(c->e.owner, 2);
    /* B answers through the event's peer id */
    cr_assert_eq(kvt_send_ctrl(B.t, B.ep, c->e.peer, "KVback", 6), KV_OK);
    PUMP_UNTIL(count(&A, KVT_EV_CTRL) == 1);
    cr_assert(memcmp(nth(&A, KVT_EV_CTRL, 0)->bytes, "KVback", 6) == 0);
    cr_assert_eq(kvt_send_ctrl(A.t, A.ep, pb, KVT_RDMA_SETUP_MAGIC "x", 5), KV_EINVAL);
}

Test(rdma_kvt, remote_bounds_from_the_peers_table) {
    kvt_peer pb = link_up();
    grant_a();
    kvt_write past = W(0, 64 * BLK - 10, 100), other = {.local = rs, .local_off = 0, .remote = 999, .remote_off = 0, .len = 8};
    kvt_write ok_then_bad[2] = {W(0, 0, 16), past};
    cr_assert_eq(kvt_submit(A.t, A.ep, pb, &past, 1, 1, 0), KV_ERANGE);
    cr_assert_eq(kvt_submit(A.t, A.ep, pb, &other, 1, 2, 0), KV_ERANGE);
    cr_assert_eq(kvt_submit(A.t, A.ep, pb, ok_then_bad, 2, 3, 0), KV_ERANGE);
    cr_assert_eq(wr_n, 0, "nothing posted");
    pump_for_ms(20);
    cr_assert_eq(count(&A, KVT_EV_DONE), 0);
    for (uint32_t k = 0; k < sizeof dst_buf; k++) cr_assert_eq(dst_buf[k], 0xA5);
}

Test(rdma_kvt, nic_access_error_is_root_cause_of_later_flushes) {
    kvt_peer pb = link_up();
    grant_a();
    kvt_write w[4] = {W(0, 0, 64), W(1, BLK, 64), W(2, 2 * BLK, 64), W(3, 3 * BLK, 64)};
    force_status = KVT_WC_REM_ACCESS_ERR; /* the first WR: the NIC refuses it */
    cr_assert_eq(kvt_submit(A.t, A.ep, pb, w, 4, 10, 0), KV_OK);
    PUMP_UNTIL(count(&A, KVT_EV_DONE) == 1);
    cr_assert_eq(kvt_submit(A.t, A.ep, pb, w, 2, 11, 0), KV_OK); /* the QP is in error: flushes */
    PUMP_UNTIL(count(&A, KVT_EV_DONE) == 2);
    const rec *d0 = nth(&A, KVT_EV_DONE, 0), *d1 = nth(&A, KVT_EV_DONE, 1);
    cr_assert_eq(d0->e.done.tag, 10);
    cr_assert_eq(d0->e.done.status, KV_ERANGE);
    cr_assert_eq(d0->e.done.n_failed, 4);
    cr_assert_eq(d0->e.done.provider_err & 0xffff, KVT_WC_REM_ACCESS_ERR);
    cr_assert_eq(d1->e.done.tag, 11);
    cr_assert_eq(d1->e.done.status, KV_ERANGE, "flushes report the QP's root cause");
    cr_assert_eq(d1->e.done.n_failed, 2);
}

Test(rdma_kvt, peer_down_resets_link_and_reconnect_sets_up_fresh_qp) {
    kvt_peer pb = link_up();
    grant_a();
    kvt_write w = W(0, 0, 128);
    cr_assert_eq(kvt_submit(A.t, A.ep, pb, &w, 1, 20, 0), KV_OK);
    PUMP_UNTIL(count(&A, KVT_EV_DONE) == 1);
    kvt_rdma_free(B.t); /* the peer process goes away */
    B.t = NULL;
    PUMP_UNTIL(count(&A, KVT_EV_PEER_DOWN) == 1);
    cr_assert_eq(nth(&A, KVT_EV_PEER_DOWN, 0)->e.peer, pb);
    /* a new peer process at a new address: a fresh QP pair */
    open_side(&B, &VB, 2);
    cr_assert_eq(kvt_reg(B.t, dst_buf + BLK, 64 * BLK, KVT_MEM_HOST, &rd), KV_OK);
    kvt_peer pb2;
    cr_assert_eq(kvt_connect(A.t, A.ep, &B.addr, &pb2), KV_OK);
    PUMP_UNTIL(ctr(&A).links_ready == 2 && ctr(&B).links_ready == 1);
    cr_assert_eq(ctr(&A).qps, 2, "a fresh QP for the new peer");
    grant_a(); /* the new process's grant */
    w = W(0, 0, 128);
    memset(dst_buf, 0xA5, sizeof dst_buf);
    cr_assert_eq(kvt_submit(A.t, A.ep, pb2, &w, 1, 21, 0), KV_OK);
    PUMP_UNTIL(count(&A, KVT_EV_DONE) == 2);
    cr_assert_eq(nth(&A, KVT_EV_DONE, 1)->e.done.status, KV_OK);
    cr_assert(memcmp(dst_buf + BLK, src, 128) == 0);
}

/* ---- write grants: what is refused ------------------------------------------------- */

/* A fresh endpoint of A with its own link (one QP) to B: a WR B's NIC
 * refuses puts that QP in error (later WRs flush), so each refusal the NIC
 * makes gets a link of its own. */
typedef struct alink { kvt_ep ep; kvt_addr addr; kvt_peer pb; } alink;
static alink a_link(uint32_t owner) {
    alink l;
    uint64_t ready = ctr(&A).links_ready;
    cr_assert_eq(kvt_ep_open(A.t, owner, &l.ep, &l.addr), KV_OK);
    cr_assert_eq(kvt_connect(A.t, l.ep, &B.addr, &l.pb), KV_OK);
    PUMP_UNTIL(ctr(&A).links_ready == ready + 1 && ctr(&B).links_ready == ready + 1);
    return l;
}

static const rec *done_of(uint64_t tag) {
    for (uint32_t i = 0; i < A.n; i++)
        if (A.r[i].e.kind == KVT_EV_DONE && A.r[i].e.done.tag == tag) return &A.r[i];
    return NULL;
}

/* Entries B never let in: with no key, a guessed key, through a grant
 * revoked while the WR was on its way, below and past a grant's window,
 * naming B's plain region, and through a grant made for another of A's
 * links. Those A's table knows to be wrong are refused at submit (nothing
 * posted); the others are posted and refused by B's NIC (REM_ACCESS_ERR:
 * KV_ERANGE at A, counted by B's NIC). Not a byte of B's memory moves but
 * the honest WRITE's, through its window. (The NIC checks rkey and range,
 * not the QP: a hostile writer posting a grant's rkey on another QP would
 * get through; transport/README.md, "Write grants".) */
Test(rdma_kvt, write_grants_refuse_no_key_wrong_key_revoked_outside) {
    kvt_peer pb = link_up(); /* A.ep's link: the honest writer */
    kvt_desc win = grant_to(&A.addr, 4 * BLK, 2 * BLK); /* blocks 4..5, to A.ep */
    cr_assert_eq(kvt_submit(A.t, A.ep, pb, &(kvt_write){.local = rs, .local_off = 0, .remote = win.region,
                                                       .remote_off = 6 * BLK, .len = 16, .key = win.key},
                            1, 90, 0),
                 KV_ERANGE, "past the window's end: refused by A's table");
    cr_assert_eq(wr_n, 0, "nothing posted");

    struct {
        const char *what;
        kvt_key key;       /* presented */
        bool use_win;      /* through `win` (announced to A.ep's link only) */
        uint64_t off;      /* in rd */
        bool revoke;       /* revoked after the post */
        bool plain;        /* names B's plain region */
    } bad[] = {
        {"no key", {{0, 0}}, false, 0, false, false},
        {"a guessed key", {{0x40000001u, 0}}, false, 0, false, false},
        {"revoked in flight", {{0, 0}}, false, 0, true, false},
        {"below its window", {{0, 0}}, false, 2 * BLK, false, false},
        {"the plain region, no key", {{0, 0}}, false, 0, false, true},
    };
    uint32_t nb = sizeof bad / sizeof bad[0];
    for (uint32_t i = 0; i < nb; i++) {
        alink l = a_link(10 + i);
        /* each link's own grant: all of rd, except "below": blocks 4..5 */
        bool below = bad[i].off == 2 * BLK;
        kvt_desc g = grant_to(&l.addr, below ? 4 * BLK : 0, below ? 2 * BLK : 64 * BLK);
        kvt_write w = {.local = rs, .local_off = 0, .remote = bad[i].plain ? rd : g.region,
                       .remote_off = bad[i].off, .len = 64, .key = bad[i].key};
        if (bad[i].revoke || below) w.key = g.key; /* the right key */
        uint32_t posted = wr_n;
        cr_assert_eq(kvt_submit(A.t, l.ep, l.pb, &w, 1, 100 + i, 0), KV_OK, "%s: posted", bad[i].what);
        cr_assert_eq(wr_n, posted + 1);
        if (bad[i].revoke) cr_assert_eq(kvt_revoke(B.t, g.region), KV_OK);
        PUMP_UNTIL(done_of(100 + i) != NULL);
        const rec *d = done_of(100 + i);
        cr_assert_eq(d->e.done.status, KV_ERANGE, "%s: not refused", bad[i].what);
        cr_assert_eq(d->e.done.n_failed, 1);
        cr_assert_eq(d->e.done.provider_err & 0xffff, KVT_WC_REM_ACCESS_ERR, "%s", bad[i].what);
        cr_assert_eq(NB.refused, i + 1, "%s: B's NIC counts it", bad[i].what);
    }
    /* win was granted to A.ep's link: another link of A does not know it */
    alink o = a_link(20);
    kvt_write other = {.local = rs, .local_off = 0, .remote = win.region, .remote_off = 4 * BLK, .len = 16,
                       .key = win.key};
    uint32_t posted = wr_n;
    cr_assert_eq(kvt_submit(A.t, o.ep, o.pb, &other, 1, 91, 0), KV_ERANGE, "another link's grant");
    cr_assert_eq(wr_n, posted, "nothing posted");
    for (uint32_t k = 0; k < sizeof dst_buf; k++) cr_assert_eq(dst_buf[k], 0xA5, "byte %u was written", k);
    cr_assert_eq(NA.refused, 0);

    /* the honest WRITE: the whole window, on A.ep's link */
    kvt_write ok = {.local = rs, .local_off = 0, .remote = win.region, .remote_off = 4 * BLK, .len = 2 * BLK,
                    .key = win.key};
    cr_assert_eq(kvt_submit(A.t, A.ep, pb, &ok, 1, 92, 0), KV_OK);
    PUMP_UNTIL(done_of(92) != NULL);
    cr_assert_eq(done_of(92)->e.done.status, KV_OK);
    cr_assert(memcmp(dst_buf + BLK + 4 * BLK, src, 2 * BLK) == 0);
    for (uint32_t k = 0; k < sizeof dst_buf; k++)
        if (k < 5 * BLK || k >= 7 * BLK) cr_assert_eq(dst_buf[k], 0xA5, "byte %u outside the window", k);
    cr_assert_eq(NB.refused, nb, "the honest write is not counted");
}

/* ---- through kvp_net, as kvnode runs it -------------------------------------------- */

typedef struct net_side { kvp_net *net; kvt *t; kvt_ep ep; kvt_addr addr; uint32_t actor; } net_side;
static kvp_env pe;
static kvp_rt *rt;
static net_side NP, ND;
static _Atomic uint32_t done_ok, done_other, p_ctrl, d_ctrl;
static _Atomic uint32_t d_peer; /* D's peer id of P, from P's hello */

static void sender_fn(void *self, const kv_msg *m) {
    (void)self;
    if (m->kind != KVT_MSG_EVENT) return;
    const kvt_event *ev = m->payload;
    if (ev->kind == KVT_EV_CTRL) atomic_fetch_add(&p_ctrl, 1);
    if (ev->kind != KVT_EV_DONE) return;
    if (ev->done.status == KV_OK && ev->done.n_ok == 8) atomic_fetch_add(&done_ok, 1);
    else atomic_fetch_add(&done_other, 1);
}
static void sink_fn(void *self, const kv_msg *m) {
    (void)self;
    if (m->kind != KVT_MSG_EVENT) return;
    const kvt_event *ev = m->payload;
    if (ev->kind != KVT_EV_CTRL) return;
    atomic_store(&d_peer, ev->peer);
    atomic_fetch_add(&d_ctrl, 1);
}

static void wait_for(_Atomic uint32_t *v, uint32_t want, const char *what) {
    uint64_t t0 = mono();
    while (atomic_load(v) < want) {
        cr_assert_lt(mono() - t0, WAIT_NS, "timed out waiting: %s", what);
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
}

static void net_side_new(net_side *s, const kvt_rdma_verbs *v, const char *name, kv_actor_fn fn) {
    kvt *ctrl = NULL, *r = NULL;
    cr_assert_eq(kvt_tcp_new(&pe.env, "127.0.0.1", &ctrl), KV_OK);
    kvt_rdma_cfg c = {.ctrl = ctrl, .verbs = v};
    cr_assert_eq(kvt_rdma_new(&pe.env, &c, &r), KV_OK);
    kvp_net_cfg nc = {.inner = r, .rt = rt, .event_data = kvt_rdma_event_data, .pollfds = kvt_rdma_pollfds};
    cr_assert_eq(kvp_net_new(&pe.env, &nc, &s->net), KV_OK);
    s->t = kvp_net_kvt(s->net);
    cr_assert_eq(kv_rt_spawn(kvp_rt_iface(rt), name, 0, fn, NULL, 1u << 16, &s->actor), KV_OK);
    cr_assert_eq(kvt_ep_open(s->t, s->actor, &s->ep, &s->addr), KV_OK);
}

/* The NIC as a thread: runs the fabric until told to stop. */
static _Atomic bool nic_quit;
static void *nic_main(void *arg) {
    (void)arg;
    while (!atomic_load(&nic_quit)) {
        if (!fabric_run()) {
            struct timespec ts = {0, 50000};
            nanosleep(&ts, NULL);
        }
    }
    return NULL;
}

/* P's hello reaches D once the link is set up (it follows the set-up on the
 * ctrl link); D grants its region to that peer and says so; P's writes
 * through the grant land, from kvp_net's progress thread. */
Test(rdma_kvt, through_kvp_net_writes_through_a_grant) {
    kvp_env_cfg ec = {.seed = 1, .level = KV_LOG_ERROR, .tag = "rdma-net"};
    cr_assert_eq(kvp_env_init(&pe, &ec), KV_OK);
    kvp_rt_cfg rc = {.proc = 0, .abi = 1};
    cr_assert_eq(kvp_rt_new(&pe.env, &rc, &rt), KV_OK);
    net_side_new(&NP, &VA, "P.send", sender_fn);
    net_side_new(&ND, &VB, "D.sink", sink_fn);
    static uint8_t pmem[8 * BLK], dmem[8 * BLK];
    for (uint32_t i = 0; i < sizeof pmem; i++) pmem[i] = (uint8_t)(i ^ 0x5a);
    kvt_region pr, dr;
    cr_assert_eq(kvt_reg(NP.t, pmem, sizeof pmem, KVT_MEM_HOST, &pr), KV_OK);
    cr_assert_eq(kvt_reg(ND.t, dmem, sizeof dmem, KVT_MEM_HOST, &dr), KV_OK);
    atomic_store(&done_ok, 0);
    atomic_store(&done_other, 0);
    atomic_store(&p_ctrl, 0);
    atomic_store(&d_ctrl, 0);
    atomic_store(&nic_quit, false);
    pthread_t nic_th;
    cr_assert_eq(pthread_create(&nic_th, NULL, nic_main, NULL), 0);
    cr_assert_eq(kvp_rt_start(rt), KV_OK);
    cr_assert_eq(kvp_net_start(NP.net), KV_OK);
    cr_assert_eq(kvp_net_start(ND.net), KV_OK);
    kvt_peer pd;
    cr_assert_eq(kvt_connect(NP.t, NP.ep, &ND.addr, &pd), KV_OK);
    cr_assert_eq(kvt_send_ctrl(NP.t, NP.ep, pd, "KVhello", 7), KV_OK);
    wait_for(&d_ctrl, 1, "P's hello at D");
    uint32_t gid;
    kvt_desc g;
    cr_assert_eq(kvt_grant(ND.t, dr, ND.ep, atomic_load(&d_peer), 0, sizeof dmem, &gid, &g), KV_OK);
    cr_assert_eq(kvt_send_ctrl(ND.t, ND.ep, atomic_load(&d_peer), "KVgranted", 9), KV_OK); /* after the grant's announcement */
    wait_for(&p_ctrl, 1, "D's answer at P");
    kvt_write w[8];
    for (uint32_t i = 0; i < 8; i++)
        w[i] = (kvt_write){.local = pr, .local_off = i * BLK, .remote = g.region, .remote_off = (7 - i) * BLK,
                           .len = BLK, .key = g.key};
    for (uint32_t k = 0; k < 20; k++) cr_assert_eq(kvt_submit(NP.t, NP.ep, pd, w, 8, k, 0), KV_OK);
    uint64_t t0 = mono();
    while (atomic_load(&done_ok) + atomic_load(&done_other) < 20) {
        cr_assert_lt(mono() - t0, WAIT_NS, "completions did not arrive");
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    cr_assert_eq(atomic_load(&done_ok), 20);
    for (uint32_t i = 0; i < 8; i++) cr_assert(memcmp(dmem + (7 - i) * BLK, pmem + i * BLK, BLK) == 0);
    cr_assert_eq(kvt_revoke(ND.t, gid), KV_OK);
    kvp_net_stop(NP.net);
    kvp_net_stop(ND.net);
    kvp_rt_stop(rt);
    atomic_store(&nic_quit, true);
    pthread_join(nic_th, NULL);
    kvp_net_free(NP.net);
    kvp_net_free(ND.net);
    kvp_rt_free(rt);
}
