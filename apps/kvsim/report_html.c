/* apps/kvsim/report_html.c — the HTML pieces kvsim report's pages share. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "apps/kvsim/report.h"

static const char style[] =
    "body{font:14px/1.45 system-ui,sans-serif;margin:24px auto;max-width:1200px;padding:0 16px;color:#1b1f24}"
    "h1{font-size:22px}h2{font-size:17px;margin-top:28px;border-bottom:1px solid #d0d7de;padding-bottom:4px}"
    "table{border-collapse:collapse;margin:8px 0}td,th{border:1px solid #d0d7de;padding:3px 8px;text-align:left;"
    "vertical-align:top}th{background:#f6f8fa}td.n{text-align:right;font-variant-numeric:tabular-nums}"
    "pre,code{font:12px/1.4 ui-monospace,monospace}pre{background:#f6f8fa;padding:8px;overflow:auto;"
    "max-height:420px}.verdict{padding:8px 12px;border-radius:6px;font-weight:600;display:inline-block}"
    ".bad{background:#ffebe9;color:#a40e26}.good{background:#dafbe1;color:#116329}"
    ".warn{background:#fff8c5;color:#7d4e00}.muted{color:#656d76}svg text{font:12px system-ui,sans-serif}"
    ".open{color:#a40e26;font-weight:600}.fixed{color:#116329;font-weight:600}";

void rh_begin(FILE *f, const char *title) {
    fputs("<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>", f);
    rh_esc(f, title);
    fprintf(f, "</title>\n<style>%s</style>\n</head><body>\n<h1>", style);
    rh_esc(f, title);
    fputs("</h1>\n", f);
}

void rh_end(FILE *f) { fputs("</body></html>\n", f); }

void rh_escn(FILE *f, const char *s, size_t n) {
    for (size_t i = 0; s && i < n; i++) {
        switch (s[i]) {
        case '&': fputs("&amp;", f); break;
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '"': fputs("&quot;", f); break;
        case '\'': fputs("&#39;", f); break;
        default: fputc(s[i], f);
        }
    }
}

void rh_esc(FILE *f, const char *s) {
    if (s) rh_escn(f, s, strlen(s));
}

void rh_u64(FILE *f, uint64_t v) {
    char d[32];
    int n = snprintf(d, sizeof d, "%" PRIu64, v);
    for (int i = 0; i < n; i++) {
        if (i && (n - i) % 3 == 0) fputc(',', f);
        fputc(d[i], f);
    }
}

void rh_time(FILE *f, int64_t t) {
    struct tm tm;
    time_t tt = (time_t)t;
    char buf[32];
    if (!t || !gmtime_r(&tt, &tm)) {
        fputc('-', f);
        return;
    }
    strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%SZ", &tm);
    fputs(buf, f);
}

/* White through blue: a cell hit once stays visibly apart from one never
 * hit (grey), and the counts span five orders of magnitude, hence log. */
void rh_heat(uint64_t v, uint64_t max, char out[8], int *dark) {
    if (!v || !max) {
        snprintf(out, 8, "#eeeeee");
        *dark = 0;
        return;
    }
    double t = log1p((double)v) / log1p((double)max);
    int r = (int)(222 - t * (222 - 8)), g = (int)(235 - t * (235 - 48)), b = (int)(247 - t * (247 - 107));
    snprintf(out, 8, "#%02x%02x%02x", r & 255, g & 255, b & 255);
    *dark = t > 0.55;
}
