/* train_model_cuda: the built-in models (train_model.h) on one GPU: the
 * same architecture, parameter layout, initialization, loss scaling and
 * momentum SGD, as CUDA kernels (trainer/model/train_model_cuda.cu, built only
 * when CMake finds CUDA; declared only in builds with SLUICE_HAVE_CUDA).
 *
 * Every array argument named *_dev is device memory on the model's GPU
 * (e.g. from the cuda backend's alloc_device, filled by copy_h2d_async and
 * synced, or ordered with an event); the model borrows it for the call and
 * the kernels it queues. Work is queued on the model's own stream
 * (train_model_cuda_stream) and the calls return without waiting, except
 * those that say they block.
 *
 * Numerics: float32 like the CPU model, each output element computed by one
 * thread summing in the CPU model's order (inputs in order, rows in order),
 * compiled without fused multiply-add contraction; the softmax in double as
 * on the CPU. Results agree with the CPU model to float rounding (expf and
 * log differ in the last bits between the host library and CUDA's), and are
 * deterministic run to run on one GPU: no atomics.
 *
 * Status (issue #4): compiled in every CUDA build, checked against the CPU
 * model by tests/gpu/test_train_model_cuda.c, which needs a GPU and has
 * never run on one; the training loop drives it for GPU replicas
 * (train_loop_cuda.c).
 *
 * Thread-safety: none; one owner thread at a time (the replica's).
 */
#ifndef TRAIN_MODEL_CUDA_H
#define TRAIN_MODEL_CUDA_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "sl_error.h"
#include "train_model.h"

struct train_model_cuda;

/* Create the model of *cfg on GPU `ordinal` (made current for the calling
 * thread), with the CPU model's initial parameters for cfg->seed (a CPU
 * model is built to validate cfg and draw them), zero gradients and
 * velocity. On success *out is owned by the caller. SL_EINVAL (bad config,
 * as train_model_create says), SL_ENOMEM, SL_EDEVICE (CUDA failures, with
 * cudaGetErrorString). Blocking. */
int train_model_cuda_create(struct train_model_cuda **out, const struct train_model_config *cfg, int ordinal,
                            struct sl_error *err) SL_MUST_CHECK;

/* Free the model (waits for its stream); NULL is accepted. */
void train_model_cuda_destroy(struct train_model_cuda *m);

size_t train_model_cuda_nparams(const struct train_model_cuda *m);

/* The model's stream (a cudaStream_t), for callers that order their own
 * copies or collectives with it. Borrowed. */
void *train_model_cuda_stream(struct train_model_cuda *m);

/* Device arrays of nparams floats, borrowed until destroy, in the layout of
 * train_model.h (so a gradient can be all-reduced with NCCL in place). */
float *train_model_cuda_params(struct train_model_cuda *m);
float *train_model_cuda_grads(struct train_model_cuda *m);

/* Copy the parameters to / from host memory (nparams floats). Blocking. */
int train_model_cuda_get_params(struct train_model_cuda *m, float *host, struct sl_error *err) SL_MUST_CHECK;
int train_model_cuda_set_params(struct train_model_cuda *m, const float *host, struct sl_error *err) SL_MUST_CHECK;

/* Queue: out_dev[i] = in_dev[i] / 255 for n values (uint8 inputs scaled
 * as train_model_inputs_from_u8 does, bit for bit). SL_EINVAL (NULL with
 * n > 0), SL_EDEVICE. */
int train_model_cuda_inputs_from_u8(struct train_model_cuda *m, const uint8_t *in_dev, size_t n, float *out_dev,
                                    struct sl_error *err) SL_MUST_CHECK;

/* Queue: gradients to zero. */
int train_model_cuda_zero_grads(struct train_model_cuda *m, struct sl_error *err) SL_MUST_CHECK;

/* Queue forward and backward over `rows` rows (x_dev rows x inputs,
 * labels_dev rows int64), adding the gradient of (sum of the rows' losses)
 * / global_rows into the gradient array, as train_model_forward_backward.
 * The rows' summed loss and correct count are accumulated on the device
 * until train_model_cuda_take_stats. Labels are checked on the device: a
 * row whose label is outside [0, classes) adds nothing (no loss, no
 * gradient) and is reported by take_stats. SL_EINVAL (global_rows as on
 * the CPU, NULL arrays with rows > 0), SL_EDEVICE (a launch failed). */
int train_model_cuda_forward_backward(struct train_model_cuda *m, const float *x_dev, const int64_t *labels_dev,
                                      size_t rows, double global_rows, struct sl_error *err) SL_MUST_CHECK;

/* Queue one momentum-SGD step with grads_dev (nparams floats on the device;
 * may be train_model_cuda_grads(m)). */
int train_model_cuda_sgd_step(struct train_model_cuda *m, const float *grads_dev, struct sl_error *err) SL_MUST_CHECK;

/* Queue predictions: the argmax class of each row of x_dev into pred_dev
 * (rows int64, device memory). */
int train_model_cuda_predict(struct train_model_cuda *m, const float *x_dev, size_t rows, int64_t *pred_dev,
                             struct sl_error *err) SL_MUST_CHECK;

/* Wait for the stream, then read and reset the loss sum and correct count
 * accumulated since the last call. SL_EINVAL "row R: label out of range
 * (expected 0 <= label < C)" when a forward_backward since then saw a bad
 * label (R counts the rows of every call since the last take_stats, the
 * first bad one); SL_EDEVICE for an
 * asynchronous failure. Blocking. */
int train_model_cuda_take_stats(struct train_model_cuda *m, double *loss_sum, size_t *correct,
                                struct sl_error *err) SL_MUST_CHECK;

/* Wait for everything queued on the model's stream. 0 or SL_EDEVICE. */
int train_model_cuda_sync(struct train_model_cuda *m, struct sl_error *err) SL_MUST_CHECK;

#ifdef __cplusplus
}
#endif

#endif
