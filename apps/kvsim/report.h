/* apps/kvsim/report.h — kvsim report's pieces: the HTML page helpers
 * (report_html.c), the sweep page from kvconn.sweep documents
 * (report_sweep.c) and the findings page from a findings database
 * (report_db.c). cmd_report.c parses the command line and calls one page.
 *
 * Every page is one self-contained HTML file: inline CSS and inline SVG,
 * no script, nothing fetched, so it opens from a CI artifact or a mail
 * attachment as it is. Every string that comes from data (a JSON document,
 * a database row) goes through rh_esc. */
#ifndef KVSIM_REPORT_H
#define KVSIM_REPORT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* <!doctype html> through <body> with the page's style and an <h1>. */
void rh_begin(FILE *f, const char *title);
void rh_end(FILE *f);
/* s with & < > " ' as character references (NULL writes nothing). */
void rh_esc(FILE *f, const char *s);
void rh_escn(FILE *f, const char *s, size_t n);
/* 1234567 as "1,234,567": the counts are read, not parsed. */
void rh_u64(FILE *f, uint64_t v);
/* A unix time as "2026-01-02 03:04:05Z"; "-" for 0. */
void rh_time(FILE *f, int64_t t);
/* The fill of a heatmap cell: v on a log scale up to max. */
void rh_heat(uint64_t v, uint64_t max, char out[8], int *dark);

/* The pages; each returns an exit code (apps/common/exit_codes.h) after
 * printing what went wrong. out is a path or "-" (stdout). */
int report_sweep(const char *const *files, int n, const char *out);
int report_db(const char *db_path, const char *out);

#endif
