/* apps/kvsim — option parsing and verdict printing shared by the subcommands. */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "apps/kvsim/kvsim.h"
#include "replay/input.h"
#include "sim/gen.h"
#include "sim/scenario.h"

double kvsim_wall_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int kvsim_parse_u64(const char *s, uint64_t *out) { return kv_cli_u64(s, 0, UINT64_MAX, out); }

/* ---- options ------------------------------------------------------------------------------ */

static const struct option all_opts[] = {
    {"help", no_argument, NULL, KO_HELP},
    {"version", no_argument, NULL, KO_VERSION},
    {"seed", required_argument, NULL, KO_SEED},
    {"seeds", required_argument, NULL, KO_SEEDS},
    {"bug", required_argument, NULL, KO_BUG},
    {"shard", required_argument, NULL, KO_SHARD},
    {"jobs", required_argument, NULL, KO_JOBS},
    {"workload", required_argument, NULL, KO_WORKLOAD},
    {"kvmem", required_argument, NULL, KO_KVMEM},
    {"trace", no_argument, NULL, KO_TRACE},
    {"trace-json", required_argument, NULL, KO_TRACE_JSON},
    {"trace-hash", no_argument, NULL, KO_TRACE_HASH},
    {"hashes", no_argument, NULL, KO_HASHES},
    {"json", no_argument, NULL, KO_JSON},
    {"stop", no_argument, NULL, KO_STOP},
    {"db", required_argument, NULL, KO_DB},
    {"min", no_argument, NULL, KO_MIN},
    {"fuzz", no_argument, NULL, KO_FUZZ},
    {"quiet", no_argument, NULL, KO_QUIET},
    {"max-runs", required_argument, NULL, KO_MAX_RUNS},
    {"no-blame", no_argument, NULL, KO_NO_BLAME},
    {"no-store", no_argument, NULL, KO_NO_STORE},
    {"runs", no_argument, NULL, KO_RUNS},
    {"mark-fixed", no_argument, NULL, KO_MARK_FIXED},
    {"rehash", no_argument, NULL, KO_REHASH},
    {"original", no_argument, NULL, KO_ORIGINAL},
    {"corpus", no_argument, NULL, KO_CORPUS},
    {"fuzzer", required_argument, NULL, KO_FUZZER},
    {"bugs", required_argument, NULL, KO_BUGS},
    {"budget-seeds", required_argument, NULL, KO_BUDGET_SEEDS},
    {"fuzz-seconds", required_argument, NULL, KO_FUZZ_SECONDS},
    {"fuzz-seed", required_argument, NULL, KO_FUZZ_SEED},
    {"keep", no_argument, NULL, KO_KEEP},
    {"sweep", required_argument, NULL, KO_SWEEP},
    {NULL, 0, NULL, 0},
};

const char *kvsim_opt_name(int id) {
    static char buf[32];
    if (id == KO_OUT)
        return "-o";
    for (const struct option *o = all_opts; o->name; o++)
        if (o->val == id) {
            snprintf(buf, sizeof buf, "--%s", o->name);
            return buf;
        }
    return "?";
}

int kvsim_accepts(const int *accepts, int id) {
    if (id == KO_HELP || id == KO_VERSION)
        return 1;
    for (const int *a = accepts; *a != KO_END; a++)
        if (*a == id)
            return 1;
    return 0;
}

void kvsim_getopt_init(kvsim_getopt *g, const char *cmd, const int *accepts, int argc, char **argv) {
    memset(g, 0, sizeof *g);
    g->cmd = cmd;
    g->accepts = accepts;
    g->argc = argc - 1;
    g->argv = argv + 1;
    optind = 0; /* glibc: start over (each command parses once, but be exact) */
    opterr = 0;
}

/* The message for what getopt_long refused ('?'): the word as written. */
static int refused(const kvsim_getopt *g, const char *word) {
    const char *eq = strchr(word, '=');
    if (!strncmp(word, "--", 2) && eq) {
        for (const struct option *o = all_opts; o->name; o++)
            if (o->has_arg == no_argument && strlen(o->name) == (size_t)(eq - word - 2) &&
                !strncmp(o->name, word + 2, (size_t)(eq - word - 2)))
                return fprintf(stderr, "kvsim %s: --%s takes no value, got '%s'\n", g->cmd, o->name, word), -1;
    }
    return fprintf(stderr, "kvsim %s: unknown or ambiguous option '%s' (try kvsim %s --help)\n", g->cmd, word,
                   g->cmd),
           -1;
}

static int collect_positional(kvsim_getopt *g) {
    for (int i = optind; i < g->argc; i++) {
        if (g->n_pos == KVSIM_POS_MAX)
            return fprintf(stderr, "kvsim %s: more than %d arguments\n", g->cmd, KVSIM_POS_MAX), -1;
        g->pos[g->n_pos++] = g->argv[i];
    }
    return KO_END;
}

int kvsim_getopt_next(kvsim_getopt *g) {
    int idx = -1;
    int c = getopt_long(g->argc, g->argv, ":ho:", all_opts, &idx);
    g->arg = optarg;
    g->name = c == KO_OUT ? "-o" : idx >= 0 ? kvsim_opt_name(all_opts[idx].val) : kvsim_opt_name(c);
    if (c == -1)
        return collect_positional(g);
    if (c == '?')
        return refused(g, g->argv[optind - 1]);
    if (c == ':')
        return fprintf(stderr, "kvsim %s: %s needs a value\n", g->cmd, g->argv[optind - 1]), -1;
    if (!kvsim_accepts(g->accepts, c))
        return fprintf(stderr, "kvsim %s: %s does not apply to 'kvsim %s' (try kvsim %s --help)\n", g->cmd,
                       g->name, g->cmd, g->cmd),
               -1;
    if (c == KO_HELP) {
        char first[32];
        snprintf(first, sizeof first, "%s", g->cmd);
        first[strcspn(first, " ")] = 0; /* "db list": the help of db */
        kvsim_help(first, stdout);
        return -2;
    }
    if (c == KO_VERSION) {
        kv_cli_version(stdout, "kvsim");
        return -2;
    }
    return c;
}

int kvsim_opt_num(const kvsim_getopt *g, uint64_t lo, uint64_t hi, uint64_t *out) {
    if (!kv_cli_u64(g->arg, lo, hi, out))
        return 0;
    fprintf(stderr, "kvsim %s: %s: '%s' is not a number in %" PRIu64 "..%" PRIu64 "\n", g->cmd, g->name, g->arg, lo,
            hi);
    return -1;
}

int kvsim_max_pos(const kvsim_getopt *g, int max) {
    if (g->n_pos <= max)
        return 0;
    fprintf(stderr, "kvsim %s: unexpected argument '%s' (try kvsim %s --help)\n", g->cmd, g->pos[max], g->cmd);
    return -1;
}

/* "A..B", each a strict number, A <= B. */
static int parse_range(const kvsim_getopt *g, kvsim_opts *o) {
    const char *v = g->arg, *dots = strstr(v, "..");
    char lo[32];
    if (!dots || (size_t)(dots - v) >= sizeof lo ||
        (memcpy(lo, v, (size_t)(dots - v)), lo[dots - v] = 0, kvsim_parse_u64(lo, &o->from)) ||
        kvsim_parse_u64(dots + 2, &o->to) || o->to < o->from)
        return fprintf(stderr, "kvsim %s: --seeds: '%s' is not A..B with A <= B, numbers in 0..%" PRIu64 "\n",
                       g->cmd, v, UINT64_MAX),
               -1;
    o->have_range = 1;
    return 0;
}

/* "I/N", strict numbers, I < N <= 2^32-1. */
static int parse_shard(const kvsim_getopt *g, kvsim_opts *o) {
    const char *v = g->arg, *slash = strchr(v, '/');
    char i_s[16];
    uint64_t i, n;
    if (!slash || (size_t)(slash - v) >= sizeof i_s ||
        (memcpy(i_s, v, (size_t)(slash - v)), i_s[slash - v] = 0, kv_cli_u64(i_s, 0, UINT32_MAX, &i)) ||
        kv_cli_u64(slash + 1, 1, UINT32_MAX, &n) || i >= n)
        return fprintf(stderr, "kvsim %s: --shard: '%s' is not I/N with I < N\n", g->cmd, v), -1;
    o->shard_i = (uint32_t)i;
    o->shard_n = (uint32_t)n;
    return 0;
}

static int take_opt(const kvsim_getopt *g, int id, kvsim_opts *o) {
    uint64_t n;
    switch (id) {
    case KO_SEED:
        o->have_seed = 1;
        return kvsim_opt_num(g, 0, UINT64_MAX, &o->seed);
    case KO_SEEDS:
        return parse_range(g, o);
    case KO_BUG:
        return kvsim_take_bug(g->cmd, g->arg, &o->bugs);
    case KO_SHARD:
        return parse_shard(g, o);
    case KO_JOBS:
        if (kvsim_opt_num(g, 1, 64, &n))
            return -1;
        o->jobs = (uint32_t)n;
        return 0;
    case KO_WORKLOAD:
        if (!sim_workload_gen(g->arg))
            return fprintf(stderr, "kvsim %s: --workload: '%s' is not faults, steady or load\n", g->cmd, g->arg), -1;
        o->workload = g->arg;
        o->gen = sim_workload_gen(g->arg);
        return 0;
    case KO_KVMEM:
        if (strcmp(g->arg, "host") && strcmp(g->arg, "staged"))
            return fprintf(stderr, "kvsim %s: --kvmem: '%s' is not host or staged\n", g->cmd, g->arg), -1;
        o->staged = !strcmp(g->arg, "staged");
        o->kvmem = (kv_kvmem){.ops = o->staged ? &kv_kvmem_staged : &kv_kvmem_host};
        return 0;
    case KO_TRACE_JSON:
        o->trace_json = g->arg;
        return 0;
    case KO_DB:
        o->db = g->arg;
        return 0;
    case KO_HASHES:
        return o->hashes = 1, 0;
    case KO_TRACE:
        return o->trace = 1, 0;
    case KO_TRACE_HASH:
        return o->trace_hash = 1, 0;
    case KO_JSON:
        return o->json = 1, 0;
    case KO_STOP:
        return o->stop = 1, 0;
    default:
        return fprintf(stderr, "kvsim %s: %s is not handled here\n", g->cmd, g->name), -1;
    }
}

int kvsim_parse_opts(int argc, char **argv, const char *cmd, const int *accepts, int max_pos, kvsim_opts *o) {
    memset(o, 0, sizeof *o);
    o->shard_n = 1;
    o->jobs = 1;
    o->gen = sim_gen;
    kvsim_getopt g;
    kvsim_getopt_init(&g, cmd, accepts, argc, argv);
    int id;
    while ((id = kvsim_getopt_next(&g)) > 0)
        if (take_opt(&g, id, o))
            return -1;
    if (id < 0)
        return id;
    if (kvsim_max_pos(&g, max_pos))
        return -1;
    o->file = g.n_pos ? g.pos[0] : NULL;
    return 0;
}

void kvsim_cmdline_bugs(kv_cmdline *c, uint32_t bugs) {
    for (uint32_t b = 1; b; b <<= 1)
        if ((bugs & b) && strcmp(kv_bug_name(b), "?")) {
            kv_cmdline_add(c, "--bug");
            kv_cmdline_add(c, kv_bug_name(b));
        }
}

void kvsim_print_reproduce(const kv_cmdline *c) { printf("reproduce: %s\n", c->s); }

int kvsim_read_expect_bugs(const char *path, kvsim_expect *out, int max) {
    size_t n = strlen(path);
    if (n < 4 || strcmp(path + n - 4, ".kvs"))
        return 0;
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    char line[512], bug[64];
    int got = 0;
    for (unsigned no = 1; got < max && fgets(line, sizeof line, f); no++) {
        kvsim_expect *e = &out[got];
        if (sscanf(line, "# expect-bug %63s %31s", bug, e->inv) == 2 && (e->bug = kv_bug_parse(bug))) {
            e->line = no;
            got++;
        }
    }
    fclose(f);
    return got;
}

static int artifact_name(const char *path) {
    static const char *const prefixes[] = {"crash-", "leak-", "timeout-", "oom-", "slow-unit-", "id:"};
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++)
        if (!strncmp(base, prefixes[i], strlen(prefixes[i])))
            return 1;
    return strstr(path, "/crashes/") || strstr(path, "fuzz_scenario/");
}

int kvsim_is_fuzz_input(const char *path) {
    size_t n = strlen(path);
    if ((n >= 4 && !strcmp(path + n - 4, ".kvs")) || !strncmp(path, "db:", 3))
        return 0;
    if (artifact_name(path))
        return 1;
    FILE *f = fopen(path, "rb");
    if (!f)
        return 0;
    unsigned char head[4];
    size_t got = fread(head, 1, sizeof head, f);
    fclose(f);
    return !(got == 4 && !memcmp(head, "KVS", 3) && head[3] >= 1 && head[3] <= SIM_SCENARIO_VERSION);
}

/* ---- verdicts ----------------------------------------------------------------------------- */

int kvsim_verdict_code(const sim_result *r) {
    if (r->sim_error != KV_OK) return EXIT_SIM;
    if (!r->violated) return EXIT_CLEAN;
    return r->inv == KV_INV_LIVE || r->inv == KV_INV_LEAK ? EXIT_LIVENESS : EXIT_SAFETY;
}

void kvsim_print_cfg(const sim_world_cfg *c) {
    static sim_scenario sc;
    static char text[SIM_SCENARIO_TEXT_MAX];
    size_t n = 0;
    sim_scenario_init(&sc);
    const uint8_t *choice = c->choice;
    size_t clen = c->choice_len < SIM_CHOICE_MAX ? c->choice_len : SIM_CHOICE_MAX;
    sc.cfg = *c;
    if (clen) memcpy(sc.choice, choice, clen);
    sc.cfg.choice = sc.choice;
    sc.cfg.choice_len = clen;
    if (sim_scenario_to_text(&sc, text, sizeof text, &n) == KV_OK) fwrite(text, 1, n, stdout);
    else printf("# (scenario outside the text format's ranges)\n");
}

void kvsim_print_violation(const sim_result *r) {
    printf("VIOLATION %s at event %" PRIu64 ", t=%" PRIu64 " ns, actor %s, engine %d, request %d\n  %s\n",
           kv_inv_name(r->inv), r->event, r->at_ns, r->actor_name, (int)r->engine, (int)r->req, r->detail);
}

/* The file branch of replay_input_load (replay/input.c): FILE.kvs is text,
 * anything else a binary scenario (an exported case, a decoded artifact). */
int kvsim_load_scenario(const char *path, sim_scenario *sc) {
    static replay_input in;
    static const replay_load_opts plain;
    replay_err err;
    if (replay_input_load(path, &plain, &in, &err) != KV_OK) return fprintf(stderr, "%s\n", err.msg), -1;
    sim_scenario_copy(sc, &in.sc);
    return 0;
}

int kvsim_take_bug(const char *cmd, const char *name, uint32_t *bugs) {
    uint32_t b = name ? kv_bug_parse(name) : 0;
    if (b) {
        *bugs |= b;
        return 0;
    }
    fprintf(stderr, "kvsim %s: --bug: '%s' is not a bug switch (switches:", cmd, name ? name : "");
    for (uint32_t k = 1; k; k <<= 1)
        if (strcmp(kv_bug_name(k), "?")) fprintf(stderr, " %s", kv_bug_name(k));
    fputs(")\n", stderr);
    return -1;
}
