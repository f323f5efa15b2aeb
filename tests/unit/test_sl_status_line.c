/* sl_status_line: the exact bytes a status line writes to stderr (drawn
 * in place, cleared), its rate limit, and nothing at all when off. stderr
 * goes to a temporary file for the test. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "sl_status_line.h"
#include "sl_test.h"

static char out[4096];

/* Run fn with stderr redirected; its bytes land in `out`. */
static void capture(void (*fn)(void))
{
    fflush(stderr);
    FILE *tmp = tmpfile();
    ck_assert_ptr_nonnull(tmp);
    int saved = dup(STDERR_FILENO);
    ck_assert_int_ge(saved, 0);
    ck_assert_int_ge(dup2(fileno(tmp), STDERR_FILENO), 0);
    fn();
    fflush(stderr);
    ck_assert_int_ge(dup2(saved, STDERR_FILENO), 0);
    close(saved);
    rewind(tmp);
    size_t n = fread(out, 1, sizeof out - 1, tmp);
    out[n] = '\0';
    fclose(tmp);
}

static void drawn_and_cleared(void)
{
    struct sl_status_line l;
    sl_status_line_init(&l, 1, 3600000000000ull, 0); /* the first at once, the next an hour away */
    ck_assert_int_eq(sl_status_line_due(&l), 1);
    sl_status_line_draw(&l, "step %d of %s", 3, "9");
    ck_assert_int_eq(sl_status_line_due(&l), 0); /* within the interval */
    sl_status_line_clear(&l);
    sl_status_line_clear(&l); /* nothing drawn now: nothing written */
}

static void off(void)
{
    struct sl_status_line l;
    sl_status_line_init(&l, 0, 0, 0);
    ck_assert_int_eq(sl_status_line_due(&l), 0);
    sl_status_line_draw(&l, "never %d", 1);
    sl_status_line_clear(&l);
}

static void first_delayed(void)
{
    struct sl_status_line l;
    sl_status_line_init(&l, 1, 1, 3600000000000ull); /* nothing for an hour */
    ck_assert_int_eq(sl_status_line_due(&l), 0);
}

START_TEST(test_bytes_and_rate)
{
    capture(drawn_and_cleared);
    ck_assert_str_eq(out, "\r\033[Kstep 3 of 9\r\033[K");
    capture(off);
    ck_assert_str_eq(out, "");
    capture(first_delayed);
    ck_assert_str_eq(out, "");
}
END_TEST

Suite *sl_test_suite(void)
{
    Suite *s = suite_create("sl_status_line");
    TCase *tc = tcase_create("status_line");
    tcase_add_test(tc, test_bytes_and_rate);
    suite_add_tcase(s, tc);
    return s;
}
