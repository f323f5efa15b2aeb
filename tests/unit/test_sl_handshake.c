/* sl_handshake: the verdict on a connecting socket's handshake, and its
 * words, for both kinds of link (issue #26 item 3: written once for the
 * trainer's connections to the feeders and for the workers' links).
 *
 * First the rules, event by event (exact verdicts and exact texts):
 * a protocol failure (CURVE against none, another protocol error), a
 * refusal (ZAP), a handshake that never completes (closed NODETAIL times;
 * for PEERS also one closing not followed by a success within the grace),
 * a success (no verdict; PEERS: failures without detail no longer count;
 * FEEDER: they count again from zero). Then real sockets through the
 * monitor (sl_zsock_monitor_open): a CURVE handshake that succeeds, one
 * the server's ZAP handler refuses, and a CURVE client of a server without
 * CURVE. */
#include <stdio.h>
#include <string.h>
#include <zmq.h>

#include "sl_curve.h"
#include "sl_handshake.h"
#include "sl_test.h"
#include "sl_zsock.h"

#define NS_MS 1000000u
#define NODETAIL ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL
#define PROTOCOL ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL
#define AUTH ZMQ_EVENT_HANDSHAKE_FAILED_AUTH
#define OK ZMQ_EVENT_HANDSHAKE_SUCCEEDED
#define MISMATCH ZMQ_PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH

static const char *peers_text(struct sl_handshake *h)
{
    static struct sl_error err;
    memset(&err, 0, sizeof err);
    ck_assert_int_eq(sl_handshake_peers_error(h, "ring", "rank 1 (tcp://127.0.0.1:5000)", &err), SL_EPROTO);
    return err.msg;
}

static const char *feeder_text(struct sl_handshake *h)
{
    static struct sl_error err;
    memset(&err, 0, sizeof err);
    ck_assert_int_eq(sl_handshake_feeder_error(h, "--curve-key", "--curve-server-key", &err), SL_EPROTO);
    ck_assert_int_eq(err.code, SL_EPROTO);
    return err.msg;
}

START_TEST(test_protocol_failure)
{
    struct sl_handshake h;
    /* CURVE against none: a verdict at once, the first one stands */
    sl_handshake_init(&h, SL_HANDSHAKE_PEERS, 1);
    sl_handshake_note(&h, PROTOCOL, MISMATCH, 5);
    sl_handshake_note(&h, AUTH, 400, 6);
    ck_assert_int_eq(sl_handshake_failed(&h, 7), 1);
    ck_assert_int_eq(sl_handshake_verdict(&h), SL_HANDSHAKE_MISMATCH);
    ck_assert_str_eq(peers_text(&h),
                     "ring: the handshake with rank 1 (tcp://127.0.0.1:5000) failed: it does not use "
                     "CURVE, but this worker has a trainer key (give every worker the same --curve-key)");
    h.curve = 0;
    ck_assert_str_eq(peers_text(&h), "ring: the handshake with rank 1 (tcp://127.0.0.1:5000) failed: it uses CURVE, "
                                     "but this worker has no trainer key (give every worker the same --curve-key)");
    sl_handshake_init(&h, SL_HANDSHAKE_FEEDER, 1);
    sl_handshake_note(&h, PROTOCOL, MISMATCH, 0);
    ck_assert_int_eq(sl_handshake_verdict(&h), SL_HANDSHAKE_MISMATCH);
    ck_assert_str_eq(feeder_text(&h), "the handshake failed: this trainer uses CURVE (--curve-key) and the feeder does "
                                      "not (started without --curve-key?): give both sides keys, or neither");
    h.curve = 0;
    ck_assert_str_eq(feeder_text(&h), "the handshake failed: the feeder requires CURVE and this trainer has no keys: "
                                      "give --curve-key and --curve-server-key (docs/security.md)");
    /* another protocol error */
    sl_handshake_init(&h, SL_HANDSHAKE_FEEDER, 1);
    sl_handshake_note(&h, PROTOCOL, 0x11000001u, 0);
    ck_assert_int_eq(sl_handshake_verdict(&h), SL_HANDSHAKE_PROTOCOL);
    ck_assert_str_eq(feeder_text(&h), "the CURVE handshake failed (protocol error 0x11000001): the feeder refused "
                                      "this trainer's key, or --curve-server-key is not this feeder's key");
    h.curve = 0;
    ck_assert_str_eq(feeder_text(&h), "the ZeroMQ handshake failed (protocol error 0x11000001)");
    sl_handshake_init(&h, SL_HANDSHAKE_PEERS, 1);
    sl_handshake_note(&h, PROTOCOL, 0x11000001u, 0);
    ck_assert_int_eq(sl_handshake_verdict(&h), SL_HANDSHAKE_PROTOCOL);
    ck_assert_str_eq(peers_text(&h), "ring: the CURVE handshake with rank 1 (tcp://127.0.0.1:5000) failed: the "
                                     "workers do not share one trainer key (--curve-key)");
    h.curve = 0;
    ck_assert_str_eq(peers_text(&h), "ring: the handshake with rank 1 (tcp://127.0.0.1:5000) failed: it closed the "
                                     "connection (a worker with a trainer key? give every worker the same "
                                     "--curve-key, or none)");
}
END_TEST

START_TEST(test_auth_failure)
{
    struct sl_handshake h;
    sl_handshake_init(&h, SL_HANDSHAKE_FEEDER, 1);
    sl_handshake_note(&h, AUTH, 400, 0);
    sl_handshake_note(&h, OK, 0, 0); /* a later success does not undo a verdict */
    ck_assert_int_eq(sl_handshake_failed(&h, 0), 1);
    ck_assert_int_eq(sl_handshake_verdict(&h), SL_HANDSHAKE_REFUSED);
    ck_assert_str_eq(feeder_text(&h),
                     "the CURVE handshake failed: the feeder refused this trainer's key (ZAP status 400): this "
                     "trainer's public key is not on the feeder's allow-list (add its NAME.pub to the feeder's "
                     "--curve-allow directory and send the feeder SIGHUP)");
    /* between workers a refusal means another key */
    sl_handshake_init(&h, SL_HANDSHAKE_PEERS, 1);
    sl_handshake_note(&h, AUTH, 400, 0);
    ck_assert_int_eq(sl_handshake_verdict(&h), SL_HANDSHAKE_REFUSED);
    ck_assert_str_eq(peers_text(&h), "ring: the CURVE handshake with rank 1 (tcp://127.0.0.1:5000) failed: the "
                                     "workers do not share one trainer key (--curve-key)");
}
END_TEST

START_TEST(test_never_completes)
{
    struct sl_handshake h;
    /* closed NODETAIL times: a verdict on the last one, counting on */
    sl_handshake_init(&h, SL_HANDSHAKE_FEEDER, 1);
    for (int i = 1; i < SL_HANDSHAKE_NODETAIL; i++) {
        sl_handshake_note(&h, NODETAIL, 0, 0);
        ck_assert_int_eq(sl_handshake_verdict(&h), SL_HANDSHAKE_NONE);
        ck_assert_int_eq(sl_handshake_failed(&h, UINT64_MAX), 0); /* FEEDER: no grace timer */
        ck_assert_uint_eq(sl_handshake_due(&h), 0);
    }
    sl_handshake_note(&h, NODETAIL, 0, 0);
    ck_assert_int_eq(sl_handshake_verdict(&h), SL_HANDSHAKE_CLOSED);
    sl_handshake_note(&h, NODETAIL, 0, 0);
    ck_assert_str_eq(feeder_text(&h), "the CURVE handshake failed (the feeder refused this trainer's key, or "
                                      "--curve-server-key is not this feeder's key, or the feeder does not use "
                                      "CURVE: the connection closed during the handshake 4 times)");
    h.curve = 0;
    ck_assert_str_eq(feeder_text(&h), "the connection closed during the ZeroMQ handshake 4 times: is a sluice feeder "
                                      "listening at that address, and does it use CURVE (then give --curve-key and "
                                      "--curve-server-key)?");
    /* PEERS: the same count, or one closing and no success within the grace */
    sl_handshake_init(&h, SL_HANDSHAKE_PEERS, 1);
    for (int i = 0; i < SL_HANDSHAKE_NODETAIL; i++)
        sl_handshake_note(&h, NODETAIL, 0, 100 * NS_MS);
    ck_assert_int_eq(sl_handshake_verdict(&h), SL_HANDSHAKE_CLOSED);
    sl_handshake_init(&h, SL_HANDSHAKE_PEERS, 1);
    sl_handshake_note(&h, NODETAIL, 0, 100 * NS_MS);
    ck_assert_uint_eq(sl_handshake_due(&h), (100 + SL_HANDSHAKE_GRACE_MS) * (uint64_t)NS_MS);
    ck_assert_int_eq(sl_handshake_failed(&h, (100 + SL_HANDSHAKE_GRACE_MS) * (uint64_t)NS_MS - 1), 0);
    ck_assert_int_eq(sl_handshake_failed(&h, (100 + SL_HANDSHAKE_GRACE_MS) * (uint64_t)NS_MS), 1);
    ck_assert_int_eq(sl_handshake_verdict(&h), SL_HANDSHAKE_CLOSED);
    ck_assert_uint_eq(sl_handshake_due(&h), 0); /* decided */
    ck_assert_str_eq(peers_text(&h), "ring: the CURVE handshake with rank 1 (tcp://127.0.0.1:5000) failed: the "
                                     "workers do not share one trainer key (--curve-key)");
    /* a closing noted at time 0 still starts the grace */
    sl_handshake_init(&h, SL_HANDSHAKE_PEERS, 0);
    sl_handshake_note(&h, NODETAIL, 0, 0);
    ck_assert_uint_ne(sl_handshake_due(&h), 0);
}
END_TEST

START_TEST(test_success)
{
    struct sl_handshake h;
    struct sl_error err = {0};
    /* PEERS: a success settles it; closings after it never count */
    sl_handshake_init(&h, SL_HANDSHAKE_PEERS, 1);
    sl_handshake_note(&h, NODETAIL, 0, 100 * NS_MS);
    sl_handshake_note(&h, OK, 0, 150 * NS_MS);
    ck_assert_uint_eq(sl_handshake_due(&h), 0);
    for (int i = 0; i < 10; i++)
        sl_handshake_note(&h, NODETAIL, 0, 200 * NS_MS);
    sl_handshake_note(&h, ZMQ_EVENT_DISCONNECTED, 7, 0); /* not a handshake's: ignored */
    ck_assert_int_eq(sl_handshake_failed(&h, UINT64_MAX), 0);
    ck_assert_int_eq(sl_handshake_verdict(&h), SL_HANDSHAKE_NONE);
    ck_assert_uint_eq(sl_handshake_due(&h), 0);
    /* FEEDER: a success starts the count again (a feeder may come back
     * with another key) */
    sl_handshake_init(&h, SL_HANDSHAKE_FEEDER, 1);
    sl_handshake_note(&h, NODETAIL, 0, 0);
    sl_handshake_note(&h, NODETAIL, 0, 0);
    sl_handshake_note(&h, OK, 0, 0);
    ck_assert_int_eq(sl_handshake_verdict(&h), SL_HANDSHAKE_NONE);
    ck_assert_int_eq(sl_handshake_feeder_error(&h, "a", "b", &err), 0);
    ck_assert_int_eq(err.code, 0);
    for (int i = 0; i < SL_HANDSHAKE_NODETAIL; i++)
        sl_handshake_note(&h, NODETAIL, 0, 0);
    ck_assert_int_eq(sl_handshake_verdict(&h), SL_HANDSHAKE_CLOSED);
    ck_assert_uint_eq(h.nodetail, SL_HANDSHAKE_NODETAIL);
}
END_TEST

/* ---- real sockets ---- */

struct bed {
    void *ctx, *server, *client, *mon;
    struct sl_zap *zap;
    struct sl_curve_allow *allow;
    char endpoint[256];
};

static void keypair(struct sl_curve_keys *k)
{
    ck_assert_int_eq(zmq_curve_keypair(k->public_z85, k->secret_z85), 0);
}

/* A ROUTER on loopback (a CURVE server with srv unless NULL, letting in
 * `allowed`) and a DEALER connecting to it (a CURVE client with cli unless
 * NULL), its monitor read by sl_handshake of `kind`. */
static void bed_open(struct bed *b, const struct sl_curve_keys *srv, const char *allowed,
                     const struct sl_curve_keys *cli, struct sl_handshake *h, enum sl_handshake_kind kind)
{
    struct sl_error err = {0};
    memset(b, 0, sizeof *b);
    b->ctx = zmq_ctx_new();
    b->server = sl_zsock_open(b->ctx, ZMQ_ROUTER, NULL, "server", &err);
    ck_assert_ptr_nonnull(b->server);
    if (srv != NULL) {
        ck_assert_int_eq(sl_curve_allow_load(&b->allow, NULL, &allowed, 1, &err), 0);
        ck_assert_int_eq(sl_zap_start(&b->zap, b->ctx, b->allow, "test", &err), 0);
        ck_assert_int_eq(sl_curve_server(b->server, srv, &err), 0);
    }
    ck_assert_int_eq(zmq_bind(b->server, "tcp://127.0.0.1:*"), 0);
    size_t len = sizeof b->endpoint;
    ck_assert_int_eq(zmq_getsockopt(b->server, ZMQ_LAST_ENDPOINT, b->endpoint, &len), 0);
    b->client = sl_zsock_open(b->ctx, ZMQ_DEALER, NULL, "client", &err);
    ck_assert_ptr_nonnull(b->client);
    b->mon = sl_zsock_monitor_open(b->ctx, b->client, "inproc://test-hs", SL_HANDSHAKE_EVENTS, "client", &err);
    ck_assert_msg(b->mon != NULL, "%s", err.msg);
    sl_handshake_init(h, kind, cli != NULL);
    if (cli != NULL)
        ck_assert_int_eq(sl_curve_client(b->client, cli, srv != NULL ? srv->public_z85 : cli->public_z85, &err), 0);
    ck_assert_int_eq(zmq_connect(b->client, b->endpoint), 0);
}

static void bed_close(struct bed *b)
{
    sl_zsock_monitor_close(b->client, b->mon);
    zmq_close(b->server);
    sl_zap_stop(b->zap);
    sl_curve_allow_free(b->allow);
    zmq_ctx_term(b->ctx);
}

/* Read the monitor until a verdict, a success (*ok), or ms pass. */
static void watch(struct bed *b, struct sl_handshake *h, int ms, int *ok)
{
    *ok = 0;
    for (int waited = 0; waited < ms && sl_handshake_verdict(h) == SL_HANDSHAKE_NONE && !*ok; waited += 20) {
        zmq_pollitem_t it = {.socket = b->mon, .events = ZMQ_POLLIN};
        if (zmq_poll(&it, 1, 20) <= 0)
            continue;
        uint16_t ev;
        uint32_t value;
        while (sl_zsock_monitor_event(b->mon, &ev, &value)) {
            *ok |= ev == ZMQ_EVENT_HANDSHAKE_SUCCEEDED;
            sl_handshake_note(h, ev, value, 1);
        }
    }
}

START_TEST(test_real_success_and_refusal)
{
    struct sl_curve_keys srv, good, bad;
    keypair(&srv);
    keypair(&good);
    keypair(&bad);
    struct bed b;
    struct sl_handshake h;
    int ok;
    /* the allowed key: a success and no verdict */
    bed_open(&b, &srv, good.public_z85, &good, &h, SL_HANDSHAKE_FEEDER);
    watch(&b, &h, 5000, &ok);
    ck_assert_int_eq(ok, 1);
    ck_assert_int_eq(sl_handshake_verdict(&h), SL_HANDSHAKE_NONE);
    uint16_t ev;
    uint32_t value;
    ck_assert_int_eq(sl_zsock_monitor_event(b.mon, &ev, &value), 0); /* none waiting */
    ck_assert_int_eq(ev, 0);
    bed_close(&b);
    /* a key the ZAP handler refuses: REFUSED, status 400 */
    bed_open(&b, &srv, good.public_z85, &bad, &h, SL_HANDSHAKE_FEEDER);
    watch(&b, &h, 5000, &ok);
    ck_assert_int_eq(ok, 0);
    ck_assert_int_eq(sl_handshake_verdict(&h), SL_HANDSHAKE_REFUSED);
    ck_assert_str_eq(feeder_text(&h),
                     "the CURVE handshake failed: the feeder refused this trainer's key (ZAP status 400): this "
                     "trainer's public key is not on the feeder's allow-list (add its NAME.pub to the feeder's "
                     "--curve-allow directory and send the feeder SIGHUP)");
    bed_close(&b);
}
END_TEST

START_TEST(test_real_mismatch)
{
    struct sl_curve_keys cli;
    keypair(&cli);
    struct bed b;
    struct sl_handshake h;
    int ok;
    /* a CURVE client of a server without CURVE: a mismatch (or, when the
     * server saw it first and hung up, closings), never a success */
    bed_open(&b, NULL, NULL, &cli, &h, SL_HANDSHAKE_PEERS);
    watch(&b, &h, 5000, &ok);
    ck_assert_int_eq(ok, 0);
    enum sl_handshake_verdict v = sl_handshake_verdict(&h);
    if (v == SL_HANDSHAKE_NONE) /* closings still within the grace */
        ck_assert_int_eq(sl_handshake_failed(&h, UINT64_MAX), 1);
    v = sl_handshake_verdict(&h);
    ck_assert_msg(v == SL_HANDSHAKE_MISMATCH || v == SL_HANDSHAKE_CLOSED, "verdict %d", (int)v);
    bed_close(&b);
}
END_TEST

Suite *sl_test_suite(void)
{
    Suite *s = suite_create("sl_handshake");
    TCase *tc = tcase_create("rules");
    tcase_add_test(tc, test_protocol_failure);
    tcase_add_test(tc, test_auth_failure);
    tcase_add_test(tc, test_never_completes);
    tcase_add_test(tc, test_success);
    suite_add_tcase(s, tc);
    TCase *real = tcase_create("sockets");
    tcase_set_timeout(real, 30);
    tcase_add_test(real, test_real_success_and_refusal);
    tcase_add_test(real, test_real_mismatch);
    suite_add_tcase(s, real);
    return s;
}
