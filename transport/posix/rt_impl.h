/* transport/posix/rt_impl.h — internals shared by thread_rt.c and bridge.c.
 * Not an API: nothing outside transport/posix includes it. */
#ifndef KVCONN_POSIX_RT_IMPL_H
#define KVCONN_POSIX_RT_IMPL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "transport/auth/auth.h"
#include "transport/posix/thread_rt.h"

#define KVP_NONE UINT32_MAX
#define KVP_LINKS_MAX (KVP_PROCS_MAX * 2u) /* open links incl. ones still in HELLO */

typedef struct kvp_actor {
    struct kvp_rt *rt;      /* borrowed: the runtime it belongs to */
    char name[KVP_NAME_MAX];
    uint32_t id;
    kv_actor_fn fn;
    void *self;             /* borrowed: the actor's state */
    pthread_mutex_t mu;     /* guards ring, head, used, n_msgs, quit */
    pthread_cond_t cv;      /* signalled on post and on stop */
    uint8_t *ring;          /* [cap] bytes; owned */
    uint32_t cap, head, used, n_msgs;
    uint8_t *payload;       /* [KV_MSG_PAYLOAD_MAX]: the message being handled; owned */
    pthread_t thread;
    bool started;
    bool quit;
    _Atomic uint32_t in_handler; /* 1 while a handler runs: must never reach 2 */
    kvp_after_fn after;     /* NULL, or run on this thread after each handled message */
    void *after_arg;
} kvp_actor;

typedef struct kvp_remote_dir {
    uint32_t n;
    uint32_t id[KVP_ACTORS_MAX];
    char name[KVP_ACTORS_MAX][KVP_NAME_MAX];
} kvp_remote_dir;

typedef struct kvp_link {
    bool used;
    int fd;
    uint32_t state;         /* LINK_HELLO, LINK_PROOF (with a secret), LINK_UP */
    uint32_t proc;          /* the other side's process, KVP_NONE before HELLO */
    uint8_t *tx;            /* [BR_TX_CAP] ring; owned */
    uint64_t tx_head, tx_tail;
    uint8_t *rx;            /* [BR_RX_CAP]; owned */
    uint32_t rx_len, rx_off;
    bool rx_blocked;        /* a POST waits for mailbox room */
    uint64_t refused;       /* POSTs the remote filter refused on this link */
    uint64_t opened_ns;     /* for the handshake deadline */
    bool accepted;          /* from the listener (admission counts only these) */
    uint32_t peer_proc;     /* the HELLO's process, until its PROOF checks out */
    uint8_t nonce_mine[KV_AUTH_NONCE_BYTES], nonce_peer[KV_AUTH_NONCE_BYTES];
    const char *bad;        /* why the last frame was refused */
} kvp_link;

typedef struct kvp_bridge {
    pthread_mutex_t mu;     /* guards everything below but the thread */
    pthread_cond_t cv;      /* HELLO and directory arrivals */
    int listen_fd;          /* -1 when not listening */
    int wake_rd, wake_wr;   /* self-pipe that interrupts the bridge's poll(2) */
    bool running, quit;
    pthread_t thread;
    uint32_t proc_link[KVP_PROCS_MAX]; /* link index of an up link, or KVP_NONE */
    kvp_link link[KVP_LINKS_MAX];
    kvp_remote_dir dir[KVP_PROCS_MAX];
    kv_auth_key key;        /* key.set: every link runs the challenge-response */
    uint64_t deadline_ns;   /* a link not up this long after it opened is closed */
    uint64_t closed_early;  /* links closed before they were up (log rate limit) */
    bool dir_on_publish;    /* kvp_rt_set_dir_on_publish: a new link gets no DIR until kvp_rt_publish */
} kvp_bridge;

struct kvp_rt {
    kv_rt iface;
    const kv_env *env;      /* borrowed */
    kvp_rt_cfg cfg;
    pthread_mutex_t mu;     /* serialises spawn and start */
    _Atomic uint32_t n_actors; /* published after the actor's fields are set */
    kvp_rt_waiting_fn waiting; /* kvp_rt_set_waiting; NULL: quiet */
    kvp_rt_remote_fn remote_ok; /* kvp_rt_set_remote_filter; NULL: every post passes */
    void *remote_ctx;
    void *waiting_ctx;
    bool started;
    kvp_actor actor[KVP_ACTORS_MAX];
    /* timers */
    pthread_mutex_t tmu;
    pthread_cond_t tcv;
    bool tquit, trunning;
    pthread_t tthread;
    struct kvp_timer *heap; /* [timers_max]; owned */
    uint32_t n_timers;
    uint64_t tseq;
    uint8_t *big;           /* [timer_big_max * KV_MSG_PAYLOAD_MAX]; owned */
    uint32_t *big_free;     /* free slot stack; owned */
    uint32_t n_big_free;
    /* stop-the-world */
    pthread_mutex_t wmu;
    pthread_cond_t wcv;
    uint32_t parked;
    uint64_t world_gen;     /* bumps when a stop-the-world ends */
    pthread_mutex_t world_serial; /* one stop-the-world at a time */
    kvp_bridge br;
    _Atomic uint64_t c_handled, c_full, c_unreachable, c_timer_retries, c_in, c_out, c_losses, c_refused;
    _Atomic uint64_t c_auth_failed;
};

/* Copies a message into a local actor's mailbox (KV_EFULL if no room). */
kv_status kvp_mbox_push(kvp_rt *rt, uint32_t to, uint32_t kind, uint32_t src, const void *p, uint32_t len);
/* A post to another process (bridge.c). */
kv_status kvp_bridge_post(kvp_rt *rt, uint32_t to, uint32_t kind, uint32_t src, const void *p, uint32_t len);
void kvp_bridge_init(kvp_rt *rt);
void kvp_bridge_stop(kvp_rt *rt);
void kvp_bridge_deinit(kvp_rt *rt);
/* Remote directory lookup; caller holds br.mu. */
bool kvp_bridge_find_locked(kvp_rt *rt, const char *name, uint32_t *out);
/* kvp_rt_set_waiting's report, at most once a second (*next): what a wait
 * that began at t0 and ends by until waits for. Any thread, any locks. */
void kvp_rt_report_wait(kvp_rt *rt, const char *what, uint64_t t0, uint64_t until, uint64_t *next);

#endif
