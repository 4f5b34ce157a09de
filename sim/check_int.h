/* sim/check_int.h — the checker's state, shared by the sim/check_*.c
 * oracle files and no one else (the world sees sim/check.h only). */
#ifndef KVCONN_SIM_CHECK_INT_H
#define KVCONN_SIM_CHECK_INT_H

#include "sim/check.h"

/* What an actor is to the checker (looked up on every event). */
enum { CHK_ACTOR_OTHER = 0, CHK_ACTOR_SCHED, CHK_ACTOR_MAIN, CHK_ACTOR_PROXY, CHK_ACTOR_STORE, CHK_ACTOR_P2P };

typedef struct chk_actor {
    uint8_t role;   /* CHK_ACTOR_* */
    uint8_t engine; /* engine index (SCHED, MAIN) */
    uint8_t rank;   /* TP rank (MAIN) */
} chk_actor;

/* Causes that may touch a request besides the plan's fault kinds (which are
 * bits 1 .. SIM_F_KIND_COUNT - 1 of chk_req.causes). */
enum {
    CHK_C_FEWER_BLOCKS = SIM_F_KIND_COUNT, /* the plan tells D a longer prompt */
    CHK_C_TURNED_AWAY,                    /* an engine refused it on arrival */
    CHK_C_EXPIRED,                        /* P's hold ended by the expiry reap */
    CHK_C_MIXED_CONN,                     /* P and D run different connector configurations */
    CHK_C_STORE_FULL,                     /* the store evicted keys to make room */
    CHK_C_SLOW_P,                         /* D's pull waited out P's ready wait: P was busy */
    CHK_C_P2P_FULL,                       /* a P2P sender's or receiver's table was full */
    CHK_C_COUNT
};
_Static_assert(CHK_C_COUNT <= 32, "causes are one word");

#define CHK_UNBOUNDED (1u << 30)

/* Per request of the scenario, indexed by its id. */
typedef struct chk_req {
    uint32_t causes;        /* bit k: cause k touched it */
    uint32_t n_touch;       /* loads the causes that touched it may fail (CHK_UNBOUNDED: any number) */
    bool fatal;             /* one of them may end it otherwise than ok under `recompute` */
    uint32_t load_errors;   /* loads of it that failed (the most on any one rank of P or D) */
    uint8_t rank_fails[2][KV_TP_MAX]; /* ... per side ([0] P, [1] D) and rank */
    bool p_done, d_done;    /* the engine reported it ended (REQ_DONE) */
    bool p_held;            /* P holds its blocks for the send (delayed free) */
    bool p_freed;           /* ... and let them go */
    uint8_t data_ranks[2];  /* [0] P, [1] D: ranks whose first-token check ran */
    uint32_t d_status, d_output, d_phase;
    uint32_t p_engine;      /* P's engine index */
    uint64_t p_fin_ns, p_free_ns, d_end_ns;
    uint64_t p_done_ns;     /* P reported it ended (0: not yet) */
    uint64_t pull_ns;       /* D's first pull of it started (0: none) */
    uint64_t hold_deadline_ns; /* P's hold must end by then (UINT64_MAX: none yet) */
    const char *hold_why;   /* what set the deadline */
    kv_tokens p_tokens;     /* its tokens and prompt as P got them (ADD_REQ) */
    uint32_t p_prompt;
    bool produced;          /* ended ok on a P engine that saves to the store */
    uint32_t hit_expected[2];   /* [P, D]: tokens its first schedule must start from (check_hit.c): what
                                 * the store held of its prompt at arrival, or on a D that pulls
                                 * from P, all but the last token */
    uint8_t hit_from_p[2];      /* ... and that second reason applies */
    uint32_t first_computed[2]; /* [P, D]: computed tokens its first schedule there started from */
} chk_req;

#define CHK_NOT_SCHEDULED UINT32_MAX /* chk_req.first_computed before the first schedule */

#define CHK_CACHE_GROUPS 8u /* prefix groups the cache model follows (gen draws 0..3) */

/* A store key a save was handed (check_saved.c): an open-addressing set,
 * twice the store's capacity, whose slots are used when run == saved_run. */
#define CHK_SAVED_KEYS (2u * SIM_STORE_CAPACITY_MAX)
typedef struct chk_saved {
    kv_store_key key;
    uint32_t run;
    uint32_t id;    /* the first request whose save handed it */
    uint8_t engine, rank, group, pos;
} chk_saved;

/* A pull that reached a P rank and has had no final response yet
 * (check_answer.c). */
#define CHK_OPEN_PULLS_MAX 4096u
typedef struct chk_open_pull {
    uint64_t key;           /* D engine, D rank, P rank, D's batch */
    uint64_t at_ns;         /* when it reached P */
    uint32_t batch;
    uint8_t p_engine, p_rank, d_engine, d_rank;
} chk_open_pull;

struct sim_check {
    sim_check_view v;
    chk_actor actor[SIM_ACTORS_MAX];
    chk_req req[SIM_REQS_MAX];
    uint32_t held[SIM_REQS_MAX]; /* ids of requests P holds (p_held && !p_freed) */
    uint32_t n_held;
    uint64_t next_deadline_ns;   /* earliest hold deadline among held (UINT64_MAX: none) */
    uint64_t first_token_checks; /* requests x ranks whose first token was checked */
    uint64_t decode_checks;      /* decode steps checked on engines that take drafts */
    uint64_t store_evictions;    /* the store's eviction count at its last event */
    /* INV-CACHE's model (check_cache.c) */
    uint32_t cache_have[KV_ENGINES_MAX][CHK_CACHE_GROUPS]; /* longest prefix a request finished ok with */
    uint64_t cache_want[KV_ENGINES_MAX];   /* hit tokens expected of the requests that finished ok */
    uint32_t cache_first[KV_ENGINES_MAX];  /* the first of them with a hit expected */
    bool cache_crashed[KV_ENGINES_MAX];    /* the engine's process died: not judged */
    uint32_t cache_expect[SIM_REQS_MAX][2]; /* [P, D]: hit tokens expected at arrival */
    /* INV-CACHE's store half (check_saved.c) */
    chk_saved saved[CHK_SAVED_KEYS];
    uint32_t saved_run, saved_n;
    const char *saved_off;                 /* why this run is not judged (NULL: it is) */
    /* INV-OUTCOME rule 5 (check_answer.c) */
    chk_open_pull open[CHK_OPEN_PULLS_MAX];
    uint32_t n_open;
    bool open_lost;                        /* the table overflowed: not judged */
    const char *answer_off;                /* a fault that loses messages struck: not judged */
    uint32_t drops[KV_ENGINES_MAX];        /* drop_response faults aimed at each P engine */
};

static inline uint64_t chk_now(const sim_check *c) { return sim_rt_now(c->v.rt); }
static inline bool chk_violated(const sim_check *c) { return c->v.res->violated; }
static inline uint32_t chk_n_reqs(const sim_check *c) {
    return c->v.cfg->n_reqs < SIM_REQS_MAX ? c->v.cfg->n_reqs : SIM_REQS_MAX;
}
/* Engine index of a request's P / D (as the world submits it). */
static inline uint32_t chk_p_of(const sim_check *c, uint32_t id) { return c->v.cfg->req[id].p_engine % c->v.cfg->n_p; }
static inline uint32_t chk_d_of(const sim_check *c, uint32_t id) {
    return c->v.cfg->n_p + c->v.cfg->req[id].d_engine % c->v.cfg->n_d;
}
/* Does the engine's model have a recurrent (mamba-like) group? */
static inline bool chk_recurrent(const kv_engine *e) {
    for (uint32_t g = 0; g < e->cfg.n_groups; g++)
        if (e->cfg.group[g].kind == KV_GROUP_MAMBA) return true;
    return false;
}
/* The prompt an engine computes for a request that arrived with spec s, by
 * vLLM's N - 1 rule: a P whose connector includes P2P, of a model with a
 * recurrent group, prefilling for a decoder, computes all but the last token
 * (D computes that one from the state P sends). */
static inline uint32_t chk_prompt_on(const sim_check *c, uint32_t engine, const kv_req_spec *s) {
    const kv_engine *e = c->v.eng[engine];
    bool p2p = e->conn_kind == KV_CONN_P2P || e->conn_kind == KV_CONN_MULTI_P2P_STORE ||
               e->conn_kind == KV_CONN_MULTI_STORE_P2P;
    bool truncated = engine < c->v.cfg->n_p && p2p && s->params.do_remote_decode && chk_recurrent(e) && s->prompt_len > 1;
    return s->prompt_len - (truncated ? 1u : 0u);
}
/* Marks request id touched by cause k. */
void chk_touch(sim_check *c, uint32_t id, uint32_t cause);
/* Adds n to the loads its causes may fail, saturating at CHK_UNBOUNDED. */
void chk_add_fails(chk_req *q, uint32_t n);
/* Had request id ended at the proxy and on P by time t? */
bool chk_ended_by(const sim_check *c, uint32_t id, uint64_t t);
/* Cause k touches every request that had not ended by t (a cause whose
 * effect began at t) / by now. */
void chk_touch_since(sim_check *c, uint32_t cause, uint64_t t);
void chk_touch_live(sim_check *c, uint32_t cause);
/* Names of causes ("abort", "turned_away", ...). */
const char *chk_cause_name(uint32_t cause);
/* Writes the cause list of a mask into buf ("abort,net_reset" or "none"). */
void chk_causes_str(uint32_t causes, char *buf, size_t cap);

/* ---- oracle families (one file each) ---- */
/* check_pool.c */
void chk_pool_event(sim_check *c, uint32_t engine);
void chk_pool_end(sim_check *c);
void chk_pool_teardown(sim_check *c, const sim_teardown_report *t);
/* check_live.c */
void chk_live_end(sim_check *c, bool timed_out);
/* check_outcome.c */
void chk_outcome_begin(sim_check *c);
void chk_outcome_fault(sim_check *c, const sim_fault *f);
void chk_outcome_done(sim_check *c, const kv_m_req_done *d);
void chk_outcome_store(sim_check *c);
void chk_outcome_submit(sim_check *c, const kv_msg *m);
void chk_outcome_pull(sim_check *c, const kv_msg *m);
void chk_outcome_sender(sim_check *c, uint32_t engine, uint32_t rank);
void chk_outcome_load_done(sim_check *c, uint32_t engine, uint32_t rank, uint32_t id, bool failed);
void chk_outcome_end(sim_check *c);
/* check_hold.c */
/* D's pull of the request reached P while P could answer it: after P
 * finished it, before its expiry, or before and still waiting (P's ready
 * wait, the abort timeout) when P finished. */
bool chk_pull_answerable(const sim_check *c, const chk_req *q);
void chk_hold_done(sim_check *c, const kv_m_req_done *d);
void chk_hold_sched(sim_check *c, uint32_t engine);
void chk_hold_engine_down(sim_check *c, uint32_t engine);
void chk_hold_time(sim_check *c, uint64_t next_ns);
void chk_hold_end(sim_check *c);
/* check_data.c */
void chk_data_execute(sim_check *c, uint32_t engine, uint32_t rank, const kv_msg *m);
void chk_data_end(sim_check *c);
/* check_cache.c */
void chk_cache_begin(sim_check *c);
void chk_cache_arrive(sim_check *c, uint32_t engine, const kv_msg *m);
void chk_cache_done(sim_check *c, const kv_m_req_done *d);
void chk_cache_engine_down(sim_check *c, uint32_t engine);
void chk_cache_end(sim_check *c);
/* check_saved.c */
void chk_saved_begin(sim_check *c);
void chk_saved_off(sim_check *c, const char *why);
void chk_saved_job(sim_check *c, const kv_msg *m);
void chk_saved_done(sim_check *c, const kv_msg *m);
void chk_saved_arrive(sim_check *c, uint32_t engine, const kv_msg *m);
void chk_saved_req_done(sim_check *c, const kv_m_req_done *d);
void chk_saved_end(sim_check *c);
/* check_stray.c */
void chk_stray_abort(sim_check *c, uint32_t engine, const kv_msg *m);
/* check_grant.c */
void chk_grant_event(sim_check *c);
void chk_grant_end(sim_check *c);
/* check_answer.c */
void chk_answer_begin(sim_check *c);
void chk_answer_fault(sim_check *c, const sim_fault *f);
void chk_answer_event(sim_check *c, uint32_t engine, uint32_t rank, const kv_msg *m);
void chk_answer_end(sim_check *c, bool timed_out);
/* check_hit.c */
void chk_hit_arrive(sim_check *c, uint32_t engine, const kv_msg *m);
void chk_hit_execute(sim_check *c, uint32_t engine, uint32_t rank, const kv_msg *m);
void chk_hit_end(sim_check *c);

#endif
