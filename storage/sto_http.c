/* sto_http: http:// and https:// objects as byte sources, read with libcurl.
 *
 * Each source owns one easy handle in its own multi handle, so that all its
 * requests reuse one keep-alive connection (HTTP/1.1, or HTTP/2 over TLS).
 * Open sends a HEAD (a GET of bytes=0-0 where HEAD is refused or says no
 * size) and fixes the object's size, ETag and Last-Modified.
 *
 * Reads are served from a streaming transfer: a read of STREAM_MIN bytes
 * or more at offset 0, or one that starts where the previous read ended,
 * asks for [off, end of object)
 * and later sequential reads keep consuming that one response. The write
 * callback fills the caller's buffer, keeps the rest of curl's current chunk
 * (at most CURL_MAX_WRITE_SIZE) in a spill buffer and pauses the transfer
 * once the buffer is full, so a stream costs one request however small the
 * reads. Any other read asks for exactly its own range (the connection stays
 * reusable for the next one) and drops a stream left open.
 *
 * Every response is checked before a byte of its body reaches the caller:
 * the status, Content-Range against the range asked and the size fixed at
 * open, the ETag (If-Match is sent with every range when the ETag is a
 * strong one), Content-Length (at most 2^62), the total header bytes
 * (HEADER_BYTES_MAX), and each redirect's scheme and host. Transient
 * failures (no connection, a stall, a reset, a short body, 5xx) are retried
 * with exponential backoff and jitter, each retry asking for the range from
 * the first byte not yet received; 4xx and hostile responses fail at once.
 *
 * Connections outlive their source: a closed source's easy and multi
 * handles (the multi holds its idle keep-alive connections) go to a small
 * process-wide pool of idle pairs, and the next source opened on the same
 * scheme, host and port takes one, so a feeder's many requests to one
 * server (an object's HEAD, its index, its ranges, the next object) reuse
 * one connection instead of a new TCP (and TLS) handshake each. A pair is
 * only ever used by the thread that holds it; the pool hands it over under
 * its mutex. libcurl's own shared connection cache (CURLSH with
 * CURL_LOCK_DATA_CONNECT) is not used: in libcurl 7.88 it is not safe
 * between threads (its known bug 11.11, curl issue #4915: the cache's
 * walk reads connections in use by other threads). What is safe to share
 * is: a CURLSH of the DNS cache and TLS session IDs, with a mutex per
 * curl_lock_data, set on every easy handle.
 *
 * Thread-safety: a source is used by one thread at a time (sto.h); sources
 * share libcurl's global state (set up once, pthread_once), the pool and
 * the share, both behind mutexes.
 */
#include <curl/curl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "sl_alloc.h"
#include "sto_impl.h"

#define HEADER_BYTES_MAX (64 * 1024) /* all header lines of one request, redirects included */
#define OBJECT_BYTES_MAX (UINT64_C(1) << 62)
#define CAUSE_MAX 480
#define ORIGIN_MAX 300                  /* "scheme://host:port" of a pooled pair */
#define STREAM_MIN ((size_t)256 * 1024) /* a read at 0 this large starts a stream (smaller: a probe) */

enum req_kind { REQ_HEAD, REQ_PROBE, REQ_RANGE };
/* How a request ended. */
enum outcome { OUT_OK = 0, OUT_RETRY, OUT_FATAL, OUT_CHANGED };

/* The response being received (reset at each status line, so a redirect's
 * hop leaves nothing behind). */
struct resp {
    long status;
    char reason[64];
    int has_length;
    uint64_t length;
    int has_range, range_star, total_known;
    uint64_t first, last, total;
    int has_location;
    char etag[STO_ETAG_MAX];
    const char *etag_bad; /* why the ETag is unusable, or NULL */
};

struct http_src {
    struct sto_src base; /* first: sto.h's contract */
    CURL *easy;
    CURLM *multi;
    char *url;                   /* what is asked for (base.name for http(s); an s3:// name's endpoint URL) */
    struct curl_slist *hdr_meta; /* the auth's headers (a session token), sent with HEAD and probes; or NULL */
    struct curl_slist *if_match; /* those and "If-Match: <etag>" (a strong ETag), sent with ranges; or NULL */
    char *ca_file;
    char host[256]; /* the URL's host, which redirects must keep */
    long stall_ms, connect_ms;
    int max_retries, cross_host;
    long backoff_ms, backoff_max_ms;
    uint64_t rng;
    char errbuf[CURL_ERROR_SIZE];
    char origin[ORIGIN_MAX]; /* scheme://host:port: which pooled pair may serve it (pool_take) */
    int reusable;            /* its handles go back to the pool at close */

    /* the request in flight */
    enum req_kind kind;
    int active, paused;
    uint64_t start, end; /* REQ_RANGE: the bytes asked, [start, end) */
    uint64_t net;        /* the next byte the response's body brings */
    uint64_t last_end;   /* where the previous read ended (a read there continues a stream) */
    struct resp r;
    size_t header_bytes;
    int headers_done; /* the final response's blank line came */
    int body_ok;      /* the final headers were checked: the body may flow */
    int head_refused; /* REQ_HEAD: 405 or 501, or no size: probe with a GET */
    int probe_stop;   /* a HEAD or probe got its answer: the body is not read */
    int got_byte;     /* a byte of this request came: the stall bound is stall_ms from here */
    CURLcode result;
    enum outcome fail; /* set by a callback or the stall check; OUT_OK: none */
    int fail_code;
    char cause[CAUSE_MAX];
    int64_t last_rx_ms;

    /* where the body goes during a read */
    uint8_t *dst;
    size_t want, have;
    uint8_t *spill; /* bytes received past the caller's buffer, served first by the next read */
    size_t spill_cap, spill_len, spill_pos;
};

static pthread_once_t global_once = PTHREAD_ONCE_INIT;
static CURLcode global_rc = CURLE_FAILED_INIT;

/* The share: DNS and TLS sessions, one lock per kind of data (libcurl asks
 * for at most one lock of each kind at a time). NULL: none (no handle is
 * then given one; each resolves and handshakes on its own). */
static CURLSH *share;
static pthread_mutex_t share_mu[CURL_LOCK_DATA_LAST];

static void share_lock(CURL *h, curl_lock_data d, curl_lock_access a, void *ud)
{
    (void)h;
    (void)a;
    (void)ud;
    if (d >= 0 && d < CURL_LOCK_DATA_LAST)
        pthread_mutex_lock(&share_mu[d]);
}

static void share_unlock(CURL *h, curl_lock_data d, void *ud)
{
    (void)h;
    (void)ud;
    if (d >= 0 && d < CURL_LOCK_DATA_LAST)
        pthread_mutex_unlock(&share_mu[d]);
}

static void global_init(void)
{
    global_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
    if (global_rc != CURLE_OK)
        return;
    for (int i = 0; i < CURL_LOCK_DATA_LAST; i++)
        pthread_mutex_init(&share_mu[i], NULL);
    CURLSH *sh = curl_share_init();
    if (sh != NULL && (curl_share_setopt(sh, CURLSHOPT_LOCKFUNC, share_lock) != CURLSHE_OK ||
                       curl_share_setopt(sh, CURLSHOPT_UNLOCKFUNC, share_unlock) != CURLSHE_OK ||
                       curl_share_setopt(sh, CURLSHOPT_SHARE, CURL_LOCK_DATA_DNS) != CURLSHE_OK ||
                       curl_share_setopt(sh, CURLSHOPT_SHARE, CURL_LOCK_DATA_SSL_SESSION) != CURLSHE_OK)) {
        curl_share_cleanup(sh);
        sh = NULL;
    }
    share = sh; /* kept for the process's life: handles in the pool use it */
}

/* ---- the pool of idle handle pairs ---- */

#define POOL_MAX 32 /* idle pairs kept; one more closes the oldest's connections */

struct pooled {
    CURL *easy;
    CURLM *multi;
    char origin[ORIGIN_MAX]; /* scheme://host:port its connections go to */
};

static pthread_mutex_t pool_mu = PTHREAD_MUTEX_INITIALIZER;
static struct pooled pool[POOL_MAX];
static size_t pool_len; /* pool[0] the oldest */

/* The scheme, host and port of `url` (lower case, port explicit) in out;
 * "" when it cannot be taken (such a pair is never pooled). */
static void origin_of(const char *url, char *out, size_t cap)
{
    CURLU *u = curl_url();
    char *scheme = NULL, *host = NULL, *port = NULL;
    out[0] = '\0';
    if (u != NULL && curl_url_set(u, CURLUPART_URL, url, 0) == CURLUE_OK &&
        curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) == CURLUE_OK &&
        curl_url_get(u, CURLUPART_HOST, &host, 0) == CURLUE_OK &&
        curl_url_get(u, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT) == CURLUE_OK) {
        int n = snprintf(out, cap, "%s://%s:%s", scheme, host, port);
        if (n < 0 || (size_t)n >= cap)
            out[0] = '\0';
        for (char *p = out; *p != '\0'; p++)
            if (*p >= 'A' && *p <= 'Z')
                *p = (char)(*p - 'A' + 'a');
    }
    curl_free(scheme);
    curl_free(host);
    curl_free(port);
    curl_url_cleanup(u);
}

/* An idle pair whose connections go to `origin` (the newest such), taken
 * out of the pool: 0; none: -1. */
static int pool_take(const char *origin, CURL **easy, CURLM **multi)
{
    int rc = -1;
    pthread_mutex_lock(&pool_mu);
    for (size_t i = pool_len; i-- > 0;)
        if (strcmp(pool[i].origin, origin) == 0) {
            *easy = pool[i].easy;
            *multi = pool[i].multi;
            memmove(&pool[i], &pool[i + 1], (pool_len - i - 1) * sizeof(pool[0]));
            pool_len--;
            rc = 0;
            break;
        }
    pthread_mutex_unlock(&pool_mu);
    return rc;
}

/* Keep an idle pair (its options reset: nothing in it points at a freed
 * source); when the pool is full the oldest pair is closed instead. */
static void pool_put(const char *origin, CURL *easy, CURLM *multi)
{
    struct pooled old = {0};
    curl_easy_reset(easy); /* keeps the connections (in the multi), drops the callbacks' pointers */
    pthread_mutex_lock(&pool_mu);
    if (pool_len == POOL_MAX) {
        old = pool[0];
        memmove(&pool[0], &pool[1], (POOL_MAX - 1) * sizeof(pool[0]));
        pool_len--;
    }
    pool[pool_len].easy = easy;
    pool[pool_len].multi = multi;
    snprintf(pool[pool_len].origin, sizeof(pool[0].origin), "%s", origin);
    pool_len++;
    pthread_mutex_unlock(&pool_mu);
    if (old.multi != NULL)
        curl_multi_cleanup(old.multi);
    if (old.easy != NULL)
        curl_easy_cleanup(old.easy);
}

static int64_t now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static void set_fail(struct http_src *s, enum outcome o, int code, const char *fmt, ...) SL_PRINTF(4, 5);
static void set_fail(struct http_src *s, enum outcome o, int code, const char *fmt, ...)
{
    if (s->fail != OUT_OK)
        return; /* the first cause wins */
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->cause, sizeof(s->cause), fmt, ap);
    va_end(ap);
    s->fail = o;
    s->fail_code = code;
}

/* ---- parsing header values ---- */

/* Decimal digits only, no sign, no overflow; *end past them. */
static int parse_u64(const char *p, const char **end, uint64_t *v)
{
    uint64_t x = 0;
    const char *q = p;
    for (; *q >= '0' && *q <= '9'; q++) {
        if (x > (UINT64_MAX - 9) / 10)
            return -1;
        x = x * 10 + (uint64_t)(*q - '0');
    }
    if (q == p)
        return -1;
    *v = x;
    *end = q;
    return 0;
}

/* "bytes a-b/total", "bytes a-b/ *" or "bytes * /total" (no spaces). */
static int parse_content_range(struct resp *r, const char *v)
{
    const char *p;
    if (strncasecmp(v, "bytes ", 6) != 0)
        return -1;
    v += 6;
    if (*v == '*') {
        r->range_star = 1;
        p = v + 1;
    } else {
        if (parse_u64(v, &p, &r->first) != 0 || *p != '-' || parse_u64(p + 1, &p, &r->last) != 0 || r->last < r->first)
            return -1;
    }
    if (*p != '/')
        return -1;
    if (p[1] == '*' && p[2] == '\0') {
        r->total_known = 0;
    } else {
        if (parse_u64(p + 1, &p, &r->total) != 0 || *p != '\0')
            return -1;
        r->total_known = 1;
    }
    r->has_range = 1;
    return 0;
}

/* The host of `url` (Location resolved against the source's URL), lower
 * case, and whether its scheme is http or https. */
static int url_host(const char *base, const char *url, char *host, size_t cap, int *web)
{
    CURLU *u = curl_url();
    char *h = NULL, *scheme = NULL;
    int rc = -1;
    if (u == NULL)
        return -1;
    if ((base == NULL || curl_url_set(u, CURLUPART_URL, base, 0) == CURLUE_OK) &&
        curl_url_set(u, CURLUPART_URL, url, 0) == CURLUE_OK &&
        curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) == CURLUE_OK &&
        curl_url_get(u, CURLUPART_HOST, &h, 0) == CURLUE_OK && strlen(h) < cap) {
        size_t i = 0;
        for (; h[i] != '\0'; i++)
            host[i] = (char)((h[i] >= 'A' && h[i] <= 'Z') ? h[i] - 'A' + 'a' : h[i]);
        host[i] = '\0';
        *web = strcasecmp(scheme, "http") == 0 || strcasecmp(scheme, "https") == 0;
        rc = 0;
    }
    curl_free(h);
    curl_free(scheme);
    curl_url_cleanup(u);
    return rc;
}

/* ---- checking a response before its body ---- */

static int is_redirect(long st)
{
    return st == 301 || st == 302 || st == 303 || st == 307 || st == 308;
}

/* A status that is no success: 4xx at once, 5xx retried. */
static void fail_status(struct http_src *s)
{
    long st = s->r.status;
    if (st >= 500 && st <= 599)
        set_fail(s, OUT_RETRY, SL_EIO, "HTTP %ld%s%s", st, s->r.reason[0] ? " " : "", s->r.reason);
    else
        set_fail(s, OUT_FATAL, SL_EIO, "HTTP %ld%s%s", st, s->r.reason[0] ? " " : "", s->r.reason);
}

static void fail_changed_size(struct http_src *s, uint64_t now)
{
    set_fail(s, OUT_CHANGED, SL_ECORRUPT, "the object changed since open (%llu bytes at open, now %llu)",
             (unsigned long long)s->base.size, (unsigned long long)now);
}

static int etag_changed(struct http_src *s)
{
    if (s->r.etag_bad != NULL) {
        set_fail(s, OUT_FATAL, SL_EPROTO, "the response's ETag is %s", s->r.etag_bad);
        return 1;
    }
    if (s->base.etag[0] != '\0' && s->r.etag[0] != '\0' && strcmp(s->base.etag, s->r.etag) != 0) {
        set_fail(s, OUT_CHANGED, SL_ECORRUPT, "the object changed since open (ETag %s at open, now %s)", s->base.etag,
                 s->r.etag);
        return 1;
    }
    return 0;
}

static void check_meta(struct http_src *s)
{
    struct resp *r = &s->r;
    if (s->kind == REQ_HEAD && (r->status == 405 || r->status == 501)) {
        s->head_refused = 1;
        return;
    }
    if (s->kind == REQ_PROBE && r->status == 416 && r->has_range && r->range_star && r->total_known && r->total == 0) {
        r->has_length = 1; /* an empty object: nothing is satisfiable */
        r->length = 0;
        return;
    }
    if (s->kind == REQ_PROBE && r->status == 206) {
        if (!r->has_range || r->range_star || r->first != 0 || r->last != 0 || !r->total_known)
            set_fail(s, OUT_FATAL, SL_EPROTO, "HTTP 206 to bytes=0-0 without its Content-Range");
        r->has_length = 1;
        r->length = r->total;
        return;
    }
    if (r->status < 200 || r->status > 299) {
        fail_status(s);
        return;
    }
    if (r->status != 200)
        set_fail(s, OUT_FATAL, SL_EPROTO, "HTTP %ld (expected 200)", r->status);
    else if (s->kind == REQ_HEAD && !r->has_length)
        s->head_refused = 1; /* no size: try a GET of the first byte */
}

static void check_range(struct http_src *s)
{
    struct resp *r = &s->r;
    if (r->status == 412) {
        set_fail(s, OUT_CHANGED, SL_ECORRUPT, "the object changed since open (ETag %s at open, now %s: HTTP 412%s%s)",
                 s->base.etag, r->etag[0] ? r->etag : "another", r->reason[0] ? " " : "", r->reason);
        return;
    }
    if (r->status == 416 && r->has_range && r->range_star && r->total_known && r->total != s->base.size) {
        fail_changed_size(s, r->total);
        return;
    }
    if (r->status == 200) {
        if (s->start != 0) {
            set_fail(s, OUT_FATAL, SL_EPROTO, "the server ignored the Range request (HTTP 200 to bytes=%llu-%llu)",
                     (unsigned long long)s->start, (unsigned long long)s->end - 1);
            return;
        }
        if (r->has_length && r->length != s->base.size) {
            fail_changed_size(s, r->length);
            return;
        }
        if (!etag_changed(s))
            s->body_ok = 1; /* the whole object from byte 0: the range asked is its head */
        return;
    }
    if (r->status != 206) {
        if (r->status >= 200 && r->status <= 299)
            set_fail(s, OUT_FATAL, SL_EPROTO, "HTTP %ld to a range request (expected 206)", r->status);
        else
            fail_status(s);
        return;
    }
    if (!r->has_range || r->range_star) {
        set_fail(s, OUT_FATAL, SL_EPROTO, "HTTP 206 without a Content-Range");
        return;
    }
    if (r->total_known && r->total != s->base.size) {
        fail_changed_size(s, r->total);
        return;
    }
    if (r->first != s->start || r->last >= s->end) {
        set_fail(s, OUT_FATAL, SL_EPROTO, "the server sent bytes %llu-%llu for bytes=%llu-%llu",
                 (unsigned long long)r->first, (unsigned long long)r->last, (unsigned long long)s->start,
                 (unsigned long long)s->end - 1);
        return;
    }
    if (r->has_length && r->length != r->last - r->first + 1) {
        set_fail(s, OUT_FATAL, SL_EPROTO, "Content-Length %llu for Content-Range bytes %llu-%llu",
                 (unsigned long long)r->length, (unsigned long long)r->first, (unsigned long long)r->last);
        return;
    }
    if (!etag_changed(s))
        s->body_ok = 1;
}

/* One header line: the status line, a field, or the blank line ending a
 * block (a redirect's, or the final response's, which is checked). */
static void header_line(struct http_src *s, const char *line, size_t len)
{
    struct resp *r = &s->r;
    if (len >= 5 && strncmp(line, "HTTP/", 5) == 0) {
        memset(r, 0, sizeof(*r));
        const char *sp = memchr(line, ' ', len);
        uint64_t st = 0;
        const char *end = NULL;
        if (sp == NULL || parse_u64(sp + 1, &end, &st) != 0 || st < 100 || st > 999) {
            set_fail(s, OUT_FATAL, SL_EPROTO, "a malformed status line");
            return;
        }
        r->status = (long)st;
        while (*end == ' ')
            end++;
        snprintf(r->reason, sizeof(r->reason), "%s", end);
        return;
    }
    if (len == 0) {
        if (r->status >= 100 && r->status <= 199)
            return; /* an interim response */
        if (is_redirect(r->status) && r->has_location)
            return; /* curl follows it; the next block is the next hop's */
        s->headers_done = 1;
        if (s->kind == REQ_RANGE)
            check_range(s);
        else
            check_meta(s);
        return;
    }
    const char *colon = memchr(line, ':', len);
    if (colon == NULL)
        return;
    size_t nlen = (size_t)(colon - line);
    const char *v = colon + 1;
    while (*v == ' ' || *v == '\t')
        v++;
    uint64_t x;
    const char *end;
    if (nlen == 14 && strncasecmp(line, "Content-Length", 14) == 0) {
        if (parse_u64(v, &end, &x) != 0 || *end != '\0') {
            set_fail(s, OUT_FATAL, SL_EPROTO, "a malformed Content-Length '%.40s'", v);
        } else if (x > OBJECT_BYTES_MAX) {
            set_fail(s, OUT_FATAL, SL_EPROTO, "Content-Length %llu is over 2^62", (unsigned long long)x);
        } else {
            r->has_length = 1;
            r->length = x;
        }
    } else if (nlen == 13 && strncasecmp(line, "Content-Range", 13) == 0) {
        if (parse_content_range(r, v) != 0)
            set_fail(s, OUT_FATAL, SL_EPROTO, "a malformed Content-Range '%.60s'", v);
        else if ((r->total_known && r->total > OBJECT_BYTES_MAX) || r->last >= OBJECT_BYTES_MAX)
            set_fail(s, OUT_FATAL, SL_EPROTO, "Content-Range '%.60s' is over 2^62", v);
    } else if (nlen == 4 && strncasecmp(line, "ETag", 4) == 0) {
        size_t n = strlen(v);
        r->etag_bad = NULL;
        if (n >= STO_ETAG_MAX)
            r->etag_bad = "too long (at most 127 bytes)";
        for (size_t i = 0; i < n && r->etag_bad == NULL; i++)
            if ((unsigned char)v[i] < 0x20 || v[i] == 0x7f)
                r->etag_bad = "not printable";
        if (r->etag_bad == NULL)
            memcpy(r->etag, v, n + 1);
    } else if (nlen == 8 && strncasecmp(line, "Location", 8) == 0 && is_redirect(r->status)) {
        char host[sizeof(s->host)];
        int web = 0;
        r->has_location = 1;
        if (url_host(s->url, v, host, sizeof(host), &web) != 0)
            set_fail(s, OUT_FATAL, SL_EPROTO, "a redirect to an unusable URL '%.200s'", v);
        else if (!web)
            set_fail(s, OUT_FATAL, SL_EPROTO, "a redirect to '%.200s' (only http and https are followed)", v);
        else if (!s->cross_host && strcmp(host, s->host) != 0)
            set_fail(s, OUT_FATAL, SL_EPROTO, "a redirect to another host ('%.200s'; cross_host_redirects is off)", v);
    }
}

static size_t on_header(char *p, size_t size, size_t nitems, void *ud)
{
    struct http_src *s = ud;
    size_t len = size * nitems;
    s->last_rx_ms = now_ms();
    s->got_byte = 1;
    s->header_bytes += len;
    if (s->header_bytes > HEADER_BYTES_MAX) {
        set_fail(s, OUT_FATAL, SL_EPROTO, "more than %d bytes of response headers", HEADER_BYTES_MAX);
        return 0;
    }
    char line[1024];
    size_t n = len;
    while (n > 0 && (p[n - 1] == '\n' || p[n - 1] == '\r' || p[n - 1] == ' ' || p[n - 1] == '\t'))
        n--;
    if (n >= sizeof(line)) { /* the fields read here are short: cut, they still fail their checks */
        if (strncasecmp(p, "Location:", 9) == 0) {
            set_fail(s, OUT_FATAL, SL_EPROTO, "a redirect URL over %zu bytes", sizeof(line) - 11);
            return 0;
        }
        n = sizeof(line) - 1;
    }
    memcpy(line, p, n);
    line[n] = '\0';
    if (len == 2 ? memcmp(p, "\r\n", 2) == 0 : len == 1 && p[0] == '\n')
        header_line(s, "", 0); /* the blank line ending a block */
    else if (n > 0)
        header_line(s, line, strlen(line));
    return s->fail == OUT_OK || s->head_refused ? len : 0;
}

static size_t on_body(char *p, size_t size, size_t nmemb, void *ud)
{
    struct http_src *s = ud;
    size_t len = size * nmemb;
    s->last_rx_ms = now_ms();
    s->got_byte = 1;
    if (s->kind != REQ_RANGE) {
        s->probe_stop = 1; /* the headers said all that open needs */
        return 0;
    }
    if (!s->body_ok) {
        set_fail(s, OUT_FATAL, SL_EPROTO, "a body that was not checked");
        return 0;
    }
    if (len > s->end - s->net) {
        set_fail(s, OUT_FATAL, SL_EPROTO, "the server sent more than the %llu bytes asked",
                 (unsigned long long)(s->end - s->start));
        return 0;
    }
    size_t room = s->want - s->have;
    if (room == 0) {
        s->paused = 1; /* curl keeps the chunk and gives it again when resumed */
        return CURL_WRITEFUNC_PAUSE;
    }
    size_t c = len < room ? len : room;
    memcpy(s->dst + s->have, p, c);
    s->have += c;
    if (c < len) { /* the spill is empty here: the read served it before it drove the transfer */
        size_t rest = len - c;
        if (rest > s->spill_cap) {
            uint8_t *b = sl_realloc(s->spill, rest);
            if (b == NULL) {
                set_fail(s, OUT_FATAL, SL_ENOMEM, "out of memory");
                return 0;
            }
            s->spill = b;
            s->spill_cap = rest;
        }
        memcpy(s->spill, p + c, rest);
        s->spill_len = rest;
        s->spill_pos = 0;
    }
    s->net += len;
    return len;
}

/* ---- running a request ---- */

static void drop(struct http_src *s)
{
    if (s->active)
        curl_multi_remove_handle(s->multi, s->easy); /* an unfinished response closes its connection */
    s->active = 0;
    s->paused = 0;
    s->spill_len = s->spill_pos = 0;
}

static int start(struct http_src *s, enum req_kind kind, uint64_t from, uint64_t to)
{
    char range[48];
    memset(&s->r, 0, sizeof(s->r));
    s->kind = kind;
    s->start = s->net = from;
    s->end = to;
    s->header_bytes = 0;
    s->headers_done = s->body_ok = s->head_refused = s->probe_stop = s->got_byte = 0;
    s->fail = OUT_OK;
    s->fail_code = 0;
    s->cause[0] = '\0';
    s->errbuf[0] = '\0';
    s->result = CURLE_OK;
    if (kind == REQ_HEAD) {
        curl_easy_setopt(s->easy, CURLOPT_NOBODY, 1L);
        curl_easy_setopt(s->easy, CURLOPT_RANGE, NULL);
        curl_easy_setopt(s->easy, CURLOPT_HTTPHEADER, s->hdr_meta);
    } else {
        curl_easy_setopt(s->easy, CURLOPT_HTTPGET, 1L);
        if (kind == REQ_PROBE)
            snprintf(range, sizeof(range), "0-0");
        else
            snprintf(range, sizeof(range), "%llu-%llu", (unsigned long long)from, (unsigned long long)to - 1);
        curl_easy_setopt(s->easy, CURLOPT_RANGE, range); /* curl copies it */
        curl_easy_setopt(s->easy, CURLOPT_HTTPHEADER, kind == REQ_RANGE ? s->if_match : s->hdr_meta);
    }
    CURLMcode mc = curl_multi_add_handle(s->multi, s->easy);
    if (mc != CURLM_OK) {
        set_fail(s, OUT_FATAL, SL_EIO, "curl: %s", curl_multi_strerror(mc));
        return -1;
    }
    s->active = 1;
    s->paused = 0;
    return 0;
}

enum { DRIVE_FILLED, DRIVE_DONE };

/* Run the request until the caller's buffer is full (a range whose end is
 * still to come: it stays open, paused) or it ends (s->result, s->fail). */
static int drive(struct http_src *s)
{
    s->last_rx_ms = now_ms();
    if (s->paused) {
        s->paused = 0;
        curl_easy_pause(s->easy, CURLPAUSE_CONT); /* may deliver the kept chunk at once */
    }
    for (;;) {
        if (s->kind == REQ_RANGE && s->have == s->want && s->net < s->end && s->fail == OUT_OK)
            break;
        int running = 0, left = 0, done = 0;
        CURLMcode mc = curl_multi_perform(s->multi, &running);
        if (mc != CURLM_OK) {
            set_fail(s, OUT_FATAL, SL_EIO, "curl: %s", curl_multi_strerror(mc));
            drop(s);
            return DRIVE_DONE;
        }
        CURLMsg *m;
        while ((m = curl_multi_info_read(s->multi, &left)) != NULL)
            if (m->msg == CURLMSG_DONE && m->easy_handle == s->easy) {
                s->result = m->data.result;
                done = 1;
            }
        if (done) {
            curl_multi_remove_handle(s->multi, s->easy);
            s->active = 0;
            s->paused = 0;
            return DRIVE_DONE;
        }
        if (s->kind == REQ_RANGE && s->have == s->want && s->net < s->end && s->fail == OUT_OK)
            break;
        /* a stall: no byte for stall_ms (before the first, connecting may
         * take its own timeout, which curl enforces) */
        long limit = s->got_byte || s->stall_ms > s->connect_ms ? s->stall_ms : s->connect_ms;
        int64_t idle = now_ms() - s->last_rx_ms;
        if (idle >= limit) {
            set_fail(s, OUT_RETRY, SL_ETIMEOUT, "no byte received for %ld ms", limit);
            drop(s);
            return DRIVE_DONE;
        }
        long wait = limit - (long)idle;
        if (wait > 100 || wait < 1)
            wait = 100; /* also curl's own timers (connect timeout) */
        curl_multi_poll(s->multi, NULL, 0, (int)wait, NULL);
    }
    if (!s->paused) {
        curl_easy_pause(s->easy, CURLPAUSE_RECV); /* idle until the next read: no stall counted */
        s->paused = 1;
    }
    return DRIVE_FILLED;
}

/* The outcome of a finished request; s->cause and s->fail_code say why. */
static enum outcome judge(struct http_src *s)
{
    if (s->fail != OUT_OK)
        return s->fail;
    if (s->kind != REQ_RANGE && s->probe_stop)
        return OUT_OK;
    if (s->result != CURLE_OK) {
        const char *detail = s->errbuf[0] ? s->errbuf : curl_easy_strerror(s->result);
        switch (s->result) {
        case CURLE_COULDNT_RESOLVE_HOST:
        case CURLE_COULDNT_CONNECT:
        case CURLE_OPERATION_TIMEDOUT:
        case CURLE_SEND_ERROR:
        case CURLE_RECV_ERROR:
        case CURLE_PARTIAL_FILE:
        case CURLE_GOT_NOTHING:
        case CURLE_HTTP2:
        case CURLE_HTTP2_STREAM:
        case CURLE_SSL_CONNECT_ERROR:
            set_fail(s, OUT_RETRY, s->result == CURLE_OPERATION_TIMEDOUT ? SL_ETIMEOUT : SL_EIO, "%s", detail);
            break;
        case CURLE_PEER_FAILED_VERIFICATION:
        case CURLE_SSL_CACERT_BADFILE:
        case CURLE_SSL_CERTPROBLEM:
        case CURLE_SSL_ISSUER_ERROR: set_fail(s, OUT_FATAL, SL_EIO, "TLS certificate refused: %s", detail); break;
        case CURLE_OUT_OF_MEMORY:
            if (!s->headers_done) { /* curl's answer to one header line over its 100 KiB */
                set_fail(s, OUT_FATAL, SL_EPROTO, "a response header line too long (or out of memory)");
                break;
            }
            set_fail(s, OUT_FATAL, SL_ENOMEM, "%s", detail);
            break;
        case CURLE_TOO_MANY_REDIRECTS:
        case CURLE_UNSUPPORTED_PROTOCOL:
        case CURLE_WEIRD_SERVER_REPLY: set_fail(s, OUT_FATAL, SL_EPROTO, "%s", detail); break;
        default: set_fail(s, OUT_FATAL, SL_EIO, "%s", detail);
        }
        return s->fail;
    }
    if (s->kind != REQ_RANGE || s->net >= s->end)
        return OUT_OK;
    if (s->r.status == 206 && s->net == s->r.last + 1)
        return OUT_OK; /* a shorter range than asked (RFC 9110 allows it): ask for the rest */
    set_fail(s, OUT_RETRY, SL_EIO, "the body ended at byte %llu of bytes=%llu-%llu", (unsigned long long)s->net,
             (unsigned long long)s->start, (unsigned long long)s->end - 1);
    return OUT_RETRY;
}

static void backoff(struct http_src *s, int failures)
{
    long d = s->backoff_ms;
    for (int i = 1; i < failures && d < s->backoff_max_ms; i++)
        d *= 2;
    if (d > s->backoff_max_ms)
        d = s->backoff_max_ms;
    s->rng ^= s->rng << 13; /* xorshift64: jitter, not secrecy */
    s->rng ^= s->rng >> 7;
    s->rng ^= s->rng << 17;
    d = d / 2 + (long)(s->rng % (uint64_t)(d + 1)); /* d * [0.5, 1.5] */
    if (d > s->backoff_max_ms)
        d = s->backoff_max_ms;
    struct timespec t = {d / 1000, (d % 1000) * 1000000L};
    while (nanosleep(&t, &t) != 0) {
    }
}

/* HEAD or the bytes=0-0 probe, retried. */
static int meta_request(struct http_src *s, enum req_kind kind, struct sl_error *err)
{
    for (int attempt = 1;; attempt++) {
        if (start(s, kind, 0, 0) == 0)
            drive(s);
        enum outcome o = judge(s);
        if (o == OUT_OK)
            return 0;
        if (o != OUT_RETRY)
            return sl_error_set(err, s->fail_code, "open(%s): %s", s->base.name, s->cause);
        if (attempt > s->max_retries)
            return sl_error_set(err, s->fail_code, "open(%s): %s failed (%d attempt%s), the last: %s", s->base.name,
                                kind == REQ_HEAD ? "HEAD" : "GET bytes=0-0", attempt, attempt == 1 ? "" : "s",
                                s->cause);
        backoff(s, attempt);
    }
}

/* Fill dst[done, want) from the stream (starting one at s->net if none is
 * open), retrying transient failures from the first byte not received. */
static int fill(struct http_src *s, uint64_t off, uint8_t *dst, size_t done, size_t want, struct sl_error *err)
{
    int failures = 0;
    while (done < want) {
        uint64_t before = s->net;
        if (s->active || start(s, REQ_RANGE, s->net, s->end) == 0) {
            s->dst = dst;
            s->want = want;
            s->have = done;
            int r = drive(s);
            done = s->have;
            s->dst = NULL;
            if (r == DRIVE_FILLED)
                break;
        }
        enum outcome o = judge(s);
        if (o == OUT_OK && s->net > before)
            continue;
        if (o == OUT_OK)
            set_fail(s, o = OUT_RETRY, SL_EIO, "the server sent no byte of bytes=%llu-%llu",
                     (unsigned long long)s->start, (unsigned long long)s->end - 1);
        if (o != OUT_RETRY)
            return sl_error_set(err, s->fail_code, "read(%s) bytes [%llu, %llu): %s", s->base.name,
                                (unsigned long long)off, (unsigned long long)(off + want), s->cause);
        /* bounded per read: a server that gives a few bytes and stalls each
         * time costs at most max_retries retries, however large the read */
        if (++failures > s->max_retries)
            return sl_error_set(err, s->fail_code, "read(%s) bytes [%llu, %llu): %d attempt%s failed, the last: %s",
                                s->base.name, (unsigned long long)off, (unsigned long long)(off + want), failures,
                                failures == 1 ? "" : "s", s->cause);
        backoff(s, failures);
    }
    return 0;
}

int sto__http_read_at(struct sto_src *base, uint64_t off, void *dst, size_t n, size_t *got, struct sl_error *err)
{
    struct http_src *s = (struct http_src *)base;
    uint64_t left = base->size - off; /* sto_read_at: off < size */
    size_t want = n < left ? n : (size_t)left;
    size_t spilled = s->spill_len - s->spill_pos;
    *got = 0;
    if (!((s->active || spilled > 0) && off == s->net - spilled)) {
        /* not where the stream is: a read right after the last read, or
         * one of STREAM_MIN bytes or more at 0 (a reader starting at the
         * head), starts one to the end; any other asks for its range only,
         * so a probe of a few bytes at the head costs only those bytes */
        drop(s);
        s->net = off;
        int stream = !base->exact && ((off == s->last_end && s->last_end > 0) || (off == 0 && want >= STREAM_MIN));
        s->end = stream ? base->size : off + want;
        spilled = 0;
    }
    size_t done = spilled < want ? spilled : want;
    memcpy(dst, s->spill + s->spill_pos, done);
    s->spill_pos += done;
    int rc = fill(s, off, dst, done, want, err);
    if (rc != 0) {
        drop(s);
        s->last_end = 0;
        return rc;
    }
    s->last_end = off + want;
    *got = want;
    return 0;
}

/* ---- open and close ---- */

void sto__http_close(struct sto_src *base)
{
    struct http_src *s = (struct http_src *)base;
    drop(s);
    if (s->easy != NULL && s->multi != NULL && s->reusable && s->origin[0] != '\0') {
        pool_put(s->origin, s->easy, s->multi); /* its connections serve the next source */
    } else {
        if (s->multi != NULL)
            curl_multi_cleanup(s->multi);
        if (s->easy != NULL)
            curl_easy_cleanup(s->easy);
    }
    curl_slist_free_all(s->if_match);
    curl_slist_free_all(s->hdr_meta);
    free(s->url);
    free(s->ca_file);
    free(s->spill);
    free(s->base.name);
    free(s);
}

/* The options every request of the source shares; auth: sto_impl.h's. */
static int setup_easy(struct http_src *s, long connect_ms, long max_redirects, const struct sto_http_auth *auth)
{
    CURL *e = s->easy;
    int ok = 1;
    ok &= curl_easy_setopt(e, CURLOPT_URL, s->url) == CURLE_OK;
    ok &= curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https") == CURLE_OK;
    ok &= curl_easy_setopt(e, CURLOPT_REDIR_PROTOCOLS_STR, "http,https") == CURLE_OK;
    ok &= curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 1L) == CURLE_OK;
    ok &= curl_easy_setopt(e, CURLOPT_MAXREDIRS, max_redirects) == CURLE_OK;
    ok &= curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L) == CURLE_OK;
    ok &= curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, connect_ms) == CURLE_OK;
    ok &= curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L) == CURLE_OK;
    ok &= curl_easy_setopt(e, CURLOPT_FILETIME, 1L) == CURLE_OK;
    ok &= curl_easy_setopt(e, CURLOPT_USERAGENT, "sluice") == CURLE_OK;
    ok &= curl_easy_setopt(e, CURLOPT_ERRORBUFFER, s->errbuf) == CURLE_OK;
    ok &= curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header) == CURLE_OK;
    ok &= curl_easy_setopt(e, CURLOPT_HEADERDATA, s) == CURLE_OK;
    ok &= curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body) == CURLE_OK;
    ok &= curl_easy_setopt(e, CURLOPT_WRITEDATA, s) == CURLE_OK;
    if (share != NULL)
        ok &= curl_easy_setopt(e, CURLOPT_SHARE, share) == CURLE_OK;
    if (s->ca_file != NULL) /* besides the system's: curl keeps its CA path (/etc/ssl/certs) */
        ok &= curl_easy_setopt(e, CURLOPT_CAINFO, s->ca_file) == CURLE_OK;
    if (auth != NULL && auth->aws_sigv4 != NULL) {
        /* libcurl signs each request (SigV4) with these; the URL's path is
         * the key's, encoded by the caller, never normalized ("a/../b") */
        ok &= curl_easy_setopt(e, CURLOPT_AWS_SIGV4, auth->aws_sigv4) == CURLE_OK;
        ok &= curl_easy_setopt(e, CURLOPT_USERPWD, auth->userpwd) == CURLE_OK;
        ok &= curl_easy_setopt(e, CURLOPT_PATH_AS_IS, 1L) == CURLE_OK;
    }
    return ok ? 0 : -1;
}

/* The auth's extra headers, appended to *l; -1: out of memory. */
static int auth_headers(struct curl_slist **l, const struct sto_http_auth *auth)
{
    if (auth == NULL)
        return 0;
    for (size_t i = 0; i < STO_AUTH_HEADERS_MAX && auth->headers[i] != NULL; i++) {
        struct curl_slist *n = curl_slist_append(*l, auth->headers[i]);
        if (n == NULL)
            return -1;
        *l = n;
    }
    return 0;
}

/* The headers every range carries: the auth's, and If-Match with a strong
 * ETag (a weak one never matches). */
static int range_headers(struct http_src *s, const struct sto_http_auth *auth, struct sl_error *err)
{
    if (auth_headers(&s->if_match, auth) != 0)
        return sl_error_set(err, SL_ENOMEM, "open(%s): out of memory", s->base.name);
    if (s->base.etag[0] == '"') {
        char h[STO_ETAG_MAX + 16];
        snprintf(h, sizeof(h), "If-Match: %s", s->base.etag);
        struct curl_slist *n = curl_slist_append(s->if_match, h);
        if (n == NULL)
            return sl_error_set(err, SL_ENOMEM, "open(%s): out of memory", s->base.name);
        s->if_match = n;
    }
    return 0;
}

static int fix_meta(struct http_src *s, const struct sto_http_auth *auth, struct sl_error *err)
{
    int rc = meta_request(s, REQ_HEAD, err);
    if (rc == 0 && s->head_refused)
        rc = meta_request(s, REQ_PROBE, err);
    if (rc != 0)
        return rc;
    if (!s->r.has_length)
        return sl_error_set(err, SL_EPROTO, "open(%s): the server sent no size (no Content-Length)", s->base.name);
    if (s->r.etag_bad != NULL)
        return sl_error_set(err, SL_EPROTO, "open(%s): the ETag is %s", s->base.name, s->r.etag_bad);
    s->base.size = s->r.length;
    memcpy(s->base.etag, s->r.etag, sizeof(s->base.etag));
    curl_off_t t = -1;
    if (curl_easy_getinfo(s->easy, CURLINFO_FILETIME_T, &t) == CURLE_OK && t >= 0)
        s->base.mtime_ns = (int64_t)t * 1000000000;
    return range_headers(s, auth, err);
}

static int curl_ready(const char *name, struct sl_error *err)
{
    pthread_once(&global_once, global_init);
    if (global_rc != CURLE_OK)
        return sl_error_set(err, SL_EIO, "open(%s): curl_global_init: %s", name, curl_easy_strerror(global_rc));
    return 0;
}

int sto__http_open(struct sto_src **out, const char *name, const char *url, const struct sto_http_auth *auth,
                   const struct sto_known *known, const struct sto_ops *ops, enum sto_kind kind, long *status,
                   struct sl_error *err)
{
    *out = NULL;
    *status = 0;
    if (curl_ready(name, err) != 0)
        return err->code;
    const struct sto_config *c = sto__config();
    struct http_src *s = sl_calloc(1, sizeof(*s));
    if (s == NULL)
        return sl_error_set(err, SL_ENOMEM, "open(%s): out of memory", name);
    s->base.ops = ops;
    s->base.kind = kind;
    s->base.fd = -1;
    s->base.name = sl_strdup(name);
    s->url = sl_strdup(url);
    s->spill_cap = CURL_MAX_WRITE_SIZE;
    s->spill = sl_malloc(s->spill_cap);
    s->ca_file = c->ca_file != NULL ? sl_strdup(c->ca_file) : NULL;
    if (s->base.name == NULL || s->url == NULL || s->spill == NULL || (c->ca_file != NULL && s->ca_file == NULL) ||
        auth_headers(&s->hdr_meta, auth) != 0) {
        sto__http_close(&s->base);
        return sl_error_set(err, SL_ENOMEM, "open(%s): out of memory", name);
    }
    s->stall_ms = c->stall_timeout_ms;
    s->connect_ms = c->connect_timeout_ms;
    s->max_retries = c->max_retries;
    s->backoff_ms = c->backoff_ms;
    s->backoff_max_ms = c->backoff_max_ms;
    s->cross_host = c->cross_host_redirects;
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    s->rng = ((uint64_t)t.tv_nsec << 20) ^ (uint64_t)t.tv_sec ^ (uint64_t)(uintptr_t)s;
    s->rng |= 1;
    int web = 0;
    if (url_host(NULL, url, s->host, sizeof(s->host), &web) != 0 || !web) {
        sto__http_close(&s->base);
        return sl_error_set(err, SL_EINVAL, "open(%s): not a usable http(s) URL", name);
    }
    origin_of(url, s->origin, sizeof(s->origin));
    if (s->origin[0] == '\0' || pool_take(s->origin, &s->easy, &s->multi) != 0) {
        s->easy = curl_easy_init();
        s->multi = curl_multi_init();
    }
    s->reusable = 1;
    if (s->easy == NULL || s->multi == NULL || setup_easy(s, c->connect_timeout_ms, c->max_redirects, auth) != 0) {
        sto__http_close(&s->base);
        return sl_error_set(err, SL_EIO, "open(%s): curl could not be set up", name);
    }
    int rc;
    if (known != NULL) { /* the caller's identity: no request now, each range checks it */
        s->base.size = known->size;
        snprintf(s->base.etag, sizeof(s->base.etag), "%s", known->etag);
        s->base.mtime_ns = known->mtime_ns;
        rc = range_headers(s, auth, err);
    } else {
        rc = fix_meta(s, auth, err);
    }
    if (rc != 0) {
        *status = s->r.status;
        sto__http_close(&s->base);
        return rc;
    }
    *out = &s->base;
    return 0;
}

static int http_open(struct sto_src **out, const char *name, struct sl_error *err)
{
    long status;
    return sto__http_open(out, name, name, NULL, NULL, &sto_http_ops, STO_HTTP, &status, err);
}

static int http_open_known(struct sto_src **out, const char *name, const struct sto_known *k, struct sl_error *err)
{
    long status;
    return sto__http_open(out, name, name, NULL, k, &sto_http_ops, STO_HTTP, &status, err);
}

/* ---- a small body (a listing page) ---- */

struct get_sink {
    char *buf;
    size_t len, cap, max;
    size_t header_bytes;
    int over; /* the body passed max, or the headers HEADER_BYTES_MAX */
};

static size_t get_on_body(char *p, size_t size, size_t nmemb, void *ud)
{
    struct get_sink *g = ud;
    size_t n = size * nmemb;
    if (n > g->max - g->len) {
        g->over = 1;
        return 0;
    }
    if (g->len + n + 1 > g->cap) {
        size_t cap = g->cap > 0 ? g->cap : 64 * 1024;
        while (cap < g->len + n + 1)
            cap *= 2;
        char *b = sl_realloc(g->buf, cap);
        if (b == NULL)
            return 0;
        g->buf = b;
        g->cap = cap;
    }
    memcpy(g->buf + g->len, p, n);
    g->len += n;
    g->buf[g->len] = '\0';
    return n;
}

static size_t get_on_header(char *p, size_t size, size_t nitems, void *ud)
{
    struct get_sink *g = ud;
    (void)p;
    g->header_bytes += size * nitems;
    if (g->header_bytes > HEADER_BYTES_MAX) {
        g->over = 2;
        return 0;
    }
    return size * nitems;
}

/* One attempt's options: setup_easy's, and the body and headers into g. */
static int get_setup(struct http_src *s, struct get_sink *g, struct curl_slist *hdrs, const struct sto_http_auth *auth,
                     const struct sto_config *c)
{
    long stall_s = (c->stall_timeout_ms + 999) / 1000;
    int ok = setup_easy(s, c->connect_timeout_ms, c->max_redirects, auth) == 0;
    ok &= curl_easy_setopt(s->easy, CURLOPT_HTTPGET, 1L) == CURLE_OK;
    ok &= curl_easy_setopt(s->easy, CURLOPT_HTTPHEADER, hdrs) == CURLE_OK;
    ok &= curl_easy_setopt(s->easy, CURLOPT_HEADERFUNCTION, get_on_header) == CURLE_OK;
    ok &= curl_easy_setopt(s->easy, CURLOPT_HEADERDATA, g) == CURLE_OK;
    ok &= curl_easy_setopt(s->easy, CURLOPT_WRITEFUNCTION, get_on_body) == CURLE_OK;
    ok &= curl_easy_setopt(s->easy, CURLOPT_WRITEDATA, g) == CURLE_OK;
    ok &= curl_easy_setopt(s->easy, CURLOPT_LOW_SPEED_LIMIT, 1L) == CURLE_OK; /* a stall: retried */
    ok &= curl_easy_setopt(s->easy, CURLOPT_LOW_SPEED_TIME, stall_s) == CURLE_OK;
    if (!c->cross_host_redirects) /* redirects: the listing stays on its host */
        ok &= curl_easy_setopt(s->easy, CURLOPT_FOLLOWLOCATION, 0L) == CURLE_OK;
    return ok ? 0 : -1;
}

int sto__http_get(const char *name, const char *url, const struct sto_http_auth *auth, size_t max, char **body,
                  size_t *len, long *status, struct sl_error *err)
{
    *body = NULL;
    *len = 0;
    *status = 0;
    if (curl_ready(name, err) != 0)
        return err->code;
    const struct sto_config *c = sto__config();
    struct http_src s; /* only for setup_easy's and backoff's fields */
    memset(&s, 0, sizeof(s));
    s.url = (char *)url;
    s.ca_file = (char *)c->ca_file;
    s.backoff_ms = c->backoff_ms;
    s.backoff_max_ms = c->backoff_max_ms;
    s.rng = (uint64_t)now_ms() | 1;
    struct curl_slist *hdrs = NULL;
    if (auth_headers(&hdrs, auth) != 0 || (s.easy = curl_easy_init()) == NULL) {
        curl_slist_free_all(hdrs);
        return sl_error_set(err, SL_ENOMEM, "%s: out of memory", name);
    }
    struct get_sink g = {0};
    int rc = 0;
    for (int attempt = 1;; attempt++) {
        g.len = g.header_bytes = 0;
        g.over = 0;
        g.max = max;
        if (get_setup(&s, &g, hdrs, auth, c) != 0) {
            rc = sl_error_set(err, SL_EIO, "%s: curl could not be set up", name);
            break;
        }
        s.errbuf[0] = '\0';
        CURLcode cc = curl_easy_perform(s.easy);
        *status = 0;
        curl_easy_getinfo(s.easy, CURLINFO_RESPONSE_CODE, status);
        int transient = 0;
        if (g.over == 1) {
            rc = sl_error_set(err, SL_EPROTO, "%s: a response body over %zu bytes", name, max);
            break;
        } else if (g.over == 2) {
            rc = sl_error_set(err, SL_EPROTO, "%s: more than %d bytes of response headers", name, HEADER_BYTES_MAX);
            break;
        } else if (cc != CURLE_OK) {
            transient = cc == CURLE_COULDNT_CONNECT || cc == CURLE_OPERATION_TIMEDOUT || cc == CURLE_SEND_ERROR ||
                        cc == CURLE_RECV_ERROR || cc == CURLE_PARTIAL_FILE || cc == CURLE_GOT_NOTHING ||
                        cc == CURLE_COULDNT_RESOLVE_HOST;
            rc = sl_error_set(err, cc == CURLE_OPERATION_TIMEDOUT ? SL_ETIMEOUT : SL_EIO, "%s: %s", name,
                              s.errbuf[0] ? s.errbuf : curl_easy_strerror(cc));
        } else if (*status >= 500 && attempt <= c->max_retries) {
            transient = 1;
            rc = sl_error_set(err, SL_EIO, "%s: HTTP %ld", name, *status);
        } else {
            rc = 0; /* any status: the caller reads it (and an error's body) */
            break;
        }
        if (!transient || attempt > c->max_retries) {
            if (transient) {
                char why[SL_ERROR_MSG_MAX];
                snprintf(why, sizeof(why), "%s", err->msg);
                rc = sl_error_set(err, err->code, "%s (%d attempts)", why, attempt);
            }
            break;
        }
        backoff(&s, attempt);
    }
    curl_easy_cleanup(s.easy);
    curl_slist_free_all(hdrs);
    if (rc != 0) {
        free(g.buf);
        return rc;
    }
    if (g.buf == NULL && (g.buf = sl_malloc(1)) != NULL)
        g.buf[0] = '\0';
    if (g.buf == NULL)
        return sl_error_set(err, SL_ENOMEM, "%s: out of memory", name);
    *body = g.buf;
    *len = g.len;
    return 0;
}

const struct sto_ops sto_http_ops = {"http", http_open, http_open_known, sto__http_read_at, sto__http_close};
