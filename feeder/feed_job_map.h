/* feed_job_map: the job's 'map' (docs/map.md) between the job file and the
 * map stage (transform/map.h): the key parsed with the job's messages, the
 * plan made against the job's features, the features leaving the map as
 * the feeder's feature specs.
 */
#ifndef FEED_JOB_MAP_H
#define FEED_JOB_MAP_H

#include <jansson.h>
#include <stddef.h>

#include "feed_job_parse.h"
#include "fmt_features.h"
#include "map.h"

struct feed_job;

/* 'map': the pipeline (owned), or why not (the job file's words). */
int feed__map_parse(json_t *v, struct map_pipeline **out, struct why *w);

/* The plan of job->map over the job's features (*out NULL when the job
 * has no map, or an empty one): plugins are loaded relative to the job file's directory.
 * SL_EINVAL "<source>: 'map[N].KEY'..." as a job error; flags as
 * map_plan_create's. */
int feed_job_map_plan(const struct feed_job *job, unsigned flags, struct map_plan **out,
                      struct sl_error *err) SL_MUST_CHECK;

/* The features leaving the map as feature specs (owned: sl_free), for the
 * schema and the piece size. The untouched ones are the job's, defaults
 * and all; the touched ones are fixed-length with no default. */
int feed_map_out_specs(const struct map_plan *plan, const struct fmt_feature_spec *in, size_t nin,
                       struct fmt_feature_spec **out, size_t *nout) SL_MUST_CHECK;

/* A feature spec as the map sees it. */
void feed_map_spec_from(const struct fmt_feature_spec *f, struct map_spec *out);

#endif
