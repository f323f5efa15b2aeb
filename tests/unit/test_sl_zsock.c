/* sl_zsock: a socket carries exactly the options its struct asks for
 * (read back from ZeroMQ), the zero struct leaves ZeroMQ's defaults but
 * the linger, and a refused option is an error naming the link and the
 * option (an unknown option number stands in for a refusal). CURVE and
 * ZAP (sl_curve_server/_client, set through sl_zsock) and ZMQ_IPV6
 * (sl_endpoint) read back too; hostile keys (absent, of the wrong length,
 * not Z85) are refused before or by ZeroMQ with the socket left as it
 * was, and a repeated set-up leaves the last keys. The monitor: opened,
 * read, refused at a bad address (the socket left unmonitored), closed. */
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <zmq.h>

#include "sl_curve.h"
#include "sl_endpoint.h"
#include "sl_test.h"
#include "sl_zsock.h"

#ifndef ZMQ_ZAP_ENFORCE_DOMAIN
#define ZMQ_ZAP_ENFORCE_DOMAIN 93
#endif

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

/* A CURVE key option read back in Z85 (41 bytes asks for the text form). */
static const char *get_key(void *s, int opt)
{
    static char z[2][SL_CURVE_KEY_Z85 + 1];
    static int slot;
    char *out = z[slot++ % 2];
    size_t len = SL_CURVE_KEY_Z85 + 1;
    ck_assert_int_eq(zmq_getsockopt(s, opt, out, &len), 0);
    ck_assert_uint_eq(len, SL_CURVE_KEY_Z85 + 1);
    return out;
}

static struct sl_curve_keys keypair(void)
{
    struct sl_curve_keys k;
    ck_assert_int_eq(zmq_curve_keypair(k.public_z85, k.secret_z85), 0);
    return k;
}

START_TEST(test_curve_server_read_back)
{
    void *ctx = zmq_ctx_new();
    struct sl_error err = {0};
    struct sl_curve_keys a = keypair(), b = keypair();
    void *s = sl_zsock_open(ctx, ZMQ_ROUTER, NULL, "test", &err);
    ck_assert_int_eq(sl_curve_server(s, &a, &err), 0);
    ck_assert_int_eq(get_int(s, ZMQ_MECHANISM), ZMQ_CURVE);
    ck_assert_int_eq(get_int(s, ZMQ_CURVE_SERVER), 1);
    ck_assert_str_eq(get_key(s, ZMQ_CURVE_SECRETKEY), a.secret_z85);
    char dom[64];
    size_t len = sizeof dom;
    ck_assert_int_eq(zmq_getsockopt(s, ZMQ_ZAP_DOMAIN, dom, &len), 0);
    ck_assert_str_eq(dom, "sluice");
    /* a libzmq without the draft API has no such option: then nothing to read */
    int enforce = 0;
    len = sizeof enforce;
    if (zmq_getsockopt(s, ZMQ_ZAP_ENFORCE_DOMAIN, &enforce, &len) == 0)
        ck_assert_int_eq(enforce, 1);
    /* repeated: the last key stands */
    ck_assert_int_eq(sl_curve_server(s, &b, &err), 0);
    ck_assert_str_eq(get_key(s, ZMQ_CURVE_SECRETKEY), b.secret_z85);
    ck_assert_int_eq(get_int(s, ZMQ_CURVE_SERVER), 1);
    zmq_close(s);
    zmq_ctx_term(ctx);
}
END_TEST

START_TEST(test_curve_client_read_back)
{
    void *ctx = zmq_ctx_new();
    struct sl_error err = {0};
    struct sl_curve_keys mine = keypair(), other = keypair(), srv = keypair(), srv2 = keypair();
    void *s = sl_zsock_open(ctx, ZMQ_DEALER, NULL, "test", &err);
    ck_assert_int_eq(sl_curve_client(s, &mine, srv.public_z85, &err), 0);
    ck_assert_int_eq(get_int(s, ZMQ_MECHANISM), ZMQ_CURVE);
    ck_assert_int_eq(get_int(s, ZMQ_CURVE_SERVER), 0);
    ck_assert_str_eq(get_key(s, ZMQ_CURVE_SERVERKEY), srv.public_z85);
    ck_assert_str_eq(get_key(s, ZMQ_CURVE_PUBLICKEY), mine.public_z85);
    ck_assert_str_eq(get_key(s, ZMQ_CURVE_SECRETKEY), mine.secret_z85);
    /* repeated with other keys: those stand */
    ck_assert_int_eq(sl_curve_client(s, &other, srv2.public_z85, &err), 0);
    ck_assert_str_eq(get_key(s, ZMQ_CURVE_SERVERKEY), srv2.public_z85);
    ck_assert_str_eq(get_key(s, ZMQ_CURVE_PUBLICKEY), other.public_z85);
    ck_assert_str_eq(get_key(s, ZMQ_CURVE_SECRETKEY), other.secret_z85);
    zmq_close(s);
    zmq_ctx_term(ctx);
}
END_TEST

START_TEST(test_curve_hostile_keys)
{
    void *ctx = zmq_ctx_new();
    struct sl_error err = {0};
    struct sl_curve_keys k = keypair(), none;
    memset(&none, 0, sizeof none);
    void *s = sl_zsock_open(ctx, ZMQ_DEALER, NULL, "test", &err);
    /* absent keys: refused before ZeroMQ, the socket left without CURVE */
    ck_assert_int_eq(sl_curve_server(s, NULL, &err), SL_EINVAL);
    ck_assert_str_eq(err.msg, "a CURVE server needs a secret key");
    ck_assert_int_eq(sl_curve_server(s, &none, &err), SL_EINVAL);
    ck_assert_int_eq(sl_curve_client(s, NULL, k.public_z85, &err), SL_EINVAL);
    ck_assert_str_eq(err.msg, "a CURVE client needs its key pair");
    ck_assert_int_eq(sl_curve_client(s, &k, NULL, &err), SL_EINVAL);
    ck_assert_str_eq(err.msg, "a CURVE client needs the server's public key (40 Z85 characters)");
    /* a server key of the wrong length: 39 and 41 characters, and empty */
    char shorter[SL_CURVE_KEY_Z85], longer[SL_CURVE_KEY_Z85 + 2];
    memcpy(shorter, k.public_z85, SL_CURVE_KEY_Z85 - 1);
    shorter[SL_CURVE_KEY_Z85 - 1] = '\0';
    snprintf(longer, sizeof longer, "%s0", k.public_z85);
    ck_assert_int_eq(sl_curve_client(s, &k, shorter, &err), SL_EINVAL);
    ck_assert_int_eq(sl_curve_client(s, &k, longer, &err), SL_EINVAL);
    ck_assert_int_eq(sl_curve_client(s, &k, "", &err), SL_EINVAL);
    ck_assert_int_eq(get_int(s, ZMQ_MECHANISM), ZMQ_NULL);
    /* 40 characters that are not Z85: ZeroMQ refuses, named, as SL_EIO */
    char junk[SL_CURVE_KEY_Z85 + 1];
    memset(junk, '~', SL_CURVE_KEY_Z85);
    junk[SL_CURVE_KEY_Z85] = '\0';
    memset(&err, 0, sizeof err);
    ck_assert_int_eq(sl_curve_client(s, &k, junk, &err), SL_EIO);
    ck_assert_str_eq(err.msg, "CURVE client: zmq_setsockopt(ZMQ_CURVE_SERVERKEY): Invalid argument");
    ck_assert_int_eq(get_int(s, ZMQ_MECHANISM), ZMQ_NULL);
    struct sl_curve_keys bad = k;
    memcpy(bad.secret_z85, junk, sizeof junk);
    ck_assert_int_eq(sl_curve_server(s, &bad, &err), SL_EIO);
    ck_assert_str_eq(err.msg, "CURVE server: zmq_setsockopt(ZMQ_CURVE_SECRETKEY): Invalid argument");
    /* a ZAP domain over ZeroMQ's 255 bytes: refused, named */
    char dom[300];
    memset(dom, 'd', sizeof dom);
    ck_assert_int_eq(sl_zsock_set_bytes(s, ZMQ_ZAP_DOMAIN, dom, sizeof dom, "the ring", &err), SL_EIO);
    ck_assert_str_eq(err.msg, "the ring: zmq_setsockopt(ZMQ_ZAP_DOMAIN): Invalid argument");
    ck_assert_int_eq(errno, EINVAL); /* left for callers that tell refusals apart */
    zmq_close(s);
    zmq_ctx_term(ctx);
}
END_TEST

START_TEST(test_ipv6_read_back)
{
    void *ctx = zmq_ctx_new();
    struct sl_error err = {0};
    void *s = sl_zsock_open(ctx, ZMQ_DEALER, NULL, "test", &err);
    ck_assert_int_eq(get_int(s, ZMQ_IPV6), 0);
    ck_assert_int_eq(sl_endpoint_connect(s, "tcp://[::1]:5999", &err), 0);
    ck_assert_int_eq(get_int(s, ZMQ_IPV6), 1);
    zmq_close(s);
    void *r = sl_zsock_open(ctx, ZMQ_ROUTER, NULL, "test", &err);
    char out[128];
    ck_assert_int_eq(sl_endpoint_bind_prepare(r, "tcp://[::1]:*", out, sizeof out, &err), 0);
    ck_assert_int_eq(get_int(r, ZMQ_IPV6), 1);
    zmq_close(r);
    zmq_ctx_term(ctx);
}
END_TEST

START_TEST(test_monitor)
{
    void *ctx = zmq_ctx_new();
    struct sl_error err = {0};
    void *srv = sl_zsock_open(ctx, ZMQ_ROUTER, NULL, "server", &err);
    ck_assert_int_eq(zmq_bind(srv, "tcp://127.0.0.1:*"), 0);
    char ep[256];
    size_t len = sizeof ep;
    ck_assert_int_eq(zmq_getsockopt(srv, ZMQ_LAST_ENDPOINT, ep, &len), 0);
    void *s = sl_zsock_open(ctx, ZMQ_DEALER, NULL, "client", &err);
    /* a monitor must publish on inproc: refused, named, and s unmonitored */
    ck_assert_ptr_null(sl_zsock_monitor_open(ctx, s, "tcp://127.0.0.1:1", ZMQ_EVENT_ALL, "feeder 1", &err));
    ck_assert_int_eq(err.code, SL_EIO);
    ck_assert_str_eq(err.msg, "feeder 1: zmq_socket_monitor: Protocol not supported");
    void *mon = sl_zsock_monitor_open(ctx, s, "inproc://test-mon", ZMQ_EVENT_CONNECTED, "feeder 1", &err);
    ck_assert_ptr_nonnull(mon);
    ck_assert_int_eq(get_int(mon, ZMQ_LINGER), 0);
    uint16_t ev = 1;
    uint32_t value = 1;
    ck_assert_int_eq(sl_zsock_monitor_event(mon, &ev, &value), 0); /* nothing yet */
    ck_assert_int_eq(ev, 0);
    ck_assert_int_eq(value, 0);
    ck_assert_int_eq(zmq_connect(s, ep), 0);
    zmq_pollitem_t it = {.socket = mon, .events = ZMQ_POLLIN};
    ck_assert_int_eq(zmq_poll(&it, 1, 5000), 1);
    ck_assert_int_eq(sl_zsock_monitor_event(mon, &ev, &value), 1);
    ck_assert_int_eq(ev, ZMQ_EVENT_CONNECTED);
    ck_assert_int_eq(sl_zsock_monitor_event(mon, &ev, &value), 0); /* the endpoint frame was taken with it */
    /* closed with events left unread (a disconnect to come): no leak (ASan) */
    sl_zsock_monitor_close(s, mon);
    sl_zsock_monitor_close(NULL, NULL);
    void *alone = sl_zsock_open(ctx, ZMQ_DEALER, NULL, "alone", &err);
    sl_zsock_monitor_close(alone, NULL);
    zmq_close(srv);
    zmq_ctx_term(ctx);
}
END_TEST

Suite *sl_test_suite(void)
{
    Suite *s = suite_create("sl_zsock");
    TCase *tc = tcase_create("zsock");
    tcase_add_test(tc, test_options_read_back);
    tcase_add_test(tc, test_refusals_name_the_link);
    tcase_add_test(tc, test_curve_server_read_back);
    tcase_add_test(tc, test_curve_client_read_back);
    tcase_add_test(tc, test_curve_hostile_keys);
    tcase_add_test(tc, test_ipv6_read_back);
    tcase_add_test(tc, test_monitor);
    suite_add_tcase(s, tc);
    return s;
}
