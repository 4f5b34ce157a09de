/* core/proxy.h — the P/D router (vLLM's disaggregated proxy) as an actor.
 *
 * For each client request it sends P the prompt with max_tokens=1 and
 * do_remote_decode, and D the prompt with do_remote_prefill, the transfer
 * id, P's engine id and bootstrap address. D is contacted either right away
 * (concurrent: D's pull may reach P before P has the request, exercising
 * placeholders) or after P answers (sequential). A client abort goes to
 * every engine that has the request. When an engine's process dies, every
 * request it had is done there with an error (as an HTTP proxy sees its
 * connection to the engine break); a request sent to an engine that is
 * down fails at once. Owner: the proxy actor. */
#ifndef KVCONN_CORE_PROXY_H
#define KVCONN_CORE_PROXY_H

#include "core/engine.h"

#define KV_PROXY_REQS_MAX 4096u /* largest request table a proxy may have */

typedef struct kv_m_proxy_submit {
    kv_req_spec spec;        /* prompt, decode length, tokens */
    uint32_t p_engine, d_engine;
    uint8_t sequential;      /* 1: contact D after P answers */
    uint32_t d_extra_tokens; /* fault: D is told a longer prompt than P */
} kv_m_proxy_submit;

/* An engine's process died (the proxy's connection to it broke) or a new
 * process took its place: sched_actor is the new scheduler actor. */
typedef struct kv_m_proxy_engine {
    uint32_t engine;
    uint32_t sched_actor; /* UP only */
} kv_m_proxy_engine;

typedef enum kv_proxy_outcome {
    KV_OUT_PENDING = 0, KV_OUT_OK, KV_OUT_ERROR, KV_OUT_ABORTED
} kv_proxy_outcome;

typedef struct kv_proxy_req {
    uint32_t id;
    uint8_t used, sent_p, sent_d, p_done, d_done, aborted, sequential;
    uint8_t outcome;         /* kv_proxy_outcome */
    uint32_t p_engine, d_engine;
    kv_xfer_id tid;          /* drawn at submit (kv_random_u64), the same to P and D */
    uint32_t p_status, d_status;
    uint64_t submit_ns, done_ns;
    kv_m_proxy_submit sub;
} kv_proxy_req;

typedef struct kv_proxy {
    kv_owner owner;
    const kv_env *env;
    kv_rt *rt;
    uint32_t actor;
    uint32_t engine_actor[KV_ENGINES_MAX]; /* scheduler actor per engine index */
    kvt_addr bootstrap_addr;
    kv_proxy_req *req;       /* [reqs_max], owned (env), indexed by id % reqs_max */
    uint32_t reqs_max;       /* requests in flight at once */
    uint64_t submitted, ok, errors, aborted;
} kv_proxy;

/* reqs_max (1..KV_PROXY_REQS_MAX): request slots, indexed by id % reqs_max. */
kv_status kv_proxy_new(const kv_env *env, kv_rt *rt, uint32_t node, uint32_t reqs_max, kv_proxy **out);
/* The slot of request id (whatever it holds now). */
const kv_proxy_req *kv_proxy_slot(const kv_proxy *p, uint32_t id);
void kv_proxy_free(kv_proxy *p);

#endif
