/* Index files: DALI's tfrecord2idx layout, exact bytes; strict loading. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fmt_format.h"
#include "fmt_index.h"
#include "fmt_tfrecord.h"
#include "sl_test.h"
#include "sto.h"

static const char *make_file(const char *name, enum fmt_compression c)
{
    const char *path = sl_test_path(name);
    struct fmt_tfrecord_writer *w;
    struct sl_error err = {0};
    ck_assert_int_eq(fmt_tfrecord_writer_open(&w, path, c, -1, &err), 0);
    ck_assert_int_eq(fmt_tfrecord_writer_write(w, "foo", 3, &err), 0);
    ck_assert_int_eq(fmt_tfrecord_writer_write(w, "", 0, &err), 0);
    ck_assert_int_eq(fmt_tfrecord_writer_write(w, "123456789", 9, &err), 0);
    ck_assert_int_eq(fmt_tfrecord_writer_close(w, &err), 0);
    return path;
}

START_TEST(test_build_exact_bytes)
{
    const char *names[] = {"a.tfrecord", "a.tfrecord.gz"};
    for (int i = 0; i < 2; i++) {
        const char *path = make_file(names[i], FMT_COMP_AUTO);
        char idx[512];
        snprintf(idx, sizeof idx, "%s.idx", path);
        uint64_t n = 0;
        struct sl_error err = {0};
        ck_assert_int_eq(fmt_index_build(path, idx, NULL, &n, &err), 0);
        ck_assert_uint_eq(n, 3);
        size_t len;
        uint8_t *got = sl_test_read(idx, &len);
        const char *want = "0 19\n19 16\n35 25\n";
        ck_assert_uint_eq(len, strlen(want));
        ck_assert_int_eq(memcmp(got, want, len), 0);
        free(got);
        struct fmt_index_entry *e;
        size_t ne;
        ck_assert_int_eq(fmt_index_load(idx, &e, &ne, &err), 0);
        ck_assert_uint_eq(ne, 3);
        ck_assert_uint_eq(e[2].offset, 35);
        ck_assert_uint_eq(e[2].size, 25);
        free(e);
        /* a file:// name (issue #28): the same entries */
        char url[600];
        snprintf(url, sizeof url, "file://%s", idx);
        ck_assert_int_eq(fmt_index_load(url, &e, &ne, &err), 0);
        ck_assert_uint_eq(ne, 3);
        ck_assert_uint_eq(e[2].offset, 35);
        free(e);
    }
    /* a missing one names its path */
    struct fmt_index_entry *e;
    size_t ne;
    struct sl_error err = {0};
    ck_assert_int_eq(fmt_index_load("file:///nonexistent/a.idx", &e, &ne, &err), SL_EIO);
    ck_assert_str_eq(err.msg, "open(/nonexistent/a.idx): No such file or directory");
}
END_TEST

/* fmt_index_find (issue #28): one look that is also the load; an index that
 * is not there is 0, one that is there but malformed is the load's error. */
START_TEST(test_find)
{
    const char *path = make_file("f.tfrecord", FMT_COMP_NONE);
    char idx[512];
    snprintf(idx, sizeof idx, "%s.idx", path);
    struct fmt_index_entry *e = (void *)1;
    size_t ne = 7;
    struct sl_error err = {0};
    ck_assert_int_eq(fmt_index_find(idx, &e, &ne, &err), 0); /* none yet */
    ck_assert_ptr_null(e);
    ck_assert_uint_eq(ne, 0);
    uint64_t n = 0;
    ck_assert_int_eq(fmt_index_build(path, idx, NULL, &n, &err), 0);
    ck_assert_int_eq(fmt_index_find(idx, &e, &ne, &err), 1);
    ck_assert_uint_eq(ne, 3);
    ck_assert_uint_eq(e[1].offset, 19);
    ck_assert_uint_eq(e[1].size, 16);
    free(e);
    char url[600];
    snprintf(url, sizeof url, "file://%s", idx);
    ck_assert_int_eq(fmt_index_find(url, &e, &ne, &err), 1);
    ck_assert_uint_eq(ne, 3);
    free(e);
    const char *bad = sl_test_write("g.tfrecord.idx", "0 19\n5 16\n", 10);
    ck_assert_int_eq(fmt_index_find(bad, &e, &ne, &err), SL_ECORRUPT);
    ck_assert_ptr_null(e);
    ck_assert_str_eq(strstr(err.msg, ":2: "), ":2: offset 5 overlaps the previous record (ends at 19)");
    /* a remote index that cannot be opened (nothing listens there): none */
    err = (struct sl_error){0};
    struct sto_config c;
    sto_config_default(&c);
    c.max_retries = 0; /* refused at once */
    ck_assert_int_eq(sto_configure(&c, &err), 0);
    ck_assert_int_eq(fmt_index_find("http://127.0.0.1:1/x.tfrecord.idx", &e, &ne, &err), 0);
    ck_assert_ptr_null(e);
    ck_assert_int_eq(err.code, 0);
}
END_TEST

START_TEST(test_build_on_corrupt_file_leaves_no_index)
{
    uint8_t file[19];
    sl_test_hex("0300000000000000 b099490e 666f6f 618abeff", file, 19);
    const char *path = sl_test_write("bad.tfrecord", file, 19);
    const char *idx = sl_test_path("bad.tfrecord.idx");
    struct sl_error err = {0};
    uint64_t n;
    ck_assert_int_eq(fmt_index_build(path, idx, NULL, &n, &err), SL_ECORRUPT);
    ck_assert(strstr(err.msg, "corrupted record at 12") != NULL);
    size_t len;
    ck_assert_ptr_null(sl_test_read(idx, &len));
}
END_TEST

/* The index goes through an exclusive temporary: a link planted at the old
 * predictable name "<idx>.tmp.<pid>" is neither followed nor renamed into
 * place, the folder holds nothing else afterwards, and a device target
 * (/dev/null) is written in place and stays a device. */
START_TEST(test_build_temporary_is_not_predictable)
{
    const char *path = make_file("t.tfrecord", FMT_COMP_NONE);
    char idx[512], planted[600];
    snprintf(idx, sizeof idx, "%s.idx", path);
    snprintf(planted, sizeof planted, "%s.tmp.%ld", idx, (long)getpid());
    const char *victim = sl_test_write("victim", "keep", 4);
    ck_assert_int_eq(symlink(victim, planted), 0);
    uint64_t n = 0;
    struct sl_error err = {0};
    ck_assert_int_eq(fmt_index_build(path, idx, NULL, &n, &err), 0);
    size_t len;
    uint8_t *got = sl_test_read(victim, &len);
    ck_assert_uint_eq(len, 4);
    ck_assert_int_eq(memcmp(got, "keep", 4), 0);
    free(got);
    struct stat st;
    ck_assert_int_eq(lstat(planted, &st), 0);
    ck_assert(S_ISLNK(st.st_mode));
    ck_assert_int_eq(lstat(idx, &st), 0);
    ck_assert(S_ISREG(st.st_mode));
    unlink(planted);
    ck_assert_int_eq(fmt_index_build(path, "/dev/null", NULL, &n, &err), 0);
    ck_assert_int_eq(stat("/dev/null", &st), 0);
    ck_assert(S_ISCHR(st.st_mode));
}
END_TEST

START_TEST(test_load_rejects_bad_lines)
{
    static const struct {
        const char *text;
        const char *msg;
    } cases[] = {
        {"0 19\nx 5\n", ":2: expected '<offset> <size>'"},
        {"0 19\n19\n", ":2: expected '<offset> <size>'"},
        {"0 19 7\n", ":1: expected '<offset> <size>'"},
        {"0 15\n", ":1: record size 15 is below 16"},
        {"0 19\n18 16\n", ":2: offset 18 overlaps the previous record (ends at 19)"},
        {"99999999999999999999999 19\n", ":1: expected '<offset> <size>'"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *idx = sl_test_write("bad.idx", cases[i].text, strlen(cases[i].text));
        struct fmt_index_entry *e;
        size_t n;
        struct sl_error err = {0};
        ck_assert_int_eq(fmt_index_load(idx, &e, &n, &err), SL_ECORRUPT);
        char want[600];
        snprintf(want, sizeof want, "%s%s", idx, cases[i].msg);
        ck_assert_str_eq(err.msg, want);
        ck_assert_ptr_null(e);
    }
    /* an empty index is an empty file's index */
    const char *idx = sl_test_write("empty.idx", "", 0);
    struct fmt_index_entry *e;
    size_t n = 9;
    struct sl_error err = {0};
    ck_assert_int_eq(fmt_index_load(idx, &e, &n, &err), 0);
    ck_assert_uint_eq(n, 0);
}
END_TEST

Suite *sl_test_suite(void)
{
    Suite *s = suite_create("fmt_index");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_build_exact_bytes);
    tcase_add_test(tc, test_find);
    tcase_add_test(tc, test_build_on_corrupt_file_leaves_no_index);
    tcase_add_test(tc, test_build_temporary_is_not_predictable);
    tcase_add_test(tc, test_load_rejects_bad_lines);
    suite_add_tcase(s, tc);
    return s;
}
