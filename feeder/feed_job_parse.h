/* feed_job_parse: what parsing a job's keys needs below the keys
 * (feed_job.c) and the features (feed_job_features.c): why a key is
 * refused, a value as the user wrote it, lists of owned strings. The list
 * type is public (struct feed_job holds lists; feed_job.h includes this);
 * the rest is for the job's files only.
 */
#ifndef FEED_JOB_PARSE_H
#define FEED_JOB_PARSE_H

#include <jansson.h>
#include <stddef.h>

#include "sl_error.h"

/* A list of owned strings. */
struct feed_job_list {
    char **items; /* owned, each item owned; NULL when n == 0 */
    size_t n;
};

/* What went wrong, before it is worded for the file or for a flag. */
struct why {
    int unknown; /* the key does not exist */
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

#endif
