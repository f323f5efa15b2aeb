/* fmt_job: what a job may declare for its format, asked of the format.
 * The feeder's job validation (feeder/feed_job.c) states its own rules
 * (sharding, the cluster shape) and asks the format for the rest: whether
 * the input is named by 'files' or otherwise, which features the format
 * can fill. Each format writes its rules next to its table
 * (fmt_format_ops.job_input, .job_features); this file asks them.
 *
 * Thread-safe: yes (no state).
 */
#ifndef FMT_JOB_H
#define FMT_JOB_H

#include <stddef.h>

#include "fmt_format.h"
#include "sl_error.h"

/* A job's input as its format judges it, before any file is read (the
 * feeder's job: docs/job.md). Borrowed for the call. */
struct fmt_job_input {
    int files_given;                         /* the job gave 'files' */
    const struct fmt_feature_spec *features; /* 'features', in order */
    size_t nfeatures;
    /* Does feature i name arrays ('features.NAME.array')? NULL: none does. */
    int (*names_arrays)(const void *ctx, size_t i);
    const void *ctx;
};

/* The format's rules for a job, in two steps that the job's own rules come
 * between: FMT_JOB_INPUT, what names the input ('files', or each feature's
 * arrays), and FMT_JOB_FEATURES, which features the format fills. 0, or
 * SL_EINVAL with a message naming the job's key, bare (the caller puts
 * "<job>: " in front): "'features' is required with format \"tfrecord\"". */
enum fmt_job_step { FMT_JOB_INPUT, FMT_JOB_FEATURES };
int fmt_format_check_job(enum fmt_format f, enum fmt_job_step step, const struct fmt_job_input *in,
                         struct sl_error *err) SL_MUST_CHECK;

/* 1 when the format reads the job's 'files'; 0 when its input is named
 * otherwise (arrays: each feature's arrays, read as groups, scan_group). */
int fmt_format_reads_files(enum fmt_format f);

#endif
