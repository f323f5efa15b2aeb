/* sto: the dispatch by name, the checks every kind shares, and the
 * process-wide configuration of remote sources.
 */
#include "sto.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sl_alloc.h"
#include "sto_impl.h"

static int has_prefix(const char *s, const char *p)
{
    return strncmp(s, p, strlen(p)) == 0;
}

enum sto_kind sto_kind_of(const char *name)
{
    if (has_prefix(name, "http://") || has_prefix(name, "https://"))
        return STO_HTTP;
    if (has_prefix(name, "s3://"))
        return STO_S3;
    return STO_FILE;
}

int sto_is_remote(const char *name)
{
    return sto_kind_of(name) != STO_FILE;
}

const char *sto_local_path(const char *name)
{
    if (sto_is_remote(name))
        return NULL;
    return has_prefix(name, "file://") ? name + strlen("file://") : name;
}

static const struct sto_ops *ops_of(enum sto_kind k)
{
    switch (k) {
    case STO_HTTP: return &sto_http_ops;
    case STO_S3: return &sto_s3_ops;
    case STO_FILE:
    default: return &sto_file_ops;
    }
}

int sto_open(struct sto_src **out, const char *name, struct sl_error *err)
{
    *out = NULL;
    if (name == NULL || name[0] == '\0')
        return sl_error_set(err, SL_EINVAL, "open: an empty file name");
    return ops_of(sto_kind_of(name))->open(out, name, err);
}

int sto_open_known(struct sto_src **out, const char *name, const struct sto_known *k, struct sl_error *err)
{
    *out = NULL;
    if (name == NULL || name[0] == '\0')
        return sl_error_set(err, SL_EINVAL, "open: an empty file name");
    if (k->etag == NULL || strlen(k->etag) >= STO_ETAG_MAX)
        return sl_error_set(err, SL_EINVAL, "open(%s): no usable ETag to open it by", name);
    const struct sto_ops *ops = ops_of(sto_kind_of(name));
    if (ops->open_known != NULL)
        return ops->open_known(out, name, k, err);
    int rc = ops->open(out, name, err);
    if (rc != 0)
        return rc;
    if ((*out)->size != k->size) {
        rc = sl_error_set(err, SL_ECORRUPT, "%s: changed since it was scanned (%llu bytes, now %llu)", name,
                          (unsigned long long)k->size, (unsigned long long)(*out)->size);
        sto_close(*out);
        *out = NULL;
    }
    return rc;
}

int sto_read_at(struct sto_src *s, uint64_t off, void *dst, size_t n, size_t *got, struct sl_error *err)
{
    *got = 0;
    if (n == 0 || off >= s->size)
        return 0;
    return s->ops->read_at(s, off, dst, n, got, err);
}

int sto_read_full(struct sto_src *s, uint64_t off, void *dst, size_t n, struct sl_error *err)
{
    size_t got = 0;
    int rc = sto_read_at(s, off, dst, n, &got, err);
    if (rc != 0)
        return rc;
    if (got != n)
        return sl_error_set(err, SL_ECORRUPT, "%s: bytes [%llu, %llu) asked of an object of %llu bytes", s->name,
                            (unsigned long long)off, (unsigned long long)off + n, (unsigned long long)s->size);
    return 0;
}

void sto_close(struct sto_src *s)
{
    if (s != NULL)
        s->ops->close(s);
}

/* ---- configuration ---- */

static pthread_mutex_t config_lock = PTHREAD_MUTEX_INITIALIZER;
static struct sto_config config;
static int config_set;
static char *config_strings[3];

void sto_config_default(struct sto_config *c)
{
    memset(c, 0, sizeof(*c));
    c->connect_timeout_ms = 10000;
    c->stall_timeout_ms = 30000;
    c->max_retries = 5;
    c->backoff_ms = 100;
    c->backoff_max_ms = 10000;
    c->max_redirects = 5;
}

#define DAY_MS (24L * 3600 * 1000)

int sto_configure(const struct sto_config *c, struct sl_error *err)
{
    if (c->connect_timeout_ms < 1 || c->connect_timeout_ms > DAY_MS)
        return sl_error_set(err, SL_EINVAL, "storage: connect timeout %ld ms (need 1 .. %ld)", c->connect_timeout_ms,
                            DAY_MS);
    if (c->stall_timeout_ms < 1 || c->stall_timeout_ms > DAY_MS)
        return sl_error_set(err, SL_EINVAL, "storage: stall timeout %ld ms (need 1 .. %ld)", c->stall_timeout_ms,
                            DAY_MS);
    if (c->max_retries < 0 || c->max_retries > 100)
        return sl_error_set(err, SL_EINVAL, "storage: %d retries (need 0 .. 100)", c->max_retries);
    if (c->backoff_ms < 0 || c->backoff_ms > DAY_MS || c->backoff_max_ms < c->backoff_ms || c->backoff_max_ms > DAY_MS)
        return sl_error_set(err, SL_EINVAL,
                            "remote backoff: first %ld ms, most %ld ms (need 0 <= first <= most <= %ld: "
                            "--remote-backoff-ms, --remote-backoff-max-ms)",
                            c->backoff_ms, c->backoff_max_ms, DAY_MS);
    if (c->max_redirects < 0 || c->max_redirects > 50)
        return sl_error_set(err, SL_EINVAL, "storage: %d redirects (need 0 .. 50)", c->max_redirects);
    if (c->ca_file != NULL && access(c->ca_file, R_OK) != 0)
        return sl_error_sys(err, errno, "remote CA file %s", c->ca_file);
    const char *in[3] = {c->ca_file, c->s3_endpoint, c->s3_region};
    char *copy[3] = {NULL, NULL, NULL};
    for (int i = 0; i < 3; i++)
        if (in[i] != NULL && (copy[i] = sl_strdup(in[i])) == NULL) {
            for (int j = 0; j < i; j++)
                free(copy[j]);
            return sl_error_set(err, SL_ENOMEM, "storage: out of memory");
        }
    pthread_mutex_lock(&config_lock);
    for (int i = 0; i < 3; i++) {
        free(config_strings[i]);
        config_strings[i] = copy[i];
    }
    config = *c;
    config.ca_file = copy[0];
    config.s3_endpoint = copy[1];
    config.s3_region = copy[2];
    config_set = 1;
    pthread_mutex_unlock(&config_lock);
    return 0;
}

const struct sto_config *sto__config(void)
{
    pthread_mutex_lock(&config_lock);
    if (!config_set) {
        sto_config_default(&config);
        config_set = 1;
    }
    pthread_mutex_unlock(&config_lock);
    return &config;
}
