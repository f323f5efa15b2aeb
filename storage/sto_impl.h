/* sto_impl: what the storage backends share (not for callers above
 * storage/). Each backend's ops table, and the process-wide configuration.
 */
#ifndef STO_IMPL_H
#define STO_IMPL_H

#include "sto.h"

extern const struct sto_ops sto_file_ops;
extern const struct sto_ops sto_http_ops; /* http:// and https:// */
extern const struct sto_ops sto_s3_ops;

/* The configuration sto_configure set (the defaults before it). */
const struct sto_config *sto__config(void);

/* ---- sto_http.c's engine, for the backends that speak HTTP (s3) ---- */

#define STO_AUTH_HEADERS_MAX 4

/* How requests are signed: libcurl's CURLOPT_AWS_SIGV4 (e.g.
 * "aws:amz:us-east-1:s3") with CURLOPT_USERPWD ("key:secret"), and extra
 * headers sent with every request (e.g. "x-amz-security-token: T"), signed
 * with it; NULL-terminated (at most STO_AUTH_HEADERS_MAX). The strings are
 * the caller's, used only during the call that takes them (curl copies). */
struct sto_http_auth {
    const char *aws_sigv4; /* NULL: no signing */
    const char *userpwd;
    const char *headers[STO_AUTH_HEADERS_MAX + 1];
};

/* Open the object at `url` with all of sto_http.c's behaviour (HEAD, size,
 * ETag, streaming, ranges, If-Match, retries, bounds), every error naming
 * `name` (the source's name: an s3:// name, not its URL); with `known`
 * (sto_open_known) no HEAD: the object is taken to be that one. The source's ops
 * and kind are the caller's; its read_at and close are sto__http_read_at
 * and sto__http_close. On a failed open, *status is the last response's
 * HTTP status (0: none). auth: NULL for none. */
int sto__http_open(struct sto_src **out, const char *name, const char *url, const struct sto_http_auth *auth,
                   const struct sto_known *known, const struct sto_ops *ops, enum sto_kind kind, long *status,
                   struct sl_error *err) SL_MUST_CHECK;
int sto__http_read_at(struct sto_src *s, uint64_t off, void *dst, size_t n, size_t *got, struct sl_error *err);
void sto__http_close(struct sto_src *s);

/* GET `url` whole into *body (NUL-terminated, *len bytes, the caller
 * frees it), at most `max` bytes (more: SL_EPROTO naming `name`), with the
 * configured timeouts and retries of transient failures and 5xx; a
 * redirect is not followed (its 3xx returned) unless cross_host_redirects
 * is on. Any status (a 5xx once the retries are spent)
 * is returned in *status with its body (an error's XML) for the caller to
 * judge. */
int sto__http_get(const char *name, const char *url, const struct sto_http_auth *auth, size_t max, char **body,
                  size_t *len, long *status, struct sl_error *err) SL_MUST_CHECK;

/* ---- sto_s3.c, for the tests ---- */

/* s3://BUCKET/KEY's parts: the bucket (checked: 3 to 63 of S3's characters)
 * into bucket, *key pointing into name (not empty, at most 1024 bytes). */
int sto__s3_split(const char *name, char *bucket, size_t bucket_cap, const char **key, struct sl_error *err);
/* The HTTP(S) URL an s3:// name is read at (sto_config's endpoint, region
 * and path style, or the environment's). */
int sto__s3_url(const char *name, char *out, size_t cap, struct sl_error *err);
/* Listing bounds, for tests: keys asked per page (1..1000; S3's default
 * 1000) and the most keys a listing may pass (1..10^6). Not thread-safe:
 * call before any listing. */
void sto__s3_list_limits(int page_keys, size_t max_keys);

#endif
