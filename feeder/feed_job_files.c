/* feed_job_files: a job's files, as feed_job_expand finds them: each
 * pattern expanded with glob(3) and its matches sorted, or, with format
 * arrays, each feature's arrays grouped (group g: the g-th of each).
 * Remote names (http(s)://, s3://) are not globbed: each is one file, as
 * written; an s3:// name with glob characters in its key is listed
 * (sto_list: ListObjectsV2), an http(s) one is refused (HTTP has no
 * listing at all).
 */
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "feed_job.h"
#include "feed_job_parse.h"
#include "fmt_job.h"
#include "sl_alloc.h"
#include "sto.h"

static int cmp_path(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The glob characters of an http(s) URL: * or [ in its path (after the
 * host, before a query). */
static int http_has_glob(const char *url)
{
    const char *host = strstr(url, "://") + 3;
    const char *path = host + strcspn(host, "/?#");
    size_t len = strcspn(path, "?#");
    for (size_t i = 0; i < len; i++)
        if (path[i] == '*' || path[i] == '[')
            return 1;
    return 0;
}

int feed_job_pattern(const char *pattern, const char *what, const char **glob_path, struct sl_error *err)
{
    *glob_path = NULL;
    switch (sto_kind_of(pattern)) {
    case STO_HTTP:
        if (http_has_glob(pattern))
            return sl_error_set(err, SL_EINVAL, "%s: '%s': http URLs cannot be globbed; list the files", what, pattern);
        return FEED_PATTERN_AS_IS;
    case STO_S3: {
        const char *b = pattern + strlen("s3://");
        size_t blen = strcspn(b, "/");
        if (strcspn(b, "*?[") < blen)
            return sl_error_set(err, SL_EINVAL, "%s: '%s': glob characters in an s3 bucket name (only keys are listed)",
                                what, pattern);
        return strpbrk(b + blen, "*?[") != NULL ? FEED_PATTERN_LIST : FEED_PATTERN_AS_IS;
    }
    case STO_FILE:
    default: *glob_path = sto_local_path(pattern); return FEED_PATTERN_GLOB;
    }
}

/* Expand patterns into l (appending): each with glob(3), its matches
 * (directories left out) sorted bytewise; `what` heads the errors. */
static int expand_patterns(const struct feed_job_list *patterns, const char *what, struct feed_job_list *l, size_t *cap,
                           struct sl_error *err)
{
    int rc = 0;
    for (size_t p = 0; rc == 0 && p < patterns->n; p++) {
        const char *pattern = patterns->items[p], *local;
        size_t start = l->n;
        int kind = feed_job_pattern(pattern, what, &local, err);
        if (kind < 0) {
            rc = kind;
            continue;
        }
        if (kind == FEED_PATTERN_AS_IS) {
            if (feed__list_push(l, cap, pattern) != 0)
                rc = sl_error_set(err, SL_ENOMEM, "%s: out of memory", what);
            continue;
        }
        if (kind == FEED_PATTERN_LIST) { /* sorted by sto_list, as glob's matches below */
            char **names = NULL;
            size_t n = 0;
            if ((rc = sto_list(pattern, &names, &n, err)) != 0) {
                char msg[SL_ERROR_MSG_MAX];
                snprintf(msg, sizeof msg, "%s", err->msg);
                rc = sl_error_set(err, rc, "%s: %s", what, msg);
                continue;
            }
            for (size_t i = 0; rc == 0 && i < n; i++)
                if (feed__list_push(l, cap, names[i]) != 0)
                    rc = sl_error_set(err, SL_ENOMEM, "%s: out of memory", what);
            sto_list_free(names, n);
            if (rc == 0 && n == 0)
                rc = sl_error_set(err, SL_EIO, "%s: pattern '%s' matches no file", what, pattern);
            continue;
        }
        glob_t g;
        int r = glob(local, GLOB_MARK | GLOB_NOSORT, NULL, &g);
        if (r == GLOB_NOSPACE) {
            rc = sl_error_set(err, SL_ENOMEM, "%s: out of memory", what);
        } else if (r != 0 && r != GLOB_NOMATCH) {
            rc = sl_error_set(err, SL_EIO, "%s: glob(%s): read error", what, pattern);
        } else {
            for (size_t i = 0; r == 0 && rc == 0 && i < g.gl_pathc; i++) {
                const char *m = g.gl_pathv[i];
                if (m[0] != '\0' && m[strlen(m) - 1] != '/' && feed__list_push(l, cap, m) != 0)
                    rc = sl_error_set(err, SL_ENOMEM, "%s: out of memory", what);
            }
            if (rc == 0 && l->n == start)
                /* SL_EIO: files missing, like a job file missing (exit 1, sl_exit.h) */
                rc = sl_error_set(err, SL_EIO, "%s: pattern '%s' matches no file", what, pattern);
            else if (rc == 0)
                qsort(l->items + start, l->n - start, sizeof *l->items, cmp_path);
        }
        if (r != GLOB_NOMATCH)
            globfree(&g);
    }
    return rc;
}

/* Format arrays: each feature's arrays, then the groups: group g is the
 * g-th array of every feature. */
static int expand_arrays(struct feed_job *job, struct sl_error *err)
{
    size_t n = job->nfeatures;
    if (n == 0 || job->arrays == NULL)
        return sl_error_set(err, SL_EINVAL, "features: format arrays needs features with arrays");
    struct feed_job_list *per = sl_calloc(n, sizeof *per);
    struct feed_job_list files = {0}, members = {0};
    size_t fcap = 0, mcap = 0;
    int rc = per == NULL ? sl_error_set(err, SL_ENOMEM, "features: out of memory") : 0;
    for (size_t k = 0; rc == 0 && k < n; k++) {
        char what[160];
        size_t cap = 0;
        snprintf(what, sizeof what, "features.%s.array", job->features[k].name);
        rc = expand_patterns(&job->arrays[k], what, &per[k], &cap, err);
        if (rc == 0 && per[k].n != per[0].n)
            rc = sl_error_set(err, SL_EINVAL,
                              "features.%s.array: %zu arrays, but features.%s.array has %zu: every feature needs "
                              "one array per group (the g-th of each, in sorted order, make group g)",
                              job->features[k].name, per[k].n, job->features[0].name, per[0].n);
    }
    for (size_t g = 0; rc == 0 && g < per[0].n; g++) {
        if (feed__list_push(&files, &fcap, per[0].items[g]) != 0)
            rc = sl_error_set(err, SL_ENOMEM, "features: out of memory");
        for (size_t k = 0; rc == 0 && k < n; k++)
            if (feed__list_push(&members, &mcap, per[k].items[g]) != 0)
                rc = sl_error_set(err, SL_ENOMEM, "features: out of memory");
    }
    for (size_t k = 0; per != NULL && k < n; k++)
        feed__list_free(&per[k]);
    sl_free(per);
    if (rc != 0) {
        feed__list_free(&files);
        feed__list_free(&members);
        return rc;
    }
    feed__list_free(&job->files);
    feed__list_free(&job->members);
    job->files = files;
    job->members = members;
    return 0;
}

int feed_job_expand(struct feed_job *job, struct sl_error *err)
{
    if (!fmt_format_reads_files(job->format))
        return expand_arrays(job, err);
    struct feed_job_list l = {0};
    size_t cap = 0;
    int rc = expand_patterns(&job->patterns, "files", &l, &cap, err);
    if (rc != 0) {
        feed__list_free(&l);
        return rc;
    }
    feed__list_free(&job->files);
    job->files = l;
    return 0;
}
