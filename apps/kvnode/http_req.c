/* apps/kvnode/http_req.c — see http_req.h. The head is read line by line
 * from the first byte on every call (it is at most KVN_HTTP_HEAD_MAX
 * bytes), so there is no state to carry between calls and nothing a client
 * sends in pieces can put the reader in a state a whole request would not. */
#include "apps/kvnode/http_req.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
static kvn_http_verdict bad(kvn_http_req *r, int status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->why, sizeof r->why, fmt, ap);
    va_end(ap);
    r->status = status;
    return KVN_HTTP_BAD;
}

/* RFC 9110 token characters (method and header names). */
static bool tchar(unsigned char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           (c && strchr("!#$%&'*+-.^_`|~", c));
}

static bool ieq(const char *a, size_t an, const char *b) {
    size_t bn = strlen(b);
    if (an != bn) return false;
    for (size_t i = 0; i < an; i++) {
        char x = a[i], y = b[i];
        if (x >= 'A' && x <= 'Z') x = (char)(x - 'A' + 'a');
        if (x != y) return false;
    }
    return true;
}

/* One line of the head: [s, s + n), without its CR LF. */
typedef struct line {
    const char *s;
    size_t n;
} line;

/* The next line at *at, or false when its LF has not arrived yet. */
static bool next_line(const char *buf, size_t len, size_t *at, line *out) {
    const char *nl = memchr(buf + *at, '\n', len - *at);
    if (!nl) return false;
    out->s = buf + *at;
    out->n = (size_t)(nl - out->s);
    if (out->n && out->s[out->n - 1] == '\r') out->n--;
    *at = (size_t)(nl - buf) + 1;
    return true;
}

static kvn_http_verdict request_line(line l, kvn_http_req *r) {
    const char *sp1 = memchr(l.s, ' ', l.n);
    if (!sp1 || sp1 == l.s) return bad(r, 400, "the request line is not METHOD SP TARGET SP VERSION");
    size_t mlen = (size_t)(sp1 - l.s);
    if (mlen > KVN_HTTP_METHOD_MAX) return bad(r, 400, "the method is longer than %u bytes", KVN_HTTP_METHOD_MAX);
    for (size_t i = 0; i < mlen; i++)
        if (!tchar((unsigned char)l.s[i])) return bad(r, 400, "the method has a byte that is not a token character");
    memcpy(r->method, l.s, mlen);
    r->method[mlen] = 0;
    const char *t = sp1 + 1, *end = l.s + l.n;
    const char *sp2 = memchr(t, ' ', (size_t)(end - t));
    if (!sp2 || sp2 == t) return bad(r, 400, "the request line is not METHOD SP TARGET SP VERSION");
    if (t[0] != '/') return bad(r, 400, "the target is not a path (origin form, starting with '/')");
    size_t tlen = (size_t)(sp2 - t), plen = tlen;
    for (size_t i = 0; i < tlen; i++) {
        unsigned char c = (unsigned char)t[i];
        if (c <= 0x20 || c >= 0x7f) return bad(r, 400, "the target has a byte that is not visible ASCII");
        if (c == '?' && plen == tlen) plen = i;
        if (c == '#') return bad(r, 400, "the target has a fragment");
    }
    if (plen > KVN_HTTP_PATH_MAX) return bad(r, 400, "the path is longer than %u bytes", KVN_HTTP_PATH_MAX);
    memcpy(r->path, t, plen);
    r->path[plen] = 0;
    const char *v = sp2 + 1;
    size_t vlen = (size_t)(end - v);
    if (vlen == 8 && memcmp(v, "HTTP/1.", 7) == 0 && (v[7] == '0' || v[7] == '1')) {
        r->minor = (uint32_t)(v[7] - '0');
        return KVN_HTTP_MORE;
    }
    if (vlen == 8 && memcmp(v, "HTTP/", 5) == 0 && v[6] == '.') return bad(r, 505, "only HTTP/1.0 and HTTP/1.1 are spoken");
    return bad(r, 400, "the request line does not end in HTTP/1.x");
}

/* Content-Length's value: 1..19 digits, nothing else. */
static bool parse_length(const char *s, size_t n, uint64_t *out) {
    if (n == 0 || n > 19) return false;
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') return false;
        v = v * 10u + (uint64_t)(s[i] - '0');
    }
    *out = v;
    return true;
}

static kvn_http_verdict header_line(line l, size_t body_max, bool *have_len, kvn_http_req *r) {
    if (l.s[0] == ' ' || l.s[0] == '\t') return bad(r, 400, "a folded header line (obsolete line folding is not taken)");
    const char *colon = memchr(l.s, ':', l.n);
    if (!colon || colon == l.s) return bad(r, 400, "a header line without NAME:");
    size_t nlen = (size_t)(colon - l.s);
    for (size_t i = 0; i < nlen; i++)
        if (!tchar((unsigned char)l.s[i])) return bad(r, 400, "a header name with a byte that is not a token character");
    const char *v = colon + 1, *end = l.s + l.n;
    while (v < end && (*v == ' ' || *v == '\t')) v++;
    while (end > v && (end[-1] == ' ' || end[-1] == '\t')) end--;
    for (const char *p = v; p < end; p++)
        if ((unsigned char)*p < 0x20 ? *p != '\t' : *p == 0x7f)
            return bad(r, 400, "a header value with a control byte");
    if (ieq(l.s, nlen, "transfer-encoding"))
        return bad(r, 501, "Transfer-Encoding is not supported; send the body with Content-Length");
    if (!ieq(l.s, nlen, "content-length")) return KVN_HTTP_MORE;
    uint64_t n;
    if (*have_len) return bad(r, 400, "Content-Length given twice");
    if (!parse_length(v, (size_t)(end - v), &n)) return bad(r, 400, "Content-Length is not a decimal number");
    if (n > body_max)
        return bad(r, 413, "the body would be %llu bytes; at most %zu are taken", (unsigned long long)n, body_max);
    *have_len = true;
    r->body_len = (size_t)n;
    return KVN_HTTP_MORE;
}

kvn_http_verdict kvn_http_parse(const char *buf, size_t len, size_t body_max, kvn_http_req *r) {
    memset(r, 0, sizeof *r);
    size_t at = 0;
    uint32_t lines = 0;
    bool have_len = false;
    line l;
    for (;;) {
        if (!next_line(buf, len, &at, &l)) {
            if (len > KVN_HTTP_HEAD_MAX) return bad(r, 431, "the request head is over %u bytes", KVN_HTTP_HEAD_MAX);
            return KVN_HTTP_MORE;
        }
        if (at > KVN_HTTP_HEAD_MAX) return bad(r, 431, "the request head is over %u bytes", KVN_HTTP_HEAD_MAX);
        if (memchr(l.s, 0, l.n) || memchr(l.s, '\r', l.n)) return bad(r, 400, "a NUL or a bare CR in the request head");
        kvn_http_verdict v;
        if (lines == 0) {
            if (l.n == 0) return bad(r, 400, "an empty request line");
            v = request_line(l, r);
        } else if (l.n == 0) {
            break;
        } else if (lines > KVN_HTTP_HEADERS_MAX) {
            return bad(r, 431, "more than %u header lines", KVN_HTTP_HEADERS_MAX);
        } else {
            v = header_line(l, body_max, &have_len, r);
        }
        if (v != KVN_HTTP_MORE) return v;
        lines++;
    }
    r->head_len = at;
    if (len - at < r->body_len) return KVN_HTTP_MORE;
    r->body = buf + at;
    return KVN_HTTP_DONE;
}

const char *kvn_http_reason(int status) {
    switch (status) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 413: return "Content Too Large";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    case 505: return "HTTP Version Not Supported";
    default: return "";
    }
}
