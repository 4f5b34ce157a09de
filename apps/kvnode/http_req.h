/* apps/kvnode/http_req.h — a bounded HTTP/1.1 request reader for the
 * bootstrap server (http_boot.c): the bytes a client sent so far go in,
 * out comes "need more", a whole request (method, path, body), or a refusal
 * with the status to answer and why.
 *
 * What it takes: a request line "METHOD /path[?query] HTTP/1.0|1.1", header
 * lines ending in CRLF (a bare LF is taken too), an empty line, then exactly
 * Content-Length bytes of body (none without the header). Everything else is
 * refused, never guessed at: a head over KVN_HTTP_HEAD_MAX bytes or with
 * more than KVN_HTTP_HEADERS_MAX lines (431), a Content-Length over the
 * caller's body limit (413, refused from the header alone, before any body
 * byte is read), Transfer-Encoding (chunked bodies are not read: 501),
 * another HTTP version (505), a target that is not a path, a malformed or
 * repeated Content-Length, folded or malformed header lines, NUL or control
 * bytes in the head (400). Lengths come from the header only after they
 * are checked; the reader never reads past the bytes it was given.
 *
 * Pure: no I/O, no allocation; the caller keeps the bytes. */
#ifndef KVCONN_APPS_KVNODE_HTTP_REQ_H
#define KVCONN_APPS_KVNODE_HTTP_REQ_H

#include <stddef.h>
#include <stdint.h>

#define KVN_HTTP_HEAD_MAX 8192u   /* request line + headers + the empty line */
#define KVN_HTTP_HEADERS_MAX 64u  /* header lines */
#define KVN_HTTP_METHOD_MAX 16u   /* "OPTIONS" fits; longer is refused */
#define KVN_HTTP_PATH_MAX 1024u   /* the path without its query */

typedef enum kvn_http_verdict {
    KVN_HTTP_MORE = 0, /* not a whole request yet: read more */
    KVN_HTTP_DONE,     /* a whole request: method, path and body are set */
    KVN_HTTP_BAD,      /* refused: status and why are set; answer and close */
} kvn_http_verdict;

typedef struct kvn_http_req {
    char method[KVN_HTTP_METHOD_MAX + 1]; /* as sent (methods are case-sensitive) */
    char path[KVN_HTTP_PATH_MAX + 1];     /* the target up to '?', NUL-ended */
    uint32_t minor;                       /* HTTP/1.<minor> */
    size_t head_len;                      /* bytes of the head, the empty line included */
    size_t body_len;                      /* Content-Length (0 without one) */
    const char *body;                     /* into the caller's bytes; body_len of them */
    int status;                           /* KVN_HTTP_BAD: the status to answer */
    char why[160];                        /* KVN_HTTP_BAD: what was wrong, for the client */
} kvn_http_req;

/* Reads the len bytes at buf (everything the client sent so far, from its
 * first byte). body_max bounds Content-Length. Call again with more bytes
 * after KVN_HTTP_MORE; r is rewritten each time. */
kvn_http_verdict kvn_http_parse(const char *buf, size_t len, size_t body_max, kvn_http_req *r);

/* The reason phrase of the statuses the server answers ("Not Found"); "" for others. */
const char *kvn_http_reason(int status);

#endif
