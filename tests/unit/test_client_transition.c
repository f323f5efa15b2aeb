/* The client's transition option (a mid-epoch change of the cluster shape,
 * docs/semantics.md 5.2): every HELLO it builds carries it (the trailing
 * fields after `feeders`, with a join's modulus too), a client without one
 * sends neither the flag nor the fields, each hostile field is refused by
 * client_open with its message before anything is connected, and the
 * first HELLO a real socket receives says it. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <zmq.h>

#include "client_int.h"
#include "sl_buf.h"
#include "sl_test.h"

/* A HELLO built as the client builds every one (client__set_trailing),
 * encoded and decoded back. */
static void hello_of(struct client *c, struct sl_wire_msg *m)
{
    struct sl_wire_hello h = {.worker = 1, .workers = 3, .replicas = 1, .credits = 4, .job = "j", .job_len = 1};
    client__set_trailing(c, &h);
    struct sl_buf b;
    struct sl_error err = {0};
    sl_buf_init(&b, SL_WIRE_MAX_HEADER);
    ck_assert_int_eq(sl_wire_encode_hello(&h, &b), 0);
    ck_assert_msg(sl_wire_decode(b.data, b.len, m, &err) == 0, "decode: %s", err.msg);
    ck_assert_int_eq(m->type, SL_WIRE_HELLO);
    sl_buf_free(&b);
}

START_TEST(test_every_hello_carries_the_transition)
{
    struct client c;
    struct sl_wire_msg m;
    memset(&c, 0, sizeof c);
    c.o.nfeeders = c.nfeeders0 = 2;
    /* none: neither the flag nor the fields */
    hello_of(&c, &m);
    ck_assert_uint_eq(m.hello.flags & (SL_WIRE_HELLO_TRANSITION | SL_WIRE_HELLO_FEEDERS), 0);
    ck_assert_uint_eq(m.hello.from_workers, 0);
    ck_assert_uint_eq(m.hello.from_step, 0);
    /* 2 x 1 until step 3 of epoch 1 */
    c.o.transition = (struct client_transition){2, 1, 1, 3};
    hello_of(&c, &m);
    ck_assert_uint_eq(m.hello.flags & (SL_WIRE_HELLO_TRANSITION | SL_WIRE_HELLO_FEEDERS), SL_WIRE_HELLO_TRANSITION);
    ck_assert_uint_eq(m.hello.from_workers, 2);
    ck_assert_uint_eq(m.hello.from_replicas, 1);
    ck_assert_uint_eq(m.hello.from_epoch, 1);
    ck_assert_uint_eq(m.hello.from_step, 3);
    /* after a join: the modulus and the transition, both */
    c.o.nfeeders = 3;
    c.o.transition = (struct client_transition){65536, 1024, (uint64_t)1 << 48, (uint64_t)1 << 48};
    hello_of(&c, &m);
    ck_assert_uint_eq(m.hello.flags & (SL_WIRE_HELLO_TRANSITION | SL_WIRE_HELLO_FEEDERS),
                      SL_WIRE_HELLO_TRANSITION | SL_WIRE_HELLO_FEEDERS);
    ck_assert_uint_eq(m.hello.feeders, 3);
    ck_assert_uint_eq(m.hello.from_workers, 65536);
    ck_assert_uint_eq(m.hello.from_replicas, 1024);
    ck_assert_uint_eq(m.hello.from_epoch, (uint64_t)1 << 48);
    ck_assert_uint_eq(m.hello.from_step, (uint64_t)1 << 48);
}
END_TEST

static void expect_refused(const struct client_opts *o, const char *want)
{
    struct client *c = (struct client *)1;
    struct sl_error err = {0};
    ck_assert_int_eq(client_open(&c, o, &err), SL_EINVAL);
    ck_assert_ptr_null(c);
    ck_assert_str_eq(err.msg, want);
}

START_TEST(test_hostile_transitions_refused)
{
    const char *eps[1] = {"ipc:///nonexistent-dir/f.sock"};
    struct client_opts o = {.feeders = eps, .nfeeders = 1, .job = "j", .workers = 3, .replicas = 1};
    const struct {
        struct client_transition x;
        const char *want;
    } cases[] = {
        {{0, 1, 1, 3}, "transition: from_workers 0 is out of range (1 to 65536)"},
        {{65537, 1, 1, 3}, "transition: from_workers 65537 is out of range (1 to 65536)"},
        {{2, 0, 1, 3}, "transition: from_replicas 0 is out of range (1 to 1024)"},
        {{2, 1025, 1, 3}, "transition: from_replicas 1025 is out of range (1 to 1024)"},
        {{2, UINT32_MAX, 1, 3}, "transition: from_replicas 4294967295 is out of range (1 to 1024)"},
        {{2, 1, ((uint64_t)1 << 48) + 1, 3}, "transition: from_epoch 281474976710657 is out of range (at most 2^48)"},
        {{2, 1, 1, 0},
         "transition: from_step 0 is out of range (1 to 2^48; a change at step 0 is an epoch's start: "
         "resume_epoch with reshape)"},
        {{2, 1, 1, UINT64_MAX},
         "transition: from_step 18446744073709551615 is out of range (1 to 2^48; a change at step 0 is an "
         "epoch's start: resume_epoch with reshape)"},
        {{0, 0, 1, 0}, "transition: from_workers 0 is out of range (1 to 65536)"}, /* partial: not "none" */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        o.transition = cases[i].x;
        expect_refused(&o, cases[i].want);
    }
    o.transition = (struct client_transition){2, 1, 1, 3};
    o.resume_epoch = 2;
    expect_refused(&o, "resume at epoch 2 with a transition (from 2 x 1 at step 3 of epoch 1): give one or the other "
                       "(with a transition, resume_seq counts from the change)");
    /* resume_seq stays a step's first piece, in the transition's numbering */
    o.resume_epoch = 0;
    o.replicas = 2;
    o.resume_seq = 3;
    expect_refused(&o, "resume at piece 3: not the first piece of a step (a multiple of 2 replicas), or past 2^48");
}
END_TEST

/* A feeder that answers the first HELLO with REFUSE, after noting it. */
struct fake {
    void *ctx, *router;
    struct sl_wire_hello got;
    int ok;
};

static void *fake_main(void *arg)
{
    struct fake *f = arg;
    zmq_pollitem_t it = {f->router, 0, ZMQ_POLLIN, 0};
    zmq_msg_t id, hdr;
    zmq_msg_init(&id);
    zmq_msg_init(&hdr);
    static struct sl_wire_msg m;
    struct sl_error err = {0};
    if (zmq_poll(&it, 1, 5000) == 1 && zmq_msg_recv(&id, f->router, 0) >= 0 && zmq_msg_more(&id) &&
        zmq_msg_recv(&hdr, f->router, 0) >= 0 &&
        sl_wire_decode(zmq_msg_data(&hdr), zmq_msg_size(&hdr), &m, &err) == 0 && m.type == SL_WIRE_HELLO) {
        f->got = m.hello;
        f->got.job = NULL;
        f->ok = 1;
        struct sl_buf b;
        sl_buf_init(&b, 256);
        struct sl_wire_refuse r = {.reason = "not today", .reason_len = 9};
        if (sl_wire_encode_refuse(&r, &b) == 0 && zmq_msg_send(&id, f->router, ZMQ_SNDMORE) >= 0)
            (void)zmq_send(f->router, b.data, b.len, 0);
        sl_buf_free(&b);
    }
    zmq_msg_close(&id);
    zmq_msg_close(&hdr);
    return NULL;
}

START_TEST(test_first_hello_on_the_wire)
{
    struct fake f = {0};
    char ep[128];
    snprintf(ep, sizeof ep, "ipc:///tmp/sl-client-transition-%d.sock", (int)getpid());
    int zero = 0;
    f.ctx = zmq_ctx_new();
    f.router = zmq_socket(f.ctx, ZMQ_ROUTER);
    zmq_setsockopt(f.router, ZMQ_LINGER, &zero, sizeof zero);
    ck_assert_int_eq(zmq_bind(f.router, ep), 0);
    pthread_t tid;
    ck_assert_int_eq(pthread_create(&tid, NULL, fake_main, &f), 0);
    const char *eps[1] = {ep};
    struct client_opts o = {.feeders = eps,
                            .nfeeders = 1,
                            .job = "jt",
                            .worker = 2,
                            .workers = 3,
                            .replicas = 2,
                            .resume_seq = 6,
                            .reshape = 1,
                            .heartbeat_ms = 100,
                            .connect_timeout_ms = 5000,
                            .transition = {2, 1, 4, 5}};
    struct client *c = NULL;
    struct sl_error err = {0};
    ck_assert_int_ne(client_open(&c, &o, &err), 0);
    ck_assert_msg(strstr(err.msg, "not today") != NULL, "%s", err.msg);
    pthread_join(tid, NULL);
    ck_assert_int_eq(f.ok, 1);
    ck_assert_uint_eq(f.got.flags & (SL_WIRE_HELLO_TRANSITION | SL_WIRE_HELLO_RESHAPE | SL_WIRE_HELLO_EPOCH),
                      SL_WIRE_HELLO_TRANSITION | SL_WIRE_HELLO_RESHAPE);
    ck_assert_uint_eq(f.got.worker, 2);
    ck_assert_uint_eq(f.got.workers, 3);
    ck_assert_uint_eq(f.got.replicas, 2);
    ck_assert_uint_eq(f.got.resume_seq, 6); /* counted from the change */
    ck_assert_uint_eq(f.got.resume_epoch, 0);
    ck_assert_uint_eq(f.got.from_workers, 2);
    ck_assert_uint_eq(f.got.from_replicas, 1);
    ck_assert_uint_eq(f.got.from_epoch, 4);
    ck_assert_uint_eq(f.got.from_step, 5);
    zmq_close(f.router);
    zmq_ctx_term(f.ctx);
    unlink(ep + 6);
}
END_TEST

Suite *sl_test_suite(void)
{
    Suite *s = suite_create("client_transition");
    TCase *tc = tcase_create("transition");
    tcase_set_timeout(tc, 20);
    tcase_add_test(tc, test_every_hello_carries_the_transition);
    tcase_add_test(tc, test_hostile_transitions_refused);
    tcase_add_test(tc, test_first_hello_on_the_wire);
    suite_add_tcase(s, tc);
    return s;
}
