/* train_device: the calls that dispatch on a kind name, over the table of
 * built backends (train_backend.c, the one place that knows whether the
 * CUDA backend was built). */
#include "train_device.h"

#include <stdio.h>
#include <string.h>

#include "train_backend.h"
#include "train_device_int.h"

const struct train_device_ops *train_device_find(const char *kind)
{
    const struct train_backend *b = train_backend_find(kind);
    return b != NULL ? b->device : NULL;
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
    if (ops == NULL) {
        char kinds[64] = "";
        size_t nk = train_backend_count();
        for (size_t i = 0; i < nk; i++)
            snprintf(kinds + strlen(kinds), sizeof kinds - strlen(kinds), "%s%s", i == 0 ? "" : " and ",
                     train_backend_at(i)->kind);
        rc = sl_error_set(err, SL_EINVAL, "unknown device kind '%s' (this build has %s%s)", kind ? kind : "(null)",
                          kinds, nk == 1 ? " only" : "");
    }
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
