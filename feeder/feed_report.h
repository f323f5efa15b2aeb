/* feed_report: what sluice-feeder reports of a job, out of its main: the
 * `plan` subcommand's figures, and the --stats file written at exit.
 */
#ifndef FEED_REPORT_H
#define FEED_REPORT_H

#include <stdint.h>

#include "feed_job.h"
#include "feed_metrics.h"
#include "feed_source.h"

/* `sluice-feeder plan`: per worker of `workers` x `replicas`, its steps,
 * elements, pieces and files per epoch, as text or one JSON object
 * (docs/feeder.md) on stdout. 0, or the exit status (SL_EXIT_USAGE: the
 * job cannot be planned for that shape, logged; SL_EXIT_DATA). */
int feed_report_plan(const struct feed_job *job, const struct feed_source *src, uint32_t workers, uint32_t replicas,
                     int json);

/* --stats: the counters as one JSON object at `path` (schema in
 * docs/feeder.md): 0, or -1 with the reason logged. map and map_op_ns:
 * the map stage's plan and its ops' CPU time (NULL: none). */
struct map_plan;
int feed_report_stats(const char *path, const struct feed_counters *c, const struct feed_source *src, double scan_s,
                      double scan_cpu_s, const struct map_plan *map, const uint64_t *map_op_ns);

#endif
