/* tests/test_proxy.c — the P/D router (core/proxy.c) alone, with two
 * recording engines. Its request slots are indexed by id % reqs_max, so a
 * proxy with few slots reuses each one for many requests (as kvnode's
 * does; the simulator's proxy has a slot per request and never reuses
 * one). Each test names what a reused slot must keep apart. */
#include <criterion/criterion.h>
#include <string.h>

#include "core/msgs.h"
#include "core/proxy.h"
#include "tests/support/rig.h"

#define P_ENGINE 0u
#define D_ENGINE 1u
#define SLOTS 2u

static rig Rg;
static rig_sink P, D;
static kv_proxy *X;

static void setup(void) {
    rig_init(&Rg, NULL);
    cr_assert_eq(kv_proxy_new(&Rg.te.env, &Rg.rt, 0, SLOTS, &X), KV_OK);
    rig_sink_spawn(&Rg, &P, "P", 1);
    rig_sink_spawn(&Rg, &D, "D", 2);
    kv_m_proxy_engine up[] = {{.engine = P_ENGINE, .sched_actor = P.actor}, {.engine = D_ENGINE, .sched_actor = D.actor}};
    for (uint32_t i = 0; i < 2; i++) kv_rt_post(&Rg.rt, X->actor, KV_M_PROXY_ENGINE_UP, &up[i], sizeof up[i]);
    rig_run(&Rg, NULL, NULL);
}

static void teardown(void) {
    cr_assert_eq(Rg.te.n_violations, 0, "%s", Rg.te.n_violations ? Rg.te.v[0].detail : "");
    kv_proxy_free(X);
    rig_free(&Rg);
}

TestSuite(proxy, .init = setup, .fini = teardown, .timeout = 30);

static void submit(uint32_t id, bool sequential) {
    kv_m_proxy_submit s = {.spec = {.id = id, .prompt_len = 40, .max_tokens = 4}, .p_engine = P_ENGINE,
                           .d_engine = D_ENGINE, .sequential = sequential};
    kv_rt_post(&Rg.rt, X->actor, KV_M_PROXY_SUBMIT, &s, sizeof s);
    rig_run(&Rg, NULL, NULL);
}

/* Engine e reports request id ended with status st. */
static void done(uint32_t e, uint32_t id, kv_req_status st) {
    kv_m_req_done d = {.engine = e, .id = id, .status = st, .phase = KV_PH_DONE};
    kv_rt_post(&Rg.rt, X->actor, KV_M_REQ_DONE, &d, sizeof d);
    rig_run(&Rg, NULL, NULL);
}

/* ADD_REQs of request id an engine got. */
static uint32_t adds(const rig_sink *s, uint32_t id) {
    uint32_t n = 0;
    for (uint32_t i = 0; i < s->n; i++) {
        kv_req_spec spec;
        memcpy(&spec, s->payload[i], sizeof spec);
        n += s->kind[i] == KV_M_ADD_REQ && spec.id == id;
    }
    return n;
}

/* One request after another, four times as many as the slots: each ended
 * request's slot takes the next one, which goes to P and D and ends ok. */
Test(proxy, an_ended_request_leaves_its_slot_to_the_next) {
    const uint32_t n = 4 * SLOTS;
    for (uint32_t id = 0; id < n; id++) {
        submit(id, false);
        cr_assert_eq(adds(&P, id), 1, "request %u (slot %u, used before) never reached P", id, id % SLOTS);
        cr_assert_eq(adds(&D, id), 1, "request %u never reached D", id);
        done(P_ENGINE, id, KV_RS_FINISHED_LENGTH_CAPPED);
        done(D_ENGINE, id, KV_RS_FINISHED_LENGTH_CAPPED);
        cr_assert_eq(kv_proxy_slot(X, id)->outcome, KV_OUT_OK, "request %u", id);
    }
    cr_assert_eq(X->submitted, n);
    cr_assert_eq(X->ok, n);
}

/* A slot's request still pending keeps it: a later request for the same
 * slot is dropped, and the pending one still ends as its engines say. */
Test(proxy, a_pending_request_keeps_its_slot) {
    submit(0, false);
    submit(SLOTS, false);
    cr_assert_eq(adds(&P, SLOTS), 0, "request %u took the slot of pending request 0", SLOTS);
    cr_assert_eq(kv_proxy_slot(X, 0)->id, 0);
    done(P_ENGINE, 0, KV_RS_FINISHED_LENGTH_CAPPED);
    done(D_ENGINE, 0, KV_RS_FINISHED_LENGTH_CAPPED);
    cr_assert_eq(X->ok, 1);
    cr_assert_eq(X->submitted, 1);
}

/* Request 0 ends by D's reply while P's is still on its way; request 2
 * takes the slot and is sequential (D only after P's success). P's late
 * reply for request 0 belongs to no live request: it must neither count as
 * P's answer for request 2 (which would send it to D before P finished it)
 * nor end it. */
Test(proxy, a_late_reply_for_a_slots_previous_request_is_dropped) {
    submit(0, false);
    done(D_ENGINE, 0, KV_RS_FINISHED_LENGTH_CAPPED);
    cr_assert_eq(kv_proxy_slot(X, 0)->outcome, KV_OUT_OK);
    submit(SLOTS, true);
    cr_assert_eq(adds(&P, SLOTS), 1);
    done(P_ENGINE, 0, KV_RS_FINISHED_LENGTH_CAPPED); /* late, for request 0 */
    const kv_proxy_req *q = kv_proxy_slot(X, SLOTS);
    cr_assert_eq(q->id, SLOTS);
    cr_assert(!q->p_done, "P's reply for request 0 was taken for request %u's", SLOTS);
    cr_assert_eq(adds(&D, SLOTS), 0, "request %u went to D before P answered it", SLOTS);
    cr_assert_eq(q->outcome, KV_OUT_PENDING);
    done(D_ENGINE, 0, KV_RS_FINISHED_LENGTH_CAPPED); /* D's again: a duplicate for request 0 */
    cr_assert_eq(q->outcome, KV_OUT_PENDING, "a reply for request 0 ended request %u", SLOTS);
    done(P_ENGINE, SLOTS, KV_RS_FINISHED_LENGTH_CAPPED);
    cr_assert_eq(adds(&D, SLOTS), 1, "P's own reply sends request %u to D", SLOTS);
    done(D_ENGINE, SLOTS, KV_RS_FINISHED_LENGTH_CAPPED);
    cr_assert_eq(q->outcome, KV_OUT_OK);
    cr_assert_eq(X->ok, 2);
}

/* The ADD_REQ of request id that engine sink s got (the test fails without one). */
static kv_req_spec add_of(const rig_sink *s, uint32_t id) {
    for (uint32_t i = 0; i < s->n; i++) {
        kv_req_spec spec;
        memcpy(&spec, s->payload[i], sizeof spec);
        if (s->kind[i] == KV_M_ADD_REQ && spec.id == id) return spec;
    }
    cr_assert_fail("request %u never reached that engine", id);
    return (kv_req_spec){0};
}

/* Each request gets its own 128-bit transfer id, the same at P and D, and
 * P's params name D as the only engine that may pull it. The ids come from
 * the env's random stream: neither half follows from the request id or
 * from the previous request's id. */
Test(proxy, each_request_gets_a_fresh_transfer_id_bound_to_its_d_engine) {
    kv_xfer_id prev = {0, 0};
    for (uint32_t id = 0; id < 4 * SLOTS; id++) {
        submit(id, false);
        kv_req_spec p = add_of(&P, id), d = add_of(&D, id);
        cr_assert(p.params.has_transfer_id && d.params.has_transfer_id, "request %u", id);
        cr_assert(kv_xfer_id_eq(p.params.transfer_id, d.params.transfer_id), "request %u: P and D ids differ", id);
        cr_assert(p.params.has_decode_engine && p.params.decode_engine == D_ENGINE, "request %u: P's params name D%u",
                  id, p.params.decode_engine);
        cr_assert(!d.params.has_decode_engine, "request %u: D's params name a decode engine", id);
        kv_xfer_id t = p.params.transfer_id;
        cr_assert(t.hi != prev.hi && t.lo != prev.lo && t.hi != id && t.lo != id && t.hi != t.lo,
                  "request %u: id %016llx%016llx after %016llx%016llx", id, (unsigned long long)t.hi,
                  (unsigned long long)t.lo, (unsigned long long)prev.hi, (unsigned long long)prev.lo);
        prev = t;
        done(P_ENGINE, id, KV_RS_FINISHED_LENGTH_CAPPED);
        done(D_ENGINE, id, KV_RS_FINISHED_LENGTH_CAPPED);
    }
}

/* An engine that never registered is down: a request that names it fails at
 * once (the connection is refused) and nothing is posted for it. */
Test(proxy, a_request_to_an_engine_that_never_registered_fails) {
    for (uint32_t d = D_ENGINE + 1; d < KV_ENGINES_MAX; d += 7) {
        uint32_t id = d;
        uint64_t errors = X->errors;
        kv_m_proxy_submit s = {.spec = {.id = id, .prompt_len = 40, .max_tokens = 4}, .p_engine = P_ENGINE,
                               .d_engine = d};
        kv_rt_post(&Rg.rt, X->actor, KV_M_PROXY_SUBMIT, &s, sizeof s);
        rig_run(&Rg, NULL, NULL);
        cr_assert_eq(X->errors, errors + 1, "request %u to D%u: %llu errors", id, d, (unsigned long long)X->errors);
        cr_assert_eq(adds(&D, id), 0, "request %u to D%u reached engine %u", id, d, D_ENGINE);
        done(P_ENGINE, id, KV_RS_FINISHED_LENGTH_CAPPED); /* P's half, if it was sent, ends */
    }
}
