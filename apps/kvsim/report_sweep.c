/* apps/kvsim/report_sweep.c — kvsim report --sweep: one page from the
 * kvconn.sweep documents (docs/sweep-json.md) of one sweep's shards.
 *
 * Shards are combined as kvsim sweep --jobs combines its children: counts
 * add up, each invariant's first seed is the smallest, the first violation
 * is the one with the smallest seed. Every document must be a shard of the
 * same sweep (workload, seed range, bug switches, block memory, shard
 * count) and each shard index may come once: adding up shards of two
 * different sweeps would give numbers that describe no run. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apps/kvsim/kvsim.h"
#include "apps/kvsim/report.h"
#include "util/json_read.h"

#define SW_NAMES 64  /* invariants, kinds, connectors, reach lines: each well under */
#define SW_PHASES 16
#define SW_SHARDS 256
#define SW_FILE_MAX (64u << 20)

typedef struct sw_named {
    char name[80];
    uint64_t v;
} sw_named;

typedef struct sw_list {
    uint32_t n;
    sw_named item[SW_NAMES];
} sw_list;

typedef struct sw_inv {
    char name[32];
    uint64_t violations, armed, first_seed; /* first_seed valid when violations */
} sw_inv;

typedef struct sw_shard {
    const char *file;
    uint64_t i, n, jobs, runs, violations, events, requests;
    double wall_s;
} sw_shard;

typedef struct sw_sum {
    char version[64], commit[64], build[160];
    bool mixed_builds;
    char workload[32], kvmem[16], bugs[256];
    uint64_t first_seed, last_seed, shard_n;
    bool stop;
    uint32_t n_shards;
    sw_shard shard[SW_SHARDS];
    uint64_t runs, violations, sim_errors, events, requests, store_saves, store_loads, rejected_loads,
        turned_away;
    double wall_max, wall_sum;
    uint32_t n_inv;
    sw_inv inv[SW_NAMES];
    sw_list conn, reach;
    uint32_t n_phases, n_kinds;
    char phase[SW_PHASES][32], kind[SW_NAMES][48];
    uint64_t fp[SW_NAMES][SW_PHASES];
    bool have_first;
    uint64_t f_seed, f_event, f_at_ns;
    int64_t f_engine, f_request;
    char f_inv[32], f_detail[512], f_actor[64], f_repro[2048];
} sw_sum;

/* The document being read, for the messages. */
typedef struct sw_doc {
    const char *file;
    kv_jdoc d;
} sw_doc;

static int bad(const sw_doc *x, const char *what, const char *key) {
    fprintf(stderr, "kvsim report: %s: %s%s%s (not a kvconn.sweep document as kvsim sweep --json writes it)\n",
            x->file, what, key ? " " : "", key ? key : "");
    return -1;
}

static const kv_jnode *want(const sw_doc *x, const kv_jnode *o, const char *key, kv_jtype t) {
    const kv_jnode *v = kv_jget(&x->d, o, key);
    if (!v || v->type != t) return bad(x, v ? "wrong type of member" : "missing member", key), NULL;
    return v;
}

static int want_u64(const sw_doc *x, const kv_jnode *o, const char *key, uint64_t *out) {
    if (kv_jget_u64(&x->d, o, key, out)) return 0;
    return bad(x, "missing or not a count:", key);
}

static int want_str(const sw_doc *x, const kv_jnode *o, const char *key, char *out, size_t cap) {
    const char *s = kv_jget_str(&x->d, o, key);
    if (!s) return bad(x, "missing or not a string:", key);
    snprintf(out, cap, "%s", s);
    return 0;
}

/* name's slot among *n names stored stride bytes apart (cap bytes each),
 * appended when new; -1 when full or the name does not fit. */
static int slot(char *base, size_t stride, size_t cap, uint32_t *n, uint32_t max, const char *name) {
    for (uint32_t i = 0; i < *n; i++)
        if (!strcmp(base + i * stride, name)) return (int)i;
    if (*n == max || strlen(name) >= cap) return -1;
    memcpy(base + *n * stride, name, strlen(name) + 1);
    return (int)(*n)++;
}

static int add_named(const sw_doc *x, sw_list *l, const kv_jnode *obj) {
    if (!obj) return -1; /* want() said why */
    for (const kv_jnode *m = kv_jfirst(&x->d, obj); m; m = kv_jnext(&x->d, m)) {
        int i = slot(l->item[0].name, sizeof l->item[0], sizeof l->item[0].name, &l->n, SW_NAMES, m->key);
        if (i < 0 || m->type != KV_J_NUM || !m->is_u64) return bad(x, "too many names or not a count:", m->key);
        l->item[i].v += m->u64;
    }
    return 0;
}

static int read_file(const char *path, char **out, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return fprintf(stderr, "kvsim report: cannot read %s\n", path), -1;
    char *buf = malloc(SW_FILE_MAX);
    size_t n = buf ? fread(buf, 1, SW_FILE_MAX, f) : 0;
    int err = !buf || ferror(f) || n == SW_FILE_MAX;
    fclose(f);
    if (err) return free(buf), fprintf(stderr, "kvsim report: cannot read %s (or larger than 64 MiB)\n", path), -1;
    *out = buf;
    *len = n;
    return 0;
}

/* The parameters of the first document; every other must name the same sweep. */
static int take_params(const sw_doc *x, const kv_jnode *root, sw_sum *s, sw_shard *sh) {
    const kv_jnode *p = want(x, root, "params", KV_J_OBJ), *k = want(x, root, "kvsim", KV_J_OBJ);
    if (!p || !k) return -1;
    char workload[32], kvmem[16], bugs[256] = "", version[64], commit[64], build[160];
    uint64_t first, last;
    bool stop = false;
    const kv_jnode *bl = want(x, p, "bugs", KV_J_ARR), *st = want(x, p, "stop", KV_J_BOOL);
    if (!bl || !st || want_str(x, p, "workload", workload, sizeof workload) ||
        want_str(x, p, "kvmem", kvmem, sizeof kvmem) || want_u64(x, p, "first_seed", &first) ||
        want_u64(x, p, "last_seed", &last) || want_u64(x, p, "shard_i", &sh->i) ||
        want_u64(x, p, "shard_n", &sh->n) || want_u64(x, p, "jobs", &sh->jobs) ||
        want_str(x, k, "version", version, sizeof version) || want_str(x, k, "commit", commit, sizeof commit) ||
        want_str(x, k, "build", build, sizeof build))
        return -1;
    stop = st->b;
    size_t n = 0;
    for (const kv_jnode *b = kv_jfirst(&x->d, bl); b; b = kv_jnext(&x->d, b)) {
        if (b->type != KV_J_STR) return bad(x, "a bug switch is not a string", NULL);
        n += (size_t)snprintf(bugs + n, n < sizeof bugs ? sizeof bugs - n : 0, "%s%s", n ? " " : "", b->str);
        if (n >= sizeof bugs) return bad(x, "too many bug switches", NULL);
    }
    if (!s->n_shards) {
        snprintf(s->workload, sizeof s->workload, "%s", workload);
        snprintf(s->kvmem, sizeof s->kvmem, "%s", kvmem);
        snprintf(s->bugs, sizeof s->bugs, "%s", bugs);
        snprintf(s->version, sizeof s->version, "%s", version);
        snprintf(s->commit, sizeof s->commit, "%s", commit);
        snprintf(s->build, sizeof s->build, "%s", build);
        s->first_seed = first, s->last_seed = last, s->shard_n = sh->n, s->stop = stop;
        return 0;
    }
    const char *diff = strcmp(workload, s->workload) ? "workload"
                       : strcmp(kvmem, s->kvmem)     ? "kvmem"
                       : strcmp(bugs, s->bugs)       ? "bugs"
                       : first != s->first_seed || last != s->last_seed ? "seed range"
                       : sh->n != s->shard_n         ? "shard count"
                                                     : NULL;
    if (diff)
        return fprintf(stderr, "kvsim report: %s is not a shard of the same sweep as %s: its %s differs\n", x->file,
                       s->shard[0].file, diff),
               -1;
    for (uint32_t i = 0; i < s->n_shards; i++)
        if (s->shard[i].i == sh->i)
            return fprintf(stderr, "kvsim report: %s and %s are both shard %" PRIu64 "/%" PRIu64 "\n", x->file,
                           s->shard[i].file, sh->i, sh->n),
                   -1;
    s->mixed_builds |= strcmp(commit, s->commit) != 0 || strcmp(build, s->build) != 0;
    return 0;
}

static int take_totals(const sw_doc *x, const kv_jnode *root, sw_sum *s, sw_shard *sh) {
    const kv_jnode *t = want(x, root, "totals", KV_J_OBJ);
    if (!t) return -1;
    struct {
        const char *key;
        uint64_t *sum, *mine;
    } keys[] = {
        {"runs", &s->runs, &sh->runs},           {"violations", &s->violations, &sh->violations},
        {"sim_errors", &s->sim_errors, NULL},     {"events", &s->events, &sh->events},
        {"requests", &s->requests, &sh->requests}, {"store_saves", &s->store_saves, NULL},
        {"store_loads", &s->store_loads, NULL},   {"rejected_loads", &s->rejected_loads, NULL},
        {"turned_away", &s->turned_away, NULL},
    };
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        uint64_t v;
        if (want_u64(x, t, keys[i].key, &v)) return -1;
        *keys[i].sum += v;
        if (keys[i].mine) *keys[i].mine = v;
    }
    if (!kv_jget_f64(&x->d, t, "wall_s", &sh->wall_s)) return bad(x, "missing or not a number:", "totals.wall_s");
    s->wall_sum += sh->wall_s;
    if (sh->wall_s > s->wall_max) s->wall_max = sh->wall_s;
    return 0;
}

static int take_invariants(const sw_doc *x, const kv_jnode *root, sw_sum *s) {
    const kv_jnode *o = want(x, root, "invariants", KV_J_OBJ);
    if (!o) return -1;
    for (const kv_jnode *m = kv_jfirst(&x->d, o); m; m = kv_jnext(&x->d, m)) {
        int i = slot(s->inv[0].name, sizeof s->inv[0], sizeof s->inv[0].name, &s->n_inv, SW_NAMES, m->key);
        uint64_t v, a, first = 0;
        const kv_jnode *fs = kv_jget(&x->d, m, "first_seed");
        if (i < 0 || m->type != KV_J_OBJ || want_u64(x, m, "violations", &v) || want_u64(x, m, "armed", &a) ||
            !fs || (fs->type != KV_J_NULL && !(fs->type == KV_J_NUM && fs->is_u64)) ||
            (v > 0) != (fs->type == KV_J_NUM))
            return bad(x, "invariant entry not understood:", m->key);
        first = fs->u64;
        sw_inv *e = &s->inv[i];
        if (v && (!e->violations || first < e->first_seed)) e->first_seed = first;
        e->violations += v;
        e->armed += a;
    }
    return 0;
}

static int take_fault_phase(const sw_doc *x, const kv_jnode *root, sw_sum *s) {
    const kv_jnode *fp = want(x, root, "fault_phase", KV_J_OBJ), *ph, *rows;
    if (!fp || !(ph = want(x, fp, "phases", KV_J_ARR)) || !(rows = want(x, fp, "rows", KV_J_ARR))) return -1;
    int col[SW_PHASES];
    uint32_t nc = 0;
    for (const kv_jnode *p = kv_jfirst(&x->d, ph); p; p = kv_jnext(&x->d, p), nc++) {
        if (p->type != KV_J_STR || nc == SW_PHASES) return bad(x, "fault_phase.phases not understood", NULL);
        if ((col[nc] = slot(s->phase[0], sizeof s->phase[0], sizeof s->phase[0], &s->n_phases, SW_PHASES, p->str)) < 0)
            return bad(x, "too many phases", NULL);
    }
    for (const kv_jnode *r = kv_jfirst(&x->d, rows); r; r = kv_jnext(&x->d, r)) {
        const char *kind = kv_jget_str(&x->d, r, "kind");
        const kv_jnode *counts = kv_jget(&x->d, r, "counts");
        int k = kind ? slot(s->kind[0], sizeof s->kind[0], sizeof s->kind[0], &s->n_kinds, SW_NAMES, kind) : -1;
        if (k < 0 || !counts || counts->type != KV_J_ARR || counts->n != nc)
            return bad(x, "a fault_phase row not understood:", kind ? kind : "(no kind)");
        uint32_t c = 0;
        for (const kv_jnode *v = kv_jfirst(&x->d, counts); v; v = kv_jnext(&x->d, v), c++) {
            if (v->type != KV_J_NUM || !v->is_u64) return bad(x, "a fault_phase count is not a count:", kind);
            s->fp[k][col[c]] += v->u64;
        }
    }
    return 0;
}

static int take_first(const sw_doc *x, const kv_jnode *root, sw_sum *s) {
    const kv_jnode *f = kv_jget(&x->d, root, "first_violation");
    if (!f) return bad(x, "missing member", "first_violation");
    if (f->type == KV_J_NULL) return 0;
    if (f->type != KV_J_OBJ) return bad(x, "wrong type of member", "first_violation");
    uint64_t seed, event, at;
    const kv_jnode *e = kv_jget(&x->d, f, "engine"), *r = kv_jget(&x->d, f, "request");
    char inv[32], detail[512], actor[64], repro[2048];
    if (want_u64(x, f, "seed", &seed) || want_u64(x, f, "event", &event) || want_u64(x, f, "at_ns", &at) ||
        want_str(x, f, "invariant", inv, sizeof inv) || want_str(x, f, "detail", detail, sizeof detail) ||
        want_str(x, f, "actor", actor, sizeof actor) || want_str(x, f, "reproduce", repro, sizeof repro) || !e ||
        !r || e->type != KV_J_NUM || r->type != KV_J_NUM)
        return -1;
    if (s->have_first && s->f_seed <= seed) return 0;
    s->have_first = true;
    s->f_seed = seed, s->f_event = event, s->f_at_ns = at;
    s->f_engine = (int64_t)e->num, s->f_request = (int64_t)r->num;
    memcpy(s->f_inv, inv, sizeof inv);
    memcpy(s->f_detail, detail, sizeof detail);
    memcpy(s->f_actor, actor, sizeof actor);
    memcpy(s->f_repro, repro, sizeof repro);
    return 0;
}

static int take_doc(const char *file, sw_sum *s) {
    static sw_doc x;
    char *text;
    size_t len;
    if (s->n_shards == SW_SHARDS) return fprintf(stderr, "kvsim report: more than %d sweep documents\n", SW_SHARDS), -1;
    if (read_file(file, &text, &len)) return -1;
    x.file = file;
    int rc = kv_jdoc_parse(&x.d, text, len);
    free(text);
    if (rc) {
        fprintf(stderr, "kvsim report: %s: byte %zu: %s (not JSON)\n", file, x.d.err_at, x.d.err);
        return kv_jdoc_free(&x.d), -1;
    }
    const kv_jnode *root = kv_jdoc_root(&x.d);
    const char *schema = kv_jget_str(&x.d, root, "schema");
    uint64_t version = 0;
    sw_shard sh = {.file = file};
    if (!schema || strcmp(schema, "kvconn.sweep")) rc = bad(&x, "\"schema\" is not", "\"kvconn.sweep\"");
    else if (!kv_jget_u64(&x.d, root, "schema_version", &version) || version != 1)
        rc = (fprintf(stderr, "kvsim report: %s: schema_version %" PRIu64 " is not understood (this kvsim reads 1)\n",
                      file, version),
              -1);
    else
        rc = take_params(&x, root, s, &sh) || take_totals(&x, root, s, &sh) || take_invariants(&x, root, s) ||
                     take_fault_phase(&x, root, s) || take_first(&x, root, s) ||
                     add_named(&x, &s->conn, want(&x, root, "connectors", KV_J_OBJ)) ||
                     add_named(&x, &s->reach, want(&x, root, "reach", KV_J_OBJ))
                 ? -1
                 : 0;
    kv_jdoc_free(&x.d);
    if (!rc) s->shard[s->n_shards++] = sh;
    return rc;
}

/* ---- the page ------------------------------------------------------------------------------ */

static void row_u64(FILE *f, const char *name, uint64_t v) {
    fprintf(f, "<tr><th>%s</th><td class=\"n\">", name);
    rh_u64(f, v);
    fputs("</td></tr>\n", f);
}

static void page_params(FILE *f, const sw_sum *s) {
    fputs("<h2>Parameters</h2>\n<table class=\"params\">\n<tr><th>workload</th><td>", f);
    rh_esc(f, s->workload);
    fprintf(f, "</td></tr>\n<tr><th>seeds</th><td>%" PRIu64 "..%" PRIu64 "</td></tr>\n<tr><th>bug switches</th><td>",
            s->first_seed, s->last_seed);
    rh_esc(f, s->bugs[0] ? s->bugs : "none");
    fputs("</td></tr>\n<tr><th>block memory</th><td>", f);
    rh_esc(f, s->kvmem);
    fprintf(f, "</td></tr>\n<tr><th>shards</th><td>%u of %" PRIu64 "%s</td></tr>\n", s->n_shards, s->shard_n,
            s->stop ? " (--stop: each shard stopped at its first violation)" : "");
    fputs("<tr><th>kvsim</th><td>", f);
    rh_esc(f, s->version);
    fputs(", commit ", f);
    rh_esc(f, s->commit);
    fputs(", ", f);
    rh_esc(f, s->build);
    if (s->mixed_builds) fputs(" <span class=\"warn\">(shards from other builds too: see below)</span>", f);
    fputs("</td></tr>\n</table>\n", f);
}

static void page_throughput(FILE *f, const sw_sum *s) {
    double wall = s->wall_max > 0 ? s->wall_max : 1e-9, cpu = s->wall_sum > 0 ? s->wall_sum : 1e-9;
    fputs("<h2>Throughput</h2>\n<table class=\"totals\">\n", f);
    row_u64(f, "runs", s->runs);
    row_u64(f, "violations", s->violations);
    row_u64(f, "simulator errors", s->sim_errors);
    row_u64(f, "events", s->events);
    row_u64(f, "request lifecycles", s->requests);
    fprintf(f, "<tr><th>wall (longest shard)</th><td class=\"n\">%.2f s</td></tr>\n", s->wall_max);
    fprintf(f, "<tr><th>wall (all shards added)</th><td class=\"n\">%.2f s</td></tr>\n", s->wall_sum);
    fprintf(f, "<tr><th>events/s (all shards in parallel)</th><td class=\"n\">%.0f</td></tr>\n", (double)s->events / wall);
    fprintf(f, "<tr><th>events/s (per shard process)</th><td class=\"n\">%.0f</td></tr>\n", (double)s->events / cpu);
    fprintf(f, "<tr><th>requests/s (all shards in parallel)</th><td class=\"n\">%.0f</td></tr>\n",
            (double)s->requests / wall);
    row_u64(f, "store saves", s->store_saves);
    row_u64(f, "store loads", s->store_loads);
    row_u64(f, "rejected speculative loads", s->rejected_loads);
    row_u64(f, "requests turned away", s->turned_away);
    fputs("</table>\n", f);
}

static void page_first(FILE *f, const sw_sum *s) {
    fputs("<h2>First violation</h2>\n", f);
    if (!s->have_first) {
        fputs("<p class=\"none\">none</p>\n", f);
        return;
    }
    fprintf(f, "<table class=\"first\">\n<tr><th>seed</th><td>%" PRIu64 "</td></tr>\n<tr><th>invariant</th><td>",
            s->f_seed);
    rh_esc(f, s->f_inv);
    fputs("</td></tr>\n<tr><th>detail</th><td>", f);
    rh_esc(f, s->f_detail);
    fprintf(f, "</td></tr>\n<tr><th>where</th><td>event %" PRIu64 ", t=%" PRIu64 " ns, actor ", s->f_event, s->f_at_ns);
    rh_esc(f, s->f_actor);
    fprintf(f, ", engine %" PRId64 ", request %" PRId64 "</td></tr>\n</table>\n<p>reproduce:</p>\n<pre class=\"reproduce\">",
            s->f_engine, s->f_request);
    rh_esc(f, s->f_repro);
    fputs("</pre>\n", f);
}

/* One bar pair per invariant: armed (how often the check had something to
 * judge) and violations, both on one log scale so a check armed 50,000
 * times and violated twice shows both. */
static void page_invariants(FILE *f, const sw_sum *s) {
    uint64_t max = 1;
    for (uint32_t i = 0; i < s->n_inv; i++) max = s->inv[i].armed > max ? s->inv[i].armed : max;
    max = s->violations > max ? s->violations : max;
    const int label = 130, width = 560, row = 26;
    double scale = (double)width / log10(1.0 + (double)max);
    fprintf(f, "<h2>Invariants: armed and violated</h2>\n<p class=\"muted\">bars on a log scale; grey: times armed, "
               "red: violations</p>\n<svg class=\"invariants\" xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" "
               "height=\"%d\">\n",
            label + width + 200, (int)s->n_inv * row + 4);
    for (uint32_t i = 0; i < s->n_inv; i++) {
        const sw_inv *e = &s->inv[i];
        int y = (int)i * row + 2, wa = (int)(log10(1.0 + (double)e->armed) * scale),
            wv = (int)(log10(1.0 + (double)e->violations) * scale);
        fputs("<g class=\"inv\" data-inv=\"", f);
        rh_esc(f, e->name);
        fprintf(f, "\"><title>");
        rh_esc(f, e->name);
        fprintf(f, ": %" PRIu64 " violations, armed %" PRIu64, e->violations, e->armed);
        if (e->violations) fprintf(f, ", first seed %" PRIu64, e->first_seed);
        fprintf(f, "</title>\n<text x=\"0\" y=\"%d\">", y + 16);
        rh_esc(f, e->name);
        fprintf(f, "</text><rect class=\"armed\" x=\"%d\" y=\"%d\" width=\"%d\" height=\"10\" fill=\"#afb8c1\"/>"
                   "<rect class=\"violated\" x=\"%d\" y=\"%d\" width=\"%d\" height=\"10\" fill=\"#cf222e\"/>"
                   "<text x=\"%d\" y=\"%d\">%" PRIu64 " / %" PRIu64 "</text></g>\n",
                label, y + 2, wa, label, y + 13, wv, label + width + 8, y + 16, e->violations, e->armed);
    }
    fputs("</svg>\n", f);
}

static void page_heatmap(FILE *f, const sw_sum *s) {
    uint64_t max = 0;
    for (uint32_t k = 0; k < s->n_kinds; k++)
        for (uint32_t p = 0; p < s->n_phases; p++) max = s->fp[k][p] > max ? s->fp[k][p] : max;
    const int label = 150, cw = 96, ch = 24, head = 26;
    fprintf(f, "<h2>Fault kind &times; request phase</h2>\n<p class=\"muted\">times a fault hit a request in that "
               "phase (non-abort faults under 'done'); colour on a log scale, grey: never</p>\n"
               "<svg class=\"heatmap\" xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\">\n",
            label + cw * (int)s->n_phases + 2, head + (int)s->n_kinds * ch + 2);
    for (uint32_t p = 0; p < s->n_phases; p++) {
        fprintf(f, "<text class=\"phase\" x=\"%d\" y=\"18\" text-anchor=\"middle\">", label + cw * (int)p + cw / 2);
        rh_esc(f, s->phase[p]);
        fputs("</text>\n", f);
    }
    for (uint32_t k = 0; k < s->n_kinds; k++) {
        int y = head + (int)k * ch;
        fprintf(f, "<text class=\"kind\" x=\"0\" y=\"%d\">", y + 16);
        rh_esc(f, s->kind[k]);
        fputs("</text>\n", f);
        for (uint32_t p = 0; p < s->n_phases; p++) {
            char fill[8];
            int dark;
            rh_heat(s->fp[k][p], max, fill, &dark);
            int x = label + cw * (int)p;
            fprintf(f, "<rect class=\"cell\" x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"%s\" stroke=\"#fff\">"
                       "<title>",
                    x, y, cw, ch, fill);
            rh_esc(f, s->kind[k]);
            fputs(" \xc3\x97 ", f);
            rh_esc(f, s->phase[p]);
            fprintf(f, ": %" PRIu64 "</title></rect><text x=\"%d\" y=\"%d\" text-anchor=\"middle\" fill=\"%s\">%" PRIu64
                       "</text>\n",
                    s->fp[k][p], x + cw / 2, y + 16, dark ? "#fff" : "#1b1f24", s->fp[k][p]);
        }
    }
    fputs("</svg>\n", f);
}

static void page_list(FILE *f, const char *title, const char *cls, const char *head, const sw_list *l) {
    fprintf(f, "<h2>%s</h2>\n<table class=\"%s\">\n<tr><th>%s</th><th>count</th></tr>\n", title, cls, head);
    for (uint32_t i = 0; i < l->n; i++) {
        fputs("<tr><td>", f);
        rh_esc(f, l->item[i].name);
        fputs("</td><td class=\"n\">", f);
        rh_u64(f, l->item[i].v);
        fputs("</td></tr>\n", f);
    }
    fputs("</table>\n", f);
}

static void page_shards(FILE *f, const sw_sum *s) {
    fputs("<h2>Shards</h2>\n<table class=\"shards\">\n<tr><th>document</th><th>shard</th><th>jobs</th><th>runs</th>"
          "<th>violations</th><th>wall</th><th>events/s</th></tr>\n",
          f);
    for (uint32_t i = 0; i < s->n_shards; i++) {
        const sw_shard *h = &s->shard[i];
        fputs("<tr class=\"shard\"><td>", f);
        rh_esc(f, h->file);
        fprintf(f, "</td><td>%" PRIu64 "/%" PRIu64 "</td><td class=\"n\">%" PRIu64 "</td><td class=\"n\">", h->i, h->n,
                h->jobs);
        rh_u64(f, h->runs);
        fputs("</td><td class=\"n\">", f);
        rh_u64(f, h->violations);
        fprintf(f, "</td><td class=\"n\">%.2f s</td><td class=\"n\">%.0f</td></tr>\n", h->wall_s,
                h->wall_s > 0 ? (double)h->events / h->wall_s : 0.0);
    }
    fputs("</table>\n", f);
}

static void page(FILE *f, const sw_sum *s) {
    rh_begin(f, "kvsim sweep report");
    uint64_t range = s->last_seed - s->first_seed + 1;
    if (s->violations)
        fprintf(f, "<p class=\"verdict bad\">%" PRIu64 " violations in %" PRIu64 " runs</p>\n", s->violations, s->runs);
    else
        fprintf(f, "<p class=\"verdict good\">clean: %" PRIu64 " runs, no violation</p>\n", s->runs);
    if (s->sim_errors)
        fprintf(f, "<p class=\"verdict warn\">%" PRIu64 " simulator errors (resources exhausted)</p>\n", s->sim_errors);
    if (s->n_shards < s->shard_n)
        fprintf(f, "<p class=\"verdict warn\">%u of %" PRIu64 " shards given: the counts cover part of the range</p>\n",
                s->n_shards, s->shard_n);
    else if (s->runs != range && !s->stop)
        fprintf(f, "<p class=\"verdict warn\">%" PRIu64 " runs for a range of %" PRIu64 " seeds</p>\n", s->runs, range);
    page_params(f, s);
    page_first(f, s);
    page_throughput(f, s);
    page_invariants(f, s);
    page_heatmap(f, s);
    page_list(f, "Connector configurations (runs by P's configuration)", "connectors", "configuration", &s->conn);
    page_list(f, "Reach (rare combinations; docs/oracles.md)", "reach", "combination", &s->reach);
    page_shards(f, s);
    rh_end(f);
}

int report_sweep(const char *const *files, int n, const char *out) {
    static sw_sum s;
    memset(&s, 0, sizeof s);
    for (int i = 0; i < n; i++)
        if (take_doc(files[i], &s)) return EXIT_BAD_INPUT;
    FILE *f = kv_cli_open_out(out, "w");
    if (!f) return fprintf(stderr, "kvsim report: cannot write %s\n", out), EXIT_BAD_INPUT;
    page(f, &s);
    if (fclose(f)) return fprintf(stderr, "kvsim report: cannot write %s\n", out), EXIT_BAD_INPUT;
    printf("report: %s (%u shard documents, %" PRIu64 " runs, %" PRIu64 " violations)\n",
           kv_cli_is_stdout(out) ? "stdout" : out, s.n_shards, s.runs, s.violations);
    return EXIT_CLEAN;
}
