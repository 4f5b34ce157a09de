/* apps/common/exit_codes.h — the one table of exit codes of kvsim, kvnode
 * and kvdemo. A code means the same thing in every tool; docs/simulator.md
 * ("Exit codes") prints this table, and kv_exit_print writes it for --help. */
#ifndef KVCONN_APPS_EXIT_CODES_H
#define KVCONN_APPS_EXIT_CODES_H

#include <stdio.h>

enum {
    EXIT_CLEAN = 0,     /* clean run, command done */
    EXIT_SAFETY = 1,    /* a safety invariant violated */
    EXIT_LIVENESS = 2,  /* a liveness violation: a request did not end (kvnode: requests pending,
                           stalled), blocks leaked */
    EXIT_BAD_INPUT = 3, /* bad input: a file, scenario or case that cannot be used */
    EXIT_USAGE = 4,     /* usage error: unknown option, bad value, option not for this command */
    EXIT_SIM = 5, /* resources exhausted: the simulator's, or kvnode's start-up (memory, sockets,
                     transport, device) */
    EXIT_DB_CORRUPT =
        6, /* not a readable findings database (corrupt, not SQLite, another application's) */
    EXIT_DB_VERSION = 7,       /* findings database schema version not understood */
    EXIT_DB_READONLY = 8,      /* findings database cannot be written (read-only, locked) */
    EXIT_CAME_BACK = 9,        /* a case marked fixed violates again */
    EXIT_NOT_AS_RECORDED = 10, /* a case does not reproduce as recorded (signature or trace hash) */
    EXIT_PEER_LOST = 11, /* kvnode: the peer a process depends on went away (an engine's proxy) */
};

/* "exit: 0 clean, 1 safety violation, ..." wrapped for --help. */
void kv_exit_print(FILE *out);

#endif
