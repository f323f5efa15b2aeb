/* train_device: what every backend's device shares (its ordinal and
 * table, the stream check). The calls that dispatch on a kind name
 * (train_device_find, _count, _describe) are train_backend.c's, at the
 * table of built backends, the one place that knows whether the CUDA
 * backend was built. */
#include "train_device.h"

#include "train_device_int.h"

int train_device_ordinal(const struct train_device *d)
{
    return d->ordinal;
}

const struct train_device_ops *train_device_ops_of(const struct train_device *d)
{
    return d->ops;
}

int train__device_check_stream(const struct train_device *d, const char *call, int stream, struct sl_error *err)
{
    if (stream >= 0 && stream < TRAIN_DEVICE_STREAMS)
        return 0;
    return sl_error_set(err, SL_EINVAL, "%s on %s %d: stream %d (expected 0..%d)", call, d->ops->name, d->ordinal,
                        stream, TRAIN_DEVICE_STREAMS - 1);
}
