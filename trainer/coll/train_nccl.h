/* train_nccl: NCCL communicators for the cuda backend's all-reduce
 * (train_device_ops.all_reduce_sum_f32 of train_device_find("cuda")) and
 * broadcast, defined with the "nccl" collective (train_coll.h,
 * train_coll_nccl.c), through which the trainer reaches them; this header
 * is for that collective and the GPU tests.
 *
 * Defined only in builds with SLUICE_HAVE_CUDA. Setup, as NCCL's: one rank
 * makes a unique id, the id travels to every rank (over the ZeroMQ control
 * channel across processes), and every rank calls train_nccl_comm_init with
 * its rank and its opened GPU.
 *
 * Thread-safety: a communicator belongs to the thread that owns its device.
 */
#ifndef TRAIN_NCCL_H
#define TRAIN_NCCL_H

#include "sl_error.h"
#include "train_device.h"

/* Size of a unique id: NCCL_UNIQUE_ID_BYTES. */
#define TRAIN_NCCL_ID_BYTES 128

/* Make a new unique id (ncclGetUniqueId) into out, an opaque blob to pass to
 * every rank verbatim. 0 or SL_EDEVICE. Blocking; call once per group. */
int train_nccl_unique_id(char out[TRAIN_NCCL_ID_BYTES], struct sl_error *err) SL_MUST_CHECK;

/* Join the group `id` as rank `rank` of `nranks` (ncclCommInitRank) on
 * `dev`, a device from train_device_find("cuda")->open(). Blocks until all
 * nranks ranks have called it, so ranks in one process each call it from
 * their own thread. On success *out is owned by the caller until
 * train_nccl_comm_destroy(); `dev` is borrowed and must stay open until
 * then. 0, SL_EINVAL (bad rank, nranks or device), SL_ENOMEM, SL_EDEVICE. */
int train_nccl_comm_init(struct train_comm **out, int nranks, int rank, const char id[TRAIN_NCCL_ID_BYTES],
                         struct train_device *dev, struct sl_error *err) SL_MUST_CHECK;

/* Destroy the communicator (ncclCommDestroy, or ncclCommAbort once one of
 * its all-reduces has failed or train_nccl_comm_set_failed was called, so a
 * collective stuck on a missing peer does not hold it); NULL is a no-op.
 * Every rank destroys its own. Blocking. */
void train_nccl_comm_destroy(struct train_comm *c);

/* In-place broadcast of n floats at dev_buf (device memory of the comm's
 * device) from rank `root` to every rank of c; returns when the result is
 * in dev_buf. The same rules, stream and errors as all_reduce_sum_f32
 * (SL_EINVAL for a root outside 0..nranks-1). */
int train_nccl_broadcast_f32(struct train_comm *c, float *dev_buf, size_t n, int root,
                             struct sl_error *err) SL_MUST_CHECK;

/* Make the coming destroy an ncclCommAbort: for a rank leaving after a
 * failure elsewhere (its own open, a step, another replica). A plain
 * ncclCommDestroy ends with a barrier among the ranks of this host (NCCL
 * 2.28), which peers waiting in a collective for this rank never reach.
 * NULL is a no-op. */
void train_nccl_comm_set_failed(struct train_comm *c);

/* While waiting for an all-reduce, also poll stop(ctx) (any thread may
 * make it nonzero, e.g. train_strategy_aborted: another replica failed and
 * will never join): the wait then ends with SL_EDEVICE and the
 * communicator is marked failed. stop NULL: wait for NCCL only. */
void train_nccl_comm_set_stop(struct train_comm *c, int (*stop)(void *ctx), void *ctx);

#endif
