/* kvsim gen — print a generated scenario as .kvs text. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "apps/kvsim/kvsim.h"
#include "sim/gen.h"
#include "sim/scenario.h"

static const int accepts[] = {KO_SEED, KO_WORKLOAD, KO_BUG, KO_END};

static int cmd_gen(int argc, char **argv) {
    kvsim_opts o;
    int pr = kvsim_parse_opts(argc, argv, "gen", accepts, 0, &o);
    if (pr == -2) return EXIT_CLEAN;
    if (pr) return EXIT_USAGE;
    if (!o.have_seed) return fprintf(stderr, "kvsim gen: give --seed N\n"), kvsim_usage("gen");
    static sim_world_cfg cfg;
    o.gen(o.seed, o.bugs, &cfg);
    kvsim_print_cfg(&cfg);
    return EXIT_CLEAN;
}

const kvsim_cmd kvsim_cmd_gen = {
    "gen",
    "kvsim gen --seed N [--workload faults|steady|load] [--bug NAME]...\n  Prints the generated scenario as .kvs text.\n",
    cmd_gen};
