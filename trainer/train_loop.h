/* train_loop: one worker's synchronous data-parallel training step on CPU
 * replicas, the model of trainer/train_model.h.
 *
 * One thread per replica (the caller's thread is replica 0), each with its
 * own copy of the model. A step takes the R pieces of this worker's step,
 * learns the global batch's real row count N (a one-float ring all-reduce
 * across the W workers), has every replica compute the gradient of (sum of
 * its rows' losses) / N with its loss sum and correct count, sums those in
 * replica order in process (train_collective_local) and across the workers
 * (the ring): exactly the gradient of the mean cross-entropy over the
 * global batch, whatever the W x R split (up to float reassociation; empty
 * pieces count 0 rows). Every replica of every worker then applies the
 * same momentum-SGD step, so all copies stay bit-identical (checked by
 * hash: train_loop_check_mirrored).
 *
 * Not yet: GPU replicas.
 *
 * Thread-safe: no; one owner (the replica threads are internal).
 */
#ifndef TRAIN_LOOP_H
#define TRAIN_LOOP_H

#include <stddef.h>
#include <stdint.h>

#include "sl_error.h"
#include "train_client.h"
#include "train_model.h"
#include "train_ring.h"

struct train_loop_opts {
    struct train_model_config model; /* inputs and max_rows are filled from the schema */
    const char *input;  /* tensor holding the inputs: uint8 (scaled by 1/255) or float32, per-element rank 1 */
    const char *label;  /* int64 scalar labels */
    struct train_ring *ring; /* across workers; NULL for one worker */
    uint32_t replicas;       /* local replicas, one thread each (0: 1) */
};

struct train_step_result {
    uint64_t rows;     /* rows of the global batch */
    double loss;       /* mean cross-entropy over the global batch */
    double accuracy;   /* fraction of the global batch predicted right (before the update) */
};

struct train_loop;

/* Check the schema (input and label tensors, their dtypes and shapes) and
 * make the model. */
int train_loop_create(struct train_loop **out, const struct train_loop_opts *o, const struct sl_wire_welcome *schema,
                      struct sl_error *err) SL_MUST_CHECK;
void train_loop_destroy(struct train_loop *l);

int train_loop_step(struct train_loop *l, const struct train_piece *pieces, uint32_t replicas,
                    struct train_step_result *res, struct sl_error *err) SL_MUST_CHECK;

/* Evaluation: the predictions of the current weights for every piece of a
 * step, counted against the labels: *rows and *correct grow by this
 * worker's rows. (Sum them across workers with train_loop_sum.) */
int train_loop_eval_step(struct train_loop *l, const struct train_piece *pieces, uint32_t replicas, double *rows,
                         double *correct, struct sl_error *err) SL_MUST_CHECK;
/* Sum n values across the workers (the ring; a no-op for one worker). */
int train_loop_sum(struct train_loop *l, float *v, size_t n, struct sl_error *err) SL_MUST_CHECK;

/* Compare the weights hash of every replica's copy: SL_ECORRUPT naming
 * the first replica that diverged from replica 0. */
int train_loop_check_mirrored(struct train_loop *l, struct sl_error *err) SL_MUST_CHECK;

/* Hash of the current weights (equal on every worker after each step). */
uint64_t train_loop_weights_hash(struct train_loop *l);
struct train_model *train_loop_model(struct train_loop *l);

#endif
