/* kvconn/status.h — the one status enum of the project.
 *
 * KV_OK is zero, every error is negative (libuv style). A function returns a
 * kv_status and hands values back through out_* parameters; a status and a
 * value are never mixed in one return. */
#ifndef KVCONN_STATUS_H
#define KVCONN_STATUS_H

typedef enum kv_status {
    KV_OK = 0,
    KV_EINVAL = -1,    /* argument out of contract */
    KV_ENOMEM = -2,    /* a bounded pool or arena is exhausted */
    KV_EFULL = -3,     /* a bounded queue or mailbox is full */
    KV_ENOENT = -4,    /* no such request, region, peer or key */
    KV_EEXIST = -5,    /* already registered / already present */
    KV_ERANGE = -6,    /* (region, offset, len) outside a registered region */
    KV_EPROTO = -7,    /* malformed or unexpected wire message */
    KV_EVERSION = -8,  /* wire or format version not understood */
    KV_ETIMEDOUT = -9, /* a deadline passed */
    KV_ECANCELED = -10,/* cancelled before completion */
    KV_ECONNRESET = -11, /* peer lost */
    KV_EIO = -12,      /* provider / transfer engine error */
    KV_ESTATE = -13,   /* transition not allowed from the current state */
    KV_EAGAIN = -14,   /* nothing to do now; try later */
    KV_ENOSYS = -15,   /* capability not provided by this backend */
} kv_status;

/* Static, never NULL: names the code ("KV_ERANGE") for any value. */
const char *kv_status_str(kv_status s);

#endif
