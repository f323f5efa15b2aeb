/* train_ring against a scripted fake peer: rank 0 is a real ring, every
 * other rank is played by the test through two real ZeroMQ sockets speaking
 * the ring's framing ("SLR1", docs in train_ring.c), encoded here byte by
 * byte so that the test does not share the code it checks. The fake's
 * messages are queued before the ring's call reads them, so each case is
 * single-threaded and deterministic.
 *
 * What the fake sends: a correct call (exact sums; the ring's own messages
 * checked field by field), stale DATA (an earlier call's seq), DATA from a
 * later call or for another step, chunk or length, ABORTs naming a rank one
 * past the end or a huge one (as culprit and as reporter), valid ABORTs (the
 * ring's error names the culprit; forwarded downstream with the reporter
 * kept), truncated and surplus frames, a wrong magic, version, type or
 * sender, and a frame over max_message_bytes. Every case asserts the exact
 * code and message, that the ring is broken afterwards (the next call fails
 * the same way at once) and what it told its successor (an ABORT naming
 * the fake with "protocol error"). ASan runs check that nothing is read out
 * of bounds (an ABORT's culprit indexes the endpoint array). */
#include <stdio.h>
#include <string.h>
#include <zmq.h>

#include "sl_clock.h"
#include "sl_test.h"
#include "train_ring.h"

enum { T_JOIN = 1, T_DATA = 2, T_ABORT = 3, T_HEARTBEAT = 4 };
enum { WHY_JOIN = 1, WHY_SILENT = 2, WHY_GONE = 3, WHY_PROTO = 4, WHY_SEND = 5 };
#define HDR 40
#define MAXP 4

struct fhdr {
    uint32_t type, sender, step;
    uint64_t seq;
    uint32_t chunk, detail;
    uint64_t bytes;
};

/* The real rank 0 and the fake ranks 1..P-1: the fake sends as rank P-1
 * (rank 0's predecessor) and reads what rank 0 sends to rank 1. */
struct fake {
    int size;
    char ep[MAXP][256];
    const char *eps[MAXP];
    void *ctx, *push, *pull;
    struct train_ring *ring;
};

static void le(unsigned char *p, uint64_t v, int n)
{
    for (int i = 0; i < n; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static uint64_t rd(const unsigned char *p, int n)
{
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

static void encode(unsigned char *p, const struct fhdr *h)
{
    memcpy(p, "SLR1", 4);
    le(p + 4, 1, 2);
    le(p + 6, h->type, 2);
    le(p + 8, h->sender, 4);
    le(p + 12, h->step, 4);
    le(p + 16, h->seq, 8);
    le(p + 24, h->chunk, 4);
    le(p + 28, h->detail, 4);
    le(p + 32, h->bytes, 8);
}

/* Send frames as one message (each of lens[i] bytes). */
static void send_frames(struct fake *f, const void *const *frames, const size_t *lens, int n)
{
    for (int i = 0; i < n; i++)
        ck_assert_int_eq(zmq_send(f->push, frames[i], lens[i], i + 1 < n ? ZMQ_SNDMORE : 0), (int)lens[i]);
}

static void send_msg(struct fake *f, const struct fhdr *h, const void *payload, size_t len)
{
    unsigned char head[HDR];
    static const char none[1];
    encode(head, h);
    const void *frames[2] = {head, payload ? payload : none};
    size_t lens[2] = {HDR, len};
    send_frames(f, frames, lens, 2);
}

static void send_data(struct fake *f, uint64_t seq, uint32_t step, uint32_t chunk, const float *v, size_t n)
{
    struct fhdr h = {T_DATA, (uint32_t)f->size - 1, step, seq, chunk, 0, n * sizeof(float)};
    send_msg(f, &h, v, n * sizeof(float));
}

static void send_abort(struct fake *f, uint32_t culprit, uint32_t reporter, uint32_t why)
{
    struct fhdr h = {T_ABORT, (uint32_t)f->size - 1, reporter, 0, culprit, why, 0};
    send_msg(f, &h, NULL, 0);
}

/* The next message rank 0 sent its successor: its header, and its payload
 * copied into payload (up to cap bytes; *len its size). Fails the test when
 * nothing comes within 2 s. */
static void recv_msg(struct fake *f, struct fhdr *h, void *payload, size_t cap, size_t *len)
{
    zmq_pollitem_t it = {f->pull, 0, ZMQ_POLLIN, 0};
    ck_assert_int_eq(zmq_poll(&it, 1, 2000), 1);
    unsigned char head[HDR + 1];
    ck_assert_int_eq(zmq_recv(f->pull, head, sizeof head, 0), HDR);
    ck_assert_mem_eq(head, "SLR1\x01\x00", 6);
    *h = (struct fhdr){(uint32_t)rd(head + 6, 2), (uint32_t)rd(head + 8, 4),  (uint32_t)rd(head + 12, 4),
                       rd(head + 16, 8),          (uint32_t)rd(head + 24, 4), (uint32_t)rd(head + 28, 4),
                       rd(head + 32, 8)};
    int more = 0;
    size_t ml = sizeof more;
    ck_assert_int_eq(zmq_getsockopt(f->pull, ZMQ_RCVMORE, &more, &ml), 0);
    ck_assert_int_eq(more, 1);
    char scratch[1];
    int got = zmq_recv(f->pull, payload ? payload : scratch, payload ? cap : 0, 0);
    ck_assert_int_ge(got, 0);
    ck_assert_uint_eq((uint64_t)got, h->bytes);
    if (len)
        *len = (size_t)got;
    ck_assert_int_eq(zmq_getsockopt(f->pull, ZMQ_RCVMORE, &more, &ml), 0);
    ck_assert_int_eq(more, 0);
}

static void expect_hdr(const struct fhdr *h, uint32_t type, uint32_t sender, uint32_t step, uint64_t seq,
                       uint32_t chunk, uint32_t detail, uint64_t bytes)
{
    ck_assert_uint_eq(h->type, type);
    ck_assert_uint_eq(h->sender, sender);
    ck_assert_uint_eq(h->step, step);
    ck_assert_uint_eq(h->seq, seq);
    ck_assert_uint_eq(h->chunk, chunk);
    ck_assert_uint_eq(h->detail, detail);
    ck_assert_uint_eq(h->bytes, bytes);
}

/* The ring's ABORT to its successor: reported by `reporter` (rank 0 for an
 * error found there), naming `culprit`. */
static void expect_abort(struct fake *f, uint32_t culprit, uint32_t reporter, uint32_t why)
{
    struct fhdr h;
    recv_msg(f, &h, NULL, 0, NULL);
    expect_hdr(&h, T_ABORT, 0, reporter, 0, culprit, why, 0);
}

/* Rank 0 of a ring of `size`, joined with the fake playing the others. */
static void fake_open(struct fake *f, int size, int timeout_ms, uint64_t max_message_bytes)
{
    static int serial;
    memset(f, 0, sizeof *f);
    f->size = size;
    serial++;
    for (int i = 0; i < size; i++) {
        snprintf(f->ep[i], sizeof f->ep[i], "ipc://%s", sl_test_path(""));
        size_t n = strlen(f->ep[i]);
        snprintf(f->ep[i] + n, sizeof f->ep[i] - n, "ring%d-%d", serial, i);
        f->eps[i] = f->ep[i];
    }
    int zero = 0;
    f->ctx = zmq_ctx_new();
    f->pull = zmq_socket(f->ctx, ZMQ_PULL);
    f->push = zmq_socket(f->ctx, ZMQ_PUSH);
    ck_assert_ptr_nonnull(f->pull);
    ck_assert_ptr_nonnull(f->push);
    zmq_setsockopt(f->pull, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt(f->push, ZMQ_LINGER, &zero, sizeof zero);
    int ivl = 10; /* rank 0 binds only once the fake has queued its JOIN */
    zmq_setsockopt(f->push, ZMQ_RECONNECT_IVL, &ivl, sizeof ivl);
    ck_assert_int_eq(zmq_bind(f->pull, f->ep[1]), 0);
    ck_assert_int_eq(zmq_connect(f->push, f->ep[0]), 0);
    /* rendezvous: in round k rank 0 hears the JOIN of rank P-1-k, passed on
     * by its predecessor */
    for (int k = 0; k < size - 1; k++) {
        struct fhdr j = {T_JOIN, (uint32_t)size - 1, (uint32_t)k, 0, (uint32_t)(size - 1 - k), 0, 0};
        send_msg(f, &j, NULL, 0);
    }
    struct train_ring_opts o = {.rank = 0,
                                .size = size,
                                .endpoints = f->eps,
                                .timeout_ms = timeout_ms,
                                .connect_timeout_ms = 5000,
                                .max_message_bytes = max_message_bytes};
    struct sl_error err = {0};
    ck_assert_msg(train_ring_open(&f->ring, &o, &err) == 0, "open: %s", err.msg);
    /* rank 0's own JOIN, then the ones it passes on */
    for (int k = 0; k < size - 1; k++) {
        struct fhdr h;
        recv_msg(f, &h, NULL, 0, NULL);
        expect_hdr(&h, T_JOIN, 0, (uint32_t)k, 0, k == 0 ? 0 : (uint32_t)(size - k), 0, 0);
    }
}

static void fake_close(struct fake *f)
{
    train_ring_close(f->ring);
    zmq_close(f->push);
    zmq_close(f->pull);
    zmq_ctx_term(f->ctx);
}

/* The ring is broken with (code, msg): the next call fails the same way at
 * once, whatever it is given. */
static void expect_broken(struct fake *f, int code, const char *msg)
{
    struct sl_error err = {0};
    float x[4] = {0};
    uint64_t t0 = sl_clock_ns();
    ck_assert_int_eq(train_ring_all_reduce(f->ring, x, 4, TRAIN_RING_SUM, &err), code);
    ck_assert_str_eq(err.msg, msg);
    ck_assert_uint_lt(sl_clock_ns() - t0, 100000000u);
}

/* The call rank 0 makes in most cases: P = 2, n = 4, chunk 0 = [0, 2),
 * chunk 1 = [2, 4). Returns its code, err filled. */
static int call4(struct fake *f, float *buf, struct sl_error *err)
{
    return train_ring_all_reduce(f->ring, buf, 4, TRAIN_RING_SUM, err);
}

/* One correct call as rank 1 would make it, queued before rank 0 runs:
 * step 0 brings chunk 1 of rank 1 (rank 0 adds it), step 1 the finished
 * chunk 0. Rank 0's messages are checked field by field. */
static void good_call(struct fake *f, uint64_t seq)
{
    float x0[4] = {1, 2, 3, 4}, x1[4] = {10, 20, 30, 40};
    float sum0[2] = {x0[0] + x1[0], x0[1] + x1[1]};
    send_data(f, seq, 0, 1, x1 + 2, 2);
    send_data(f, seq, 1, 0, sum0, 2);
    struct sl_error err = {0};
    ck_assert_msg(call4(f, x0, &err) == 0, "call %llu: %s", (unsigned long long)seq, err.msg);
    float want[4] = {11, 22, 33, 44}, got[2];
    ck_assert_mem_eq(x0, want, sizeof want);
    struct fhdr h;
    size_t len;
    recv_msg(f, &h, got, sizeof got, &len);
    expect_hdr(&h, T_DATA, 0, 0, seq, 0, 0, 8);
    float c0[2] = {1, 2};
    ck_assert_mem_eq(got, c0, sizeof c0);
    recv_msg(f, &h, got, sizeof got, &len);
    expect_hdr(&h, T_DATA, 0, 1, seq, 1, 0, 8);
    ck_assert_mem_eq(got, want + 2, 2 * sizeof(float));
}

START_TEST(test_fake_peer_good_calls)
{
    struct fake f;
    fake_open(&f, 2, 2000, 0);
    good_call(&f, 1);
    good_call(&f, 2);
    good_call(&f, 3);
    fake_close(&f);
}
END_TEST

/* DATA that does not belong to the current call or step: each is refused
 * with exactly what was sent and what was expected, at the first message
 * (with the seq check gone, the stale one would be taken as this call's
 * step 0 and the call would time out waiting for step 1 instead). */
START_TEST(test_stale_and_out_of_sequence_data)
{
    static const struct {
        int good_calls; /* correct calls before the bad one */
        uint64_t seq;
        uint32_t step, chunk;
        size_t nfloats;
        const char *what;     /* "sent type ... bytes" */
        const char *expected; /* "(expected ...)" */
    } cases[] = {
        /* stale: call 1's DATA again during call 2 (e.g. a duplicate) */
        {1, 1, 0, 1, 2, "type 2 call 1 step 0 chunk 1 of 8 bytes", "DATA call 2 step 0 chunk 1 of 8 bytes"},
        /* stale by two calls */
        {2, 1, 0, 1, 2, "type 2 call 1 step 0 chunk 1 of 8 bytes", "DATA call 3 step 0 chunk 1 of 8 bytes"},
        /* from a call not made yet */
        {0, 2, 0, 1, 2, "type 2 call 2 step 0 chunk 1 of 8 bytes", "DATA call 1 step 0 chunk 1 of 8 bytes"},
        /* seq 0: no call has that number */
        {0, 0, 0, 1, 2, "type 2 call 0 step 0 chunk 1 of 8 bytes", "DATA call 1 step 0 chunk 1 of 8 bytes"},
        /* a huge seq */
        {0, UINT64_MAX, 0, 1, 2, "type 2 call 18446744073709551615 step 0 chunk 1 of 8 bytes",
         "DATA call 1 step 0 chunk 1 of 8 bytes"},
        /* the right call, a later step first */
        {0, 1, 1, 0, 2, "type 2 call 1 step 1 chunk 0 of 8 bytes", "DATA call 1 step 0 chunk 1 of 8 bytes"},
        /* a step past the last (2P-3 = 1) */
        {0, 1, 7, 1, 2, "type 2 call 1 step 7 chunk 1 of 8 bytes", "DATA call 1 step 0 chunk 1 of 8 bytes"},
        /* the wrong chunk, and one past the end */
        {0, 1, 0, 0, 2, "type 2 call 1 step 0 chunk 0 of 8 bytes", "DATA call 1 step 0 chunk 1 of 8 bytes"},
        {0, 1, 0, 2, 2, "type 2 call 1 step 0 chunk 2 of 8 bytes", "DATA call 1 step 0 chunk 1 of 8 bytes"},
        /* an oversized chunk (header and payload agree), and a short one */
        {0, 1, 0, 1, 3, "type 2 call 1 step 0 chunk 1 of 12 bytes", "DATA call 1 step 0 chunk 1 of 8 bytes"},
        {0, 1, 0, 1, 1, "type 2 call 1 step 0 chunk 1 of 4 bytes", "DATA call 1 step 0 chunk 1 of 8 bytes"},
        {0, 1, 0, 1, 0, "type 2 call 1 step 0 chunk 1 of 0 bytes", "DATA call 1 step 0 chunk 1 of 8 bytes"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct fake f;
        fake_open(&f, 2, 400, 0);
        for (int k = 0; k < cases[i].good_calls; k++)
            good_call(&f, (uint64_t)k + 1);
        float v[3] = {7, 8, 9};
        send_data(&f, cases[i].seq, cases[i].step, cases[i].chunk, v, cases[i].nfloats);
        float buf[4] = {1, 2, 3, 4};
        struct sl_error err = {0};
        uint64_t t0 = sl_clock_ns();
        int rc = call4(&f, buf, &err);
        char want[512];
        snprintf(want, sizeof want, "ring: rank 1 (%s) sent %s (expected %s)", f.ep[1], cases[i].what,
                 cases[i].expected);
        ck_assert_msg(rc == SL_EPROTO, "case %zu: rc %d (%s)", i, rc, err.msg);
        ck_assert_str_eq(err.msg, want);
        /* refused as it came, not after a timeout */
        ck_assert_uint_lt(sl_clock_ns() - t0, 200000000u);
        /* rank 0 sent its step-0 chunk, then blamed rank 1 downstream */
        struct fhdr h;
        recv_msg(&f, &h, NULL, 0, NULL);
        expect_hdr(&h, T_DATA, 0, 0, (uint64_t)cases[i].good_calls + 1, 0, 0, 8);
        expect_abort(&f, 1, 0, WHY_PROTO);
        expect_broken(&f, SL_EPROTO, want);
        fake_close(&f);
    }
}
END_TEST

/* An ABORT whose culprit or reporter is not a rank of the ring is itself a
 * protocol error of the sender; nothing indexes the endpoint table with it.
 * P = 3 so that "one past the end" (3) differs from the fake's own ranks. */
START_TEST(test_abort_naming_no_rank)
{
    static const struct {
        uint32_t culprit, reporter, why;
    } cases[] = {
        {3, 2, WHY_SILENT},                                                        /* culprit one past the end */
        {3, 2, WHY_PROTO},          {4, 1, WHY_GONE}, {UINT32_MAX, 2, WHY_SILENT}, /* (int)-1 if cast first */
        {0x80000000u, 2, WHY_JOIN},                                                /* INT_MIN if cast first */
        {1, 3, WHY_SILENT},                                                        /* reporter one past the end */
        {1, UINT32_MAX, WHY_PROTO}, {3, 3, WHY_SEND},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct fake f;
        fake_open(&f, 3, 400, 0);
        send_abort(&f, cases[i].culprit, cases[i].reporter, cases[i].why);
        float buf[4] = {0};
        struct sl_error err = {0};
        int rc = train_ring_all_reduce(f.ring, buf, 4, TRAIN_RING_SUM, &err);
        char want[512];
        snprintf(want, sizeof want, "ring: rank 2 (%s) sent an ABORT naming rank %u reported by rank %u (ring size 3)",
                 f.ep[2], cases[i].culprit, cases[i].reporter);
        ck_assert_msg(rc == SL_EPROTO, "case %zu: rc %d (%s)", i, rc, err.msg);
        ck_assert_str_eq(err.msg, want);
        struct fhdr h;
        recv_msg(&f, &h, NULL, 0, NULL);
        expect_hdr(&h, T_DATA, 0, 0, 1, 0, 0, 4); /* chunk 0 of n = 4, P = 3: one float */
        expect_abort(&f, 2, 0, WHY_PROTO);
        expect_broken(&f, SL_EPROTO, want);
        fake_close(&f);
    }
}
END_TEST

/* A well-formed ABORT: the error names the culprit (its endpoint) and the
 * reporter with the reason's code, and goes on downstream unchanged unless
 * the successor is the reporter. */
START_TEST(test_abort_reported_and_forwarded)
{
    static const struct {
        uint32_t culprit, reporter, why;
        int code;
        const char *fmt; /* %s: the culprit's endpoint (and the reporter's for PROTO) */
        int forwarded;
    } cases[] = {
        {2, 2, WHY_SILENT, SL_ETIMEOUT, "ring: no data from rank 2 (%s) for 0.4 s (reported by rank 2)", 1},
        {1, 2, WHY_GONE, SL_ECLOSED, "ring: no data from rank 1 (%s): connection closed (reported by rank 2)", 1},
        {0, 2, WHY_JOIN, SL_ETIMEOUT, "ring: rank 0 (%s) did not join within 5.0 s (reported by rank 2)", 1},
        {2, 1, WHY_SEND, SL_ETIMEOUT, "ring: rank 2 (%s) accepted no data for 0.4 s (reported by rank 1)", 0},
        {2, 2, 99, SL_EPROTO, "ring: rank 2 (%s) reported a protocol error in what rank 2 (%s) sent", 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct fake f;
        fake_open(&f, 3, 400, 0);
        send_abort(&f, cases[i].culprit, cases[i].reporter, cases[i].why);
        float buf[4] = {0};
        struct sl_error err = {0};
        int rc = train_ring_all_reduce(f.ring, buf, 4, TRAIN_RING_SUM, &err);
        char want[512];
        const char *cep = f.ep[cases[i].culprit];
        if (cases[i].why == 99)
            snprintf(want, sizeof want, cases[i].fmt, f.ep[cases[i].reporter], cep);
        else
            snprintf(want, sizeof want, cases[i].fmt, cep);
        ck_assert_msg(rc == cases[i].code, "case %zu: rc %d (%s)", i, rc, err.msg);
        ck_assert_str_eq(err.msg, want);
        struct fhdr h;
        recv_msg(&f, &h, NULL, 0, NULL);
        expect_hdr(&h, T_DATA, 0, 0, 1, 0, 0, 4);
        if (cases[i].forwarded) {
            expect_abort(&f, cases[i].culprit, cases[i].reporter, cases[i].why);
        } else {
            zmq_pollitem_t it = {f.pull, 0, ZMQ_POLLIN, 0};
            ck_assert_int_eq(zmq_poll(&it, 1, 100), 0);
        }
        expect_broken(&f, cases[i].code, want);
        fake_close(&f);
    }
}
END_TEST

/* Frames that are not a ring message: "malformed message" naming what. */
START_TEST(test_malformed_frames)
{
    enum { SHORT_HDR, LONG_HDR, HDR_ONLY, MAGIC, VERSION, TYPE0, TYPE5, THREE, LEN_DIFF, EMPTY_HDR };
    static const struct {
        int kind;
        const char *bad;
    } cases[] = {
        {SHORT_HDR, "bad header length"},
        {LONG_HDR, "bad header length"},
        {EMPTY_HDR, "bad header length"},
        {HDR_ONLY, "header without payload"},
        {MAGIC, "bad magic"},
        {VERSION, "unsupported version"},
        {TYPE0, "unknown message type"},
        {TYPE5, "unknown message type"},
        {THREE, "more than two frames"},
        {LEN_DIFF, "payload length differs from the header"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct fake f;
        fake_open(&f, 2, 400, 0);
        unsigned char head[HDR + 1] = {0};
        float v[3] = {1, 2, 3};
        struct fhdr h = {T_DATA, 1, 0, 1, 1, 0, 8};
        encode(head, &h);
        const void *frames[3] = {head, v, v};
        size_t lens[3] = {HDR, 8, 8};
        int n = 2;
        switch (cases[i].kind) {
        case SHORT_HDR: lens[0] = HDR - 1; break;
        case LONG_HDR: lens[0] = HDR + 1; break;
        case EMPTY_HDR: lens[0] = 0; break;
        case HDR_ONLY: n = 1; break;
        case MAGIC: head[3] = '2'; break;
        case VERSION: le(head + 4, 2, 2); break;
        case TYPE0: le(head + 6, 0, 2); break;
        case TYPE5: le(head + 6, 5, 2); break;
        case THREE: n = 3; break;
        case LEN_DIFF: lens[1] = 12; break;
        }
        send_frames(&f, frames, lens, n);
        float buf[4] = {0};
        struct sl_error err = {0};
        int rc = call4(&f, buf, &err);
        char want[512];
        snprintf(want, sizeof want, "ring: malformed message from rank 1 (%s): %s", f.ep[1], cases[i].bad);
        ck_assert_msg(rc == SL_EPROTO, "case %zu: rc %d (%s)", i, rc, err.msg);
        ck_assert_str_eq(err.msg, want);
        struct fhdr rh;
        recv_msg(&f, &rh, NULL, 0, NULL);
        expect_hdr(&rh, T_DATA, 0, 0, 1, 0, 0, 8);
        expect_abort(&f, 1, 0, WHY_PROTO);
        expect_broken(&f, SL_EPROTO, want);
        fake_close(&f);
    }
}
END_TEST

/* A message that says it comes from a rank other than the predecessor, and
 * a JOIN where DATA is due. */
START_TEST(test_wrong_sender_and_type)
{
    for (int k = 0; k < 3; k++) {
        struct fake f;
        fake_open(&f, 2, 400, 0);
        char want[512];
        if (k == 0) {
            struct fhdr h = {T_DATA, 0, 0, 1, 1, 0, 8}; /* rank 0 itself */
            float v[2] = {1, 2};
            send_msg(&f, &h, v, 8);
            snprintf(want, sizeof want, "ring: message on rank 0's endpoint (%s) from rank 0 (expected rank 1)",
                     f.ep[0]);
        } else if (k == 1) {
            struct fhdr h = {T_DATA, 7, 0, 1, 1, 0, 8}; /* no such rank */
            float v[2] = {1, 2};
            send_msg(&f, &h, v, 8);
            snprintf(want, sizeof want, "ring: message on rank 0's endpoint (%s) from rank 7 (expected rank 1)",
                     f.ep[0]);
        } else {
            struct fhdr h = {T_JOIN, 1, 0, 1, 1, 0, 0};
            send_msg(&f, &h, NULL, 0);
            snprintf(want, sizeof want,
                     "ring: rank 1 (%s) sent type 1 call 1 step 0 chunk 1 of 0 bytes (expected DATA call 1 step 0 "
                     "chunk 1 of 8 bytes)",
                     f.ep[1]);
        }
        float buf[4] = {0};
        struct sl_error err = {0};
        ck_assert_int_eq(call4(&f, buf, &err), SL_EPROTO);
        ck_assert_str_eq(err.msg, want);
        struct fhdr rh;
        recv_msg(&f, &rh, NULL, 0, NULL);
        expect_hdr(&rh, T_DATA, 0, 0, 1, 0, 0, 8);
        expect_abort(&f, 1, 0, WHY_PROTO);
        fake_close(&f);
    }
}
END_TEST

/* A frame over max_message_bytes never reaches the ring: ZeroMQ drops the
 * connection, and the ring says the predecessor's connection closed (at
 * once, not after the timeout). A call whose chunks would exceed the limit
 * is refused before anything is sent. */
START_TEST(test_oversized_frame)
{
    struct fake f;
    fake_open(&f, 2, 3000, 64);
    struct sl_error err = {0};
    float big[40] = {0};
    ck_assert_int_eq(train_ring_all_reduce(f.ring, big, 40, TRAIN_RING_SUM, &err), SL_EINVAL);
    ck_assert_str_eq(err.msg, "ring: 40 floats make chunks over the 64-byte message limit");
    /* 30 floats: chunks of 15 floats = 60 bytes, within the limit */
    float payload[64] = {0};
    send_data(&f, 1, 0, 1, payload, 64); /* 256 bytes */
    uint64_t t0 = sl_clock_ns();
    int rc = train_ring_all_reduce(f.ring, big, 30, TRAIN_RING_SUM, &err);
    char want[512];
    snprintf(want, sizeof want, "ring: no data from rank 1 (%s): connection closed", f.ep[1]);
    ck_assert_msg(rc == SL_ECLOSED, "rc %d (%s)", rc, err.msg);
    ck_assert_str_eq(err.msg, want);
    ck_assert_uint_lt(sl_clock_ns() - t0, 2000000000u);
    struct fhdr h;
    recv_msg(&f, &h, NULL, 0, NULL);
    expect_hdr(&h, T_DATA, 0, 0, 1, 0, 0, 60);
    expect_abort(&f, 1, 0, WHY_GONE);
    fake_close(&f);
}
END_TEST

Suite *sl_test_suite(void)
{
    Suite *s = suite_create("train_ring");
    TCase *tc = tcase_create("fake_peer");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_fake_peer_good_calls);
    tcase_add_test(tc, test_stale_and_out_of_sequence_data);
    tcase_add_test(tc, test_abort_naming_no_rank);
    tcase_add_test(tc, test_abort_reported_and_forwarded);
    tcase_add_test(tc, test_malformed_frames);
    tcase_add_test(tc, test_wrong_sender_and_type);
    tcase_add_test(tc, test_oversized_frame);
    suite_add_tcase(s, tc);
    return s;
}
