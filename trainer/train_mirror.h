/* train_mirror: a mirrored variable (MirroredVariable, docs/semantics.md 6.3):
 * R copies of n float32 values that every update keeps bit-identical.
 *
 * An update in replica context takes one update array per replica and
 * applies the variable's aggregation:
 *   TRAIN_AGG_SUM / TRAIN_AGG_MEAN: the per-replica updates are reduced
 *     (element-wise, replica 0 first, float32; MEAN divides the sum by R)
 *     and the single result is applied to every copy;
 *   TRAIN_AGG_ONLY_FIRST_REPLICA: replica 0's update is applied to every copy;
 *   TRAIN_AGG_NONE: SL_EINVAL with TensorFlow's "You must specify an
 *     aggregation method to update a MirroredVariable in Replica Context."
 * Example (TF docstring): v = 5.0, MEAN, assign_add(1.0) on 2 replicas
 * gives 6.0 on both.
 *
 * train_mirror_hash() hashes one copy's bytes (FNV-1a 64 with a final
 * avalanche); train_mirror_check() compares every copy's hash with copy 0's
 * so divergence (a replica that wrote its copy on its own) fails loudly.
 *
 * Thread-safe: no; one owner. A copy pointer from train_mirror_copy() is
 * borrowed, valid until destroy.
 */
#ifndef TRAIN_MIRROR_H
#define TRAIN_MIRROR_H

#include <stddef.h>
#include <stdint.h>

#include "sl_error.h"

/* Numbering follows tf.VariableAggregation. */
enum train_aggregation {
    TRAIN_AGG_NONE = 0,
    TRAIN_AGG_SUM = 1,
    TRAIN_AGG_MEAN = 2,
    TRAIN_AGG_ONLY_FIRST_REPLICA = 3,
};

enum train_mirror_mode { TRAIN_ASSIGN = 1, TRAIN_ASSIGN_ADD = 2, TRAIN_ASSIGN_SUB = 3 };

struct train_mirror;

/* A variable `name` (copied) of `n_values` floats mirrored on `replicas`
 * (>= 1) copies, each initialised from `init` (n_values floats, borrowed;
 * NULL means zeros). SL_EINVAL, SL_ENOMEM. */
int train_mirror_create(struct train_mirror **out, const char *name, size_t n_values, int replicas,
                        enum train_aggregation aggregation, const float *init, struct sl_error *err) SL_MUST_CHECK;
/* Accepts NULL. */
void train_mirror_destroy(struct train_mirror *m);

/* Apply one replica-context update: `updates[r]` (r < replicas, each
 * n_values floats, borrowed) is replica r's update value. ONLY_FIRST_REPLICA
 * reads only updates[0]. SL_EINVAL for aggregation NONE, a bad mode, or a
 * NULL update that the aggregation needs; copies are untouched on error. */
int train_mirror_update(struct train_mirror *m, const float *const *updates, enum train_mirror_mode mode,
                        struct sl_error *err) SL_MUST_CHECK;

/* Replica `replica`'s copy (borrowed; NULL when out of range). Writing it
 * directly is how a buggy replica would diverge; train_mirror_check finds
 * that. */
float *train_mirror_copy(struct train_mirror *m, int replica);
size_t train_mirror_size(const struct train_mirror *m);
const char *train_mirror_name(const struct train_mirror *m);

/* 64-bit hash of copy `replica`'s bytes (0 when out of range). */
uint64_t train_mirror_hash(const struct train_mirror *m, int replica);

/* 0 when every copy hashes like copy 0, else SL_ECORRUPT naming the
 * variable, the first differing replica, both hashes and the first
 * differing element. */
int train_mirror_check(const struct train_mirror *m, struct sl_error *err) SL_MUST_CHECK;

/* FNV-1a 64 over `len` bytes followed by a 64-bit finaliser (so nearby
 * inputs spread over all bits). Exposed for checks across processes. */
uint64_t train_hash64(const void *data, size_t len);

#endif
