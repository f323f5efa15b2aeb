/* train_backend: the table of built backends. Each backend defines its
 * tables in its own file; the CUDA ones (train_device_cuda.c,
 * train_coll_nccl.c, train_loop_cuda.c) are compiled only when CMake finds
 * CUDA and NCCL, and are referenced only here, behind the trainer's one
 * #ifdef SLUICE_HAVE_CUDA. */
#include "train_backend.h"

#include <string.h>

#include "train_device_int.h"
#include "train_loop_dev.h"

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
