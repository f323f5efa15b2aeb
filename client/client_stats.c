/* client_stats.c: what the feeders say of themselves (STATS: the
 * time in each stage of their pipeline) and the input wait by feeder.
 */
#include <stdint.h>

#include "client_int.h"

/* A STATS from feeder j: kept beside the one before it. */
void client__note_stats(struct client *c, size_t j, const struct sl_wire_stats *st)
{
    c->f[j].stats[1] = c->f[j].stats[0];
    c->f[j].stats[0] = *st;
    if (c->f[j].nstats < 2)
        c->f[j].nstats++;
}

const char *client_stage_name(int stage)
{
    static const char *const names[SL_WIRE_STAGES] = {"read", "decompress", "decode", "assemble", "send", "map"};
    return stage >= 0 && stage < SL_WIRE_STAGES ? names[stage] : "unknown";
}

int client_feeder_stages(const struct client *c, size_t j, uint64_t stage_ns[SL_WIRE_STAGES], int *busiest)
{
    *busiest = -1;
    if (j >= c->o.nfeeders)
        return SL_EINVAL;
    const struct feeder *f = &c->f[j];
    for (int k = 0; k < SL_WIRE_STAGES; k++)
        stage_ns[k] = f->nstats > 0 ? f->stats[0].stage_ns[k] : 0;
    if (f->nstats < 2)
        return 0;
    uint64_t most = 0;
    for (int k = 0; k < SL_WIRE_STAGES; k++) {
        uint64_t d =
            f->stats[0].stage_ns[k] > f->stats[1].stage_ns[k] ? f->stats[0].stage_ns[k] - f->stats[1].stage_ns[k] : 0;
        if (d > most) {
            most = d;
            *busiest = k;
        }
    }
    return 0;
}

size_t client_wait_by_feeder(const struct client *c, double *secs, size_t n)
{
    /* atomic: feeders that join raise it on the client's thread */
    size_t F = __atomic_load_n(&c->o.nfeeders, __ATOMIC_RELAXED);
    if (F > CLIENT_MAX_FEEDERS)
        F = CLIENT_MAX_FEEDERS;
    for (size_t j = 0; j < F && j < n; j++)
        secs[j] = (double)__atomic_load_n(&c->wait_by_feeder[j], __ATOMIC_RELAXED) / 1e9;
    return F;
}
