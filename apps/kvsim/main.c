/* apps/kvsim — the simulator's command line: a table of subcommands, one
 * per cmd_*.c file.
 *
 * Exit codes: the table of apps/common/exit_codes.h (0 clean, 1 safety
 * violation, 2 liveness violation, 3 bad input, 4 usage error, 5 simulator
 * resource exhausted, 6-10 the findings database). */
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
    &kvsim_cmd_report,
};
enum { N_COMMANDS = sizeof commands / sizeof commands[0] };

const char *kvsim_prog = "kvsim";

void kvsim_help(const char *cmd, FILE *out) {
    if (!cmd)
        fputs("usage: kvsim COMMAND [options]   (kvsim COMMAND --help; kvsim --version)\n", out);
    for (size_t i = 0; i < N_COMMANDS; i++)
        if (!cmd || !strcmp(cmd, commands[i]->name)) fputs(commands[i]->help, out);
    if (!cmd) {
        fputs("options: --opt value or --opt=value, in any order; numbers are decimal and range-checked;\n"
              "  a FILE that is written may be '-' for stdout (the rest of the output then goes to stderr)\n",
              out);
        fputs("bugs:", out);
        for (uint32_t b = 1; b; b <<= 1)
            if (strcmp(kv_bug_name(b), "?")) fprintf(out, " %s", kv_bug_name(b));
        fputc('\n', out);
        kv_exit_print(out);
    }
}

int kvsim_usage(const char *cmd) {
    kvsim_help(cmd, stderr);
    return EXIT_USAGE;
}

static const kvsim_cmd *find(const char *name) {
    for (size_t i = 0; i < N_COMMANDS; i++)
        if (!strcmp(name, commands[i]->name)) return commands[i];
    return NULL;
}

/* kvsim help [COMMAND] */
static int help(int argc, char **argv) {
    if (argc > 3 || (argc == 3 && !find(argv[2])))
        return fprintf(stderr, "kvsim help: no command '%s'\n", argv[argc - 1]), kvsim_usage(NULL);
    kvsim_help(argc == 3 ? argv[2] : NULL, stdout);
    return EXIT_CLEAN;
}

int main(int argc, char **argv) {
    if (argc > 0 && argv[0] && *argv[0]) kvsim_prog = argv[0];
    if (argc < 2) return fprintf(stderr, "kvsim: give a command\n"), kvsim_usage(NULL);
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) return help(argc, argv);
    if (!strcmp(argv[1], "--version")) {
        if (argc > 2) return fprintf(stderr, "kvsim: unexpected argument '%s' after --version\n", argv[2]), EXIT_USAGE;
        kv_cli_version(stdout, "kvsim");
        return EXIT_CLEAN;
    }
    const kvsim_cmd *c = find(argv[1]);
    if (c) return c->fn(argc, argv);
    fprintf(stderr, "kvsim: unknown command '%s'\n", argv[1]);
    return kvsim_usage(NULL);
}
