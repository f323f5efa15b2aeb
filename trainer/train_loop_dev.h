/* train_loop_dev: the training loop's per-replica device work behind a
 * small ops table, so train_loop.c carries no device types: one replica's
 * copy of the model on its accelerator, its gradient all-reduce across
 * every replica of every worker, the optimizer step and evaluation.
 *
 * Backends: "cuda" (train_loop_cuda.c: train_model_cuda kernels, NCCL),
 * defined only in builds with SLUICE_HAVE_CUDA. CPU replicas do not use
 * this table: their model is train_model.h and their collectives the
 * strategy's (threads, ring).
 *
 * Every call except unique_id runs on the replica's own thread (the one
 * owning its train_device); a handle is never shared between replicas.
 * Errors: 0 or a negative SL_E* code with `err` filled (device failures
 * are SL_EDEVICE naming the call and the GPU).
 */
#ifndef TRAIN_LOOP_DEV_H
#define TRAIN_LOOP_DEV_H

#include <stddef.h>

#include "sl_error.h"
#include "train_device.h"
#include "train_model.h"
#include "train_stage.h"

/* Bytes of the group id every rank joins with (NCCL's unique id). */
#define TRAIN_LOOP_DEV_ID_BYTES 128

struct train_loop_dev; /* one replica's model on its device (opaque) */

/* Caller-owned; pointers borrowed for the open call (dev for the handle's
 * life). */
struct train_loop_dev_opts {
    const struct train_model_config *model; /* inputs and max_rows filled in */
    int input_u8;                            /* staged inputs are uint8 (scaled by 1/255 on the device) */
    struct train_device *dev;                /* the replica's open device (the strategy's) */
    int nranks, rank;                        /* W x R, w x R + r */
    const char *id;                          /* TRAIN_LOOP_DEV_ID_BYTES, the same on every rank */
    int (*stop)(void *ctx);                  /* nonzero: give up waiting for a collective (another */
    void *stop_ctx;                          /* replica failed); NULL: never */
};

struct train_loop_dev_ops {
    const char *name; /* the train_device backend it runs on: "cuda" */

    /* A new group id (ncclGetUniqueId) into out; any thread, once per job
     * (worker 0's travels to the others in the rendezvous blob). */
    int (*unique_id)(char out[TRAIN_LOOP_DEV_ID_BYTES], struct sl_error *err) SL_MUST_CHECK;

    /* The model (the CPU model's initial weights for the seed) on o->dev's
     * GPU, its scratch, and this rank's membership of the group `o->id`:
     * blocks until all nranks ranks have joined, so every local replica
     * calls it at once from its own thread. *out owned by the caller. */
    int (*open)(struct train_loop_dev **out, const struct train_loop_dev_opts *o, struct sl_error *err) SL_MUST_CHECK;
    /* Leave the group and free everything (waits for queued work); NULL is
     * a no-op. failed: the loop failed (any replica, any call): leave by
     * aborting, since peers may wait in a collective this rank will not
     * join. */
    void (*close)(struct train_loop_dev *d, int failed);

    /* The step's gradient: zero it, forward and backward over the staged
     * piece (rows may be 0) with loss (sum of the rows' losses) /
     * global_rows, then the in-place sum over every rank (a collective:
     * every rank calls it once per step; after a failure before the sum,
     * a bad label say, the rank still joins it when its stream can be
     * synced, then returns the first error). *loss_sum and *correct: this
     * replica's rows only. Returns with the device idle. */
    int (*grads)(struct train_loop_dev *d, const struct train_staged *p, double global_rows, double *loss_sum,
                 double *correct, struct sl_error *err) SL_MUST_CHECK;

    /* Momentum SGD with the summed gradient; then, when `host` is not NULL,
     * the new weights copied into host[0..nparams). Returns with the device
     * idle (the staged buffers may be reused). */
    int (*apply)(struct train_loop_dev *d, float *host, struct sl_error *err) SL_MUST_CHECK;

    /* The current weights into host[0..nparams). Blocking. */
    int (*pull)(struct train_loop_dev *d, float *host, struct sl_error *err) SL_MUST_CHECK;

    /* Predict the staged piece's rows and count them against its labels:
     * *rows and *correct grow, and pred[0..rows) (host memory) receives the
     * predicted classes in row order. Returns with the device idle. */
    int (*eval)(struct train_loop_dev *d, const struct train_staged *p, int64_t *pred, double *rows,
                double *correct, struct sl_error *err) SL_MUST_CHECK;
};

#ifdef SLUICE_HAVE_CUDA
extern const struct train_loop_dev_ops train__loop_cuda;
#endif

#endif
