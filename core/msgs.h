/* core/msgs.h — message kinds and payloads exchanged by the core's actors.
 *
 * Payloads are plain structs copied into mailboxes (actor.h). Messages that
 * cross a node boundary in production (proxy <-> engine, bootstrap) are
 * small and fixed-size; bulk connector traffic crosses the transport as wire
 * messages (kvconn/wire.h). */
#ifndef KVCONN_CORE_MSGS_H
#define KVCONN_CORE_MSGS_H

#include <stdbool.h>
#include <stdint.h>

#include "core/kv_data.h"
#include "kvconn/connector.h"
#include "kvconn/types.h"
#include "kvconn/wire.h"

enum kv_msg_kind {
    /* proxy -> engine scheduler */
    KV_M_ADD_REQ = 1,
    KV_M_ABORT,
    /* engine scheduler -> itself */
    KV_M_TICK,
    /* worker main -> engine scheduler */
    KV_M_STEP_RESULT,
    /* engine scheduler -> worker main */
    KV_M_EXECUTE,
    /* engine scheduler -> proxy */
    KV_M_REQ_DONE,
    /* world -> proxy */
    KV_M_PROXY_SUBMIT,
    KV_M_PROXY_ABORT,
    /* bootstrap service */
    KV_M_BOOT_REG,
    KV_M_BOOT_QUERY,
    KV_M_BOOT_REPLY,
    /* P2P connector internals */
    KV_M_P2P_RECV_START,   /* worker main -> receiver: one PullReqMeta */
    KV_M_P2P_RECV_FLUSH,   /* worker main -> receiver: end of this step's pulls */
    KV_M_P2P_RECV_TIMEOUT, /* receiver -> itself (RCVTIMEO) */
    KV_M_P2P_RECV_DONE,    /* receiver -> worker main: finished_recving (+ failure) */
    KV_M_P2P_SEND_RECORD,  /* worker main -> sender: reqs_to_send entry */
    KV_M_P2P_NOT_PROCESSED,/* worker main -> sender: reqs_not_processed entry */
    KV_M_P2P_SEND_TIMEOUT, /* sender -> itself (ready wait) */
    KV_M_P2P_REAP,         /* sender -> itself (abort-request expiry) */
    KV_M_P2P_SEND_DONE,    /* sender -> worker main: finished_sending */
    /* world -> any actor: arm a fault */
    KV_M_FAULT,
    /* worker main -> engine scheduler: the connector has news; step again */
    KV_M_WAKE,
    /* store connector (core/store.h) */
    KV_M_STORE_LOOKUP,       /* scheduler -> lookup actor (rank 0) */
    KV_M_STORE_LOOKUP_REPLY, /* lookup actor -> scheduler */
    KV_M_STORE_LOOKUP_TIMEOUT,
    KV_M_STORE_SAVE,         /* worker main -> send actor: one save job */
    KV_M_STORE_SAVE_DONE,    /* send actor -> worker main: pin released */
    KV_M_STORE_SAVE_TIMEOUT,
    KV_M_STORE_LOAD,         /* worker main -> receive actor: one load job */
    KV_M_STORE_LOAD_DONE,    /* receive actor -> worker main */
    KV_M_STORE_LOAD_TIMEOUT,
    /* world -> proxy: an engine's process died / came back (core/proxy.h) */
    KV_M_PROXY_ENGINE_DOWN,
    KV_M_PROXY_ENGINE_UP,
};

/* Whether a message of `kind` with a payload of `len` bytes may arrive from
 * another process (the production bridge): only the kinds that cross a node
 * boundary (client requests and aborts, REQ_DONE, the bootstrap service's),
 * each at exactly its payload's size. Everything else is the core's own
 * traffic inside one process and is refused from outside, whatever it says.
 * The bridge applies it before a post reaches a mailbox, so no handler reads
 * a payload shorter than its struct. */
bool kv_msg_remote_ok(uint32_t kind, uint32_t len);

/* "ADD_REQ", "P2P_RECV_DONE", "TRANSPORT_EVENT"...; never NULL. */
const char *kv_msg_kind_name(uint32_t kind);

/* A request as the client submits it. */
typedef struct kv_req_spec {
    uint32_t id;
    uint32_t prompt_len;
    uint32_t max_tokens;
    kv_tokens tokens;
    kv_xfer_params params;
} kv_req_spec;

typedef struct kv_m_abort { uint32_t id; } kv_m_abort;

typedef struct kv_m_req_done {
    uint32_t engine;
    uint32_t id;
    uint32_t status;     /* kv_req_status */
    uint32_t num_output;
    uint32_t phase;      /* kv_phase the request was in when it ended */
    uint32_t refused;    /* 1: turned away on arrival, never admitted */
} kv_m_req_done;

typedef struct kv_m_boot_query {
    uint32_t engine;
    uint32_t reply_to; /* actor */
} kv_m_boot_query;

/* Faults an actor can be armed with (DESIGN.md section 6). */
typedef enum kv_fault_kind {
    KV_F_SENDER_EXCEPTION = 1, /* next XFER_META handler raises: whole ERROR */
    KV_F_SENDER_ERR_REQ,       /* next response lists its requests in err_reqs */
    KV_F_SENDER_DROP_RESP,     /* next response is lost (D times out) */
    KV_F_BOOT_DOWN,            /* bootstrap answers "unknown" for arg ms */
    KV_F_STORE_PUT_FAIL,       /* the store fails the next arg+1 puts */
    KV_F_STORE_GET_FAIL,       /* the store fails the next arg+1 gets */
    KV_F_STORE_EVICT,          /* the store drops its arg+1 oldest keys */
    KV_F_STORE_PRESSURE,       /* the next arg+1 puts find no room (NO_AVAILABLE_HANDLE) */
    KV_F_STORE_EXISTS_FAIL,    /* the store fails the next arg+1 EXIST calls (batch_is_exist) */
} kv_fault_kind;

typedef struct kv_m_fault {
    uint32_t kind; /* kv_fault_kind */
    uint32_t arg;
} kv_m_fault;

#endif
