/* The S3 kind before its backend exists: opening one is an error that says
 * so. Replaced by sto_s3.c (issue #28, in progress); http(s) is sto_http.c.
 */
#include "sto_impl.h"

static int pending_open(struct sto_src **out, const char *name, struct sl_error *err)
{
    *out = NULL;
    return sl_error_set(err, SL_EINVAL, "open(%s): s3 sources are not built yet (issue #28)", name);
}

static int pending_read_at(struct sto_src *s, uint64_t off, void *dst, size_t n, size_t *got, struct sl_error *err)
{
    (void)off;
    (void)dst;
    (void)n;
    *got = 0;
    return sl_error_set(err, SL_EINVAL, "read(%s): s3 sources are not built yet", s->name);
}

static void pending_close(struct sto_src *s)
{
    (void)s;
}

const struct sto_ops sto_s3_ops = {"s3", pending_open, pending_read_at, pending_close};
