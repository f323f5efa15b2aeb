/* sto: the storage seam's dispatch by name, its shared checks and the
 * local backend (issue #28): exact bytes at offsets, reads that cross or
 * start at the end, what is refused (a directory, a missing file, an empty
 * name) and with which text, file:// names, sto_read_full's short read,
 * and the configuration's bounds (each field named when refused). */
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sl_test.h"
#include "sto.h"

#define N 1000

static const char *write_pattern(const char *name, uint8_t *want)
{
    for (size_t i = 0; i < N; i++)
        want[i] = (uint8_t)(i * 7 + i / 251);
    return sl_test_write(name, want, N);
}

START_TEST(test_kinds_of_names)
{
    ck_assert_int_eq(sto_kind_of("/a/b"), STO_FILE);
    ck_assert_int_eq(sto_kind_of("rel/b"), STO_FILE);
    ck_assert_int_eq(sto_kind_of("file:///a/b"), STO_FILE);
    ck_assert_int_eq(sto_kind_of("http://h/a"), STO_HTTP);
    ck_assert_int_eq(sto_kind_of("https://h/a"), STO_HTTP);
    ck_assert_int_eq(sto_kind_of("s3://b/k"), STO_S3);
    ck_assert_int_eq(sto_kind_of("HTTP://h/a"), STO_FILE); /* prefixes are exact: a local name */
    ck_assert_int_eq(sto_is_remote("s3://b/k"), 1);
    ck_assert_int_eq(sto_is_remote("https://h/a"), 1);
    ck_assert_int_eq(sto_is_remote("file:///a"), 0);
    ck_assert_str_eq(sto_local_path("file:///a/b"), "/a/b");
    ck_assert_str_eq(sto_local_path("file://rel"), "rel");
    ck_assert_str_eq(sto_local_path("/a/b"), "/a/b");
    ck_assert_ptr_null(sto_local_path("http://h/a"));
    ck_assert_ptr_null(sto_local_path("s3://b/k"));
}
END_TEST

START_TEST(test_local_bytes_at_offsets)
{
    uint8_t want[N], got[N + 64];
    const char *path = write_pattern("p.bin", want);
    struct sl_error err = {0};
    struct sto_src *s;
    ck_assert_int_eq(sto_open(&s, path, &err), 0);
    ck_assert_int_eq(s->kind, STO_FILE);
    ck_assert_str_eq(s->ops->name, "file");
    ck_assert_str_eq(s->name, path);
    ck_assert_uint_eq(s->size, N);
    ck_assert_str_eq(s->etag, "");
    ck_assert_int_ge(s->fd, 0);
    struct stat st;
    ck_assert_int_eq(stat(path, &st), 0);
    ck_assert_int_eq(s->mtime_ns, (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec);

    static const struct {
        uint64_t off;
        size_t n, want;
    } cases[] = {
        {0, 10, 10},    {500, 100, 100}, {0, N, N},           {1, N - 1, N - 1}, /* inside */
        {990, 100, 10}, {1, N, N - 1},   {999, 1, 1},                            /* crossing the end: size - off */
        {N, 10, 0},     {N + 1, 10, 0},  {UINT64_MAX, 10, 0},                    /* at or after the end: 0 */
        {5, 0, 0},                                                               /* nothing asked */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t n = 77;
        memset(got, 0xEE, sizeof got);
        int rc = sto_read_at(s, cases[i].off, got, cases[i].n, &n, &err);
        ck_assert_msg(rc == 0, "case %zu: %s", i, err.msg);
        ck_assert_msg(n == cases[i].want, "case %zu: got %zu, want %zu", i, n, cases[i].want);
        if (n > 0)
            ck_assert_int_eq(memcmp(got, want + cases[i].off, n), 0);
        ck_assert_int_eq(got[n], 0xEE); /* nothing written past what was read */
    }
    sto_close(s);
    sto_close(NULL);
}
END_TEST

START_TEST(test_local_file_prefix)
{
    uint8_t want[N], got[N];
    const char *path = write_pattern("f.bin", want);
    char url[700];
    snprintf(url, sizeof url, "file://%s", path);
    struct sl_error err = {0};
    struct sto_src *s;
    ck_assert_int_eq(sto_open(&s, url, &err), 0);
    ck_assert_str_eq(s->name, path); /* the prefix dropped */
    ck_assert_uint_eq(s->size, N);
    ck_assert_int_eq(sto_read_full(s, 0, got, N, &err), 0);
    ck_assert_int_eq(memcmp(got, want, N), 0);
    sto_close(s);
}
END_TEST

START_TEST(test_local_refusals)
{
    struct sl_error err = {0};
    struct sto_src *s = (struct sto_src *)&err; /* set to NULL on error */
    ck_assert_int_eq(sto_open(&s, "/nonexistent/x.tfrecord", &err), SL_EIO);
    ck_assert_ptr_null(s);
    ck_assert_str_eq(err.msg, "open(/nonexistent/x.tfrecord): No such file or directory");
    ck_assert_int_eq(sto_open(&s, "file:///nonexistent/y", &err), SL_EIO);
    ck_assert_str_eq(err.msg, "open(/nonexistent/y): No such file or directory");

    const char *dir = sl_test_path("adir");
    ck_assert_int_eq(mkdir(dir, 0700), 0);
    ck_assert_int_eq(sto_open(&s, dir, &err), SL_EINVAL);
    ck_assert_ptr_null(s);
    char want[700];
    snprintf(want, sizeof want, "open(%s): not a regular file", dir);
    ck_assert_str_eq(err.msg, want);

    ck_assert_int_eq(sto_open(&s, "", &err), SL_EINVAL);
    ck_assert_str_eq(err.msg, "open: an empty file name");
    ck_assert_int_eq(sto_open(&s, NULL, &err), SL_EINVAL);
    ck_assert_str_eq(err.msg, "open: an empty file name");
}
END_TEST

START_TEST(test_read_full_short)
{
    uint8_t want[N], got[N + 100];
    const char *path = write_pattern("s.bin", want);
    struct sl_error err = {0};
    struct sto_src *s;
    ck_assert_int_eq(sto_open(&s, path, &err), 0);
    ck_assert_int_eq(sto_read_full(s, 900, got, 100, &err), 0);
    ck_assert_int_eq(memcmp(got, want + 900, 100), 0);
    char msg[800];
    ck_assert_int_eq(sto_read_full(s, 990, got, 100, &err), SL_ECORRUPT);
    snprintf(msg, sizeof msg, "%s: bytes [990, 1090) asked of an object of 1000 bytes", path);
    ck_assert_str_eq(err.msg, msg);
    ck_assert_int_eq(sto_read_full(s, 2000, got, 1, &err), SL_ECORRUPT);
    snprintf(msg, sizeof msg, "%s: bytes [2000, 2001) asked of an object of 1000 bytes", path);
    ck_assert_str_eq(err.msg, msg);
    ck_assert_int_eq(sto_read_full(s, 1000, got, 0, &err), 0); /* nothing asked at the end */
    sto_close(s);
}
END_TEST

/* The file shrinks after open: a read finds fewer bytes than the size
 * fixed at open, and sto_read_full says so with the range and that size. */
START_TEST(test_local_shrinks_after_open)
{
    uint8_t want[N], got[N];
    const char *path = write_pattern("shrink.bin", want);
    struct sl_error err = {0};
    struct sto_src *s;
    ck_assert_int_eq(sto_open(&s, path, &err), 0);
    ck_assert_int_eq(truncate(path, 600), 0);
    size_t n = 0;
    ck_assert_int_eq(sto_read_at(s, 500, got, 200, &n, &err), 0);
    ck_assert_uint_eq(n, 100);
    ck_assert_int_eq(sto_read_full(s, 500, got, 200, &err), SL_ECORRUPT);
    char msg[800];
    snprintf(msg, sizeof msg, "%s: bytes [500, 700) asked of an object of 1000 bytes", path);
    ck_assert_str_eq(err.msg, msg);
    sto_close(s);
}
END_TEST

#define BACKOFF(first, most)                                                                                           \
    "remote backoff: first " first " ms, most " most " ms (need 0 <= first <= most <= 86400000: --remote-backoff-ms, " \
    "--remote-backoff-max-ms)"

START_TEST(test_configure_bounds)
{
    struct sto_config c;
    struct sl_error err = {0};
    sto_config_default(&c);
    ck_assert_int_eq(c.connect_timeout_ms, 10000);
    ck_assert_int_eq(c.stall_timeout_ms, 30000);
    ck_assert_int_eq(c.max_retries, 5);
    ck_assert_int_eq(c.backoff_ms, 100);
    ck_assert_int_eq(c.backoff_max_ms, 10000);
    ck_assert_int_eq(c.max_redirects, 5);
    ck_assert_int_eq(c.cross_host_redirects, 0);
    ck_assert_ptr_null(c.ca_file);
    ck_assert_int_eq(sto_configure(&c, &err), 0);

    static const struct {
        int field;
        long value;
        const char *msg;
    } bad[] = {
        {0, -1, "storage: connect timeout -1 ms (need 1 .. 86400000)"},
        {0, 0, "storage: connect timeout 0 ms (need 1 .. 86400000)"},
        {0, LONG_MAX, NULL}, /* text built below */
        {1, -5, "storage: stall timeout -5 ms (need 1 .. 86400000)"},
        {1, 86400001, "storage: stall timeout 86400001 ms (need 1 .. 86400000)"},
        {2, -1, "storage: -1 retries (need 0 .. 100)"},
        {2, 101, "storage: 101 retries (need 0 .. 100)"},
        {3, -1, BACKOFF("-1", "10000")},
        {3, 20000, BACKOFF("20000", "10000")}, /* a first delay above the cap */
        {4, -1, BACKOFF("100", "-1")},
        {4, 86400001, BACKOFF("100", "86400001")},
        {5, -1, "storage: -1 redirects (need 0 .. 50)"},
        {5, 51, "storage: 51 redirects (need 0 .. 50)"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        sto_config_default(&c);
        switch (bad[i].field) {
        case 0: c.connect_timeout_ms = bad[i].value; break;
        case 1: c.stall_timeout_ms = bad[i].value; break;
        case 2: c.max_retries = (int)bad[i].value; break;
        case 3: c.backoff_ms = bad[i].value; break;
        case 4: c.backoff_max_ms = bad[i].value; break;
        default: c.max_redirects = (int)bad[i].value; break;
        }
        char want[200];
        if (bad[i].msg == NULL)
            snprintf(want, sizeof want, "storage: connect timeout %ld ms (need 1 .. 86400000)", LONG_MAX);
        else
            snprintf(want, sizeof want, "%s", bad[i].msg);
        ck_assert_int_eq(sto_configure(&c, &err), SL_EINVAL);
        ck_assert_msg(strcmp(err.msg, want) == 0, "case %zu: '%s', want '%s'", i, err.msg, want);
    }
    /* the bounds themselves are accepted; the strings are copied */
    sto_config_default(&c);
    c.connect_timeout_ms = 1;
    c.stall_timeout_ms = 86400000;
    c.max_retries = 100;
    c.backoff_ms = 0;
    c.backoff_max_ms = 0;
    c.max_redirects = 50;
    char ca[600];
    snprintf(ca, sizeof ca, "%s", sl_test_write("ca.pem", "x", 1));
    c.ca_file = ca;
    ck_assert_int_eq(sto_configure(&c, &err), 0);
    ck_assert_int_eq(sto_configure(&c, &err), 0); /* a second call replaces the first */
    /* a CA file that cannot be read is named */
    c.ca_file = "/nonexistent/ca.pem";
    ck_assert_int_eq(sto_configure(&c, &err), SL_EIO);
    ck_assert_str_eq(err.msg, "remote CA file /nonexistent/ca.pem: No such file or directory");
}
END_TEST

Suite *sl_test_suite(void)
{
    Suite *s = suite_create("sto");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_kinds_of_names);
    tcase_add_test(tc, test_local_bytes_at_offsets);
    tcase_add_test(tc, test_local_file_prefix);
    tcase_add_test(tc, test_local_refusals);
    tcase_add_test(tc, test_read_full_short);
    tcase_add_test(tc, test_local_shrinks_after_open);
    tcase_add_test(tc, test_configure_bounds);
    suite_add_tcase(s, tc);
    return s;
}
