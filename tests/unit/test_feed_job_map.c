/* feed_job's 'map' key (docs/map.md): loaded and checked with the job's
 * messages, written back with its defaults, set by a flag, checked against
 * the features by feed_job_validate, a plugin found beside the job file,
 * and the features leaving the map. Every message is compared whole. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "feed_job.h"
#include "feed_job_map.h"
#include "sl_alloc.h"
#include "sl_test.h"

#define HEAD                                                                                                 \
    "{\"name\": \"m\", \"files\": [\"x.tfrecord\"], \"global_batch_size\": 4,\n"                             \
    " \"features\": {\"image\": {\"dtype\": \"bytes\"}, \"label\": {\"dtype\": \"int64\", \"shape\": []},\n" \
    "              \"tokens\": {\"dtype\": \"int64\", \"varlen\": true}},\n"

/* Load and validate `text` as job.json; the message ("" when it passes). */
static const char *check(const char *text)
{
    static char msg[2048];
    struct feed_job *job = NULL;
    struct sl_error err = {0};
    const char *path = sl_test_write("job.json", text, strlen(text));
    int rc = feed_job_load(&job, path, &err);
    if (rc == 0)
        rc = feed_job_validate(job, &err);
    feed_job_free(job);
    if (rc == 0)
        return "";
    ck_assert_int_eq(rc, SL_EINVAL);
    /* the path varies: keep what follows it */
    const char *p = strstr(err.msg, "job.json");
    snprintf(msg, sizeof msg, "%s", p ? p : err.msg);
    return msg;
}

START_TEST(test_load_errors)
{
    static const char *const cases[][2] = {
        {HEAD "\"map\": [{\"op\": \"one_hot\", \"feature\": \"label\", \"depth\": 3},"
              " {\"op\": \"cast\", \"feature\": \"label\", \"dtype\": \"int64\"},"
              " {\"op\": \"resize\", \"feature\": \"image\", \"size\": [0, 224]}]}",
         "job.json: 'map[2].size' must be two integers from 1 to 65536 (got [0, 224])"},
        {HEAD "\"map\": [{\"op\": \"cast\", \"feature\": \"label\", \"dtype\": \"int64\", \"x\": 1}]}",
         "job.json: unknown key 'map[0].x'"},
        {HEAD "\"map\": {\"op\": \"cast\"}}",
         "job.json: 'map' must be a list of at most 64 ops (got {\"op\": \"cast\"})"},
        {HEAD "\"map\": [{\"op\": \"one_hot\", \"feature\": \"lable\", \"depth\": 3}]}",
         "job.json: 'map[0].feature': no feature 'lable' (the job's features and the masks of earlier ops)"},
        {HEAD "\"map\": [{\"op\": \"decode_image\", \"feature\": \"image\"}, {\"op\": \"resize\", \"feature\": "
              "\"image\", \"size\": [8, 8]}]}",
         ""},
        {HEAD "\"map\": [{\"op\": \"cast\", \"feature\": \"tokens\", \"dtype\": \"float32\"}]}",
         "job.json: 'map[0].feature': cast takes a fixed-shape feature; 'tokens' is variable-length: "
         "pad_or_truncate it first"},
        {HEAD "\"map\": [{\"op\": \"one_hot\", \"feature\": \"label\", \"depth\": 3}]}", ""},
        {HEAD "\"map\": []}", ""},
        {HEAD "\"map\": null}", ""},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        ck_assert_msg(strcmp(check(cases[i][0]), cases[i][1]) == 0, "%s\n  got  %s\n  want %s", cases[i][0],
                      check(cases[i][0]), cases[i][1]);
}
END_TEST

START_TEST(test_to_json_and_flag)
{
    const char *text =
        HEAD "\"map\": [{\"op\": \"one_hot\", \"feature\": \"label\", \"depth\": 3},"
             " {\"op\": \"pad_or_truncate\", \"feature\": \"tokens\", \"length\": 2, \"mask\": \"mk\"}]}";
    const char *path = sl_test_write("job.json", text, strlen(text));
    struct feed_job *job;
    struct sl_error err = {0};
    ck_assert_int_eq(feed_job_load(&job, path, &err), 0);
    struct sl_buf b;
    sl_buf_init(&b, 1 << 20);
    ck_assert_int_eq(feed_job_to_json(job, 0, &b), 0);
    ck_assert_int_eq(sl_buf_append(&b, "", 1), 0);
    const char *map = strstr((const char *)b.data, "\"map\"");
    ck_assert_ptr_nonnull(map);
    ck_assert_msg(
        strncmp(map,
                "\"map\": [{\"op\": \"one_hot\", \"feature\": \"label\", \"depth\": 3}, {\"op\": "
                "\"pad_or_truncate\", \"feature\": \"tokens\", \"length\": 2, \"mask\": \"mk\", \"pad\": 0.0, "
                "\"mask_dtype\": \"uint8\"}]",
                strlen("\"map\": [{\"op\": \"one_hot\", \"feature\": \"label\", \"depth\": 3}, {\"op\": "
                       "\"pad_or_truncate\", \"feature\": \"tokens\", \"length\": 2, \"mask\": \"mk\", "
                       "\"pad\": 0.0, \"mask_dtype\": \"uint8\"}]")) == 0,
        "%s", map);
    /* written back, it loads to the same JSON */
    const char *again = sl_test_write("again.json", b.data, b.len - 1);
    struct feed_job *job2;
    ck_assert_int_eq(feed_job_load(&job2, again, &err), 0);
    struct sl_buf b2;
    sl_buf_init(&b2, 1 << 20);
    ck_assert_int_eq(feed_job_to_json(job2, 0, &b2), 0);
    ck_assert_int_eq(sl_buf_append(&b2, "", 1), 0);
    ck_assert_str_eq((const char *)b.data, (const char *)b2.data);
    feed_job_free(job2);
    sl_buf_free(&b2);

    /* a flag replaces the map; null removes it (and the key is written no more) */
    ck_assert_int_eq(
        feed_job_set(job, "map", "[{\"op\": \"cast\", \"feature\": \"label\", \"dtype\": \"uint8\"}]", &err), 0);
    ck_assert_uint_eq(map_pipeline_nops(job->map), 1);
    ck_assert_int_ne(feed_job_set(job, "map", "[{\"op\": \"cast\", \"feature\": \"label\"}]", &err), 0);
    ck_assert_str_eq(err.msg, "--map: 'map[0].dtype' is required (int64, float32, uint8, float16 or bfloat16)");
    ck_assert_uint_eq(map_pipeline_nops(job->map), 1); /* as before the failed flag */
    ck_assert_int_ne(feed_job_set(job, "map", "[", &err), 0);
    ck_assert_str_eq(err.msg, "--map: not valid JSON: ']' expected near end of file at column 1");
    ck_assert_int_eq(feed_job_set(job, "map", "null", &err), 0);
    ck_assert_ptr_null(job->map);
    b.len = 0;
    ck_assert_int_eq(feed_job_to_json(job, 0, &b), 0);
    ck_assert_int_eq(sl_buf_append(&b, "", 1), 0);
    ck_assert_ptr_null(strstr((const char *)b.data, "\"map\""));
    sl_buf_free(&b);
    feed_job_free(job);
}
END_TEST

START_TEST(test_out_specs)
{
    const char *text = HEAD "\"map\": [{\"op\": \"one_hot\", \"feature\": \"label\", \"depth\": 3},"
                            " {\"op\": \"pad_or_truncate\", \"feature\": \"tokens\", \"length\": 2, \"mask\": \"mk\", "
                            "\"mask_dtype\": \"int64\"}]}";
    const char *path = sl_test_write("job.json", text, strlen(text));
    struct feed_job *job;
    struct sl_error err = {0};
    ck_assert_int_eq(feed_job_load(&job, path, &err), 0);
    struct map_plan *plan;
    ck_assert_int_eq(feed_job_map_plan(job, 0, &plan, &err), 0);
    struct fmt_feature_spec *out;
    size_t n;
    ck_assert_int_eq(feed_map_out_specs(plan, job->features, job->nfeatures, &out, &n), 0);
    ck_assert_uint_eq(n, 4);
    ck_assert_str_eq(out[0].name, "image"); /* untouched: as declared */
    ck_assert_int_eq(out[0].dtype, FMT_DTYPE_BYTES);
    ck_assert_str_eq(out[1].name, "label");
    ck_assert_int_eq(out[1].dtype, FMT_DTYPE_FLOAT32);
    ck_assert_int_eq(out[1].rank, 1);
    ck_assert_int_eq(out[1].shape[0], 3);
    ck_assert_int_eq(out[2].dtype, FMT_DTYPE_INT64);
    ck_assert_int_eq(out[2].varlen, 0);
    ck_assert_int_eq(out[2].shape[0], 2);
    ck_assert_str_eq(out[3].name, "mk");
    ck_assert_int_eq(out[3].dtype, FMT_DTYPE_INT64);
    sl_free(out);
    map_plan_destroy(plan);
    /* an empty map is no map: the pieces are as without one */
    ck_assert_int_eq(feed_job_set(job, "map", "[]", &err), 0);
    plan = (struct map_plan *)1;
    ck_assert_int_eq(feed_job_map_plan(job, 0, &plan, &err), 0);
    ck_assert_ptr_null(plan);
    feed_job_free(job);
}
END_TEST

/* A relative plugin path is the job file's directory's. */
START_TEST(test_plugin_beside_job)
{
    size_t len;
    uint8_t *so = sl_test_read(SL_SCALE_PLUGIN, &len);
    ck_assert_ptr_nonnull(so);
    sl_test_write("libscale.so", so, len);
    free(so);
    const char *text = HEAD "\"map\": [{\"op\": \"plugin\", \"feature\": \"label\", \"path\": \"libscale.so\", "
                            "\"args\": {\"scale\": 3}}]}";
    ck_assert_str_eq(check(text), "");
    const char *bad = HEAD "\"map\": [{\"op\": \"plugin\", \"feature\": \"label\", \"path\": \"libnone.so\"}]}";
    char want[1024];
    snprintf(want, sizeof want,
             "job.json: 'map[0].path': cannot load plugin %s/libnone.so: %s/libnone.so: cannot open "
             "shared object file: No such file or directory",
             sl_test_dir(), sl_test_dir());
    ck_assert_str_eq(check(bad), want);
}
END_TEST

Suite *sl_test_suite(void)
{
    Suite *s = suite_create("feed_job_map");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_load_errors);
    tcase_add_test(tc, test_to_json_and_flag);
    tcase_add_test(tc, test_out_specs);
    tcase_add_test(tc, test_plugin_beside_job);
    suite_add_tcase(s, tc);
    return s;
}
