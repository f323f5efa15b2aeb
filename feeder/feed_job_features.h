/* feed_job_features: a job's 'features' (docs/job.md) parsed and checked
 * with the job file's messages, and written back as JSON. For the job's
 * files only (feed_job.c).
 */
#ifndef FEED_JOB_FEATURES_H
#define FEED_JOB_FEATURES_H

#include <jansson.h>
#include <stddef.h>

#include "feed_job_parse.h"
#include "fmt_features.h"

/* 'features': n features and, per feature, its arrays (both owned, freed
 * with feed__features_free), or why not. */
int feed__features_parse(json_t *v, struct fmt_feature_spec **out, struct feed_job_list **arrays_out, size_t *nout,
                         struct why *w);
void feed__features_free(struct fmt_feature_spec *specs, struct feed_job_list *arrays, size_t n);
/* The features as the job file writes them; *digits raised to what a
 * float default needs. NULL when out of memory. */
json_t *feed__features_to_json(const struct fmt_feature_spec *specs, const struct feed_job_list *arrays, size_t n,
                               int *digits);
/* Is s one of a feature's fields ("dtype", "shape", ...)? */
int feed__feature_field(const char *s);

#endif
