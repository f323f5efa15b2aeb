/* train_tower: the arithmetic of tower mode (replicate_model_fn,
 * docs/semantics.md 6.4): one variable copy, the batch split along dim 0
 * into equal shards, tower losses scaled by 1/towers unless the loss
 * reduction is SUM, predictions concatenated in tower order.
 *
 * Thread-safe: yes (pure functions over caller-owned memory).
 */
#ifndef TRAIN_TOWER_H
#define TRAIN_TOWER_H

#include <stddef.h>
#include <stdint.h>

#include "sl_error.h"
#include "train_reduce.h"

/* tf.losses.Reduction; replicate_model_fn defaults to
 * SUM_BY_NONZERO_WEIGHTS. */
enum train_loss_reduction {
    TRAIN_LOSS_NONE = 0,
    TRAIN_LOSS_SUM,
    TRAIN_LOSS_MEAN,
    TRAIN_LOSS_SUM_OVER_BATCH_SIZE,
    TRAIN_LOSS_SUM_OVER_NONZERO_WEIGHTS,
    TRAIN_LOSS_SUM_BY_NONZERO_WEIGHTS,
};

/* Rows per tower for a batch of `batch_rows` split over `towers` (>= 1).
 * SL_EINVAL "Batch size {rows} needs to be divisible by the number of GPUs,
 * which is {towers}." when it does not divide. */
int train_tower_split(int64_t batch_rows, int towers, int64_t *rows_per_tower, struct sl_error *err) SL_MUST_CHECK;

/* The factor each tower's loss (and gradient) is multiplied by: 1/towers
 * when towers > 1 and the reduction is not SUM, else 1. TRAIN_LOSS_NONE is
 * SL_EINVAL "Tower losses need to be reduced in some way, yet none
 * reduction is specified." */
int train_tower_loss_scale(enum train_loss_reduction reduction, int towers, float *scale,
                           struct sl_error *err) SL_MUST_CHECK;

/* Concatenate per-tower predictions along dim 0 in tower order into
 * out->data (caller-sized: the sum of the towers' element counts);
 * out->rank/dims are set. Every tower needs rank >= 1 and the same dims
 * after dim 0 (SL_EINVAL naming both shapes otherwise); n >= 1. */
int train_tower_concat(const struct train_value *per_tower, size_t n, struct train_value *out,
                       struct sl_error *err) SL_MUST_CHECK;

#endif
