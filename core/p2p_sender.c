/* core/p2p_sender.c — P's sender loop (vLLM's sender_loop) as an actor.
 *
 * Owns: SendBlockMeta entries keyed by transfer id, and the D pulls being
 * served. The worker main posts SEND_RECORD / NOT_PROCESSED; D's receivers
 * send XFER_META over the transport's control channel.
 *
 * Per pull (one XFER_META from one D rank):
 *
 *   WAIT --some entries ready--> XFER --all batches done--> respond
 *     ^                                                     |  |
 *     +------------- CONTINUE (requests still waiting) -----+  |
 *   FINISH (none left) or ready-wait timeout -> DONE <---------+
 *   invalid message / injected handler exception -> whole ERROR, DONE
 *
 * Binding: a request P recorded with the D engine the proxy named is served
 * only to a pull from that engine (XFER_META's d_engine), sent over the very
 * link P writes to (the control peer is the peer of d_addr: with a cluster
 * secret, an authenticated one). A request of a pull from another engine
 * fails in that pull's response ("transfer id bound to another D engine",
 * logged and counted in foreign_refused); its entry stays for the engine it
 * is bound to. Transfer ids are 128 random bits (kv_xfer_id), so a peer
 * cannot name another request's by guessing.
 *
 * Per entry: placeholder (p_req unknown) --SEND_RECORD filled--> ready;
 * each ok transfer bumps `sent`; at sent == need_send the entry is popped
 * and finished_sending goes to the worker main. An entry whose send never
 * completes is reaped at its expiry (VLLM_MOONCAKE_ABORT_REQUEST_TIMEOUT):
 * the blocks are released as finished_sending. Unlike the original, a
 * placeholder left behind by a ready-wait timeout is dropped (no state stays
 * for a finished request: INV-LEAK).
 * Edge -> function: XFER_META on_pull; SEND_RECORD on_record; NOT_PROCESSED
 * on_not_processed; try_progress; batch DONE on_done/complete_round;
 * timers on_timeout, on_reap; PEER_DOWN on_peer_down.
 *
 * Invariants (sender_invariants: S1, O(1), on entry to and return from
 * every message in every build; sender_walk: S2-S8 on return in checked
 * builds; INV-ASSERT, core/assert.h):
 *   S1 n_entries <= SND_ENTRIES_MAX, n_preqs <= SND_PREQS_MAX;
 *   S2 timer ids only grow (next_timer >= every pull's timer), so a stale
 *      timer never matches a reused slot;
 *   S3 an entry's key is key_of(its tid); ready <=> p_req is known <=>
 *      an expiry is set; an entry not ready is bound to no engine yet;
 *      once need_send is set it is 1..KV_TP_MAX and sent
 *      is below it (at need_send the entry is popped);
 *   S4 a used pull's requests lie in the pool (base + n_reqs <= n_preqs,
 *      req == &preq[base], n_reqs <= KV_PULL_REQS_MAX), every one of their
 *      slots marked used; a state is WAIT, ROUND, DONE or FAILED;
 *   S5 the pool leaks nothing: used slots == the sum of used pulls' n_reqs;
 *   S6 a request is in ROUND only while its pull has batches outstanding;
 *      a dead or timed-out pull still has some (else it was released);
 *   S7 an entry's `sending` never exceeds the ROUND requests naming its tid
 *      (the count the PREQ_FAILED fix keeps right);
 *   S8 an unused pull holds no requests and no batches (release_pull).
 * Messages from our own worker (SEND_RECORD) and our own timers are
 * asserted on; D's XFER_META is validated and answered with an ERROR, never
 * asserted on. A response from our own encoder is well formed
 * (kv_wire_encoded_ok). */
#include <stdio.h> /* snprintf only */
#include <string.h>

#include "core/assert.h"
#include "core/p2p.h"

#define SND_ENTRIES_MAX (KV_ENGINE_REQS_MAX * 2u)
#define SND_PULLS_MAX 32u
/* Request slots shared by all pulls (a pull takes n_reqs contiguous ones):
 * D batches one or a few requests per pull, so a pool keeps the sender
 * small while many pulls wait at once. */
#define SND_PREQS_MAX 64u
/* Largest XFER_RESP: header, three u32, two lists of KV_PULL_REQS_MAX ids,
 * the error message. */
#define SND_RESP_MAX (KV_WIRE_HDR_BYTES + 12u + 2u * (2u + 4u * KV_PULL_REQS_MAX) + 2u + KV_ERR_MSG_MAX)

typedef struct snd_entry { /* in use when its key is set (kv_p2p_sender.key) */
    bool ready;            /* the real blocks arrived (asyncio.Event set) */
    bool need_set;
    kv_xfer_id tid;
    uint32_t d_engine;     /* the D engine the proxy named (KV_ENGINE_ANY: any); known once ready */
    uint32_t p_req;        /* KV_REQ_NONE: placeholder created by a pull */
    uint32_t need_send;    /* paired D ranks that must each get the blocks */
    uint32_t sent;
    uint32_t sending;
    uint64_t expire_ns;
    uint32_t first_pos[KV_GROUPS_MAX];
    kv_block_table blocks;
} snd_entry;

/* WAIT: its entry is not ready; ROUND: in the round in flight (its entry's
 * `sending` counts it); FAILED: given up without a round (ready-wait
 * timeout, peer lost), answered as an error with the next response; DONE:
 * answered. */
enum { PREQ_WAIT = 0, PREQ_ROUND = 1, PREQ_DONE = 2, PREQ_FAILED = 3 };

typedef struct snd_preq {
    uint32_t d_req;
    kv_xfer_id tid;
    uint8_t state;
    uint8_t ok;            /* outcome of its round */
    kv_block_table blocks; /* D's destination blocks */
} snd_preq;

typedef struct snd_pull {
    bool used;
    bool dead;             /* peer lost: finish the round, answer nobody */
    bool timed_out;        /* ready-wait deadline passed during a round */
    uint32_t gen;          /* round number, part of each batch's tag */
    uint32_t timer;        /* id of the ready-wait timer; stale ones are ignored */
    kvt_peer ctrl_peer, data_peer;
    uint32_t batch, d_engine, d_tp, d_rank;
    kvt_desc region[KV_GROUPS_MAX];
    uint32_t d_block_bytes;
    uint32_t outstanding;  /* batches of the current round */
    bool round_failed;
    int32_t provider_err;
    uint32_t n_reqs;
    uint32_t base;         /* its first slot in the sender's request pool */
    snd_preq *req;         /* = &pool[base], n_reqs of them */
} snd_pull;

typedef struct kv_m_snd_timer {
    uint32_t slot, gen;
} kv_m_snd_timer;

struct kv_p2p_sender {
    kv_owner owner;
    kv_worker *w;          /* borrowed; immutable fields only */
    uint32_t actor;
    kvt_ep ep;
    kvt_addr addr;
    uint32_t n_entries;    /* 2 x the engine's reqs_max, at most SND_ENTRIES_MAX */
    uint32_t n_preqs;      /* see preq_pool_size */
    snd_entry *entry;      /* [n_entries] */
    /* key_of(tid of entry[i]) while it is in use, else 0: the lookups scan
     * these 8-byte keys, not the 1.4 KB entries (a miss read every entry's
     * cache line), and compare the whole id only on a match. */
    uint64_t key[SND_ENTRIES_MAX];
    snd_pull pull[SND_PULLS_MAX];
    snd_preq *preq;        /* [n_preqs] */
    bool *preq_used;       /* [n_preqs] */
    uint32_t fault_exception, fault_err_req, fault_drop_resp; /* armed counts */
    uint64_t share_refused; /* pulls refused because their D peer held its share (cfg.peer_share_pct) */
    uint64_t foreign_refused; /* requests refused to a D engine other than the one they are bound to */
    uint64_t peer_refused;  /* pulls refused because they came over another link than their d_addr's */
    uint32_t next_timer;   /* timer ids never repeat, even across slot reuse */
    kv_wire_msg *in;       /* scratch (env): the pull being handled, decoded */
    kv_wire_msg *out;      /* scratch (env): the response being encoded */
    kvt_write writes[KVT_BATCH_WRITES_MAX];
    uint8_t buf[SND_RESP_MAX]; /* encodes responses only (they are small) */
};

#define SND_ENV(s) ((s)->w->env)
#define SND_ASSERT(s, cond, ...) KV_ASSERT(SND_ENV(s), (s)->w->cfg.index, cond, __VA_ARGS__)
#define SND_ASSERT_CHECKED(s, cond, ...) KV_ASSERT_CHECKED(SND_ENV(s), (s)->w->cfg.index, cond, __VA_ARGS__)

/* An entry's scan key: the id's low half with bit 0 set (0 marks a free
 * entry). */
static uint64_t key_of(kv_xfer_id tid) { return tid.lo | 1u; }

static snd_entry *find_entry(kv_p2p_sender *s, kv_xfer_id tid) {
    uint64_t k = key_of(tid);
    for (uint32_t i = 0; i < s->n_entries; i++)
        if (s->key[i] == k && kv_xfer_id_eq(s->entry[i].tid, tid)) return &s->entry[i];
    return NULL;
}

static void entry_clear(kv_p2p_sender *s, snd_entry *e) {
    ptrdiff_t i = e - s->entry;
    if (!SND_ASSERT(s, i >= 0 && (size_t)i < s->n_entries && s->key[i] == key_of(e->tid),
                    "engine %u rank %u sender: clearing entry %td (tid %08x, key %llx)", s->w->cfg.index, s->w->rank, i,
                    kv_xfer_id_short(e->tid), i >= 0 && (size_t)i < s->n_entries ? (unsigned long long)s->key[i] : 0ull))
        return;
    s->key[i] = 0;
    memset(e, 0, sizeof *e);
}

static snd_entry *get_or_create(kv_p2p_sender *s, kv_xfer_id tid) {
    snd_entry *e = find_entry(s, tid);
    if (e) return e;
    for (uint32_t i = 0; i < s->n_entries; i++) {
        if (s->key[i]) continue;
        e = &s->entry[i];
        memset(e, 0, sizeof *e);
        s->key[i] = key_of(tid);
        e->tid = tid;
        e->d_engine = KV_ENGINE_ANY;
        e->p_req = KV_REQ_NONE;
        e->expire_ns = UINT64_MAX;
        return e;
    }
    kv_logf(SND_ENV(s), KV_LOG_ERROR, "sender: entry table full (tid %08x)", kv_xfer_id_short(tid));
    return NULL;
}

static void finished_sending(kv_p2p_sender *s, snd_entry *e) {
    kv_m_send_done d = {.p_req = e->p_req};
    if (e->p_req != KV_REQ_NONE) kv_rt_post(s->w->rt, s->w->main_actor, KV_M_P2P_SEND_DONE, &d, sizeof d);
    entry_clear(s, e);
}

static void respond(kv_p2p_sender *s, snd_pull *p, uint32_t status, const char *msg) {
    kv_wire_xfer_resp *r = &s->out->u.resp;
    s->out->type = KV_WIRE_XFER_RESP;
    memset(r, 0, sizeof *r);
    r->status = status;
    r->batch = p->batch;
    r->p_tp_rank = s->w->rank;
    if (msg) snprintf(r->err_msg, sizeof r->err_msg, "%s", msg);
    for (uint32_t i = 0; i < p->n_reqs; i++) {
        snd_preq *q = &p->req[i];
        if (q->state != PREQ_ROUND && q->state != PREQ_FAILED) continue;
        q->state = PREQ_DONE;
        if (q->ok && !s->fault_err_req) r->ok[r->n_ok++] = q->d_req;
        else r->err[r->n_err++] = q->d_req;
    }
    /* each request of the pull is answered once: the lists fit the wire */
    SND_ASSERT(s, r->n_ok + r->n_err <= p->n_reqs && p->n_reqs <= KV_PULL_REQS_MAX,
               "engine %u rank %u sender: batch %u answers %u ok + %u err of %u requests", s->w->cfg.index,
               s->w->rank, p->batch, r->n_ok, r->n_err, p->n_reqs);
    if (s->fault_err_req && r->n_err) s->fault_err_req--;
    if (s->fault_drop_resp) {
        s->fault_drop_resp--;
        return;
    }
    kv_logf(SND_ENV(s), KV_LOG_INFO, "sender: respond batch %u status %u ok %u err %u%s", p->batch, status,
            r->n_ok, r->n_err, p->dead ? " (peer gone)" : "");
    size_t len = 0;
    if (p->dead) return;
    /* our own response always encodes (SND_RESP_MAX is its largest), and
     * decodes back well formed */
    kv_status st = kv_wire_encode(s->out, s->buf, sizeof s->buf, &len);
    if (!SND_ASSERT(s, st == KV_OK && kv_wire_encoded_ok(s->out, s->buf, len),
                    "engine %u rank %u sender: response to batch %u (%u ok, %u err): encode %s, %zu bytes",
                    s->w->cfg.index, s->w->rank, p->batch, r->n_ok, r->n_err, kv_status_str(st), len))
        return;
    kvt_send_ctrl(s->w->t, s->ep, p->ctrl_peer, s->buf, (uint32_t)len);
}

/* Request slots for pulls. A pull takes a contiguous run of as many slots
 * as it names requests, and every paired D rank pulls a request on its own,
 * so up to K = reqs_max * KV_TP_MAX slots are live at once. A pool of
 * K + K*K/4 always has a free run of n (the K - n slots in use leave at
 * most K - n + 1 gaps); capped at SND_PREQS_MAX, the size without a bound. */
static uint32_t preq_pool_size(uint32_t reqs_max) {
    uint32_t k = reqs_max * KV_TP_MAX;
    if (k >= SND_PREQS_MAX) return SND_PREQS_MAX;
    uint32_t want = k + k * k / 4u;
    return want < SND_PREQS_MAX ? want : SND_PREQS_MAX;
}

/* n contiguous free request slots; SND_PREQS_MAX when there are none. */
static uint32_t preq_take(kv_p2p_sender *s, uint32_t n) {
    for (uint32_t base = 0, run = 0; base + run < s->n_preqs;) {
        if (s->preq_used[base + run]) {
            base += run + 1;
            run = 0;
        } else if (++run == n) {
            for (uint32_t i = base; i < base + n; i++) s->preq_used[i] = true;
            SND_ASSERT(s, base + n <= s->n_preqs, "engine %u rank %u sender: request slots %u..%u of %u",
                       s->w->cfg.index, s->w->rank, base, base + n, s->n_preqs);
            return base;
        }
    }
    return n ? SND_PREQS_MAX : 0;
}

static void release_pull(kv_p2p_sender *s, snd_pull *p) {
    /* a pull with batches in flight would take their completions to a
     * released (or reused) slot */
    if (!SND_ASSERT(s, p->used && p->outstanding == 0 && p->base + p->n_reqs <= s->n_preqs,
                    "engine %u rank %u sender: releasing pull of batch %u (used %d, %u outstanding, slots %u+%u)",
                    s->w->cfg.index, s->w->rank, p->batch, (int)p->used, p->outstanding, p->base, p->n_reqs))
        return;
    for (uint32_t i = 0; i < p->n_reqs; i++) s->preq_used[p->base + i] = false;
    memset(p, 0, sizeof *p);
}

static uint32_t waiting_reqs(const snd_pull *p) {
    uint32_t n = 0;
    for (uint32_t i = 0; i < p->n_reqs; i++) n += p->req[i].state == PREQ_WAIT;
    return n;
}

/* Requests of p still waiting fail; placeholders they created go too (the
 * original left them forever: connector state for a finished request). */
static void fail_waiting(kv_p2p_sender *s, snd_pull *p) {
    for (uint32_t i = 0; i < p->n_reqs; i++) {
        snd_preq *q = &p->req[i];
        if (q->state != PREQ_WAIT) continue;
        q->state = PREQ_FAILED; /* not ROUND: it never counted in its entry's `sending` */
        q->ok = 0;
        snd_entry *e = find_entry(s, q->tid);
        if (e && e->p_req == KV_REQ_NONE && e->sending == 0) entry_clear(s, e);
    }
    /* nothing of this pull waits any more: the next response answers all */
    SND_ASSERT(s, waiting_reqs(p) == 0, "engine %u rank %u sender: batch %u still waits for %u requests",
               s->w->cfg.index, s->w->rank, p->batch, waiting_reqs(p));
}

/* The ready-wait deadline passed. */
static void expire_waiting(kv_p2p_sender *s, snd_pull *p) {
    fail_waiting(s, p);
    respond(s, p, KV_XFER_FINISH, "Timeout waiting for P side ready.");
    release_pull(s, p);
}

static void complete_round(kv_p2p_sender *s, uint32_t slot);

/* _build_transfer_params for one request: writes appended via flush_fn. */
typedef struct round_ctx {
    kv_p2p_sender *s;
    snd_pull *p;
    uint32_t slot;
    uint32_t n;          /* writes buffered */
    bool submit_failed;
} round_ctx;

static void flush_writes(round_ctx *c) {
    if (!c->n) return;
    kv_p2p_sender *s = c->s;
    SND_ASSERT(s, c->n <= KVT_BATCH_WRITES_MAX, "engine %u rank %u sender: batch of %u writes", s->w->cfg.index,
               s->w->rank, c->n);
    uint64_t tag = ((uint64_t)c->slot << 32) | c->p->gen;
    uint64_t deadline = kv_now_ns(SND_ENV(s)) + s->w->cfg.abort_timeout_ns;
    if (kvt_submit(s->w->t, s->ep, c->p->data_peer, s->writes, c->n, tag, deadline) == KV_OK)
        c->p->outstanding++;
    else
        c->submit_failed = true;
    c->n = 0;
}

static void add_write(round_ctx *c, kvt_write w) {
    if (c->n == KVT_BATCH_WRITES_MAX) flush_writes(c);
    c->s->writes[c->n++] = w;
}

/* Returns false for a request-level error ("P num blocks less than D"...). */
static bool plan_request(round_ctx *c, const snd_entry *e, const snd_preq *q) {
    kv_worker *w = c->s->w;
    const snd_pull *p = c->p;
    if (!kv_blocks_any(&q->blocks)) return true; /* notify only: P may free */
    if (q->blocks.n_groups != w->cfg.n_groups || e->blocks.n_groups != w->cfg.n_groups) return false;
    uint32_t lo, hi, dlo, dhi;
    kv_heads_of(w->cfg.tp, w->rank, &lo, &hi);
    kv_heads_of(p->d_tp, p->d_rank, &dlo, &dhi);
    uint32_t h0 = lo > dlo ? lo : dlo, h1 = hi < dhi ? hi : dhi;
    uint32_t len = (h1 - h0) * w->cfg.head_bytes;
    for (uint32_t g = 0; g < w->cfg.n_groups; g++) {
        /* Only mamba-like groups drop their null blocks; a sliding group's
         * null entries keep their positions (nothing is copied for them). */
        bool drop_null = w->cfg.group[g].kind == KV_GROUP_MAMBA;
        uint32_t loc[KV_REQ_BLOCKS_MAX], rem[KV_REQ_BLOCKS_MAX], nl = 0, nr = 0;
        for (uint32_t i = 0; i < e->blocks.n[g]; i++)
            if (!drop_null || e->blocks.id[g][i] != KV_NULL_BLOCK) loc[nl++] = e->blocks.id[g][i];
        for (uint32_t i = 0; i < q->blocks.n[g]; i++)
            if (!drop_null || q->blocks.id[g][i] != KV_NULL_BLOCK) rem[nr++] = q->blocks.id[g][i];
        if (nl < nr) {
            kv_logf(SND_ENV(c->s), KV_LOG_WARN, "sender: P num blocks less than D (tid %08x group %u: %u < %u)",
                    kv_xfer_id_short(q->tid), g, nl, nr);
            return false;
        }
        for (uint32_t i = 0; i < nr; i++) {
            uint32_t lb = loc[nl - nr + i];
            if (lb == KV_NULL_BLOCK || rem[i] == KV_NULL_BLOCK) continue;
            /* our own blocks (our scheduler's table); D's ids are the peer's
             * and the transport bounds-checks them at delivery */
            if (!SND_ASSERT(c->s, lb < w->capacity, "engine %u rank %u sender: tid %08x group %u local block %u of %u",
                            w->cfg.index, w->rank, kv_xfer_id_short(q->tid), g, lb, w->capacity))
                return false;
            add_write(c, (kvt_write){.local = w->region[g],
                                     .local_off = (uint64_t)lb * w->block_bytes + (h0 - lo) * w->cfg.head_bytes,
                                     .remote = p->region[g].region,
                                     .remote_off = (uint64_t)rem[i] * p->d_block_bytes + (h0 - dlo) * w->cfg.head_bytes,
                                     .len = len,
                                     .key = p->region[g].key});
        }
    }
    return true;
}

/* Request q of pull p names a transfer id bound to another D engine: it
 * fails in p's next response, and its entry stays for the engine it is
 * bound to. */
static void refuse_foreign(kv_p2p_sender *s, const snd_pull *p, snd_preq *q, const snd_entry *e) {
    q->state = PREQ_FAILED; /* not ROUND: it never counts in the entry's `sending` */
    q->ok = 0;
    if (++s->foreign_refused <= 16u || s->foreign_refused % 1024u == 0)
        kv_logf(SND_ENV(s), KV_LOG_WARN,
                "sender: engine %u rank %u: D%u rank %u pulled tid %08x, which is bound to D%u; refused (%llu refused)",
                s->w->cfg.index, s->w->rank, p->d_engine, p->d_rank, kv_xfer_id_short(q->tid), e->d_engine,
                (unsigned long long)s->foreign_refused);
}

static void try_progress(kv_p2p_sender *s, uint32_t slot) {
    snd_pull *p = &s->pull[slot];
    if (!p->used || p->outstanding) return;
    round_ctx c = {.s = s, .p = p, .slot = slot};
    uint32_t ready = 0, refused = 0;
    p->gen++;
    p->round_failed = false;
    for (uint32_t i = 0; i < p->n_reqs; i++) {
        snd_preq *q = &p->req[i];
        snd_entry *e = q->state == PREQ_WAIT ? find_entry(s, q->tid) : NULL;
        if (!e || !e->ready) continue;
        if (e->d_engine != KV_ENGINE_ANY && e->d_engine != p->d_engine) {
            refuse_foreign(s, p, q, e);
            refused++;
            continue;
        }
        q->state = PREQ_ROUND;
        ready++;
        e->sending++;
        if (!e->need_set) {
            uint32_t ranks[KV_TP_MAX];
            e->need_send = kv_p2p_paired_ranks(s->w->cfg.tp, s->w->rank, p->d_tp, ranks);
            e->need_set = true;
            /* validate_pull accepted only a D layout paired with this rank:
             * at least one D rank waits for these blocks */
            SND_ASSERT(s, e->need_send >= 1 && e->need_send <= KV_TP_MAX,
                       "engine %u rank %u sender: tid %08x needs %u sends (D TP %u)", s->w->cfg.index, s->w->rank,
                       kv_xfer_id_short(e->tid), e->need_send, p->d_tp);
        }
        q->ok = plan_request(&c, e, q) ? 1 : 0;
    }
    if (!ready) {
        if (refused && !waiting_reqs(p)) { /* nothing else to wait for: answer now */
            respond(s, p, KV_XFER_FINISH, "transfer id bound to another D engine");
            release_pull(s, p);
        }
        return;
    }
    flush_writes(&c);
    if (c.submit_failed) p->round_failed = true;
    if (!p->outstanding) complete_round(s, slot);
}

static void complete_round(kv_p2p_sender *s, uint32_t slot) {
    snd_pull *p = &s->pull[slot];
    if (!SND_ASSERT(s, p->used && p->outstanding == 0, "engine %u rank %u sender: round of slot %u completes with %u outstanding",
                    s->w->cfg.index, s->w->rank, slot, p->outstanding))
        return;
    for (uint32_t i = 0; i < p->n_reqs; i++) {
        snd_preq *q = &p->req[i];
        if (q->state != PREQ_ROUND) continue;
        if (p->round_failed) q->ok = 0; /* TE nonzero return fails every request */
        snd_entry *e = find_entry(s, q->tid);
        if (!e) continue;
        /* every ROUND request counted once in its entry's `sending` */
        if (!SND_ASSERT(s, e->sending > 0, "engine %u rank %u sender: tid %08x ends a round with sending 0",
                        s->w->cfg.index, s->w->rank, kv_xfer_id_short(q->tid)))
            continue;
        e->sending--;
        if (q->ok && ++e->sent >= e->need_send) finished_sending(s, e);
    }
    if (p->timed_out && waiting_reqs(p)) { /* one FINISH for the round and the expired */
        expire_waiting(s, p);
        return;
    }
    char msg[KV_ERR_MSG_MAX];
    snprintf(msg, sizeof msg, "Mooncake transfer engine returned %d", p->provider_err);
    bool more = waiting_reqs(p) > 0;
    respond(s, p, more ? KV_XFER_CONTINUE : KV_XFER_FINISH, p->round_failed ? msg : NULL);
    if (!more || p->dead) release_pull(s, p);
    else try_progress(s, slot);
}

static void whole_error(kv_p2p_sender *s, kvt_peer peer, uint32_t batch, const char *why) {
    snd_pull tmp = {.ctrl_peer = peer, .batch = batch};
    kv_logf(SND_ENV(s), KV_LOG_INFO, "sender: ERROR response: %s", why);
    uint32_t saved = s->fault_drop_resp;
    s->fault_drop_resp = 0;
    respond(s, &tmp, KV_XFER_ERROR, why);
    s->fault_drop_resp = saved;
}

static const char *validate_pull(const kv_p2p_sender *s, const kv_wire_xfer_meta *m) {
    const kv_worker *w = s->w;
    uint32_t ranks[KV_TP_MAX];
    if (!m->d_tp_size || m->d_tp_size > KV_TP_MAX || KV_HEADS % m->d_tp_size || m->d_tp_rank >= m->d_tp_size)
        return "invalid remote TP layout";
    if (!kv_p2p_paired_ranks(m->d_tp_size, m->d_tp_rank, w->cfg.tp, ranks)) return "unpaired TP rank";
    uint32_t dlo, dhi;
    kv_heads_of(m->d_tp_size, m->d_tp_rank, &dlo, &dhi);
    if (m->n_groups != w->cfg.n_groups || m->block_bytes != (dhi - dlo) * w->cfg.head_bytes)
        return "region align/validate failure";
    bool paired = false;
    for (uint32_t i = 0; i < kv_p2p_paired_ranks(m->d_tp_size, m->d_tp_rank, w->cfg.tp, ranks); i++)
        paired = paired || ranks[i] == w->rank;
    return paired ? NULL : "unpaired TP rank";
}

/* Whether a pull of n_reqs requests from peer would take it past its share
 * of the pull slots or of the request slots (cfg.peer_share_pct). The
 * request share never drops below one whole pull, so a peer can always be
 * served once the others let go. */
static bool over_share(const kv_p2p_sender *s, kvt_peer peer, uint32_t n_reqs) {
    uint32_t pct = s->w->cfg.peer_share_pct, pulls = 0, reqs = 0;
    if (pct == 0 || pct >= 100) return false;
    for (uint32_t i = 0; i < SND_PULLS_MAX; i++)
        if (s->pull[i].used && s->pull[i].ctrl_peer == peer) pulls++, reqs += s->pull[i].n_reqs;
    uint32_t max_pulls = SND_PULLS_MAX * pct / 100u, max_reqs = s->n_preqs * pct / 100u;
    uint32_t floor_reqs = s->n_preqs < KV_PULL_REQS_MAX ? s->n_preqs : KV_PULL_REQS_MAX;
    if (max_pulls < 1u) max_pulls = 1u;
    if (max_reqs < floor_reqs) max_reqs = floor_reqs;
    return pulls + 1u > max_pulls || reqs + n_reqs > max_reqs;
}

static void on_pull(kv_p2p_sender *s, kvt_peer peer, const kv_wire_xfer_meta *m) {
    if (s->fault_exception) {
        s->fault_exception--;
        whole_error(s, peer, m->batch, "handler exception (injected)");
        return;
    }
    const char *bad = validate_pull(s, m);
    if (bad) {
        whole_error(s, peer, m->batch, bad);
        return;
    }
    if (over_share(s, peer, m->n_reqs)) {
        if (++s->share_refused <= 16u || s->share_refused % 1024u == 0)
            kv_logf(SND_ENV(s), KV_LOG_WARN,
                    "sender: engine %u rank %u: pull batch %u from D%u rank %u refused: that peer holds its share "
                    "(%u%%) of the pull or request slots (%llu refused)",
                    s->w->cfg.index, s->w->rank, m->batch, m->d_engine, m->d_tp_rank, s->w->cfg.peer_share_pct,
                    (unsigned long long)s->share_refused);
        whole_error(s, peer, m->batch, "sender busy (this D's share)");
        return;
    }
    uint32_t slot = UINT32_MAX;
    for (uint32_t i = 0; i < SND_PULLS_MAX && slot == UINT32_MAX; i++)
        if (!s->pull[i].used) slot = i;
    uint32_t base = slot == UINT32_MAX ? SND_PREQS_MAX : preq_take(s, m->n_reqs);
    kvt_peer data_peer = KVT_NONE;
    if (base == SND_PREQS_MAX || kvt_connect(s->w->t, s->ep, &m->d_addr, &data_peer) != KV_OK) {
        if (base != SND_PREQS_MAX)
            for (uint32_t i = 0; i < m->n_reqs; i++) s->preq_used[base + i] = false;
        whole_error(s, peer, m->batch, base == SND_PREQS_MAX ? "sender busy" : "cannot reach D");
        return;
    }
    if (data_peer != peer) { /* asked over one link to write into another's regions */
        for (uint32_t i = 0; i < m->n_reqs; i++) s->preq_used[base + i] = false;
        if (++s->peer_refused <= 16u || s->peer_refused % 1024u == 0)
            kv_logf(SND_ENV(s), KV_LOG_WARN,
                    "sender: engine %u rank %u: pull batch %u names D%u rank %u at an address other than the "
                    "link it came over; refused (%llu refused)",
                    s->w->cfg.index, s->w->rank, m->batch, m->d_engine, m->d_tp_rank,
                    (unsigned long long)s->peer_refused);
        whole_error(s, peer, m->batch, "pull not sent from its d_addr");
        return;
    }
    /* preq_take's run and a free pull slot (the decoder bounded n_reqs) */
    if (!SND_ASSERT(s, slot < SND_PULLS_MAX && base + m->n_reqs <= s->n_preqs && m->n_reqs <= KV_PULL_REQS_MAX,
                    "engine %u rank %u sender: pull into slot %u at request slots %u+%u of %u", s->w->cfg.index,
                    s->w->rank, slot, base, m->n_reqs, s->n_preqs))
        return;
    snd_pull *p = &s->pull[slot];
    uint32_t gen = p->gen + 1;
    *p = (snd_pull){.used = true, .gen = gen, .ctrl_peer = peer, .data_peer = data_peer,
                    .batch = m->batch, .d_engine = m->d_engine, .d_tp = m->d_tp_size,
                    .d_rank = m->d_tp_rank, .d_block_bytes = m->block_bytes, .n_reqs = m->n_reqs,
                    .base = base, .req = &s->preq[base]};
    memcpy(p->region, m->region, sizeof p->region);
    for (uint32_t i = 0; i < m->n_reqs; i++) {
        p->req[i] = (snd_preq){.d_req = m->req[i].d_req, .tid = m->req[i].transfer_id,
                               .blocks = m->req[i].blocks};
        get_or_create(s, m->req[i].transfer_id);
    }
    kv_logf(SND_ENV(s), KV_LOG_INFO, "sender: pull batch %u from D%u rank %u: %u requests (slot %u)", m->batch,
            m->d_engine, m->d_tp_rank, m->n_reqs, slot);
    p->timer = ++s->next_timer;
    kv_m_snd_timer t = {.slot = slot, .gen = p->timer};
    kv_rt_post_at(s->w->rt, s->actor, kv_now_ns(SND_ENV(s)) + s->w->cfg.abort_timeout_ns,
                  KV_M_P2P_SEND_TIMEOUT, &t, sizeof t);
    try_progress(s, slot);
}

static void kick_all(kv_p2p_sender *s) {
    for (uint32_t i = 0; i < SND_PULLS_MAX; i++)
        if (s->pull[i].used && waiting_reqs(&s->pull[i])) try_progress(s, i);
}

static void on_record(kv_p2p_sender *s, const kv_p2p_send *r) {
    /* our own worker's record of our own scheduler's request_finished */
    if (!SND_ASSERT(s, r->p_req != KV_REQ_NONE && (!r->filled || r->blocks.n_groups == s->w->cfg.n_groups),
                    "engine %u rank %u sender: record of request %u tid %08x (filled %u, %u groups)", s->w->cfg.index,
                    s->w->rank, r->p_req, kv_xfer_id_short(r->transfer_id), r->filled, r->blocks.n_groups))
        return;
    snd_entry *e = r->filled ? find_entry(s, r->transfer_id) : get_or_create(s, r->transfer_id);
    if (!r->filled) return;
    if (!e) { /* the original raised KeyError here; the entry is made instead */
        kv_logf(SND_ENV(s), KV_LOG_WARN, "sender: blocks for unknown tid %08x", kv_xfer_id_short(r->transfer_id));
        e = get_or_create(s, r->transfer_id);
        if (!e) return;
    }
    e->p_req = r->p_req;
    e->d_engine = r->d_engine;
    e->blocks = r->blocks;
    memcpy(e->first_pos, r->first_pos, sizeof e->first_pos);
    e->expire_ns = kv_now_ns(SND_ENV(s)) + s->w->cfg.abort_timeout_ns;
    e->ready = true;
    kv_rt_post_at(s->w->rt, s->actor, e->expire_ns, KV_M_P2P_REAP, &e->tid, sizeof e->tid);
    kick_all(s);
}

static void on_not_processed(kv_p2p_sender *s, kv_xfer_id tid) {
    snd_entry *e = find_entry(s, tid);
    if (!e) return;
    if (e->ready) kv_logf(SND_ENV(s), KV_LOG_WARN, "sender: not-processed tid %08x was ready", kv_xfer_id_short(tid));
    if (e->sending == 0) entry_clear(s, e);
}

static void on_reap(kv_p2p_sender *s, kv_xfer_id tid) {
    snd_entry *e = find_entry(s, tid);
    uint64_t now = kv_now_ns(SND_ENV(s));
    if (!e || e->p_req == KV_REQ_NONE || e->expire_ns > now) return;
    if (e->sending) { /* a transfer still runs: look again shortly */
        kv_rt_post_at(s->w->rt, s->actor, now + s->w->cfg.idle_poll_ns, KV_M_P2P_REAP, &tid, sizeof tid);
        return;
    }
    kv_logf(SND_ENV(s), KV_LOG_INFO, "sender: tid %08x expired; releasing its blocks", kv_xfer_id_short(tid));
    finished_sending(s, e);
}

static void on_timeout(kv_p2p_sender *s, const kv_m_snd_timer *t) {
    /* our own timer: its slot is one we armed (a stale one is caught below) */
    if (!SND_ASSERT(s, t->slot < SND_PULLS_MAX && t->gen <= s->next_timer, "engine %u rank %u sender: timer slot %u gen %u (next %u)",
                    s->w->cfg.index, s->w->rank, t->slot, t->gen, s->next_timer))
        return;
    snd_pull *p = &s->pull[t->slot];
    if (!p->used || p->timer != t->gen) return;
    if (!waiting_reqs(p)) return;
    if (p->outstanding) {
        p->timed_out = true;
        return;
    }
    expire_waiting(s, p);
}

static void on_done(kv_p2p_sender *s, const kvt_completion *c) {
    uint32_t slot = (uint32_t)(c->tag >> 32);
    if (slot >= SND_PULLS_MAX || !s->pull[slot].used || !s->pull[slot].outstanding ||
        (uint32_t)c->tag != s->pull[slot].gen) {
        kv_violate(SND_ENV(s), KV_INV_STRAY, s->w->cfg.index, KV_REQ_NONE,
                   "sender: completion for no outstanding batch (tag %llx)", (unsigned long long)c->tag);
        return;
    }
    snd_pull *p = &s->pull[slot];
    if (c->status != KV_OK || c->n_failed) {
        p->round_failed = true;
        p->provider_err = c->provider_err ? c->provider_err : (int32_t)c->status;
    }
    if (--p->outstanding == 0) complete_round(s, slot);
}

static void on_event(kv_p2p_sender *s, const kv_msg *m) {
    const kvt_event *ev = m->payload;
    switch ((kvt_event_kind)ev->kind) {
    case KVT_EV_DONE: on_done(s, &ev->done); return;
    case KVT_EV_PEER_DOWN:
        for (uint32_t i = 0; i < SND_PULLS_MAX; i++) {
            snd_pull *p = &s->pull[i];
            if (!p->used || (p->ctrl_peer != ev->peer && p->data_peer != ev->peer)) continue;
            p->dead = true;
            fail_waiting(s, p);
            if (!p->outstanding) release_pull(s, p);
        }
        return;
    case KVT_EV_CTRL: break;
    }
    const uint8_t *bytes = (const uint8_t *)m->payload + sizeof *ev;
    if (kv_wire_decode(bytes, ev->len, s->in) != KV_OK || s->in->type != KV_WIRE_XFER_META) {
        whole_error(s, ev->peer, 0, "malformed pull request");
        return;
    }
    on_pull(s, ev->peer, &s->in->u.meta);
}

static void on_fault(kv_p2p_sender *s, const kv_m_fault *f) {
    switch ((kv_fault_kind)f->kind) {
    case KV_F_SENDER_EXCEPTION: s->fault_exception++; break;
    case KV_F_SENDER_ERR_REQ: s->fault_err_req++; break;
    case KV_F_SENDER_DROP_RESP: s->fault_drop_resp++; break;
    case KV_F_BOOT_DOWN:
    case KV_F_STORE_PUT_FAIL:
    case KV_F_STORE_GET_FAIL:
    case KV_F_STORE_EVICT:
    case KV_F_STORE_PRESSURE:
    case KV_F_STORE_EXISTS_FAIL: break;
    }
}

/* S1: O(1). */
static bool sender_invariants(const kv_p2p_sender *s) {
    if (!SND_ASSERT(s, s->n_entries <= SND_ENTRIES_MAX && s->n_preqs <= SND_PREQS_MAX,
                    "engine %u rank %u sender: %u entries, %u request slots", s->w->cfg.index, s->w->rank,
                    s->n_entries, s->n_preqs))
        return false;
    return true;
}

/* S3, S7 for entry i; rounds[k] counts ROUND requests naming entry k. */
static bool sender_walk_entry(const kv_p2p_sender *s, uint32_t i, uint32_t rounds) {
    const snd_entry *e = &s->entry[i];
    bool known = e->p_req != KV_REQ_NONE;
    return SND_ASSERT_CHECKED(s, s->key[i] == key_of(e->tid) && e->ready == known &&
                                     known == (e->expire_ns != UINT64_MAX) && (known || e->d_engine == KV_ENGINE_ANY) &&
                                     (!e->need_set || (e->need_send >= 1 && e->need_send <= KV_TP_MAX &&
                                                       e->sent < e->need_send)) &&
                                     e->sending <= rounds,
                              "engine %u rank %u sender: entry %u tid %08x p_req %u ready %d need %u/%d sent %u "
                              "sending %u of %u rounds",
                              s->w->cfg.index, s->w->rank, i, kv_xfer_id_short(e->tid), e->p_req, (int)e->ready, e->need_send,
                              (int)e->need_set, e->sent, e->sending, rounds);
}

/* S4, S6 for pull slot i; counts its slots into *slots and its ROUND
 * requests into rounds[] by entry. */
static bool sender_walk_pull(const kv_p2p_sender *s, uint32_t i, uint32_t *slots, uint32_t *rounds) {
    const snd_pull *p = &s->pull[i];
    if (!p->used) /* S8 */
        return SND_ASSERT_CHECKED(s, !p->n_reqs && !p->outstanding && !p->req,
                                  "engine %u rank %u sender: free pull slot %u keeps %u requests, %u outstanding",
                                  s->w->cfg.index, s->w->rank, i, p->n_reqs, p->outstanding);
    if (!SND_ASSERT_CHECKED(s, p->base + p->n_reqs <= s->n_preqs && p->req == &s->preq[p->base] &&
                                   p->n_reqs <= KV_PULL_REQS_MAX && p->timer <= s->next_timer &&
                                   ((!p->dead && !p->timed_out) || p->outstanding),
                            "engine %u rank %u sender: pull %u batch %u slots %u+%u of %u, dead %d timed_out %d "
                            "outstanding %u",
                            s->w->cfg.index, s->w->rank, i, p->batch, p->base, p->n_reqs, s->n_preqs, (int)p->dead,
                            (int)p->timed_out, p->outstanding))
        return false;
    *slots += p->n_reqs;
    for (uint32_t k = 0; k < p->n_reqs; k++) {
        const snd_preq *q = &p->req[k];
        if (!SND_ASSERT_CHECKED(s, s->preq_used[p->base + k] && q->state <= PREQ_FAILED &&
                                       (q->state != PREQ_ROUND || p->outstanding),
                                "engine %u rank %u sender: pull %u request %u (tid %08x) state %u slot used %d, %u outstanding",
                                s->w->cfg.index, s->w->rank, i, k, kv_xfer_id_short(q->tid), q->state, (int)s->preq_used[p->base + k],
                                p->outstanding))
            return false;
        if (q->state != PREQ_ROUND) continue;
        for (uint32_t j = 0; j < s->n_entries; j++)
            if (s->key[j] == key_of(q->tid) && kv_xfer_id_eq(s->entry[j].tid, q->tid)) rounds[j]++;
    }
    return true;
}

/* S3-S8: every entry, pull and request slot. Checked builds. */
static bool sender_walk(const kv_p2p_sender *s) {
    uint32_t rounds[SND_ENTRIES_MAX] = {0}, slots = 0, used = 0;
    for (uint32_t i = 0; i < SND_PULLS_MAX; i++)
        if (!sender_walk_pull(s, i, &slots, rounds)) return false;
    for (uint32_t i = 0; i < s->n_preqs; i++) used += s->preq_used[i];
    if (!SND_ASSERT_CHECKED(s, used == slots, "engine %u rank %u sender: %u request slots used, pulls hold %u",
                            s->w->cfg.index, s->w->rank, used, slots))
        return false;
    for (uint32_t i = 0; i < s->n_entries; i++)
        if (s->key[i] && !sender_walk_entry(s, i, rounds[i])) return false;
    return true;
}

static void send_handle(void *self, const kv_msg *m) {
    kv_p2p_sender *s = self;
    kv_owner_check(SND_ENV(s), &s->owner, s->w->cfg.index);
    sender_invariants(s);
    switch (m->kind) {
    case KV_M_P2P_SEND_RECORD: on_record(s, m->payload); break;
    case KV_M_P2P_NOT_PROCESSED: on_not_processed(s, *(const kv_xfer_id *)m->payload); break;
    case KV_M_P2P_SEND_TIMEOUT: on_timeout(s, m->payload); break;
    case KV_M_P2P_REAP: on_reap(s, *(const kv_xfer_id *)m->payload); break;
    case KV_M_FAULT: on_fault(s, m->payload); break;
    case KVT_MSG_EVENT: on_event(s, m); break;
    default: kv_logf(SND_ENV(s), KV_LOG_WARN, "sender: unexpected message %u", m->kind);
    }
    if (sender_invariants(s) && KV_CHECKED) sender_walk(s);
}

kv_status kv_p2p_sender_new(kv_worker *w, kv_p2p_sender **out, uint32_t *out_actor) {
    kv_p2p_sender *s = kv_alloc(w->env, sizeof *s);
    if (!s) return KV_ENOMEM;
    s->w = w;
    s->n_entries = 2u * w->cfg.reqs_max < SND_ENTRIES_MAX ? 2u * w->cfg.reqs_max : SND_ENTRIES_MAX;
    s->n_preqs = preq_pool_size(w->cfg.reqs_max);
    s->entry = kv_alloc_scratch(w->env, s->n_entries * sizeof s->entry[0]); /* get_or_create clears a slot */
    s->preq = kv_alloc_scratch(w->env, s->n_preqs * sizeof s->preq[0]); /* a pull writes its slots */
    s->preq_used = kv_alloc(w->env, s->n_preqs * sizeof s->preq_used[0]);
    s->in = kv_alloc_scratch(w->env, sizeof *s->in);
    s->out = kv_alloc_scratch(w->env, sizeof *s->out);
    kv_status st = s->entry && s->preq && s->preq_used && s->in && s->out ? KV_OK : KV_ENOMEM; /* key[]: zeroed with s */
    if (st == KV_OK) st = kv_worker_spawn(w, "send", send_handle, s, 1u << 18, &s->actor);
    if (st == KV_OK) st = kvt_ep_open(w->t, s->actor, &s->ep, &s->addr);
    if (st != KV_OK) {
        kv_p2p_sender_free(s);
        return st;
    }
    s->owner = (kv_owner){.actor = s->actor, .what = "sender entries"};
    /* Register this rank with the bootstrap service (POST /register). */
    kv_wire_boot reg = {.engine = w->cfg.index, .tp_size = w->cfg.tp, .tp_rank = w->rank};
    reg.addr[0] = s->addr;
    if (w->cfg.bootstrap_actor != KV_ACTOR_NONE)
        kv_rt_post(w->rt, w->cfg.bootstrap_actor, KV_M_BOOT_REG, &reg, sizeof reg);
    *out = s;
    *out_actor = s->actor;
    return KV_OK;
}

void kv_p2p_sender_free(kv_p2p_sender *s) {
    if (!s) return;
    kv_release(s->w->env, s->out);
    kv_release(s->w->env, s->in);
    kv_release(s->w->env, s->preq_used);
    kv_release(s->w->env, s->preq);
    kv_release(s->w->env, s->entry);
    kv_release(s->w->env, s);
}

/* A pull could be refused now: no free pull slot, no free entry, or (only
 * where the request-slot pool is capped below its bound, preq_pool_size)
 * no free run for the largest pull. An uncapped pool always has a run for
 * every pull its requests can make. */
bool kv_p2p_sender_saturated(const kv_p2p_sender *s) {
    /* each scan stops at the first free slot: the checker asks this after
     * every event of the sender */
    bool pull_free = false, entry_free = false;
    for (uint32_t i = 0; i < SND_PULLS_MAX && !pull_free; i++) pull_free = !s->pull[i].used;
    if (!pull_free) return true;
    for (uint32_t i = 0; i < s->n_entries && !entry_free; i++) entry_free = s->key[i] == 0;
    if (!entry_free) return true;
    if (s->n_preqs != SND_PREQS_MAX) return false;
    for (uint32_t i = 0, run = 0; i < s->n_preqs; i++) {
        run = s->preq_used[i] ? 0 : run + 1;
        if (run >= KV_PULL_REQS_MAX) return false;
    }
    return true;
}

uint32_t kv_p2p_sender_state(const kv_p2p_sender *s) {
    uint32_t n = 0;
    for (uint32_t i = 0; i < s->n_entries; i++) n += s->key[i] != 0;
    for (uint32_t i = 0; i < SND_PULLS_MAX; i++) n += s->pull[i].used;
    return n;
}
