/* tests/assert_shims/shims.h — test_assert's reach into the private state
 * of the core's opaque actors. Each shim_<module>.c compiles core/<module>.c
 * into the suite (as fuzz/cmp/wire_cmp.c does for the codec: the object
 * defines every symbol of the module, so the linker never takes the
 * library's copy) and adds functions that break one invariant of that
 * module's object, the way a bug would, from the test itself, or that run
 * one of its private functions on input no correct run gives it. No
 * production code changes for them. Linked into test_assert only
 * (CMakeLists.txt). */
#ifndef KVCONN_TESTS_ASSERT_SHIMS_H
#define KVCONN_TESTS_ASSERT_SHIMS_H

#include <stdbool.h>

#include "core/engine.h"
#include "core/p2p.h"
#include "core/store.h"
#include "core/worker.h"
#include "kvconn/wire.h"

/* shim_p2p_worker.c (a rank whose connector is p2p) */
kv_p2p_sender *shim_p2p_sender(const kv_worker *w);
kv_p2p_sender *shim_p2p_sender_of(const kv_conn_worker *c); /* a p2p connector (or a MultiConnector's child) */
kv_p2p_receiver *shim_p2p_receiver(const kv_worker *w);
void shim_p2p_worker_forget_sender_actor(kv_worker *w);      /* K1 */
/* shim_p2p_sender.c */
void shim_p2p_sender_leak_request_slot(kv_p2p_sender *s);    /* S5 */
/* the checker's "a pull could be refused" probe on a fresh sender of an
 * engine of reqs_max requests, pull slot i taken for bit i of pulls_used */
bool shim_p2p_sender_saturated_as_built(uint32_t reqs_max, uint32_t pulls_used);
/* D's side of the control channel, forged: the sender hears len bytes from
 * peer as its actor does (then its invariants and walk run); *reply is the
 * response it encoded for them, false when it encoded none */
bool shim_p2p_sender_hear(kv_p2p_sender *s, kvt_peer peer, const uint8_t *bytes, uint32_t len,
                          kv_wire_xfer_resp *reply);
bool shim_p2p_sender_last_response(const kv_p2p_sender *s, kv_wire_xfer_resp *out); /* false: none yet */
bool shim_p2p_sender_last_pull(const kv_p2p_sender *s, kv_wire_xfer_meta *out);     /* false: none yet */
uint32_t shim_p2p_sender_request_slots_used(const kv_p2p_sender *s);
/* every free pull slot taken (by pulls of no requests), and given back */
uint32_t shim_p2p_sender_take_pull_slots(kv_p2p_sender *s);
void shim_p2p_sender_give_back_pull_slots(kv_p2p_sender *s, uint32_t taken);
/* cfg.peer_share_pct's rule on a sender as built for reqs_max requests:
 * `mine` pulls of reqs_each requests held by one peer, `others` by another;
 * is a pull of n_reqs more from the first over its share of pct percent? */
bool shim_p2p_sender_over_share_as_built(uint32_t reqs_max, uint32_t pct, uint32_t mine, uint32_t reqs_each,
                                         uint32_t others, uint32_t n_reqs);
void shim_p2p_sender_set_share(kv_p2p_sender *s, uint32_t pct); /* the worker's cfg.peer_share_pct */
uint32_t shim_p2p_sender_take_pull_slots_of(kv_p2p_sender *s, kvt_peer peer, uint32_t n); /* give back as above */
/* The sender's link to the endpoint at a (kvt_connect: the peer a pull from that endpoint comes from). */
kvt_peer shim_p2p_sender_link_to(kv_p2p_sender *s, const kvt_addr *a);
/* Requests refused to another D engine than their transfer id's; pulls refused for their link. */
uint64_t shim_p2p_sender_foreign_refused(const kv_p2p_sender *s);
uint64_t shim_p2p_sender_peer_refused(const kv_p2p_sender *s);
/* shim_p2p_receiver.c */
void shim_p2p_receiver_orphan_request(kv_p2p_receiver *r);   /* R4 */
void shim_p2p_receiver_unterminated_addr(kv_p2p_receiver *r);/* C1-C3: our own pull cannot encode */
/* on: the receiver's check of each pull it encoded fails (C3: a codec bug) */
void shim_p2p_receiver_codec_lies(bool on);
uint32_t shim_p2p_receiver_batches(const kv_p2p_receiver *r); /* in use */
/* shim_p2p_sched.c (an engine whose connector is p2p) */
void shim_p2p_sched_window_on_full_group(kv_engine *e);      /* Q2 */
bool shim_p2p_sched_walk(kv_engine *e, const kv_p2p_meta *m); /* Q3-Q4 on m */
/* shim_store_sched.c (an engine whose connector is store) */
bool shim_store_sched_misalign_tracker(kv_engine *e, uint32_t id); /* T4 */
/* shim_store_worker.c (a rank whose connector is store) */
kv_store_sender *shim_store_sender(const kv_worker *w);
kv_store_receiver *shim_store_receiver(const kv_worker *w);
kv_store_lookup *shim_store_lookup(const kv_worker *w);      /* rank 0 */
bool shim_store_worker_duplicate_pin(kv_worker *w);          /* V2 */
uint32_t shim_store_worker_pins(const kv_worker *w);
/* shim_store_sender.c, shim_store_receiver.c, shim_store_lookup.c: busy
 * flipped, so it no longer matches the channel's operation in flight */
void shim_store_sender_flip_busy(kv_store_sender *s);        /* X2 */
void shim_store_receiver_flip_busy(kv_store_receiver *r);    /* Y2 */
void shim_store_lookup_flip_busy(kv_store_lookup *l);        /* L2 */
/* shim_multi_sched.c (an engine whose connector is a MultiConnector) */
bool shim_multi_sched_choice_without_hit(kv_engine *e);      /* M3 */
/* shim_worker.c: the forward pass of one step */
void shim_worker_forward(kv_worker *w, const kv_step *st);
/* shim_engine.c: n ranks' results merged into the step's aggregate (put
 * back after): is request id then failed? */
bool shim_engine_merge_fails(kv_engine *e, const kv_m_step_result *res, uint32_t n, uint32_t id);
bool shim_engine_delete(kv_engine *e, uint32_t id); /* the request's slot freed, queued or not */
/* shim_multi_worker.c */
void shim_multi_worker_duplicate_hold(kv_worker *w);         /* N2 */

#endif
