/* train_model: the built-in dense models (softmax regression and a ReLU
 * MLP) with softmax cross-entropy and momentum SGD, on the CPU, float32.
 *
 * Architecture: d[0] = inputs, d[1..nhidden] = hidden[0..nhidden), d[L] =
 * classes with L = nhidden + 1. Layer l (1..L) computes
 *   z_l = a_{l-1} W_l + b_l,  a_l = relu(z_l) for l < L,
 * and the last layer's z_L are the logits fed to softmax cross-entropy.
 * nhidden = 0 is softmax regression.
 *
 * Parameter layout: ONE contiguous float32 array, layer by layer:
 *   W_1 [d0][d1] row-major (W[i * d1 + o] connects input i to output o),
 *   b_1 [d1], W_2 [d1][d2], b_2 [d2], ..., W_L, b_L.
 * The gradient array has the same layout, so both can be mirrored or
 * all-reduced as one buffer.
 *
 * Initialization (exact rule, bit-identical for the same seed): one
 * splitmix64 stream with state = seed draws, in parameter order over the
 * weights only (W_1 row-major, then W_2, ...), u = (next() >> 40) * 2^-24,
 * a value in [0, 1) with 24 random bits, and sets
 *   w = (float)(limit * (2u - 1))   (computed in double),
 * with limit = sqrt(6 / fan_in) for hidden layers (He uniform, followed by
 * ReLU) and limit = sqrt(6 / (fan_in + fan_out)) for the output layer
 * (Glorot uniform, followed by softmax). Biases are 0.
 *
 * Optimizer (tf.keras SGD with momentum, nesterov = False): with velocity v
 * (zero at create) and reduced gradient g, element-wise in float32:
 *   v = momentum * v - lr * g;  p = p + v.
 *
 * Loss and gradient scaling: forward_backward over a piece of `rows` rows
 * accumulates into the gradient array d/dp of (sum of these rows' losses) /
 * global_rows. Summing the pieces' gradients of every replica, each with the
 * same global_rows (the global batch's real row count), gives the gradient
 * of the mean loss over the global batch whatever the split.
 *
 * Determinism: no threads, fixed loop orders. Every gradient element
 * receives its per-row contributions in row order, added straight into the
 * gradient array, so calls on rows [0,5) then [5,8) into the same gradient
 * array give bitwise the same result as one call on [0,8), and results do
 * not depend on max_rows (only the working set does).
 *
 * Thread-safe: no; one owner. Pointers from train_model_params(),
 * train_model_grads() and train_model_velocity() are borrowed, valid until destroy.
 */
#ifndef TRAIN_MODEL_H
#define TRAIN_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "sl_error.h"

#define TRAIN_MODEL_MAX_HIDDEN 4
#define TRAIN_MODEL_MAX_WIDTH (1 << 24) /* inputs, classes, each hidden size */
#define TRAIN_MODEL_MAX_ROWS (1 << 20)  /* max_rows upper limit */
#define TRAIN_MODEL_DEFAULT_MAX_ROWS 256
#define TRAIN_MODEL_DEFAULT_LR 0.01f /* tf.keras SGD default */

/* Caller-owned value struct. Zero lr means the default 0.01; zero max_rows
 * means 256. momentum 0 is plain SGD. */
struct train_model_config {
    int inputs;                         /* >= 1 */
    int classes;                        /* >= 2 */
    int nhidden;                        /* 0..4; 0 = softmax regression */
    int hidden[TRAIN_MODEL_MAX_HIDDEN]; /* hidden[0..nhidden) >= 1 */
    uint64_t seed;                      /* initialization seed */
    float lr;                           /* > 0 (0 = default) */
    float momentum;                     /* [0, 1) */
    size_t max_rows;                    /* rows per internal chunk (scratch size) */
};

struct train_model;

/* Create a model from *cfg (copied) into *out, parameters initialized from
 * cfg->seed, gradients and velocity zero. SL_EINVAL for a bad config
 * (the message names the field), SL_ENOMEM. On error *out is NULL. */
int train_model_create(struct train_model **out, const struct train_model_config *cfg,
                       struct sl_error *err) SL_MUST_CHECK;

/* Free the model; NULL is accepted. */
void train_model_destroy(struct train_model *m);

/* Number of float32 parameters (and gradient elements). */
size_t train_model_nparams(const struct train_model *m);

/* The parameter / gradient arrays (nparams floats each), borrowed, owned by
 * the model. Callers may write both (e.g. to install mirrored values). */
float *train_model_params(struct train_model *m);
float *train_model_grads(struct train_model *m);

/* The optimizer's velocity (nparams floats, the v of the rule above),
 * borrowed, owned by the model: with the parameters, the whole state a
 * checkpoint keeps (train_ckpt.h). Callers may write it to restore one. */
float *train_model_velocity(struct train_model *m);

/* Set every gradient element to 0. */
void train_model_zero_grads(struct train_model *m);

/* Forward and backward over `rows` rows: x is rows x inputs (row-major,
 * borrowed), labels has rows entries. Accumulates (adds) into the gradient
 * array the gradient of (sum of these rows' cross-entropy losses) /
 * global_rows. *loss_sum_out (if not NULL) receives the summed, not
 * averaged, loss of these rows (accumulated in double, then rounded);
 * *correct_out (if not NULL) the number of rows whose argmax logit (lowest
 * index on ties) equals the label. rows = 0 is an empty piece: nothing is
 * added, outputs are 0, x and labels may be NULL.
 * SL_EINVAL: a label outside [0, classes) ("row R: label out of range
 * (expected 0 <= label < C, got V)", the first such row), global_rows not
 * finite or below rows (or not > 0 when rows > 0), NULL x/labels with
 * rows > 0. On error nothing was added to the gradients. */
int train_model_forward_backward(struct train_model *m, const float *x, const int64_t *labels, size_t rows,
                                 double global_rows, float *loss_sum_out, size_t *correct_out,
                                 struct sl_error *err) SL_MUST_CHECK;

/* One momentum-SGD step (rule above) with `grads` (nparams floats, the
 * reduced gradient; may be train_model_grads(m)). SL_EINVAL for NULL. */
int train_model_sgd_step(struct train_model *m, const float *grads, struct sl_error *err) SL_MUST_CHECK;

/* The optimizer rule above on any n elements: p, v updated in place from
 * g. train_model_sgd_step is this on the whole model; a parameter server
 * applies it to the variables it holds, so that its arithmetic is the
 * model's, bit for bit. */
void train_sgd_apply(float *p, float *v, const float *g, size_t n, float lr, float momentum);

/* The model's variables in creation order: W_1, b_1, W_2, b_2, ..., each a
 * contiguous run of the parameter array. */
#define TRAIN_MODEL_MAX_VARS (2 * (TRAIN_MODEL_MAX_HIDDEN + 1))
struct train_model_var {
    char kind;     /* 'W' or 'b' */
    int layer;     /* 1..L */
    size_t offset; /* first element in the parameter array */
    size_t count;  /* elements */
};
/* Fills out[0..min(n, max)) and returns n, the model's variable count. */
size_t train_model_variables(const struct train_model *m, struct train_model_var *out, size_t max);

/* Argmax class (lowest index on ties) of each of `rows` rows of x into
 * pred_out. rows = 0 does nothing. SL_EINVAL for NULL buffers with rows > 0. */
int train_model_predict(struct train_model *m, const float *x, size_t rows, int64_t *pred_out,
                        struct sl_error *err) SL_MUST_CHECK;

/* out[i] = (float)in[i] / 255.0f for i < n (a correctly rounded division,
 * as x / 255.0 in TensorFlow). */
void train_model_inputs_from_u8(const uint8_t *in, size_t n, float *out);

#endif
