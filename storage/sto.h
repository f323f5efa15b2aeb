/* sto: where a file's bytes come from (issue #28). One seam below the
 * formats: a source is opened by name and read by byte ranges, so the
 * formats' streams, the scan and the feeder's random access never know
 * whether the bytes are on a local disk, an HTTP(S) server or an
 * S3-compatible object store.
 *
 * Names:
 *   /path/to/file, relative/path   a local file
 *   file:///path/to/file           the same (the prefix is dropped)
 *   http://host[:port]/path        HTTP/1.1 or HTTP/2 with Range requests
 *   https://host[:port]/path       the same over TLS
 *   s3://bucket/key                an S3-compatible store (endpoint,
 *                                  region and credentials: sto_config)
 *
 * Each kind is an ops table (open, read a range, close); the fields every
 * source fills at open (size, ETag, modification time) sit in struct
 * sto_src, which each backend embeds as its first member.
 *
 * A remote source fixes its object's size and ETag at open; a later read
 * that finds another object there (a different size or ETag) is an error
 * naming both, never a mix of two objects' bytes. Transient failures
 * (timeouts, resets, 5xx) are retried with exponential backoff and jitter
 * up to the configured bound, each retry resuming the range where it
 * stopped; 4xx fail at once with the URL and the status.
 *
 * Thread-safe: a source is used by one thread at a time; any number of
 * sources may be open and read from different threads at once. A closed
 * remote source's connection is kept (a small process-wide pool) for the
 * next source opened on the same scheme, host and port, in any thread.
 * sto_configure is called once, before any remote source is opened.
 */
#ifndef STO_H
#define STO_H

#include <stddef.h>
#include <stdint.h>

#include "sl_error.h"

enum sto_kind { STO_FILE = 0, STO_HTTP, STO_S3 };

#define STO_ETAG_MAX 128 /* longer ETags are refused at open, naming the URL */

struct sto_src;
struct sto_known;

struct sto_ops {
    const char *name; /* "file", "http", "s3" */
    int (*open)(struct sto_src **out, const char *name, struct sl_error *err);
    /* sto_open_known's; NULL: open, then compare (local files) */
    int (*open_known)(struct sto_src **out, const char *name, const struct sto_known *k, struct sl_error *err);
    /* Up to n bytes at off into dst. *got < n only where off + n passes
     * the object's end (then *got = size - off, or 0 at or past it). */
    int (*read_at)(struct sto_src *s, uint64_t off, void *dst, size_t n, size_t *got, struct sl_error *err);
    void (*close)(struct sto_src *s);
};

/* What every source fills at open. */
struct sto_src {
    const struct sto_ops *ops;
    enum sto_kind kind;
    char *name;              /* as given to sto_open (owned by the source): for errors */
    uint64_t size;           /* the object's size in bytes */
    char etag[STO_ETAG_MAX]; /* the server's ETag, quotes kept; "" for a local file or none sent */
    int64_t mtime_ns;        /* a local file's st_mtim; a remote object's Last-Modified, or 0 */
    int fd;                  /* STO_FILE: the open descriptor (mapping, fstat); -1 for the others */
    int exact;               /* the caller's: 1: every read asks for its own range only (a remote
                                source never streams on to the object's end past it) */
};

/* The kind a name denotes, by its prefix ("file://" and plain paths: STO_FILE). */
enum sto_kind sto_kind_of(const char *name);
/* 1 for http://, https:// and s3:// names. */
int sto_is_remote(const char *name);
/* A local name's path ("file://" dropped); NULL for a remote name. */
const char *sto_local_path(const char *name);

/* Open `name`. On error *out is NULL and err names the source ("open(<path>):
 * ..." for a local file; the URL and the HTTP status or curl's error for a
 * remote one). A local name must be a regular file. */
int sto_open(struct sto_src **out, const char *name, struct sl_error *err) SL_MUST_CHECK;
/* What a caller already knows of an object (its scan's open): its size,
 * ETag ("" for none) and modification time. */
struct sto_known {
    uint64_t size;
    const char *etag;
    int64_t mtime_ns;
};
/* Open `name` as the object `k` describes, without asking (a remote
 * source sends no request until its first read; a local file is opened
 * and its size compared). Each read then checks that the object is still
 * that one (If-Match with a strong ETag, the size in Content-Range): one
 * that changed is SL_ECORRUPT naming both, as for sto_open's. */
int sto_open_known(struct sto_src **out, const char *name, const struct sto_known *k,
                   struct sl_error *err) SL_MUST_CHECK;
int sto_read_at(struct sto_src *s, uint64_t off, void *dst, size_t n, size_t *got, struct sl_error *err) SL_MUST_CHECK;
/* Read exactly n bytes at off: a short object is SL_ECORRUPT naming the
 * source, the range and the size. */
int sto_read_full(struct sto_src *s, uint64_t off, void *dst, size_t n, struct sl_error *err) SL_MUST_CHECK;
void sto_close(struct sto_src *s); /* NULL is a no-op */

/* A copy of what is read: a source reading through `inner` (owned by it
 * from the call on, closed with it, or at once on error) that also copies
 * each byte it returns at offsets [0, cap) into buf, as long as the reads
 * run on from byte 0 without a gap; c->upto is then where that copy ends.
 * A read after a gap, or past cap, is served but not copied. What reads
 * an object once (a scan) leaves its bytes in buf for whoever would read
 * them again. c, buf: the caller's, outliving the source. */
struct sto_capture {
    uint8_t *buf;
    uint64_t cap;
    uint64_t upto; /* bytes [0, upto) of the object are in buf */
};
int sto_capture_open(struct sto_src **out, struct sto_src *inner, struct sto_capture *c,
                     struct sl_error *err) SL_MUST_CHECK;

/* List an s3://BUCKET/KEY-PATTERN (glob characters *, ? and [ in the key):
 * ListObjectsV2 from the key's part before its first glob character, page
 * by page; each key matched with fnmatch(3) (FNM_PATHNAME | FNM_PERIOD: as
 * local globs, '*' crosses no '/' and matches no leading '.'); keys ending
 * in '/' left out. *names: the matches as s3:// names, sorted bytewise
 * (sto_list_free frees them); none is *n = 0 and 0. Refused, naming the
 * pattern: a listing over 10^6 keys or 256 MiB of names, a key with '..'
 * as a path segment or a control character, the server's error (HTTP
 * status, S3's Code and Message). */
int sto_list(const char *pattern, char ***names, size_t *n, struct sl_error *err) SL_MUST_CHECK;
void sto_list_free(char **names, size_t n);

/* How remote sources behave; process-wide. */
struct sto_config {
    long connect_timeout_ms;  /* a connection not made in this long is a failure (retried); 10000 */
    long stall_timeout_ms;    /* no byte received for this long is a failure (retried); 30000 */
    int max_retries;          /* retries of one request after its first try; 5 */
    long backoff_ms;          /* first retry's delay, doubled each time, +-50% jitter; 100 */
    long backoff_max_ms;      /* the most one delay may be; 10000 */
    int max_redirects;        /* redirects followed per request; 5 */
    int cross_host_redirects; /* 1: a redirect may go to another host (refused by default) */
    const char *ca_file;      /* a CA bundle to trust besides the system's (tests' own CA); NULL: none */
    const char *s3_endpoint;  /* e.g. "http://127.0.0.1:9000"; NULL: $AWS_ENDPOINT_URL_S3,
                                $AWS_ENDPOINT_URL, else https://s3.<region>.amazonaws.com */
    const char *s3_region;    /* NULL: $AWS_REGION, $AWS_DEFAULT_REGION, else "us-east-1" */
    int s3_path_style;        /* 1: http://endpoint/bucket/key (S3-compatible servers); 0: virtual host */
};

/* The defaults above. */
void sto_config_default(struct sto_config *c);
/* Set the process-wide configuration (the strings are copied). SL_EINVAL,
 * naming the field, for a negative or absurd value. Call before any remote
 * source is opened. */
int sto_configure(const struct sto_config *c, struct sl_error *err) SL_MUST_CHECK;

#endif
