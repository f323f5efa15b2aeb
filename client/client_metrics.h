/* client_metrics: the figures the client counts itself, slots of a
 * metrics table (shared/sl_metrics.h): pieces, rows and tensor bytes
 * received, pieces read in a feeder's shared memory, the time waiting for
 * pieces (the input stall), feeders rejoined and shares taken over.
 *
 * A table given to the client (client_opts.metrics) begins with these
 * slots, in this order (its first rows CLIENT_METRIC_DEFS); a program that
 * counts figures of its own puts them after CLIENT_M_COUNT (the trainer:
 * trainer/train_metrics.h). Without one, the client counts in a table of
 * its own (client_metrics_create).
 */
#ifndef CLIENT_METRICS_H
#define CLIENT_METRICS_H

#include <stdint.h>

#include "sl_metrics.h"

enum client_metric {
    CLIENT_M_PIECES,       /* pieces received */
    CLIENT_M_ROWS,         /* rows received */
    CLIENT_M_BYTES,        /* tensor bytes received */
    CLIENT_M_SHM_PIECES,   /* pieces read in a feeder's shared memory (no copy) */
    CLIENT_M_WAIT_NS,      /* time waiting for pieces (the input stall) */
    CLIENT_M_REJOINS,      /* feeders lost and asked to resume */
    CLIENT_M_TAKEOVERS,    /* lost feeders' shares taken over by surviving feeders */
    CLIENT_M_FEEDER_JOINS, /* feeders that joined the running job (a ROSTER) */
    CLIENT_M_COUNT
};

/* The client's rows of a table, as designated initializers (the first rows
 * of a larger program's table; client_metric_defs is them alone). */
#define CLIENT_METRIC_DEFS                                                                                \
    [CLIENT_M_PIECES] = {"pieces", SL_METRIC_COUNTER, "pieces received"},                                 \
    [CLIENT_M_ROWS] = {"rows", SL_METRIC_COUNTER, "rows received"},                                       \
    [CLIENT_M_BYTES] = {"bytes", SL_METRIC_COUNTER, "tensor bytes received"},                             \
    [CLIENT_M_SHM_PIECES] = {"shm_pieces", SL_METRIC_COUNTER, "pieces read in a feeder's shared memory"}, \
    [CLIENT_M_WAIT_NS] = {"input_wait_s", SL_METRIC_NS, "time waiting for pieces"},                       \
    [CLIENT_M_REJOINS] = {"feeder_rejoins", SL_METRIC_COUNTER, "feeders lost and asked to resume"},       \
    [CLIENT_M_TAKEOVERS] = {"feeder_takeovers", SL_METRIC_COUNTER,                                        \
                            "lost feeders' shares taken over by surviving feeders"},                      \
    [CLIENT_M_FEEDER_JOINS] = {"feeder_joins", SL_METRIC_COUNTER, "feeders that joined the running job"}

/* The client's table alone, in enum order. */
extern const struct sl_metric_def client_metric_defs[CLIENT_M_COUNT];

/* The client's figures of a table, typed (a view; nothing else is counted). */
struct client_counters {
    uint64_t pieces, rows, bytes, shm_pieces, rejoins, takeovers, joins;
    double wait_s;
};

/* A new metrics object over client_metric_defs: 0 or SL_ENOMEM. */
int client_metrics_create(struct sl_metrics **out) SL_MUST_CHECK;

/* The client's counters of m now (a table that begins with the client's
 * slots; all zero for NULL m). */
void client_metrics_read(const struct sl_metrics *m, struct client_counters *c);

#endif
