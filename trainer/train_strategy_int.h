/* train_strategy_int: the strategy's own structures, shared by its run
 * (train_strategy_core.c: replicas, steps, collectives) and its distributed
 * values (train_strategy_values.c: variables, per-replica values,
 * reduce); not for callers, who see them opaque (train_strategy.h). The
 * locking rules are train_strategy_core.c's (its opening comment). */
#ifndef TRAIN_STRATEGY_INT_H
#define TRAIN_STRATEGY_INT_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "sl_error.h"
#include "train_backend.h"
#include "train_coll.h"
#include "train_collective_local.h"
#include "train_device.h"
#include "train_ps.h"
#include "train_strategy.h"

enum job { JOB_PUT = 1, JOB_RUN = 2, JOB_EACH = 3 };

struct train_variable {
    struct train_strategy *s;
    struct train_mirror *m; /* R copies, or one in tower mode */
    enum train_aggregation agg;
};

struct train_replica {
    struct train_strategy *s;
    int id;
    pthread_t thread;
    int started;
    struct train_device *dev;
    struct train_stage *stage;
    struct train_coll *local; /* this replica's member of the local group (R > 1) */
    struct train_coll *coll;  /* composed: every replica of every worker, host memory */
    struct train_coll *dcoll; /* the device kind's (nccl), device memory; NULL without one; under mu */
    float *scratch;           /* scratch_floats + 1 */
    struct train_staged view; /* the running step's piece */
    int rc;
    struct sl_error err;
};

struct train_per_replica {
    uint32_t replicas;
    size_t capacity;
    float *data;               /* [replicas][capacity] */
    struct train_value vals[]; /* [replicas] */
};

struct train_strategy {
    uint32_t R, W, worker;
    enum train_strategy_mode mode;
    struct train_coll *across;     /* one member per worker (W > 1): the caller's thread only */
    int own_across;                /* made here around opts.ring */
    struct train_ps_client *ps;    /* ps mode: the servers (the caller's thread only) */
    struct train_variable *ps_var; /* ps mode: the variable on the servers */
    struct train_ps_step ps_last;  /* ps mode: the last run's pull and push */
    int ps_done;                   /* ps mode: finished; the copies hold the final values, runs pull no more */
    uint32_t hash_every;
    struct sl_metrics *metrics; /* opts.metrics: H2D bytes and staging time, from the replicas' threads */
    float loss_scale;
    size_t scratch_floats;
    const struct train_device_ops *ops;
    const struct train_backend *backend;
    char group_id[TRAIN_COLL_ID_BYTES]; /* the device collective's group (device_group) */
    struct train_replica *reps;
    struct train_local_group *group; /* R > 1 */
    struct train_variable vars[TRAIN_STRATEGY_MAX_VARIABLES];
    size_t nvars;
    float *hashbuf;             /* W x 4 x nvars: the hashes across workers */
    struct train_value *shapes; /* [R]: each replica's value shape in train_replica_reduce */
    uint64_t steps;
    unsigned staged; /* steps put and not yet run */
    /* tower mode, R > 1: a step's pieces re-split into equal towers
     * (train_tower_resplit), their rows copied into tower_buf when the
     * pieces were unequal */
    struct client_piece *tower_pieces; /* [R] */
    void *tower_buf;
    size_t tower_buf_bytes; /* R x the sum of the tensors' capacities, + TRAIN_TOWER_ALIGN each */

    pthread_mutex_t mu;
    pthread_cond_t job_cv, done_cv, bar_cv;
    uint64_t job_gen;
    enum job job;
    const struct client_piece *pieces;
    train_step_fn fn;
    void *ctx;
    uint32_t done;
    int stop;
    uint32_t bar_count;
    uint64_t bar_gen;
    int aborted; /* 0 or the first error's code */
    char abort_msg[SL_ERROR_MSG_MAX];
    int broken; /* a failed run: every later call fails with it */
    char broken_msg[SL_ERROR_MSG_MAX];
};

#endif
