/* sl_zsock: a socket carries exactly the options its struct asks for
 * (read back from ZeroMQ), the zero struct leaves ZeroMQ's defaults but
 * the linger, and a refused option is an error naming the link and the
 * option (an unknown option number stands in for a refusal). */
#include <stdint.h>
#include <string.h>
#include <zmq.h>

#include "sl_test.h"
#include "sl_zsock.h"

static int get_int(void *s, int opt)
{
    int v = -12345;
    size_t len = sizeof v;
    ck_assert_int_eq(zmq_getsockopt(s, opt, &v, &len), 0);
    return v;
}

START_TEST(test_options_read_back)
{
    void *ctx = zmq_ctx_new();
    struct sl_error err = {0};
    const struct sl_zsock_opts o = {.linger_ms = 1234,
                                    .max_msg = 4096,
                                    .unbounded_send = 1,
                                    .unbounded_recv = 1,
                                    .send_timeout_ms = 77,
                                    .handshake_ms = 5000,
                                    .router_mandatory = 1};
    void *s = sl_zsock_open(ctx, ZMQ_ROUTER, &o, "test", &err);
    ck_assert_ptr_nonnull(s);
    ck_assert_int_eq(get_int(s, ZMQ_LINGER), 1234);
    int64_t mm = 0;
    size_t len = sizeof mm;
    ck_assert_int_eq(zmq_getsockopt(s, ZMQ_MAXMSGSIZE, &mm, &len), 0);
    ck_assert_int_eq(mm, 4096);
    ck_assert_int_eq(get_int(s, ZMQ_SNDHWM), 0);
    ck_assert_int_eq(get_int(s, ZMQ_RCVHWM), 0);
    ck_assert_int_eq(get_int(s, ZMQ_SNDTIMEO), 77);
    ck_assert_int_eq(get_int(s, ZMQ_HANDSHAKE_IVL), 5000);
    zmq_close(s);
    /* the zero struct (and NULL): linger 0, everything else ZeroMQ's own */
    void *d = sl_zsock_open(ctx, ZMQ_DEALER, NULL, "test", &err);
    ck_assert_ptr_nonnull(d);
    ck_assert_int_eq(get_int(d, ZMQ_LINGER), 0);
    ck_assert_int_eq(get_int(d, ZMQ_SNDHWM), 1000);
    ck_assert_int_eq(get_int(d, ZMQ_RCVHWM), 1000);
    ck_assert_int_eq(get_int(d, ZMQ_SNDTIMEO), -1);
    ck_assert_int_eq(get_int(d, ZMQ_HANDSHAKE_IVL), 30000);
    len = sizeof mm;
    ck_assert_int_eq(zmq_getsockopt(d, ZMQ_MAXMSGSIZE, &mm, &len), 0);
    ck_assert_int_eq(mm, -1);
    /* one option set on a live socket, and the best-effort linger */
    ck_assert_int_eq(sl_zsock_set_int(d, ZMQ_SNDTIMEO, 250, "test", &err), 0);
    ck_assert_int_eq(get_int(d, ZMQ_SNDTIMEO), 250);
    sl_zsock_linger(d, 321);
    ck_assert_int_eq(get_int(d, ZMQ_LINGER), 321);
    zmq_close(d);
    zmq_ctx_term(ctx);
}
END_TEST

START_TEST(test_refusals_name_the_link)
{
    void *ctx = zmq_ctx_new();
    void *d = zmq_socket(ctx, ZMQ_DEALER);
    struct sl_error err = {0};
    /* an option number ZeroMQ does not know: refused (EINVAL) */
    ck_assert_int_eq(sl_zsock_set_int(d, 99999, 1, "feeder 2 (tcp://f:5555)", &err), SL_EIO);
    ck_assert_str_eq(err.msg, "feeder 2 (tcp://f:5555): zmq_setsockopt(an option): Invalid argument");
    ck_assert_int_eq(sl_zsock_set_int(d, ZMQ_LINGER, 5, "x", NULL), 0); /* no error struct: fine */
    zmq_close(d);
    /* a socket type ZeroMQ does not have */
    memset(&err, 0, sizeof err);
    ck_assert_ptr_null(sl_zsock_open(ctx, 12345, NULL, "the ring", &err));
    ck_assert_int_eq(err.code, SL_EIO);
    ck_assert_str_eq(err.msg, "the ring: zmq_socket: Invalid argument");
    zmq_ctx_term(ctx);
}
END_TEST

Suite *sl_test_suite(void)
{
    Suite *s = suite_create("sl_zsock");
    TCase *tc = tcase_create("zsock");
    tcase_add_test(tc, test_options_read_back);
    tcase_add_test(tc, test_refusals_name_the_link);
    suite_add_tcase(s, tc);
    return s;
}
