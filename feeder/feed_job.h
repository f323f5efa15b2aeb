/* feed_job: a job, the dataset definition a feeder serves (docs/job.md).
 *
 * A job is loaded once in main from a JSON file, then changed by the
 * command line's `--key=value` flags, then checked and its file patterns
 * expanded; after that it is read-only and shared by every stage:
 *
 *     feed_job_load(&job, "job.json", &err);      values checked one by one
 *     feed_job_set(job, "shuffle.seed", "9", &err); for each flag
 *     feed_job_validate(job, &err);               rules across keys, required keys
 *     feed_job_expand(job, &err);                 glob(3) the patterns
 *
 * Every key is one row of a table {name, type, offset, min, max, default}
 * that the file loader, the flag setter, the defaults and the JSON writer
 * all use, so a key behaves the same from the file and from a flag.
 *
 * Errors (SL_EINVAL unless said otherwise) name the file or the flag and
 * the key, as a user would look for it:
 *     job.json:3:11: unexpected token near ','
 *     job.json: unknown key 'bach_size'
 *     job.json: 'global_batch_size' must be an integer >= 1 (got -3)
 *     job.json: 'features.image.dtype': unknown dtype 'int33'
 *     --bach_size: unknown key
 *     --global_batch_size: must be an integer >= 1 (got -3)
 *     files: pattern 'x*.tfrecord' matches no file
 *
 * Thread-safe: a job is read-only once main has prepared it; until then it
 * has one owner.
 */
#ifndef FEED_JOB_H
#define FEED_JOB_H

#include <stddef.h>
#include <stdint.h>

#include "feed_plan.h"
#include "fmt_features.h"
#include "fmt_files.h"
#include "fmt_reader.h"
#include "fmt_stream.h"
#include "feed_job_parse.h" /* struct feed_job_list */
#include "map.h"
#include "sl_buf.h"
#include "sl_error.h"

/* Every field is public and read-only for everyone but this module. The
 * key each field comes from is in the comment; docs/job.md has the rest. */
struct feed_job {
    char *source;                     /* the job file's path, or "command line" (owned); errors start with it */
    char *name;                       /* name (owned) */
    struct feed_job_list patterns;    /* files, as given */
    struct feed_job_list files;       /* the expanded file list (feed_job_expand); empty before */
    enum fmt_format format;           /* format */
    enum fmt_compression compression; /* compression */
    /* features, in the file's order (owned). A BYTES default points to
     * memory owned by this array. */
    struct fmt_feature_spec *features;
    size_t nfeatures;
    /* features.NAME.array, per feature (nfeatures lists, owned; NULL when no
     * feature): the patterns of its arrays with format arrays, empty lists
     * otherwise */
    struct feed_job_list *arrays;
    /* format arrays: every group's arrays, group-major in feature order
     * (feed_job_expand); `files` then holds each group's first array */
    struct feed_job_list members;
    enum feed_policy policy;      /* shard_policy */
    enum feed_hint hint;          /* shard_hint; meaningful with FEED_SHARD_HINT only */
    uint64_t global_batch_size;   /* global_batch_size, G */
    int drop_remainder;           /* drop_remainder */
    uint64_t shuffle_buffer;      /* shuffle.buffer; 0: no shuffle */
    uint64_t shuffle_seed;        /* shuffle.seed */
    int reshuffle_each_epoch;     /* shuffle.reshuffle_each_epoch */
    uint64_t epochs;              /* epochs; 0: forever */
    uint64_t parallel_reads;      /* parallel_reads */
    int per_replica_input;        /* per_replica_input */
    enum feed_pr_shard pr_shard;  /* per_replica_shard */
    uint64_t prefetch;            /* prefetch */
    enum fmt_on_error on_error;   /* on_error */
    uint64_t max_record_bytes;    /* max_record_bytes */
    uint64_t cache_bytes;         /* cache_bytes: the decoded-element cache's bound (feed_cache.h); 0: "off" */
    uint64_t inflate_cache_bytes; /* inflate_cache_bytes: compressed files held inflated at once; also
                                     the most one compressed file may inflate to */
    int use_index;                /* use_index: take record offsets from FILE.idx where it exists */
    int verify_on_read;           /* verify_on_read: check TFRecord CRCs again on every read (the scan at
                                     start always checks them) */
    struct map_pipeline *map;     /* map: the map stage's ops (owned; NULL: none); checked against the features
                                     by feed_job_validate, made into a plan by feed_job_map_plan */
    uint64_t workers, replicas;   /* workers, replicas: the cluster shape the feeder serves; 0: not given (the
                                     feeder's --workers/--replicas, else the first trainer's) */
};

/* Load the job file at `path` (path NULL: a job of defaults only, to be
 * filled by feed_job_set; its errors start with "command line").
 * Checks each value (type, range, names) and each feature; the rules across
 * keys and the required keys wait for feed_job_validate, so that flags can
 * still complete the job. On error *out is NULL: SL_EIO when the file
 * cannot be read, SL_ENOMEM, else SL_EINVAL. */
int feed_job_load(struct feed_job **out, const char *path, struct sl_error *err) SL_MUST_CHECK;

/* Apply the flag `--key=value` (key without the dashes). Dotted keys reach
 * into objects: "shuffle.seed", "features.image" (a whole feature as JSON),
 * "features.image.shape" (one field; the value is JSON, or a bare string).
 * "files" takes a comma-separated list; "shuffle" and "features" take JSON;
 * "null" resets a non-string key to its default. On error the job is as
 * before the call. `job` must come from feed_job_load. */
int feed_job_set(struct feed_job *job, const char *key, const char *value, struct sl_error *err) SL_MUST_CHECK;

/* The name of job key i (0-based, the key table's order: "name", "files",
 * ..., "shuffle.seed", ...; objects' fields dotted; "features" stands for
 * every "features.NAME[.FIELD]"), or NULL past the last. What a command
 * line may override, and what a near miss is compared with. */
const char *feed_job_key_name(size_t i);

/* The rules across keys, and the required keys (name, files,
 * global_batch_size; features with format tfrecord). 0 or SL_EINVAL with
 * "<source>: 'shard_hint' is required with shard_policy \"hint\"" etc. */
int feed_job_validate(const struct feed_job *job, struct sl_error *err) SL_MUST_CHECK;

/* Expand the patterns into job->files (replacing any earlier list): each
 * local pattern (a path, or a file:// name) with glob(3), relative to the
 * current directory, and each remote name as it is (feed_job_pattern); its matches
 * (directories left out) sorted bytewise; the lists concatenated in the
 * patterns' order (a file matched twice is read twice). A pattern that
 * matches no file is SL_EIO (files missing, like a read error: exit 1):
 * "files: pattern 'x*.tfrecord' matches no file"; a rule broken is
 * SL_EINVAL. On error job->files is unchanged. */
int feed_job_expand(struct feed_job *job, struct sl_error *err) SL_MUST_CHECK;

/* How feed_job_expand takes one pattern of `files` (or of an array's):
 *   FEED_PATTERN_GLOB    a local path or file:// name: glob(3) its path
 *                        (*glob_path, the pattern less any "file://");
 *   FEED_PATTERN_AS_IS   an http(s):// or s3:// name with no glob
 *                        characters: the one file, as written (not looked
 *                        for here: the scan opens it);
 *   FEED_PATTERN_LIST    an s3:// name with glob characters in its key:
 *                        listed by sto_list (sorted bytewise);
 *   SL_EINVAL            an http(s) URL with glob characters, or an s3://
 *                        name with them in its bucket, naming it:
 *                        "WHAT: 'URL': http URLs cannot be globbed; list the
 *                        files", "WHAT: 'URL': glob characters in an s3
 *                        bucket name (only keys are listed)".
 * Glob characters are *, ? and [; in an http(s) URL only * and [ after
 * its host, before any '?' (which starts its query, as in a presigned URL;
 * a bracketed IPv6 host is no glob either). `what` heads the error. */
enum { FEED_PATTERN_GLOB = 0, FEED_PATTERN_AS_IS = 1, FEED_PATTERN_LIST = 2 };
int feed_job_pattern(const char *pattern, const char *what, const char **glob_path, struct sl_error *err) SL_MUST_CHECK;

/* Fill a plan config for W workers of R replicas from an expanded job;
 * `counts` (records per file, job->files order) is borrowed by cfg, and so
 * is the job. SL_EINVAL when the job has no files, counts is NULL, or W or
 * R is 0; the plan checks the rest (feed_plan_create). With format
 * arrays, shard_policy "auto" becomes FEED_SHARD_DATA in cfg. */
int feed_job_fill_plan_config(const struct feed_job *job, const uint64_t *counts, uint32_t W, uint32_t R,
                              struct feed_plan_config *cfg) SL_MUST_CHECK;

/* Append the effective job as JSON to out: every key with its value,
 * defaults included, in docs/job.md's order (shard_hint only when set).
 * The text loads back to the same job. indent 0: one line (for logs);
 * n > 0: n spaces per level. The expanded file list is not included.
 * 0 or SL_ENOMEM (or SL_EINVAL when out's max is reached). */
int feed_job_to_json(const struct feed_job *job, int indent, struct sl_buf *out) SL_MUST_CHECK;

/* Free the job and everything it owns. NULL is fine. */
void feed_job_free(struct feed_job *job);

#endif
