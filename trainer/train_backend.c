/* train_backend: the table of built backends, and train_device.h's calls
 * that dispatch on a kind name (train_device_find, _count, _describe), so
 * the device layer itself needs no list. Each backend defines its tables
 * in its own file; the CUDA ones (train_device_cuda.c, train_coll_nccl.c,
 * train_loop_cuda.c) are compiled only when CMake finds CUDA and NCCL, and
 * are referenced only here, behind the trainer's one #ifdef
 * SLUICE_HAVE_CUDA. */
#include "train_backend.h"

#include <stdio.h>
#include <string.h>

#include "train_device_int.h"

/* The loop's GPU model table, declared by train_loop_dev.h too; that header
 * is not included here, so the table of backends stays below the training
 * loop (only its address is taken). */
extern const struct train_loop_dev_ops train__loop_cuda;

static const struct train_backend backends[] = {
    {.kind = "cpu", .device = &train__device_cpu, .coll = NULL, .model = NULL},
#ifdef SLUICE_HAVE_CUDA
    {.kind = "cuda", .device = &train__device_cuda, .coll = &train__coll_nccl, .model = &train__loop_cuda},
#endif
};

const struct train_backend *train_backend_find(const char *kind)
{
    if (kind == NULL)
        return NULL;
    for (size_t i = 0; i < sizeof backends / sizeof backends[0]; i++)
        if (strcmp(backends[i].kind, kind) == 0)
            return &backends[i];
    return NULL;
}

size_t train_backend_count(void)
{
    return sizeof backends / sizeof backends[0];
}

const struct train_backend *train_backend_at(size_t i)
{
    return i < train_backend_count() ? &backends[i] : NULL;
}

int train_backend_group_id(const struct train_backend *b, char out[TRAIN_COLL_ID_BYTES], struct sl_error *err)
{
    if (b == NULL || b->coll == NULL)
        return sl_error_set(err, SL_EINVAL, "'%s' devices have no group collectives in this build",
                            b != NULL ? b->kind : "(unknown)");
    return b->coll->group_id(out, err);
}

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
