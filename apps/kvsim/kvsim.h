/* apps/kvsim — shared pieces of the subcommands: exit codes, the common
 * option parser, verdict printing. One subcommand per cmd_*.c file, each
 * exporting a kvsim_cmd that main.c lists. */
#ifndef KVSIM_KVSIM_H
#define KVSIM_KVSIM_H

#include <stdint.h>

#include "sim/gen.h"
#include "sim/scenario.h"
#include "sim/world.h"

enum { EXIT_CLEAN = 0, EXIT_SAFETY = 1, EXIT_LIVENESS = 2, EXIT_BAD_INPUT = 3, EXIT_USAGE = 4, EXIT_SIM = 5 };
/* Findings database (replay/, cmd_db.c, cmd_replay.c): 6 not a readable
 * findings database (corrupt, not SQLite, another application's), 7 schema
 * version not understood, 8 cannot be written (read-only, locked), 9 a case
 * marked fixed violates again, 10 a case does not reproduce as recorded
 * (signature or trace hash). */
enum { EXIT_DB_CORRUPT = 6, EXIT_DB_VERSION = 7, EXIT_DB_READONLY = 8, EXIT_CAME_BACK = 9, EXIT_NOT_AS_RECORDED = 10 };
struct replay_err;
/* Prints "kvsim CMD: message" and returns the error's exit code (cmd_db.c). */
int kvsim_db_fail(const char *cmd, const struct replay_err *e);

typedef struct kvsim_cmd {
    const char *name;
    const char *help; /* synopsis line, then indented description lines */
    int (*fn)(int argc, char **argv); /* argv[1] is the command name */
} kvsim_cmd;

extern const kvsim_cmd kvsim_cmd_run, kvsim_cmd_sweep, kvsim_cmd_gen;
extern const kvsim_cmd kvsim_cmd_replay, kvsim_cmd_shrink, kvsim_cmd_db;
extern const kvsim_cmd kvsim_cmd_selftest; /* cmd_selftest.c: the harness proves itself */

typedef struct kvsim_opts {
    uint64_t seed, from, to;
    int have_seed, have_range, trace, trace_hash, json, stop, hashes;
    const char *trace_json;
    const char *file;
    uint32_t bugs, shard_i, shard_n, jobs;
    const char *workload;     /* --workload NAME (NULL: faults) */
    sim_gen_fn gen;           /* its generator */
    kv_kvmem kvmem;           /* --kvmem host|staged (core/kvmem.h); ops NULL: host */
} kvsim_opts;

/* Prints the help of one command (or of all when cmd is NULL) to stderr;
 * returns EXIT_USAGE. */
int kvsim_usage(const char *cmd);
double kvsim_wall_s(void);
int kvsim_parse_u64(const char *s, uint64_t *out);
/* 0 ok, -1 bad option (message printed), -2 --help was printed. */
int kvsim_parse_opts(int argc, char **argv, const char *cmd, kvsim_opts *o);
int kvsim_verdict_code(const sim_result *r);
void kvsim_print_cfg(const sim_world_cfg *c);
void kvsim_print_violation(const sim_result *r);
/* Loads FILE.kvs (text), a db:FILE:ID case, or any other file as a binary
 * scenario (replay_input_load); on error prints file[:line:col]: message
 * and returns -1. */
int kvsim_load_scenario(const char *path, sim_scenario *sc);
/* "--bug NAME": adds NAME's bit to *bugs; prints "kvsim CMD: unknown bug
 * switch" and returns -1 when NAME is missing or unknown. */
int kvsim_take_bug(const char *cmd, const char *name, uint32_t *bugs);

#endif
