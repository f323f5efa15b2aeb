/* feed_job: the job file, its flags, validation, file expansion and the
 * effective JSON. Every message is compared whole. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "feed_job.h"
#include "sl_alloc.h"
#include "sl_test.h"

static const char example[] =
    "{\"name\": \"fmnist-train\", \"files\": [\"data/fmnist/train-*.tfrecord\"], \"format\": \"tfrecord\",\n"
    " \"compression\": \"auto\",\n"
    " \"features\": {\"image\": {\"dtype\": \"uint8\", \"shape\": [784], \"from\": \"bytes\"},\n"
    "              \"label\": {\"dtype\": \"int64\", \"shape\": [], \"default\": 0},\n"
    "              \"id\":    {\"dtype\": \"int64\", \"shape\": []}},\n"
    " \"shard_policy\": \"auto\", \"global_batch_size\": 256, \"drop_remainder\": false,\n"
    " \"shuffle\": {\"buffer\": 10000, \"seed\": 7, \"reshuffle_each_epoch\": true},\n"
    " \"epochs\": 3, \"parallel_reads\": 2, \"per_replica_input\": false, \"prefetch\": 8,\n"
    " \"on_error\": \"fail\", \"max_record_bytes\": 67108864}\n";

/* Load `text` from job.json in the test folder; *path gets its path. */
static int load_text(struct feed_job **job, const char *text, struct sl_error *err, const char **path)
{
    const char *p = sl_test_write("job.json", text, strlen(text));
    if (path != NULL)
        *path = p;
    return feed_job_load(job, p, err);
}

static struct feed_job *load_ok(const char *text)
{
    struct feed_job *job;
    struct sl_error err = {0};
    int rc = load_text(&job, text, &err, NULL);
    ck_assert_msg(rc == 0, "load: %s", err.msg);
    return job;
}

static void set_ok(struct feed_job *job, const char *key, const char *value)
{
    struct sl_error err = {0};
    int rc = feed_job_set(job, key, value, &err);
    ck_assert_msg(rc == 0, "--%s=%s: %s", key, value, err.msg);
}

static void set_fails(struct feed_job *job, const char *key, const char *value, const char *want)
{
    struct sl_error err = {0};
    ck_assert_int_eq(feed_job_set(job, key, value, &err), SL_EINVAL);
    ck_assert_str_eq(err.msg, want);
}

START_TEST(test_example_loads)
{
    struct feed_job *job = load_ok(example);
    struct sl_error err = {0};
    ck_assert_str_eq(job->name, "fmnist-train");
    ck_assert_uint_eq(job->patterns.n, 1);
    ck_assert_str_eq(job->patterns.items[0], "data/fmnist/train-*.tfrecord");
    ck_assert_uint_eq(job->files.n, 0);
    ck_assert_int_eq(job->format, FMT_FORMAT_TFRECORD);
    ck_assert_int_eq(job->compression, FMT_COMP_AUTO);
    ck_assert_int_eq(job->policy, FEED_SHARD_AUTO);
    ck_assert_uint_eq(job->global_batch_size, 256);
    ck_assert_int_eq(job->drop_remainder, 0);
    ck_assert_uint_eq(job->shuffle_buffer, 10000);
    ck_assert_uint_eq(job->shuffle_seed, 7);
    ck_assert_int_eq(job->reshuffle_each_epoch, 1);
    ck_assert_uint_eq(job->epochs, 3);
    ck_assert_uint_eq(job->parallel_reads, 2);
    ck_assert_int_eq(job->per_replica_input, 0);
    ck_assert_int_eq(job->pr_shard, FEED_PR_SHARD_NONE);
    ck_assert_uint_eq(job->prefetch, 8);
    ck_assert_int_eq(job->on_error, FMT_ON_ERROR_FAIL);
    ck_assert_uint_eq(job->max_record_bytes, 67108864);
    ck_assert_uint_eq(job->inflate_cache_bytes, (uint64_t)1 << 30);

    ck_assert_uint_eq(job->nfeatures, 3);
    const struct fmt_feature_spec *f = job->features;
    ck_assert_str_eq(f[0].name, "image");
    ck_assert_int_eq(f[0].dtype, FMT_DTYPE_UINT8);
    ck_assert_int_eq(f[0].rank, 1);
    ck_assert_int_eq(f[0].shape[0], 784);
    ck_assert_int_eq(f[0].varlen, 0);
    ck_assert_int_eq(f[0].has_default, 0);
    ck_assert_str_eq(f[1].name, "label");
    ck_assert_int_eq(f[1].dtype, FMT_DTYPE_INT64);
    ck_assert_int_eq(f[1].rank, 0);
    ck_assert_int_eq(f[1].has_default, 1);
    ck_assert_int_eq(f[1].default_i64, 0);
    ck_assert_str_eq(f[2].name, "id");
    ck_assert_int_eq(f[2].dtype, FMT_DTYPE_INT64);
    ck_assert_int_eq(f[2].rank, 0);
    ck_assert_int_eq(f[2].has_default, 0);
    ck_assert_int_eq(feed_job_validate(job, &err), 0);
    feed_job_free(job);
    feed_job_free(NULL);
}
END_TEST

static void assert_defaults(const struct feed_job *job)
{
    ck_assert_int_eq(job->format, FMT_FORMAT_TFRECORD);
    ck_assert_int_eq(job->compression, FMT_COMP_AUTO);
    ck_assert_int_eq(job->policy, FEED_SHARD_AUTO);
    ck_assert_int_eq(job->drop_remainder, 0);
    ck_assert_uint_eq(job->shuffle_buffer, 0);
    ck_assert_uint_eq(job->shuffle_seed, 0);
    ck_assert_int_eq(job->reshuffle_each_epoch, 1);
    ck_assert_uint_eq(job->epochs, 1);
    ck_assert_uint_eq(job->parallel_reads, 1);
    ck_assert_int_eq(job->per_replica_input, 0);
    ck_assert_int_eq(job->pr_shard, FEED_PR_SHARD_NONE);
    ck_assert_uint_eq(job->prefetch, 4);
    ck_assert_int_eq(job->on_error, FMT_ON_ERROR_FAIL);
    ck_assert_uint_eq(job->max_record_bytes, 64u << 20);
}

START_TEST(test_defaults)
{
    struct feed_job *job = load_ok("{\"name\": \"m\", \"files\": \"a.tfrecord\", \"global_batch_size\": 8,"
                                   " \"features\": {\"x\": {\"dtype\": \"float32\"}}, \"shuffle\": null}");
    assert_defaults(job);
    ck_assert_uint_eq(job->patterns.n, 1);
    ck_assert_str_eq(job->patterns.items[0], "a.tfrecord");
    ck_assert_int_eq(job->features[0].rank, 0);
    feed_job_free(job);

    /* no file: defaults only, completed by flags */
    struct sl_error err = {0};
    ck_assert_int_eq(feed_job_load(&job, NULL, &err), 0);
    assert_defaults(job);
    ck_assert_str_eq(job->source, "command line");
    ck_assert_ptr_null(job->name);
    ck_assert_uint_eq(job->patterns.n, 0);
    ck_assert_uint_eq(job->nfeatures, 0);
    feed_job_free(job);
}
END_TEST

/* A file holding only the bad key: required keys are checked later, by
 * feed_job_validate. */
static const struct {
    const char *json;
    const char *want; /* after "<path>: " */
} bad_values[] = {
    {"{\"global_batch_size\": -3}", "'global_batch_size' must be an integer >= 1 (got -3)"},
    {"{\"workers\": 0}", "'workers' must be an integer >= 1 (got 0)"},
    {"{\"workers\": -2}", "'workers' must be an integer >= 1 (got -2)"},
    {"{\"workers\": 65537}", "'workers' must be an integer <= 65536 (got 65537)"},
    {"{\"workers\": 9223372036854775807}", "'workers' must be an integer <= 65536 (got 9223372036854775807)"},
    {"{\"workers\": \"2\"}", "'workers' must be an integer >= 1 (got \"2\")"},
    {"{\"replicas\": 1025}", "'replicas' must be an integer <= 1024 (got 1025)"},
    {"{\"global_batch_size\": 0}", "'global_batch_size' must be an integer >= 1 (got 0)"},
    {"{\"global_batch_size\": 2147483648}", "'global_batch_size' must be an integer <= 2147483647 (got 2147483648)"},
    {"{\"global_batch_size\": \"8\"}", "'global_batch_size' must be an integer >= 1 (got \"8\")"},
    {"{\"global_batch_size\": 8.0}", "'global_batch_size' must be an integer >= 1 (got 8.0)"},
    {"{\"name\": \"\"}", "'name' must be a string of 1 to 64 characters from A-Z a-z 0-9 . _ - (got \"\")"},
    {"{\"name\": \"a b\"}", "'name' must be a string of 1 to 64 characters from A-Z a-z 0-9 . _ - (got \"a b\")"},
    {"{\"name\": 3}", "'name' must be a string of 1 to 64 characters from A-Z a-z 0-9 . _ - (got 3)"},
    {"{\"name\": \"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"}",
     "'name' must be a string of 1 to 64 characters from A-Z a-z 0-9 . _ - (got "
     "\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa...)"},
    {"{\"files\": []}", "'files' must be a pattern or a non-empty list of patterns (got [])"},
    {"{\"files\": [\"a\", 3]}", "'files' must be a pattern or a non-empty list of patterns (got [\"a\",3])"},
    {"{\"files\": [\"a\", \"\"]}", "'files' must be a pattern or a non-empty list of patterns (got [\"a\",\"\"])"},
    {"{\"files\": \"\"}", "'files' must be a pattern or a non-empty list of patterns (got \"\")"},
    {"{\"files\": {}}", "'files' must be a pattern or a non-empty list of patterns (got {})"},
    {"{\"format\": \"csv\"}", "'format': unknown format 'csv' (expected tfrecord, text, tar or arrays)"},
    {"{\"format\": 1}", "'format' must be a string (got 1)"},
    {"{\"compression\": \"lz4\"}", "'compression': unknown compression 'lz4' (expected auto, none, gzip or zlib)"},
    {"{\"shard_policy\": \"fil\"}",
     "'shard_policy': unknown shard policy 'fil' (expected auto, off, file, data or hint)"},
    {"{\"shard_hint\": \"rows\"}", "'shard_hint': unknown shard hint 'rows' (expected files, records or batches)"},
    {"{\"drop_remainder\": 1}", "'drop_remainder' must be true or false (got 1)"},
    {"{\"drop_remainder\": \"false\"}", "'drop_remainder' must be true or false (got \"false\")"},
    {"{\"shuffle\": 5}", "'shuffle' must be an object or null (got 5)"},
    {"{\"shuffle\": {\"seed\": 1}}", "'shuffle.buffer' is required"},
    {"{\"shuffle\": {\"buffer\": null}}", "'shuffle.buffer' is required"},
    {"{\"shuffle\": {\"buffer\": -1}}", "'shuffle.buffer' must be an integer >= 0 (got -1)"},
    {"{\"shuffle\": {\"buffer\": 10, \"seed\": -5}}", "'shuffle.seed' must be an integer >= 0 (got -5)"},
    {"{\"shuffle\": {\"buffer\": 10, \"reshuffle_each_epoch\": \"yes\"}}",
     "'shuffle.reshuffle_each_epoch' must be true or false (got \"yes\")"},
    {"{\"epochs\": -1}", "'epochs' must be an integer >= 0 or \"forever\" (got -1)"},
    {"{\"epochs\": \"always\"}", "'epochs' must be an integer >= 0 or \"forever\" (got \"always\")"},
    {"{\"parallel_reads\": 0}", "'parallel_reads' must be an integer >= 1 (got 0)"},
    {"{\"parallel_reads\": 1025}", "'parallel_reads' must be an integer <= 1024 (got 1025)"},
    {"{\"per_replica_input\": \"true\"}", "'per_replica_input' must be true or false (got \"true\")"},
    {"{\"per_replica_shard\": \"batches\"}",
     "'per_replica_shard': unknown per-replica shard 'batches' (expected none, files or records)"},
    {"{\"prefetch\": 0}", "'prefetch' must be an integer >= 1 (got 0)"},
    {"{\"prefetch\": 2000}", "'prefetch' must be an integer <= 1024 (got 2000)"},
    {"{\"on_error\": \"skip\"}", "'on_error': unknown policy 'skip' (expected fail or skip-file)"},
    {"{\"max_record_bytes\": 0}", "'max_record_bytes' must be an integer >= 1 (got 0)"},
    {"{\"max_record_bytes\": 4294967297}", "'max_record_bytes' must be an integer <= 4294967296 (got 4294967297)"},
    {"{\"inflate_cache_bytes\": 1048575}", "'inflate_cache_bytes' must be an integer >= 1048576 (got 1048575)"},
    {"{\"inflate_cache_bytes\": -1}", "'inflate_cache_bytes' must be an integer >= 1048576 (got -1)"},
    {"{\"inflate_cache_bytes\": 1099511627777}",
     "'inflate_cache_bytes' must be an integer <= 1099511627776 (got 1099511627777)"},
    {"{\"inflate_cache_bytes\": \"big\"}", "'inflate_cache_bytes' must be an integer >= 1048576 (got \"big\")"},
    {"{\"cache_bytes\": 0}", "'cache_bytes' must be an integer >= 1048576 or \"off\" (got 0)"},
    {"{\"cache_bytes\": 1048575}", "'cache_bytes' must be an integer >= 1048576 or \"off\" (got 1048575)"},
    {"{\"cache_bytes\": -1}", "'cache_bytes' must be an integer >= 1048576 or \"off\" (got -1)"},
    {"{\"cache_bytes\": 1099511627777}", "'cache_bytes' must be an integer <= 1099511627776 (got 1099511627777)"},
    {"{\"cache_bytes\": \"on\"}", "'cache_bytes' must be an integer >= 1048576 or \"off\" (got \"on\")"},
    {"{\"cache_bytes\": true}", "'cache_bytes' must be an integer >= 1048576 or \"off\" (got true)"},
    {"{\"cache_bytes\": 2097152.5}", "'cache_bytes' must be an integer >= 1048576 or \"off\" (got 2097152.5)"},
    {"{\"features\": []}", "'features' must be an object of name -> feature (got [])"},
    /* unknown keys */
    {"{\"bach_size\": 1}", "unknown key 'bach_size'"},
    {"{\"shuffle\": {\"buffer\": 1, \"sed\": 2}}", "unknown key 'shuffle.sed'"},
    {"{\"shuffle.buffer\": 3}", "unknown key 'shuffle.buffer'"},
    {"{\"features\": {\"a\": {\"dtype\": \"int64\", \"shap\": []}}}", "unknown key 'features.a.shap'"},
    /* the first error in file order wins */
    {"{\"prefetch\": 0, \"bach_size\": 1}", "'prefetch' must be an integer >= 1 (got 0)"},
};

START_TEST(test_bad_values)
{
    for (size_t i = 0; i < sizeof bad_values / sizeof bad_values[0]; i++) {
        struct feed_job *job = (struct feed_job *)1;
        struct sl_error err = {0};
        const char *path;
        char want[SL_ERROR_MSG_MAX];
        ck_assert_int_eq(load_text(&job, bad_values[i].json, &err, &path), SL_EINVAL);
        ck_assert_ptr_null(job);
        snprintf(want, sizeof want, "%s: %s", path, bad_values[i].want);
        ck_assert_str_eq(err.msg, want);
        ck_assert_int_eq(err.code, SL_EINVAL);
    }
}
END_TEST

static const struct {
    const char *features;
    const char *want;
} bad_features[] = {
    {"{\"a\": {\"dtype\": \"int33\"}}",
     "'features.a.dtype': unknown dtype 'int33' (expected int64, float32, bytes or uint8)"},
    {"{\"a\": {}}", "'features.a.dtype' is required"},
    {"{\"a\": {\"dtype\": 5}}", "'features.a.dtype' must be a string (got 5)"},
    {"{\"a\": 5}", "'features.a' must be an object (got 5)"},
    {"{\"a\": {\"dtype\": \"uint8\", \"shape\": [4]}}", "'features.a': dtype uint8 requires \"from\": \"bytes\""},
    {"{\"a\": {\"dtype\": \"int64\", \"from\": \"bytes\"}}", "'features.a.from': only dtype uint8 is read from bytes"},
    {"{\"a\": {\"dtype\": \"uint8\", \"from\": \"png\"}}", "'features.a.from' must be \"bytes\" (got \"png\")"},
    {"{\"a\": {\"dtype\": \"int64\", \"shape\": [-1]}}",
     "'features.a.shape' must be an array of at most 8 integers >= 0 (got [-1])"},
    {"{\"a\": {\"dtype\": \"int64\", \"shape\": [1,1,1,1,1,1,1,1,1]}}",
     "'features.a.shape' must be an array of at most 8 integers >= 0 (got [1,1,1,1,1,1,1,1,1])"},
    {"{\"a\": {\"dtype\": \"int64\", \"shape\": 3}}",
     "'features.a.shape' must be an array of at most 8 integers >= 0 (got 3)"},
    {"{\"a\": {\"dtype\": \"int64\", \"shape\": [2.5]}}",
     "'features.a.shape' must be an array of at most 8 integers >= 0 (got [2.5])"},
    {"{\"a\": {\"dtype\": \"int64\", \"shape\": [65536, 65536, 2]}}",
     "'features.a.shape' must hold at most 4294967296 values (got [65536,65536,2])"},
    {"{\"a\": {\"dtype\": \"int64\", \"varlen\": \"yes\"}}", "'features.a.varlen' must be true or false (got \"yes\")"},
    {"{\"a\": {\"dtype\": \"int64\", \"varlen\": true, \"shape\": [2]}}",
     "'features.a.shape': a varlen feature has no shape"},
    {"{\"a\": {\"dtype\": \"int64\", \"varlen\": true, \"default\": 0}}",
     "'features.a.default': a varlen feature takes no default"},
    {"{\"a\": {\"dtype\": \"int64\", \"default\": 1.5}}", "'features.a.default' must be an integer (got 1.5)"},
    {"{\"a\": {\"dtype\": \"int64\", \"default\": \"0\"}}", "'features.a.default' must be an integer (got \"0\")"},
    {"{\"a\": {\"dtype\": \"float32\", \"default\": \"x\"}}",
     "'features.a.default' must be a float32 number (got \"x\")"},
    {"{\"a\": {\"dtype\": \"float32\", \"default\": 1e39}}",
     "'features.a.default' must be a float32 number (got 1e39)"},
    {"{\"a\": {\"dtype\": \"uint8\", \"from\": \"bytes\", \"default\": 256}}",
     "'features.a.default' must be an integer from 0 to 255 (got 256)"},
    {"{\"a\": {\"dtype\": \"uint8\", \"from\": \"bytes\", \"default\": -1}}",
     "'features.a.default' must be an integer from 0 to 255 (got -1)"},
    {"{\"a\": {\"dtype\": \"bytes\", \"default\": 3}}", "'features.a.default' must be a string (got 3)"},
    {"{\"a\": {\"dtype\": \"int64\", \"shape\": [3], \"default\": [1, 1]}}",
     "'features.a.default' must be one value or an array of 3 values (got [1,1])"},
    {"{\"a\": {\"dtype\": \"int64\", \"shape\": [2], \"default\": [1, 2]}}",
     "'features.a.default': every value must be the same (got [1,2])"},
    {"{\"a\": {\"dtype\": \"int64\", \"shape\": [2], \"default\": [[1], [1]]}}", NULL},
    {"{\"\": {\"dtype\": \"int64\"}}", "'features': a feature name must not be empty"},
    {"{\"ok\": {\"dtype\": \"int64\"}, \"bad\": {\"dtype\": \"int64\", \"shape\": [\"2\"]}}",
     "'features.bad.shape' must be an array of at most 8 integers >= 0 (got [\"2\"])"},
};

START_TEST(test_feature_errors)
{
    char text[1024], want[SL_ERROR_MSG_MAX];
    for (size_t i = 0; i < sizeof bad_features / sizeof bad_features[0]; i++) {
        struct feed_job *job;
        struct sl_error err = {0};
        const char *path;
        snprintf(text, sizeof text, "{\"features\": %s}", bad_features[i].features);
        int rc = load_text(&job, text, &err, &path);
        if (bad_features[i].want == NULL) { /* a nested default of equal values is fine */
            ck_assert_int_eq(rc, 0);
            ck_assert_int_eq(job->features[0].default_i64, 1);
            feed_job_free(job);
            continue;
        }
        ck_assert_int_eq(rc, SL_EINVAL);
        snprintf(want, sizeof want, "%s: %s", path, bad_features[i].want);
        ck_assert_str_eq(err.msg, want);
    }

    /* a name of 128 bytes is one too many */
    char name[129], json[300];
    memset(name, 'n', 128);
    name[128] = '\0';
    snprintf(json, sizeof json, "{\"features\": {\"%s\": {\"dtype\": \"int64\"}}}", name);
    struct feed_job *job;
    struct sl_error err = {0};
    const char *path;
    ck_assert_int_eq(load_text(&job, json, &err, &path), SL_EINVAL);
    snprintf(want, sizeof want, "%s: 'features.%s': a feature name has at most 127 bytes", path, name);
    ck_assert_str_eq(err.msg, want);
    name[127] = '\0';
    snprintf(json, sizeof json, "{\"features\": {\"%s\": {\"dtype\": \"int64\"}}}", name);
    ck_assert_int_eq(load_text(&job, json, &err, &path), 0);
    ck_assert_str_eq(job->features[0].name, name);
    feed_job_free(job);
}
END_TEST

START_TEST(test_features_parse)
{
    struct feed_job *job =
        load_ok("{\"features\": {"
                "\"img\": {\"dtype\": \"uint8\", \"shape\": [28, 28], \"from\": \"bytes\", \"default\": 7},"
                "\"f\": {\"dtype\": \"float32\", \"shape\": [2, 2], \"default\": [[0.25, 0.25], [0.25, 0.25]]},"
                "\"s\": {\"dtype\": \"bytes\", \"shape\": [], \"default\": \"unk\"},"
                "\"tags\": {\"dtype\": \"int64\", \"varlen\": true},"
                "\"raw\": {\"dtype\": \"uint8\", \"varlen\": true, \"from\": \"bytes\"},"
                "\"n\": {\"dtype\": \"int64\", \"shape\": [0], \"default\": []},"
                "\"e\": {\"dtype\": \"string\", \"default\": \"\"},"
                "\"g\": {\"dtype\": \"float\", \"shape\": [3], \"default\": -2, \"varlen\": false}}}");
    const struct fmt_feature_spec *f = job->features;
    ck_assert_uint_eq(job->nfeatures, 8);
    ck_assert_str_eq(f[0].name, "img");
    ck_assert_int_eq(f[0].dtype, FMT_DTYPE_UINT8);
    ck_assert_int_eq(f[0].rank, 2);
    ck_assert_int_eq(f[0].shape[0], 28);
    ck_assert_int_eq(f[0].shape[1], 28);
    ck_assert_int_eq(f[0].has_default, 1);
    ck_assert_uint_eq(f[0].default_u8, 7);
    ck_assert_str_eq(f[1].name, "f");
    ck_assert_int_eq(f[1].dtype, FMT_DTYPE_FLOAT32);
    ck_assert_int_eq(f[1].has_default, 1);
    ck_assert_float_eq(f[1].default_f32, 0.25f);
    ck_assert_str_eq(f[2].name, "s");
    ck_assert_int_eq(f[2].dtype, FMT_DTYPE_BYTES);
    ck_assert_int_eq(f[2].has_default, 1);
    ck_assert_uint_eq(f[2].default_bytes_len, 3);
    ck_assert_int_eq(memcmp(f[2].default_bytes, "unk", 3), 0);
    ck_assert_str_eq(f[3].name, "tags");
    ck_assert_int_eq(f[3].varlen, 1);
    ck_assert_int_eq(f[3].has_default, 0);
    ck_assert_int_eq(f[3].dtype, FMT_DTYPE_INT64);
    ck_assert_str_eq(f[4].name, "raw");
    ck_assert_int_eq(f[4].varlen, 1);
    ck_assert_int_eq(f[4].dtype, FMT_DTYPE_UINT8);
    ck_assert_str_eq(f[5].name, "n");
    ck_assert_int_eq(f[5].rank, 1);
    ck_assert_int_eq(f[5].shape[0], 0);
    ck_assert_int_eq(f[5].has_default, 1);
    ck_assert_str_eq(f[6].name, "e");
    ck_assert_int_eq(f[6].dtype, FMT_DTYPE_BYTES);
    ck_assert_int_eq(f[6].rank, 0);
    ck_assert_int_eq(f[6].has_default, 1);
    ck_assert_uint_eq(f[6].default_bytes_len, 0);
    ck_assert_str_eq(f[7].name, "g");
    ck_assert_int_eq(f[7].dtype, FMT_DTYPE_FLOAT32);
    ck_assert_int_eq(f[7].varlen, 0);
    ck_assert_float_eq(f[7].default_f32, -2.0f);
    feed_job_free(job);
}
END_TEST

START_TEST(test_syntax_errors)
{
    static const struct {
        const char *text, *want;
    } cases[] = {
        {"{\n  \"name\": \"a\",\n  \"files\": [1,,2]\n}", "%s:3:15: unexpected token near ','"},
        {"", "%s:1:0: '[' or '{' expected near end of file"},
        {"{\"name\": \"a\", \"name\": \"b\"}", "%s:1:20: duplicate object key near '\"name\"'"},
        {"{\"cache_bytes\": 2097152, \"cache_bytes\": 2097152}",
         "%s:1:38: duplicate object key near '\"cache_bytes\"'"},
        {"{\"cache_bytes\": 18446744073709551616}", "%s:1:36: too big integer near '18446744073709551616'"},
        {"{\"epochs\": 1} x", "%s:1:15: end of file expected near 'x'"},
        {"[1]", "%s: a job is one JSON object (got [1])"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct feed_job *job;
        struct sl_error err = {0};
        const char *path;
        char want[SL_ERROR_MSG_MAX];
        ck_assert_int_eq(load_text(&job, cases[i].text, &err, &path), SL_EINVAL);
        snprintf(want, sizeof want, cases[i].want, path);
        ck_assert_str_eq(err.msg, want);
    }
    struct feed_job *job;
    struct sl_error err = {0};
    char want[SL_ERROR_MSG_MAX];
    const char *missing = sl_test_path("missing.json");
    ck_assert_int_eq(feed_job_load(&job, missing, &err), SL_EIO);
    ck_assert_ptr_null(job);
    snprintf(want, sizeof want, "open(%s): No such file or directory", missing);
    ck_assert_str_eq(err.msg, want);
    ck_assert_int_eq(feed_job_load(&job, sl_test_dir(), &err), SL_EIO);
    snprintf(want, sizeof want, "read(%s): Is a directory", sl_test_dir());
    ck_assert_str_eq(err.msg, want);
}
END_TEST

START_TEST(test_overrides)
{
    struct feed_job *job = load_ok(example);
    set_ok(job, "global_batch_size", "512");
    ck_assert_uint_eq(job->global_batch_size, 512);
    set_ok(job, "drop_remainder", "true");
    ck_assert_int_eq(job->drop_remainder, 1);
    set_ok(job, "shard_policy", "hint");
    set_ok(job, "shard_hint", "records");
    ck_assert_int_eq(job->policy, FEED_SHARD_HINT);
    ck_assert_int_eq(job->hint, FEED_HINT_RECORDS);
    set_ok(job, "compression", "GZIP");
    ck_assert_int_eq(job->compression, FMT_COMP_GZIP);
    set_ok(job, "shuffle.seed", "9");
    ck_assert_uint_eq(job->shuffle_seed, 9);
    ck_assert_uint_eq(job->shuffle_buffer, 10000);
    set_ok(job, "files", "a*.tfrecord,b*.tfrecord");
    ck_assert_uint_eq(job->patterns.n, 2);
    ck_assert_str_eq(job->patterns.items[0], "a*.tfrecord");
    ck_assert_str_eq(job->patterns.items[1], "b*.tfrecord");
    set_ok(job, "epochs", "forever");
    ck_assert_uint_eq(job->epochs, 0);
    set_ok(job, "epochs", "5");
    ck_assert_uint_eq(job->epochs, 5);
    set_ok(job, "name", "job-2");
    ck_assert_str_eq(job->name, "job-2");
    set_ok(job, "on_error", "skip-file");
    ck_assert_int_eq(job->on_error, FMT_ON_ERROR_SKIP_FILE);

    /* objects: null is "no shuffle", an object replaces the whole */
    set_ok(job, "shuffle", "null");
    ck_assert_uint_eq(job->shuffle_buffer, 0);
    ck_assert_uint_eq(job->shuffle_seed, 0);
    set_ok(job, "shuffle", "{\"buffer\": 5, \"reshuffle_each_epoch\": false}");
    ck_assert_uint_eq(job->shuffle_buffer, 5);
    ck_assert_int_eq(job->reshuffle_each_epoch, 0);
    set_ok(job, "prefetch", "null");
    ck_assert_uint_eq(job->prefetch, 4);

    /* features: one field, one whole feature, removal, the whole map */
    set_ok(job, "features.label.default", "3");
    ck_assert_int_eq(job->features[1].default_i64, 3);
    set_ok(job, "features.image.shape", "[28,28]");
    ck_assert_int_eq(job->features[0].rank, 2);
    ck_assert_int_eq(job->features[0].shape[1], 28);
    set_ok(job, "features.new", "{\"dtype\": \"float32\", \"shape\": [1], \"default\": 0.5}");
    ck_assert_uint_eq(job->nfeatures, 4);
    ck_assert_str_eq(job->features[3].name, "new");
    ck_assert_float_eq(job->features[3].default_f32, 0.5f);
    set_ok(job, "features.id", "null");
    ck_assert_uint_eq(job->nfeatures, 3);
    ck_assert_str_eq(job->features[2].name, "new");
    set_ok(job, "features.label.dtype", "float32");
    ck_assert_int_eq(job->features[1].dtype, FMT_DTYPE_FLOAT32);
    ck_assert_float_eq(job->features[1].default_f32, 3.0f);
    set_ok(job, "features.label.varlen", "true");
    ck_assert_int_eq(job->features[1].varlen, 1);
    ck_assert_int_eq(job->features[1].has_default, 0);
    set_ok(job, "features", "{\"x\": {\"dtype\": \"bytes\", \"default\": \"?\"}}");
    ck_assert_uint_eq(job->nfeatures, 1);
    ck_assert_str_eq(job->features[0].name, "x");
    ck_assert_uint_eq(job->features[0].default_bytes_len, 1);
    set_ok(job, "features.x.default", "none");
    ck_assert_uint_eq(job->features[0].default_bytes_len, 4);
    ck_assert_int_eq(memcmp(job->features[0].default_bytes, "none", 4), 0);
    feed_job_free(job);
}
END_TEST

START_TEST(test_override_errors)
{
    struct feed_job *job = load_ok(example);
    set_fails(job, "bach_size", "1", "--bach_size: unknown key");
    set_fails(job, "global_batch_size", "-3", "--global_batch_size: must be an integer >= 1 (got -3)");
    set_fails(job, "global_batch_size", "abc", "--global_batch_size: must be an integer >= 1 (got \"abc\")");
    set_fails(job, "global_batch_size", "", "--global_batch_size: must be an integer >= 1 (got \"\")");
    set_fails(job, "drop_remainder", "yes", "--drop_remainder: must be true or false (got \"yes\")");
    set_fails(job, "shard_policy", "fil",
              "--shard_policy: unknown shard policy 'fil' (expected auto, off, file, data or hint)");
    set_fails(job, "epochs", "-1", "--epochs: must be an integer >= 0 or \"forever\" (got -1)");
    set_fails(job, "shuffle.sed", "1", "--shuffle.sed: unknown key");
    set_fails(job, "shuffle", "{\"buffer\": 1, \"sed\": 1}", "--shuffle: unknown key 'shuffle.sed'");
    set_fails(job, "shuffle", "{\"buffer\": 1, \"seed\": -1}",
              "--shuffle: 'shuffle.seed' must be an integer >= 0 (got -1)");
    set_fails(job, "shuffle", "{\"seed\": 1}", "--shuffle: 'shuffle.buffer' is required");
    set_fails(job, "shuffle", "{bad", "--shuffle: not valid JSON: string or '}' expected near 'bad' at column 4");
    set_fails(job, "files", "a,,b",
              "--files: must be a pattern or a non-empty list of patterns (got [\"a\",\"\",\"b\"])");
    set_fails(job, "files", "a,", "--files: must be a pattern or a non-empty list of patterns (got [\"a\",\"\"])");
    set_fails(job, "name", "a b",
              "--name: must be a string of 1 to 64 characters from A-Z a-z 0-9 . _ - (got \"a b\")");
    set_fails(job, "name", "\xff", "--name: not valid UTF-8");
    set_fails(job, "features.image.dtype", "int33",
              "--features.image.dtype: unknown dtype 'int33' (expected int64, float32, bytes or uint8)");
    set_fails(job, "features.image.from", "null",
              "--features.image.from: 'features.image': dtype uint8 requires \"from\": \"bytes\"");
    set_fails(job, "features.nope.dtype", "int64", "--features.nope.dtype: no feature 'nope'");
    set_fails(job, "features.label", "{\"dtype\": \"int64\", \"shap\": []}",
              "--features.label: unknown key 'features.label.shap'");
    set_fails(job, "features.label", "{\"dtype\": \"int64\"",
              "--features.label: not valid JSON: '}' expected near end of file at column 17");
    set_fails(job, "features", "[]", "--features: must be an object of name -> feature (got [])");
    set_fails(job, "features", "{\"a\": {\"dtype\": \"x\"}}",
              "--features: 'features.a.dtype': unknown dtype 'x' (expected int64, float32, bytes or uint8)");

    /* a failed flag leaves the job as it was */
    ck_assert_uint_eq(job->global_batch_size, 256);
    ck_assert_int_eq(job->policy, FEED_SHARD_AUTO);
    ck_assert_uint_eq(job->shuffle_buffer, 10000);
    ck_assert_uint_eq(job->shuffle_seed, 7);
    ck_assert_uint_eq(job->epochs, 3);
    ck_assert_uint_eq(job->patterns.n, 1);
    ck_assert_str_eq(job->name, "fmnist-train");
    ck_assert_uint_eq(job->nfeatures, 3);
    ck_assert_int_eq(job->features[0].dtype, FMT_DTYPE_UINT8);
    ck_assert_int_eq(job->features[1].dtype, FMT_DTYPE_INT64);
    feed_job_free(job);
}
END_TEST

/* A job made from flags alone, then each rule across keys. */
START_TEST(test_validate)
{
    struct feed_job *job;
    struct sl_error err = {0};
    ck_assert_int_eq(feed_job_load(&job, NULL, &err), 0);
    ck_assert_int_eq(feed_job_validate(job, &err), SL_EINVAL);
    ck_assert_str_eq(err.msg, "command line: 'name' is required");
    set_ok(job, "name", "j");
    ck_assert_int_eq(feed_job_validate(job, &err), SL_EINVAL);
    ck_assert_str_eq(err.msg, "command line: 'files' is required");
    set_ok(job, "files", "x.tfrecord");
    ck_assert_int_eq(feed_job_validate(job, &err), SL_EINVAL);
    ck_assert_str_eq(err.msg, "command line: 'global_batch_size' is required");
    set_ok(job, "global_batch_size", "4");
    ck_assert_int_eq(feed_job_validate(job, &err), SL_EINVAL);
    ck_assert_str_eq(err.msg, "command line: 'features' is required with format \"tfrecord\"");
    set_ok(job, "format", "text");
    ck_assert_int_eq(feed_job_validate(job, &err), 0);
    set_ok(job, "format", "tfrecord");
    set_ok(job, "features.x", "{\"dtype\": \"int64\"}");
    ck_assert_int_eq(feed_job_validate(job, &err), 0);
    /* text lines take one scalar bytes feature (or none); tar is not served yet */
    set_ok(job, "format", "text");
    ck_assert_int_eq(feed_job_validate(job, &err), SL_EINVAL);
    ck_assert_str_eq(err.msg, "command line: 'features': format \"text\" takes one scalar bytes feature (each "
                              "line), or none (it is then named \"line\")");
    set_ok(job, "features.x", "{\"dtype\": \"bytes\"}");
    ck_assert_int_eq(feed_job_validate(job, &err), 0);
    set_ok(job, "format", "tar");
    ck_assert_int_eq(feed_job_validate(job, &err), 0); /* x: a scalar bytes field */
    set_ok(job, "features.y", "{\"dtype\": \"int64\", \"varlen\": true}");
    ck_assert_int_eq(feed_job_validate(job, &err), SL_EINVAL);
    ck_assert_str_eq(err.msg, "command line: 'features.y': a tar field is a scalar bytes feature or a fixed-shape "
                              "int64/float32/uint8 one");
    set_ok(job, "features.y", "null");
    set_ok(job, "format", "tfrecord");
    set_ok(job, "features.x", "{\"dtype\": \"int64\"}");

    set_ok(job, "shard_policy", "hint");
    ck_assert_int_eq(feed_job_validate(job, &err), SL_EINVAL);
    ck_assert_str_eq(err.msg, "command line: 'shard_hint' is required with shard_policy \"hint\"");
    set_ok(job, "shard_hint", "batches");
    ck_assert_int_eq(feed_job_validate(job, &err), 0);
    set_ok(job, "shard_policy", "file");
    ck_assert_int_eq(feed_job_validate(job, &err), SL_EINVAL);
    ck_assert_str_eq(err.msg, "command line: 'shard_hint' applies only with shard_policy \"hint\" (got \"file\")");
    set_ok(job, "shard_hint", "null");
    ck_assert_int_eq(feed_job_validate(job, &err), 0);

    /* the cluster shape: both or neither; the last value given wins */
    set_ok(job, "workers", "2");
    ck_assert_int_eq(feed_job_validate(job, &err), SL_EINVAL);
    ck_assert_str_eq(err.msg, "command line: 'workers' and 'replicas' go together (the cluster shape to serve)");
    set_ok(job, "replicas", "4");
    set_ok(job, "replicas", "2");
    ck_assert_int_eq(feed_job_validate(job, &err), 0);
    ck_assert_uint_eq(job->workers, 2);
    ck_assert_uint_eq(job->replicas, 2);

    set_ok(job, "per_replica_input", "true");
    ck_assert_int_eq(feed_job_validate(job, &err), SL_EINVAL);
    ck_assert_str_eq(err.msg, "command line: 'shard_policy' \"file\" does not apply with per_replica_input (the "
                              "input is not auto-sharded; use per_replica_shard)");
    set_ok(job, "shard_policy", "off");
    set_ok(job, "per_replica_shard", "records");
    ck_assert_int_eq(feed_job_validate(job, &err), 0);
    ck_assert_int_eq(job->pr_shard, FEED_PR_SHARD_RECORDS);
    set_ok(job, "per_replica_input", "false");
    ck_assert_int_eq(feed_job_validate(job, &err), SL_EINVAL);
    ck_assert_str_eq(err.msg, "command line: 'per_replica_shard' applies only with per_replica_input true");
    set_ok(job, "per_replica_shard", "none");
    ck_assert_int_eq(feed_job_validate(job, &err), 0);

    /* null takes a required key away again */
    set_ok(job, "global_batch_size", "null");
    ck_assert_int_eq(feed_job_validate(job, &err), SL_EINVAL);
    ck_assert_str_eq(err.msg, "command line: 'global_batch_size' is required");
    feed_job_free(job);

    /* a file's errors name the file */
    const char *path;
    char want[SL_ERROR_MSG_MAX];
    ck_assert_int_eq(load_text(&job, "{\"name\": \"j\"}", &err, &path), 0);
    ck_assert_int_eq(feed_job_validate(job, &err), SL_EINVAL);
    snprintf(want, sizeof want, "%s: 'files' is required", path);
    ck_assert_str_eq(err.msg, want);
    feed_job_free(job);
}
END_TEST

static void touch(const char *name)
{
    sl_test_write(name, "", 0);
}

START_TEST(test_expand_order)
{
    const char *dir = sl_test_dir();
    ck_assert_int_eq(mkdir(sl_test_path("d"), 0700), 0);
    ck_assert_int_eq(mkdir(sl_test_path("d/b-dir.tfrecord"), 0700), 0);
    touch("d/b-1.tfrecord");
    touch("d/b-0.tfrecord");
    touch("d/a-2.tfrecord");
    touch("d/a-10.tfrecord");
    touch("d/B-3.tfrecord");
    char json[1024];
    snprintf(
        json, sizeof json,
        "{\"files\": [\"%s/d/b-*.tfrecord\", \"%s/d/a-*.tfrecord\", \"%s/d/*-[23].tfrecord\", \"%s/d/b-0.tfrecord\"]}",
        dir, dir, dir, dir);
    struct feed_job *job = load_ok(json);
    struct sl_error err = {0};
    ck_assert_int_eq(feed_job_expand(job, &err), 0);
    /* each pattern sorted bytewise ('1' < '2', 'B' < 'a'), patterns in order,
     * directories left out, a file matched twice listed twice */
    static const char *const want[] = {"b-0", "b-1", "a-10", "a-2", "B-3", "a-2", "b-0"};
    ck_assert_uint_eq(job->files.n, 7);
    for (size_t i = 0; i < 7; i++) {
        char path[600];
        snprintf(path, sizeof path, "%s/d/%s.tfrecord", dir, want[i]);
        ck_assert_str_eq(job->files.items[i], path);
    }

    /* relative patterns are relative to the current directory; expanding
     * again replaces the list */
    ck_assert_int_eq(chdir(dir), 0);
    set_ok(job, "files", "d/a-*,d/b-1.tfrecord");
    ck_assert_int_eq(feed_job_expand(job, &err), 0);
    ck_assert_uint_eq(job->files.n, 3);
    ck_assert_str_eq(job->files.items[0], "d/a-10.tfrecord");
    ck_assert_str_eq(job->files.items[1], "d/a-2.tfrecord");
    ck_assert_str_eq(job->files.items[2], "d/b-1.tfrecord");

    /* no match (a directory is not a match): an error, the list kept */
    set_ok(job, "files", "d/a-*,x*.tfrecord");
    ck_assert_int_eq(feed_job_expand(job, &err), SL_EIO);
    ck_assert_str_eq(err.msg, "files: pattern 'x*.tfrecord' matches no file");
    set_ok(job, "files", "d/b-dir*");
    ck_assert_int_eq(feed_job_expand(job, &err), SL_EIO);
    ck_assert_str_eq(err.msg, "files: pattern 'd/b-dir*' matches no file");
    set_ok(job, "files", "d/nothing.tfrecord");
    ck_assert_int_eq(feed_job_expand(job, &err), SL_EIO);
    ck_assert_str_eq(err.msg, "files: pattern 'd/nothing.tfrecord' matches no file");
    ck_assert_uint_eq(job->files.n, 3);
    ck_assert_str_eq(job->files.items[0], "d/a-10.tfrecord");
    feed_job_free(job);
}
END_TEST

/* Where files may live (issue #28): a remote name is one file, as written;
 * an http name with glob characters is refused naming it (http cannot
 * list); an s3 name with them in its key is listed (the listing against a
 * server: tests/integration/test_sto_s3.py; here what is refused before
 * any request); file:// names glob as local paths. */
START_TEST(test_expand_remote)
{
    const char *dir = sl_test_dir();
    ck_assert_int_eq(mkdir(sl_test_path("r"), 0700), 0);
    touch("r/a-1.tfrecord");
    touch("r/a-0.tfrecord");
    char json[2048];
    snprintf(json, sizeof json,
             "{\"files\": [\"http://127.0.0.1:9/x/a.tfrecord\", "
             "\"https://[::1]:8443/b/c.tfrecord?X-Amz-Signature=a*b[1]\", \"s3://bucket/k/0.tfrecord\", "
             "\"file://%s/r/a-*.tfrecord\"]}",
             dir);
    struct feed_job *job = load_ok(json);
    struct sl_error err = {0};
    ck_assert_int_eq(feed_job_expand(job, &err), 0);
    ck_assert_uint_eq(job->files.n, 5);
    ck_assert_str_eq(job->files.items[0], "http://127.0.0.1:9/x/a.tfrecord");
    /* a query's ? * [ and a bracketed IPv6 host are no glob */
    ck_assert_str_eq(job->files.items[1], "https://[::1]:8443/b/c.tfrecord?X-Amz-Signature=a*b[1]");
    ck_assert_str_eq(job->files.items[2], "s3://bucket/k/0.tfrecord");
    char path[600];
    snprintf(path, sizeof path, "%s/r/a-0.tfrecord", dir);
    ck_assert_str_eq(job->files.items[3], path);
    snprintf(path, sizeof path, "%s/r/a-1.tfrecord", dir);
    ck_assert_str_eq(job->files.items[4], path);

    static const struct {
        const char *files, *msg;
    } bad[] = {
        {"http://h/x*.tfrecord", "files: 'http://h/x*.tfrecord': http URLs cannot be globbed; list the files"},
        {"https://h:1/d[01]/x", "files: 'https://h:1/d[01]/x': http URLs cannot be globbed; list the files"},
        {"http://[::1]/*", "files: 'http://[::1]/*': http URLs cannot be globbed; list the files"},
        {"s3://b[12]/k", "files: 's3://b[12]/k': glob characters in an s3 bucket name (only keys are listed)"},
        {"s3://b/k*.tfrecord", "files: s3://b/k*.tfrecord: the bucket name 'b' has 1 characters (S3's: 3 to 63)"},
        {"s3://Bkt/k?.tfrecord",
         "files: s3://Bkt/k?.tfrecord: the bucket name 'Bkt' is not S3's (lower-case letters, digits, '-' and '.', "
         "starting and ending with a letter or digit)"},
        {"s3://bkt/*", "files: s3://bkt/*: no S3 credentials: $AWS_ACCESS_KEY_ID and $AWS_SECRET_ACCESS_KEY are not "
                       "set, and /nonexistent/credentials has no aws_access_key_id and aws_secret_access_key in "
                       "[default] (it cannot be opened)"},
    };
    /* no credentials anywhere: refused before any request */
    const char *unset[] = {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE",
                           "AWS_ENDPOINT_URL",  "AWS_ENDPOINT_URL_S3",   "AWS_REGION",        "AWS_DEFAULT_REGION"};
    for (size_t i = 0; i < sizeof unset / sizeof unset[0]; i++)
        unsetenv(unset[i]);
    setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/credentials", 1);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char files[256];
        snprintf(files, sizeof files, "s3://ok/k,%s", bad[i].files);
        set_ok(job, "files", files);
        ck_assert_int_eq(feed_job_expand(job, &err), SL_EINVAL);
        ck_assert_str_eq(err.msg, bad[i].msg);
        ck_assert_uint_eq(job->files.n, 5); /* the list kept */
    }
    /* a file:// name that matches nothing is named as written */
    snprintf(json, sizeof json, "file://%s/r/none-*", dir);
    set_ok(job, "files", json);
    ck_assert_int_eq(feed_job_expand(job, &err), SL_EIO);
    char want[700];
    snprintf(want, sizeof want, "files: pattern 'file://%s/r/none-*' matches no file", dir);
    ck_assert_str_eq(err.msg, want);

    /* the rule alone */
    const char *local = NULL;
    ck_assert_int_eq(feed_job_pattern("file:///a/b*", "files", &local, &err), FEED_PATTERN_GLOB);
    ck_assert_str_eq(local, "/a/b*");
    ck_assert_int_eq(feed_job_pattern("a/b*", "files", &local, &err), FEED_PATTERN_GLOB);
    ck_assert_str_eq(local, "a/b*");
    ck_assert_int_eq(feed_job_pattern("https://h", "files", &local, &err), FEED_PATTERN_AS_IS);
    ck_assert_ptr_null(local);
    ck_assert_int_eq(feed_job_pattern("s3://bkt/k/0.tfrecord", "files", &local, &err), FEED_PATTERN_AS_IS);
    ck_assert_int_eq(feed_job_pattern("s3://bkt/k/*.tfrecord", "files", &local, &err), FEED_PATTERN_LIST);
    ck_assert_int_eq(feed_job_pattern("s3://bkt/k/[01]", "files", &local, &err), FEED_PATTERN_LIST);
    ck_assert_ptr_null(local);
    unsetenv("AWS_SHARED_CREDENTIALS_FILE");
    feed_job_free(job);
}
END_TEST

/* format arrays: features name their arrays; the rules across keys; the
 * groups (the g-th array of every feature); the JSON round trip */
START_TEST(test_arrays)
{
    const char *dir = sl_test_dir();
    ck_assert_int_eq(mkdir(sl_test_path("arr"), 0700), 0);
    touch("arr/img-1.npy");
    touch("arr/img-0.npy");
    touch("arr/lab-0.idx.gz");
    touch("arr/lab-1.idx.gz");
    char json[2048];
    snprintf(json, sizeof json,
             "{\"name\": \"a\", \"format\": \"arrays\", \"global_batch_size\": 4,"
             " \"features\": {\"image\": {\"dtype\": \"uint8\", \"shape\": [2, 2], \"array\": \"%s/arr/img-*.npy\"},"
             "              \"label\": {\"dtype\": \"int64\", \"array\": [\"%s/arr/lab-*.idx.gz\"]}}}",
             dir, dir);
    struct feed_job *job = load_ok(json);
    struct sl_error err = {0};
    ck_assert_msg(feed_job_validate(job, &err) == 0, "%s", err.msg);
    ck_assert_int_eq(feed_job_expand(job, &err), 0);
    ck_assert_uint_eq(job->files.n, 2);
    ck_assert_uint_eq(job->members.n, 4);
    static const char *const want[] = {"img-0.npy", "lab-0.idx.gz", "img-1.npy", "lab-1.idx.gz"};
    for (size_t i = 0; i < 4; i++) {
        char path[600];
        snprintf(path, sizeof path, "%s/arr/%s", dir, want[i]);
        ck_assert_str_eq(job->members.items[i], path);
    }
    ck_assert_str_eq(job->files.items[1], job->members.items[2]);

    /* AUTO shards arrays as DATA (from_tensor_slices has no file reader);
     * an explicit policy is kept, FILE included (it deals out groups) */
    struct feed_plan_config cfg;
    const uint64_t counts[2] = {10, 20};
    ck_assert_int_eq(feed_job_fill_plan_config(job, counts, 2, 1, &cfg), 0);
    ck_assert_int_eq(cfg.policy, FEED_SHARD_DATA);
    ck_assert_int_eq(cfg.source_is_files, 1);
    set_ok(job, "shard_policy", "file");
    ck_assert_int_eq(feed_job_fill_plan_config(job, counts, 2, 1, &cfg), 0);
    ck_assert_int_eq(cfg.policy, FEED_SHARD_FILE);
    set_ok(job, "shard_policy", "off");
    ck_assert_int_eq(feed_job_fill_plan_config(job, counts, 2, 1, &cfg), 0);
    ck_assert_int_eq(cfg.policy, FEED_SHARD_OFF);
    set_ok(job, "shard_policy", "auto");
    set_ok(job, "per_replica_input", "true");
    ck_assert_int_eq(feed_job_fill_plan_config(job, counts, 2, 1, &cfg), 0);
    ck_assert_int_eq(cfg.policy, FEED_SHARD_AUTO); /* not sharded at all */
    set_ok(job, "per_replica_input", "false");

    /* the effective job loads back to the same groups, with no "files" */
    struct sl_buf out;
    sl_buf_init(&out, 0);
    ck_assert_int_eq(feed_job_to_json(job, 0, &out), 0);
    ck_assert_int_eq(sl_buf_append(&out, "", 1), 0);
    ck_assert_ptr_null(strstr((const char *)out.data, "\"files\""));
    ck_assert_ptr_nonnull(strstr((const char *)out.data, "\"array\""));
    ck_assert_ptr_null(strstr((const char *)out.data, "\"from\""));
    struct feed_job *again = load_ok((const char *)out.data);
    ck_assert_int_eq(feed_job_validate(again, &err), 0);
    ck_assert_int_eq(feed_job_expand(again, &err), 0);
    ck_assert_uint_eq(again->members.n, 4);
    feed_job_free(again);
    sl_buf_free(&out);

    /* a flag changes one feature's arrays; counts must agree */
    char flag[600];
    snprintf(flag, sizeof flag, "%s/arr/lab-0.idx.gz", dir);
    set_ok(job, "features.label.array", flag);
    ck_assert_int_eq(feed_job_expand(job, &err), SL_EINVAL);
    ck_assert_str_eq(err.msg, "features.label.array: 1 arrays, but features.image.array has 2: every feature needs "
                              "one array per group (the g-th of each, in sorted order, make group g)");
    ck_assert_uint_eq(job->members.n, 4); /* kept */
    set_ok(job, "features.label.array", "nothing-*.npy");
    ck_assert_int_eq(feed_job_expand(job, &err), SL_EIO);
    ck_assert_str_eq(err.msg, "features.label.array: pattern 'nothing-*.npy' matches no file");

    /* the rules */
    set_fails(job, "features.label.array", "[]",
              "--features.label.array: must be a pattern or a non-empty list of patterns (got [])");
    set_fails(job, "features.image.from", "bytes",
              "--features.image.from: an array feature takes its values from its array");
    set_ok(job, "features.label.default", "0");
    ck_assert_int_eq(feed_job_validate(job, &err), SL_EINVAL);
    ck_assert_str_eq(strchr(err.msg, ':') ? strstr(err.msg, "job.json: ") : err.msg,
                     "job.json: 'features.label.default': an array feature has a value in every row, no "
                     "default");
    set_ok(job, "features.label.default", "null");
    set_ok(job, "features.label.dtype", "bytes");
    ck_assert_int_eq(feed_job_validate(job, &err), SL_EINVAL);
    ck_assert_str_eq(strchr(err.msg, ':') ? strstr(err.msg, "job.json: ") : err.msg,
                     "job.json: 'features.label': an array fills a fixed-shape int64, float32 or uint8 "
                     "feature");
    set_ok(job, "features.label", "{\"dtype\": \"int64\"}");
    ck_assert_int_eq(feed_job_validate(job, &err), SL_EINVAL);
    ck_assert_str_eq(strchr(err.msg, ':') ? strstr(err.msg, "job.json: ") : err.msg,
                     "job.json: 'features.label.array' is required with format \"arrays\"");
    set_ok(job, "features.label.array", "x.npy");
    set_ok(job, "files", "x.tfrecord");
    ck_assert_int_eq(feed_job_validate(job, &err), SL_EINVAL);
    ck_assert_str_eq(strchr(err.msg, ':') ? strstr(err.msg, "job.json: ") : err.msg,
                     "job.json: 'files' does not apply with format \"arrays\" (each feature names its "
                     "arrays: features.NAME.array)");
    set_ok(job, "format", "tfrecord");
    ck_assert_int_eq(feed_job_validate(job, &err), SL_EINVAL);
    ck_assert_str_eq(strchr(err.msg, ':') ? strstr(err.msg, "job.json: ") : err.msg,
                     "job.json: 'features.image.array' applies only with format \"arrays\"");
    feed_job_free(job);
}
END_TEST

START_TEST(test_plan_config)
{
    touch("p-0.tfrecord");
    touch("p-1.tfrecord");
    char json[1024];
    snprintf(json, sizeof json,
             "{\"name\": \"p\", \"files\": \"%s/p-*.tfrecord\", \"global_batch_size\": 64, \"drop_remainder\": true,"
             " \"shard_policy\": \"hint\", \"shard_hint\": \"batches\", \"shuffle\": {\"buffer\": 100, \"seed\": 5,"
             " \"reshuffle_each_epoch\": false}, \"epochs\": \"forever\", \"parallel_reads\": 3,"
             " \"features\": {\"x\": {\"dtype\": \"int64\"}}}",
             sl_test_dir());
    struct feed_job *job = load_ok(json);
    struct sl_error err = {0};
    struct feed_plan_config cfg;
    const uint64_t counts[2] = {10, 20};
    ck_assert_int_eq(feed_job_fill_plan_config(job, counts, 2, 4, &cfg), SL_EINVAL); /* not expanded */
    ck_assert_int_eq(feed_job_expand(job, &err), 0);
    ck_assert_int_eq(feed_job_fill_plan_config(job, counts, 0, 4, &cfg), SL_EINVAL);
    ck_assert_int_eq(feed_job_fill_plan_config(job, counts, 2, 0, &cfg), SL_EINVAL);
    ck_assert_int_eq(feed_job_fill_plan_config(job, NULL, 2, 4, &cfg), SL_EINVAL);
    ck_assert_int_eq(feed_job_fill_plan_config(job, counts, 2, 4, &cfg), 0);
    ck_assert_uint_eq(cfg.nfiles, 2);
    ck_assert_ptr_eq(cfg.counts, counts);
    ck_assert_int_eq(cfg.source_is_files, 1);
    ck_assert_int_eq(cfg.policy, FEED_SHARD_HINT);
    ck_assert_int_eq(cfg.hint, FEED_HINT_BATCHES);
    ck_assert_uint_eq(cfg.global_batch, 64);
    ck_assert_int_eq(cfg.drop_remainder, 1);
    ck_assert_uint_eq(cfg.shuffle_buffer, 100);
    ck_assert_uint_eq(cfg.seed, 5);
    ck_assert_int_eq(cfg.reshuffle_each_epoch, 0);
    ck_assert_uint_eq(cfg.epochs, 0);
    ck_assert_uint_eq(cfg.parallel_reads, 3);
    ck_assert_int_eq(cfg.per_replica_input, 0);
    ck_assert_int_eq(cfg.pr_shard, FEED_PR_SHARD_NONE);
    ck_assert_uint_eq(cfg.workers, 2);
    ck_assert_uint_eq(cfg.replicas, 4);
    feed_job_free(job);
}
END_TEST

static char *job_json(const struct feed_job *job, int indent)
{
    struct sl_buf b;
    sl_buf_init(&b, 0);
    ck_assert_int_eq(feed_job_to_json(job, indent, &b), 0);
    ck_assert_int_eq(sl_buf_putc(&b, '\0'), 0);
    return (char *)b.data;
}

/* feed_job_key_name lists the key table in order, and every name it gives
 * is one feed_job_set knows (a bad value is refused for its type, never as
 * an unknown key). */
/* cache_bytes: "off" (0) unless given; 1 MiB to 1 TiB; "off" again from
 * a flag, and back to its default with null. */
START_TEST(test_cache_bytes)
{
    struct feed_job *job = load_ok("{\"name\": \"c\", \"files\": [\"x\"], \"global_batch_size\": 4}");
    ck_assert_uint_eq(job->cache_bytes, 0);
    feed_job_free(job);
    job = load_ok("{\"name\": \"c\", \"files\": [\"x\"], \"global_batch_size\": 4, \"cache_bytes\": 1048576}");
    ck_assert_uint_eq(job->cache_bytes, 1048576);
    struct sl_error err = {0};
    ck_assert_int_eq(feed_job_set(job, "cache_bytes", "1099511627776", &err), 0);
    ck_assert_uint_eq(job->cache_bytes, (uint64_t)1 << 40);
    ck_assert_int_eq(feed_job_set(job, "cache_bytes", "off", &err), 0);
    ck_assert_uint_eq(job->cache_bytes, 0);
    ck_assert_int_eq(feed_job_set(job, "cache_bytes", "67108864", &err), 0);
    ck_assert_int_eq(feed_job_set(job, "cache_bytes", "-5", &err), SL_EINVAL);
    ck_assert_str_eq(err.msg, "--cache_bytes: must be an integer >= 1048576 or \"off\" (got -5)");
    ck_assert_uint_eq(job->cache_bytes, 67108864); /* unchanged by the refused value */
    ck_assert_int_eq(feed_job_set(job, "cache_bytes", "null", &err), 0);
    ck_assert_uint_eq(job->cache_bytes, 0);
    feed_job_free(job);
}
END_TEST

START_TEST(test_key_names)
{
    ck_assert_str_eq(feed_job_key_name(0), "name");
    size_t n = 0;
    int seen_seed = 0, seen_inflate = 0;
    struct feed_job *job;
    struct sl_error err = {0};
    ck_assert_int_eq(feed_job_load(&job, NULL, &err), 0);
    for (const char *k; (k = feed_job_key_name(n)) != NULL; n++) {
        seen_seed |= strcmp(k, "shuffle.seed") == 0;
        seen_inflate |= strcmp(k, "inflate_cache_bytes") == 0;
        if (strcmp(k, "features") == 0 || strcmp(k, "shuffle") == 0 || strcmp(k, "files") == 0 ||
            strcmp(k, "name") == 0)
            continue;
        sl_error_clear(&err);
        ck_assert_int_ne(feed_job_set(job, k, "\x01 not a value", &err), 0);
        ck_assert_msg(strstr(err.msg, "unknown key") == NULL, "%s: %s", k, err.msg);
    }
    feed_job_free(job);
    ck_assert(seen_seed && seen_inflate);
    ck_assert_uint_ge(n, 20);
    ck_assert_ptr_null(feed_job_key_name(n));
    ck_assert_ptr_null(feed_job_key_name((size_t)-1));
}
END_TEST

START_TEST(test_to_json)
{
    struct feed_job *job;
    struct sl_error err = {0};
    ck_assert_int_eq(feed_job_load(&job, NULL, &err), 0);
    set_ok(job, "name", "t");
    set_ok(job, "files", "a*,b*");
    set_ok(job, "global_batch_size", "32");
    set_ok(job, "features.x", "{\"dtype\": \"float32\", \"shape\": [2], \"default\": 0.1}");
    set_ok(job, "features.s", "{\"dtype\": \"bytes\", \"default\": \"q\\\"\"}");
    set_ok(job, "features.v", "{\"dtype\": \"uint8\", \"from\": \"bytes\", \"varlen\": true}");
    char *s = job_json(job, 0);
    ck_assert_str_eq(
        s,
        "{\"name\": \"t\", \"files\": [\"a*\", \"b*\"], \"format\": \"tfrecord\", "
        "\"compression\": \"auto\", \"features\": {\"x\": {\"dtype\": \"float32\", \"shape\": [2], "
        "\"default\": 0.1}, \"s\": {\"dtype\": \"bytes\", \"shape\": [], \"default\": \"q\\\"\"}, "
        "\"v\": {\"dtype\": \"uint8\", \"varlen\": true, \"from\": \"bytes\"}}, "
        "\"shard_policy\": \"auto\", \"global_batch_size\": 32, \"drop_remainder\": false, "
        "\"shuffle\": {\"buffer\": 0, \"seed\": 0, \"reshuffle_each_epoch\": true}, \"epochs\": 1, "
        "\"parallel_reads\": 1, \"per_replica_input\": false, \"per_replica_shard\": \"none\", "
        "\"prefetch\": 4, \"on_error\": \"fail\", \"max_record_bytes\": 67108864, \"inflate_cache_bytes\": 1073741824, "
        "\"cache_bytes\": \"off\", "
        "\"verify_on_read\": true, \"use_index\": false}");
    free(s);
    feed_job_free(job);

    /* the example: written, loaded back, written again: the same text and values */
    job = load_ok(example);
    set_ok(job, "epochs", "forever");
    set_ok(job, "shard_policy", "hint");
    set_ok(job, "shard_hint", "records");
    set_ok(job, "features.f", "{\"dtype\": \"float32\", \"default\": 3.4028234e38}");
    s = job_json(job, 2);
    ck_assert_ptr_nonnull(strstr(s, "\n  \"epochs\": \"forever\",\n"));
    ck_assert_ptr_nonnull(strstr(s, "\n  \"shard_hint\": \"records\",\n"));
    struct feed_job *again = load_ok(s);
    char *s2 = job_json(again, 2);
    ck_assert_str_eq(s, s2);
    ck_assert_uint_eq(again->epochs, 0);
    ck_assert_int_eq(again->hint, FEED_HINT_RECORDS);
    ck_assert_float_eq(again->features[3].default_f32, 3.4028234e38f);
    ck_assert_int_eq(feed_job_validate(again, &err), 0);
    free(s);
    free(s2);
    feed_job_free(again);
    feed_job_free(job);
}
END_TEST

/* Every allocation in turn fails: SL_ENOMEM, nothing half-made, no leak
 * (the ASan build checks the last). */
START_TEST(test_alloc_failures)
{
    const char *path = sl_test_write("job.json", example, strlen(example));
    int failed = 0;
    for (long n = 1;; n++) {
        struct feed_job *job = (struct feed_job *)1;
        struct sl_error err = {0};
        sl_alloc_fail_after(n);
        int rc = feed_job_load(&job, path, &err);
        sl_alloc_fail_reset();
        if (rc == 0) {
            feed_job_free(job);
            break;
        }
        ck_assert_int_eq(rc, SL_ENOMEM);
        ck_assert_int_eq(err.code, SL_ENOMEM);
        ck_assert_ptr_null(job);
        failed++;
    }
    ck_assert_int_gt(failed, 5);

    touch("m-0.tfrecord");
    touch("m-1.tfrecord");
    char pattern[600];
    snprintf(pattern, sizeof pattern, "%s/m-*.tfrecord,%s/m-1.tfrecord", sl_test_dir(), sl_test_dir());
    static const char *const flags[][2] = {
        {"name", "other"},
        {"features.label.default", "5"},
        {"features.s", "{\"dtype\": \"bytes\", \"default\": \"abc\"}"},
        {"shuffle", "{\"buffer\": 3}"},
        {"files", NULL},
    };
    for (size_t f = 0; f < sizeof flags / sizeof flags[0]; f++) {
        const char *value = flags[f][1] ? flags[f][1] : pattern;
        for (long n = 1;; n++) {
            struct feed_job *job = load_ok(example);
            struct sl_error err = {0};
            sl_alloc_fail_after(n);
            int rc = feed_job_set(job, flags[f][0], value, &err);
            sl_alloc_fail_reset();
            if (rc != 0) {
                ck_assert_int_eq(rc, SL_ENOMEM);
                ck_assert_str_eq(job->name, "fmnist-train");
                ck_assert_uint_eq(job->nfeatures, 3);
                ck_assert_int_eq(job->features[1].default_i64, 0);
                ck_assert_uint_eq(job->patterns.n, 1);
            }
            feed_job_free(job);
            if (rc == 0)
                break;
        }
    }

    for (long n = 1;; n++) {
        struct feed_job *job = load_ok(example);
        struct sl_error err = {0};
        set_ok(job, "files", pattern);
        sl_alloc_fail_after(n);
        int rc = feed_job_expand(job, &err);
        sl_alloc_fail_reset();
        if (rc == 0) {
            ck_assert_uint_eq(job->files.n, 3);
        } else {
            ck_assert_int_eq(rc, SL_ENOMEM);
            ck_assert_str_eq(err.msg, "files: out of memory");
            ck_assert_uint_eq(job->files.n, 0);
        }
        feed_job_free(job);
        if (rc == 0)
            break;
    }

    struct feed_job *job = load_ok(example);
    struct sl_buf b;
    sl_buf_init(&b, 0);
    sl_alloc_fail_after(1);
    ck_assert_int_eq(feed_job_to_json(job, 0, &b), SL_ENOMEM);
    sl_alloc_fail_reset();
    ck_assert_uint_eq(b.len, 0);
    sl_buf_free(&b);
    sl_buf_init(&b, 64);
    ck_assert_int_eq(feed_job_to_json(job, 0, &b), SL_EINVAL);
    ck_assert_uint_eq(b.len, 0);
    sl_buf_free(&b);
    feed_job_free(job);
}
END_TEST

Suite *sl_test_suite(void)
{
    Suite *s = suite_create("feed_job");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_example_loads);
    tcase_add_test(tc, test_expand_remote);
    tcase_add_test(tc, test_defaults);
    tcase_add_test(tc, test_bad_values);
    tcase_add_test(tc, test_feature_errors);
    tcase_add_test(tc, test_features_parse);
    tcase_add_test(tc, test_syntax_errors);
    tcase_add_test(tc, test_overrides);
    tcase_add_test(tc, test_override_errors);
    tcase_add_test(tc, test_validate);
    tcase_add_test(tc, test_expand_order);
    tcase_add_test(tc, test_plan_config);
    tcase_add_test(tc, test_to_json);
    tcase_add_test(tc, test_arrays);
    tcase_add_test(tc, test_key_names);
    tcase_add_test(tc, test_cache_bytes);
    tcase_add_test(tc, test_alloc_failures);
    suite_add_tcase(s, tc);
    return s;
}
