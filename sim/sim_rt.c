/* sim/sim_rt.c — single-threaded deterministic actor runtime; see sim_rt.h. */
#include "sim/sim_rt.h"

#include <string.h>

#include "kvconn/limits.h"

/* 16 bytes, and payloads padded to 8: a payload that does not wrap around
 * the ring's end is handed to the actor in place, 8-aligned. */
typedef struct mbox_hdr {
    uint32_t kind, src, len, id; /* id: the message's trace id (0 when none was given) */
} mbox_hdr;

typedef struct sim_actor {
    char name[32];
    uint32_t node;
    kv_actor_fn fn;
    void *self;
    uint8_t *ring;     /* SIM_MAILBOX_MAX bytes, cap of them in use; owned (env) */
    uint32_t cap;
    uint32_t head;     /* read offset */
    uint32_t used;     /* bytes in ring */
    uint32_t n_msgs;
    bool dead;         /* killed (its process crashed): never runs, mail to it is dropped */
} sim_actor;

#define EV_INLINE_BYTES 48u
#define PAYLOAD_CLASSES 12u /* 64 B .. 128 KiB */

/* Small payloads (timers, most control traffic) live in the event itself;
 * larger ones in the arena, which is rewound whenever the heap empties. */
#define SLOT_BITS 20u /* events_max <= 1 << SLOT_BITS */

typedef struct sim_heap_key {
    uint64_t at_ns;
    uint64_t seq_slot; /* seq << SLOT_BITS | pool slot: unique, ordered by seq */
} sim_heap_key;

typedef struct sim_event {
    uint64_t at_ns;
    uint32_t to, kind, src, len;
    uint32_t off; /* payload offset in arena when len > EV_INLINE_BYTES */
    uint32_t id;  /* trace id (mbox_hdr.id); in what was padding: the event stays 80 bytes */
    uint8_t inline_payload[EV_INLINE_BYTES];
} sim_event;
_Static_assert(sizeof(sim_event) == 80, "the trace id must not grow the event");

struct sim_rt {
    kv_rt iface;
    const kv_env *env;
    sim_choice *choice;
    sim_rt_cfg cfg;
    uint64_t now_ns;
    uint32_t current;
    uint32_t n_actors;
    sim_actor actors[SIM_ACTORS_MAX];
    /* FIFO per (source node, destination actor) for cross-node posts:
     * delivery time never goes backwards on one pair. */
    uint64_t pair_last_ns[KV_ENGINES_MAX * (KV_TP_MAX + 1) + 8][SIM_ACTORS_MAX];
    uint32_t pair_rows, pair_cols; /* the corner of pair_last_ns this run wrote: what sim_rt_clear_pairs clears */
    /* Pending events: a heap of 16-byte keys (time, then sequence
     * number with the event's pool slot in its low bits) over a pool of
     * events, so sifting moves keys, not 80-byte events. */
    sim_heap_key *heap; /* [events_max]; owned */
    sim_event *pool;    /* [events_max]; owned */
    uint32_t *free_slot;/* [events_max]: released pool slots; owned */
    uint32_t n_free, slots_used; /* slots [slots_used, events_max) never handed out this run */
    uint32_t n_events;
    uint64_t seq;
    uint8_t *arena;    /* [arena_bytes]; owned */
    uint32_t arena_used;
    /* Payload chunks by size class (64 B << c); freed chunks are reused, so
     * the arena holds only what is in flight. Head offset+1 (0 = empty). */
    uint32_t free_head[PAYLOAD_CLASSES];
    /* Actors with mail, one bit each: the choice picks the k-th set bit,
     * which is the k-th runnable actor in id order. */
    uint64_t runnable[(SIM_ACTORS_MAX + 63u) / 64u];
    uint32_t n_runnable; /* bits set in runnable */
    kv_status error;
    uint64_t messages;
    uint64_t dropped;  /* messages to dead actors */
    sim_rt_hook hook;
    void *hook_ctx;
    /* Message ids for traces: given at post only while a post hook is set,
     * so a run without a trace does no more than test one pointer. */
    sim_rt_post_hook post_hook;
    void *post_ctx;
    uint32_t next_id;     /* the last id given this run */
    uint32_t handling_id; /* id of the message being handled (0: none, or no trace) */
    uint8_t payload[KV_MSG_PAYLOAD_MAX]; /* the message being handled (kv_msg.payload) */
};

#define PAIR_NODES (KV_ENGINES_MAX * (KV_TP_MAX + 1) + 8)

static uint32_t align8(uint32_t n) { return (n + 7u) & ~7u; }

static uint32_t popcount64(uint64_t x) { /* SWAR: no library call on any target */
    x -= (x >> 1) & 0x5555555555555555ull;
    x = (x & 0x3333333333333333ull) + ((x >> 2) & 0x3333333333333333ull);
    x = (x + (x >> 4)) & 0x0f0f0f0f0f0f0f0full;
    return (uint32_t)((x * 0x0101010101010101ull) >> 56);
}

/* An offset below 2 * cap back into the ring (no division on the hot path). */
static uint32_t ring_wrap(const sim_actor *a, uint32_t at) { return at >= a->cap ? at - a->cap : at; }

/* Ring copies in at most two segments. */
static void ring_write(sim_actor *a, uint32_t at, const void *src, uint32_t n) {
    if (n <= a->cap - at) {
        memcpy(a->ring + at, src, n);
        return;
    }
    uint32_t first = a->cap - at;
    memcpy(a->ring + at, src, first);
    memcpy(a->ring, (const uint8_t *)src + first, n - first);
}

static void ring_read(const sim_actor *a, uint32_t at, void *dst, uint32_t n) {
    if (n <= a->cap - at) {
        memcpy(dst, a->ring + at, n);
        return;
    }
    uint32_t first = a->cap - at;
    memcpy(dst, a->ring + at, first);
    memcpy((uint8_t *)dst + first, a->ring, n - first);
}

static kv_status mbox_push(sim_rt *rt, uint32_t to, uint32_t kind, uint32_t src, uint32_t id, const void *p,
                           uint32_t len) {
    sim_actor *a = &rt->actors[to];
    if (a->dead) { /* mail to a crashed process is lost */
        rt->dropped++;
        return KV_OK;
    }
    uint32_t need = (uint32_t)sizeof(mbox_hdr) + align8(len);
    if (a->used + need > a->cap) {
        rt->error = KV_EFULL;
        kv_logf(rt->env, KV_LOG_ERROR, "sim_rt: mailbox of %s full (%u + %u > %u)", a->name,
                a->used, need, a->cap);
        return KV_EFULL;
    }
    mbox_hdr h = {kind, src, len, id};
    uint32_t tail = ring_wrap(a, a->head + a->used); /* head < cap, used <= cap */
    if (a->cap - tail >= sizeof h) memcpy(a->ring + tail, &h, sizeof h);
    else ring_write(a, tail, &h, sizeof h);
    if (len) ring_write(a, ring_wrap(a, tail + (uint32_t)sizeof h), p, len); /* cap >= 64 */
    a->used += need;
    if (a->n_msgs++ == 0) {
        rt->runnable[to / 64u] |= 1ull << (to % 64u);
        rt->n_runnable++;
    }
    return KV_OK;
}

/* A 4-ary heap: half the depth of a binary one, fewer moves per pop. Keys
 * are unique, so the pop order is the same with any arity. */
#define HEAP_ARITY 4u

static bool key_less(const sim_heap_key *a, const sim_heap_key *b) {
    return a->at_ns < b->at_ns || (a->at_ns == b->at_ns && a->seq_slot < b->seq_slot);
}

static kv_status heap_push(sim_rt *rt, const sim_event *ev) {
    if (rt->n_events >= rt->cfg.events_max) {
        rt->error = KV_ENOMEM;
        kv_logf(rt->env, KV_LOG_ERROR, "sim_rt: event heap full (%u)", rt->n_events);
        return KV_ENOMEM;
    }
    uint32_t slot = rt->n_free ? rt->free_slot[--rt->n_free] : rt->slots_used++;
    rt->pool[slot] = *ev;
    sim_heap_key k = {.at_ns = ev->at_ns, .seq_slot = rt->seq++ << SLOT_BITS | slot};
    uint32_t i = rt->n_events++;
    while (i > 0) { /* move parents down into the hole until k fits */
        uint32_t parent = (i - 1) / HEAP_ARITY;
        if (!key_less(&k, &rt->heap[parent])) break;
        rt->heap[i] = rt->heap[parent];
        i = parent;
    }
    rt->heap[i] = k;
    return KV_OK;
}

/* Removes the earliest event; the returned pointer is valid until the next push. */
static const sim_event *heap_pop(sim_rt *rt) {
    uint32_t slot = (uint32_t)(rt->heap[0].seq_slot & ((1u << SLOT_BITS) - 1u));
    sim_heap_key last = rt->heap[--rt->n_events];
    uint32_t i = 0, n = rt->n_events;
    for (;;) { /* move the smallest child up into the hole until last fits */
        uint32_t l = HEAP_ARITY * i + 1, m = l;
        if (l >= n) break;
        uint32_t end = l + HEAP_ARITY < n ? l + HEAP_ARITY : n;
        for (uint32_t c = l + 1; c < end; c++)
            if (key_less(&rt->heap[c], &rt->heap[m])) m = c;
        if (!key_less(&rt->heap[m], &last)) break;
        rt->heap[i] = rt->heap[m];
        i = m;
    }
    if (n) rt->heap[i] = last;
    rt->free_slot[rt->n_free++] = slot;
    return &rt->pool[slot];
}

static uint32_t payload_class(uint32_t len) {
    uint32_t c = 0;
    while ((64u << c) < len && c + 1 < PAYLOAD_CLASSES) c++;
    return c;
}

static void payload_free(sim_rt *rt, uint32_t off, uint32_t len) {
    uint32_t c = payload_class(len);
    memcpy(rt->arena + off, &rt->free_head[c], sizeof(uint32_t));
    rt->free_head[c] = off + 1;
}

static kv_status schedule(sim_rt *rt, uint32_t to, uint64_t at, uint32_t kind, uint32_t id, const void *p,
                          uint32_t len) {
    sim_event ev = {.at_ns = at, .to = to, .kind = kind, .src = rt->current, .len = len, .id = id};
    if (len <= EV_INLINE_BYTES) {
        if (len) memcpy(ev.inline_payload, p, len);
        return heap_push(rt, &ev);
    }
    uint32_t c = payload_class(len);
    if (rt->free_head[c]) {
        ev.off = rt->free_head[c] - 1;
        memcpy(&rt->free_head[c], rt->arena + ev.off, sizeof(uint32_t)); /* next link */
    } else {
        uint32_t need = 64u << c;
        if (rt->arena_used + need > rt->cfg.arena_bytes) {
            rt->error = KV_ENOMEM;
            kv_logf(rt->env, KV_LOG_ERROR, "sim_rt: event payload arena exhausted (%u bytes)", rt->arena_used);
            return KV_ENOMEM;
        }
        ev.off = rt->arena_used;
        rt->arena_used += need;
    }
    memcpy(rt->arena + ev.off, p, len);
    return heap_push(rt, &ev);
}

static kv_status rt_spawn(kv_rt *iface, const char *name, uint32_t node, kv_actor_fn fn, void *self,
                          uint32_t mailbox_bytes, uint32_t *out_id) {
    sim_rt *rt = iface->impl;
    if (rt->n_actors >= SIM_ACTORS_MAX || node >= PAIR_NODES || mailbox_bytes < 64 || mailbox_bytes > SIM_MAILBOX_MAX)
        return KV_EINVAL;
    uint32_t id = rt->n_actors;
    sim_actor *a = &rt->actors[id];
    a->cap = mailbox_bytes & ~7u; /* the bound asked for (whole 8-byte units); the ring is SIM_MAILBOX_MAX */
    size_t nl = strlen(name);
    if (nl >= sizeof a->name) nl = sizeof a->name - 1;
    memcpy(a->name, name, nl);
    a->name[nl] = 0;
    a->node = node;
    a->fn = fn;
    a->self = self;
    a->head = a->used = a->n_msgs = 0;
    a->dead = false;
    rt->n_actors++;
    *out_id = id;
    return KV_OK;
}

/* The next message id, told to the post hook (a trace records when and by
 * whom the message was sent). Draws nothing from the choice stream. */
static uint32_t post_id(sim_rt *rt, uint32_t to, uint32_t kind, bool timer) {
    uint32_t id = ++rt->next_id;
    rt->post_hook(rt->post_ctx, id, rt->current, to, kind, timer);
    return id;
}

static kv_status rt_post(kv_rt *iface, uint32_t to, uint32_t kind, const void *p, uint32_t len) {
    sim_rt *rt = iface->impl;
    if (to >= rt->n_actors || len > KV_MSG_PAYLOAD_MAX) return KV_EINVAL;
    uint32_t id = rt->post_hook ? post_id(rt, to, kind, false) : 0;
    bool from_world = rt->current >= rt->n_actors;
    if (from_world || rt->actors[rt->current].node == rt->actors[to].node)
        return mbox_push(rt, to, kind, rt->current, id, p, len);
    uint32_t src_node = rt->actors[rt->current].node;
    uint64_t span = rt->cfg.lat_max_ns - rt->cfg.lat_min_ns;
    uint64_t lat = rt->cfg.lat_min_ns;
    if (span) lat += (uint64_t)sim_choice_below(rt->choice, 16) * span / 15u;
    uint64_t at = rt->now_ns + lat;
    if (src_node >= rt->pair_rows) rt->pair_rows = src_node + 1u;
    if (to >= rt->pair_cols) rt->pair_cols = to + 1u;
    uint64_t *last = &rt->pair_last_ns[src_node][to];
    if (at < *last) at = *last;
    *last = at;
    return schedule(rt, to, at, kind, id, p, len);
}

static kv_status rt_post_at(kv_rt *iface, uint32_t to, uint64_t at_ns, uint32_t kind,
                            const void *p, uint32_t len) {
    sim_rt *rt = iface->impl;
    if (to >= rt->n_actors || len > KV_MSG_PAYLOAD_MAX) return KV_EINVAL;
    if (at_ns < rt->now_ns) at_ns = rt->now_ns;
    uint32_t id = rt->post_hook ? post_id(rt, to, kind, true) : 0;
    return schedule(rt, to, at_ns, kind, id, p, len);
}

static const kv_rt_ops sim_rt_ops = {
    .size = sizeof(kv_rt_ops), .spawn = rt_spawn, .post = rt_post, .post_at = rt_post_at};

kv_status sim_rt_new(const kv_env *env, const sim_rt_cfg *cfg, sim_choice *choice, sim_rt **out) {
    sim_rt *rt = kv_alloc(env, sizeof *rt);
    if (!rt) return KV_ENOMEM;
    rt->env = env;
    rt->cfg = *cfg;
    if (!cfg->events_max || cfg->events_max > 1u << SLOT_BITS) {
        kv_release(env, rt);
        return KV_EINVAL;
    }
    rt->heap = kv_alloc(env, sizeof(sim_heap_key) * cfg->events_max);
    rt->pool = kv_alloc(env, sizeof(sim_event) * cfg->events_max);
    rt->free_slot = kv_alloc(env, sizeof(uint32_t) * cfg->events_max);
    rt->arena = kv_alloc(env, cfg->arena_bytes);
    bool rings = true;
    for (uint32_t i = 0; i < SIM_ACTORS_MAX && rings; i++) rings = (rt->actors[i].ring = kv_alloc(env, SIM_MAILBOX_MAX)) != NULL;
    if (!rt->heap || !rt->pool || !rt->free_slot || !rt->arena || !rings) {
        sim_rt_free(rt);
        return KV_ENOMEM;
    }
    rt->iface = (kv_rt){.ops = &sim_rt_ops, .env = env, .impl = rt};
    sim_rt_reset(rt, choice);
    *out = rt;
    return KV_OK;
}

void sim_rt_free(sim_rt *rt) {
    if (!rt) return;
    for (uint32_t i = 0; i < SIM_ACTORS_MAX; i++) kv_release(rt->env, rt->actors[i].ring);
    kv_release(rt->env, rt->free_slot);
    kv_release(rt->env, rt->pool);
    kv_release(rt->env, rt->heap);
    kv_release(rt->env, rt->arena);
    kv_release(rt->env, rt);
}

kv_rt *sim_rt_iface(sim_rt *rt) { return &rt->iface; }

void sim_rt_set_hook(sim_rt *rt, sim_rt_hook hook, void *ctx) {
    rt->hook = hook;
    rt->hook_ctx = ctx;
}

void sim_rt_set_post_hook(sim_rt *rt, sim_rt_post_hook hook, void *ctx) {
    rt->post_hook = hook;
    rt->post_ctx = ctx;
}

uint32_t sim_rt_msg_id(const sim_rt *rt) { return rt->handling_id; }

void sim_rt_clear_pairs(sim_rt *rt) {
    for (uint32_t r = 0; r < rt->pair_rows; r++) memset(rt->pair_last_ns[r], 0, rt->pair_cols * sizeof(uint64_t));
    rt->pair_rows = rt->pair_cols = 0;
}

void sim_rt_reset(sim_rt *rt, sim_choice *choice) {
    rt->choice = choice;
    rt->now_ns = 0;
    rt->current = KV_ACTOR_NONE;
    rt->n_actors = 0; /* rings stay allocated; spawn sets each one's bound */
    sim_rt_clear_pairs(rt);
    rt->n_events = 0;
    rt->n_free = rt->slots_used = 0;
    rt->seq = 0;
    rt->arena_used = 0;
    memset(rt->free_head, 0, sizeof rt->free_head);
    memset(rt->runnable, 0, sizeof rt->runnable);
    rt->n_runnable = 0;
    rt->error = KV_OK;
    rt->messages = rt->dropped = 0;
    rt->next_id = rt->handling_id = 0;
}

uint64_t sim_rt_now(const sim_rt *rt) { return rt->now_ns; }
void sim_rt_set_now(sim_rt *rt, uint64_t now_ns) { rt->now_ns = now_ns; }
uint32_t sim_rt_current(const sim_rt *rt) { return rt->current; }
void sim_rt_set_current(sim_rt *rt, uint32_t actor) { rt->current = actor; }

uint64_t sim_rt_next_event(const sim_rt *rt) {
    return rt->n_events ? rt->heap[0].at_ns : UINT64_MAX;
}

void sim_rt_deliver_due(sim_rt *rt) {
    while (rt->n_events && rt->heap[0].at_ns <= rt->now_ns) {
        const sim_event *ev = heap_pop(rt); /* its slot is free again: read it before any push */
        bool inl = ev->len <= EV_INLINE_BYTES;
        mbox_push(rt, ev->to, ev->kind, ev->src, ev->id, inl ? ev->inline_payload : rt->arena + ev->off, ev->len);
        if (!inl) payload_free(rt, ev->off, ev->len);
    }
}

uint32_t sim_rt_runnable(const sim_rt *rt) { return rt->n_runnable; }

bool sim_rt_run_one(sim_rt *rt) {
    uint32_t n = sim_rt_runnable(rt);
    if (!n) return false;
    uint32_t k = sim_choice_below(rt->choice, n), wi = 0;
    while (k >= popcount64(rt->runnable[wi])) k -= popcount64(rt->runnable[wi++]);
    uint64_t bits = rt->runnable[wi];
    while (k--) bits &= bits - 1; /* drop the k lowest set bits */
    uint32_t id = wi * 64u + (uint32_t)__builtin_ctzll(bits);
    sim_actor *a = &rt->actors[id];
    mbox_hdr h;
    if (a->cap - a->head >= sizeof h) memcpy(&h, a->ring + a->head, sizeof h);
    else ring_read(a, a->head, &h, sizeof h);
    uint32_t at = ring_wrap(a, a->head + (uint32_t)sizeof h);
    const uint8_t *payload = a->ring + at;
    if (at + h.len > a->cap) { /* wraps: one copy */
        ring_read(a, at, rt->payload, h.len);
        payload = rt->payload;
    }
    kv_msg m = {.kind = h.kind, .src = h.src, .len = h.len, .payload = payload};
    rt->current = id;
    rt->handling_id = h.id;
    a->fn(a->self, &m); /* its own posts go behind this message, which stays in the ring */
    rt->messages++;
    if (rt->hook) rt->hook(rt->hook_ctx, id, &m);
    rt->current = KV_ACTOR_NONE;
    rt->handling_id = 0;
    uint32_t used = (uint32_t)sizeof h + align8(h.len);
    a->used -= used;
    /* used <= a->used <= cap; empty, the next message starts at the ring's (cache-warm) front */
    a->head = --a->n_msgs ? ring_wrap(a, a->head + used) : 0;
    if (a->n_msgs == 0) {
        rt->runnable[id / 64u] &= ~(1ull << (id % 64u));
        rt->n_runnable--;
    }
    return true;
}

void sim_rt_kill(sim_rt *rt, uint32_t actor) {
    if (actor >= rt->n_actors || rt->actors[actor].dead) return;
    sim_actor *a = &rt->actors[actor];
    rt->dropped += a->n_msgs;
    if (a->n_msgs) {
        rt->runnable[actor / 64u] &= ~(1ull << (actor % 64u));
        rt->n_runnable--;
    }
    a->head = a->used = a->n_msgs = 0;
    a->dead = true;
}

bool sim_rt_dead(const sim_rt *rt, uint32_t actor) { return actor < rt->n_actors && rt->actors[actor].dead; }
uint64_t sim_rt_dropped(const sim_rt *rt) { return rt->dropped; }

kv_status sim_rt_error(const sim_rt *rt) { return rt->error; }
const char *sim_rt_actor_name(const sim_rt *rt, uint32_t a) {
    return a < rt->n_actors ? rt->actors[a].name : "world";
}
uint32_t sim_rt_actor_node(const sim_rt *rt, uint32_t a) {
    return a < rt->n_actors ? rt->actors[a].node : UINT32_MAX;
}
uint32_t sim_rt_actor_count(const sim_rt *rt) { return rt->n_actors; }
uint64_t sim_rt_messages(const sim_rt *rt) { return rt->messages; }
