/* sim/sim_store.c — the simulated KV store; see sim_store.h.
 *
 * Entries live in a fixed array (capacity slots, unused ones on a free
 * stack) found through a linear-probing index of twice the capacity (power
 * of two, backward-shift delete); a list in last-use order (put or get)
 * gives the eviction victim, its head. Every operation answers at
 * once; the network supplies the latency. */
#include "sim/sim_store.h"

#include <string.h>

#include "core/msgs.h"
#include "core/store.h"
#include "kvconn/wire.h"

#define NO_SLOT UINT32_MAX

typedef struct st_entry {
    bool used;
    kv_store_key key;
    uint32_t prev, next;      /* LRU list by last put or get: entry numbers, NO_SLOT ends */
    uint8_t bytes[KV_STORE_SNAP_BYTES];
} st_entry;

struct sim_store {
    const kv_env *env;        /* borrowed */
    kv_rt *rt;
    kvt *t;
    uint32_t node;
    uint32_t actor;
    kvt_ep ep;
    kvt_addr addr;
    uint32_t capacity, n_keys;
    st_entry *entry;          /* capacity */
    uint32_t *free_slot;      /* stack of unused entry numbers */
    uint32_t n_free;
    uint32_t *index;          /* index_size slots: entry number or NO_SLOT */
    uint32_t index_size;
    uint32_t lru_head, lru_tail; /* least and most recently used */
    uint32_t put_fail, get_fail, pressure, exists_fail; /* armed fault counts */
    sim_store_stats stats;
    kv_wire_msg *msg;         /* scratch (env) */
    uint8_t *buf;             /* scratch (env): KV_WIRE_MAX bytes */
};

static uint32_t key_hash(const sim_store *s, kv_store_key k) {
    uint64_t h = kv_mix64(k.hash ^ ((uint64_t)k.heads << 1));
    return (uint32_t)h & (s->index_size - 1);
}

static bool key_eq(kv_store_key a, kv_store_key b) { return a.hash == b.hash && a.heads == b.heads; }

/* The index slot holding k, or the empty slot where it would go. */
static uint32_t probe(const sim_store *s, kv_store_key k) {
    uint32_t i = key_hash(s, k);
    while (s->index[i] != NO_SLOT && !key_eq(s->entry[s->index[i]].key, k)) i = (i + 1) & (s->index_size - 1);
    return i;
}

static st_entry *lookup(sim_store *s, kv_store_key k) {
    uint32_t i = probe(s, k);
    return s->index[i] == NO_SLOT ? NULL : &s->entry[s->index[i]];
}

static void index_delete(sim_store *s, uint32_t i) {
    uint32_t mask = s->index_size - 1;
    s->index[i] = NO_SLOT;
    for (uint32_t j = (i + 1) & mask; s->index[j] != NO_SLOT; j = (j + 1) & mask) {
        uint32_t home = key_hash(s, s->entry[s->index[j]].key);
        /* move j back to i when its home is not in (i, j] (cyclically) */
        bool between = i <= j ? (home > i && home <= j) : (home > i || home <= j);
        if (between) continue;
        s->index[i] = s->index[j];
        s->index[j] = NO_SLOT;
        i = j;
    }
}

static void lru_unlink(sim_store *s, st_entry *e) {
    if (e->prev != NO_SLOT) s->entry[e->prev].next = e->next;
    else s->lru_head = e->next;
    if (e->next != NO_SLOT) s->entry[e->next].prev = e->prev;
    else s->lru_tail = e->prev;
    e->prev = e->next = NO_SLOT;
}

/* e was just used: it goes to the tail (e is linked iff e->used). */
static void lru_touch(sim_store *s, st_entry *e, bool linked) {
    uint32_t i = (uint32_t)(e - s->entry);
    if (linked) {
        if (s->lru_tail == i) return;
        lru_unlink(s, e);
    }
    e->prev = s->lru_tail;
    e->next = NO_SLOT;
    if (s->lru_tail != NO_SLOT) s->entry[s->lru_tail].next = i;
    else s->lru_head = i;
    s->lru_tail = i;
}

static void evict(sim_store *s, st_entry *e) {
    lru_unlink(s, e);
    index_delete(s, probe(s, e->key));
    e->used = false;
    s->free_slot[s->n_free++] = (uint32_t)(e - s->entry);
    s->n_keys--;
    s->stats.evictions++;
}

static st_entry *oldest(sim_store *s) { return s->lru_head == NO_SLOT ? NULL : &s->entry[s->lru_head]; }

static void put_key(sim_store *s, kv_store_key k, const uint8_t *bytes, uint32_t n) {
    st_entry *e = lookup(s, k);
    bool linked = e != NULL;
    if (!e) {
        if (s->n_keys == s->capacity) evict(s, oldest(s));
        e = &s->entry[s->free_slot[--s->n_free]];
        e->used = true;
        e->key = k;
        s->index[probe(s, k)] = (uint32_t)(e - s->entry);
        s->n_keys++;
    }
    lru_touch(s, e, linked);
    memset(e->bytes, 0, sizeof e->bytes);
    memcpy(e->bytes, bytes, n);
}

static void reply(sim_store *s, kvt_peer peer) {
    size_t len = 0;
    if (kv_wire_encode(s->msg, s->buf, KV_WIRE_MAX, &len) == KV_OK) kvt_send_ctrl(s->t, s->ep, peer, s->buf, (uint32_t)len);
}

static void on_request(sim_store *s, kvt_peer peer, const uint8_t *bytes, uint32_t len) {
    if (kv_wire_decode(bytes, len, s->msg) != KV_OK) {
        kv_logf(s->env, KV_LOG_WARN, "store: malformed request dropped");
        return;
    }
    kv_wire_store *m = &s->msg->u.store;
    switch ((kv_wire_type)s->msg->type) {
    case KV_WIRE_STORE_EXIST:
        s->stats.exists++;
        s->stats.exist_keys += m->n;
        s->msg->type = KV_WIRE_STORE_EXIST_REPLY;
        if (s->exists_fail) { /* the call fails as a whole: a status, no flags */
            s->exists_fail--;
            s->stats.failures++;
            s->stats.exist_failures++;
            m->status = KV_STORE_FAILED;
            m->n = 0;
            break;
        }
        m->status = 0;
        for (uint32_t i = 0; i < m->n; i++) m->flag[i] = lookup(s, m->key[i]) ? 1 : 0;
        break;
    case KV_WIRE_STORE_PUT: {
        s->stats.puts++;
        bool fits = m->block_bytes <= KV_STORE_SNAP_BYTES;
        if (s->pressure) {
            s->pressure--;
            m->status = KV_STORE_NO_HANDLE;
        } else if (s->put_fail || !fits) {
            if (s->put_fail) s->put_fail--;
            s->stats.failures++;
            m->status = KV_STORE_FAILED;
        } else {
            for (uint32_t i = 0; i < m->n; i++) put_key(s, m->key[i], &m->data[i * m->block_bytes], m->block_bytes);
            s->stats.put_keys += m->n;
            m->status = 0;
        }
        uint32_t seq = m->seq;
        int32_t status = m->status;
        kv_wire_msg_reset(s->msg, KV_WIRE_STORE_PUT_REPLY);
        m->seq = seq;
        m->status = status;
        break;
    }
    case KV_WIRE_STORE_GET: {
        s->stats.gets++;
        s->msg->type = KV_WIRE_STORE_GET_REPLY;
        if (s->get_fail || m->block_bytes > KV_STORE_SNAP_BYTES) {
            if (s->get_fail) s->get_fail--;
            s->stats.failures++;
            m->status = KV_STORE_FAILED;
            memset(m->flag, 0, m->n);
            break;
        }
        m->status = 0;
        uint32_t off = 0;
        for (uint32_t i = 0; i < m->n; i++) {
            st_entry *e = lookup(s, m->key[i]);
            m->flag[i] = e ? 1 : 0;
            if (!e) {
                s->stats.get_misses++;
                continue;
            }
            s->stats.get_hits++;
            lru_touch(s, e, true);
            memcpy(&m->data[off], e->bytes, m->block_bytes);
            off += m->block_bytes;
        }
        break;
    }
    case KV_WIRE_XFER_META:
    case KV_WIRE_XFER_RESP:
    case KV_WIRE_BOOT_REG:
    case KV_WIRE_BOOT_QUERY:
    case KV_WIRE_BOOT_REPLY:
    case KV_WIRE_STORE_EXIST_REPLY:
    case KV_WIRE_STORE_PUT_REPLY:
    case KV_WIRE_STORE_GET_REPLY:
        kv_logf(s->env, KV_LOG_WARN, "store: unexpected message type %u", s->msg->type);
        return;
    }
    reply(s, peer);
}

static void on_fault(sim_store *s, const kv_m_fault *f) {
    uint32_t n = f->arg + 1;
    switch ((kv_fault_kind)f->kind) {
    case KV_F_STORE_PUT_FAIL: s->put_fail += n; break;
    case KV_F_STORE_GET_FAIL: s->get_fail += n; break;
    case KV_F_STORE_PRESSURE: s->pressure += n; break;
    case KV_F_STORE_EXISTS_FAIL: s->exists_fail += n; break;
    case KV_F_STORE_EVICT:
        for (uint32_t i = 0; i < n && s->n_keys; i++) evict(s, oldest(s));
        break;
    case KV_F_SENDER_EXCEPTION:
    case KV_F_SENDER_ERR_REQ:
    case KV_F_SENDER_DROP_RESP:
    case KV_F_BOOT_DOWN: break;
    }
}

static void store_handle(void *self, const kv_msg *m) {
    sim_store *s = self;
    if (m->kind == KV_M_FAULT && m->len == sizeof(kv_m_fault)) {
        on_fault(s, m->payload);
        return;
    }
    if (m->kind != KVT_MSG_EVENT || m->len < sizeof(kvt_event)) return;
    const kvt_event *ev = m->payload;
    if (ev->kind != KVT_EV_CTRL || m->len < sizeof *ev + ev->len) return;
    on_request(s, ev->peer, (const uint8_t *)m->payload + sizeof *ev, ev->len);
}

kv_status sim_store_new(const kv_env *env, kv_rt *rt, kvt *t, uint32_t node, uint32_t capacity, sim_store **out) {
    if (!capacity || capacity > SIM_STORE_CAPACITY_MAX) return KV_EINVAL;
    sim_store *s = kv_alloc(env, sizeof *s); /* zeroed */
    if (!s) return KV_ENOMEM;
    s->env = env;
    s->rt = rt;
    s->t = t;
    s->node = node;
    s->capacity = capacity;
    s->index_size = 1;
    while (s->index_size < 2 * capacity) s->index_size <<= 1;
    /* scratch: an entry is written whole when put_key takes it from
     * free_slot, which is filled below, as the index is */
    s->entry = kv_alloc_scratch(env, (size_t)capacity * sizeof *s->entry);
    s->index = kv_alloc_scratch(env, (size_t)s->index_size * sizeof *s->index);
    s->free_slot = kv_alloc_scratch(env, (size_t)capacity * sizeof *s->free_slot);
    s->msg = kv_alloc_scratch(env, sizeof *s->msg);
    s->buf = kv_alloc_scratch(env, KV_WIRE_MAX);
    if (!s->entry || !s->index || !s->free_slot || !s->msg || !s->buf) return KV_ENOMEM;
    for (uint32_t i = 0; i < capacity; i++) s->free_slot[i] = capacity - 1 - i; /* entry 0 first */
    s->n_free = capacity;
    s->lru_head = s->lru_tail = NO_SLOT;
    memset(s->index, 0xff, (size_t)s->index_size * sizeof *s->index);
    kv_status st = kv_rt_spawn(rt, "store", node, store_handle, s, 1u << 20, &s->actor);
    if (st == KV_OK) st = kvt_ep_open(t, s->actor, &s->ep, &s->addr);
    if (st != KV_OK) return st;
    *out = s;
    return KV_OK;
}

void sim_store_crash(sim_store *s) {
    s->stats.crashes++;
    s->stats.crash_keys += s->n_keys;
    while (s->n_keys) evict(s, oldest(s));
    s->put_fail = s->get_fail = s->pressure = s->exists_fail = 0;
}

kv_status sim_store_restart(sim_store *s) {
    kvt_addr addr;
    kv_status st = kv_rt_spawn(s->rt, "store", s->node, store_handle, s, 1u << 20, &s->actor);
    if (st == KV_OK) st = kvt_ep_open(s->t, s->actor, &s->ep, &addr);
    if (st == KV_OK && strcmp(addr.s, s->addr.s) != 0) st = KV_EEXIST;
    return st;
}

void sim_store_free(sim_store *s) {
    if (!s) return;
    kv_release(s->env, s->buf);
    kv_release(s->env, s->msg);
    kv_release(s->env, s->free_slot);
    kv_release(s->env, s->index);
    kv_release(s->env, s->entry);
    kv_release(s->env, s);
}

const kvt_addr *sim_store_addr(const sim_store *s) { return &s->addr; }
uint32_t sim_store_actor(const sim_store *s) { return s->actor; }
const sim_store_stats *sim_store_get_stats(const sim_store *s) { return &s->stats; }
uint32_t sim_store_keys(const sim_store *s) { return s->n_keys; }

bool sim_store_has(const sim_store *s, kv_store_key k) { return s->index[probe(s, k)] != NO_SLOT; }
