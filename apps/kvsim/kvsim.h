/* apps/kvsim — shared pieces of the subcommands: exit codes, the common
 * option parser, verdict printing. One subcommand per cmd_*.c file, each
 * exporting a kvsim_cmd that main.c lists. */
#ifndef KVSIM_KVSIM_H
#define KVSIM_KVSIM_H

#include <stdint.h>
#include <stdio.h>

#include "apps/common/cli.h"
#include "apps/common/exit_codes.h"
#include "sim/gen.h"
#include "sim/scenario.h"
#include "sim/world.h"

/* Exit codes: the table kvsim shares with kvnode and kvdemo. */
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
extern const kvsim_cmd kvsim_cmd_report;   /* cmd_report.c: one HTML page of a sweep or a database */

/* Every option kvsim knows, by id; each command accepts its own subset
 * and names any other as not applying to it. --help (-h) and --version go
 * with every command. */
typedef enum kvsim_opt_id {
    KO_END = 0,
    KO_HELP = 'h',
    KO_OUT = 'o',
    KO_SEED = 256, KO_SEEDS, KO_BUG, KO_SHARD, KO_JOBS, KO_WORKLOAD, KO_KVMEM,
    KO_TRACE, KO_TRACE_JSON, KO_TRACE_HASH, KO_HASHES, KO_JSON, KO_STOP, KO_DB,
    KO_MIN, KO_FUZZ, KO_QUIET, KO_MAX_RUNS, KO_NO_BLAME, KO_NO_STORE,
    KO_RUNS, KO_MARK_FIXED, KO_REHASH, KO_ORIGINAL, KO_CORPUS,
    KO_FUZZER, KO_BUGS, KO_BUDGET_SEEDS, KO_FUZZ_SECONDS, KO_FUZZ_SEED, KO_KEEP, KO_SWEEP,
    KO_VERSION, /* last: the long-only ids KO_SEED..KO_VERSION fit a 64-bit set */
} kvsim_opt_id;

#define KVSIM_POS_MAX 64

/* getopt_long over one command's arguments: --opt value and --opt=value,
 * arguments in any order. */
typedef struct kvsim_getopt {
    const char *cmd;           /* in messages: "kvsim CMD: ..." */
    const int *accepts;        /* ids the command takes, KO_END last */
    int argc;
    char **argv;               /* argv[0]: the command's name */
    const char *arg;           /* the value of the option just returned */
    const char *name;          /* its name: "--seed", "-o" */
    int n_pos;                 /* after KO_END: the positional arguments */
    const char *pos[KVSIM_POS_MAX];
} kvsim_getopt;

/* argv[1] is the command: options from argv[2]. */
void kvsim_getopt_init(kvsim_getopt *g, const char *cmd, const int *accepts, int argc, char **argv);
/* The next option's id; KO_END when none is left (g->pos then holds the
 * other arguments); -1 after printing a usage error naming the option;
 * -2 after printing --help (to stdout) or --version. */
int kvsim_getopt_next(kvsim_getopt *g);
/* The option's value as a number in lo..hi; -1 after printing
 * "kvsim CMD: --NAME: 'VALUE' is not a number in lo..hi". */
int kvsim_opt_num(const kvsim_getopt *g, uint64_t lo, uint64_t hi, uint64_t *out);
/* Prints "kvsim CMD: unexpected argument 'X' (try kvsim CMD --help)" for
 * the first positional argument past max; -1 then, else 0. */
int kvsim_max_pos(const kvsim_getopt *g, int max);
/* Whether the command's accepts list has id. */
int kvsim_accepts(const int *accepts, int id);
/* "--seed" for KO_SEED. */
const char *kvsim_opt_name(int id);

typedef struct kvsim_opts {
    uint64_t seed, from, to;
    int have_seed, have_range, trace, trace_hash, json, stop, hashes;
    const char *trace_json;
    const char *file;
    const char *db;           /* sweep --db FILE */
    uint32_t bugs, shard_i, shard_n, jobs;
    const char *workload;     /* --workload NAME (NULL: faults) */
    sim_gen_fn gen;           /* its generator */
    kv_kvmem kvmem;           /* --kvmem host|staged (core/kvmem.h); ops NULL: host */
    int staged;               /* --kvmem staged given */
} kvsim_opts;

/* The program as invoked (argv[0]), for the reproduce lines. */
extern const char *kvsim_prog;
/* Prints the help of one command (or of all when cmd is NULL) to out. */
void kvsim_help(const char *cmd, FILE *out);
/* Prints the help of cmd to stderr after a usage error; returns EXIT_USAGE. */
int kvsim_usage(const char *cmd);
double kvsim_wall_s(void);
/* A strict decimal number (cli.h: kv_cli_u64 over 0..UINT64_MAX). */
int kvsim_parse_u64(const char *s, uint64_t *out);
/* run, sweep, gen: the options in accepts, at most max_pos positional
 * arguments (o->file the first). 0 ok, -1 usage error (message printed),
 * -2 --help or --version was printed. */
int kvsim_parse_opts(int argc, char **argv, const char *cmd, const int *accepts, int max_pos, kvsim_opts *o);
/* Adds "--bug NAME" to c for each switch in bugs. */
void kvsim_cmdline_bugs(kv_cmdline *c, uint32_t bugs);
/* Prints "reproduce: COMMAND" to stdout. */
void kvsim_print_reproduce(const kv_cmdline *c);

/* A "# expect-bug NAME INVARIANT" line of a .kvs file (the corpus form:
 * 'bugs none', the switch that must make it violate INVARIANT). */
typedef struct kvsim_expect {
    uint32_t bug;
    char inv[32];
    unsigned line;
} kvsim_expect;
/* The expect-bug lines of path when it is a readable .kvs (at most max;
 * lines naming a switch this build does not know are skipped); 0 else. */
int kvsim_read_expect_bugs(const char *path, kvsim_expect *out, int max);
/* Whether path (not a .kvs, not db:) is a fuzz_scenario input: no binary
 * scenario header ("KVS" and a version), or a fuzzer's artifact name
 * (crash-*, leak-*, timeout-*, oom-*, slow-unit-*, AFL++ id:*). */
int kvsim_is_fuzz_input(const char *path);
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
