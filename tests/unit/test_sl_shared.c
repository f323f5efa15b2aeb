/* shared/: error records, bounded buffers, base64 (RFC 4648 vectors), JSON
 * string escaping, the allocation failure hook and the log line formats. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include <unistd.h>

#include "sl_alloc.h"
#include "sl_base64.h"
#include "sl_buf.h"
#include "sl_bytes.h"
#include "sl_error.h"
#include "sl_json.h"
#include "sl_log.h"
#include "sl_rng.h"
#include "sl_thread.h"
#include "sl_test.h"

START_TEST(test_error_set_and_prefix)
{
    struct sl_error e = {0};
    ck_assert_int_eq(sl_error_set(&e, SL_ECORRUPT, "corrupted record at %d", 12), SL_ECORRUPT);
    ck_assert_int_eq(sl_error_prefix(&e, "%s: ", "a.tfrecord"), SL_ECORRUPT);
    ck_assert_str_eq(e.msg, "a.tfrecord: corrupted record at 12");
    ck_assert_int_eq(e.code, SL_ECORRUPT);
    ck_assert_int_eq(sl_error_sys(&e, 2, "open(%s)", "x"), SL_EIO);
    ck_assert_str_eq(e.msg, "open(x): No such file or directory");
    ck_assert_int_eq(sl_error_set(NULL, SL_EINVAL, "ignored"), SL_EINVAL);
    ck_assert_str_eq(sl_code_name(SL_ECORRUPT), "corrupt");
}
END_TEST

START_TEST(test_buf_limit)
{
    struct sl_buf b;
    sl_buf_init(&b, 10);
    ck_assert_int_eq(sl_buf_append(&b, "0123456789", 10), 0);
    ck_assert_int_eq(sl_buf_putc(&b, 'x'), SL_EINVAL);
    ck_assert_uint_eq(b.len, 10);
    ck_assert_int_eq(memcmp(b.data, "0123456789", 10), 0);
    sl_buf_free(&b);
    sl_buf_init(&b, 0);
    ck_assert_int_eq(sl_buf_printf(&b, "%d-%s", 42, "x"), 0);
    ck_assert_uint_eq(b.len, 4);
    ck_assert_int_eq(memcmp(b.data, "42-x", 4), 0);
    sl_buf_free(&b);
}
END_TEST

START_TEST(test_base64_rfc4648)
{
    static const char *plain[] = {"", "f", "fo", "foo", "foob", "fooba", "foobar"};
    static const char *enc[] = {"", "Zg==", "Zm8=", "Zm9v", "Zm9vYg==", "Zm9vYmE=", "Zm9vYmFy"};
    for (int i = 0; i < 7; i++) {
        struct sl_buf b;
        sl_buf_init(&b, 0);
        ck_assert_int_eq(sl_base64_encode(&b, plain[i], strlen(plain[i])), 0);
        ck_assert_uint_eq(b.len, strlen(enc[i]));
        ck_assert(b.len == 0 || memcmp(b.data, enc[i], b.len) == 0);
        sl_buf_reset(&b);
        ck_assert_int_eq(sl_base64_decode(&b, enc[i], strlen(enc[i])), 0);
        ck_assert_uint_eq(b.len, strlen(plain[i]));
        ck_assert(b.len == 0 || memcmp(b.data, plain[i], b.len) == 0);
        sl_buf_free(&b);
    }
    struct sl_buf b;
    sl_buf_init(&b, 0);
    ck_assert_int_eq(sl_base64_decode(&b, "Zm9v!", 5), SL_EINVAL);
    sl_buf_free(&b);
}
END_TEST

START_TEST(test_json_string_escapes)
{
    struct sl_buf b;
    sl_buf_init(&b, 0);
    const char in[] = "a\"b\\c\n\x01\xc3\xa9\xff";
    ck_assert_int_eq(sl_json_string(&b, in, sizeof in - 1), 0);
    const char *want = "\"a\\\"b\\\\c\\n\\u0001\xc3\xa9\\u00ff\"";
    ck_assert_uint_eq(b.len, strlen(want));
    ck_assert_int_eq(memcmp(b.data, want, b.len), 0);
    sl_buf_reset(&b);
    ck_assert_int_eq(sl_json_float(&b, 1.5f), 0);
    ck_assert_int_eq(sl_json_float(&b, 0.1f), 0);
    ck_assert_int_eq(sl_buf_putc(&b, '\0'), 0);
    ck_assert_str_eq((char *)b.data, "1.50.1");
    sl_buf_free(&b);
}
END_TEST

START_TEST(test_alloc_failure_hook)
{
    sl_alloc_fail_after(2);
    void *a = sl_malloc(8);
    ck_assert_ptr_nonnull(a);
    ck_assert_ptr_null(sl_malloc(8));
    ck_assert_ptr_null(sl_malloc(8));
    sl_alloc_fail_reset();
    void *c = sl_malloc(8);
    ck_assert_ptr_nonnull(c);
    sl_free(a);
    sl_free(c);
}
END_TEST

/* Each line of buf starts with an RFC 3339 time and a blank
 * ("2026-12-01T15:34:21.123Z "): check its shape and remove it. */
static void strip_times(char *buf)
{
    static const char shape[] = "dddd-dd-ddTdd:dd:dd.dddZ ";
    char *out = buf;
    for (char *p = buf; *p != '\0';) {
        for (size_t i = 0; i < sizeof shape - 1; i++)
            ck_assert_msg(shape[i] == 'd' ? p[i] >= '0' && p[i] <= '9' : p[i] == shape[i], "no time at '%s'", p);
        p += sizeof shape - 1;
        char *nl = strchr(p, '\n');
        size_t n = nl != NULL ? (size_t)(nl - p) + 1 : strlen(p);
        memmove(out, p, n);
        out += n;
        p += n;
    }
    *out = '\0';
}

static void *mask_of_thread(void *arg)
{
    pthread_sigmask(SIG_BLOCK, NULL, (sigset_t *)arg);
    return NULL;
}

/* sl_thread_start: the new thread blocks the signals main handles (so
 * they reach main); the caller's mask is untouched. */
START_TEST(test_thread_blocks_stop_signals)
{
    sigset_t before, after, in_thread;
    pthread_sigmask(SIG_BLOCK, NULL, &before);
    ck_assert(!sigismember(&before, SIGTERM));
    pthread_t t;
    ck_assert_int_eq(sl_thread_start(&t, mask_of_thread, &in_thread), 0);
    ck_assert_int_eq(pthread_join(t, NULL), 0);
    pthread_sigmask(SIG_BLOCK, NULL, &after);
    const int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
        ck_assert_msg(sigismember(&in_thread, sigs[i]), "signal %d not blocked in the thread", sigs[i]);
        ck_assert_int_eq(sigismember(&after, sigs[i]), sigismember(&before, sigs[i]));
    }
    ck_assert(!sigismember(&in_thread, SIGSEGV)); /* faults still reach their thread */
}
END_TEST

/* sl_log_time: RFC 3339 in UTC, milliseconds truncated. */
START_TEST(test_log_time)
{
    char t[25];
    sl_log_time(0, t);
    ck_assert_str_eq(t, "1970-01-01T00:00:00.000Z");
    sl_log_time(1796139261123456789u, t);
    ck_assert_str_eq(t, "2026-12-01T15:34:21.123Z");
    sl_log_time(951782400999000000u, t); /* a leap day */
    ck_assert_str_eq(t, "2000-02-29T00:00:00.999Z");
    sl_log_time(UINT64_MAX, t); /* the last instant 64-bit nanoseconds can say */
    ck_assert_str_eq(t, "2554-07-21T23:34:33.709Z");
}
END_TEST

/* Read what is in the pipe now. */
static void read_all(int fd, char *buf, size_t cap)
{
    ssize_t n = read(fd, buf, cap - 1);
    ck_assert_int_gt(n, 0);
    buf[n] = '\0';
}

/* The text and JSON formats: the level, the program, the message escaped
 * (quotes, backslashes, control bytes, bytes that are not UTF-8, while
 * valid UTF-8 passes), levels below the least one dropped, an over-long
 * message cut to one line. */
START_TEST(test_log_formats)
{
    int fds[2];
    ck_assert_int_eq(pipe(fds), 0);
    char buf[8192];
    sl_log_setup("prog", fds[1], SL_LOG_INFO);
    sl_log(SL_LOG_DEBUG, "not shown");
    sl_log(SL_LOG_INFO, "file %s at byte %d", "a.tfrecord", 12);
    read_all(fds[0], buf, sizeof buf);
    strip_times(buf);
    ck_assert_str_eq(buf, "prog: info: file a.tfrecord at byte 12\n");

    sl_log_set_format(SL_LOG_JSON);
    sl_log(SL_LOG_ERROR, "q\"b\\ t\tn\x01 \xff\xc3\xa9 \xe2\x82");
    read_all(fds[0], buf, sizeof buf);
    char want[512];
    snprintf(want, sizeof want,
             "\",\"prog\":\"prog\",\"pid\":%ld,\"level\":\"error\","
             "\"msg\":\"q\\\"b\\\\ t\\u0009n\\u0001 \\u00ff\xc3\xa9 \\u00e2\\u0082\"}\n",
             (long)getpid());
    ck_assert_int_eq(strncmp(buf, "{\"time\":\"", 9), 0);
    ck_assert_str_eq(buf + 9 + 24, want);
    ck_assert_int_eq(buf[9 + 23], 'Z');

    char big[3000];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    sl_log(SL_LOG_WARN, "%s", big);
    read_all(fds[0], buf, sizeof buf);
    ck_assert_ptr_eq(strchr(buf, '\n'), buf + strlen(buf) - 1); /* one line, cut */
    ck_assert_int_eq(strcmp(buf + strlen(buf) - 3, "\"}\n"), 0);
    sl_log_set_format(SL_LOG_TEXT);
    sl_log(SL_LOG_WARN, "%s", big);
    read_all(fds[0], buf, sizeof buf);
    ck_assert_ptr_eq(strchr(buf, '\n'), buf + strlen(buf) - 1);
    ck_assert_uint_eq(strlen(buf), 25 + strlen("prog: warning: ") + 2047 + 1);
    sl_log_setup("t", 2, SL_LOG_INFO);
    close(fds[0]);
    close(fds[1]);
}
END_TEST

/* sl_log_allowed: `burst` lines a second, the rest counted and said in one
 * line when the limit is flushed. */
START_TEST(test_log_limit)
{
    int fds[2];
    ck_assert_int_eq(pipe(fds), 0);
    sl_log_setup("t", fds[1], SL_LOG_INFO);
    struct sl_log_limit l = {.kind = "refusals", .burst = 3};
    int logged = 0;
    for (int i = 0; i < 25; i++)
        if (sl_log_allowed(&l)) {
            sl_log(SL_LOG_WARN, "refused %d", i);
            logged++;
        }
    ck_assert_int_eq(logged, 3);
    ck_assert_uint_eq(l.held, 22);
    sl_log_limit_flush(&l, 0); /* the second is not over: nothing yet */
    ck_assert_uint_eq(l.held, 22);
    sl_log_limit_flush(&l, 1);
    ck_assert_uint_eq(l.held, 0);
    ck_assert_int_eq(sl_log_allowed(&l), 1); /* a new second */
    sl_log_limit_flush(&l, 1);               /* nothing held: no line */
    char buf[1024] = {0};
    read_all(fds[0], buf, sizeof buf);
    strip_times(buf);
    const char *want = "t: warning: refused 0\nt: warning: refused 1\nt: warning: refused 2\n"
                       "t: warning: 22 more refusals were not logged in ";
    ck_assert_int_eq(strncmp(buf, want, strlen(want)), 0);
    const char *tail = " s (at most 3 a second are)\n";
    ck_assert_uint_gt(strlen(buf), strlen(want) + strlen(tail));
    ck_assert_str_eq(buf + strlen(buf) - strlen(tail), tail);
    ck_assert_ptr_eq(strchr(buf + strlen(want), '\n'), buf + strlen(buf) - 1); /* one line */
    sl_log_setup("t", 2, SL_LOG_INFO);
    close(fds[0]);
    close(fds[1]);
}
END_TEST

/* sl_bytes: little-endian integers pinned byte by byte; the reader and
 * writer never step past their buffer, and stay bad once a step did not fit. */
START_TEST(test_bytes_reader_writer)
{
    uint8_t buf[15];
    memset(buf, 0xee, sizeof buf);
    struct sl_writer w = sl_writer_make(buf, 14);
    sl_write_u8(&w, 0x01);
    sl_write_u16(&w, 0x0302);
    sl_write_u32(&w, 0x07060504u);
    sl_write_u64(&w, 0x0f0e0d0c0b0a0908ull); /* 15 bytes: does not fit in 14 */
    ck_assert_int_eq(w.bad, 1);
    ck_assert_uint_eq(w.len, 7);
    sl_write_u8(&w, 0x55); /* sticky: fits, but refused */
    ck_assert_uint_eq(w.len, 7);
    static const uint8_t want[15] = {1, 2, 3, 4, 5, 6, 7, 0xee, 0xee, 0xee, 0xee, 0xee, 0xee, 0xee, 0xee};
    ck_assert_mem_eq(buf, want, sizeof want);
    w = sl_writer_make(buf, 15);
    sl_write_bytes(&w, "ab", 2);
    sl_write_u64(&w, 0x0f0e0d0c0b0a0908ull);
    sl_write_u32(&w, 0x44332211u);
    sl_write_u8(&w, 0x99);
    ck_assert_int_eq(w.bad, 0);
    ck_assert_uint_eq(w.len, 15);
    static const uint8_t want2[15] = {'a', 'b', 8, 9, 10, 11, 12, 13, 14, 15, 0x11, 0x22, 0x33, 0x44, 0x99};
    ck_assert_mem_eq(buf, want2, sizeof want2);
    ck_assert_ptr_null(sl_write_room(&w, 1));

    struct sl_reader r = sl_reader_make(buf, sizeof buf);
    const uint8_t *ab = sl_read_bytes(&r, 2);
    ck_assert_ptr_eq(ab, buf);
    uint64_t v64;
    uint32_t v32;
    uint16_t v16;
    uint8_t v8;
    ck_assert_int_eq(sl_read_u64(&r, &v64), 0);
    ck_assert_uint_eq(v64, 0x0f0e0d0c0b0a0908ull);
    ck_assert_int_eq(sl_read_u32(&r, &v32), 0);
    ck_assert_uint_eq(v32, 0x44332211u);
    ck_assert_uint_eq(sl_reader_left(&r), 1);
    ck_assert_int_eq(sl_read_u16(&r, &v16), -1); /* one byte left */
    ck_assert_uint_eq(v16, 0);
    ck_assert_uint_eq(r.off, 14);
    ck_assert_int_eq(sl_read_u8(&r, &v8), -1); /* sticky */
    ck_assert_int_eq(r.bad, 1);
    ck_assert_uint_eq(sl_load_le16(buf + 13), 0x9944);
    ck_assert_uint_eq(sl_load_le32(buf + 2), 0x0b0a0908u);
    r = sl_reader_make(buf, 0);
    ck_assert_ptr_null(sl_read_bytes(&r, 1));
    r = sl_reader_make(buf, 4);
    ck_assert_ptr_null(sl_read_bytes(&r, SIZE_MAX)); /* no wrap-around */
    ck_assert_uint_eq(r.off, 0);
}
END_TEST

/* The augmentation stream: values pinned against an independent
 * computation of the same definition (Python integers), the key's order
 * matters, and the bounded draws stay in their ranges. */
START_TEST(test_rng_pinned)
{
    struct sl_rng r = sl_rng_key(1, 2, 3, 4);
    ck_assert_uint_eq(sl_rng_u64(&r), UINT64_C(0x70ddfc090036f7f4));
    ck_assert_uint_eq(sl_rng_u64(&r), UINT64_C(0xa3df133731aed855));
    ck_assert_uint_eq(sl_rng_u64(&r), UINT64_C(0x07b3464f2aeb169b));
    struct sl_rng q = sl_rng_key(2, 1, 3, 4);
    ck_assert_uint_eq(sl_rng_u64(&q), UINT64_C(0x0220a468c70d240f));
    struct sl_rng u = sl_rng_key(7, 0, 0, 0);
    ck_assert(sl_rng_uniform(&u) == 0.587767721193174);
    struct sl_rng b = sl_rng_key(9, 9, 9, 9);
    for (int i = 0; i < 10000; i++) {
        ck_assert_uint_lt(sl_rng_below(&b, 7), 7);
        double d = sl_rng_range(&b, -2.0, 3.0);
        ck_assert(d >= -2.0 && d < 3.0);
    }
    ck_assert_uint_eq(sl_rng_below(&b, 0), 0);
    ck_assert(sl_rng_range(&b, 5.0, 5.0) == 5.0);
}
END_TEST

Suite *sl_test_suite(void)
{
    Suite *s = suite_create("sl_shared");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_error_set_and_prefix);
    tcase_add_test(tc, test_buf_limit);
    tcase_add_test(tc, test_base64_rfc4648);
    tcase_add_test(tc, test_json_string_escapes);
    tcase_add_test(tc, test_alloc_failure_hook);
    tcase_add_test(tc, test_log_limit);
    tcase_add_test(tc, test_log_time);
    tcase_add_test(tc, test_thread_blocks_stop_signals);
    tcase_add_test(tc, test_log_formats);
    tcase_add_test(tc, test_bytes_reader_writer);
    tcase_add_test(tc, test_rng_pinned);
    suite_add_tcase(s, tc);
    return s;
}
