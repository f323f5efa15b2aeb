/* train_device_cuda: what the cuda device table (train_device_cuda.c)
 * shares with the "nccl" collective (coll/train_coll_nccl.c), whose NCCL
 * communicators run on a device's collective stream; not for callers.
 * Built only with SLUICE_HAVE_CUDA. */
#ifndef TRAIN_DEVICE_CUDA_H
#define TRAIN_DEVICE_CUDA_H

#include <stddef.h>

#include "sl_error.h"
#include "train_cuda_inc.h"
#include "train_device_int.h"

/* Every communicator (train_device.h) starts with its own all-reduce: the
 * cuda table's all_reduce_sum_f32 calls it, so the NCCL body stays with
 * the collective that made the communicator (train_nccl_comm_init). */
struct train_comm {
    int (*all_reduce_sum_f32)(struct train_comm *c, float *dev_buf, size_t n, struct sl_error *err) SL_MUST_CHECK;
};

/* SL_EDEVICE "<what>: <cudaGetErrorString(e)>", clearing the runtime's
 * last error. */
SL_PRINTF(3, 4)
int train__cuda_fail(struct sl_error *err, cudaError_t e, const char *fmt, ...);

/* cudaSetDevice(ordinal): 0 or SL_EDEVICE. */
int train__cuda_make_current(int ordinal, struct sl_error *err) SL_MUST_CHECK;

/* The collective stream of d, a device of train__device_cuda: not a copy
 * stream, so an all-reduce never queues behind a prefetch copy. */
cudaStream_t train__cuda_coll_stream(struct train_device *d);

#endif
