/* train_device_int: what the device backends share; not for callers.
 *
 * Every backend's device struct starts with a struct train_device, so the
 * generic code can read the ops and the ordinal of any device (as SQLite's
 * sqlite3_file starts every VFS's file). */
#ifndef TRAIN_DEVICE_INT_H
#define TRAIN_DEVICE_INT_H

#include "train_device.h"

struct train_device {
    const struct train_device_ops *ops; /* the backend that opened it */
    int ordinal;
};

/* The backends' tables, listed in train_backend.c (the cuda one is defined
 * only in builds with SLUICE_HAVE_CUDA, and referenced only there). */
extern const struct train_device_ops train__device_cpu;
extern const struct train_device_ops train__device_cuda;

/* 0 when stream is a valid copy stream, else SL_EINVAL naming the call. */
int train__device_check_stream(const struct train_device *d, const char *call, int stream, struct sl_error *err);

#endif
