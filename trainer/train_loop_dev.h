/* train_loop_dev: the training loop's per-replica device work behind a
 * small ops table, so train_loop.c carries no device types: one replica's
 * copy of the model on its accelerator, its gradient, the optimizer step
 * and evaluation. Collectives are not here: the gradient is summed by the
 * strategy's device collective (train_replica_all_reduce_device, "nccl" on
 * cuda), between grads and apply.
 *
 * Backends: "cuda" (train_loop_cuda.c: train_model_cuda kernels), found
 * through train_backend.h (a kind's `model`). CPU replicas do not use this
 * table: their model is train_model.h.
 *
 * Every call runs on the replica's own thread (the one owning its
 * train_device); a handle is never shared between replicas.
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

struct train_loop_dev; /* one replica's model on its device (opaque) */

/* Caller-owned; pointers borrowed for the open call (dev for the handle's
 * life). */
struct train_loop_dev_opts {
    const struct train_model_config *model; /* inputs and max_rows filled in */
    int input_u8;                           /* staged inputs are uint8 (scaled by 1/255 on the device) */
    struct train_device *dev;               /* the replica's open device (the strategy's) */
};

struct train_loop_dev_ops {
    const char *name; /* the train_device backend it runs on: "cuda" */

    /* The model (the CPU model's initial weights for the seed) on o->dev's
     * GPU and its scratch. *out owned by the caller. */
    int (*open)(struct train_loop_dev **out, const struct train_loop_dev_opts *o, struct sl_error *err) SL_MUST_CHECK;
    /* Free everything (waits for queued work); NULL is a no-op. */
    void (*close)(struct train_loop_dev *d);

    /* This replica's gradient: zero it, forward and backward over the
     * staged piece (rows may be 0) with loss (sum of the rows' losses) /
     * global_rows. *grad: the gradient (nparams floats of device memory,
     * owned by d) for the caller to sum across replicas in place, set
     * whenever the device is idle and can take part in that sum, even when
     * the call fails (a bad label: the row added nothing, and every rank
     * must still join the sum or the others wait in it); NULL only when
     * the device cannot be synced. *loss_sum and *correct: this replica's
     * rows only. Returns with the device idle. */
    int (*grads)(struct train_loop_dev *d, const struct train_staged *p, double global_rows, float **grad,
                 double *loss_sum, double *correct, struct sl_error *err) SL_MUST_CHECK;

    /* Momentum SGD with the summed gradient; then, when `host` is not NULL,
     * the new weights copied into host[0..nparams). Returns with the device
     * idle (the staged buffers may be reused). */
    int (*apply)(struct train_loop_dev *d, float *host, struct sl_error *err) SL_MUST_CHECK;

    /* The current weights into host[0..nparams). Blocking. */
    int (*pull)(struct train_loop_dev *d, float *host, struct sl_error *err) SL_MUST_CHECK;

    /* Parameter-server mode: host[0..nparams) (the values pulled from the
     * servers) become the device weights, through the replica's pinned
     * staging buffer. Blocking. */
    int (*load)(struct train_loop_dev *d, const float *host, struct sl_error *err) SL_MUST_CHECK;

    /* Parameter-server mode: the (summed) gradient on the device into the
     * replica's pinned staging buffer, returned in *host (nparams floats,
     * owned by d, valid until the next load or gradient_to_host), for the
     * push to the servers. Blocking. */
    int (*gradient_to_host)(struct train_loop_dev *d, const float **host, struct sl_error *err) SL_MUST_CHECK;

    /* Predict the staged piece's rows and count them against its labels:
     * *rows and *correct grow, and pred[0..rows) (host memory) receives the
     * predicted classes in row order. Returns with the device idle. */
    int (*eval)(struct train_loop_dev *d, const struct train_staged *p, int64_t *pred, double *rows, double *correct,
                struct sl_error *err) SL_MUST_CHECK;
};

/* The "cuda" table (train_loop_cuda.c): defined only in builds with
 * SLUICE_HAVE_CUDA, and referenced only by train_backend.c. */
extern const struct train_loop_dev_ops train__loop_cuda;

#endif
