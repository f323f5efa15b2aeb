/* client_metrics: the client's metric table and its typed view (see
 * client_metrics.h). */
#include "client_metrics.h"

#include <string.h>

const struct sl_metric_def client_metric_defs[CLIENT_M_COUNT] = {CLIENT_METRIC_DEFS};

int client_metrics_create(struct sl_metrics **out)
{
    return sl_metrics_create(out, client_metric_defs, CLIENT_M_COUNT);
}

void client_metrics_read(const struct sl_metrics *m, struct client_counters *c)
{
    struct sl_metrics_snap s;
    sl_metrics_snapshot(m, &s);
    memset(c, 0, sizeof *c);
    if (s.n < CLIENT_M_COUNT)
        return;
    c->pieces = s.v[CLIENT_M_PIECES];
    c->rows = s.v[CLIENT_M_ROWS];
    c->bytes = s.v[CLIENT_M_BYTES];
    c->shm_pieces = s.v[CLIENT_M_SHM_PIECES];
    c->rejoins = s.v[CLIENT_M_REJOINS];
    c->takeovers = s.v[CLIENT_M_TAKEOVERS];
    c->joins = s.v[CLIENT_M_FEEDER_JOINS];
    c->wait_s = sl_metrics_seconds(&s, CLIENT_M_WAIT_NS);
}
