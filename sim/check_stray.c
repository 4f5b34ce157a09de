/* sim/check_stray.c — INV-STRAY, the proxy's half: an engine hears an
 * abort from the proxy only for a request the proxy sent it.
 *
 * The core reports its own strays (a completion for nothing outstanding).
 * This is the proxy's side of the same rule: the proxy sends a request's
 * ABORT to each engine it sent the request to and that has not reported it
 * done, never to one it did not send it to (a sequential request aborted
 * before P finished was never sent to D). The checker reads the proxy's
 * table (its sent_p / sent_d flags, set when the ADD went out and never
 * cleared) when an ABORT from the proxy's actor reaches an engine's
 * scheduler, so a lost ADD to a dead engine still counts as sent. */
#include "sim/check_int.h"

#include <string.h>

#include "core/msgs.h"

void chk_stray_abort(sim_check *c, uint32_t engine, const kv_msg *m) {
    kv_m_abort a;
    if (m->src != c->v.proxy->actor || m->len < sizeof a) return;
    memcpy(&a, m->payload, sizeof a);
    if (a.id >= chk_n_reqs(c)) return;
    const kv_proxy_req *q = kv_proxy_slot(c->v.proxy, a.id);
    c->v.res->armed[KV_INV_STRAY]++;
    bool sent = q->used && q->id == a.id &&
                ((engine == q->p_engine && q->sent_p) || (engine == q->d_engine && q->sent_d));
    if (sent) return;
    kv_violate(c->v.env, KV_INV_STRAY, engine, a.id,
               "the proxy sent engine %u an abort of request %u, which it never sent that engine (P %u%s, D %u%s)",
               engine, a.id, q->p_engine, q->sent_p ? " sent" : " not sent", q->d_engine,
               q->sent_d ? " sent" : " not sent");
}
