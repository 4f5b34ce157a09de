/* tests/assert_shims/shim_p2p_receiver.c — core/p2p_receiver.c with its
 * private struct in reach (shims.h), and its check of the frames it encodes
 * in the test's hand. */
#include <stdbool.h>
#include <stddef.h>

#include "kvconn/wire.h"

/* The receiver checks each pull it encodes (kv_wire_encoded_ok, C1-C3);
 * compiled here, that check goes through this function, which a test can
 * make say "the frame is not what was encoded" (a codec bug: the encoder
 * accepted the pull, and its frame reads back as something else). */
static bool codec_lies;
static bool encoded_ok_unless_told(const kv_wire_msg *m, const uint8_t *buf, size_t len) {
    return !codec_lies && kv_wire_encoded_ok(m, buf, len);
}
#define kv_wire_encoded_ok encoded_ok_unless_told
#include "core/p2p_receiver.c"
#undef kv_wire_encoded_ok

#include "tests/assert_shims/shims.h"

/* A request slot used but neither staged nor in a batch. */
void shim_p2p_receiver_orphan_request(kv_p2p_receiver *r) {
    for (uint32_t i = r->n_req; i-- > 0;)
        if (!r->req[i].used) {
            memset(&r->req[i], 0, sizeof r->req[i]);
            r->req[i].used = true;
            r->req[i].batch = UINT32_MAX;
            return;
        }
}

/* The receiver's own address loses its terminator: the next pull it
 * encodes is out of the codec's bounds. */
void shim_p2p_receiver_unterminated_addr(kv_p2p_receiver *r) { memset(r->addr.s, 'x', sizeof r->addr.s); }

void shim_p2p_receiver_codec_lies(bool on) { codec_lies = on; }

uint32_t shim_p2p_receiver_batches(const kv_p2p_receiver *r) {
    uint32_t n = 0;
    for (uint32_t i = 0; i < RCV_BATCHES_MAX; i++) n += r->batch[i].used;
    return n;
}
