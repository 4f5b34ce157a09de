/* kvconn/limits.h — every bound in one place (TigerBeetle style: all memory is
 * sized at start-up from these numbers; nothing grows on the hot path). */
#ifndef KVCONN_LIMITS_H
#define KVCONN_LIMITS_H

#define KV_GROUPS_MAX 5u          /* KV cache groups per model (DSv4 has 5) */
#define KV_REQ_BLOCKS_MAX 64u     /* blocks one request may hold in one group */
#define KV_ENGINE_REQS_MAX 64u    /* live requests in one engine */
#define KV_TP_MAX 4u              /* tensor-parallel workers per engine */
#define KV_ENGINES_MAX 8u         /* engines in one world (P + D) */
#define KV_POOL_BLOCKS_MAX 4096u  /* blocks in one group's pool */
#define KV_BLOCK_BYTES_MAX 4096u  /* bytes of KV one block holds on one worker */
#define KV_MSG_PAYLOAD_MAX 65792u /* largest message payload: a transport event + KV_WIRE_MAX bytes */
#define KV_WIRE_MAX 65536u        /* largest encoded control message */
#define KV_PULL_REQS_MAX 32u      /* requests in one D->P pull message */
#define KV_ERR_MSG_MAX 96u        /* bytes of an ERROR response's message */
#define KV_ADDR_MAX 48u           /* bytes of a transport address string */
#define KV_RECV_BATCHES_MAX 32u   /* pulls one D rank's receiver has open at once */
/* Regions one node registers at most: its KV groups, plus (RDMA, where a
 * grant is a registration the peer's table holds) one grant per group for
 * every open pull of one P peer, plus two spare. */
#define KV_NODE_REGIONS_MAX (KV_GROUPS_MAX * (1u + KV_RECV_BATCHES_MAX) + 2u)

/* Write grants one node holds at most: per open pull, one per group and
 * paired P rank (core/p2p_receiver.c). */
#define KV_NODE_GRANTS_MAX (KV_GROUPS_MAX * KV_RECV_BATCHES_MAX * KV_TP_MAX)

#endif
