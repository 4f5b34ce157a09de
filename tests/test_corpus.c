/* tests/test_corpus.c — replays every regression scenario in
 * corpus/scenarios/: each must run clean with every bug switch off, and for
 * each "# expect-bug NAME INVARIANT" line it must violate that invariant
 * with the switch on. The trace hash of a replay is stable. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <string.h>

#include "sim/scenario.h"
#include "sim/world.h"

#define CORPUS "corpus/scenarios"

static kv_inv inv_by_name(const char *n) {
    for (uint32_t i = 0; i < KV_INV_COUNT; i++)
        if (!strcmp(kv_inv_name((kv_inv)i), n)) return (kv_inv)i;
    return KV_INV_COUNT;
}

static void replay_file(sim_world *w, const char *path, uint32_t *n_bug_checks) {
    static sim_scenario sc;
    sim_parse_error err;
    kv_status st = sim_scenario_load(path, &sc, &err);
    cr_assert_eq(st, KV_OK, "%s:%u:%u: %s", path, err.line, err.col, err.msg);
    cr_assert_eq(sc.cfg.bugs, 0, "%s: corpus files keep 'bugs none'; switches come from expect-bug", path);
    sim_result r, again;
    cr_assert_eq(sim_world_run(w, &sc.cfg, NULL, &r), KV_OK, "%s", path);
    cr_assert(!r.violated, "%s: %s: %s", path, kv_inv_name(r.inv), r.detail);
    cr_assert_eq(r.sim_error, KV_OK, "%s", path);
    cr_assert_eq(sim_world_run(w, &sc.cfg, NULL, &again), KV_OK);
    cr_assert_eq(r.trace_hash, again.trace_hash, "%s: replay is not bit-for-bit", path);
    FILE *f = fopen(path, "r");
    char line[512];
    while (f && fgets(line, sizeof line, f)) {
        char bug[64], inv[32];
        if (sscanf(line, "# expect-bug %63s %31s", bug, inv) != 2) continue;
        uint32_t bit = kv_bug_parse(bug);
        kv_inv want = inv_by_name(inv);
        cr_assert_neq(bit, 0, "%s: unknown bug %s", path, bug);
        cr_assert_neq(want, KV_INV_COUNT, "%s: unknown invariant %s", path, inv);
        sc.cfg.bugs = bit;
        cr_assert_eq(sim_world_run(w, &sc.cfg, NULL, &r), KV_OK);
        cr_assert(r.violated, "%s: clean with %s on", path, bug);
        cr_assert_eq(r.inv, want, "%s with %s: %s instead of %s (%s)", path, bug, kv_inv_name(r.inv), inv, r.detail);
        sc.cfg.bugs = 0;
        (*n_bug_checks)++;
    }
    if (f) fclose(f);
}

Test(corpus, every_scenario_replays_as_recorded, .timeout = 300) {
    sim_world *w;
    cr_assert_eq(sim_world_new(&w), KV_OK);
    DIR *d = opendir(CORPUS);
    cr_assert_not_null(d, "cannot open %s (tests run from the repository root)", CORPUS);
    struct dirent *e;
    uint32_t files = 0, bug_checks = 0;
    char path[512];
    while ((e = readdir(d))) {
        size_t n = strlen(e->d_name);
        if (n < 5 || strcmp(e->d_name + n - 4, ".kvs")) continue;
        snprintf(path, sizeof path, "%s/%s", CORPUS, e->d_name);
        replay_file(w, path, &bug_checks);
        files++;
    }
    closedir(d);
    sim_world_free(w);
    cr_assert_geq(files, 11, "corpus has %u scenarios", files);
    cr_assert_geq(bug_checks, 5, "every seed bug has a scenario (%u checks)", bug_checks);
}
