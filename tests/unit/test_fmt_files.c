/* fmt_files: the data-error policy over a file list. Under FAIL the first
 * error ends the stream; under SKIP_FILE the records before the damage are
 * kept, the rest of that file is skipped and reported, and reading goes on
 * (tf.data's ignore_errors()); a dropped partial header is reported. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fmt_files.h"
#include "fmt_tfrecord.h"
#include "sl_test.h"

static const char *write_file(const char *name, const char *const *recs, size_t n, size_t cut_tail, int corrupt_last)
{
    const char *path = sl_test_path(name);
    struct fmt_tfrecord_writer *w;
    struct sl_error err = {0};
    ck_assert_int_eq(fmt_tfrecord_writer_open(&w, path, FMT_COMP_NONE, -1, &err), 0);
    for (size_t i = 0; i < n; i++)
        ck_assert_int_eq(fmt_tfrecord_writer_write(w, recs[i], strlen(recs[i]), &err), 0);
    ck_assert_int_eq(fmt_tfrecord_writer_close(w, &err), 0);
    size_t len;
    uint8_t *bytes = sl_test_read(path, &len);
    if (corrupt_last)
        bytes[len - 5] ^= 1; /* last data byte */
    sl_test_write(name, bytes, len);
    if (cut_tail) {
        FILE *f = fopen(path, "ab");
        fwrite("\x05\x00\x00", 1, cut_tail, f);
        fclose(f);
    }
    free(bytes);
    return path;
}

struct log {
    char lines[8][1200];
    int n;
};

static void on_skip(void *ctx, size_t file, const struct sl_error *err)
{
    struct log *l = ctx;
    snprintf(l->lines[l->n++], sizeof l->lines[0], "skip %zu: %s", file, err->msg);
}

static void on_tail(void *ctx, size_t file, const char *path, uint64_t bytes)
{
    struct log *l = ctx;
    snprintf(l->lines[l->n++], sizeof l->lines[0], "tail %zu: %llu", file, (unsigned long long)bytes);
    (void)path;
}

static const char *paths[4];

static void setup_files(void)
{
    const char *a[] = {"a0", "a1"}, *b[] = {"b0", "b1"}, *d[] = {"d0"};
    paths[0] = write_file("a.tfrecord", a, 2, 3, 0);
    paths[1] = write_file("b.tfrecord", b, 2, 0, 1);
    paths[2] = sl_test_path("missing.tfrecord");
    paths[3] = write_file("d.tfrecord", d, 1, 0, 0);
}

START_TEST(test_skip_file_policy)
{
    setup_files();
    struct log l = {.n = 0};
    struct fmt_files_opts o = {.on_error = FMT_ON_ERROR_SKIP_FILE, .on_skip = on_skip, .on_tail = on_tail, .ctx = &l};
    struct fmt_files *f;
    struct sl_error err = {0};
    ck_assert_int_eq(fmt_files_open(&f, paths, 4, &o, &err), 0);
    const char *want[] = {"a0", "a1", "b0", "d0"};
    size_t want_file[] = {0, 0, 1, 3};
    struct fmt_record rec;
    size_t file;
    for (int i = 0; i < 4; i++) {
        ck_assert_int_eq(fmt_files_next(f, &rec, &file, &err), 0);
        ck_assert_uint_eq(rec.len, 2);
        ck_assert_int_eq(memcmp(rec.data, want[i], 2), 0);
        ck_assert_uint_eq(file, want_file[i]);
    }
    ck_assert_int_eq(fmt_files_next(f, &rec, &file, &err), SL_END);
    ck_assert_uint_eq(fmt_files_skipped(f), 2);
    ck_assert_int_eq(l.n, 3);
    ck_assert_str_eq(l.lines[0], "tail 0: 3");
    char want1[700], want2[700];
    snprintf(want1, sizeof want1, "skip 1: %s: corrupted record at 30", paths[1]);
    snprintf(want2, sizeof want2, "skip 2: open(%s): No such file or directory", paths[2]);
    ck_assert_str_eq(l.lines[1], want1);
    ck_assert_str_eq(l.lines[2], want2);
    fmt_files_close(f);
}
END_TEST

START_TEST(test_fail_policy)
{
    setup_files();
    struct fmt_files *f;
    struct sl_error err = {0};
    ck_assert_int_eq(fmt_files_open(&f, paths, 4, NULL, &err), 0);
    struct fmt_record rec;
    size_t file;
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(fmt_files_next(f, &rec, &file, &err), 0);
    ck_assert_int_eq(fmt_files_next(f, &rec, &file, &err), SL_ECORRUPT);
    char want[700];
    snprintf(want, sizeof want, "%s: corrupted record at 30", paths[1]);
    ck_assert_str_eq(err.msg, want);
    fmt_files_close(f);
}
END_TEST

START_TEST(test_policy_names)
{
    enum fmt_on_error p;
    ck_assert_int_eq(fmt_on_error_parse("skip-file", &p), 0);
    ck_assert_int_eq(p, FMT_ON_ERROR_SKIP_FILE);
    ck_assert_int_eq(fmt_on_error_parse("ignore", &p), SL_EINVAL);
    ck_assert_str_eq(fmt_on_error_name(FMT_ON_ERROR_FAIL), "fail");
}
END_TEST

Suite *sl_test_suite(void)
{
    Suite *s = suite_create("fmt_files");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_skip_file_policy);
    tcase_add_test(tc, test_fail_policy);
    tcase_add_test(tc, test_policy_names);
    suite_add_tcase(s, tc);
    return s;
}
