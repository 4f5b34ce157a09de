/* kvsim report — one self-contained HTML page: of a sweep, from the
 * kvconn.sweep documents its shards wrote (--sweep), or of a findings
 * database (--db). The pages are report_sweep.c and report_db.c. */
#include <stdio.h>
#include <string.h>

#include "apps/kvsim/kvsim.h"
#include "apps/kvsim/report.h"

static const int accepts[] = {KO_SWEEP, KO_DB, KO_OUT, KO_END};

static int cmd_report(int argc, char **argv) {
    const char *sweeps[KVSIM_POS_MAX * 2], *db = NULL, *out = NULL;
    int n = 0;
    kvsim_getopt g;
    kvsim_getopt_init(&g, "report", accepts, argc, argv);
    int id;
    while ((id = kvsim_getopt_next(&g)) > 0) {
        if (id == KO_SWEEP && n < KVSIM_POS_MAX) sweeps[n++] = g.arg;
        else if (id == KO_SWEEP) return fprintf(stderr, "kvsim report: more than %d --sweep\n", KVSIM_POS_MAX), EXIT_USAGE;
        else if (id == KO_DB && db) return fprintf(stderr, "kvsim report: one --db\n"), EXIT_USAGE;
        else if (id == KO_DB) db = g.arg;
        else if (id == KO_OUT) out = g.arg;
    }
    if (id == -2) return EXIT_CLEAN;
    if (id < 0) return EXIT_USAGE;
    if (!n && g.n_pos) return kvsim_max_pos(&g, 0), EXIT_USAGE;
    for (int i = 0; i < g.n_pos; i++) sweeps[n++] = g.pos[i]; /* --sweep A.json B.json ...: the other shards */
    if (!n == !db)
        return fprintf(stderr, "kvsim report: give --sweep SWEEP.json... or --db FILE (one of them)\n"),
               kvsim_usage("report");
    if (!out) return fprintf(stderr, "kvsim report: give -o FILE.html (- for stdout)\n"), kvsim_usage("report");
    return db ? report_db(db, out) : report_sweep(sweeps, n, out);
}

const kvsim_cmd kvsim_cmd_report = {
    "report",
    "kvsim report (--sweep SWEEP.json [MORE.json]... | --db FILE) -o OUT.html\n"
    "  Writes one self-contained HTML page (inline SVG, no script, nothing\n"
    "  fetched; docs/report.md). --sweep: the kvconn.sweep documents of\n"
    "  kvsim sweep --json (docs/sweep-json.md), one per shard of one sweep,\n"
    "  combined: counts added, first seeds the smallest; the fault x phase\n"
    "  heatmap, armed and violated per invariant, throughput, parameters, the\n"
    "  first violation and its reproduce line. --db: every case of a findings\n"
    "  database with its status, signature, invariant, the runs that found it,\n"
    "  its shrunk scenario (else the original) and a Perfetto trace of it,\n"
    "  written as OUT.d/case-ID.json next to the page (-o -: the page goes to\n"
    "  stdout and gives the command that writes each trace instead).\n"
    "  Exit: 0 written (whatever the sweep found), 3 a document that is not a\n"
    "  kvconn.sweep one or shards of different sweeps, 4 usage, 6-8 database errors.\n",
    cmd_report};
