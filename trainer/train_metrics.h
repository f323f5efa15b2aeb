/* train_metrics: the trainer's figures, one table (shared/sl_metrics.h).
 * Its first slots are the client's own (client/client_metrics.h: pieces,
 * input wait, rejoins), which the client writes as it receives; then the
 * trainer's: steps and epochs received, the strategy's replica threads
 * (host-to-device staging) and the training loop (steps trained, their
 * time, the last loss). Every figure the trainer prints (the --metrics
 * lines, the progress bar and log lines, the summary line that
 * sluice-bench reads) comes from snapshots of them (train_counters_from),
 * and a live exporter can take a snapshot from any thread.
 */
#ifndef TRAIN_METRICS_H
#define TRAIN_METRICS_H

#include <stdint.h>

#include "client_metrics.h"
#include "sl_metrics.h"

enum train_metric {
    /* the client's (client_metrics.h), where the client writes them */
    TRAIN_M_PIECES = CLIENT_M_PIECES,
    TRAIN_M_ROWS = CLIENT_M_ROWS,
    TRAIN_M_BYTES = CLIENT_M_BYTES,
    TRAIN_M_SHM_PIECES = CLIENT_M_SHM_PIECES,
    TRAIN_M_WAIT_NS = CLIENT_M_WAIT_NS,
    TRAIN_M_REJOINS = CLIENT_M_REJOINS,
    TRAIN_M_TAKEOVERS = CLIENT_M_TAKEOVERS,
    TRAIN_M_FEEDER_JOINS = CLIENT_M_FEEDER_JOINS,
    /* the trainer's */
    TRAIN_M_STEPS = CLIENT_M_COUNT, /* steps received */
    TRAIN_M_EPOCHS,                 /* epochs begun (a step of a new epoch received) */
    TRAIN_M_H2D_BYTES,              /* bytes staged to the replicas' devices */
    TRAIN_M_H2D_NS,                 /* replica time staging: packing, queuing and waiting for the copies */
    TRAIN_M_TRAINED,                /* steps trained (run on the model) */
    TRAIN_M_RUN_NS,                 /* time running trained steps (compute and all-reduce) */
    TRAIN_M_LOSS,                   /* real: the last trained step's loss */
    TRAIN_M_ACCURACY,               /* real: the last trained step's accuracy */
    TRAIN_M_ALLREDUCE_NS,           /* replica 0's time in all-reduces (host and device; within TRAIN_M_RUN_NS) */
    TRAIN_M_COUNT
};

/* The table, in enum order. */
extern const struct sl_metric_def train_metric_defs[TRAIN_M_COUNT];

/* The figures of a snapshot, typed (a view; nothing else is counted). */
struct train_counters {
    uint64_t steps, epochs, pieces, rows, bytes, shm_pieces, rejoins, takeovers, joins, h2d_bytes, trained;
    double wait_s, h2d_s, run_s, loss, accuracy;
};

void train_counters_from(const struct sl_metrics_snap *s, struct train_counters *c);

/* A new metrics object over the table: 0 or SL_ENOMEM. */
int train_metrics_create(struct sl_metrics **out) SL_MUST_CHECK;

/* The counters now (all zero for NULL m). */
void train_metrics_read(const struct sl_metrics *m, struct train_counters *c);

#endif
