/* sim/check_grant.c — INV-GRANT: no WRITE reaches a node's memory but
 * through a live grant of that node, presented with the grant's key, by the
 * peer the grant was made to, inside the grant's window.
 *
 * The simulated network checks every WRITE entry at delivery the way the
 * production transports do (sim/sim_net.c; include/kvconn/transport.h,
 * "write capabilities") and refuses what fails, so a bad WRITE never lands:
 * the check here is that the core never makes one. D's receiver
 * (core/p2p_receiver.c) grants each P rank a window per pull and group and
 * sends the keys in the pull; P's sender (core/p2p_sender.c) writes D's
 * blocks through them.
 *  - A refusal through a grant that is no longer live (revoked: the pull was
 *    released, or its P rank's task answered, while the batch was on its
 *    way; or its node crashed since) is a late write: the mechanism at
 *    work, counted by the network (grant_refused) and not judged.
 *  - A wrong key, a grant used by a peer it was not made to, or an entry
 *    outside the grant's window is something an honest sender never does:
 *    P wrote where D did not let it (on a transport without grants, into
 *    another request's blocks). The network keeps the first of a run; it is
 *    reported at the first event after its delivery (the completion that
 *    tells its sender), or at the end of the run.
 * Armed: every WRITE entry the grant check judged (landed or refused). */
#include "sim/check_int.h"

#include "transport/regions.h"

/* The engine whose process a node is (UINT32_MAX: the proxy, the store). */
static uint32_t engine_of_node(const sim_check *c, uint32_t node) {
    for (uint32_t i = 0; i < c->v.n_eng; i++) {
        const kv_engine *e = c->v.eng[i];
        if (node > e->cfg.node && node <= e->cfg.node + e->cfg.tp) return i;
    }
    return UINT32_MAX;
}

static void armed(sim_check *c) {
    sim_net_stats s;
    sim_net_stats_get(c->v.net, &s);
    c->v.res->armed[KV_INV_GRANT] += s.writes + s.grant_refused + s.grant_violations;
}

void chk_grant_event(sim_check *c) {
    sim_net_grant_violation g;
    if (!c->v.net || chk_violated(c) || !sim_net_grant_violation_get(c->v.net, &g)) return;
    armed(c);
    uint32_t src = engine_of_node(c, g.src), dst = engine_of_node(c, g.dst);
    kv_violate(c->v.env, KV_INV_GRANT, src, UINT32_MAX,
               "a WRITE from node %u (engine %d) to node %u (engine %d) was refused: %s (grant %u, %llu bytes at "
               "offset %llu of its region, delivered at %llu us)",
               g.src, src == UINT32_MAX ? -1 : (int)src, g.dst, dst == UINT32_MAX ? -1 : (int)dst,
               kvt_grant_verdict_str((kvt_grant_verdict)g.verdict), g.grant, (unsigned long long)g.len,
               (unsigned long long)g.off, (unsigned long long)(g.at_ns / 1000u));
}

void chk_grant_end(sim_check *c) {
    if (!c->v.net) return;
    chk_grant_event(c);
    if (!chk_violated(c)) armed(c);
}
