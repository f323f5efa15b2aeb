/* What a job may declare, asked of its format (fmt_job.h): each format's
 * rules with their exact bare messages, hostile values (a format that is no
 * format, too many features, no way to ask about arrays), the names lists
 * the feeder's messages quote against the parsers, the framing limits and
 * the tar keeper's bounds in the tables. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "fmt_features.h"
#include "fmt_files.h"
#include "fmt_format.h"
#include "fmt_job.h"
#include "sl_test.h"

static int all_arrays(const void *ctx, size_t i)
{
    (void)ctx;
    (void)i;
    return 1;
}

static int only_second(const void *ctx, size_t i)
{
    (void)ctx;
    return i == 1;
}

static struct fmt_feature_spec spec(const char *name, enum fmt_dtype t, int rank, int varlen)
{
    struct fmt_feature_spec s = {.dtype = t, .rank = rank, .varlen = varlen};
    snprintf(s.name, sizeof s.name, "%s", name);
    for (int i = 0; i < rank; i++)
        s.shape[i] = 2;
    return s;
}

/* The message for one step, "" when the step passes. */
static const char *check(enum fmt_format f, enum fmt_job_step step, const struct fmt_job_input *in)
{
    static struct sl_error err;
    memset(&err, 0, sizeof err);
    int rc = fmt_format_check_job(f, step, in, &err);
    ck_assert_int_eq(rc, rc == 0 ? 0 : SL_EINVAL);
    return rc == 0 ? "" : err.msg;
}

START_TEST(test_record_formats)
{
    struct fmt_feature_spec two[2] = {spec("a", FMT_DTYPE_BYTES, 0, 0), spec("b", FMT_DTYPE_INT64, 1, 0)};
    struct fmt_job_input none = {.files_given = 1};
    struct fmt_job_input both = {.files_given = 1, .features = two, .nfeatures = 2};
    ck_assert_str_eq(check(FMT_FORMAT_TFRECORD, FMT_JOB_FEATURES, &none),
                     "'features' is required with format \"tfrecord\"");
    ck_assert_str_eq(check(FMT_FORMAT_TFRECORD, FMT_JOB_FEATURES, &both), "");
    ck_assert_str_eq(check(FMT_FORMAT_TEXT, FMT_JOB_FEATURES, &none), "");
    ck_assert_str_eq(check(FMT_FORMAT_TEXT, FMT_JOB_FEATURES, &both),
                     "'features': format \"text\" takes one scalar bytes feature (each line), or none (it is then "
                     "named \"line\")");
    struct fmt_job_input one = {.files_given = 1, .features = two, .nfeatures = 1};
    ck_assert_str_eq(check(FMT_FORMAT_TEXT, FMT_JOB_FEATURES, &one), "");
    ck_assert_str_eq(check(FMT_FORMAT_TAR, FMT_JOB_FEATURES, &none),
                     "'features' is required with format \"tar\" (one per field extension)");
    ck_assert_str_eq(check(FMT_FORMAT_TAR, FMT_JOB_FEATURES, &both), "");
    struct fmt_feature_spec ragged[2] = {spec("a", FMT_DTYPE_BYTES, 0, 0), spec("y", FMT_DTYPE_INT64, 0, 1)};
    struct fmt_job_input r = {.files_given = 1, .features = ragged, .nfeatures = 2};
    ck_assert_str_eq(check(FMT_FORMAT_TAR, FMT_JOB_FEATURES, &r),
                     "'features.y': a tar field is a scalar bytes feature or a fixed-shape int64/float32/uint8 one");
    /* formats that read 'files' take no arrays: the first feature naming some is named */
    struct fmt_job_input arr = {.files_given = 1, .features = two, .nfeatures = 2, .names_arrays = only_second};
    for (enum fmt_format f = FMT_FORMAT_TFRECORD; f <= FMT_FORMAT_TAR; f++) {
        ck_assert_str_eq(check(f, FMT_JOB_INPUT, &arr), "'features.b.array' applies only with format \"arrays\"");
        ck_assert_str_eq(check(f, FMT_JOB_INPUT, &both), ""); /* no way to ask: none does */
        ck_assert_int_eq(fmt_format_reads_files(f), 1);
    }
}
END_TEST

START_TEST(test_arrays)
{
    static struct fmt_feature_spec many[FMT_MAX_FIELDS + 1];
    for (size_t i = 0; i < FMT_MAX_FIELDS + 1; i++) {
        char name[16];
        snprintf(name, sizeof name, "f%zu", i);
        many[i] = spec(name, FMT_DTYPE_FLOAT32, 1, 0);
    }
    struct fmt_job_input in = {.features = many, .nfeatures = 2, .names_arrays = all_arrays};
    ck_assert_int_eq(fmt_format_reads_files(FMT_FORMAT_ARRAYS), 0);
    ck_assert_str_eq(check(FMT_FORMAT_ARRAYS, FMT_JOB_INPUT, &in), "");
    ck_assert_str_eq(check(FMT_FORMAT_ARRAYS, FMT_JOB_FEATURES, &in), "");
    in.files_given = 1;
    ck_assert_str_eq(check(FMT_FORMAT_ARRAYS, FMT_JOB_INPUT, &in),
                     "'files' does not apply with format \"arrays\" (each feature names its arrays: "
                     "features.NAME.array)");
    in.files_given = 0;
    in.nfeatures = 0;
    ck_assert_str_eq(check(FMT_FORMAT_ARRAYS, FMT_JOB_INPUT, &in),
                     "'features' is required with format \"arrays\" (one per array)");
    in.nfeatures = 2;
    in.names_arrays = only_second;
    ck_assert_str_eq(check(FMT_FORMAT_ARRAYS, FMT_JOB_INPUT, &in),
                     "'features.f0.array' is required with format \"arrays\"");
    in.names_arrays = NULL; /* no way to ask: none names arrays */
    ck_assert_str_eq(check(FMT_FORMAT_ARRAYS, FMT_JOB_INPUT, &in),
                     "'features.f0.array' is required with format \"arrays\"");
    in.names_arrays = all_arrays;
    many[1].dtype = FMT_DTYPE_BYTES;
    ck_assert_str_eq(check(FMT_FORMAT_ARRAYS, FMT_JOB_INPUT, &in),
                     "'features.f1': an array fills a fixed-shape int64, float32 or uint8 feature");
    many[1] = spec("f1", FMT_DTYPE_INT64, 0, 1);
    ck_assert_str_eq(check(FMT_FORMAT_ARRAYS, FMT_JOB_INPUT, &in),
                     "'features.f1': an array fills a fixed-shape int64, float32 or uint8 feature");
    many[1] = spec("f1", FMT_DTYPE_INT64, 0, 0);
    many[1].has_default = 1;
    ck_assert_str_eq(check(FMT_FORMAT_ARRAYS, FMT_JOB_INPUT, &in),
                     "'features.f1.default': an array feature has a value in every row, no default");
    many[1].has_default = 0;
    in.nfeatures = FMT_MAX_FIELDS;
    ck_assert_str_eq(check(FMT_FORMAT_ARRAYS, FMT_JOB_INPUT, &in), "");
    in.nfeatures = FMT_MAX_FIELDS + 1;
    ck_assert_str_eq(check(FMT_FORMAT_ARRAYS, FMT_JOB_INPUT, &in), "'features': at most 64 arrays a group");
}
END_TEST

START_TEST(test_no_such_format)
{
    struct fmt_job_input in = {0};
    const int bogus[] = {-1, 4, 99, INT32_MAX};
    for (size_t i = 0; i < sizeof bogus / sizeof bogus[0]; i++) {
        struct sl_error err = {0};
        ck_assert_int_eq(fmt_format_check_job((enum fmt_format)bogus[i], FMT_JOB_INPUT, &in, &err), SL_EINVAL);
        char want[64];
        snprintf(want, sizeof want, "'format': not a format (%d)", bogus[i]);
        ck_assert_str_eq(err.msg, want);
        ck_assert_int_eq(fmt_format_check_job((enum fmt_format)bogus[i], FMT_JOB_FEATURES, &in, NULL), SL_EINVAL);
        ck_assert_int_eq(fmt_format_reads_files((enum fmt_format)bogus[i]), 0);
    }
}
END_TEST

/* "a, b or c": every name parses, and there are `n` of them. */
static void names_parse(const char *list, size_t n, int (*parse)(const char *))
{
    char buf[256];
    snprintf(buf, sizeof buf, "%s", list);
    size_t k = 0;
    for (char *save = NULL, *t = strtok_r(buf, ", ", &save); t != NULL; t = strtok_r(NULL, ", ", &save)) {
        if (strcmp(t, "or") == 0)
            continue;
        ck_assert_msg(parse(t) == 0, "'%s' of \"%s\" does not parse", t, list);
        k++;
    }
    ck_assert_uint_eq(k, n);
}

static int parse_format(const char *s)
{
    enum fmt_format f;
    return fmt_format_parse(s, &f) != 0 || strcmp(fmt_format_name(f), s) != 0;
}
static int parse_comp(const char *s)
{
    enum fmt_compression c;
    return fmt_compression_parse(s, &c) != 0 || strcmp(fmt_compression_name(c), s) != 0;
}
static int parse_dtype(const char *s)
{
    enum fmt_dtype t;
    return fmt_dtype_parse(s, &t) != 0 || strcmp(fmt_dtype_name(t), s) != 0;
}
static int parse_on_error(const char *s)
{
    enum fmt_on_error p;
    return fmt_on_error_parse(s, &p) != 0 || strcmp(fmt_on_error_name(p), s) != 0;
}

START_TEST(test_names_lists)
{
    names_parse(FMT_FORMAT_NAMES, 4, parse_format);
    ck_assert_ptr_null(fmt_format_get((enum fmt_format)4));
    names_parse(FMT_COMPRESSION_NAMES, 4, parse_comp);
    names_parse(FMT_DTYPE_NAMES, 4, parse_dtype);
    names_parse(FMT_ON_ERROR_NAMES, 2, parse_on_error);
}
END_TEST

START_TEST(test_framing_limits)
{
    const struct fmt_format_ops *tfr = fmt_format_get(FMT_FORMAT_TFRECORD), *text = fmt_format_get(FMT_FORMAT_TEXT);
    ck_assert_uint_eq(tfr->frame_head, 12);
    ck_assert_uint_eq(tfr->frame_tail, 4);
    ck_assert_uint_eq(text->frame_head, 0);
    ck_assert_uint_eq(text->frame_tail, 1);
    /* formats with their own reader have no framing for the loop */
    for (enum fmt_format f = FMT_FORMAT_TAR; f <= FMT_FORMAT_ARRAYS; f++) {
        ck_assert(fmt_format_get(f)->next == NULL);
        ck_assert_uint_eq(fmt_format_get(f)->frame_head + fmt_format_get(f)->frame_tail, 0);
    }
}
END_TEST

/* The tar keeper's bounds: what a hostile cache header may claim. */
START_TEST(test_tar_keep_layout)
{
    const struct fmt_scan_keep *k = fmt_format_get(FMT_FORMAT_TAR)->keep;
    ck_assert_ptr_nonnull(k);
    for (enum fmt_format f = FMT_FORMAT_TFRECORD; f <= FMT_FORMAT_ARRAYS; f++)
        ck_assert(f == FMT_FORMAT_TAR || fmt_format_get(f)->keep == NULL);
    struct fmt_scan_block b[FMT_SCAN_MAX_BLOCKS];
    struct fmt_scan_extra x = {.nparts = 3 * FMT_MAX_FIELDS, .nnames = FMT__MAX_NAMES};
    ck_assert_int_eq(k->layout(&x, 3, b), 3);
    ck_assert_uint_eq(b[0].n, 4);
    ck_assert_uint_eq(b[0].each, 8);
    ck_assert_uint_eq(b[1].n, 3 * FMT_MAX_FIELDS);
    ck_assert_uint_eq(b[1].each, 24);
    ck_assert_uint_eq(b[2].n, FMT__MAX_NAMES);
    ck_assert_uint_eq(b[2].each, FMT__MAX_NAME_LEN);
    const struct {
        uint64_t nparts, count;
        uint32_t nnames;
    } hostile[] = {
        {3 * FMT_MAX_FIELDS + 1, 3, 1}, /* more parts than samples can hold */
        {1, 0, 1},                      /* parts without samples */
        {UINT64_MAX, 3, 1},
        {UINT64_MAX, UINT64_MAX / FMT_MAX_FIELDS, 1},
        {1, 3, FMT__MAX_NAMES + 1},
        {1, 3, UINT32_MAX},
    };
    for (size_t i = 0; i < sizeof hostile / sizeof hostile[0]; i++) {
        x = (struct fmt_scan_extra){.nparts = hostile[i].nparts, .nnames = hostile[i].nnames};
        ck_assert_msg(k->layout(&x, hostile[i].count, b) == -1, "case %zu", i);
    }
}
END_TEST

Suite *sl_test_suite(void)
{
    Suite *s = suite_create("fmt_job");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_record_formats);
    tcase_add_test(tc, test_arrays);
    tcase_add_test(tc, test_no_such_format);
    tcase_add_test(tc, test_names_lists);
    tcase_add_test(tc, test_framing_limits);
    tcase_add_test(tc, test_tar_keep_layout);
    suite_add_tcase(s, tc);
    return s;
}
