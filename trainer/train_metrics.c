/* train_metrics: the trainer's metric table and its typed view (see
 * train_metrics.h). */
#include "train_metrics.h"

#include <string.h>

const struct sl_metric_def train_metric_defs[TRAIN_M_COUNT] = {
    CLIENT_METRIC_DEFS, /* the client's slots, first */
    [TRAIN_M_STEPS] = {"steps", SL_METRIC_COUNTER, "steps received"},
    [TRAIN_M_EPOCHS] = {"epochs", SL_METRIC_COUNTER, "epochs begun"},
    [TRAIN_M_H2D_BYTES] = {"h2d_bytes", SL_METRIC_COUNTER, "bytes staged to the replicas' devices"},
    [TRAIN_M_H2D_NS] = {"h2d_s", SL_METRIC_NS, "replica time staging pieces to devices"},
    [TRAIN_M_TRAINED] = {"trained_steps", SL_METRIC_COUNTER, "steps trained"},
    [TRAIN_M_RUN_NS] = {"step_run_s", SL_METRIC_NS, "time running trained steps"},
    [TRAIN_M_LOSS] = {"loss", SL_METRIC_REAL, "the last trained step's loss"},
    [TRAIN_M_ALLREDUCE_NS] = {"allreduce_s", SL_METRIC_NS, "replica 0's time in all-reduces"},
    [TRAIN_M_ACCURACY] = {"accuracy", SL_METRIC_REAL, "the last trained step's accuracy"},
};

int train_metrics_create(struct sl_metrics **out)
{
    return sl_metrics_create(out, train_metric_defs, TRAIN_M_COUNT);
}

void train_counters_from(const struct sl_metrics_snap *s, struct train_counters *c)
{
    memset(c, 0, sizeof *c);
    if (s->n < TRAIN_M_COUNT)
        return;
    c->steps = s->v[TRAIN_M_STEPS];
    c->epochs = s->v[TRAIN_M_EPOCHS];
    c->pieces = s->v[TRAIN_M_PIECES];
    c->rows = s->v[TRAIN_M_ROWS];
    c->bytes = s->v[TRAIN_M_BYTES];
    c->shm_pieces = s->v[TRAIN_M_SHM_PIECES];
    c->rejoins = s->v[TRAIN_M_REJOINS];
    c->takeovers = s->v[TRAIN_M_TAKEOVERS];
    c->joins = s->v[TRAIN_M_FEEDER_JOINS];
    c->h2d_bytes = s->v[TRAIN_M_H2D_BYTES];
    c->trained = s->v[TRAIN_M_TRAINED];
    c->wait_s = sl_metrics_seconds(s, TRAIN_M_WAIT_NS);
    c->h2d_s = sl_metrics_seconds(s, TRAIN_M_H2D_NS);
    c->run_s = sl_metrics_seconds(s, TRAIN_M_RUN_NS);
    c->loss = sl_metrics_seconds(s, TRAIN_M_LOSS);
    c->accuracy = sl_metrics_seconds(s, TRAIN_M_ACCURACY);
}

void train_metrics_read(const struct sl_metrics *m, struct train_counters *c)
{
    struct sl_metrics_snap s;
    sl_metrics_snapshot(m, &s);
    train_counters_from(&s, c);
}
