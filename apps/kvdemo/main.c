/* apps/kvdemo — `make run`: the connector core on a few P/D requests in the
 * deterministic simulator, with each engine's block-pool report. Shows the
 * normal path, a client abort, an ERROR response and a receive timeout, then
 * the same ERROR scenario with seed 000's bug switched back on. */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "apps/common/cli.h"
#include "sim/world.h"

static const char help[] =
    "usage: kvdemo [--help | --version]\n"
    "  Runs the connector core in the deterministic simulator on four fixed scenarios (one P engine\n"
    "  with TP 2, two D engines): six requests over full-attention and sliding-window groups; a\n"
    "  client abort plus a whole-message ERROR from P; a lost response (D's receive timeout); the\n"
    "  same ERROR with seed 000's err_early_return switched on, where the checker reports the\n"
    "  stuck request. Prints each run's outcomes, trace hash, verdict and block-pool accounting.\n"
    "  The last violation is expected: kvdemo exits 0 when every run ran.\n";

/* -1 to run the demo, else the exit code (help, version, usage error). */
static int parse_args(int argc, char **argv) {
    if (argc == 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")))
        return fputs(help, stdout), EXIT_CLEAN;
    if (argc == 2 && !strcmp(argv[1], "--version"))
        return kv_cli_version(stdout, "kvdemo"), EXIT_CLEAN;
    if (argc < 2)
        return -1;
    bool flag = !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--version");
    const char *bad = flag ? argv[2] : argv[1]; /* the first word that is not --help / --version alone */
    fprintf(stderr, "kvdemo: %s '%s': kvdemo takes no arguments but --help or --version (alone)\n",
            bad[0] == '-' ? "unknown option" : "unexpected argument", bad);
    fputs(help, stderr);
    return EXIT_USAGE;
}

static void base(sim_world_cfg *c, uint32_t n) {
    sim_world_cfg_default(c);
    c->n_p = 1;
    c->n_d = 2;
    c->tp_p = 2;
    c->tp_d = 1;
    c->n_groups = 2;
    c->group[1] = (kv_group_cfg){.kind = KV_GROUP_SLIDING, .window = 64};
    c->prefix_caching = true;
    c->pool_blocks_p = c->pool_blocks_d = 96;
    c->n_reqs = n;
    for (uint32_t i = 0; i < n; i++)
        c->req[i] = (sim_req_plan){.at_ns = 1000000ull * (1 + i), .d_engine = i % 2,
                                   .prompt_len = 100 + 37 * i, .max_tokens = 4 + i % 3,
                                   .prefix_group = i % 2, .prefix_len = 64, .sequential = (uint8_t)(i % 2)};
}

static int show(sim_world *w, const char *title, const sim_world_cfg *c) {
    sim_result r;
    kv_status st = sim_world_run(w, c, NULL, &r);
    printf("== %s\n", title);
    if (st != KV_OK) {
        printf("   run failed: %s\n", kv_status_str(st));
        return 1;
    }
    printf("   requests: %llu ok, %llu error, %llu aborted; %llu events; last request ended at %.3f s virtual; trace hash %016llx\n",
           (unsigned long long)r.requests_ok, (unsigned long long)r.requests_error,
           (unsigned long long)r.requests_aborted, (unsigned long long)r.events, (double)r.last_done_ns / 1e9,
           (unsigned long long)r.trace_hash);
    if (r.sim_error != KV_OK)
        printf("   SIMULATOR RESOURCE EXHAUSTED (%s): the run is not a verdict\n", kv_status_str(r.sim_error));
    else if (r.violated)
        printf("   VIOLATION %s at event %llu (t=%llu ns) actor %s request %d: %s\n", kv_inv_name(r.inv),
               (unsigned long long)r.event, (unsigned long long)r.at_ns, r.actor_name, (int)r.req, r.detail);
    else
        printf("   invariants: clean (blocks verified %llu, pool checks %llu)\n",
               (unsigned long long)r.armed[KV_INV_DATA], (unsigned long long)r.armed[KV_INV_CONSERVE]);
    sim_world_report(w, stdout);
    return 0;
}

int main(int argc, char **argv) {
    int pr = parse_args(argc, argv);
    if (pr >= 0)
        return pr;
    sim_world *w;
    if (sim_world_new(&w) != KV_OK) {
        fprintf(stderr, "kvdemo: out of memory\n");
        return EXIT_SIM;
    }
    static sim_world_cfg c;
    int rc = 0;
    base(&c, 6);
    rc |= show(w, "6 requests, 1 P (TP 2) -> 2 D, full + sliding-window groups", &c);
    base(&c, 4);
    c.n_faults = 2;
    c.fault[0] = (sim_fault){.at_ns = 3200000, .kind = SIM_F_ABORT, .target = 1};
    c.fault[1] = (sim_fault){.at_ns = 2500000, .kind = SIM_F_SENDER_EXCEPTION, .target = 0};
    rc |= show(w, "client abort of request 1 + a whole-message ERROR from P", &c);
    base(&c, 3);
    c.n_faults = 1;
    c.fault[0] = (sim_fault){.at_ns = 500000, .kind = SIM_F_SENDER_DROP_RESP, .target = 0};
    rc |= show(w, "a lost response: D's receive timeout fires, load error, policy fail", &c);
    base(&c, 4);
    c.n_faults = 1;
    c.fault[0] = (sim_fault){.at_ns = 2500000, .kind = SIM_F_SENDER_EXCEPTION, .target = 0};
    c.bugs = KV_BUG_ERR_EARLY_RETURN;
    rc |= show(w, "the same ERROR with seed 000's err_early_return switched on", &c);
    sim_world_free(w);
    return rc ? EXIT_SIM : EXIT_CLEAN; /* a run the simulator refused */
}
