/* sim/check_answer.c — INV-OUTCOME, rule 5: P answers every pull it took.
 *
 * Rule: every pull (XFER_META) that reached a P rank's sender gets a final
 * response (FINISH or ERROR) that reaches the D rank that sent it, except as
 * many per P rank as the drop_response faults aimed at its engine armed (each
 * arms every rank of the engine to drop its next response). A run in which a
 * fault that loses messages or processes struck (peer_crash, peer_hang,
 * net_reset, net_delay), or that ran past its live bound, is not judged.
 *
 * Why: a response P drops makes D wait out its receive timeout and fail the
 * pull's requests, which INV-OUTCOME then excuses as touched by the fault.
 * That excuse covers every live request of the engine, so a sender that
 * dropped every later response once a fault armed it would be excused too;
 * this count holds the losses to the drops armed.
 *
 * How: the open pulls, keyed by (D engine, D rank, D's batch, P rank), are
 * noted as a pull reaches a P2P actor of a P engine and crossed off as its
 * final response reaches the P2P actor of that D rank; both are read from
 * the frame header and the first fields of the message (include/kvconn/
 * wire.h), not decoded. What is left at the end was never answered. */
#include "sim/check_int.h"

#include <string.h>

#include "kvconn/wire.h"

static uint32_t rd32(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }

static uint64_t key_of(uint32_t d_engine, uint32_t d_rank, uint32_t batch, uint32_t p_rank) {
    return (uint64_t)(d_engine & 0xffu) << 56 | (uint64_t)(d_rank & 0xffu) << 48 | (uint64_t)(p_rank & 0xffu) << 40 |
           batch;
}

void chk_answer_begin(sim_check *c) {
    c->n_open = 0;
    c->open_lost = false;
    c->answer_off = NULL;
    memset(c->drops, 0, sizeof c->drops);
}

void chk_answer_fault(sim_check *c, const sim_fault *f) {
    uint32_t n_p = c->v.cfg->n_p;
    if (f->kind == SIM_F_SENDER_DROP_RESP && n_p && c->drops[f->target % n_p] < UINT32_MAX) c->drops[f->target % n_p]++;
    if (f->kind == SIM_F_PEER_CRASH) c->answer_off = "peer_crash";
    if (f->kind == SIM_F_PEER_HANG) c->answer_off = "peer_hang";
    if (f->kind == SIM_F_NET_RESET) c->answer_off = "net_reset";
    if (f->kind == SIM_F_NET_DELAY) c->answer_off = "net_delay";
}

/* A control message reached the P2P actor of (engine, rank). */
void chk_answer_event(sim_check *c, uint32_t engine, uint32_t rank, const kv_msg *m) {
    if (m->kind != KVT_MSG_EVENT || m->len < sizeof(kvt_event)) return;
    const kvt_event *ev = m->payload;
    if (ev->kind != KVT_EV_CTRL || ev->len < KV_WIRE_HDR_BYTES + 12u || m->len < sizeof *ev + ev->len) return;
    const uint8_t *b = (const uint8_t *)m->payload + sizeof *ev;
    if (b[0] != 'K' || b[1] != 'V' || b[2] != KV_WIRE_VERSION) return;
    const uint8_t *f = b + KV_WIRE_HDR_BYTES;
    if (b[3] == KV_WIRE_XFER_META && engine < c->v.cfg->n_p && ev->len >= KV_WIRE_HDR_BYTES + 16u) {
        /* d_engine, d_tp_size, d_tp_rank, batch */
        if (c->n_open == CHK_OPEN_PULLS_MAX) {
            c->open_lost = true;
            return;
        }
        c->open[c->n_open++] = (chk_open_pull){.key = key_of(rd32(f), rd32(f + 8), rd32(f + 12), rank),
                                               .p_engine = (uint8_t)engine, .p_rank = (uint8_t)rank,
                                               .batch = rd32(f + 12), .d_engine = (uint8_t)rd32(f),
                                               .d_rank = (uint8_t)rd32(f + 8), .at_ns = chk_now(c)};
    } else if (b[3] == KV_WIRE_XFER_RESP && engine >= c->v.cfg->n_p) {
        /* status, batch, p_tp_rank */
        if (rd32(f) == KV_XFER_CONTINUE) return;
        uint64_t k = key_of(engine, rank, rd32(f + 4), rd32(f + 8));
        for (uint32_t i = 0; i < c->n_open; i++)
            if (c->open[i].key == k) {
                c->open[i] = c->open[--c->n_open];
                return;
            }
    }
}

void chk_answer_end(sim_check *c, bool timed_out) {
    if (timed_out || c->answer_off || c->open_lost) return;
    uint32_t unanswered[KV_ENGINES_MAX][KV_TP_MAX] = {{0}};
    for (uint32_t i = 0; i < c->n_open; i++) {
        const chk_open_pull *o = &c->open[i];
        if (o->p_engine >= KV_ENGINES_MAX || o->p_rank >= KV_TP_MAX) continue;
        if (++unanswered[o->p_engine][o->p_rank] <= c->drops[o->p_engine]) continue;
        kv_violate(c->v.env, KV_INV_OUTCOME, o->p_engine, KV_REQ_NONE,
                   "P engine %u rank %u never answered %u pulls; the drop_response faults aimed at it armed %u "
                   "drops (the last unanswered: batch %u of D engine %u rank %u, taken at %llu ns)",
                   o->p_engine, o->p_rank, unanswered[o->p_engine][o->p_rank], c->drops[o->p_engine], o->batch,
                   o->d_engine, o->d_rank, (unsigned long long)o->at_ns);
        return;
    }
    for (uint32_t e = 0; e < c->v.cfg->n_p && e < KV_ENGINES_MAX; e++)
        c->v.res->armed[KV_INV_OUTCOME] += c->v.eng[e] ? c->v.eng[e]->cfg.tp : 0u;
}
