/* train_backend: what this build can run replicas on, one row per device
 * kind: the kind's device table (staging and memory, train_device.h), its
 * collectives over device memory (train_coll.h) and the training loop's
 * model on it (train_loop_dev.h).
 *
 *   kind    device                 collectives          model
 *   ------  ---------------------  -------------------  -------------------
 *   "cpu"   train_device_cpu.c     none: host memory,   none: train_model.h
 *                                  the strategy's own   on the host
 *   "cuda"  train_device_cuda.c    "nccl",              train_loop_cuda.c
 *                                  train_coll_nccl.c    (train_model_cuda)
 *
 * The "cuda" row is the module libsluice-cuda.so (train_cuda_module.h),
 * loaded the first time the row is asked for, so that nothing else links
 * the CUDA runtime or NCCL: a program starts on a machine without them and
 * fails only when it asks for a GPU, with the loader's reason.
 * train_backend.c is the one place in the trainer's C code that knows
 * whether CUDA was built (its single #ifdef SLUICE_HAVE_CUDA, at the load,
 * as curl keeps its HAVE_* tests at its feature table); everything else
 * asks this table, train_device.h's train_device_find / _count / _describe
 * included (defined there). It sits below the strategy and the loop: it
 * takes the addresses of the kinds' tables without including their
 * headers. Rows do not change once found; any thread.
 */
#ifndef TRAIN_BACKEND_H
#define TRAIN_BACKEND_H

#include <stddef.h>

#include "sl_error.h"
#include "train_coll.h"

struct train_device_ops;
struct train_loop_dev_ops;

struct train_backend {
    const char *kind;                         /* "cpu", "cuda" (= device->name) */
    const struct train_device_ops *device;    /* never NULL */
    const struct train_coll_device_ops *coll; /* collectives over this kind's memory across every replica of
                                                every worker; NULL: it is host memory, and the strategy's
                                                host collectives serve */
    const struct train_loop_dev_ops *model;   /* the loop's per-replica model on this kind; NULL: the host
                                                model (train_model.h) */
};

/* *out = the row of `kind` ("cpu", "cuda"), loading the CUDA module at the
 * first ask for "cuda". SL_EINVAL, *out NULL, with why: an unknown kind, a
 * build without CUDA, or the module that could not be loaded (dlerror():
 * the module or a library it needs, libcudart or libnccl, missing), or one
 * from another sluice version. Any thread (the load happens once). */
int train_backend_load(const char *kind, const struct train_backend **out, struct sl_error *err) SL_MUST_CHECK;

/* The row of `kind`, or NULL when train_backend_load fails for it. */
const struct train_backend *train_backend_find(const char *kind);

/* Rows available (1 when the cuda row cannot be loaded, else 2: loads it),
 * and row i of them (NULL past the end). */
size_t train_backend_count(void);
const struct train_backend *train_backend_at(size_t i);

/* A new group id for b's device collectives (made once per job by worker 0
 * and handed to every worker verbatim: the rendezvous blob). SL_EINVAL
 * when b (NULL: unknown or not built) has no device collectives,
 * SL_EDEVICE. */
int train_backend_group_id(const struct train_backend *b, char out[TRAIN_COLL_ID_BYTES],
                           struct sl_error *err) SL_MUST_CHECK;

#endif
