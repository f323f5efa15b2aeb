/* feed_job_int: what the job's files share (feed_job.c, the keys and the
 * API; feed_job_features.c; feed_job_files.c), for no one else.
 */
#ifndef FEED_JOB_INT_H
#define FEED_JOB_INT_H

#include <jansson.h>
#include <stddef.h>

#include "feed_job.h"
#include "sl_error.h"

/* What went wrong, before it is worded for the file or for a flag. */
struct why {
    int unknown;    /* the key does not exist */
    char key[256];
    char text[640]; /* follows the quoted key: " must be ..." or ": ..." */
};

/* Record why a key is refused: SL_EINVAL. */
int feed__why_set(struct why *w, const char *key, const char *fmt, ...) SL_PRINTF(3, 4);
/* A key that does not exist: SL_EINVAL. */
int feed__why_unknown(struct why *w, const char *key);
/* A value as the user wrote it (compact JSON, 15 digits, cut at 60 bytes),
 * in buf. */
const char *feed__got(const json_t *v, char *buf, size_t cap);

void feed__list_free(struct feed_job_list *l);
/* Append a copy of s: 0 or SL_ENOMEM. */
int feed__list_push(struct feed_job_list *l, size_t *cap, const char *s);

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
