/* apps/kvsim — option parsing and verdict printing shared by the subcommands. */
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

int kvsim_parse_u64(const char *s, uint64_t *out) {
    char *end;
    if (!s || !*s) return -1;
    unsigned long long v = strtoull(s, &end, 10);
    if (*end) return -1;
    *out = v;
    return 0;
}

int kvsim_parse_opts(int argc, char **argv, const char *cmd, kvsim_opts *o) {
    memset(o, 0, sizeof *o);
    o->shard_n = 1;
    o->jobs = 1;
    o->gen = sim_gen;
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) return kvsim_usage(cmd), -2;
        if (!strcmp(a, "--seed")) {
            if (kvsim_parse_u64(v, &o->seed)) return fprintf(stderr, "kvsim %s: --seed needs a number, got '%s'\n", cmd, v ? v : ""), -1;
            o->have_seed = 1;
            i++;
        } else if (!strcmp(a, "--seeds")) {
            const char *dots = v ? strstr(v, "..") : NULL;
            char lo[32];
            if (!dots || (size_t)(dots - v) >= sizeof lo) return fprintf(stderr, "kvsim %s: --seeds needs A..B, got '%s'\n", cmd, v ? v : ""), -1;
            memcpy(lo, v, (size_t)(dots - v));
            lo[dots - v] = 0;
            if (kvsim_parse_u64(lo, &o->from) || kvsim_parse_u64(dots + 2, &o->to) || o->to < o->from)
                return fprintf(stderr, "kvsim %s: --seeds needs A..B with A <= B, got '%s'\n", cmd, v), -1;
            o->have_range = 1;
            i++;
        } else if (!strcmp(a, "--bug")) {
            if (kvsim_take_bug(cmd, v, &o->bugs)) return -1;
            i++;
        } else if (!strcmp(a, "--shard")) {
            unsigned si, sn;
            if (!v || sscanf(v, "%u/%u", &si, &sn) != 2 || !sn || si >= sn)
                return fprintf(stderr, "kvsim %s: --shard needs I/N with I < N, got '%s'\n", cmd, v ? v : ""), -1;
            o->shard_i = si;
            o->shard_n = sn;
            i++;
        } else if (!strcmp(a, "--jobs")) {
            uint64_t j;
            if (kvsim_parse_u64(v, &j) || j < 1 || j > 64) return fprintf(stderr, "kvsim %s: --jobs needs 1..64, got '%s'\n", cmd, v ? v : ""), -1;
            o->jobs = (uint32_t)j;
            i++;
        } else if (!strcmp(a, "--workload")) {
            if (!v || !sim_workload_gen(v))
                return fprintf(stderr, "kvsim %s: --workload needs faults, steady or load, got '%s'\n", cmd, v ? v : ""), -1;
            o->workload = v;
            o->gen = sim_workload_gen(v);
            i++;
        } else if (!strcmp(a, "--kvmem")) {
            if (!v || (strcmp(v, "host") && strcmp(v, "staged")))
                return fprintf(stderr, "kvsim %s: --kvmem needs host or staged, got '%s'\n", cmd, v ? v : ""), -1;
            o->kvmem = (kv_kvmem){.ops = strcmp(v, "staged") ? &kv_kvmem_host : &kv_kvmem_staged};
            i++;
        } else if (!strcmp(a, "--trace-json")) {
            if (!v) return fprintf(stderr, "kvsim %s: --trace-json needs a file name\n", cmd), -1;
            o->trace_json = v;
            i++;
        } else if (!strcmp(a, "--hashes")) o->hashes = 1;
        else if (!strcmp(a, "--trace")) o->trace = 1;
        else if (!strcmp(a, "--trace-hash")) o->trace_hash = 1;
        else if (!strcmp(a, "--json")) o->json = 1;
        else if (!strcmp(a, "--stop")) o->stop = 1;
        else if (a[0] != '-' && !o->file) o->file = a;
        else return fprintf(stderr, "kvsim %s: unknown option '%s' (try --help)\n", cmd, a), -1;
    }
    return 0;
}

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
    if (!b) return fprintf(stderr, "kvsim %s: unknown bug switch '%s'\n", cmd, name ? name : ""), -1;
    *bugs |= b;
    return 0;
}
