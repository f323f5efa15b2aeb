/* sluice/strategy.h: distributed values for trainer authors
 * (libsluice-strategy), a C rendering of tf.distribute's DistributedValues
 * API over R replica threads on one worker:
 *
 *   sluice                                  tf.distribute
 *   --------------------------------------  ------------------------------------
 *   sluice_strategy_create                  MirroredStrategy(devices)
 *   sluice_strategy_distribute_step         next(iter(experimental_distribute_
 *                                             dataset(dataset))): a PerReplica
 *                                             from one step of a sluice feeder
 *   sluice_strategy_run + sluice_replica_*  strategy.run(fn, args=(values,)) and
 *                                             the ReplicaContext inside fn
 *   sluice_replica_value                    fn's argument: its replica's component
 *   sluice_replica_set                      fn's return value (a PerReplica)
 *   sluice_replica_all_reduce               ReplicaContext.all_reduce("sum"/"mean")
 *   sluice_strategy_reduce                  strategy.reduce(op, value, axis)
 *   sluice_per_replica_local_results        strategy.experimental_local_results
 *   sluice_strategy_values_from_function    strategy.experimental_distribute_
 *                                             values_from_function(value_fn)
 *
 * Values. A struct sluice_value is a row-major tensor of float32 elements
 * with a shape (rank 0..8) and a dtype saying what the elements stand for:
 * SLUICE_FLOAT32, or integers (SLUICE_INT64, SLUICE_UINT8) held exactly as
 * float32 (|v| <= 2^24; larger integers are refused where they come in).
 * Reductions compute in float32, as TensorFlow sums float32 tensors: in a
 * fixed order (replica 0 first, then 1, 2, ...; within a replica its rows
 * in order), so results are the same bits run to run. SUM keeps the dtype;
 * MEAN is a float32 division and its result is SLUICE_FLOAT32.
 *
 * Reduction rules (strategy.reduce): axis SLUICE_AXIS_NONE adds the
 * replicas' values element-wise (their shapes must be equal; MEAN divides
 * by R); axis 0 first sums each replica's rows (dim 0), then adds across
 * replicas (shapes after dim 0 must agree; MEAN divides by the rows of all
 * replicas, an empty replica counting 0, and is SLUICE_EINVAL, never NaN,
 * when every replica is empty).
 *
 * Errors: SLUICE_OK (0) or a negative SLUICE_E* code (sluice/client.h, and
 * SLUICE_EDEVICE below), with the caller's struct sluice_error (may be
 * NULL) holding the code and a message naming what is wrong
 * ("strategy.reduce: shapes differ: replica 0 [2,3], replica 1 [2,4]").
 * A step function's error fails the run on every replica and breaks the
 * strategy: later runs fail at once with the same message.
 *
 * Lifetime: a strategy owns its R replica threads (replica 0 is the
 * caller's thread during a run). Per-replica values are the caller's
 * (destroy them; they may outlive the strategy). Views into a per-replica
 * value (sluice_replica_value, local results) are borrowed from it: valid
 * until it is changed (a run setting it) or destroyed.
 *
 * Thread-safety: a strategy belongs to the thread that created it; a
 * struct sluice_replica belongs to the replica thread it is handed to, for
 * the duration of the step function. Replica calls that are collectives
 * (sluice_replica_all_reduce) must be made by every replica in the same
 * order with the same sizes.
 *
 * docs/strategy-api.md has the whole story and an example
 * (examples/strategy/).
 */
#ifndef SLUICE_STRATEGY_H
#define SLUICE_STRATEGY_H

#include <stddef.h>
#include <stdint.h>

#include <sluice/client.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SLUICE_EDEVICE (-7) /* a device (CUDA, NCCL) failed */

#define SLUICE_VALUE_MAX_RANK 8
#define SLUICE_AXIS_NONE (-1)
/* The largest integer magnitude a value holds exactly (float32's 2^24). */
#define SLUICE_VALUE_MAX_EXACT_INT 16777216

enum sluice_reduce_op {
    SLUICE_REDUCE_SUM = 1,
    SLUICE_REDUCE_MEAN = 2,
};

/* A tensor view. `data` is borrowed (or, for results, caller-owned and
 * caller-sized); NULL is allowed when the value has no elements. */
struct sluice_value {
    int dtype;                           /* SLUICE_FLOAT32, SLUICE_INT64 or SLUICE_UINT8 */
    int rank;                            /* 0..SLUICE_VALUE_MAX_RANK */
    int64_t dims[SLUICE_VALUE_MAX_RANK]; /* dims[0..rank); the rest ignored */
    float *data;
};

/* The number of elements of v (the product of its dims; 1 for a scalar),
 * or -1 when its rank or a dim is out of range. */
SLUICE_API int64_t sluice_value_elements(const struct sluice_value *v);

struct sluice_strategy;
struct sluice_replica;     /* a replica's context inside sluice_strategy_run */
struct sluice_per_replica; /* one value per replica (PerReplica) */

/* Options: caller-owned; all-zero means one replica. */
struct sluice_strategy_options {
    uint32_t replicas; /* R replica threads, 1..1024 (0: 1) */
};

/* Start R replicas. SLUICE_EINVAL (more than 1024 replicas), SLUICE_ENOMEM,
 * SLUICE_EIO (a thread). */
SLUICE_API int sluice_strategy_create(struct sluice_strategy **out, const struct sluice_strategy_options *o,
                                      struct sluice_error *err) SLUICE_MUST_CHECK;
/* Stop and join the replica threads and free the strategy (NULL: nothing). */
SLUICE_API void sluice_strategy_destroy(struct sluice_strategy *s);

/* R, and num_replicas_in_sync (R: one worker). */
SLUICE_API uint32_t sluice_strategy_replicas(const struct sluice_strategy *s);
SLUICE_API uint32_t sluice_strategy_num_replicas_in_sync(const struct sluice_strategy *s);

/* --- per-replica values --- */

/* A per-replica value of R slots, each of up to `capacity` elements
 * (at least 1), every slot a scalar 0 of `dtype` until set. SLUICE_EINVAL
 * (a dtype other than the three, capacity 0 or too large, s NULL),
 * SLUICE_ENOMEM. */
SLUICE_API int sluice_per_replica_create(struct sluice_per_replica **out, const struct sluice_strategy *s,
                                         size_t capacity, int dtype, struct sluice_error *err) SLUICE_MUST_CHECK;
/* Free it (NULL: nothing). */
SLUICE_API void sluice_per_replica_destroy(struct sluice_per_replica *pv);

/* experimental_local_results: the values of replicas 0..R-1 into
 * values[0..min(n, R)) (views borrowed from pv). Returns R. */
SLUICE_API size_t sluice_per_replica_local_results(const struct sluice_per_replica *pv, struct sluice_value *values,
                                                   size_t n);

/* A per-replica value from one step of a sluice feeder (R pieces from
 * sluice_client_next_step, piece r for replica r): replica r's value is
 * piece r's tensor `tensor`, of its shape ([rows, ...]; an empty piece is
 * [0, ...]) and dtype (float32, int64 or uint8). The pieces are read
 * during the call only (the step may be released after it). SLUICE_EINVAL:
 * R pieces not given, no tensor `tensor` in a piece (naming it and the
 * tensors there), another dtype (bytes), a shape whose elements do not
 * match its bytes, an integer beyond 2^24 (not exact in float32: named
 * with its replica and element); SLUICE_ENOMEM. On error *out is NULL. */
SLUICE_API int sluice_strategy_distribute_step(struct sluice_per_replica **out, const struct sluice_strategy *s,
                                               const struct sluice_piece *pieces, size_t npieces, const char *tensor,
                                               struct sluice_error *err) SLUICE_MUST_CHECK;

/* What value_fn learns about the replica it makes a value for
 * (TensorFlow's ValueContext). */
struct sluice_value_context {
    int replica_id_in_sync_group; /* 0..num_replicas_in_sync-1 */
    uint32_t num_replicas_in_sync;
    size_t capacity; /* elements available at out->data */
};

/* Makes one replica's value. On entry *out is a scalar (rank 0) of dtype
 * SLUICE_FLOAT32 whose data is the replica's slot: `capacity` elements,
 * zeroed. Set out->dtype, rank and dims, and either write the elements
 * into out->data or point out->data at elements of your own (read once,
 * during the call). Returns SLUICE_OK or a negative SLUICE_E* code with
 * err filled. */
typedef int (*sluice_value_fn)(const struct sluice_value_context *vc, struct sluice_value *out, void *ctx,
                               struct sluice_error *err);

/* experimental_distribute_values_from_function(value_fn): a new
 * per-replica value (*out, the caller's), replica r's made by fn, called
 * on this thread once per replica in replica order. Every replica's value
 * must have the same dtype. An error from fn, or a value that is not one
 * (bad rank or dim, more elements than `capacity`, elements without data,
 * dtypes that differ), ends the call: its code, the message prefixed with
 * "values_from_function: replica r (replica_id_in_sync_group g): "; *out is
 * then NULL. */
SLUICE_API int sluice_strategy_values_from_function(struct sluice_per_replica **out, const struct sluice_strategy *s,
                                                    size_t capacity, sluice_value_fn fn, void *ctx,
                                                    struct sluice_error *err) SLUICE_MUST_CHECK;

/* --- strategy.run --- */

/* A step function: called once per run on every replica's thread with its
 * context. Returns SLUICE_OK or a negative SLUICE_E* code with err filled
 * (the run's error, on every replica). */
typedef int (*sluice_step_fn)(struct sluice_replica *rep, void *ctx, struct sluice_error *err);

/* strategy.run(fn): fn on every replica (replica 0 on this thread), wait
 * for all; the first error of any replica, which breaks the strategy. */
SLUICE_API int sluice_strategy_run(struct sluice_strategy *s, sluice_step_fn fn, void *ctx,
                                   struct sluice_error *err) SLUICE_MUST_CHECK;

/* Inside fn: this replica's index 0..R-1 (= replica_id_in_sync_group on
 * one worker), and num_replicas_in_sync. */
SLUICE_API int sluice_replica_id(const struct sluice_replica *rep);
SLUICE_API int sluice_replica_id_in_sync_group(const struct sluice_replica *rep);
SLUICE_API uint32_t sluice_replica_num_replicas_in_sync(const struct sluice_replica *rep);

/* fn's argument: this replica's component of pv (a view borrowed from pv,
 * to read). SLUICE_EINVAL when pv is NULL or of another strategy size. */
SLUICE_API int sluice_replica_value(const struct sluice_replica *rep, const struct sluice_per_replica *pv,
                                    struct sluice_value *out, struct sluice_error *err) SLUICE_MUST_CHECK;

/* fn's result: set this replica's slot of pv to shape (rank, dims) and
 * *data to its elements, for fn to write (pv's dtype). Each replica sets
 * its own slot only. SLUICE_EINVAL: a bad rank or dim, more elements than
 * pv's capacity. */
SLUICE_API int sluice_replica_set(struct sluice_replica *rep, struct sluice_per_replica *pv, int rank,
                                  const int64_t *dims, float **data, struct sluice_error *err) SLUICE_MUST_CHECK;

/* ReplicaContext.all_reduce: buf[0..n) (this replica's) becomes the SUM
 * over every replica, or the MEAN (SUM / num_replicas_in_sync), the same
 * bits on every replica. A collective: every replica calls it with the
 * same n (SLUICE_EINVAL for all otherwise). */
SLUICE_API int sluice_replica_all_reduce(struct sluice_replica *rep, enum sluice_reduce_op op, float *buf, size_t n,
                                         struct sluice_error *err) SLUICE_MUST_CHECK;

/* --- strategy.reduce --- */

/* strategy.reduce(op, pv, axis), between runs: out->data (caller-owned,
 * `capacity` elements) receives the result, and out->rank, dims and dtype
 * are set (the shape: pv's for SLUICE_AXIS_NONE, pv's after dim 0 for
 * axis 0). SLUICE_EINVAL: an axis other than SLUICE_AXIS_NONE and 0, a
 * bad op, shapes that do not agree, a result larger than `capacity`, a
 * MEAN over axis 0 of no rows; out is then unchanged. */
SLUICE_API int sluice_strategy_reduce(struct sluice_strategy *s, enum sluice_reduce_op op,
                                      const struct sluice_per_replica *pv, int axis, struct sluice_value *out,
                                      size_t capacity, struct sluice_error *err) SLUICE_MUST_CHECK;

#ifdef __cplusplus
}
#endif

#endif
