/* apps/kvsim — the simulator's command line: a table of subcommands, one
 * per cmd_*.c file.
 *
 * Exit codes: 0 clean, 1 safety violation, 2 liveness violation, 3 bad input,
 * 4 usage error, 5 simulator resource exhausted; the findings database adds
 * 6-10 (kvsim.h). */
#include <stdio.h>
#include <string.h>

#include "apps/kvsim/kvsim.h"
#include "core/engine.h"

/* Add a subcommand: a cmd_NAME.c exporting kvsim_cmd_NAME, declared in
 * kvsim.h, listed here. */
static const kvsim_cmd *const commands[] = {
    &kvsim_cmd_run,
    &kvsim_cmd_sweep,
    &kvsim_cmd_gen,
    &kvsim_cmd_replay,
    &kvsim_cmd_shrink,
    &kvsim_cmd_db,
    &kvsim_cmd_selftest,
};
enum { N_COMMANDS = sizeof commands / sizeof commands[0] };

int kvsim_usage(const char *cmd) {
    for (size_t i = 0; i < N_COMMANDS; i++)
        if (!cmd || !strcmp(cmd, commands[i]->name)) fputs(commands[i]->help, stderr);
    if (!cmd) {
        fputs("bugs:", stderr);
        for (uint32_t b = 1; b; b <<= 1)
            if (strcmp(kv_bug_name(b), "?")) fprintf(stderr, " %s", kv_bug_name(b));
        fputs("\nexit: 0 clean, 1 safety violation, 2 liveness violation, 3 bad input, 4 usage, 5 simulator resource,\n"
              "      6 database corrupt or not a findings database, 7 database schema version, 8 database read-only,\n"
              "      9 a fixed case came back, 10 a case does not reproduce as recorded\n",
              stderr);
    }
    return EXIT_USAGE;
}

int main(int argc, char **argv) {
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        kvsim_usage(NULL);
        return argc < 2 ? EXIT_USAGE : EXIT_CLEAN;
    }
    for (size_t i = 0; i < N_COMMANDS; i++)
        if (!strcmp(argv[1], commands[i]->name)) return commands[i]->fn(argc, argv);
    fprintf(stderr, "kvsim: unknown command '%s'\n", argv[1]);
    return kvsim_usage(NULL);
}
