/* train_loop: one worker's synchronous data-parallel training step on CPU
 * or GPU replicas, the model of trainer/model/train_model.h, written as a step
 * function of the strategy API (train_strategy.h).
 *
 * The strategy runs R replica threads (the caller's thread is replica 0);
 * the weights are a strategy variable (R mirrored copies, or one in tower
 * mode) and each replica has a train_model for its forward and backward
 * passes. A step stages the R pieces (the input and label tensors only)
 * through every replica's double-buffered stager, then runs the step
 * function on every replica:
 *   1. N, the global batch's real row count: an all_reduce of the rows
 *      (with opts.control, the step's control value rides in the same
 *      all_reduce, a second float: train_loop_control);
 *   2. the gradient of (sum of its rows' losses) / N, with the loss sum and
 *      correct count appended (tower mode: the tower's mean loss scaled by
 *      train_replica_loss_scale, the same value for equal towers);
 *   3. an all_reduce SUM of that buffer across replicas and workers:
 *      exactly the gradient of the mean cross-entropy over the global batch,
 *      whatever the W x R split (up to float reassociation; empty pieces
 *      count 0 rows);
 *   4. momentum SGD applied to the weights with train_replica_var_apply:
 *      every mirrored copy by its replica, or the one tower copy once.
 * Every copy on every worker stays bit-identical; the strategy compares
 * the copies' hashes every `hash_every` steps and on
 * train_loop_check_mirrored.
 *
 * Parameter-server mode (mode ps, CPU replicas): the weights live on the
 * parameter servers (train_ps.h), placed variable by variable; each run
 * pulls them into the replicas' copies first, N in step 1 is this
 * worker's rows (the reductions stay within the worker), and step 4 is
 * the push of the gradient to the servers, which apply the same momentum
 * SGD on arrival. With one worker this is mirrored training bit for bit.
 *
 * Staging: train_loop_put stages a step (its pieces may be released when
 * it returns) and train_loop_run runs the oldest staged one; up to 2 may be
 * staged, so a caller that puts step s+1 before running step s overlaps
 * s+1's host-to-device copy with step s (put(0) put(1) run put(2) run ...
 * run). train_loop_step is put + run. The arithmetic does not depend on
 * the order.
 *
 * GPU replicas (device "cuda", builds with SLUICE_HAVE_CUDA;
 * train_loop_dev.h): each replica thread keeps its own copy of the weights
 * on its GPU (train_model_cuda), the gradient is summed in place by the
 * strategy's device collective (train_replica_all_reduce_device: NCCL
 * over every GPU of every worker, nranks = W x R, rank = w x R + r, joined
 * by the strategy at create), momentum SGD runs on the device; the row count and the loss
 * and correct sums use the strategy's collectives as on CPU. The host
 * copies of the weights (the strategy variable) are refreshed from the
 * devices when read: before each hash_every-th run's check,
 * train_loop_check_mirrored, train_loop_pull, weights_hash and model.
 * Mirrored mode only.
 *
 * Thread-safe: no; one owner (the replica threads are internal).
 */
#ifndef TRAIN_LOOP_H
#define TRAIN_LOOP_H

#include <stddef.h>
#include <stdint.h>

#include "sl_error.h"
#include "sl_wire.h"
#include "train_model.h"
#include "train_ps.h"
#include "train_ring.h"
#include "train_strategy.h"

struct train_loop_opts {
    struct train_model_config model; /* inputs and max_rows are filled from the schema */
    const char *input;        /* tensor holding the inputs: uint8 (scaled by 1/255) or float32, per-element rank 1 */
    const char *label;        /* int64 scalar labels */
    struct train_ring *ring;  /* across workers; NULL for one worker */
    uint32_t replicas;        /* local replicas, one thread each (0: 1) */
    uint32_t worker, workers; /* this worker and W (the ring's size; 0: 1) */
    enum train_strategy_mode mode; /* mirrored (default), tower (one worker) or ps (parameter servers) */
    const char *const *ps;         /* ps mode: the parameter servers' endpoints, server 0 first (nps of them) */
    uint32_t nps;
    enum train_ps_placement ps_placement; /* how the model's variables go to the servers */
    int ps_timeout_ms;                    /* a server silent this long fails the step, naming it (0: 10 s) */
    uint64_t ps_session;                  /* ps mode: the session train_ps_resume was given (0: one drawn at open) */
    uint32_t hash_every;                  /* compare the weights' copies every K steps (0: only on check) */
    const char *device;                   /* "cpu" (NULL) or "cuda" (GPU replicas) */
    const int *ordinals;                  /* cuda: [replicas] GPU of each replica (NULL: replica r on GPU r) */
    const char *dev_id;                   /* cuda: TRAIN_LOOP_ID_BYTES, worker 0's group id (train_loop_group_id),
                                the same on every worker; NULL with one worker: made here */
    struct sl_metrics *metrics;           /* a train_metrics table (borrowed): staging (by the replicas), trained
                                   steps, their run time and the last loss and accuracy; NULL: none */
    const struct sl_curve_keys *ps_curve; /* ps mode: the job's trainer key pair (CURVE to the servers;
                                             copied), or NULL: plaintext */
    int control;                          /* 1: every training run sums a control value across the replicas and workers
                    (train_loop_control) in its row count's all_reduce: one float more, no message more
                    (the elastic mode's decision); 0: the rows alone. Not in ps mode (its row count stays
                    within the worker) */
};

/* Bytes of a GPU group id (NCCL's unique id). */
#define TRAIN_LOOP_ID_BYTES 128

/* A new group id for GPU replicas (worker 0 makes it and the rendezvous
 * carries it to the others). SL_EINVAL in builds without CUDA,
 * SL_EDEVICE. */
int train_loop_group_id(char out[TRAIN_LOOP_ID_BYTES], struct sl_error *err) SL_MUST_CHECK;

struct train_step_result {
    uint64_t rows;           /* rows of the global batch (ps mode: this worker's batch) */
    double loss;             /* mean cross-entropy over the global batch */
    double accuracy;         /* fraction of the global batch predicted right (before the update) */
    struct train_ps_step ps; /* ps mode: the step's pull and push (zeros otherwise) */
    float control;           /* opts.control: the sum of every worker's train_loop_control for this run (0 without) */
};

struct train_loop;

/* Check the schema (input and label tensors, their dtypes and shapes) and
 * make the model. */
int train_loop_create(struct train_loop **out, const struct train_loop_opts *o, const struct sl_wire_welcome *schema,
                      struct sl_error *err) SL_MUST_CHECK;
void train_loop_destroy(struct train_loop *l);

/* Stage one step's R pieces (borrowed for the call: their frames may be
 * released when it returns). SL_EINVAL when 2 steps are staged already. */
int train_loop_put(struct train_loop *l, const struct client_piece *pieces, uint32_t replicas,
                   struct sl_error *err) SL_MUST_CHECK;
/* opts.control: the value this worker adds to the next train_loop_run's
 * control sum (res.control; replica 0 carries it, the other replicas add
 * 0). For that one run: the run takes it back to 0. Ignored without
 * opts.control. Exact for small integers (a float32 sum). */
void train_loop_control(struct train_loop *l, float v);
/* Train on the oldest staged step (SL_EINVAL when none is). */
int train_loop_run(struct train_loop *l, struct train_step_result *res, struct sl_error *err) SL_MUST_CHECK;
/* put + run. */
int train_loop_step(struct train_loop *l, const struct client_piece *pieces, uint32_t replicas,
                    struct train_step_result *res, struct sl_error *err) SL_MUST_CHECK;

/* Evaluation: the predictions of the current weights for every piece of a
 * step, counted against the labels: *rows and *correct grow by this
 * worker's rows. (Sum them across workers with train_loop_sum.) */
int train_loop_eval_step(struct train_loop *l, const struct client_piece *pieces, uint32_t replicas, double *rows,
                         double *correct, struct sl_error *err) SL_MUST_CHECK;
/* The same for the oldest step staged with train_loop_put (look-ahead). */
int train_loop_eval_run(struct train_loop *l, double *rows, double *correct, struct sl_error *err) SL_MUST_CHECK;
/* After train_loop_eval_run (or _eval_step): replica r's predicted
 * classes for the rows of the piece it just evaluated, in row order, *rows
 * of them (0 for an empty piece), on CPU and GPU replicas alike. Valid
 * until the next evaluation. */
const int64_t *train_loop_eval_predictions(const struct train_loop *l, uint32_t r, uint32_t *rows);

/* ps mode: the input position after the next step run (its push carries
 * it: train_ps_client_set_position). SL_EINVAL in other modes. */
int train_loop_ps_position(struct train_loop *l, const struct client_input_position *next,
                           struct sl_error *err) SL_MUST_CHECK;
/* ps mode, after train_loop_ps_finish: the workers the servers counted
 * lost, failed or restarted (train_ps_client_lost), *first the lowest. */
uint32_t train_loop_ps_lost(const struct train_loop *l, uint32_t *first);

/* The index of the first weight that is a NaN or an infinity in the host
 * copy of the weights (replica 0's; in ps mode the values last pulled), or
 * -1 when every one is finite or the host copy is not current (GPU
 * replicas between hash checks: their loss still shows a divergence). */
long long train_loop_first_non_finite(const struct train_loop *l);

/* Sum n values across the workers (train_strategy_sum_across_workers: the
 * ring; a no-op for one worker). */
int train_loop_sum(struct train_loop *l, float *v, size_t n, struct sl_error *err) SL_MUST_CHECK;

/* Compare the weights hash of every replica's copy: SL_ECORRUPT naming
 * the first replica that diverged from replica 0. */
int train_loop_check_mirrored(struct train_loop *l, struct sl_error *err) SL_MUST_CHECK;

/* GPU replicas: copy the device weights into the host copies now (a no-op
 * when they are current, and on CPU). SL_EDEVICE. */
int train_loop_pull(struct train_loop *l, struct sl_error *err) SL_MUST_CHECK;

/* Hash of the current weights (equal on every worker after each step;
 * GPU replicas: pulled first, best effort). */
uint64_t train_loop_weights_hash(struct train_loop *l);
/* The training state a checkpoint keeps (train_ckpt.h): *weights and
 * *velocity point at *nparams floats each, the current weights and the
 * momentum-SGD velocity (mirrored: replica 0's, equal on every replica;
 * tower: the one copy and the velocity of the tower that applies the
 * update), borrowed until the next run or set_state. Between runs only.
 * SL_EINVAL with GPU replicas (their velocity lives on the devices:
 * checkpoints are CPU-only for now). */
int train_loop_state(struct train_loop *l, const float **weights, const float **velocity, size_t *nparams,
                     struct sl_error *err) SL_MUST_CHECK;
/* Install a saved state (nparams floats each, copied) into every replica's
 * copy of the weights and every replica's model (parameters and velocity):
 * the following runs compute exactly what they would have computed after
 * the steps that produced it. Between runs, before the first or later.
 * SL_EINVAL for an nparams other than the model's, or GPU replicas. */
int train_loop_set_state(struct train_loop *l, const float *weights, const float *velocity, size_t nparams,
                         struct sl_error *err) SL_MUST_CHECK;

/* Parameter-server mode, after the last run: this worker is done; wait
 * for every worker, take the final weights (every replica's copy, the
 * same on every worker) and release the servers (BYE). Later runs (an
 * evaluation) use them; training runs are refused. *global_step: the
 * servers' count of worker steps. SL_EINVAL in other modes. */
int train_loop_ps_finish(struct train_loop *l, volatile sig_atomic_t *stop, uint64_t *global_step,
                         struct sl_error *err) SL_MUST_CHECK;

/* Replica 0's model with the current weights in it (borrowed). */
struct train_model *train_loop_model(struct train_loop *l);

#endif
