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
#include "client_piece.h"
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

/* replicate_model_fn's split of one step over n towers: the step's batch
 * is the pieces in[0..n) joined along dim 0 in tower order, and out[t]
 * gets its rows [t*k, (t+1)*k), k = total rows / n, every tensor cut the
 * same way (a partial last batch of 96 rows that arrived as 96 and 0 goes
 * 48 and 48). When every piece already holds k rows, out[t] is in[t]
 * (views, no copy). Otherwise the rows are copied into `scratch` (caller-
 * owned, scratch_bytes long, aligned to TRAIN_TOWER_ALIGN: the sum of the
 * pieces' tensor bytes plus TRAIN_TOWER_ALIGN per tensor is enough), each
 * tensor's rows from an aligned offset, and out's tensors point into it,
 * valid until scratch is reused;
 * out[t] keeps in[t]'s step fields (epoch, step, seq, worker, replica,
 * flags) with rows = k. Errors, SL_EINVAL with out unspecified: the total
 * not divisible by n (train_tower_split's message); with a copy to make,
 * pieces whose tensors differ in count, name, dtype, rank or dims after
 * dim 0, a tensor whose dim 0 is not its piece's rows or whose bytes do
 * not match its shape, a bytes (variable-length) tensor, scratch too
 * small. in and out must not overlap. */
#define TRAIN_TOWER_ALIGN 16
int train_tower_resplit(const struct client_piece *in, uint32_t n, struct client_piece *out, void *scratch,
                        size_t scratch_bytes, struct sl_error *err) SL_MUST_CHECK;

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
