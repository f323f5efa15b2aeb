/* train_loop_cuda: the training loop's per-replica work on a GPU (the
 * "cuda" train_loop_dev table), built only with SLUICE_HAVE_CUDA.
 *
 * A replica owns a train_model_cuda (weights, gradients and velocity on its
 * GPU), a float input buffer for uint8 inputs, prediction and label
 * buffers for evaluation (the predictions are copied back to the host for
 * --predictions). The gradient sum across GPU replicas is not here: the
 * loop hands the gradient grads returns to the strategy's device collective
 * ("nccl", train_coll_nccl.c) before apply.
 *
 * Ordering is kept simple and host-visible: the strategy's get has already
 * synchronized the copy stream that staged the piece, so the model's stream
 * may read it at once; the gradient is complete when take_stats returns
 * (it synchronizes the model's stream), so the all-reduce on the device's
 * collective stream reads a finished gradient, and it returns only when
 * the sum is in place, before apply queues the SGD kernel on the model's
 * stream. Every call returns with the model's stream idle, so the staged
 * buffers may be refilled by the put two steps later (train_stage.h's view
 * lifetime) and step s+1's copy, queued before step s ran, overlaps it.
 *
 * Numerics: the kernels sum in the CPU model's order without FMA; the
 * gradient sum across replicas is NCCL's (its order, the same result on
 * every rank), so GPU runs agree with CPU runs to float rounding, not bit
 * for bit.
 */
#include <stdint.h>
#include <string.h>

#include "sl_alloc.h"
#include "train_cuda_inc.h"
#include "train_device.h"
#include "train_loop_dev.h"
#include "train_model_cuda.h"

struct train_loop_dev {
    struct train_device *dev; /* borrowed (the strategy's) */
    struct train_model_cuda *model;
    int ordinal, input_u8, inputs;
    size_t max_rows;
    float *x;                         /* device, max_rows x inputs (uint8 inputs scaled) */
    int64_t *pred;                    /* device, max_rows */
    int64_t *host_pred, *host_labels; /* pinned, max_rows each */
    float *host_params;               /* pinned, nparams: ps mode's staging (pulled weights in, gradient out);
                                          allocated at the first use */
};

static int cuda_fail(struct sl_error *err, cudaError_t e, const char *what, int ordinal)
{
    (void)cudaGetLastError();
    return sl_error_set(err, SL_EDEVICE, "%s on GPU %d: %s", what, ordinal, cudaGetErrorString(e));
}

static void loop_close(struct train_loop_dev *d)
{
    if (d == NULL)
        return;
    train_model_cuda_destroy(d->model);
    if (cudaSetDevice(d->ordinal) == cudaSuccess) {
        (void)cudaFree(d->x);
        (void)cudaFree(d->pred);
        (void)cudaFreeHost(d->host_pred);
        (void)cudaFreeHost(d->host_labels);
        (void)cudaFreeHost(d->host_params);
    }
    (void)cudaGetLastError();
    sl_free(d);
}

static int loop_open(struct train_loop_dev **out, const struct train_loop_dev_opts *o, struct sl_error *err)
{
    *out = NULL;
    if (o->dev == NULL || strcmp(train_device_ops_of(o->dev)->name, "cuda") != 0)
        return sl_error_set(err, SL_EINVAL, "GPU replica: the device is not a cuda device");
    struct train_loop_dev *d = sl_calloc(1, sizeof *d);
    if (d == NULL)
        return sl_error_set(err, SL_ENOMEM, "GPU replica: out of memory");
    d->dev = o->dev;
    d->ordinal = train_device_ordinal(o->dev);
    d->input_u8 = o->input_u8;
    d->inputs = o->model->inputs;
    d->max_rows = o->model->max_rows;
    int rc = train_model_cuda_create(&d->model, o->model, d->ordinal, err);
    if (rc != 0)
        goto out_close;
    cudaError_t e;
    if ((e = cudaSetDevice(d->ordinal)) != cudaSuccess ||
        (e = cudaMalloc((void **)&d->x, d->max_rows * (size_t)d->inputs * sizeof(float))) != cudaSuccess ||
        (e = cudaMalloc((void **)&d->pred, d->max_rows * sizeof(int64_t))) != cudaSuccess ||
        (e = cudaHostAlloc((void **)&d->host_pred, d->max_rows * sizeof(int64_t), cudaHostAllocDefault)) !=
            cudaSuccess ||
        (e = cudaHostAlloc((void **)&d->host_labels, d->max_rows * sizeof(int64_t), cudaHostAllocDefault)) !=
            cudaSuccess) {
        rc = cuda_fail(err, e, "GPU replica buffers", d->ordinal);
        goto out_close;
    }
    *out = d;
    return 0;

out_close:
    loop_close(d);
    return rc;
}

/* The staged inputs as floats on the device: converted into d->x, or the
 * staged buffer itself. */
static int inputs_of(struct train_loop_dev *d, const struct train_staged *p, const float **x, struct sl_error *err)
{
    if (!d->input_u8) {
        *x = p->t[0].data;
        return 0;
    }
    *x = d->x;
    return train_model_cuda_inputs_from_u8(d->model, p->t[0].data, (size_t)p->rows * (size_t)d->inputs, d->x, err);
}

static int loop_grads(struct train_loop_dev *d, const struct train_staged *p, double global_rows, float **grad,
                      double *loss_sum, double *correct, struct sl_error *err)
{
    *grad = NULL;
    int rc = train_model_cuda_zero_grads(d->model, err);
    const float *x = NULL;
    if (rc == 0 && p->rows > 0 && (rc = inputs_of(d, p, &x, err)) == 0)
        rc = train_model_cuda_forward_backward(d->model, x, p->t[1].data, p->rows, global_rows, err);
    double loss = 0;
    size_t ok = 0;
    if (rc == 0) /* waits for the model's stream: the gradient is complete */
        rc = train_model_cuda_take_stats(d->model, &loss, &ok, err);
    /* Every rank must join the sum, or the others wait in it until they
     * notice the abort. So after a failure here (a bad label is the likely
     * one: take_stats reports it, and the row added nothing) the gradient
     * is still handed out once the stream is idle, and the caller joins the
     * sum before it fails the step. Only a stream that cannot be synced (a
     * broken context) leaves it out. */
    struct sl_error later = {0};
    if (rc == 0 || train_model_cuda_sync(d->model, &later) == 0)
        *grad = train_model_cuda_grads(d->model);
    *loss_sum = loss;
    *correct = (double)ok;
    return rc;
}

static int loop_apply(struct train_loop_dev *d, float *host, struct sl_error *err)
{
    int rc = train_model_cuda_sgd_step(d->model, train_model_cuda_grads(d->model), err);
    if (rc == 0)
        rc = host != NULL ? train_model_cuda_get_params(d->model, host, err) : train_model_cuda_sync(d->model, err);
    return rc;
}

static int loop_pull(struct train_loop_dev *d, float *host, struct sl_error *err)
{
    return train_model_cuda_get_params(d->model, host, err);
}

/* ps mode's pinned staging, made once. */
static int staging(struct train_loop_dev *d, struct sl_error *err)
{
    if (d->host_params != NULL)
        return 0;
    size_t bytes = train_model_cuda_nparams(d->model) * sizeof(float);
    cudaError_t e;
    if ((e = cudaSetDevice(d->ordinal)) != cudaSuccess ||
        (e = cudaHostAlloc((void **)&d->host_params, bytes, cudaHostAllocDefault)) != cudaSuccess) {
        d->host_params = NULL;
        return cuda_fail(err, e, "cudaHostAlloc(parameter-server staging)", d->ordinal);
    }
    return 0;
}

static int loop_load(struct train_loop_dev *d, const float *host, struct sl_error *err)
{
    int rc = staging(d, err);
    if (rc != 0)
        return rc;
    memcpy(d->host_params, host, train_model_cuda_nparams(d->model) * sizeof(float));
    return train_model_cuda_set_params(d->model, d->host_params, err);
}

static int loop_gradient_to_host(struct train_loop_dev *d, const float **host, struct sl_error *err)
{
    *host = NULL;
    int rc = staging(d, err);
    if (rc != 0)
        return rc;
    cudaStream_t s = (cudaStream_t)train_model_cuda_stream(d->model);
    size_t bytes = train_model_cuda_nparams(d->model) * sizeof(float);
    cudaError_t e;
    if ((e = cudaSetDevice(d->ordinal)) != cudaSuccess ||
        (e = cudaMemcpyAsync(d->host_params, train_model_cuda_grads(d->model), bytes, cudaMemcpyDeviceToHost, s)) !=
            cudaSuccess ||
        (e = cudaStreamSynchronize(s)) != cudaSuccess)
        return cuda_fail(err, e, "cudaMemcpyAsync(gradient to host)", d->ordinal);
    *host = d->host_params;
    return 0;
}

static int loop_eval(struct train_loop_dev *d, const struct train_staged *p, int64_t *pred, double *rows,
                     double *correct, struct sl_error *err)
{
    if (p->rows == 0)
        return 0;
    const float *x = NULL;
    int rc = inputs_of(d, p, &x, err);
    if (rc == 0)
        rc = train_model_cuda_predict(d->model, x, p->rows, d->pred, err);
    if (rc != 0)
        return rc;
    cudaStream_t s = (cudaStream_t)train_model_cuda_stream(d->model);
    size_t bytes = (size_t)p->rows * sizeof(int64_t);
    cudaError_t e;
    if ((e = cudaMemcpyAsync(d->host_pred, d->pred, bytes, cudaMemcpyDeviceToHost, s)) != cudaSuccess ||
        (e = cudaMemcpyAsync(d->host_labels, p->t[1].data, bytes, cudaMemcpyDeviceToHost, s)) != cudaSuccess ||
        (e = cudaStreamSynchronize(s)) != cudaSuccess)
        return cuda_fail(err, e, "cudaMemcpyAsync(predictions to host)", d->ordinal);
    size_t ok = 0;
    for (uint32_t i = 0; i < p->rows; i++)
        ok += d->host_pred[i] == d->host_labels[i];
    memcpy(pred, d->host_pred, bytes);
    *rows += p->rows;
    *correct += (double)ok;
    return 0;
}

const struct train_loop_dev_ops train__loop_cuda = {
    .name = "cuda",
    .open = loop_open,
    .close = loop_close,
    .grads = loop_grads,
    .apply = loop_apply,
    .pull = loop_pull,
    .load = loop_load,
    .gradient_to_host = loop_gradient_to_host,
    .eval = loop_eval,
};
