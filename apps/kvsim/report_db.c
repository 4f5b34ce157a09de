/* apps/kvsim/report_db.c — kvsim report --db: one page of a findings
 * database (replay/db.h): its runs, then every case with its status,
 * signature, invariant, the runs that found it, its scenario text (the
 * shrunk one when kvsim shrink made one) and a Perfetto trace.
 *
 * The traces are files next to the page, OUT.d/case-ID.json, linked by a
 * relative path, not data: URIs inside it: a trace is some hundreds of KiB
 * per case, so a database of tens of cases would make a page of tens of
 * MiB that a browser loads in full before showing anything, and browsers
 * refuse to open a data: URL as a page of its own. A directory travels
 * with the page (a CI artifact keeps both). With -o - there is no place
 * for them: the page then gives the command that writes each trace. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "apps/kvsim/kvsim.h"
#include "apps/kvsim/report.h"
#include "replay/db.h"

typedef struct runs_vec {
    replay_run_info *v;
    size_t n, cap;
    bool oom;
} runs_vec;

static void keep_run(void *ctx, const replay_run_info *r) {
    runs_vec *rv = ctx;
    if (rv->n == rv->cap) {
        size_t cap = rv->cap ? rv->cap * 2 : 16;
        replay_run_info *v = realloc(rv->v, cap * sizeof *v);
        if (!v) {
            rv->oom = true;
            return;
        }
        rv->v = v;
        rv->cap = cap;
    }
    rv->v[rv->n++] = *r;
}

static const replay_run_info *find_run(const runs_vec *rv, int64_t id) {
    for (size_t i = 0; i < rv->n; i++)
        if (rv->v[i].id == id) return &rv->v[i];
    return NULL;
}

/* Where the traces go: OUT without its extension, plus ".d"; href is the
 * same directory relative to the page. */
typedef struct trace_dir {
    bool on;
    char path[1024], href[512];
} trace_dir;

static int trace_dir_make(const char *out, trace_dir *t) {
    t->on = !kv_cli_is_stdout(out);
    if (!t->on) return 0;
    const char *base = strrchr(out, '/');
    base = base ? base + 1 : out;
    const char *dot = strrchr(base, '.');
    size_t stem = dot && dot != base ? (size_t)(dot - out) : strlen(out), bstem = stem - (size_t)(base - out);
    if (stem + 3 > sizeof t->path || bstem + 3 > sizeof t->href)
        return fprintf(stderr, "kvsim report: -o %s: name too long\n", out), -1;
    snprintf(t->path, sizeof t->path, "%.*s.d", (int)stem, out);
    snprintf(t->href, sizeof t->href, "%.*s.d", (int)bstem, base);
    if (mkdir(t->path, 0755) && errno != EEXIST)
        return fprintf(stderr, "kvsim report: cannot make %s: %s\n", t->path, strerror(errno)), -1;
    return 0;
}

/* A relative link: bytes outside the unreserved set percent-encoded, so a
 * page name with '#', '?', '%' or a blank still links to its files. */
static void url(FILE *f, const char *s) {
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || strchr("-._~/", c))
            fputc(c, f);
        else
            fprintf(f, "%%%02X", c);
    }
}

/* What the page says about one case's trace. */
typedef struct case_trace {
    bool written, damaged, replayed, violated, same_hash;
    char file[64];
    char note[512];
    sim_result r;
} case_trace;

/* Reruns the case's minimized scenario (else the original) with the
 * Perfetto writer on, into DIR/case-ID.json. */
static void write_trace(replay_db *db, const trace_dir *t, sim_world *w, const replay_case_info *i, case_trace *ct) {
    static replay_case c;
    replay_err err = {0};
    memset(ct, 0, sizeof *ct);
    snprintf(ct->file, sizeof ct->file, "case-%" PRId64 ".json", i->id);
    if (replay_db_case_get(db, i->id, &c, &err) != KV_OK) {
        ct->damaged = true;
        snprintf(ct->note, sizeof ct->note, "%s", err.msg);
        return;
    }
    if (!t->on) return;
    char path[1200];
    snprintf(path, sizeof path, "%s/%s", t->path, ct->file);
    FILE *json = fopen(path, "w");
    if (!json) {
        snprintf(ct->note, sizeof ct->note, "cannot write %.480s", path);
        return;
    }
    sim_world_set_json(w, json);
    kv_status st = sim_world_run(w, i->have_min ? &c.min.cfg : &c.sc.cfg, NULL, &ct->r);
    sim_world_set_json(w, NULL);
    bool closed = fclose(json) == 0;
    ct->written = st == KV_OK && closed;
    ct->replayed = st == KV_OK;
    ct->violated = ct->replayed && ct->r.violated;
    ct->same_hash = ct->replayed && ct->r.trace_hash == (i->have_min ? i->min_trace_hash : i->trace_hash);
    if (!ct->written) snprintf(ct->note, sizeof ct->note, "the replay failed: %s", kv_status_str(st));
}

static void cmdline_replay(FILE *f, const char *db_path, const replay_case_info *i, const char *trace_json) {
    char spec[1100];
    kv_cmdline c;
    snprintf(spec, sizeof spec, "db:%s:%" PRId64, db_path, i->id);
    kv_cmdline_init(&c, kvsim_prog);
    kv_cmdline_add(&c, "replay");
    kv_cmdline_add(&c, spec);
    if (i->have_min) kv_cmdline_add(&c, "--min");
    if (trace_json) {
        kv_cmdline_add(&c, "--trace-json");
        kv_cmdline_add(&c, trace_json);
    }
    rh_esc(f, c.s);
}

static void page_runs(FILE *f, const runs_vec *rv) {
    fputs("<h2>Runs</h2>\n<table class=\"runs\">\n<tr><th>run</th><th>command line</th><th>commit</th><th>started</th>"
          "<th>ended</th><th>scenarios</th><th>findings</th><th>new cases</th></tr>\n",
          f);
    for (size_t k = 0; k < rv->n; k++) {
        const replay_run_info *r = &rv->v[k];
        fprintf(f, "<tr class=\"run\" id=\"run-%" PRId64 "\"><td class=\"n\">%" PRId64 "</td><td><code>", r->id, r->id);
        rh_esc(f, r->tool);
        fputc(' ', f);
        rh_esc(f, r->config);
        fputs("</code></td><td>", f);
        rh_esc(f, r->git_commit);
        fputs("</td><td>", f);
        rh_time(f, r->started_at);
        fputs("</td><td>", f);
        rh_time(f, r->ended_at);
        fprintf(f, "</td><td class=\"n\">%" PRId64 "</td><td class=\"n\">%" PRId64 "</td><td class=\"n\">%" PRId64
                   "</td></tr>\n",
                r->scenarios, r->findings, r->new_cases);
    }
    fputs("</table>\n", f);
}

typedef struct found_ctx {
    FILE *f;
    const runs_vec *rv;
    int rows;
} found_ctx;

static void found_row(void *ctx, const replay_case_run *h) {
    found_ctx *c = ctx;
    FILE *f = c->f;
    const replay_run_info *r = find_run(c->rv, h->run);
    c->rows++;
    fprintf(f, "<tr class=\"found\"><td class=\"n\"><a href=\"#run-%" PRId64 "\">%" PRId64 "</a></td><td><code>", h->run,
            h->run);
    if (r) {
        rh_esc(f, r->tool);
        fputc(' ', f);
        rh_esc(f, r->config);
    } else {
        fputs("(no run recorded)", f);
    }
    fputs("</code></td><td>", f);
    rh_time(f, h->first_at);
    if (h->last_at != h->first_at) {
        fputs(" .. ", f);
        rh_time(f, h->last_at);
    }
    fprintf(f, "</td><td class=\"n\">%" PRId64 "</td><td class=\"n\">", h->hits);
    if (h->have_seed) fprintf(f, "%" PRIu64, h->first_seed);
    else fputc('-', f);
    fputs("</td></tr>\n", f);
}

static void page_trace_cell(FILE *f, const char *db_path, const trace_dir *t, const replay_case_info *i,
                            const case_trace *ct) {
    if (ct->written) {
        fputs("<a class=\"trace\" href=\"", f);
        url(f, t->href);
        fputc('/', f);
        url(f, ct->file);
        fputs("\">", f);
        rh_esc(f, ct->file);
        fputs("</a>", f);
    } else if (ct->damaged || ct->note[0]) {
        fputs("<span class=\"warn\">", f);
        rh_esc(f, ct->note);
        fputs("</span>", f);
    } else {
        fputs("<code>", f);
        char file[64];
        snprintf(file, sizeof file, "case-%" PRId64 ".json", i->id);
        cmdline_replay(f, db_path, i, file);
        fputs("</code>", f);
    }
}

static void page_case_row(FILE *f, const char *db_path, const trace_dir *t, const replay_case_info *i,
                          const case_trace *ct) {
    fprintf(f, "<tr class=\"case\"><td class=\"n\"><a href=\"#case-%" PRId64 "\">%" PRId64 "</a></td>", i->id, i->id);
    fprintf(f, "<td class=\"%s\">%s</td><td>", i->fixed ? "fixed" : "open", i->fixed ? "fixed" : "open");
    rh_esc(f, i->origin);
    fputs("</td><td>", f);
    rh_esc(f, i->invariant);
    fprintf(f, "</td><td class=\"n\">%" PRId64 "</td><td><code>", i->hits);
    rh_esc(f, i->signature);
    fputs("</code></td><td>", f);
    page_trace_cell(f, db_path, t, i, ct);
    fputs("</td></tr>\n", f);
}

static kv_status page_case(FILE *f, replay_db *db, const char *db_path, const runs_vec *rv,
                           const replay_case_info *i, const case_trace *ct, replay_err *err) {
    static char text[SIM_SCENARIO_TEXT_MAX];
    fprintf(f, "<section class=\"case-detail\" id=\"case-%" PRId64 "\">\n<h3>case %" PRId64 " <span class=\"%s\">%s</span></h3>\n",
            i->id, i->id, i->fixed ? "fixed" : "open", i->fixed ? "fixed" : "open");
    fputs("<table>\n<tr><th>signature</th><td><code>", f);
    rh_esc(f, i->signature);
    fputs("</code> (", f);
    rh_esc(f, i->sig_short);
    fputs(")</td></tr>\n<tr><th>first violation</th><td>", f);
    rh_esc(f, i->detail);
    fputs("</td></tr>\n<tr><th>origin</th><td>", f);
    rh_esc(f, i->origin);
    if (i->have_seed) fprintf(f, ", sweep seed %" PRIu64, i->seed);
    fputs("</td></tr>\n<tr><th>seen</th><td>", f);
    rh_time(f, i->first_seen);
    fputs(" .. ", f);
    rh_time(f, i->last_seen);
    fprintf(f, ", %" PRId64 " hits</td></tr>\n<tr><th>recorded</th><td>trace hash %016" PRIx64 " by commit ", i->hits,
            i->trace_hash);
    rh_esc(f, i->git_commit);
    fprintf(f, ", scenario format v%u, %u directives", i->format_version, i->directives);
    if (i->have_min)
        fprintf(f, "; shrunk to %u (trace hash %016" PRIx64 ")", i->min_directives, i->min_trace_hash);
    fputs("</td></tr>\n<tr><th>replay</th><td><code>", f);
    cmdline_replay(f, db_path, i, NULL);
    fputs("</code></td></tr>\n", f);
    if (ct->replayed) {
        fprintf(f, "<tr><th>replayed now</th><td>%s", ct->violated ? "violates: " : "runs clean");
        if (ct->violated) {
            rh_esc(f, kv_inv_name(ct->r.inv));
            fputc(' ', f);
            rh_esc(f, ct->r.detail);
        }
        fprintf(f, "; trace hash %016" PRIx64 " %s</td></tr>\n", ct->r.trace_hash,
                ct->same_hash ? "(as recorded)" : "(<span class=\"warn\">not as recorded</span>)");
    }
    fputs("</table>\n<h4>Runs that found it</h4>\n<table class=\"found-by\">\n<tr><th>run</th><th>command line</th>"
          "<th>when</th><th>hits</th><th>first seed</th></tr>\n",
          f);
    found_ctx fc = {.f = f, .rv = rv};
    kv_status s = replay_db_case_runs(db, i->id, found_row, &fc, err);
    if (s != KV_OK) return s;
    fputs("</table>\n", f);
    replay_err terr = {0};
    if (replay_db_case_text(db, i->id, i->have_min, text, sizeof text, &terr) == KV_OK) {
        fprintf(f, "<h4>%s</h4>\n<pre class=\"scenario\">", i->have_min ? "Shrunk scenario (.kvs)"
                                                                          : "Scenario (.kvs; not shrunk: kvsim shrink "
                                                                            "makes a shorter one)");
        rh_esc(f, text);
        fputs("</pre>\n", f);
    } else {
        fputs("<p class=\"warn\">scenario text: ", f);
        rh_esc(f, terr.msg);
        fputs("</p>\n", f);
    }
    fputs("</section>\n", f);
    return KV_OK;
}

static kv_status page(FILE *f, replay_db *db, const char *db_path, const trace_dir *t, const runs_vec *rv,
                      const int64_t *ids, size_t n, uint32_t *traces, replay_err *err) {
    static replay_case_info info;
    case_trace *ct = calloc(n ? n : 1, sizeof *ct);
    sim_world *w = NULL;
    if (!ct || sim_world_new(&w) != KV_OK) return free(ct), replay_fail(err, REPLAY_E_IO, "out of memory");
    size_t open = 0;
    kv_status s = KV_OK;
    for (size_t k = 0; s == KV_OK && k < n; k++) {
        s = replay_db_case_info(db, ids[k], &info, err);
        if (s == KV_OK) write_trace(db, t, w, &info, &ct[k]);
        open += s == KV_OK && !info.fixed;
        *traces += ct[k].written;
    }
    rh_begin(f, "kvsim findings report");
    fputs("<p>database <code>", f);
    rh_esc(f, db_path);
    fputs("</code></p>\n", f);
    if (open)
        fprintf(f, "<p class=\"verdict bad\">%zu cases: %zu open, %zu fixed</p>\n", n, open, n - open);
    else
        fprintf(f, "<p class=\"verdict good\">%zu cases, none open</p>\n", n);
    if (!t->on)
        fputs("<p class=\"muted\">written to stdout: no trace files; each case gives the command that writes its "
              "trace</p>\n",
              f);
    else
        fputs("<p class=\"muted\">traces: Chrome trace-event JSON of each case's shrunk scenario (else the original), "
              "for Perfetto (ui.perfetto.dev, Open trace file) or chrome://tracing</p>\n",
              f);
    page_runs(f, rv);
    fputs("<h2>Cases</h2>\n<table class=\"cases\">\n<tr><th>id</th><th>status</th><th>origin</th><th>invariant</th>"
          "<th>hits</th><th>signature</th><th>trace</th></tr>\n",
          f);
    for (size_t k = 0; s == KV_OK && k < n; k++)
        if ((s = replay_db_case_info(db, ids[k], &info, err)) == KV_OK) page_case_row(f, db_path, t, &info, &ct[k]);
    fputs("</table>\n", f);
    for (size_t k = 0; s == KV_OK && k < n; k++)
        if ((s = replay_db_case_info(db, ids[k], &info, err)) == KV_OK) s = page_case(f, db, db_path, rv, &info, &ct[k], err);
    rh_end(f);
    sim_world_free(w);
    free(ct);
    return s;
}

int report_db(const char *db_path, const char *out) {
    replay_db *db;
    replay_err err = {0};
    if (replay_db_open(db_path, REPLAY_DB_READ, &db, &err) != KV_OK) return kvsim_db_fail("report", &err);
    runs_vec rv = {0};
    int64_t *ids = NULL;
    size_t n = 0;
    trace_dir t = {0};
    kv_status s = replay_db_each_run(db, keep_run, &rv, &err);
    if (s == KV_OK && rv.oom) s = replay_fail(&err, REPLAY_E_IO, "out of memory");
    if (s == KV_OK) s = replay_db_case_ids(db, &ids, &n, &err);
    int rc = s == KV_OK ? EXIT_CLEAN : kvsim_db_fail("report", &err);
    FILE *f = NULL;
    if (!rc && trace_dir_make(out, &t)) rc = EXIT_BAD_INPUT;
    if (!rc && !(f = kv_cli_open_out(out, "w")))
        rc = (fprintf(stderr, "kvsim report: cannot write %s\n", out), EXIT_BAD_INPUT);
    uint32_t traces = 0;
    if (!rc && (s = page(f, db, db_path, &t, &rv, ids, n, &traces, &err)) != KV_OK) rc = kvsim_db_fail("report", &err);
    if (f && fclose(f) && !rc) rc = (fprintf(stderr, "kvsim report: cannot write %s\n", out), EXIT_BAD_INPUT);
    replay_db_close(db);
    free(ids);
    free(rv.v);
    if (!rc)
        printf("report: %s (%zu cases, %u traces%s%s)\n", kv_cli_is_stdout(out) ? "stdout" : out, n, traces,
               t.on ? " in " : "", t.on ? t.path : "");
    return rc;
}
