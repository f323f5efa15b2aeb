/* train_strategy: the strategy API, a C rendering of tf.distribute's
 * MirroredStrategy / MultiWorkerMirroredStrategy (and of TF 1's
 * replicate_model_fn tower mode) over R local replica threads and, across
 * W workers, a collective with one member per worker (train_coll.h: the
 * ring all-reduce of train_ring.h today).
 *
 *   strategy                      tf.distribute
 *   ---------------------------   --------------------------------------
 *   train_strategy_create         MirroredStrategy(devices) /
 *                                   MultiWorkerMirroredStrategy
 *   train_strategy_put + _run     strategy.run(step_fn, args=(next(it),))
 *   struct train_replica *        ReplicaContext (inside step_fn)
 *   train_replica_all_reduce      ReplicaContext.all_reduce
 *   train_replica_reduce          all_reduce with reduce's axis rules
 *   struct train_per_replica      PerReplica; local_results()
 *   train_strategy_values_from_   experimental_distribute_values_from_
 *     function                      function(value_fn)
 *   struct train_value_context    ValueContext (value_fn's argument)
 *   train_replica_value           run(fn, args=(distributed_values,)):
 *                                   the replica's own component
 *   train_strategy_reduce         strategy.reduce(op, value, axis)
 *   train_strategy_variable       a variable created under strategy.scope()
 *                                   (MirroredVariable, its aggregation)
 *   train_replica_var_update      var.assign / assign_add / assign_sub in
 *                                   replica context
 *   train_strategy_check          (none: the copies' hashes compared)
 *   TRAIN_STRATEGY_TOWER          replicate_model_fn(model_fn, reduction)
 *
 * Replicas. Replica 0 runs on the caller's thread (so the collective across
 * workers, the ring whose ZeroMQ sockets belong to one thread, stays on
 * it); replicas 1..R-1 are threads made at create. num_replicas_in_sync =
 * R x W.
 *
 * Input. Every step's pieces go through staging (train_stage.h): each
 * replica has a device of the `device` backend ("cpu": ordinary memory,
 * the same code path) and a double-buffered stager. train_strategy_put
 * copies one step's R pieces in, each on its own replica's thread;
 * train_strategy_run hands each replica its oldest staged piece. Calling
 * put(s+1) before run(s) overlaps step s+1's copy with step s (the order
 * put(0) put(1) run put(2) run put(3) run ...); put, run, put, run works
 * too. At most 2 steps may be staged and not yet run.
 *
 * Reductions follow docs/semantics.md section 6 exactly and reuse the tested
 * pieces: train_reduce (axis rules, order) and the collectives of
 * train_coll.h, which the strategy composes (train_coll_compose): the
 * "local" group of the replica threads (sum in replica order), then the
 * collective across workers (the ring), then the local group's broadcast.
 * SUM and MEAN are computed as sums first (in process, replica 0 first,
 * then across workers, bitwise identical everywhere) and MEAN
 * divides the total once: by R x W for axis = NONE, by the real row count
 * across every replica and worker for axis = 0 (a 4+2 split divides by 6,
 * empty replicas count 0; when every replica of every worker is empty the
 * mean is SL_EINVAL, never NaN). Row counts travel as float32: exact up to
 * 2^24 rows per reduction.
 *
 * Mirrored variables are train_mirror objects owned by the strategy: R
 * copies (one in tower mode). Updates in replica context are aggregated
 * with the collectives above (so the aggregation spans workers) and every
 * replica then applies the same value to its own copy with the same float
 * operation, which keeps the copies bit-identical. Every `hash_every` runs
 * (and on train_strategy_check) the copies' hashes are compared across
 * replicas (train_mirror_check) and across workers (through the ring); a
 * divergence is SL_ECORRUPT naming the variable and the replica or worker.
 *
 * Tower mode (replicate_model_fn, docs/semantics.md 6.4): one copy of each
 * variable, read by every tower; each step's rows are cut into equal towers
 * (train_tower_resplit; train_tower_split's "Batch size N needs to be
 * divisible by the number of GPUs" when they do not divide); train_replica_loss_scale gives each tower's loss (and
 * gradient) factor, 1/towers unless the loss reduction is SUM; updates add
 * the towers' values (add_n, tower order) and are applied once, by the
 * last tower; predictions are concatenated in tower order
 * (train_per_replica_concat). One worker only (a ring is refused).
 *
 * Parameter-server mode (ParameterServerStrategy; train_ps.h): the
 * strategy's variable (one, the model's parameters, of the servers'
 * size) lives on the parameter servers, and each replica holds a copy of
 * it for reading. Every run first pulls the current values into every
 * copy (replica 0's thread, before the step function starts);
 * train_replica_var_apply_gradient then sends replica 0's gradient (every
 * replica's, summed in-process) to the servers, which apply the optimizer
 * on arrival; the run does not wait for any other worker. The replica
 * calls reduce over this worker's R replicas only, as its replicas are the
 * synchronous group (num_replicas_in_sync = R); a worker's reductions
 * never meet another worker's. train_strategy_ps_finish ends the training
 * with the final pull, which waits for every worker. A parameter-server
 * failure (a server silent past the client's timeout, a refusal) fails
 * the run, naming the server.
 *
 * Errors. A failing step function, collective or check fails the whole
 * run: every replica blocked in a collective wakes with the first error
 * (train_coll_abort on every replica's collectives), run returns it, and
 * the strategy is then
 * broken: later puts and runs fail at once with the same message.
 *
 * Allocation: everything is sized at create and when variables and
 * per-replica values are made; put, run and the replica calls allocate
 * nothing.
 *
 * Thread-safety: the strategy belongs to the thread that created it (the
 * thread of the collective across workers). A struct train_replica belongs to the replica thread it
 * is handed to, for the duration of the step function; the replica calls
 * are collectives that every replica must make in the same order with the
 * same sizes.
 */
#ifndef TRAIN_STRATEGY_H
#define TRAIN_STRATEGY_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#include "sl_error.h"
#include "train_coll.h"
#include "train_mirror.h"
#include "client_position.h"
#include "client_piece.h"
#include "train_reduce.h"
#include "train_ring.h"
#include "train_stage.h"
#include "train_tower.h"

#define TRAIN_STRATEGY_MAX_VARIABLES 64
#define TRAIN_STRATEGY_DEFAULT_SCRATCH (1u << 16) /* floats per replica */

enum train_strategy_mode {
    TRAIN_STRATEGY_MIRRORED = 0, /* a copy of every variable per replica */
    TRAIN_STRATEGY_TOWER = 1,    /* replicate_model_fn: one copy, towers */
    TRAIN_STRATEGY_PS = 2,       /* ParameterServerStrategy: the variables live on parameter servers */
};

struct train_ps_client;

/* Caller-owned options; all zero is one mirrored cpu replica, one worker,
 * no tensors staged. */
struct train_strategy_opts {
    uint32_t replicas; /* R, one thread each (0: 1) */
    enum train_strategy_mode mode;
    struct train_ring *ring;                  /* borrowed, NULL for one worker; used from the caller's thread only
                                       (the strategy makes its "ring" collective, train_ring_coll_open) */
    struct train_coll *across;                /* or any collective across workers instead of a ring: one member per
                                       worker (rank = worker, size = W), host memory; borrowed, used from
                                       the caller's thread only (abort: any thread); NULL for one worker */
    uint32_t worker, workers;                 /* this worker's rank and W (the collective's size; 0: 1) */
    struct train_ps_client *ps;               /* ps mode: this worker's connections to the parameter servers
                                       (train_ps.h; borrowed, the caller's thread only); no ring or across */
    uint32_t hash_every;                      /* compare variable hashes after every K-th run (0: only on check) */
    enum train_loss_reduction loss_reduction; /* tower mode (0 NONE is refused there; mirrored ignores it) */
    const char *device;                       /* staging backend, "cpu" (NULL) or "cuda" */
    const int *ordinals;                      /* [replicas]: replica r opens device ordinals[r] (NULL: r) */
    const char *device_group;                 /* a kind with device collectives (cuda): TRAIN_COLL_ID_BYTES, the group
                                       id (the same on every worker: worker 0's train_backend_group_id) that
                                       every replica of every worker joins at create, rank worker x R + r of
                                       W x R, for train_replica_all_reduce_device; NULL: none. Copied;
                                       ignored for host-memory kinds (cpu) */
    size_t ntensors;                          /* tensors per piece (the schema's) */
    const size_t *tensor_capacity;            /* [ntensors] byte capacity of each tensor per piece (copied) */
    size_t scratch_floats;                    /* per-replica scratch for reduce / var_update (0: 65536) */
    struct sl_metrics *metrics;               /* a train_metrics table (borrowed): each replica adds the bytes it
                                       stages (TRAIN_M_H2D_BYTES) and its time in put and get
                                       (TRAIN_M_H2D_NS); NULL: not measured */
};

struct sl_metrics;
struct train_strategy;
struct train_replica;     /* a replica's context inside a step */
struct train_per_replica; /* one value per replica */
struct train_variable;    /* a mirrored variable, owned by the strategy */

/* A step function: called once per run on every replica's thread with its
 * context, its staged piece (borrowed for the call; rows 0 for an empty
 * piece; tensor i is the schema's tensor i, data in the replica's device
 * memory) and the run's ctx. Returns 0 or a negative SL_E* code with
 * `err` filled; an error fails the run on every replica. */
typedef int (*train_step_fn)(struct train_replica *rep, const struct train_staged *piece, void *ctx,
                             struct sl_error *err);

/* Open R devices and stagers and start replicas 1..R-1. SL_EINVAL (bad
 * options: tower mode with a ring or loss reduction NONE, replicas > 1024,
 * an unknown device), SL_ENOMEM, SL_EIO (a thread), SL_EDEVICE. */
int train_strategy_create(struct train_strategy **out, const struct train_strategy_opts *o,
                          struct sl_error *err) SL_MUST_CHECK;
/* Stop and join the threads; free the variables, stagers and devices.
 * Per-replica values are independent (their creator frees them). Accepts
 * NULL. */
void train_strategy_destroy(struct train_strategy *s);

uint32_t train_strategy_replicas(const struct train_strategy *s);             /* R */
uint32_t train_strategy_num_replicas_in_sync(const struct train_strategy *s); /* R x W */
enum train_strategy_mode train_strategy_mode(const struct train_strategy *s);

/* Stage one step: pieces[r] (borrowed for the call only; its frames may be
 * released when put returns) into replica r's stager, on replica r's
 * thread. Tower mode: the step's rows (the pieces joined in replica order)
 * are first cut into R equal towers (train_tower_resplit; a partial last
 * batch that came as 96 and 0 rows is staged as 48 and 48). SL_EINVAL,
 * changing nothing, when 2 steps are already staged or (tower mode) the
 * rows do not divide among the towers or cannot be cut (train_tower_resplit's
 * errors, prefixed "tower mode: step S: "). A piece that a stager refuses
 * (wrong tensors, over capacity) or a device error breaks the strategy. */
int train_strategy_put(struct train_strategy *s, const struct client_piece *pieces, struct sl_error *err) SL_MUST_CHECK;

/* Run fn on every replica with the oldest staged step (SL_EINVAL when none
 * is staged), wait for all, then compare the variables' hashes if this is
 * a hash_every-th run. Returns the first error of any replica. */
int train_strategy_run(struct train_strategy *s, train_step_fn fn, void *ctx, struct sl_error *err) SL_MUST_CHECK;

/* tf.distribute's call_for_each_replica without input: fn(rep, NULL, ctx)
 * on every replica's thread (per-replica setup and teardown that must run
 * on the thread owning the replica's device, e.g. making a replica's model
 * on its GPU). Not a step:
 * nothing staged is consumed, no hash check. The first error is returned
 * and breaks the strategy, as for run. */
int train_strategy_call_for_each_replica(struct train_strategy *s, train_step_fn fn, void *ctx,
                                         struct sl_error *err) SL_MUST_CHECK;

/* Fail the strategy from outside a run (the strategy's thread), e.g. after a
 * caller's own failure between runs: every collective is aborted (device
 * members then leave at destroy without waiting for anyone), and later
 * calls fail with (code, msg) as after a failed run. */
void train_strategy_abort(struct train_strategy *s, int code, const char *msg);

/* Runs so far. */
uint64_t train_strategy_steps(const struct train_strategy *s);

/* 0, or the first error's code once a replica of this worker has failed
 * (the strategy is then broken for good). For replicas waiting outside the
 * strategy, e.g. a GPU replica in an NCCL collective that a failed replica
 * will never join: they poll this and give up. Any thread; lock-free. */
int train_strategy_aborted(const struct train_strategy *s);

/* --- inside a step function (replica context) --- */

int train_replica_id(const struct train_replica *rep);        /* 0..R-1 on this worker */
int train_replica_global_id(const struct train_replica *rep); /* worker x R + id */
uint32_t train_replica_num_replicas_in_sync(const struct train_replica *rep);
/* This replica's open device (the staging backend's; borrowed, owned by the
 * strategy), for per-replica device work on the replica's thread. */
struct train_device *train_replica_device(const struct train_replica *rep);
/* The factor for this tower's loss in tower mode (1/towers unless the
 * loss reduction is SUM; 1 for one tower); 1 in mirrored mode. */
float train_replica_loss_scale(const struct train_replica *rep);

/* ReplicaContext.all_reduce: buf[0..n) (this replica's value) becomes the
 * SUM over every replica of every worker, or MEAN = SUM / (R x W), the same
 * bits everywhere. n must agree across replicas (SL_EINVAL for all
 * otherwise). */
int train_replica_all_reduce(struct train_replica *rep, enum train_reduce_op op, float *buf, size_t n,
                             struct sl_error *err) SL_MUST_CHECK;

/* buf[0..n) in this replica's device memory becomes its float32 SUM over
 * every replica of every worker, in place: the device kind's collective
 * (nccl on cuda: its order, the same bits on every replica), or, for
 * devices whose memory is the host's (cpu), exactly what
 * train_replica_all_reduce(SUM) does. SL_EINVAL when the strategy's
 * device kind has collectives but no device_group was given. A collective:
 * every replica must call it; a failure fails the run. */
int train_replica_all_reduce_device(struct train_replica *rep, float *buf, size_t n,
                                    struct sl_error *err) SL_MUST_CHECK;

/* strategy.reduce's rules from inside a step: `value` is this replica's
 * (borrowed); out->data (caller-sized to the result: value's elements for
 * axis NONE, its elements after dim 0 for axis 0) receives the reduced
 * value on every replica, out->rank/dims are set. Axis 0 needs
 * (elements after dim 0) + 1 <= scratch_floats. Shapes must agree across
 * replicas (dims after dim 0 for axis 0; SL_EINVAL naming the replica). */
int train_replica_reduce(struct train_replica *rep, enum train_reduce_op op, const struct train_value *value, int axis,
                         struct train_value *out, struct sl_error *err) SL_MUST_CHECK;

/* This replica's component of a per-replica value: what TensorFlow's run
 * hands fn when an argument is a DistributedValues (pv made by
 * train_strategy_values_from_function or set in an earlier step). Borrowed
 * from pv; NULL when pv holds another number of replicas than the
 * strategy. To read only (a step that also sets its slot gets a new view
 * from train_per_replica_set). */
const struct train_value *train_replica_value(const struct train_replica *rep, const struct train_per_replica *pv);

/* This replica's copy of `var` (tower mode: the one copy, to read only;
 * in mirrored mode writing it directly is how a replica diverges, which
 * the hash check reports). */
float *train_replica_var(struct train_replica *rep, struct train_variable *var);

/* var.assign / assign_add / assign_sub in replica context with the
 * variable's aggregation: SUM and MEAN reduce every replica's `update`
 * (n floats, borrowed) across replicas and workers (MEAN divides by R x W;
 * tower mode adds the towers' values, MEAN dividing by the towers);
 * ONLY_FIRST_REPLICA applies replica 0's (worker 0's) value (across
 * workers it travels as a ring sum with zeros from the others, so a -0.0
 * arrives as +0.0, the same on every copy); NONE is
 * TensorFlow's "You must specify an aggregation method ..." SL_EINVAL.
 * Needs n <= scratch_floats. Every replica must call it. */
int train_replica_var_update(struct train_replica *rep, struct train_variable *var, enum train_mirror_mode mode,
                             const float *update, struct sl_error *err) SL_MUST_CHECK;

/* An optimizer-style update: fn(copy, n, arg) rewrites a copy of `var`
 * from values identical on every replica (an all-reduced gradient), so the
 * copies stay bit-identical. Mirrored: every replica calls fn on its own
 * copy with its own arg. Tower: after every tower has arrived, the last
 * tower calls fn once on the one copy with its arg, and every tower
 * returns after that. fn's error fails the run. Every replica must call
 * it. */
typedef int (*train_var_apply_fn)(float *copy, size_t n, void *arg, struct sl_error *err);
int train_replica_var_apply(struct train_replica *rep, struct train_variable *var, train_var_apply_fn fn, void *arg,
                            struct sl_error *err) SL_MUST_CHECK;

/* An optimizer step from a gradient: grad (n = the variable's size floats,
 * identical on every replica: an all-reduced gradient) is applied to
 * `var`. Mirrored and tower mode: fn does it, as train_replica_var_apply.
 * Parameter-server mode: replica 0 pushes grad to the servers, which apply
 * the model's optimizer on arrival and count one global step; the copies
 * get the new values at the next run's pull; fn is not called. Every
 * replica must call it. */
int train_replica_var_apply_gradient(struct train_replica *rep, struct train_variable *var, const float *grad,
                                     train_var_apply_fn fn, void *arg, struct sl_error *err) SL_MUST_CHECK;

/* A step with no rows on any replica (nothing to apply). Mirrored and
 * tower mode: nothing. Parameter-server mode: replica 0 tells the servers
 * the step's position (train_ps_push with no gradient), which they record
 * without applying anything, so that the worker's next push is one step
 * after its last; the others return at once. */
int train_replica_var_skip_step(struct train_replica *rep, struct train_variable *var,
                                struct sl_error *err) SL_MUST_CHECK;

/* --- cross-replica context (the strategy's thread, between runs) --- */

/* Parameter-server mode: the last run's pull and push (zeros in the other
 * modes, and pushed 0 for a run that pushed nothing). */
struct train_ps_step {
    double pull_s, push_s; /* the pull before the step, replica 0's push */
    uint64_t staleness;    /* the push's: other workers' pushes applied between the pull and it (the most
                               over the servers) */
    uint64_t global_step;  /* as of the pull (server 0's count) */
    int pushed;
};
void train_strategy_ps_last(const struct train_strategy *s, struct train_ps_step *out);
/* Parameter-server mode: this worker is done; wait for every worker
 * (train_ps_pull_final) and put the final values into every copy.
 * *global_step: the servers' count. SL_EINVAL in the other modes. */
int train_strategy_ps_finish(struct train_strategy *s, volatile sig_atomic_t *stop, uint64_t *global_step,
                             struct sl_error *err) SL_MUST_CHECK;

/* A mirrored variable `name` (copied) of n floats, every copy from init
 * (borrowed; NULL: zeros), aggregation as tf.VariableAggregation. Owned by
 * the strategy (freed by destroy). Create before the first run. SL_EINVAL
 * (too many variables: TRAIN_STRATEGY_MAX_VARIABLES; parameter-server
 * mode: a second variable, or one of another size than the servers'),
 * SL_ENOMEM. */
int train_strategy_variable(struct train_strategy *s, const char *name, size_t n, enum train_aggregation agg,
                            const float *init, struct train_variable **out, struct sl_error *err) SL_MUST_CHECK;
/* Replica r's copy (tower mode: every r gives the one copy), or NULL. */
float *train_variable_copy(struct train_variable *var, int replica);
size_t train_variable_size(const struct train_variable *var);
/* The hash of copy 0 (equal everywhere after a passing check). */
uint64_t train_variable_hash(const struct train_variable *var);

/* Compare every variable's copies: train_mirror_check across replicas,
 * then (with a ring) each worker's hash against worker 0's. SL_ECORRUPT
 * "mirrored variable 'w' diverged: replica 1's copy ..." or
 * "mirrored variable 'w' diverged across workers: worker 1 hashes X,
 * worker 0 Y". A collective across workers: every worker must call it. */
int train_strategy_check(struct train_strategy *s, struct sl_error *err) SL_MUST_CHECK;

/* Per-replica values: R slots, each holding up to `capacity` floats.
 * Independent of the strategy's lifetime. */
int train_per_replica_create(struct train_per_replica **out, const struct train_strategy *s, size_t capacity,
                             struct sl_error *err) SL_MUST_CHECK;
void train_per_replica_destroy(struct train_per_replica *pv);
/* Inside a step: set replica `replica`'s value to shape (rank, dims) and
 * return its data (capacity checked: SL_EINVAL). Each replica sets only
 * its own slot. */
int train_per_replica_set(struct train_per_replica *pv, int replica, int rank, const int64_t *dims, float **data,
                          struct sl_error *err) SL_MUST_CHECK;
/* local_results: the R values in replica order (views borrowed from pv,
 * valid until the next run that sets them). Returns R. */
size_t train_per_replica_local_results(const struct train_per_replica *pv, const struct train_value **values);

/* What value_fn learns about the replica it is making a value for
 * (TensorFlow's ValueContext, plus what a replica's context carries). */
struct train_value_context {
    int replica_id_in_sync_group;  /* worker x R + replica (TensorFlow's), 0..num_replicas_in_sync-1 */
    uint32_t num_replicas_in_sync; /* R x W */
    int replica;                   /* this worker's replica, 0..R-1 (train_replica_id) */
    uint32_t worker;               /* this worker's rank */
    float loss_scale;              /* train_replica_loss_scale: 1/towers in tower mode (unless SUM), else 1 */
    size_t capacity;               /* floats available at out->data */
};

/* Makes replica vc->replica's value. On entry *out is a scalar (rank 0)
 * whose data is the replica's slot: `capacity` floats, zeroed. Set
 * out->rank and out->dims, then either write the elements into out->data
 * or point out->data at floats of your own (borrowed: read once, copied
 * into the slot before the next call). Returns 0 or a negative SL_E* code
 * with err filled. */
typedef int (*train_value_fn)(const struct train_value_context *vc, struct train_value *out, void *ctx,
                              struct sl_error *err);

/* strategy.experimental_distribute_values_from_function(value_fn): a new
 * per-replica value (*out, the caller's to destroy; slots of `capacity`
 * floats each, which later steps may also set) whose replica r holds what
 * fn made for it. fn is called on this thread (cross-replica context, no
 * replica thread runs), exactly once per local replica, in replica order
 * 0..R-1, with that replica's context; on W workers each worker makes its
 * own R replicas' values (ids worker x R + r), as TensorFlow does. The
 * values are for train_strategy_reduce, train_per_replica_local_results /
 * _concat and steps (train_replica_value, in run or
 * call_for_each_replica). Errors: SL_EINVAL for a NULL strategy, fn or out;
 * fn's own error, or a value it made that is not one (a bad rank or dim,
 * more elements than `capacity`, elements but no data), ends the call at
 * that replica (later replicas' fn is not called): its code, the message
 * prefixed with "values_from_function: replica r (replica_id_in_sync_group
 * g): ". *out is NULL and nothing is kept on any error; the strategy is
 * not failed (no step ran). SL_ENOMEM. */
int train_strategy_values_from_function(struct train_per_replica **out, const struct train_strategy *s, size_t capacity,
                                        train_value_fn fn, void *ctx, struct sl_error *err) SL_MUST_CHECK;

/* strategy.reduce(op, pv, axis) in cross-replica context: train_reduce over
 * the local values, then across workers (the ring); MEAN as described at
 * the top. out->data is caller-sized. A collective across workers. */
int train_strategy_reduce(struct train_strategy *s, enum train_reduce_op op, const struct train_per_replica *pv,
                          int axis, struct train_value *out, struct sl_error *err) SL_MUST_CHECK;

/* buf[0..n) becomes its float32 sum over the W workers (cross-replica
 * context: the strategy's thread, between runs; the collective across
 * workers alone, so every worker must call it); a no-op for one worker.
 * Its errors as they come (the ring's). */
int train_strategy_sum_across_workers(struct train_strategy *s, float *buf, size_t n,
                                      struct sl_error *err) SL_MUST_CHECK;

/* Tower mode's predictions: the per-replica values concatenated along dim
 * 0 in replica order (train_tower_concat). out->data caller-sized. */
int train_per_replica_concat(const struct train_per_replica *pv, struct train_value *out,
                             struct sl_error *err) SL_MUST_CHECK;

#endif
