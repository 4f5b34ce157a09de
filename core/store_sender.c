/* core/store_sender.c — the store connector's send actor (vLLM's
 * KVCacheStoreSendingThread): saves snapshot jobs to the store.
 *
 * State (owner: this actor): a FIFO of save jobs, one in flight; resume
 * offsets per request (tokens already put, vLLM's _saved_offset); the
 * pool-pressure skip deadline.
 * Offsets live while a request has jobs queued or in flight; a forget (the
 * request ended) drops its offset at once when it has none, else after its
 * last job (never queued itself: a full queue cannot lose it).
 * Transitions, per job (_handle_request):
 *   pressure skip on  skip the job
 *   start             drop the blocks below the resume offset; none left:
 *                     done; else EXIST for the rest (batch_is_exist)
 *   EXIST_REPLY       keep the missing keys; none: done; else PUT them
 *   EXIST_REPLY fail  done (the save is dropped: its offset stays)
 *   PUT_REPLY 0       done
 *   done (ok)         the save's last job, every job of the save done ok:
 *                     resume offset = the save's end (a save split into
 *                     jobs moves it once, as vLLM's one put does)
 *   PUT_REPLY -200    pressure skip for KV_STORE_PRESSURE_SKIP_NS; done
 *   other, timeout    done (the save is dropped: its offset stays)
 *   done              exactly one SAVE_DONE to the worker main, whatever
 *                     happened (the `finally:` that releases the pin)
 * Invariants (store_sender_invariants: X1-X2, O(1), on entry to and return
 * from every message in every build; store_sender_walk: X3-X4 on return in
 * checked builds; INV-ASSERT, core/assert.h):
 *   X1 n <= KV_STORE_JOBS_MAX, head < KV_STORE_JOBS_MAX, n_keep <=
 *      KV_STORE_BATCH_MAX;
 *   X2 busy => a job is queued, and busy <=> an operation is in flight
 *      (the channel's seq): a job waits only for the store's reply;
 *   X3 the queued counts of the offsets sum to at most n (a job counts on
 *      its request's offset once; one without a free offset counts none);
 *      a forgotten offset still has jobs queued (else it is dropped);
 *   X4 request ids are unique among used offsets.
 * The jobs come from our own worker main (asserted: at most
 * KV_STORE_BATCH_MAX blocks, a forget carries none); the store's replies are
 * a peer's (validated: a count that does not match fails the job). */
#include <string.h>

#include "core/assert.h"
#include "core/msgs.h"
#include "core/store.h"

#define SND_OFFSETS_MAX KV_ENGINE_REQS_MAX

typedef struct snd_offset {
    bool used;
    bool forgotten;        /* the request ended; drop once queued is 0 */
    uint32_t id;
    uint32_t tokens;
    uint32_t queued;       /* its jobs queued or in flight */
    bool failed;           /* a job of the save in progress failed or was dropped */
} snd_offset;

struct kv_store_sender {
    kv_owner owner;
    kv_worker *w;                         /* borrowed: immutable parts */
    uint32_t main_actor;
    kv_store_chan chan;
    kv_m_store_save *q;                   /* [KV_STORE_JOBS_MAX], q[head .. head+n); scratch (env) */
    uint32_t head, n;
    bool busy;
    uint32_t keep[KV_STORE_BATCH_MAX];    /* entries of the job in flight still to put */
    uint32_t n_keep;
    snd_offset off[SND_OFFSETS_MAX];
    uint64_t skip_until_ns;               /* pool pressure */
};

static snd_offset *offset_of(kv_store_sender *s, uint32_t id, bool create) {
    snd_offset *free_slot = NULL;
    for (uint32_t i = 0; i < SND_OFFSETS_MAX; i++) {
        if (s->off[i].used && s->off[i].id == id) return &s->off[i];
        if (!s->off[i].used && !free_slot) free_slot = &s->off[i];
    }
    if (!create || !free_slot) return NULL;
    *free_slot = (snd_offset){.used = true, .id = id};
    return free_slot;
}

static kv_m_store_save *current(kv_store_sender *s) { return &s->q[s->head]; }

#define XS_ASSERT(s, cond, ...) KV_ASSERT((s)->w->env, (s)->w->cfg.index, cond, __VA_ARGS__)
#define XS_ASSERT_CHECKED(s, cond, ...) KV_ASSERT_CHECKED((s)->w->env, (s)->w->cfg.index, cond, __VA_ARGS__)

/* X1, X2: O(1). */
static bool store_sender_invariants(const kv_store_sender *s) {
    if (!XS_ASSERT(s, s->n <= KV_STORE_JOBS_MAX && s->head < KV_STORE_JOBS_MAX && s->n_keep <= KV_STORE_BATCH_MAX,
                   "engine %u rank %u store send: %u jobs from %u, %u keys kept", s->w->cfg.index, s->w->rank, s->n,
                   s->head, s->n_keep))
        return false;
    return XS_ASSERT(s, (!s->busy || s->n > 0) && s->busy == (s->chan.seq != 0),
                     "engine %u rank %u store send: busy %d with %u jobs, seq %u in flight", s->w->cfg.index, s->w->rank,
                     (int)s->busy, s->n, s->chan.seq);
}

/* X3, X4. Checked builds. */
static bool store_sender_walk(const kv_store_sender *s) {
    uint32_t queued = 0, ids[SND_OFFSETS_MAX], n = 0, a, b;
    for (uint32_t i = 0; i < SND_OFFSETS_MAX; i++) {
        const snd_offset *o = &s->off[i];
        if (!o->used) continue;
        queued += o->queued;
        ids[n++] = o->id;
        if (!XS_ASSERT_CHECKED(s, !o->forgotten || o->queued, "engine %u rank %u store send: request %u forgotten with no job",
                               s->w->cfg.index, s->w->rank, o->id))
            return false;
    }
    if (!XS_ASSERT_CHECKED(s, kv_ids_distinct(ids, n, &a, &b), "engine %u rank %u store send: request %u has two offsets",
                           s->w->cfg.index, s->w->rank, ids[a]))
        return false;
    return XS_ASSERT_CHECKED(s, queued <= s->n, "engine %u rank %u store send: offsets count %u jobs, %u queued",
                             s->w->cfg.index, s->w->rank, queued, s->n);
}

static void unqueue(kv_store_sender *s, uint32_t id) {
    snd_offset *o = offset_of(s, id, false);
    if (o && o->queued && --o->queued == 0 && o->forgotten) o->used = false;
}

static void job_done(kv_store_sender *s, uint32_t saved, int32_t status) {
    /* the job in flight ends once, and its SAVE_DONE releases one pin */
    if (!XS_ASSERT(s, s->busy && s->n > 0 && saved <= KV_STORE_BATCH_MAX,
                   "engine %u rank %u store send: job done while busy %d with %u jobs (%u saved)", s->w->cfg.index,
                   s->w->rank, (int)s->busy, s->n, saved))
        return;
    const kv_m_store_save *j = current(s);
    snd_offset *o = offset_of(s, j->id, false);
    if (o) {
        if (status) o->failed = true;
        else if (j->last && !o->failed && o->tokens < j->end_tokens) o->tokens = j->end_tokens;
        if (j->last) o->failed = false; /* the save is over */
    }
    unqueue(s, j->id);
    kv_m_store_save_done d = {.id = j->id, .saved_blocks = saved, .status = status};
    kv_rt_post(s->w->rt, s->main_actor, KV_M_STORE_SAVE_DONE, &d, sizeof d);
    s->head = (s->head + 1) % KV_STORE_JOBS_MAX;
    s->n--;
    s->busy = false;
}

static void encode_keys(kv_store_sender *s, uint32_t type) {
    const kv_m_store_save *j = current(s);
    kv_wire_store *m = &s->chan.msg->u.store;
    kv_wire_msg_reset(s->chan.msg, type);
    m->block_bytes = s->w->block_bytes;
    for (uint32_t i = 0; i < s->n_keep; i++) {
        if (!XS_ASSERT(s, s->keep[i] < j->n && j->n <= KV_STORE_BATCH_MAX, "engine %u rank %u store send: key %u of a job of %u",
                       s->w->cfg.index, s->w->rank, s->keep[i], j->n))
            return;
        const kv_store_snap *e = &j->e[s->keep[i]];
        m->key[m->n] = kv_store_key_of(e->hash, s->w->head_lo, s->w->head_hi);
        if (type == KV_WIRE_STORE_PUT) memcpy(&m->data[m->n * m->block_bytes], e->bytes, m->block_bytes);
        m->n++;
    }
}

/* Starts jobs until one is waiting for the store. */
static void start_next(kv_store_sender *s) {
    while (s->n && !s->busy) {
        kv_m_store_save *j = current(s);
        s->busy = true;
        if (kv_now_ns(s->w->env) < s->skip_until_ns) {
            job_done(s, 0, 1);
            continue;
        }
        const snd_offset *o = offset_of(s, j->id, false);
        uint32_t resume = o ? o->tokens : 0, bs = s->w->cfg.block_size;
        s->n_keep = 0;
        for (uint32_t i = 0; i < j->n; i++)
            if ((uint32_t)(j->e[i].pos + 1) * bs > resume) s->keep[s->n_keep++] = i;
        if (!s->n_keep) {
            job_done(s, 0, 0);
            continue;
        }
        encode_keys(s, KV_WIRE_STORE_EXIST);
        if (!kv_store_chan_send(&s->chan)) job_done(s, 0, KV_STORE_FAILED);
    }
}

static void on_exist(kv_store_sender *s, const kv_wire_store *m) {
    if (m->status != 0) { /* the call failed (vLLM: batch_is_exist raised): the save is dropped */
        kv_logf(s->w->env, KV_LOG_INFO, "store send: exists of request %u failed (status %d); save dropped",
                current(s)->id, (int)m->status);
        job_done(s, 0, KV_STORE_FAILED);
        return;
    }
    if (m->n != s->n_keep) {
        job_done(s, 0, KV_STORE_FAILED);
        return;
    }
    uint32_t n = 0;
    for (uint32_t i = 0; i < m->n; i++)
        if (!m->flag[i]) s->keep[n++] = s->keep[i];
    s->n_keep = n;
    if (!n) {
        job_done(s, 0, 0);
        return;
    }
    encode_keys(s, KV_WIRE_STORE_PUT);
    if (!kv_store_chan_send(&s->chan)) job_done(s, 0, KV_STORE_FAILED);
}

static void on_put(kv_store_sender *s, const kv_wire_store *m) {
    if (m->status == 0) {
        job_done(s, s->n_keep, 0);
        return;
    }
    if (m->status == KV_STORE_NO_HANDLE) {
        kv_logf(s->w->env, KV_LOG_INFO, "store send: pool pressure; skipping saves for a while");
        s->skip_until_ns = kv_now_ns(s->w->env) + KV_STORE_PRESSURE_SKIP_NS;
    }
    job_done(s, 0, m->status == KV_STORE_NO_HANDLE ? KV_STORE_NO_HANDLE : KV_STORE_FAILED);
}

static void on_event(kv_store_sender *s, const kv_msg *m) {
    if (!s->busy || !kv_store_chan_reply(&s->chan, m)) return;
    switch (s->chan.msg->type) {
    case KV_WIRE_STORE_EXIST_REPLY: on_exist(s, &s->chan.msg->u.store); break;
    case KV_WIRE_STORE_PUT_REPLY: on_put(s, &s->chan.msg->u.store); break;
    default: job_done(s, 0, KV_STORE_FAILED); break;
    }
    start_next(s);
}

static void handle(kv_store_sender *s, const kv_msg *m);

static void send_handle(void *self, const kv_msg *m) {
    kv_store_sender *s = self;
    kv_owner_check(s->w->env, &s->owner, s->w->cfg.index);
    store_sender_invariants(s);
    handle(s, m);
    if (store_sender_invariants(s) && KV_CHECKED) store_sender_walk(s);
}

static void handle(kv_store_sender *s, const kv_msg *m) {
    switch (m->kind) {
    case KV_M_STORE_SAVE: {
        const kv_m_store_save *j = m->payload;
        /* our own worker main's job (issue_save, forget) */
        if (!XS_ASSERT(s, j->n <= KV_STORE_BATCH_MAX && (!j->forget || j->n == 0),
                       "engine %u rank %u store send: job of request %u with %u blocks (forget %u)", s->w->cfg.index,
                       s->w->rank, j->id, j->n, j->forget))
            return;
        if (j->forget) {
            snd_offset *o = offset_of(s, j->id, false);
            if (o && !o->queued) o->used = false;
            else if (o) o->forgotten = true;
            return;
        }
        if (s->n == KV_STORE_JOBS_MAX) { /* cannot queue: dropped, the pin still released */
            snd_offset *o = offset_of(s, j->id, true);
            if (o) o->failed = !j->last; /* the rest of the save must not move the offset */
            kv_m_store_save_done d = {.id = j->id, .status = KV_STORE_FAILED};
            kv_rt_post(s->w->rt, s->main_actor, KV_M_STORE_SAVE_DONE, &d, sizeof d);
            return;
        }
        snd_offset *o = offset_of(s, j->id, true); /* none free: saved without resume */
        if (o) o->queued++;
        s->q[(s->head + s->n++) % KV_STORE_JOBS_MAX] = *j;
        start_next(s);
        break;
    }
    case KV_M_STORE_SAVE_TIMEOUT:
        if (!kv_store_chan_timeout(&s->chan, m)) return;
        /* the channel's operation in flight is this actor's job in flight */
        if (!XS_ASSERT(s, s->busy, "engine %u rank %u store send: timeout with no job in flight", s->w->cfg.index,
                       s->w->rank))
            return;
        kv_logf(s->w->env, KV_LOG_INFO, "store send: request %u timed out", current(s)->id);
        job_done(s, 0, KV_STORE_FAILED);
        start_next(s);
        break;
    case KVT_MSG_EVENT: on_event(s, m); break;
    default: kv_logf(s->w->env, KV_LOG_WARN, "store send: unexpected message %u", m->kind);
    }
}

kv_status kv_store_sender_new(kv_worker *w, kv_store_sender **out, uint32_t *out_actor) {
    kv_store_sender *s = kv_alloc(w->env, sizeof *s);
    if (!s) return KV_ENOMEM;
    s->w = w;
    s->q = kv_alloc_scratch(w->env, KV_STORE_JOBS_MAX * sizeof s->q[0]);
    if (!s->q) {
        kv_release(w->env, s);
        return KV_ENOMEM;
    }
    s->main_actor = w->main_actor;
    uint32_t actor;
    kv_status st = kv_worker_spawn(w, "ssend", send_handle, s, 1u << 19, &actor);
    if (st == KV_OK) st = kv_store_chan_open(&s->chan, w, actor, KV_M_STORE_SAVE_TIMEOUT);
    if (st != KV_OK) {
        kv_store_chan_close(&s->chan);
        kv_release(w->env, s->q);
        kv_release(w->env, s);
        return st;
    }
    s->owner = (kv_owner){.actor = actor, .what = "store send jobs"};
    *out = s;
    *out_actor = actor;
    return KV_OK;
}

void kv_store_sender_free(kv_store_sender *s) {
    if (!s) return;
    kv_store_chan_close(&s->chan);
    kv_release(s->w->env, s->q);
    kv_release(s->w->env, s);
}

uint32_t kv_store_sender_state(const kv_store_sender *s) {
    uint32_t n = s->n;
    for (uint32_t i = 0; i < SND_OFFSETS_MAX; i++) n += s->off[i].used;
    return n;
}
