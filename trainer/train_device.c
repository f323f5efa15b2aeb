/* train_device: the list of built backends and the calls that dispatch on a
 * kind name. The list is the one place that knows whether the CUDA backend
 * was built (the single SLUICE_HAVE_CUDA test outside the backend itself,
 * as curl keeps its HAVE_* tests at the feature table). */
#include "train_device.h"

#include <stdio.h>
#include <string.h>

#include "train_device_int.h"

static const struct train_device_ops *const backends[] = {
    &train__device_cpu,
#ifdef SLUICE_HAVE_CUDA
    &train__device_cuda,
#endif
};

const struct train_device_ops *train_device_find(const char *kind)
{
    if (kind == NULL)
        return NULL;
    for (size_t i = 0; i < sizeof backends / sizeof backends[0]; i++)
        if (strcmp(backends[i]->name, kind) == 0)
            return backends[i];
    return NULL;
}

int train_device_count(const char *kind)
{
    const struct train_device_ops *ops = train_device_find(kind);
    return ops == NULL ? 0 : ops->count();
}

int train_device_describe(const char *kind, int ordinal, char *buf, size_t n, struct sl_error *err)
{
    const struct train_device_ops *ops = train_device_find(kind);
    int rc;
    if (ops == NULL)
        rc = sl_error_set(err, SL_EINVAL, "unknown device kind '%s' (this build has %s)",
                          kind ? kind : "(null)",
                          sizeof backends / sizeof backends[0] > 1 ? "cpu and cuda" : "cpu only");
    else
        rc = ops->describe(ordinal, buf, n, err);
    if (rc != 0 && n > 0)
        snprintf(buf, n, "%s %d: unavailable", kind ? kind : "(null)", ordinal);
    return rc;
}

int train_device_ordinal(const struct train_device *d)
{
    return d->ordinal;
}

const struct train_device_ops *train_device_ops_of(const struct train_device *d)
{
    return d->ops;
}

int train__device_check_stream(const struct train_device *d, const char *call, int stream,
                               struct sl_error *err)
{
    if (stream >= 0 && stream < TRAIN_DEVICE_STREAMS)
        return 0;
    return sl_error_set(err, SL_EINVAL, "%s on %s %d: stream %d (expected 0..%d)", call,
                        d->ops->name, d->ordinal, stream, TRAIN_DEVICE_STREAMS - 1);
}
