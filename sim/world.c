/* sim/world.c — builds a deployment from sim_world_cfg, drives the runtime
 * and the simulated network, injects faults, and checks invariants after
 * every event and at quiescence. See world.h. */
#include "sim/world.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "core/bootstrap.h"
#include "core/p2p.h"
#include "core/proxy.h"
#include "core/store.h"
#include "core/worker.h"
#include "sim/check.h"
#include "sim/sim_net.h"
#include "sim/sim_rt.h"
#include "sim/sim_store.h"
#include "util/huge.h"
#include "util/json.h"

#define ARENA_BYTES (192u << 20)
#define NODE_OF_ENGINE(i) (1u + (i) * (KV_TP_MAX + 1u))
#define STORE_NODE NODE_OF_ENGINE(KV_ENGINES_MAX)
#define ALOG_MAX 16384u
#define OWNER_WORLD 0u
#define OWNER_BOOT 0xffffu

/* One arena allocation: where, how big, whose, and whether it is still
 * held. The teardown at the end of a run judges each process's releases by
 * these records (sim_check_teardown). */
typedef struct sim_alloc_rec {
    uint32_t off, bytes;
    uint16_t owner;
    bool live;
} sim_alloc_rec;

struct sim_world {
    kv_env env;          /* per-run: arena allocation */
    kv_env penv;         /* persistent: runtime and network */
    uint8_t *arena;
    size_t arena_len;    /* as mapped (kv_huge_map) */
    size_t arena_used;
    sim_alloc_rec *alog; /* every arena allocation of the run, in address order */
    uint32_t n_alog;
    bool alog_full;      /* more than ALOG_MAX: the teardown is not judged */
    uint16_t alloc_owner; /* who allocates now: OWNER_WORLD, OWNER_BOOT, or process + 1 */
    bool poison;         /* fill scratch with a per-run byte (tests) */
    kv_kvmem kvmem;      /* block-memory provider of every worker */
    uint64_t runs;
    sim_choice choice;
    sim_rt *rt;
    sim_net *net;
    sim_check *check;    /* the invariant checker (sim/check.h) */
    const sim_world_cfg *cfg;
    kv_proxy *proxy;
    kv_bootstrap *boot;
    sim_store *store;    /* NULL when no engine uses the store */
    kv_engine *eng[KV_ENGINES_MAX]; /* the live process of each engine index */
    uint32_t n_eng;
    bool down[KV_ENGINES_MAX];      /* crashed, no process in its place (yet) */
    uint32_t n_actors_of[KV_ENGINES_MAX]; /* actors a process of engine i spawns */
    kv_engine *all_eng[KV_ENGINES_MAX + SIM_FAULTS_MAX]; /* every process of the run, for its counters */
    uint32_t n_all;
    struct { uint64_t at_ns; uint32_t engine; bool silent; } restart[SIM_FAULTS_MAX]; /* pending, in time order */
    uint64_t abort_on_kv[(SIM_REQS_MAX + 63u) / 64u]; /* bit r: abort request r when D hears its KV arrived */
    uint32_t n_restart;
    uint64_t store_back_ns; /* a crashed store's new process starts then (UINT64_MAX: none pending) */
    sim_result *res;
    sim_teardown_report td; /* the teardown being judged (its twice / foreign counts) */
    kv_pool_report final_pool[KV_ENGINES_MAX][KV_GROUPS_MAX]; /* at the end, before the teardown */
    FILE *trace;
    FILE *json;          /* Chrome trace events, or NULL */
    kv_json jw;          /* the JSON writer over json, during a run */
    /* When each message of the run was posted, by its id (sim_rt_msg_id):
     * the JSON trace's flow from its post to its handling. Grown on demand,
     * only while there is a JSON trace. */
    struct sim_post { uint64_t at_ns; uint32_t from; bool timer; } *post; /* at_ns: on the JSON's time line */
    uint32_t post_cap;
    bool post_lost;      /* the table could not grow: later flows are left out */
    bool viol_pending;   /* a violation seen during an event: traced after that event's line */
    /* The JSON's time line: many events share a virtual ns, and slices at one
     * time would stack. Each track's slices are laid end to end instead,
     * 1 ns each, from their virtual time on: vis_next is where the next one
     * may start (per actor; the world's is [SIM_ACTORS_MAX]); vis_cur is the
     * start of the event being handled, once asked for (vis_valid). */
    uint64_t vis_next[SIM_ACTORS_MAX + 1u];
    uint64_t vis_cur;
    bool vis_valid;
    uint64_t events;
    uint64_t hash;
    uint64_t rand_next;     /* the env's random stream (transfer ids): apart from the choice stream */
    uint32_t order[SIM_REQS_MAX + SIM_FAULTS_MAX]; /* world items by time */
    uint32_t n_items, next_item;
    sim_net_pump_buf pump;
    kv_status net_error;  /* a network event could not be delivered (simulator limit), or a
                           * fault could not be applied (KV_ESTATE) */
};

/* ---- env ------------------------------------------------------------------ */

static uint64_t w_now(void *ctx) { return sim_rt_now(((sim_world *)ctx)->rt); }
/* The arena rewinds per run. Zeroed allocations are cleared when handed
 * out; scratch (kv_alloc_scratch) is not, so a run pays only for the
 * memory whose zeroes it relies on. With poisoning on (tests), scratch is
 * filled with a byte that changes every run: a read before a write would
 * then change the run. */
static void *take(sim_world *w, size_t n) {
    size_t need = (n + 63u) & ~(size_t)63u;
    if (w->arena_used + need > ARENA_BYTES) return NULL;
    void *p = w->arena + w->arena_used;
    if (w->n_alog < ALOG_MAX)
        w->alog[w->n_alog++] = (sim_alloc_rec){.off = (uint32_t)w->arena_used, .bytes = (uint32_t)n,
                                               .owner = w->alloc_owner, .live = true};
    else
        w->alog_full = true;
    w->arena_used += need;
    return p;
}
static void *w_alloc(void *ctx, size_t n) {
    void *p = take(ctx, n);
    if (p) memset(p, 0, n);
    return p;
}
static void *w_scratch(void *ctx, size_t n) {
    sim_world *w = ctx;
    void *p = take(w, n);
    if (p && w->poison) memset(p, (int)(0x5au ^ (w->runs & 0xffu)) | 1, n);
    return p;
}
/* The arena rewinds per run, so a release frees nothing: it marks the
 * record. A release of an address that is no allocation's start, or of one
 * released before, is counted against the process being torn down. */
static void w_release(void *ctx, void *p) {
    sim_world *w = ctx;
    if (!p) return;
    uint8_t *b = p;
    uint32_t lo = 0, hi = w->n_alog;
    if (b >= w->arena && b < w->arena + ARENA_BYTES) {
        uint32_t off = (uint32_t)(b - w->arena);
        while (lo < hi) { /* records are in address order: the arena only grows */
            uint32_t mid = lo + (hi - lo) / 2u;
            if (w->alog[mid].off < off) lo = mid + 1u;
            else hi = mid;
        }
        if (lo < w->n_alog && w->alog[lo].off == off) {
            sim_alloc_rec *r = &w->alog[lo];
            if (!r->live) w->td.twice++;
            else if (r->owner != w->alloc_owner) w->td.foreign++;
            else r->live = false;
            return;
        }
    }
    w->td.foreign++;
}
static void *p_alloc(void *ctx, size_t n) { (void)ctx; return calloc(1, n ? n : 1); }
static void p_release(void *ctx, void *p) { (void)ctx; free(p); }
/* The env's random numbers (the proxy's transfer ids): a counter through
 * the mixer, restarted from the seed every run and never drawn from the
 * choice stream, so drawing them shifts no choice. */
static uint64_t w_rand(void *ctx) {
    sim_world *w = ctx;
    return sim_mix64(w->rand_next++);
}
static uint32_t w_actor(void *ctx) { return sim_rt_current(((sim_world *)ctx)->rt); }

/* ---- traces ------------------------------------------------------------------
 * Two outputs of a run, both off by default: the text trace (one line per
 * handled message and per world action) and the Chrome trace-event JSON
 * that Perfetto opens. docs/traces.md describes both. They only read the
 * run: nothing here draws from the choice stream or feeds the hash. */

/* Perfetto keeps pid and tid 0 for the idle process, and keys threads by
 * tid alone: every track gets a pid above 0 and a tid unique in the file. */
#define PID_BASE 10000u
#define PID_WORLD (PID_BASE + STORE_NODE + 1u)
#define PID_REQS (PID_BASE + STORE_NODE + 2u)
#define TID_WORLD (SIM_ACTORS_MAX + 1u)
#define TID_REQ(id) (SIM_ACTORS_MAX + 2u + (id))

static const char *const trace_legend =
    "# kvsim text trace: one line per message an actor handled and per action of the world, in the\n"
    "# order they happened (docs/traces.md). Columns: TIME (virtual ns), ACTOR (who acted: proxy,\n"
    "# bootstrap, store, an engine's actor such as P0.sched or D1.w0.main, or world), WHAT:\n"
    "#   KIND len N [req R]         event: ACTOR handled a message of KIND, N payload bytes (about\n"
    "#                              request R when the message names one)\n"
    "#   log TEXT                   the core logged TEXT while ACTOR ran: before its event's line\n"
    "#   FAULT NAME target=T arg=A  the world applied a fault of the plan (abort_on_kv fires: an\n"
    "#                              armed abort went to the proxy)\n"
    "#   STORE ...                  the store's new process started, or it stays down\n"
    "#   RESTART engine I           a crashed engine's new process started, or it stays down\n"
    "#   VIOLATION INV: DETAIL      an invariant failed; after the line of the event during which\n"
    "#                              it was seen, and the run stops there\n";

/* Actor ids in core text ("actor 7") become names ("actor D1.w0.recv"):
 * traces name actors, the core cannot (it knows no names). */
static void name_actors(const sim_world *w, const char *in, char *out, size_t cap) {
    size_t n = 0;
    const char *p = in;
    while (*p && n + 1 < cap) {
        bool word = (p == in || !((p[-1] >= 'a' && p[-1] <= 'z') || (p[-1] >= 'A' && p[-1] <= 'Z')));
        if (word && strncmp(p, "actor ", 6) == 0 && p[6] >= '0' && p[6] <= '9') {
            char *e;
            unsigned long a = strtoul(p + 6, &e, 10);
            if (a < sim_rt_actor_count(w->rt)) {
                int k = snprintf(out + n, cap - n, "actor %s", sim_rt_actor_name(w->rt, (uint32_t)a));
                n = k < 0 ? n : n + (size_t)k < cap ? n + (size_t)k : cap - 1;
                p = e;
                continue;
            }
        }
        out[n++] = *p++;
    }
    out[n] = 0;
}

static uint32_t json_pid(const sim_world *w, uint32_t actor) {
    return actor < sim_rt_actor_count(w->rt) ? PID_BASE + sim_rt_actor_node(w->rt, actor) : PID_WORLD;
}
static uint32_t json_tid(const sim_world *w, uint32_t actor) {
    return actor < sim_rt_actor_count(w->rt) ? actor + 1u : TID_WORLD;
}

/* Opens one trace event; the caller adds its fields and closes it. */
static kv_json *json_ev(sim_world *w, const char *name, const char *cat, const char *ph, uint64_t at_ns,
                        uint32_t pid, uint32_t tid) {
    kv_json *j = &w->jw;
    kv_json_nl(j);
    kv_json_obj(j);
    kv_json_kstr(j, "name", name);
    if (cat) kv_json_kstr(j, "cat", cat);
    kv_json_kstr(j, "ph", ph);
    kv_json_kf64(j, "ts", (double)at_ns / 1000.0, 3);
    kv_json_ku64(j, "pid", pid);
    kv_json_ku64(j, "tid", tid);
    return j;
}

/* The next free ns on a track, from `from` on (see vis_next). */
static uint64_t vis_take_from(sim_world *w, uint32_t actor, uint64_t from) {
    uint32_t k = actor < sim_rt_actor_count(w->rt) ? actor : SIM_ACTORS_MAX;
    uint64_t t = from > w->vis_next[k] ? from : w->vis_next[k];
    w->vis_next[k] = t + 1u;
    return t;
}
static uint64_t vis_take(sim_world *w, uint32_t actor) { return vis_take_from(w, actor, sim_rt_now(w->rt)); }

/* Where the slice of the event being handled starts: taken at its first
 * use (a post or a log in the handler, or its own line), so that what
 * happens during the event lies inside its slice; never before its
 * message's post, so that no flow runs backwards. */
static uint64_t vis_event(sim_world *w, uint32_t actor) {
    if (w->vis_valid) return w->vis_cur;
    uint64_t from = sim_rt_now(w->rt);
    uint32_t id = sim_rt_msg_id(w->rt);
    if (id && id < w->post_cap && !w->post_lost && w->post[id].at_ns > from) from = w->post[id].at_ns;
    w->vis_cur = vis_take_from(w, actor, from);
    w->vis_valid = true;
    return w->vis_cur;
}

/* A 1 ns slice ("X") at vis_ns on an actor's track (the world's for
 * KV_ACTOR_NONE), with t_ns its virtual time; the args object is left open
 * for the caller. */
static kv_json *json_slice(sim_world *w, const char *name, const char *cat, uint32_t actor, uint64_t vis_ns) {
    kv_json *j = json_ev(w, name, cat, "X", vis_ns, json_pid(w, actor), json_tid(w, actor));
    kv_json_kf64(j, "dur", 0.001, 3);
    kv_json_kobj(j, "args");
    kv_json_ku64(j, "t_ns", sim_rt_now(w->rt));
    return j;
}
static void json_close2(kv_json *j) { kv_json_end(j), kv_json_end(j); } /* args, event */

/* A line of the world (ACTOR "world") in the text trace and on the
 * world's track. */
KV_FMT_VA(3) static void world_vline(sim_world *w, const char *kind, const char *fmt, va_list ap) {
    char text[256];
    vsnprintf(text, sizeof text, fmt, ap);
    if (w->trace)
        fprintf(w->trace, "%12llu  %-14s %s %s\n", (unsigned long long)sim_rt_now(w->rt), "world", kind, text);
    if (w->json) {
        kv_json *j = json_slice(w, kind, "world", KV_ACTOR_NONE, vis_take(w, KV_ACTOR_NONE));
        kv_json_kstr(j, "text", text);
        json_close2(j);
    }
}
#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
static void world_line(sim_world *w, const char *kind, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    world_vline(w, kind, fmt, ap);
    va_end(ap);
}

KV_FMT_VA(3) static void w_log(void *ctx, kv_log_level lvl, const char *fmt, va_list ap) {
    sim_world *w = ctx;
    if ((!w->trace && !w->json) || lvl < KV_LOG_INFO) return;
    char raw[512], text[768];
    vsnprintf(raw, sizeof raw, fmt, ap);
    name_actors(w, raw, text, sizeof text);
    uint32_t a = sim_rt_current(w->rt);
    if (w->trace)
        fprintf(w->trace, "%12llu  %-14s log  %s\n", (unsigned long long)sim_rt_now(w->rt), sim_rt_actor_name(w->rt, a),
                text);
    if (w->json) { /* an instant at its event's slice start, or a slice of the world's */
        bool in_event = a < sim_rt_actor_count(w->rt);
        uint64_t at = in_event ? vis_event(w, a) : vis_take(w, a);
        kv_json *j = json_ev(w, "log", "log", in_event ? "i" : "X", at, json_pid(w, a), json_tid(w, a));
        if (in_event) kv_json_kstr(j, "s", "t");
        else kv_json_kf64(j, "dur", 0.001, 3);
        kv_json_kobj(j, "args");
        kv_json_kstr(j, "text", text);
        json_close2(j);
    }
}

/* Records when and by whom message id was posted (the runtime's post hook):
 * inside the poster's event slice, or in a slice of the world's that says
 * what it posted (the world's actions have no event of their own). */
static void w_post(void *ctx, uint32_t id, uint32_t from, uint32_t to, uint32_t kind, bool timer) {
    sim_world *w = ctx;
    uint64_t at;
    if (from < sim_rt_actor_count(w->rt)) {
        at = vis_event(w, from);
    } else {
        char name[64];
        snprintf(name, sizeof name, "post %s", kv_msg_kind_name(kind));
        at = vis_take(w, KV_ACTOR_NONE);
        kv_json *j = json_slice(w, name, "world", KV_ACTOR_NONE, at);
        kv_json_kstr(j, "to", sim_rt_actor_name(w->rt, to));
        json_close2(j);
    }
    if (id >= w->post_cap && !w->post_lost) {
        uint32_t cap = w->post_cap ? w->post_cap * 2u : 4096u;
        while (cap <= id) cap *= 2u;
        struct sim_post *p = realloc(w->post, cap * sizeof *p);
        if (p) w->post = p, w->post_cap = cap;
        else w->post_lost = true; /* flows from here on are left out, the trace stays valid */
    }
    if (id < w->post_cap) w->post[id] = (struct sim_post){.at_ns = at, .from = from, .timer = timer};
}

/* The flow of a handled message: "s" at its post on the poster's track, "f"
 * at its handling on the handler's, each inside that track's slice. Both are
 * written at the handling, so a message that is never handled (its process
 * crashed) leaves no open flow. */
static void json_flow(sim_world *w, uint32_t actor, const kv_msg *m, uint64_t vis_ns) {
    uint32_t id = sim_rt_msg_id(w->rt);
    if (!id || id >= w->post_cap || w->post_lost) return;
    const struct sim_post *p = &w->post[id];
    const char *cat = p->timer ? "timer" : "msg";
    kv_json *j = json_ev(w, kv_msg_kind_name(m->kind), cat, "s", p->at_ns, json_pid(w, p->from), json_tid(w, p->from));
    kv_json_ku64(j, "id", id);
    kv_json_end(j);
    j = json_ev(w, kv_msg_kind_name(m->kind), cat, "f", vis_ns, json_pid(w, actor), json_tid(w, actor));
    kv_json_ku64(j, "id", id);
    kv_json_kstr(j, "bp", "e");
    kv_json_end(j);
}

static void json_begin(sim_world *w) {
    if (!w->json) return;
    kv_json_init(&w->jw, w->json);
    kv_json_obj(&w->jw);
    kv_json_kstr(&w->jw, "displayTimeUnit", "ns");
    kv_json_karr(&w->jw, "traceEvents");
}

static void json_meta(sim_world *w, const char *what, uint32_t pid, uint32_t tid, const char *name) {
    kv_json *j = &w->jw;
    kv_json_nl(j);
    kv_json_obj(j);
    kv_json_kstr(j, "name", what);
    kv_json_kstr(j, "ph", "M");
    kv_json_ku64(j, "pid", pid);
    if (tid != UINT32_MAX) kv_json_ku64(j, "tid", tid);
    kv_json_kobj(j, "args");
    if (strcmp(what, "process_sort_index") == 0) kv_json_ku64(j, "sort_index", tid == UINT32_MAX ? pid : 0);
    else kv_json_kstr(j, "name", name);
    json_close2(j);
}

/* process_name per node that had actors (proxy and bootstrap share node 0),
 * the world and the requests; thread_name per actor, the world's track and
 * each request's. A restarted engine's actors reuse their names: the new
 * process's get "(process K)". */
static void json_names(sim_world *w) {
    const sim_world_cfg *c = w->cfg;
    bool seen[STORE_NODE + 1u] = {false};
    char name[64];
    for (uint32_t a = 0; a < sim_rt_actor_count(w->rt); a++) {
        uint32_t node = sim_rt_actor_node(w->rt, a);
        if (node <= STORE_NODE && !seen[node]) {
            seen[node] = true;
            uint32_t i = node ? (node - 1u) / (KV_TP_MAX + 1u) : 0;
            if (node == 0) snprintf(name, sizeof name, "proxy + bootstrap");
            else if (node == STORE_NODE) snprintf(name, sizeof name, "store");
            else snprintf(name, sizeof name, "%c%u (engine %u, %s)", i < c->n_p ? 'P' : 'D', i, i,
                          i < c->n_p ? "producer" : "consumer");
            json_meta(w, "process_name", PID_BASE + node, UINT32_MAX, name);
            json_meta(w, "process_sort_index", PID_BASE + node, UINT32_MAX, NULL);
        }
        uint32_t gen = 1;
        for (uint32_t b = 0; b < a; b++) gen += strcmp(sim_rt_actor_name(w->rt, b), sim_rt_actor_name(w->rt, a)) == 0;
        if (gen > 1) snprintf(name, sizeof name, "%s (process %u)", sim_rt_actor_name(w->rt, a), gen);
        else snprintf(name, sizeof name, "%s", sim_rt_actor_name(w->rt, a));
        json_meta(w, "thread_name", PID_BASE + node, a + 1u, name);
    }
    json_meta(w, "process_name", PID_WORLD, UINT32_MAX, "world (faults, restarts, violations)");
    json_meta(w, "process_sort_index", PID_WORLD, UINT32_MAX, NULL);
    json_meta(w, "thread_name", PID_WORLD, TID_WORLD, "world");
    json_meta(w, "process_name", PID_REQS, UINT32_MAX, "requests");
    json_meta(w, "process_sort_index", PID_REQS, UINT32_MAX, NULL);
    for (uint32_t id = 0; id < c->n_reqs && id < SIM_REQS_MAX; id++) { /* bounded: a rejected scenario too */
        snprintf(name, sizeof name, "request %u", id);
        json_meta(w, "thread_name", PID_REQS, TID_REQ(id), name);
    }
}

/* Each submitted request's lifecycle: an async slice from its submission to
 * its outcome (or the run's end, still pending), on its own track. */
static void json_requests(sim_world *w) {
    static const char *const outcome[] = {"pending", "ok", "error", "aborted"};
    char name[32];
    for (uint32_t id = 0; id < w->cfg->n_reqs; id++) {
        const kv_proxy_req *q = kv_proxy_slot(w->proxy, id);
        if (!q->used || q->id != id) continue;
        uint64_t end = q->outcome ? q->done_ns : sim_rt_now(w->rt);
        snprintf(name, sizeof name, "request %u", id);
        kv_json *j = json_ev(w, name, "request", "b", q->submit_ns, PID_REQS, TID_REQ(id));
        kv_json_ku64(j, "id", id);
        kv_json_kobj(j, "args");
        kv_json_ku64(j, "prompt", q->sub.spec.prompt_len);
        kv_json_ku64(j, "max_tokens", q->sub.spec.max_tokens);
        kv_json_ku64(j, "p_engine", q->sub.p_engine);
        kv_json_ku64(j, "d_engine", q->sub.d_engine);
        json_close2(j);
        j = json_ev(w, name, "request", "e", end < q->submit_ns ? q->submit_ns : end, PID_REQS, TID_REQ(id));
        kv_json_ku64(j, "id", id);
        kv_json_kobj(j, "args");
        kv_json_kstr(j, "outcome", outcome[q->outcome & 3]);
        json_close2(j);
    }
}

static void json_end(sim_world *w) {
    if (!w->json) return;
    json_names(w);
    json_requests(w);
    kv_json_end(&w->jw); /* traceEvents */
    kv_json_end(&w->jw);
    kv_json_nl(&w->jw);
    if (kv_json_done(&w->jw) != 0) fprintf(stderr, "kvsim: the trace JSON could not be written whole\n");
}

/* A scenario the world could not build: the document is closed with the
 * names of what it holds (the world's posts while building). */
static void json_abort(sim_world *w) {
    if (!w->json) return;
    json_names(w);
    kv_json_end(&w->jw);
    kv_json_end(&w->jw);
    kv_json_nl(&w->jw);
    (void)kv_json_done(&w->jw);
}

void sim_world_set_json(sim_world *w, FILE *json) { w->json = json; }

/* The violation of the run, in the traces. */
static void trace_violation(sim_world *w) {
    const sim_result *r = w->res;
    char detail[sizeof r->detail + 256];
    w->viol_pending = false;
    name_actors(w, r->detail, detail, sizeof detail);
    if (w->trace)
        fprintf(w->trace, "%12llu  %-14s VIOLATION %s: %s\n", (unsigned long long)r->at_ns, r->actor_name,
                kv_inv_name(r->inv), detail);
    if (w->json) {
        char name[48];
        snprintf(name, sizeof name, "VIOLATION %s", kv_inv_name(r->inv));
        kv_json *j = json_ev(w, name, "violation", "i", r->at_ns, PID_WORLD, TID_WORLD);
        kv_json_kstr(j, "s", "g");
        kv_json_kobj(j, "args");
        kv_json_kstr(j, "detail", detail);
        kv_json_kstr(j, "actor", r->actor_name);
        if (r->engine != UINT32_MAX) kv_json_ku64(j, "engine", r->engine);
        if (r->req != UINT32_MAX) kv_json_ku64(j, "req", r->req);
        json_close2(j);
    }
}

/* A violation seen while an actor handles a message waits for that event's
 * line (after_event); one seen while the world acts is traced at once. */
static void w_violation(void *ctx, const kv_violation *v) {
    sim_world *w = ctx;
    sim_result *r = w->res;
    if (!r || r->violated) return;
    r->violated = true;
    r->inv = v->inv;
    r->event = w->events;
    r->at_ns = sim_rt_now(w->rt);
    r->actor = v->actor;
    r->engine = v->engine;
    r->req = v->req;
    snprintf(r->actor_name, sizeof r->actor_name, "%s", sim_rt_actor_name(w->rt, v->actor));
    snprintf(r->detail, sizeof r->detail, "%s", v->detail ? v->detail : "");
    if (!w->trace && !w->json) return;
    if (sim_rt_current(w->rt) < sim_rt_actor_count(w->rt)) w->viol_pending = true;
    else trace_violation(w);
}

void sim_world_set_scratch_poison(sim_world *w, bool on) { w->poison = on; }
void sim_world_set_kvmem(sim_world *w, kv_kvmem mem) { w->kvmem = mem; }

kv_status sim_world_new(sim_world **out) {
    sim_world *w = calloc(1, sizeof *w);
    if (!w) return KV_ENOMEM;
    w->arena = kv_huge_map(ARENA_BYTES, &w->arena_len); /* zeroed; huge pages: few first-touch faults */
    w->alog = calloc(ALOG_MAX, sizeof *w->alog);
    w->env = (kv_env){.size = sizeof(kv_env), .ctx = w, .now_ns = w_now, .alloc = w_alloc,
                      .release = w_release, .random_u64 = w_rand, .log = w_log,
                      .violation = w_violation, .current_actor = w_actor, .alloc_scratch = w_scratch};
    w->penv = w->env;
    w->penv.alloc = p_alloc;
    w->penv.alloc_scratch = NULL; /* calloc'd once, like the rest of the runtime */
    w->penv.release = p_release;
    sim_choice_init(&w->choice, NULL, 0, 1);
    sim_rt_cfg rc = {.events_max = 1u << 16, .arena_bytes = 16u << 20, .lat_min_ns = 20000, .lat_max_ns = 200000};
    sim_net_cfg nc = {.nodes_max = STORE_NODE + 1u, .eps_max = 8, .regions_max = KV_NODE_REGIONS_MAX,
                      .packets_max = 4096, .ctrl_bytes_max = 8u << 20, .lat_min_ns = 10000,
                      .lat_max_ns = 100000, .ns_per_kib = 100};
    if (!w->arena || sim_rt_new(&w->penv, &rc, &w->choice, &w->rt) != KV_OK ||
        sim_net_new(&w->penv, &nc, &w->choice, &w->net) != KV_OK || sim_check_new(&w->check) != KV_OK) {
        sim_world_free(w);
        return KV_ENOMEM;
    }
    *out = w;
    return KV_OK;
}

void sim_world_free(sim_world *w) {
    if (!w) return;
    sim_rt_free(w->rt);
    sim_net_free(w->net);
    sim_check_free(w->check);
    free(w->post);
    free(w->alog);
    kv_huge_unmap(w->arena, w->arena_len);
    free(w);
}

int32_t sim_te_error_code(uint32_t arg) {
    static const int32_t codes[SIM_TE_ERROR_CODES] = {-1,   -2,   -3,   -4,   -6,   -7,   -8,   -101, -102,
                                                      -103, -104, -200, -201, -202, -300, -301, -302, -303};
    return codes[arg % SIM_TE_ERROR_CODES];
}

/* ---- building --------------------------------------------------------------- */

void sim_world_cfg_default(sim_world_cfg *c) {
    memset(c, 0, sizeof *c);
    c->seed = 1;
    c->n_p = c->n_d = 1;
    c->tp_p = c->tp_d = 1;
    c->n_groups = 1;
    c->group[0] = (kv_group_cfg){.kind = KV_GROUP_FULL};
    c->block_size = 16;
    c->pool_blocks_p = c->pool_blocks_d = 128;
    c->policy = KV_POLICY_FAIL;
    c->abort_timeout_ns = 2000000000ull;  /* 2 s virtual (480 s in vLLM, scaled) */
    c->recv_timeout_ns = 2500000000ull;   /* 2.5 s virtual (540 s in vLLM, scaled) */
    c->live_bound_ns = 20000000000ull;    /* 20 s virtual */
    c->conn_p = c->conn_d = KV_CONN_P2P;
    c->store_capacity = 1024;
    c->head_bytes = 8;
}

static kv_engine_cfg engine_cfg(const sim_world *w, uint32_t i) {
    const sim_world_cfg *c = w->cfg;
    bool p = i < c->n_p;
    kv_engine_cfg e = {
        .index = i, .node = NODE_OF_ENGINE(i), .role = p ? KV_ROLE_PRODUCER : KV_ROLE_CONSUMER,
        .tp = p ? c->tp_p : c->tp_d, .n_groups = c->n_groups, .block_size = c->block_size,
        .pool_blocks = p ? c->pool_blocks_p : c->pool_blocks_d, .head_bytes = c->head_bytes,
        .max_batched_tokens = 512, .max_running = 32, .policy = c->policy,
        .prefix_caching = c->prefix_caching, .step_ns_base = 2000000, .step_ns_per_token = 20000,
        .idle_poll_ns = 5000000, .abort_timeout_ns = c->abort_timeout_ns,
        .recv_timeout_ns = c->recv_timeout_ns, .bugs = c->bugs, .store_lookup_off = c->store_lookup_off,
        .num_spec = c->num_spec,
        .proxy_actor = w->proxy->actor, .bootstrap_actor = w->boot->actor};
    memcpy(e.group, c->group, sizeof e.group);
    if (w->store) e.store_addr = *sim_store_addr(w->store);
    /* Tables as large as the requests this engine can ever see (no table
     * binds before it would with the maximum), so a run zeroes and walks
     * only what it can use. */
    uint32_t mine = 0;
    for (uint32_t r = 0; r < c->n_reqs; r++)
        mine += p ? c->req[r].p_engine % c->n_p == i : c->n_p + c->req[r].d_engine % c->n_d == i;
    e.kvmem = w->kvmem;
    e.reqs_max = c->reqs_max ? c->reqs_max : mine < 1 ? 1 : mine > KV_ENGINE_REQS_MAX ? KV_ENGINE_REQS_MAX : mine;
    return e;
}

/* A process of engine i: its actors, on its transport nodes. */
static kv_status start_engine(sim_world *w, uint32_t i) {
    kv_engine_cfg ec = engine_cfg(w, i);
    kvt *t[KV_TP_MAX];
    for (uint32_t r = 0; r < ec.tp; r++) t[r] = sim_net_node(w->net, ec.node + 1 + r);
    kv_conn_kind kind = (kv_conn_kind)(ec.role == KV_ROLE_PRODUCER ? w->cfg->conn_p : w->cfg->conn_d);
    w->alloc_owner = (uint16_t)(w->n_all + 1u); /* what it allocates is this process's */
    kv_status st = kv_engine_new(&w->env, sim_rt_iface(w->rt), &ec, kind, t, &w->eng[i]);
    w->alloc_owner = OWNER_WORLD;
    if (st == KV_OK) w->all_eng[w->n_all++] = w->eng[i];
    return st;
}

static kv_status build(sim_world *w) {
    const sim_world_cfg *c = w->cfg;
    if (c->n_p == 0 || c->n_d == 0 || c->n_p + c->n_d > KV_ENGINES_MAX || c->n_reqs > SIM_REQS_MAX ||
        c->n_faults > SIM_FAULTS_MAX)
        return KV_EINVAL;
    kv_rt *rt = sim_rt_iface(w->rt);
    kv_status st = kv_proxy_new(&w->env, rt, 0, c->n_reqs ? c->n_reqs : 1u, &w->proxy); /* ids are 0..n_reqs-1 */
    w->alloc_owner = OWNER_BOOT;
    if (st == KV_OK) st = kv_bootstrap_new(&w->env, rt, 0, &w->boot);
    w->alloc_owner = OWNER_WORLD;
    if (st != KV_OK) return st;
    snprintf(w->proxy->bootstrap_addr.s, sizeof w->proxy->bootstrap_addr.s, "sim-bootstrap:8998");
    w->store = NULL;
    if (kv_conn_kind_has_store(c->conn_p) || kv_conn_kind_has_store(c->conn_d))
        st = sim_store_new(&w->env, rt, sim_net_node(w->net, STORE_NODE), STORE_NODE, c->store_capacity, &w->store);
    if (st != KV_OK) return st;
    w->n_eng = c->n_p + c->n_d;
    w->n_all = w->n_restart = 0;
    w->store_back_ns = UINT64_MAX;
    memset(w->abort_on_kv, 0, sizeof w->abort_on_kv);
    for (uint32_t i = 0; i < w->n_eng && st == KV_OK; i++) {
        uint32_t before = sim_rt_actor_count(w->rt);
        w->down[i] = false;
        st = start_engine(w, i);
        w->n_actors_of[i] = sim_rt_actor_count(w->rt) - before;
        if (st == KV_OK) w->proxy->engine_actor[i] = w->eng[i]->sched_actor;
    }
    return st;
}

/* World items: requests [0, n_reqs) and faults [n_reqs, ...), by time. */
static uint64_t item_time(const sim_world *w, uint32_t it) {
    return it < w->cfg->n_reqs ? w->cfg->req[it].at_ns : w->cfg->fault[it - w->cfg->n_reqs].at_ns;
}

/* Milliseconds until a crashed engine's new process starts: peer_crash arg
 * (0: at once), peer_hang arg + 1 (the host is never back at once). */
static uint32_t restart_ms(const sim_fault *f) { return f->kind == SIM_F_PEER_HANG ? f->arg + 1u : f->arg; }

/* When an item's effect is over: a network delay holds messages sent in its
 * 50 ms window back by arg ms, the bootstrap is down for arg ms, a crashed
 * engine is back after restart_ms; the rest act at once. The liveness bound
 * counts from the last of these. */
static uint64_t item_end(const sim_world *w, uint32_t it) {
    uint64_t t = item_time(w, it);
    if (it < w->cfg->n_reqs) return t;
    const sim_fault *f = &w->cfg->fault[it - w->cfg->n_reqs];
    if (f->kind == SIM_F_NET_DELAY) return t + 50000000ull + (uint64_t)f->arg * 1000000ull;
    if (f->kind == SIM_F_BOOT_DOWN) return t + (uint64_t)f->arg * 1000000ull;
    if (f->kind == SIM_F_STORE_CRASH) return t + ((uint64_t)f->arg + 1u) * 1000000ull;
    if (f->kind == SIM_F_PEER_CRASH || f->kind == SIM_F_PEER_HANG) return t + (uint64_t)restart_ms(f) * 1000000ull;
    return t;
}

static void sort_items(sim_world *w) {
    w->n_items = w->cfg->n_reqs + w->cfg->n_faults;
    for (uint32_t i = 0; i < w->n_items; i++) w->order[i] = i;
    for (uint32_t i = 1; i < w->n_items; i++) { /* insertion sort: stable, bounded */
        uint32_t v = w->order[i], j = i;
        while (j > 0 && item_time(w, w->order[j - 1]) > item_time(w, v)) {
            w->order[j] = w->order[j - 1];
            j--;
        }
        w->order[j] = v;
    }
    w->next_item = 0;
}

/* ---- faults ------------------------------------------------------------------ */

/* Coverage: the phase the request is in on each engine that holds it (P
 * and D both count), or "done" when no engine holds it. */
static void count_abort_phases(sim_world *w, uint32_t id, uint32_t kind) {
    bool any = false;
    for (uint32_t i = 0; i < w->n_eng; i++) {
        if (w->down[i]) continue;
        const kv_sreq *s = kv_engine_find(w->eng[i], id);
        uint32_t ph = s ? s->phase : KV_PH_COUNT;
        if (!s && kv_engine_inq_has(w->eng[i], id)) /* arrived, waiting for the next schedule */
            ph = w->eng[i]->cfg.role == KV_ROLE_PRODUCER ? KV_PH_P_QUEUED : KV_PH_D_QUEUED;
        if (ph >= KV_PH_COUNT) continue;
        w->res->fault_phase[kind][ph]++;
        any = true;
    }
    if (!any) w->res->fault_phase[kind][KV_PH_DONE]++;
}

static void post_engine(sim_world *w, uint32_t kind, uint32_t engine, uint32_t sched_actor) {
    kv_m_proxy_engine m = {.engine = engine, .sched_actor = sched_actor};
    kv_rt_post(sim_rt_iface(w->rt), w->proxy->actor, kind, &m, sizeof m);
}

/* A fault on each transport node of engine e (one per TP rank). */
static void on_nodes(sim_world *w, const kv_engine *e, void (*fault)(sim_net *, uint32_t)) {
    for (uint32_t r = 0; r < e->cfg.tp; r++) fault(w->net, e->cfg.node + 1 + r);
}

/* The process of engine i dies: its actors never run again (their mail is
 * dropped), its transport nodes crash (in-flight traffic lost, peers get
 * PEER_DOWN), its KV memory is gone with it (the checker stops looking at
 * its pools), and the proxy's connection to it breaks. A new process takes
 * its place restart_ms later. Silent (peer_hang): nobody is told; its nodes
 * hang (sim_net_fault_hang) and the proxy keeps sending it requests, which
 * are lost; the resets come when it restarts. Coverage counts the phase of
 * each request the engine held. */
static void crash_engine(sim_world *w, uint32_t i, uint32_t restart_ms, bool silent) {
    if (w->down[i]) return; /* already dead: nothing more to kill */
    kv_engine *e = w->eng[i];
    uint32_t held = 0, kind = silent ? SIM_F_PEER_HANG : SIM_F_PEER_CRASH;
    for (uint64_t m = e->live; m; m &= m - 1) {
        const kv_sreq *s = &e->req[__builtin_ctzll(m)];
        if (s->phase < KV_PH_COUNT) w->res->fault_phase[kind][s->phase]++, held++;
    }
    if (!held) w->res->fault_phase[kind][KV_PH_DONE]++;
    sim_check_engine_down(w->check, i);
    for (uint32_t a = 0; a < sim_rt_actor_count(w->rt); a++)
        if (sim_rt_actor_node(w->rt, a) == e->cfg.node) sim_rt_kill(w->rt, a);
    on_nodes(w, e, silent ? sim_net_fault_hang : sim_net_fault_crash);
    w->down[i] = true;
    if (!silent) post_engine(w, KV_M_PROXY_ENGINE_DOWN, i, KV_ACTOR_NONE);
    uint64_t at = sim_rt_now(w->rt) + (uint64_t)restart_ms * 1000000ull;
    uint32_t k = w->n_restart++; /* faults are applied in time order; keep restarts so */
    while (k > 0 && w->restart[k - 1].at_ns > at) {
        w->restart[k] = w->restart[k - 1];
        k--;
    }
    w->restart[k].at_ns = at;
    w->restart[k].engine = i;
    w->restart[k].silent = silent;
}

/* The store's process dies: its actor (and so its mailbox and timers), its
 * node's connections (every peer gets PEER_DOWN; what is in flight is lost)
 * and every key it held. A new, empty process listens at the same address
 * restart_ms + 1 ms later. A store already down stays down until its own
 * restart. */
static void crash_store(sim_world *w, uint32_t restart_ms) {
    if (!w->store || w->store_back_ns != UINT64_MAX) return;
    sim_rt_kill(w->rt, sim_store_actor(w->store));
    sim_net_fault_crash(w->net, STORE_NODE);
    sim_store_crash(w->store);
    w->store_back_ns = sim_rt_now(w->rt) + ((uint64_t)restart_ms + 1u) * 1000000ull;
}

static void restart_store(sim_world *w) {
    w->store_back_ns = UINT64_MAX;
    sim_net_fault_restart(w->net, STORE_NODE);
    kv_status st = sim_rt_actor_count(w->rt) < SIM_ACTORS_MAX ? sim_store_restart(w->store) : KV_ENOMEM;
    if (st == KV_OK) sim_check_store_up(w->check);
    if (w->trace || w->json)
        world_line(w, "STORE", "%s%s", st == KV_OK ? "restarted (empty)" : "stays down: ",
                   st == KV_OK ? "" : kv_status_str(st));
}

/* A new process of engine i: fresh actors, pools and connector state on the
 * same transport nodes (and so the same addresses); it registers with the
 * bootstrap service as the first one did. After a silent crash the host's
 * return resets every connection to the old process first (its peers get
 * PEER_DOWN, the proxy fails what it had sent there). When the runtime has
 * no room for its actors the engine stays down (said in the trace). */
static void restart_engine(sim_world *w, uint32_t i, bool silent) {
    bool room = sim_rt_actor_count(w->rt) + w->n_actors_of[i] <= SIM_ACTORS_MAX;
    kv_engine *dead = w->eng[i];
    if (silent) {
        on_nodes(w, dead, sim_net_fault_crash);
        post_engine(w, KV_M_PROXY_ENGINE_DOWN, i, KV_ACTOR_NONE);
    }
    if (room) {
        on_nodes(w, dead, sim_net_fault_restart);
        room = start_engine(w, i) == KV_OK;
    }
    if (w->trace || w->json)
        world_line(w, "RESTART", "engine %u%s", i, room ? "" : ": no room for its actors, it stays down");
    if (!room) {
        w->eng[i] = dead;
        return;
    }
    w->down[i] = false;
    sim_check_engine_up(w->check, i);
    post_engine(w, KV_M_PROXY_ENGINE_UP, i, w->eng[i]->sched_actor);
}

/* A sender fault reaches every rank's P2P sender of P engine p. A live
 * engine whose connector has a P2P half and a rank without a sender to
 * reach is the world's error, not a fault that happened: the checker would
 * excuse what it never did (a simulator error, exit 5). */
static void post_fault_to_senders(sim_world *w, uint32_t p, uint32_t kind) {
    uint32_t i = p % w->cfg->n_p;
    kv_engine *e = w->eng[i];
    kv_m_fault f = {.kind = kind};
    for (uint32_t r = 0; r < e->cfg.tp; r++) {
        uint32_t a = kv_conn_worker_p2p_actor(&e->worker[r]->conn);
        if (a != KV_ACTOR_NONE) kv_rt_post(sim_rt_iface(w->rt), a, KV_M_FAULT, &f, sizeof f);
        else if (e->conn_kind != KV_CONN_STORE && !w->down[i]) {
            kv_logf(&w->env, KV_LOG_ERROR, "world: engine %u rank %u has a P2P connector but no sender to fault", i, r);
            w->net_error = KV_ESTATE;
        }
    }
}

static void post_fault_to_store(sim_world *w, uint32_t kind, uint32_t arg) {
    kv_m_fault f = {.kind = kind, .arg = arg};
    if (w->store) kv_rt_post(sim_rt_iface(w->rt), sim_store_actor(w->store), KV_M_FAULT, &f, sizeof f);
}

static void apply_fault(sim_world *w, const sim_fault *f) {
    kv_rt *rt = sim_rt_iface(w->rt);
    uint32_t phase = KV_PH_DONE;
    sim_check_fault(w->check, f);
    switch ((sim_fault_kind)f->kind) {
    case SIM_F_ABORT: {
        uint32_t id = f->target % (w->cfg->n_reqs ? w->cfg->n_reqs : 1);
        count_abort_phases(w, id, SIM_F_ABORT);
        phase = KV_PH_COUNT; /* counted above */
        kv_m_abort a = {.id = id};
        kv_rt_post(rt, w->proxy->actor, KV_M_PROXY_ABORT, &a, sizeof a);
        break;
    }
    case SIM_F_SENDER_EXCEPTION: post_fault_to_senders(w, f->target, KV_F_SENDER_EXCEPTION); break;
    case SIM_F_SENDER_ERR_REQ: post_fault_to_senders(w, f->target, KV_F_SENDER_ERR_REQ); break;
    case SIM_F_SENDER_DROP_RESP: post_fault_to_senders(w, f->target, KV_F_SENDER_DROP_RESP); break;
    case SIM_F_BOOT_DOWN: {
        kv_m_fault m = {.kind = KV_F_BOOT_DOWN, .arg = f->arg};
        kv_rt_post(rt, w->boot->actor, KV_M_FAULT, &m, sizeof m);
        break;
    }
    case SIM_F_TE_ERROR: {
        const kv_engine *e = w->eng[f->target % w->cfg->n_p];
        for (uint32_t r = 0; r < e->cfg.tp; r++) sim_net_fault_batch(w->net, e->cfg.node + 1 + r, sim_te_error_code(f->arg), 1);
        break;
    }
    case SIM_F_NET_RESET: {
        const kv_engine *p = w->eng[f->target % w->cfg->n_p];
        const kv_engine *d = w->eng[w->cfg->n_p + f->arg % w->cfg->n_d];
        for (uint32_t a = 0; a < p->cfg.tp; a++)
            for (uint32_t b = 0; b < d->cfg.tp; b++)
                sim_net_fault_reset(w->net, p->cfg.node + 1 + a, d->cfg.node + 1 + b);
        break;
    }
    case SIM_F_NET_DELAY: sim_net_fault_delay(w->net, (uint64_t)f->arg * 1000000u, 50000000u); break;
    case SIM_F_STORE_PUT_FAIL: post_fault_to_store(w, KV_F_STORE_PUT_FAIL, f->arg % 8u); break;
    case SIM_F_STORE_GET_FAIL: post_fault_to_store(w, KV_F_STORE_GET_FAIL, f->arg % 8u); break;
    case SIM_F_STORE_EVICT: post_fault_to_store(w, KV_F_STORE_EVICT, f->arg % 256u); break;
    case SIM_F_STORE_PRESSURE: post_fault_to_store(w, KV_F_STORE_PRESSURE, f->arg % 8u); break;
    case SIM_F_STORE_EXISTS_FAIL: post_fault_to_store(w, KV_F_STORE_EXISTS_FAIL, f->arg % 8u); break;
    case SIM_F_PEER_CRASH:
    case SIM_F_PEER_HANG:
        crash_engine(w, f->target % w->n_eng, restart_ms(f), f->kind == SIM_F_PEER_HANG);
        phase = KV_PH_COUNT; /* counted there */
        break;
    case SIM_F_ABORT_ON_KV: {
        uint32_t id = f->target % (w->cfg->n_reqs ? w->cfg->n_reqs : 1);
        w->abort_on_kv[id / 64u] |= 1ull << (id % 64u);
        phase = KV_PH_COUNT; /* counted when it fires */
        break;
    }
    case SIM_F_STORE_CRASH: crash_store(w, f->arg); break;
    case SIM_F_KIND_COUNT: break;
    }
    if (f->kind < SIM_F_KIND_COUNT && phase < KV_PH_COUNT) w->res->fault_phase[f->kind][phase]++;
    if (w->trace || w->json) world_line(w, "FAULT", "%s target=%u arg=%u", sim_fault_name(f->kind), f->target, f->arg);
}

static void submit_req(sim_world *w, uint32_t i) {
    const sim_req_plan *q = &w->cfg->req[i];
    kv_m_proxy_submit s;
    memset(&s, 0, sizeof s);
    s.spec.id = i;
    s.spec.prompt_len = q->prompt_len;
    s.spec.max_tokens = q->max_tokens;
    s.spec.tokens = (kv_tokens){.token_seed = sim_mix64(w->cfg->seed ^ ((uint64_t)i << 20)),
                                .prefix_group = q->prefix_group, .prefix_len = q->prefix_len};
    s.p_engine = q->p_engine % w->cfg->n_p;
    s.d_engine = w->cfg->n_p + q->d_engine % w->cfg->n_d;
    s.sequential = q->sequential;
    s.d_extra_tokens = q->d_extra_tokens;
    kv_rt_post(sim_rt_iface(w->rt), w->proxy->actor, KV_M_PROXY_SUBMIT, &s, sizeof s);
}

static void apply_due_items(sim_world *w) {
    while (w->next_item < w->n_items && item_time(w, w->order[w->next_item]) <= sim_rt_now(w->rt)) {
        uint32_t it = w->order[w->next_item++];
        if (it < w->cfg->n_reqs) submit_req(w, it);
        else apply_fault(w, &w->cfg->fault[it - w->cfg->n_reqs]);
    }
    if (w->store_back_ns <= sim_rt_now(w->rt)) restart_store(w);
    while (w->n_restart && w->restart[0].at_ns <= sim_rt_now(w->rt)) {
        uint32_t i = w->restart[0].engine;
        bool silent = w->restart[0].silent;
        w->n_restart--;
        memmove(&w->restart[0], &w->restart[1], w->n_restart * sizeof w->restart[0]);
        restart_engine(w, i, silent);
    }
}

static uint64_t next_restart(const sim_world *w) {
    uint64_t t = w->n_restart ? w->restart[0].at_ns : UINT64_MAX;
    return w->store_back_ns < t ? w->store_back_ns : t;
}

/* ---- network ------------------------------------------------------------------- */

static void pump_net(sim_world *w) {
    if (sim_net_pump(w->net, sim_rt_iface(w->rt), &w->pump) == KV_OK) return;
    /* cannot happen for wire-sized ctrl; never drop silently */
    kv_logf(&w->env, KV_LOG_ERROR, "world: a control message exceeds a mailbox message");
    w->net_error = KV_EFULL;
}

/* ---- events ------------------------------------------------------------------- */

/* The request a message is about, for the traces, when the payload names
 * one; UINT32_MAX otherwise. */
static uint32_t event_req(const kv_msg *m) {
    uint32_t id = UINT32_MAX;
    switch (m->kind) {
    case KV_M_ADD_REQ: id = ((const kv_req_spec *)m->payload)->id; break;
    case KV_M_ABORT:
    case KV_M_PROXY_ABORT: id = ((const kv_m_abort *)m->payload)->id; break;
    case KV_M_REQ_DONE: id = ((const kv_m_req_done *)m->payload)->id; break;
    case KV_M_PROXY_SUBMIT: id = ((const kv_m_proxy_submit *)m->payload)->spec.id; break;
    case KV_M_P2P_RECV_START: id = ((const kv_p2p_pull *)m->payload)->d_req; break;
    case KV_M_P2P_RECV_DONE: id = ((const kv_m_recv_done *)m->payload)->d_req; break;
    case KV_M_P2P_SEND_RECORD: id = ((const kv_p2p_send *)m->payload)->p_req; break;
    case KV_M_P2P_SEND_DONE: id = ((const kv_m_send_done *)m->payload)->p_req; break;
    case KV_M_STORE_LOOKUP: id = ((const kv_m_store_lookup *)m->payload)->id; break;
    case KV_M_STORE_LOOKUP_REPLY: id = ((const kv_m_store_lookup_reply *)m->payload)->id; break;
    case KV_M_STORE_SAVE: id = ((const kv_m_store_save *)m->payload)->id; break;
    case KV_M_STORE_SAVE_DONE: id = ((const kv_m_store_save_done *)m->payload)->id; break;
    case KV_M_STORE_LOAD: id = ((const kv_m_store_load *)m->payload)->id; break;
    case KV_M_STORE_LOAD_DONE: id = ((const kv_m_store_load_done *)m->payload)->id; break;
    default: break;
    }
    return id;
}

/* The traces of one handled message: its line, its instant and flow, then
 * the violation seen during it, if any. */
static void trace_event(sim_world *w, uint32_t actor, const kv_msg *m, uint64_t now) {
    uint32_t req = event_req(m);
    if (w->trace) {
        fprintf(w->trace, "%12llu  %-14s %-18s len %u", (unsigned long long)now, sim_rt_actor_name(w->rt, actor),
                kv_msg_kind_name(m->kind), m->len);
        if (req != UINT32_MAX) fprintf(w->trace, "  req %u", req);
        fputc('\n', w->trace);
    }
    if (w->json) {
        uint64_t vis = vis_event(w, actor);
        kv_json *j = json_slice(w, kv_msg_kind_name(m->kind), "event", actor, vis);
        kv_json_ku64(j, "len", m->len);
        if (req != UINT32_MAX) kv_json_ku64(j, "req", req);
        if (sim_rt_msg_id(w->rt)) kv_json_ku64(j, "msg", sim_rt_msg_id(w->rt));
        kv_json_kstr(j, "from", sim_rt_actor_name(w->rt, m->src));
        json_close2(j);
        json_flow(w, actor, m, vis);
    }
}

/* A D worker heard a load of a request end: an abort armed for it
 * (abort_on_kv) goes to the proxy now, as a client's would. Both load-done
 * messages start with the request id. */
static void abort_if_armed(sim_world *w, uint32_t actor, const kv_msg *m) {
    uint32_t id;
    if (m->len < 4) return;
    memcpy(&id, m->payload, 4);
    if (id >= w->cfg->n_reqs || !(w->abort_on_kv[id / 64u] >> (id % 64u) & 1u)) return;
    uint32_t d = w->cfg->n_p + w->cfg->req[id].d_engine % w->cfg->n_d;
    bool on_d = false;
    for (uint32_t r = 0; !w->down[d] && r < w->eng[d]->cfg.tp; r++) on_d = on_d || w->eng[d]->worker[r]->main_actor == actor;
    if (!on_d) return; /* P's own store loads do not count */
    w->abort_on_kv[id / 64u] &= ~(1ull << (id % 64u));
    count_abort_phases(w, id, SIM_F_ABORT_ON_KV);
    kv_m_abort a = {.id = id};
    kv_rt_post(sim_rt_iface(w->rt), w->proxy->actor, KV_M_PROXY_ABORT, &a, sizeof a);
    if (w->trace || w->json) world_line(w, "FAULT", "abort_on_kv fires for request %u", id);
}

static void after_event(void *ctx, uint32_t actor, const kv_msg *m) {
    sim_world *w = ctx;
    w->events++;
    uint64_t now = sim_rt_now(w->rt);
    w->hash = sim_mix64(w->hash ^ now) ^ sim_mix64(((uint64_t)actor << 32) ^ m->kind ^ ((uint64_t)m->len << 48));
    if (w->trace || w->json) trace_event(w, actor, m, now);
    sim_check_event(w->check, actor, m);
    if (m->kind == KV_M_P2P_RECV_DONE || m->kind == KV_M_STORE_LOAD_DONE) abort_if_armed(w, actor, m);
    if (w->viol_pending) trace_violation(w);
    w->vis_valid = false; /* the next event takes its own slice */
}

/* ---- running ------------------------------------------------------------------- */

static uint64_t min3(uint64_t a, uint64_t b, uint64_t c) { return a < b ? (a < c ? a : c) : (b < c ? b : c); }

/* The rare combinations this run reached (the checker counts the holds it
 * saw end by the reap). */
static void count_reach(const sim_world *w, sim_result *out) {
    const sim_world_cfg *c = w->cfg;
    bool store = kv_conn_kind_has_store(c->conn_p) || kv_conn_kind_has_store(c->conn_d), get_fail = false;
    for (uint32_t i = 0; i < c->n_faults; i++) get_fail = get_fail || c->fault[i].kind == SIM_F_STORE_GET_FAIL;
    out->reach[SIM_R_WIDE_HEADS] += c->head_bytes > 8u;
    out->reach[SIM_R_TP_STORE_GET_FAIL] += (c->tp_p >= 2u || c->tp_d >= 2u) && store && get_fail;
    out->reach[SIM_R_RECURRENT_LAST] += c->n_groups > 1u && c->group[c->n_groups - 1u].kind == KV_GROUP_MAMBA;
    bool inner = false;
    for (uint32_t g = 0; g + 1u < c->n_groups; g++) inner |= c->group[g].kind == KV_GROUP_MAMBA;
    out->reach[SIM_R_RECURRENT_INNER] += inner;
    out->reach[SIM_R_SHORT_TIMEOUTS] += c->abort_timeout_ns < 1000000000ull;
    out->reach[SIM_R_EXISTS_FAILED] += out->store.exist_failures;
    out->reach[SIM_R_LOOKUP_OFF] += store && c->store_lookup_off;
    for (uint32_t i = 0; i < w->n_all; i++) {
        const kv_engine *e = w->all_eng[i];
        out->reach[SIM_R_ABORT_AFTER_RECV] += e->stats.aborts_after_recv;
        out->reach[SIM_R_RESUMED_HIT] += e->stats.resumed_hits;
        out->reach[SIM_R_DRAFTS] += e->stats.drafts;
        out->reach[SIM_R_DRAFTS_REJECTED] += e->stats.drafts - e->stats.drafts_accepted;
        out->reach[SIM_R_DRAFT_BLOCKS] += e->stats.draft_blocks;
        out->reach[SIM_R_SAVER_PREEMPTED] +=
            e->cfg.role == KV_ROLE_PRODUCER && kv_conn_kind_has_store(e->conn_kind) ? e->stats.preemptions : 0;
    }
}

const char *sim_reach_name(uint32_t r) {
    static const char *const names[SIM_R_COUNT] = {
        [SIM_R_WIDE_HEADS] = "heads wider than 8 bytes (runs)",
        [SIM_R_TP_STORE_GET_FAIL] = "TP >= 2 with store get failures (runs)",
        [SIM_R_RECURRENT_LAST] = "recurrent group last (runs)",
        [SIM_R_ABORT_AFTER_RECV] = "abort after KV arrived, before its schedule",
        [SIM_R_EXPIRED_HOLD] = "P holds ended by the expiry reap",
        [SIM_R_RECURRENT_INNER] = "recurrent group before the last (runs)",
        [SIM_R_HIT_ALL_BUT_ONE] = "first schedules with a local hit of N-1 tokens",
        [SIM_R_RECURRENT_CONTINUED] = "recurrent states continued after a pull or load",
        [SIM_R_SHORT_TIMEOUTS] = "timeouts under 1 s (runs)",
        [SIM_R_HIT_ALL_BUT_ONE_RECURRENT] = "local hits of N-1 tokens with a recurrent group",
        [SIM_R_EXISTS_FAILED] = "store EXIST calls failed",
        [SIM_R_LOOKUP_OFF] = "store lookups off (runs)",
        [SIM_R_SAVER_PREEMPTED] = "preemptions on a P that saves to the store",
        [SIM_R_RESUMED_HIT] = "preempted requests resumed from a hit or a load",
        [SIM_R_DRAFTS] = "draft tokens scheduled (speculative decoding)",
        [SIM_R_DRAFTS_REJECTED] = "draft tokens rejected and rolled back",
        [SIM_R_DRAFT_BLOCKS] = "steps whose drafts took one more block"};
    return r < SIM_R_COUNT ? names[r] : "?";
}

/* ---- teardown ------------------------------------------------------------- */

/* After a clean end: every process of the run (the dead ones too: their
 * memory is still the arena's) is freed with kv_engine_free, then the
 * bootstrap service; releases are judged as they come (w_release), what is
 * left in one pass over the records. The checker decides (INV-LEAK). Runs
 * after everything read from the engines, nothing reads them after it. */
static void teardown(sim_world *w) {
    if (w->alog_full) return; /* a run beyond ALOG_MAX allocations is not judged */
    static uint32_t left[KV_ENGINES_MAX + SIM_FAULTS_MAX + 1u], allocs[KV_ENGINES_MAX + SIM_FAULTS_MAX + 1u],
        first[KV_ENGINES_MAX + SIM_FAULTS_MAX + 1u], first_bytes[KV_ENGINES_MAX + SIM_FAULTS_MAX + 1u],
        twice[KV_ENGINES_MAX + SIM_FAULTS_MAX + 1u], foreign[KV_ENGINES_MAX + SIM_FAULTS_MAX + 1u];
    static uint64_t left_bytes[KV_ENGINES_MAX + SIM_FAULTS_MAX + 1u];
    uint32_t n = w->n_all + 1u; /* slot n_all: the bootstrap service */
    for (uint32_t k = 0; k < n; k++) {
        w->td = (sim_teardown_report){0};
        w->alloc_owner = k < w->n_all ? (uint16_t)(k + 1u) : (uint16_t)OWNER_BOOT;
        if (k < w->n_all) kv_engine_free(w->all_eng[k]);
        else kv_bootstrap_free(w->boot);
        twice[k] = w->td.twice;
        foreign[k] = w->td.foreign;
        left[k] = allocs[k] = first[k] = first_bytes[k] = 0;
        left_bytes[k] = 0;
    }
    w->alloc_owner = OWNER_WORLD;
    for (uint32_t i = 0; i < w->n_alog; i++) {
        const sim_alloc_rec *r = &w->alog[i];
        if (r->owner == OWNER_WORLD) continue;
        uint32_t k = r->owner == OWNER_BOOT ? w->n_all : r->owner - 1u;
        if (r->live && !left[k]++) first[k] = allocs[k], first_bytes[k] = r->bytes;
        if (r->live) left_bytes[k] += r->bytes;
        allocs[k]++;
    }
    for (uint32_t k = 0; k < n && !w->res->violated; k++) {
        sim_teardown_report t = {.bootstrap = k == w->n_all, .engine = k < w->n_all ? w->all_eng[k]->cfg.index : 0,
                                 .process = k, .allocs = allocs[k], .left = left[k], .left_bytes = left_bytes[k],
                                 .first_left = first[k], .first_left_bytes = first_bytes[k], .twice = twice[k],
                                 .foreign = foreign[k]};
        sim_check_teardown(w->check, &t);
    }
}

kv_status sim_world_run(sim_world *w, const sim_world_cfg *cfg, FILE *trace, sim_result *out) {
    memset(out, 0, sizeof *out);
    w->arena_used = 0;
    w->n_alog = 0;
    w->alog_full = false;
    w->alloc_owner = OWNER_WORLD;
    w->runs++;
    w->cfg = cfg;
    w->res = out;
    w->trace = trace;
    w->events = 0;
    w->net_error = KV_OK;
    w->hash = sim_mix64(cfg->seed);
    w->rand_next = sim_mix64(cfg->seed ^ 0x7472616e73666572ull); /* "transfer" */
    sim_choice_init(&w->choice, cfg->choice, cfg->choice_len, cfg->seed);
    sim_rt_reset(w->rt, &w->choice);
    sim_net_reset(w->net, &w->choice);
    sim_rt_set_hook(w->rt, after_event, w);
    sim_rt_set_post_hook(w->rt, w->json ? w_post : NULL, w); /* message ids only for the JSON's flows */
    w->post_lost = w->viol_pending = w->vis_valid = false;
    if (w->json) memset(w->vis_next, 0, sizeof w->vis_next);
    json_begin(w); /* before build: the world's posts while building are in it */
    kv_status st = build(w);
    if (st != KV_OK) {
        json_abort(w);
        return st;
    }
    if (w->trace) fputs(trace_legend, w->trace);
    sim_check_view cv = {.env = &w->env, .rt = w->rt, .eng = w->eng, .down = w->down, .n_eng = w->n_eng,
                         .proxy = w->proxy, .store = w->store, .net = w->net, .cfg = cfg, .res = out};
    sim_check_begin(w->check, &cv);
    sort_items(w);
    uint64_t last = 0;
    for (uint32_t i = 0; i < w->n_items; i++) {
        uint64_t end = item_end(w, i);
        if (end > last) last = end;
    }
    uint64_t bound = last + cfg->live_bound_ns;
    bool timed_out = false;
    while (!out->violated && sim_rt_error(w->rt) == KV_OK && w->net_error == KV_OK) {
        apply_due_items(w);
        pump_net(w);
        sim_rt_deliver_due(w->rt);
        if (sim_rt_run_one(w->rt)) continue;
        uint64_t next_item = w->next_item < w->n_items ? item_time(w, w->order[w->next_item]) : UINT64_MAX;
        if (next_restart(w) < next_item) next_item = next_restart(w);
        uint64_t next = min3(sim_rt_next_event(w->rt), sim_net_next_due(w->net), next_item);
        if (next == UINT64_MAX) break;
        if (next > bound) {
            timed_out = true;
            break;
        }
        sim_check_time(w->check, next);
        if (out->violated) break;
        sim_rt_set_now(w->rt, next);
    }
    out->sim_error = sim_rt_error(w->rt) != KV_OK ? sim_rt_error(w->rt) : w->net_error;
    if (!out->violated && out->sim_error == KV_OK) sim_check_end(w->check, timed_out);
    for (uint32_t id = 0; id < cfg->n_reqs; id++) {
        const kv_proxy_req *q = kv_proxy_slot(w->proxy, id);
        if (q->used && q->outcome != KV_OUT_PENDING && q->done_ns > out->last_done_ns) out->last_done_ns = q->done_ns;
    }
    out->requests_ok = w->proxy->ok;
    out->requests_error = w->proxy->errors;
    out->requests_aborted = w->proxy->aborted;
    for (uint32_t i = 0; i < w->n_all; i++) { /* every process, the dead ones too */
        const kv_engine *e = w->all_eng[i];
        out->armed[KV_INV_STRAY] += e->stats.finished_recving + e->stats.finished_sending;
        out->armed[KV_INV_SCHED_ASSERT] += e->stats.finished_recving;
        out->rejected_loads += e->stats.rejected_loads;
        out->turned_away += e->stats.turned_away;
        for (uint32_t r = 0; r < e->cfg.tp; r++) {
            const kv_worker *wk = e->worker[r];
            out->armed[KV_INV_DATA] += wk->verified_blocks;
            out->armed[KV_INV_SAVE] += wk->store_checks;
            out->store_saves += wk->store_saves;
            out->store_loads += wk->store_loads;
        }
    }
    if (w->store) out->store = *sim_store_get_stats(w->store);
    count_reach(w, out);
    for (uint32_t i = 0; i < w->n_eng; i++) /* what sim_world_report prints: read before the teardown */
        for (uint32_t g = 0; g < w->eng[i]->cfg.n_groups; g++) kv_pool_report_get(&w->eng[i]->pool[g], &w->final_pool[i][g]);
    if (!out->violated && out->sim_error == KV_OK) teardown(w);
    if (w->viol_pending) trace_violation(w);
    json_end(w);
    out->events = w->events;
    out->trace_hash = w->hash ^ (out->violated ? sim_mix64((uint64_t)out->inv + 1) : 0);
    out->end_ns = sim_rt_now(w->rt);
    /* The network's reset and the runtime's per-pair clocks cost what a run
     * used: done now, by this run, so the next run's reset does the same
     * (no) work whatever came before it (a loop count carried across inputs
     * is AFL++ instability). */
    sim_net_reset(w->net, NULL);
    sim_rt_clear_pairs(w->rt);
    return KV_OK;
}

void sim_world_report(const sim_world *w, FILE *out) {
    for (uint32_t i = 0; i < w->n_eng; i++) {
        const kv_engine *e = w->eng[i];
        fprintf(out, "%c%u (tp %u):", e->cfg.role == KV_ROLE_PRODUCER ? 'P' : 'D', i, e->cfg.tp);
        for (uint32_t g = 0; g < e->cfg.n_groups; g++) {
            const kv_pool_report r = w->final_pool[i][g];
            fprintf(out, "  g%u[cap %u free %u cached %u owned %u pinned %u inflight %u]", g, r.capacity,
                    r.free, r.cached, r.owned, r.pinned, r.inflight);
        }
        fprintf(out, "\n    steps %llu  preemptions %llu  aborts %llu  finished %llu  errors %llu  "
                     "recv %llu  send %llu  load_errors %llu  prefix_hit_tokens %llu\n",
                (unsigned long long)e->stats.steps, (unsigned long long)e->stats.preemptions,
                (unsigned long long)e->stats.aborts, (unsigned long long)e->stats.finished,
                (unsigned long long)e->stats.errors, (unsigned long long)e->stats.finished_recving,
                (unsigned long long)e->stats.finished_sending, (unsigned long long)e->stats.load_errors,
                (unsigned long long)e->stats.prefix_hit_tokens);
    }
}

const char *sim_fault_name(uint32_t kind) {
    static const char *const names[SIM_F_KIND_COUNT] = {
        [SIM_F_ABORT] = "abort",           [SIM_F_SENDER_EXCEPTION] = "sender_exception",
        [SIM_F_SENDER_ERR_REQ] = "err_reqs", [SIM_F_SENDER_DROP_RESP] = "drop_response",
        [SIM_F_BOOT_DOWN] = "bootstrap_down", [SIM_F_TE_ERROR] = "te_error",
        [SIM_F_NET_RESET] = "net_reset",   [SIM_F_NET_DELAY] = "net_delay",
        [SIM_F_STORE_PUT_FAIL] = "store_put_fail", [SIM_F_STORE_GET_FAIL] = "store_get_fail",
        [SIM_F_STORE_EVICT] = "store_evict", [SIM_F_STORE_PRESSURE] = "store_pressure",
        [SIM_F_PEER_CRASH] = "peer_crash", [SIM_F_PEER_HANG] = "peer_hang",
        [SIM_F_ABORT_ON_KV] = "abort_on_kv", [SIM_F_STORE_CRASH] = "store_crash",
        [SIM_F_STORE_EXISTS_FAIL] = "store_exists_fail"};
    return kind < SIM_F_KIND_COUNT && names[kind] ? names[kind] : "?";
}

const kv_engine *sim_world_engine(const sim_world *w, uint32_t i) { return i < w->n_eng ? w->eng[i] : NULL; }
const kv_proxy *sim_world_proxy(const sim_world *w) { return w->proxy; }
